//! Pure: the fabric manager's process, its log and each GPU's fabric
//! registration to findings.

use super::log::LogErrors;
use super::NAME;
use crate::checks::gpu::fabric::FabricInfo;
use crate::checks::gpu::session::{self, GpuData};
use crate::finding::Finding;
use lemonade_config::{Action, FabricSettings, Severity};
use lemonade_spool::domain::NvlinkDomain;

/// The code of a fabric that cannot carry NVLink traffic.
pub const FABRIC_DOWN: &str = "FABRIC_DOWN";
/// The code of new errors in the fabric manager's log.
pub const FABRIC_MANAGER_ERROR: &str = "FABRIC_MANAGER_ERROR";
/// The code of a health-mask bit that NVIDIA calls a fault (degraded
/// bandwidth, unhealthy route, incorrect configuration).
pub const FABRIC_UNHEALTHY: &str = "FABRIC_UNHEALTHY";
/// The code of a recovery the fabric is going through (route or
/// access-timeout recovery): traffic still flows, worth a look.
pub const FABRIC_RECOVERY: &str = "FABRIC_RECOVERY";
/// The entity of the findings about the fabric manager itself.
const MANAGER: &str = "fabric-manager";

/// The fabric manager process and its log.
pub fn manager(running: bool, log: &LogErrors, s: &FabricSettings) -> Vec<Finding> {
    let mut out = Vec::new();
    if !running {
        out.push(
            Finding::new(NAME, MANAGER, FABRIC_DOWN, s.down_severity)
                .expected(format!("{} running", s.service))
                .actual("not running")
                .action(Action::Investigate)
                .message(format!(
                    "the fabric manager ({}) is not running: the GPUs cannot use NVLink",
                    s.service
                )),
        );
    }
    if log.count > 0 {
        let last = log.last.as_deref().unwrap_or_default();
        out.push(
            Finding::new(NAME, MANAGER, FABRIC_MANAGER_ERROR, s.log_error_severity)
                .expected("no errors")
                .actual(format!("{} new error lines", log.count))
                .action(Action::Investigate)
                .message(format!(
                    "{} new error lines in {}; the last: {last}",
                    log.count, s.log_path
                )),
        );
    }
    if out.is_empty() {
        out.push(Finding::ok(NAME, MANAGER));
    }
    out
}

/// Each GPU's fabric registration: a GPU whose registration is not complete
/// cannot reach its peers over NVLink. `None`: the driver does not report it.
pub fn gpus(gpus: &[GpuData<Option<FabricInfo>>], s: &FabricSettings) -> Vec<Finding> {
    let mut out = Vec::new();
    for (id, info) in session::split(NAME, gpus, &mut out) {
        let Some(f) = info else {
            out.push(id.ok(NAME));
            continue;
        };
        if !f.is_up() {
            out.push(
                id.finding(NAME, FABRIC_DOWN, s.down_severity)
                    .expected("fabric state completed, status SUCCESS")
                    .actual(format!("{}, {}", f.state.as_str(), f.status_name()))
                    .action(Action::Investigate)
                    .message(format!(
                        "{}: fabric registration {} ({}; fabric info v{})",
                        id.entity(),
                        f.state.as_str(),
                        f.status_name(),
                        f.version
                    )),
            );
            continue;
        }
        let faults = health_faults(f.health_mask.unwrap_or(0));
        if faults.is_empty() {
            // The domain rides on the ok finding: the export sends it as
            // inventory, and lemon compares it across the rack.
            let ok = id.ok(NAME);
            out.push(match NvlinkDomain::from_raw(f.cluster_uuid, f.clique) {
                Some(domain) => ok.actual(domain.value()),
                None => ok,
            });
        }
        for fault in faults {
            let (code, severity) = if fault.drains {
                (FABRIC_UNHEALTHY, s.down_severity)
            } else {
                (FABRIC_RECOVERY, Severity::Warning)
            };
            out.push(
                id.finding(NAME, code, severity)
                    .expected("fabric health mask clear")
                    .actual(fault.name)
                    .action(Action::Investigate)
                    .message(format!(
                        "{}: fabric health {} (healthMask {:#x}, fabric info v{})",
                        id.entity(),
                        fault.name,
                        f.health_mask.unwrap_or(0),
                        f.version
                    )),
            );
        }
    }
    out
}

/// One fault the health mask reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthFault {
    pub name: &'static str,
    pub drains: bool,
}

// The fields of `healthMask`, from nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_*
// macros: shifts 0, 2, 4 and 6 with width 3, and the incorrect-configuration
// field at 8 with width 0xf (values 2-8 as in the R580 headers and NVIDIA's
// open kernel modules' NVLINK_INBAND_FABRIC_HEALTH_MASK_*; checked
// 2026-11-28). Each two-bit field reads 0 NOT_SUPPORTED, 1 TRUE, 2 FALSE.
/// `_SHIFT_DEGRADED_BW`: the GPU's NVLink bandwidth is degraded.
const SHIFT_DEGRADED_BW: u32 = 0;
/// `_SHIFT_ROUTE_RECOVERY`: a route recovery is in progress.
const SHIFT_ROUTE_RECOVERY: u32 = 2;
/// `_SHIFT_ROUTE_UNHEALTHY`: a route is unhealthy.
const SHIFT_ROUTE_UNHEALTHY: u32 = 4;
/// `_SHIFT_ACCESS_TIMEOUT_RECOVERY`: recovering from an access timeout.
const SHIFT_ACCESS_TIMEOUT_RECOVERY: u32 = 6;
/// `_SHIFT_INCORRECT_CONFIGURATION`, a four-bit field (`_WIDTH_` 0xf).
const SHIFT_INCORRECT_CONFIGURATION: u32 = 8;
/// `_TRUE` of a two-bit field.
const FIELD_TRUE: u32 = 1;

/// The faults of a health mask, with NVIDIA's meaning: degraded bandwidth,
/// an unhealthy route and a misconfiguration drain; recoveries warn.
pub fn health_faults(mask: u32) -> Vec<HealthFault> {
    let two = |shift: u32| (mask >> shift) & 0x3 == FIELD_TRUE;
    let mut out = Vec::new();
    let flags = [
        (SHIFT_DEGRADED_BW, "degraded bandwidth", true),
        (SHIFT_ROUTE_UNHEALTHY, "route unhealthy", true),
        (SHIFT_ROUTE_RECOVERY, "route recovery", false),
        (
            SHIFT_ACCESS_TIMEOUT_RECOVERY,
            "access-timeout recovery",
            false,
        ),
    ];
    for (shift, name, drains) in flags {
        if two(shift) {
            out.push(HealthFault { name, drains });
        }
    }
    // `_INCORRECT_CONFIGURATION_*`: 0 not supported, 1 none, then the causes.
    let config = match (mask >> SHIFT_INCORRECT_CONFIGURATION) & 0xf {
        0 | 1 => None,
        2 => Some("incorrect configuration: SysGUID"),
        3 => Some("incorrect configuration: chassis serial number"),
        4 => Some("incorrect configuration: no partition"),
        5 => Some("incorrect configuration: too few NVLinks"),
        6 => Some("incorrect configuration: incompatible GPU firmware"),
        7 => Some("incorrect configuration: invalid location"),
        8 => Some("incorrect configuration: GPU state invalid"),
        _ => Some("incorrect configuration"),
    };
    if let Some(name) = config {
        out.push(HealthFault { name, drains: true });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::gpu::fabric::FabricState;
    use crate::checks::gpu::session::GpuId;

    fn gpu(state: FabricState, status: u32, mask: u32) -> GpuData<Option<FabricInfo>> {
        GpuData {
            id: GpuId {
                index: 2,
                ..Default::default()
            },
            reading: Ok(Some(FabricInfo {
                state,
                status,
                clique: 1,
                version: 2,
                health_mask: Some(mask),
                cluster_uuid: [0; 16],
            })),
        }
    }

    #[test]
    fn a_gpu_whose_fabric_is_not_up_drains_with_fabric_down() {
        let s = FabricSettings::default();
        let f = &gpus(&[gpu(FabricState::NotStarted, 27, 0)], &s)[0];
        assert_eq!(
            (f.code.as_str(), f.severity, f.entity.as_str()),
            (FABRIC_DOWN, Severity::Drain, "gpu2")
        );
        assert_eq!(f.actual.as_deref(), Some("not started, NOT_READY"));
        assert!(gpus(&[gpu(FabricState::Completed, 0, 0)], &s)[0].is_ok());
    }

    #[test]
    fn a_healthy_gpu_in_a_multi_node_domain_carries_its_cluster_and_clique() {
        let s = FabricSettings::default();
        let mut g = gpu(FabricState::Completed, 0, 0);
        if let Ok(Some(info)) = &mut g.reading {
            info.cluster_uuid = [0xab; 16];
            info.clique = 32766;
        }
        let f = &gpus(&[g], &s)[0];
        assert!(f.is_ok());
        assert_eq!(
            f.actual.as_deref(),
            Some("cluster abababab-abab-abab-abab-abababababab clique 32766")
        );
        // No cluster UUID: no multi-node domain, nothing to carry.
        let single = &gpus(&[gpu(FabricState::Completed, 0, 0)], &s)[0];
        assert_eq!(single.actual, None);
    }

    #[test]
    fn a_stopped_fabric_manager_drains_and_log_errors_warn() {
        let s = FabricSettings::default();
        let log = LogErrors {
            present: true,
            count: 2,
            last: Some("[..] [ERROR] [tid 1] lost".into()),
            ..Default::default()
        };
        let codes: Vec<_> = manager(false, &log, &s)
            .iter()
            .map(|f| (f.code.clone(), f.severity))
            .collect();
        assert_eq!(
            codes,
            [
                (FABRIC_DOWN.to_string(), Severity::Drain),
                (FABRIC_MANAGER_ERROR.to_string(), Severity::Warning)
            ]
        );
        assert!(manager(true, &LogErrors::default(), &s)[0].is_ok());
    }

    #[test]
    fn each_health_mask_field_is_its_own_finding_with_nvidias_severity() {
        let s = FabricSettings::default();
        let cases = [
            (1 << SHIFT_DEGRADED_BW, FABRIC_UNHEALTHY, Severity::Drain),
            (
                1 << SHIFT_ROUTE_UNHEALTHY,
                FABRIC_UNHEALTHY,
                Severity::Drain,
            ),
            (
                1 << SHIFT_ROUTE_RECOVERY,
                FABRIC_RECOVERY,
                Severity::Warning,
            ),
            (
                1 << SHIFT_ACCESS_TIMEOUT_RECOVERY,
                FABRIC_RECOVERY,
                Severity::Warning,
            ),
            (
                5 << SHIFT_INCORRECT_CONFIGURATION,
                FABRIC_UNHEALTHY,
                Severity::Drain,
            ),
        ];
        for (mask, code, severity) in cases {
            let out = gpus(&[gpu(FabricState::Completed, 0, mask)], &s);
            assert_eq!(out.len(), 1, "mask {mask:#x}");
            assert_eq!((out[0].code.as_str(), out[0].severity), (code, severity));
        }
    }

    #[test]
    fn each_incorrect_configuration_value_is_named() {
        let names: Vec<&str> = (2..=8)
            .map(|v| health_faults(v << SHIFT_INCORRECT_CONFIGURATION)[0].name)
            .collect();
        assert_eq!(names[0], "incorrect configuration: SysGUID");
        assert_eq!(names[3], "incorrect configuration: too few NVLinks");
        assert_eq!(names[6], "incorrect configuration: GPU state invalid");
    }

    #[test]
    fn false_and_none_fields_of_the_mask_are_healthy() {
        // Every two-bit field FALSE (2), incorrect configuration NONE (1).
        let healthy = 0b10_10_10_10 | 1 << SHIFT_INCORRECT_CONFIGURATION;
        assert!(health_faults(healthy).is_empty());
        let out = gpus(
            &[gpu(FabricState::Completed, 0, healthy)],
            &FabricSettings::default(),
        );
        assert!(out[0].is_ok());
    }
}
