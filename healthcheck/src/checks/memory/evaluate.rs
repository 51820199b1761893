//! Judging memory: a pure function of gathered data, config and state.

use super::sysfs::{EdacCounter, MemoryData};
use super::NAME;
use crate::checks::counters::{growth, Recent};
use crate::finding::Finding;
use lemonade_config::{Action, MemorySettings, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MEM_TOTAL_LOW: &str = "MEM_TOTAL_LOW";
pub const EDAC_UE: &str = "EDAC_UE";
pub const EDAC_CE_RATE: &str = "EDAC_CE_RATE";
pub const EDAC_UNREADABLE: &str = "EDAC_UNREADABLE";

/// Corrected-error counts of the previous run, per EDAC entity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryState {
    pub corrected: BTreeMap<String, CorrectedState>,
}

/// One entity's last corrected count and its recent growth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CorrectedState {
    pub last: u64,
    #[serde(default, skip_serializing_if = "Recent::is_empty")]
    pub recent: Recent,
}

const KIB_PER_GIB: f64 = 1024.0 * 1024.0;

/// Findings for the memory size and each EDAC entity, and the state for the next run.
pub fn evaluate(
    data: &MemoryData,
    settings: &MemorySettings,
    previous: &MemoryState,
    now: i64,
) -> (Vec<Finding>, MemoryState) {
    let mut findings = Vec::new();
    if let (Some(want), Some(kib)) = (settings.expected_total_gib, data.total_kib) {
        findings.push(judge_total(want, kib, settings));
    }
    let mut state = MemoryState::default();
    for counter in &data.counters {
        let (found, corrected) = judge_counter(counter, settings, previous, now);
        findings.extend(found);
        state.corrected.insert(counter.entity.clone(), corrected);
    }
    for (entity, message) in &data.unreadable {
        // Keep its history, so the next readable run still sees the growth.
        if let Some(before) = previous.corrected.get(entity) {
            state.corrected.insert(entity.clone(), before.clone());
        }
        findings.push(Finding::unknown(
            NAME,
            entity,
            EDAC_UNREADABLE,
            message.clone(),
        ));
    }
    (findings, state)
}

fn judge_total(want_gib: f64, kib: u64, settings: &MemorySettings) -> Finding {
    let have_gib = kib as f64 / KIB_PER_GIB;
    let floor = want_gib * (1.0 - settings.total_tolerance_percent / 100.0);
    if have_gib < floor {
        Finding::new(NAME, "memory", MEM_TOTAL_LOW, settings.total_low_severity)
            .expected(format!("{want_gib} GiB"))
            .actual(format!("{have_gib:.1} GiB"))
            .action(Action::Repair)
            .message(format!(
                "MemTotal is {have_gib:.1} GiB, more than {}% below the expected {want_gib} GiB: a DIMM is mapped out",
                settings.total_tolerance_percent
            ))
    } else {
        Finding::ok(NAME, "memory")
    }
}

fn judge_counter(
    counter: &EdacCounter,
    settings: &MemorySettings,
    previous: &MemoryState,
    now: i64,
) -> (Vec<Finding>, CorrectedState) {
    let entity = &counter.entity;
    let slot = counter
        .label
        .as_deref()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    let mut own = Vec::new();
    // The count starts at zero at boot: any uncorrected error since then is
    // growth, and it stays visible until a reboot (or `reset_counters`).
    if counter.uncorrected > 0 {
        own.push(
            Finding::new(NAME, entity, EDAC_UE, settings.uncorrected_severity)
                .expected(0)
                .actual(counter.uncorrected)
                .action(Action::Repair)
                .message(format!(
                    "{entity}{slot}: {} uncorrected memory errors since boot",
                    counter.uncorrected
                )),
        );
    }
    let before = previous.corrected.get(entity);
    let mut recent = before.map(|b| b.recent.clone()).unwrap_or_default();
    recent.record(
        now,
        growth(before.map(|b| b.last), counter.corrected),
        settings.rate_window_s,
    );
    let per_hour = recent.per_hour(settings.rate_window_s);
    let over = |limit: f64| limit > 0.0 && per_hour > limit;
    let rate = if over(settings.corrected_drain_per_hour) {
        Some((Severity::Drain, settings.corrected_drain_per_hour))
    } else if over(settings.corrected_warning_per_hour) {
        Some((Severity::Warning, settings.corrected_warning_per_hour))
    } else {
        None
    };
    if let Some((severity, limit)) = rate {
        own.push(
            Finding::new(NAME, entity, EDAC_CE_RATE, severity)
                .expected(format!("<= {limit}/h"))
                .actual(format!("{per_hour:.0}/h"))
                .action(if severity == Severity::Drain {
                    Action::Repair
                } else {
                    Action::Investigate
                })
                .message(format!(
                    "{entity}{slot}: corrected memory errors at {per_hour:.0}/h (now {})",
                    counter.corrected
                ))
                .from_counter_growth(),
        );
    }
    if own.is_empty() {
        own.push(Finding::ok(NAME, entity));
    }
    (
        own,
        CorrectedState {
            last: counter.corrected,
            recent,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024;

    fn dimm(entity: &str, corrected: u64, uncorrected: u64) -> EdacCounter {
        EdacCounter {
            entity: entity.into(),
            label: Some("CPU_SrcID#0_MC#0_Chan#0_DIMM#0".into()),
            corrected,
            uncorrected,
        }
    }

    fn problems(findings: &[Finding]) -> Vec<(String, String, Severity)> {
        findings
            .iter()
            .filter(|f| !f.is_ok())
            .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
            .collect()
    }

    fn settings() -> MemorySettings {
        MemorySettings {
            expected_total_gib: Some(2016.0),
            ..MemorySettings::default()
        }
    }

    #[test]
    fn a_mem_total_within_the_tolerance_is_ok_and_below_it_drains() {
        let data = |gib: u64| MemoryData {
            total_kib: Some(gib * GIB),
            ..MemoryData::default()
        };
        let (ok, _) = evaluate(&data(2000), &settings(), &MemoryState::default(), 0);
        assert!(problems(&ok).is_empty(), "{ok:#?}");
        let (lost_a_dimm, _) = evaluate(&data(1952), &settings(), &MemoryState::default(), 0);
        assert_eq!(
            problems(&lost_a_dimm),
            [("memory".into(), MEM_TOTAL_LOW.into(), Severity::Drain)]
        );
        assert_eq!(lost_a_dimm[0].actual.as_deref(), Some("1952.0 GiB"));
    }

    #[test]
    fn without_an_expected_size_mem_total_is_not_judged() {
        let data = MemoryData {
            total_kib: Some(GIB),
            ..MemoryData::default()
        };
        let (findings, _) = evaluate(
            &data,
            &MemorySettings::default(),
            &MemoryState::default(),
            0,
        );
        assert!(findings.is_empty());
    }

    #[test]
    fn an_uncorrected_error_since_boot_takes_the_node_down_on_the_first_reading() {
        let data = MemoryData {
            counters: vec![dimm("mc0/dimm0", 0, 0), dimm("mc1/dimm2", 0, 1)],
            ..MemoryData::default()
        };
        let (findings, _) = evaluate(&data, &settings(), &MemoryState::default(), 0);
        assert_eq!(
            problems(&findings),
            [("mc1/dimm2".into(), EDAC_UE.into(), Severity::Down)]
        );
        assert!(findings[1].message.contains("DIMM#0"), "{findings:#?}");
    }

    #[test]
    fn corrected_errors_warn_then_drain_as_their_rate_in_the_window_grows() {
        let s = MemorySettings {
            corrected_warning_per_hour: 10.0,
            corrected_drain_per_hour: 100.0,
            rate_window_s: 3600,
            ..MemorySettings::default()
        };
        let at = |corrected: u64| MemoryData {
            counters: vec![dimm("mc0/dimm0", corrected, 0)],
            ..MemoryData::default()
        };
        // Counts since boot are history, not a rate.
        let (first, state) = evaluate(&at(5000), &s, &MemoryState::default(), 0);
        assert!(problems(&first).is_empty(), "{first:#?}");
        let (some, state) = evaluate(&at(5020), &s, &state, 300);
        assert_eq!(
            problems(&some),
            [("mc0/dimm0".into(), EDAC_CE_RATE.into(), Severity::Warning)]
        );
        let (many, state) = evaluate(&at(5200), &s, &state, 600);
        assert_eq!(problems(&many)[0].2, Severity::Drain);
        // Quiet for longer than the window: the rate falls back to zero.
        let (quiet, _) = evaluate(&at(5200), &s, &state, 600 + 3600);
        assert!(problems(&quiet).is_empty(), "{quiet:#?}");
    }

    #[test]
    fn an_unreadable_counter_is_unknown_naming_its_file_and_keeps_its_history() {
        let previous = MemoryState {
            corrected: [(
                "mc0".to_string(),
                CorrectedState {
                    last: 7,
                    recent: Recent::default(),
                },
            )]
            .into(),
        };
        let data = MemoryData {
            unreadable: vec![(
                "mc0".into(),
                "/sys/devices/system/edac/mc/mc0/ce_count: expected a count".into(),
            )],
            ..MemoryData::default()
        };
        let (findings, state) = evaluate(&data, &settings(), &previous, 0);
        assert_eq!(
            problems(&findings),
            [("mc0".into(), EDAC_UNREADABLE.into(), Severity::Unknown)]
        );
        assert!(findings[0].message.contains("ce_count"));
        assert_eq!(state, previous);
    }
}
