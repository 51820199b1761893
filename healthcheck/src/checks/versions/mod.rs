//! `versions`: the software and firmware versions a node runs, for the head
//! node's drift report (issue 34): the kernel, the NVIDIA driver, the CUDA
//! version the driver supports and the CUDA toolkit, NCCL where installed,
//! and each GPU's GSP firmware. The `firmware` check already reports BIOS and
//! HCA firmware, and the `gpu` check each GPU's VBIOS. `sku` (each GPU
//! model and its count) is not a version but the drift report's grouping:
//! nodes are compared with others of their SKU.
//!
//! Every version is a finding with the version in `actual`: ok, or
//! `VERSION_MISMATCH` where `[expect]` pins another; the export's inventory
//! sends it when first seen or changed. A version that cannot be read is
//! left out: the NVML failures are the `gpu` check's to report.

pub mod files;

use crate::check::{Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView};
use crate::checks::gpu::session;
use crate::finding::Finding;
use lemonade_config::{Action, Config, ExpectSettings};
use nvml_wrapper::Nvml;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const VERSION_MISMATCH: &str = "VERSION_MISMATCH";

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "versions";

/// The `versions` check.
pub struct Versions;

/// Versions change with an upgrade and a reboot: periodic runs see them.
const PROFILES: &[Profile] = &[Profile::Periodic, Profile::Full];

impl Check for Versions {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "kernel, driver, CUDA, NCCL and GSP versions, exported for the head node's drift report"
    }
    fn profiles(&self) -> &'static [Profile] {
        PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.versions;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let mut found = vec![
            ("kernel".to_string(), files::kernel(&ctx.root)?),
            ("cuda-toolkit".to_string(), files::cuda_toolkit(&ctx.root)?),
            ("nccl".to_string(), files::nccl(&ctx.root)?),
        ];
        if session::expects_gpus(ctx) {
            if let Ok(nvml) = session::nvml(ctx) {
                found.extend(from_nvml(&nvml));
            }
        }
        Ok(CheckOutput::findings(
            found
                .into_iter()
                .filter_map(|(entity, v)| Some(judge(&entity, v?, &ctx.config.expect)))
                .collect(),
        ))
    }
}

/// Pure: a version read, against its `[expect]` pin if it has one.
pub fn judge(entity: &str, version: String, expect: &ExpectSettings) -> Finding {
    match expect.pin(entity) {
        Some(want) if want != version => {
            Finding::new(NAME, entity, VERSION_MISMATCH, expect.severity)
                .expected(want)
                .actual(&version)
                .action(Action::Investigate)
                .message(format!("{entity} {version}, [expect] pins {want}"))
        }
        _ => Finding::ok(NAME, entity).actual(version),
    }
}

/// The driver, the CUDA version it supports (`12.4`), and each GPU's GSP firmware.
fn from_nvml(nvml: &Nvml) -> Vec<(String, Option<String>)> {
    let mut out = vec![
        ("driver".to_string(), nvml.sys_driver_version().ok()),
        (
            "cuda-driver".to_string(),
            nvml.sys_cuda_driver_version()
                .ok()
                .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        ),
    ];
    let gpus = session::per_gpu(nvml, |d| Ok((d.gsp_firmware_version().ok(), d.name().ok())))
        .unwrap_or_default();
    let mut names = Vec::new();
    for gpu in gpus {
        let (gsp, name) = gpu.reading.unwrap_or_default();
        out.push((format!("{}/gsp", gpu.id.entity()), gsp));
        names.push(name);
    }
    out.push(("sku".to_string(), sku(&names)));
    out
}

/// Pure: the node's SKU for the head node's drift report, from each GPU's
/// model name: `8x NVIDIA H100 80GB HBM3`, or `4x A + 4x B` when mixed.
/// `None` without GPUs or when a name is unreadable: a partial count would
/// put the node in a SKU of its own (the `gpu` check reports a lost GPU).
pub fn sku(names: &[Option<String>]) -> Option<String> {
    let mut counts = std::collections::BTreeMap::new();
    for name in names {
        *counts.entry(name.as_deref()?.trim()).or_insert(0usize) += 1;
    }
    if counts.is_empty() {
        return None;
    }
    let parts: Vec<String> = counts.iter().map(|(n, c)| format!("{c}x {n}")).collect();
    Some(parts.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    #[test]
    fn the_sku_is_the_count_of_each_gpu_model_and_none_if_a_name_is_missing() {
        let h100 = Some("NVIDIA H100 80GB HBM3".to_string());
        assert_eq!(
            sku(&vec![h100.clone(); 8]).as_deref(),
            Some("8x NVIDIA H100 80GB HBM3")
        );
        let mixed = [
            h100.clone(),
            Some("NVIDIA A100-SXM4-80GB".into()),
            h100.clone(),
        ];
        assert_eq!(
            sku(&mixed).as_deref(),
            Some("1x NVIDIA A100-SXM4-80GB + 2x NVIDIA H100 80GB HBM3")
        );
        assert_eq!(sku(&[h100, None]), None);
        assert_eq!(sku(&[]), None);
    }

    #[test]
    fn a_version_other_than_its_pin_is_a_mismatch_and_unpinned_ones_are_ok() {
        let expect = ExpectSettings {
            driver: Some("550.54.15".into()),
            gsp: Some("550.54.15".into()),
            ..Default::default()
        };
        let f = judge("driver", "550.90.07".into(), &expect);
        assert_eq!(
            (f.code.as_str(), f.severity, f.expected.as_deref()),
            ("VERSION_MISMATCH", Severity::Warning, Some("550.54.15"))
        );
        assert_eq!(
            judge("gpu3/gsp", "550.90.07".into(), &expect).code,
            "VERSION_MISMATCH"
        );
        assert!(judge("gpu3/gsp", "550.54.15".into(), &expect).is_ok());
        assert!(judge("nccl", "2.21.5".into(), &expect).is_ok());
    }
}
