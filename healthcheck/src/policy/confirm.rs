//! Debouncing: a finding of a check listed in `[policy] confirm_runs` takes
//! the node out only once it was seen in `runs` of the last `of` runs of that
//! check. NVLink links come up seconds after a reboot and IB ports train;
//! a node drained for one bad sample costs a repair ticket for nothing.
//!
//! What each finding was seen in is one bit per run of its check (bit 0 the
//! latest), kept in the policy's memory between runs. A run that did not run
//! the check (a prolog with the quick profile) leaves its history alone.

use crate::finding::Finding;
use crate::record::RunReport;
use lemonade_config::{ConfirmRuns, Severity};
use std::collections::{BTreeMap, BTreeSet};

/// The memory key of a finding: `check code entity`.
fn key(f: &Finding) -> String {
    format!("{} {} {}", f.check, f.code, f.entity)
}

/// Updates `seen` with the run's findings and returns the findings that wait
/// for confirmation, as warnings that say how far they are.
pub fn unconfirmed(
    rules: &BTreeMap<String, ConfirmRuns>,
    report: &RunReport,
    seen: &mut BTreeMap<String, u32>,
) -> Vec<Finding> {
    let ran: BTreeSet<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    let mut waiting = Vec::new();
    for (check, rule) in rules.iter().filter(|(c, _)| ran.contains(c.as_str())) {
        let window = if rule.of >= 32 {
            u32::MAX
        } else {
            (1u32 << rule.of) - 1
        };
        let prefix = format!("{check} ");
        let now: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| &f.check == check && f.severity.removes_node())
            .collect();
        let now_keys: BTreeSet<String> = now.iter().map(|f| key(f)).collect();
        // Age every history of this check by one run.
        seen.retain(|k, bits| {
            if k.starts_with(&prefix) {
                *bits = (*bits << 1) & window;
            }
            *bits != 0 || now_keys.contains(k)
        });
        for f in now {
            let bits = seen.entry(key(f)).or_insert(0);
            *bits |= 1;
            let count = bits.count_ones();
            if count < rule.runs {
                waiting.push(demoted(f, count, rule));
            }
        }
    }
    waiting
}

/// The finding as a warning that waits for confirmation.
fn demoted(f: &Finding, count: u32, rule: &ConfirmRuns) -> Finding {
    let mut w = f.clone();
    w.message = format!(
        "{} (seen in {count} of the last {} runs; takes the node out ({}) at {})",
        f.message, rule.of, f.severity, rule.runs
    );
    w.severity = Severity::Warning;
    w
}

/// True when `f` is the finding `w` was demoted from.
pub fn same(f: &Finding, w: &Finding) -> bool {
    f.check == w.check && f.code == w.code && f.entity == w.entity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::report;

    fn rules() -> BTreeMap<String, ConfirmRuns> {
        BTreeMap::from([("nvlink".to_string(), ConfirmRuns { runs: 2, of: 3 })])
    }

    fn nvlink_down() -> Finding {
        Finding::new("nvlink", "gpu0", "NVLINK_INACTIVE", Severity::Drain)
    }

    #[test]
    fn a_flapping_finding_waits_until_seen_in_n_of_m_runs() {
        let mut seen = BTreeMap::new();
        let bad = report(vec![nvlink_down()]);
        let clean = report(vec![Finding::ok("nvlink", "gpu0")]);
        let waits = unconfirmed(&rules(), &bad, &mut seen);
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].severity, Severity::Warning);
        assert!(
            waits[0].message.contains("seen in 1 of the last 3 runs"),
            "{}",
            waits[0].message
        );
        // Clean, then bad again: 2 of the last 3 runs.
        assert!(unconfirmed(&rules(), &clean, &mut seen).is_empty());
        assert!(unconfirmed(&rules(), &bad, &mut seen).is_empty());
    }

    #[test]
    fn a_finding_that_clears_within_the_window_never_counts_twice() {
        let mut seen = BTreeMap::new();
        let bad = report(vec![nvlink_down()]);
        let clean = report(vec![Finding::ok("nvlink", "gpu0")]);
        for _ in 0..5 {
            assert_eq!(unconfirmed(&rules(), &bad, &mut seen).len(), 1);
            unconfirmed(&rules(), &clean, &mut seen);
            unconfirmed(&rules(), &clean, &mut seen);
        }
        // Three clean runs in a row forget it.
        unconfirmed(&rules(), &clean, &mut seen);
        assert!(seen.is_empty(), "{seen:?}");
    }

    #[test]
    fn checks_not_listed_and_runs_without_the_check_are_left_alone() {
        let mut seen = BTreeMap::new();
        let gpu_lost = report(vec![Finding::new(
            "gpu",
            "gpu3",
            "GPU_MISSING",
            Severity::Down,
        )]);
        assert!(unconfirmed(&rules(), &gpu_lost, &mut seen).is_empty());
        unconfirmed(&rules(), &report(vec![nvlink_down()]), &mut seen);
        // A run that did not run nvlink does not age its history.
        unconfirmed(&rules(), &gpu_lost, &mut seen);
        assert_eq!(seen.get("nvlink NVLINK_INACTIVE gpu0"), Some(&1));
    }

    #[test]
    fn one_of_one_acts_at_once() {
        let mut seen = BTreeMap::new();
        let once = BTreeMap::from([("nvlink".to_string(), ConfirmRuns { runs: 1, of: 1 })]);
        assert!(unconfirmed(&once, &report(vec![nvlink_down()]), &mut seen).is_empty());
    }
}
