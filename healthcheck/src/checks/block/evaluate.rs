//! Judging NVMe namespaces: a pure function of gathered data and config.

use super::sysfs::{BlockData, Namespace};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, BlockSettings};

pub const NVME_MISSING: &str = "NVME_MISSING";
pub const NVME_SIZE_LOW: &str = "NVME_SIZE_LOW";
pub const NVME_NOT_LIVE: &str = "NVME_NOT_LIVE";
pub const BLOCK_READ_ONLY: &str = "BLOCK_READ_ONLY";
pub const BLOCK_UNREADABLE: &str = "BLOCK_UNREADABLE";

/// Bytes in a GB as drive vendors count them.
const GB: f64 = 1e9;

/// Findings for the namespace count and each namespace.
pub fn evaluate(data: &BlockData, settings: &BlockSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    if let Some(expected) = settings.nvme_count {
        // One we could not read is there all the same: `unknown`, not missing.
        let present = data.namespaces.len() + data.unreadable.len();
        findings.push(if present < expected {
            let names: Vec<&str> = data.namespaces.iter().map(|n| n.name.as_str()).collect();
            Finding::new(NAME, "nvme", NVME_MISSING, settings.severity)
                .expected(expected)
                .actual(present)
                .action(Action::Repair)
                .message(format!(
                    "{present} of {expected} NVMe namespaces present: {}",
                    names.join(" ")
                ))
        } else {
            Finding::ok(NAME, "nvme")
        });
    }
    for ns in &data.namespaces {
        findings.extend(judge(ns, settings));
    }
    for (name, message) in &data.unreadable {
        findings.push(Finding::unknown(
            NAME,
            name,
            BLOCK_UNREADABLE,
            message.clone(),
        ));
    }
    findings
}

fn judge(ns: &Namespace, settings: &BlockSettings) -> Vec<Finding> {
    let name = &ns.name;
    let model = ns
        .model
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let problem =
        |code: &str| Finding::new(NAME, name, code, settings.severity).action(Action::Repair);
    let mut own = Vec::new();
    if let Some(state) = ns.controller_state.as_deref().filter(|s| *s != "live") {
        own.push(
            problem(NVME_NOT_LIVE)
                .expected("live")
                .actual(state)
                .message(format!("{name}{model}: controller state is {state}")),
        );
    }
    let size_gb = ns.size_bytes as f64 / GB;
    if let Some(min) = settings.nvme_min_size_gb {
        // A dead controller reports size 0; NVME_NOT_LIVE already says why.
        if size_gb < min && own.is_empty() {
            own.push(
                problem(NVME_SIZE_LOW)
                    .expected(format!(">= {min} GB"))
                    .actual(format!("{size_gb:.0} GB"))
                    .message(format!("{name}{model} is {size_gb:.0} GB, below {min} GB")),
            );
        }
    }
    if settings.writable && ns.read_only {
        own.push(
            problem(BLOCK_READ_ONLY)
                .expected("ro=0")
                .actual("ro=1")
                .message(format!(
                    "{name}{model} is read-only (worn out or write-protected)"
                )),
        );
    }
    if own.is_empty() {
        own.push(Finding::ok(NAME, name));
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    fn ns(name: &str, tb: f64) -> Namespace {
        Namespace {
            name: name.into(),
            size_bytes: (tb * 1e12) as u64,
            read_only: false,
            controller_state: Some("live".into()),
            model: Some("SAMSUNG MZ1L23T8HBLA-00A07".into()),
        }
    }

    fn settings() -> BlockSettings {
        BlockSettings {
            nvme_count: Some(3),
            nvme_min_size_gb: Some(3000.0),
            ..BlockSettings::default()
        }
    }

    fn problems(f: &[Finding]) -> Vec<(String, String, Severity)> {
        f.iter()
            .filter(|f| !f.is_ok())
            .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
            .collect()
    }

    #[test]
    fn the_expected_namespaces_live_and_writable_are_ok() {
        let data = BlockData {
            namespaces: vec![
                ns("nvme0n1", 3.84),
                ns("nvme1n1", 3.84),
                ns("nvme2n1", 7.68),
            ],
            ..BlockData::default()
        };
        let findings = evaluate(&data, &settings());
        assert_eq!(findings.len(), 4);
        assert!(problems(&findings).is_empty(), "{findings:#?}");
    }

    #[test]
    fn a_missing_small_dead_or_read_only_namespace_is_named_with_its_code() {
        let mut dead = ns("nvme1n1", 0.0);
        dead.controller_state = Some("dead".into());
        let mut ro = ns("nvme2n1", 3.84);
        ro.read_only = true;
        let data = BlockData {
            namespaces: vec![ns("nvme0n1", 1.92), dead, ro],
            ..BlockData::default()
        };
        let mut s = settings();
        s.nvme_count = Some(4);
        assert_eq!(
            problems(&evaluate(&data, &s)),
            [
                ("nvme".into(), NVME_MISSING.into(), Severity::Drain),
                ("nvme0n1".into(), NVME_SIZE_LOW.into(), Severity::Drain),
                ("nvme1n1".into(), NVME_NOT_LIVE.into(), Severity::Drain),
                ("nvme2n1".into(), BLOCK_READ_ONLY.into(), Severity::Drain),
            ]
        );
    }

    #[test]
    fn a_read_only_device_is_fine_where_config_does_not_need_it_writable() {
        let mut ro = ns("nvme0n1", 3.84);
        ro.read_only = true;
        let data = BlockData {
            namespaces: vec![ro],
            ..BlockData::default()
        };
        let s = BlockSettings {
            writable: false,
            ..BlockSettings::default()
        };
        assert!(problems(&evaluate(&data, &s)).is_empty());
    }

    #[test]
    fn an_unreadable_namespace_is_unknown_and_still_counts_as_present() {
        let data = BlockData {
            namespaces: vec![ns("nvme0n1", 3.84), ns("nvme1n1", 3.84)],
            unreadable: vec![("nvme2n1".into(), "/sys/block/nvme2n1/size: garbage".into())],
        };
        assert_eq!(
            problems(&evaluate(&data, &settings())),
            [("nvme2n1".into(), BLOCK_UNREADABLE.into(), Severity::Unknown)]
        );
    }
}
