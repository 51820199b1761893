//! Pure: the fabric manager's process, its log and each GPU's fabric
//! registration to findings.

use super::log::LogErrors;
use super::NAME;
use crate::checks::gpu::fabric::FabricInfo;
use crate::checks::gpu::session::{self, GpuData};
use crate::finding::Finding;
use lemonade_config::{Action, FabricSettings};

/// The code of a fabric that cannot carry NVLink traffic.
pub const FABRIC_DOWN: &str = "FABRIC_DOWN";
/// The code of new errors in the fabric manager's log.
pub const FABRIC_MANAGER_ERROR: &str = "FABRIC_MANAGER_ERROR";
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
        match info {
            Some(f) if !f.is_up() => out.push(
                id.finding(NAME, FABRIC_DOWN, s.down_severity)
                    .expected("fabric state completed, status SUCCESS")
                    .actual(format!("{}, {}", f.state.as_str(), f.status_name()))
                    .action(Action::Investigate)
                    .message(format!(
                        "{}: fabric registration {} ({})",
                        id.entity(),
                        f.state.as_str(),
                        f.status_name()
                    )),
            ),
            _ => out.push(id.ok(NAME)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::gpu::fabric::FabricState;
    use crate::checks::gpu::session::GpuId;
    use lemonade_config::Severity;

    fn gpu(state: FabricState, status: u32) -> GpuData<Option<FabricInfo>> {
        GpuData {
            id: GpuId {
                index: 2,
                ..Default::default()
            },
            reading: Ok(Some(FabricInfo {
                state,
                status,
                clique: 1,
            })),
        }
    }

    #[test]
    fn a_gpu_whose_fabric_is_not_up_drains_with_fabric_down() {
        let s = FabricSettings::default();
        let f = &gpus(&[gpu(FabricState::NotStarted, 27)], &s)[0];
        assert_eq!(
            (f.code.as_str(), f.severity, f.entity.as_str()),
            (FABRIC_DOWN, Severity::Drain, "gpu2")
        );
        assert_eq!(f.actual.as_deref(), Some("not started, NOT_READY"));
        assert!(gpus(&[gpu(FabricState::Completed, 0)], &s)[0].is_ok());
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
}
