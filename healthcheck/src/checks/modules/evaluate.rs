//! Pure: the required modules against the loaded ones.

use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, ModulesSettings};
use std::collections::BTreeSet;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const MODULE_MISSING: &str = "MODULE_MISSING";

/// GPUDirect RDMA between GPUs and InfiniBand HCAs needs it; without it NCCL
/// falls back to staging through host memory, slowly, with no error.
pub const PEERMEM: &str = "nvidia_peermem";

/// The modules to require: the configured ones, or `nvidia_peermem` on a
/// node with both GPUs and HCAs.
pub fn required(s: &ModulesSettings, has_gpus: bool, has_hcas: bool) -> Vec<String> {
    match &s.required {
        Some(list) => list.clone(),
        None if has_gpus && has_hcas => vec![PEERMEM.to_string()],
        None => Vec::new(),
    }
}

/// One finding per required module: `MODULE_MISSING` or ok.
pub fn evaluate(
    required: &[String],
    loaded: &BTreeSet<String>,
    s: &ModulesSettings,
) -> Vec<Finding> {
    required
        .iter()
        .map(|m| {
            // /proc/modules writes dashes as underscores.
            if loaded.contains(&m.replace('-', "_")) {
                Finding::ok(NAME, m.as_str())
            } else {
                Finding::new(NAME, m.as_str(), MODULE_MISSING, s.missing_severity)
                    .expected("loaded")
                    .actual("not loaded")
                    .action(Action::Investigate)
                    .message(format!("kernel module {m} is not loaded"))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    #[test]
    fn peermem_is_required_only_where_gpus_and_hcas_meet() {
        let s = ModulesSettings::default();
        assert_eq!(required(&s, true, true), [PEERMEM]);
        assert!(required(&s, true, false).is_empty());
        assert!(required(&s, false, true).is_empty());
        let none = ModulesSettings {
            required: Some(vec![]),
            ..s
        };
        assert!(required(&none, true, true).is_empty());
    }

    #[test]
    fn a_required_module_not_loaded_drains() {
        let s = ModulesSettings::default();
        let loaded: BTreeSet<String> = ["nvidia_uvm".to_string()].into();
        let f = evaluate(&[PEERMEM.into(), "nvidia-uvm".into()], &loaded, &s);
        assert_eq!(
            (f[0].code.as_str(), f[0].severity, f[0].entity.as_str()),
            ("MODULE_MISSING", Severity::Drain, PEERMEM)
        );
        assert!(f[1].is_ok());
    }
}
