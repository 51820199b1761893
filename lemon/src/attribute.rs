//! Which node a failed job is blamed on.
//!
//! # The attribution rule
//!
//! A run counts as failed when sacct says `FAILED` or `NODE_FAIL`. The
//! *attribution window* of a run is from 10 minutes before its end to
//! 5 minutes after it (the paper's window: a check firing late in a job, or
//! just after it died, explains the failure).
//!
//! **Multi-node runs** are blamed on one node, first match wins:
//! 1. the node of the run with a `drain` or `down` finding from the health
//!    checks (spool exports) inside the window; the earliest such finding wins,
//!    and its check (xid, ecc, pcie, ib, mounts, ...) is the category;
//! 2. else the node of the run that went DOWN/DRAIN (`sacctmgr show event`)
//!    inside the window, the earliest first (category `slurm_event`);
//! 3. else the node whose task failed first (task-exit records of the SPANK
//!    plugin with a non-zero exit code or a signal, between the run's start
//!    and the window's end; category `task_exit`). Task exits are compared in
//!    milliseconds: the failing task and those Slurm kills right after it
//!    usually end within the same second. Records of nodes that sent only
//!    seconds count as the start of their second; exact ties go to the lower
//!    node id;
//! 4. else nobody: the failure is counted as unattributed, not blamed.
//!
//! **Single-node runs** are blamed on their node, except `FAILED` runs whose
//! exit code is one of `[lemon] user_error_exit_codes` (the user's fault,
//! e.g. 127, command not found). `NODE_FAIL` is always the node's. Their
//! category is the check of a drain/down finding in the window if any, else
//! `slurm_event` if the node went out of service in the window, else `unknown`.
//!
//! A job that is requeued and fails again counts once per node: signals count
//! distinct job ids, not runs.

use serde::Serialize;
use std::collections::HashMap;

/// Seconds before a run's end where a finding still explains its failure.
pub const BEFORE_END_S: i64 = 600;
/// Seconds after a run's end where a finding still explains its failure.
pub const AFTER_END_S: i64 = 300;

/// A failed run as the attribution sees it.
#[derive(Debug, Clone)]
pub struct FailedRun {
    pub row_id: i64,
    pub job_id_raw: i64,
    pub state: String,
    pub start: Option<i64>,
    pub end: i64,
    pub exit_code: Option<i64>,
    pub nodes: Vec<i64>,
}

/// Something seen on a node at a time, with its category.
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: i64,
    pub category: String,
}

/// The evidence of the window, per node, sorted by time.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Drain/down findings per node.
    pub findings: HashMap<i64, Vec<Mark>>,
    /// Starts of out-of-service events per node.
    pub out_events: HashMap<i64, Vec<Mark>>,
    /// Failed task exits per job id: (node, Unix **milliseconds**), so that
    /// tasks ending within one second are still ordered. Records without
    /// milliseconds are given as their second times 1000.
    pub task_fails_ms: HashMap<i64, Vec<(i64, i64)>>,
}

impl Evidence {
    /// Sorts the per-node lists; call once after filling.
    pub fn sort(&mut self) {
        for v in self
            .findings
            .values_mut()
            .chain(self.out_events.values_mut())
        {
            v.sort_by_key(|m| m.at);
        }
        for v in self.task_fails_ms.values_mut() {
            v.sort_by_key(|&(node, at_ms)| (at_ms, node));
        }
    }

    fn earliest_in<'m>(
        map: &'m HashMap<i64, Vec<Mark>>,
        nodes: &[i64],
        lo: i64,
        hi: i64,
    ) -> Option<(i64, &'m Mark)> {
        nodes
            .iter()
            .filter_map(|n| {
                map.get(n).and_then(|marks| {
                    let i = marks.partition_point(|m| m.at < lo);
                    marks.get(i).filter(|m| m.at <= hi).map(|m| (*n, m))
                })
            })
            .min_by_key(|(n, m)| (m.at, *n))
    }
}

/// Which rule blamed whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    Finding,
    NodeEvent,
    FirstTaskExit,
    SingleNode,
    UserError,
    Unattributed,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Finding => "finding",
            Rule::NodeEvent => "node_event",
            Rule::FirstTaskExit => "first_task_exit",
            Rule::SingleNode => "single_node",
            Rule::UserError => "user_error",
            Rule::Unattributed => "unattributed",
        }
    }
}

/// The verdict on one failed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    pub node: Option<i64>,
    pub rule: Rule,
    pub category: String,
}

/// True for the states that count as failures.
pub fn is_failure(state: &str) -> bool {
    state == "FAILED" || state == "NODE_FAIL"
}

/// Applies the rule documented at the top of this module.
pub fn attribute(run: &FailedRun, ev: &Evidence, user_error_codes: &[i32]) -> Attribution {
    let (lo, hi) = (run.end - BEFORE_END_S, run.end + AFTER_END_S);
    if run.nodes.len() == 1 {
        let node = run.nodes[0];
        if run.state == "FAILED"
            && run
                .exit_code
                .is_some_and(|c| user_error_codes.iter().any(|&u| i64::from(u) == c))
        {
            return Attribution {
                node: None,
                rule: Rule::UserError,
                category: "user".into(),
            };
        }
        let category = if let Some((_, m)) = Evidence::earliest_in(&ev.findings, &[node], lo, hi) {
            m.category.clone()
        } else if Evidence::earliest_in(&ev.out_events, &[node], lo, hi).is_some() {
            "slurm_event".into()
        } else {
            "unknown".into()
        };
        return Attribution {
            node: Some(node),
            rule: Rule::SingleNode,
            category,
        };
    }
    if let Some((node, m)) = Evidence::earliest_in(&ev.findings, &run.nodes, lo, hi) {
        return Attribution {
            node: Some(node),
            rule: Rule::Finding,
            category: m.category.clone(),
        };
    }
    if let Some((node, _)) = Evidence::earliest_in(&ev.out_events, &run.nodes, lo, hi) {
        return Attribution {
            node: Some(node),
            rule: Rule::NodeEvent,
            category: "slurm_event".into(),
        };
    }
    // The window is in seconds, the task exits in milliseconds: every
    // millisecond of the seconds `from..=hi` is inside.
    let from_ms = run.start.unwrap_or(lo).saturating_mul(1000);
    let hi_ms = hi.saturating_mul(1000).saturating_add(999);
    if let Some(&(node, _)) = ev.task_fails_ms.get(&run.job_id_raw).and_then(|v| {
        v.iter()
            .find(|&&(n, at_ms)| at_ms >= from_ms && at_ms <= hi_ms && run.nodes.contains(&n))
    }) {
        return Attribution {
            node: Some(node),
            rule: Rule::FirstTaskExit,
            category: "task_exit".into(),
        };
    }
    Attribution {
        node: None,
        rule: Rule::Unattributed,
        category: "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(nodes: &[i64], exit: i64) -> FailedRun {
        FailedRun {
            row_id: 1,
            job_id_raw: 42,
            state: "FAILED".into(),
            start: Some(0),
            end: 10_000,
            exit_code: Some(exit),
            nodes: nodes.to_vec(),
        }
    }

    fn mark(at: i64, c: &str) -> Mark {
        Mark {
            at,
            category: c.into(),
        }
    }

    #[test]
    fn finding_beats_event_beats_task_exit() {
        let mut ev = Evidence::default();
        ev.task_fails_ms.insert(42, vec![(1, 5_000_000)]);
        let a = attribute(&run(&[1, 2, 3], 1), &ev, &[]);
        assert_eq!((a.node, a.rule), (Some(1), Rule::FirstTaskExit));
        ev.out_events.insert(2, vec![mark(10_100, "")]);
        let a = attribute(&run(&[1, 2, 3], 1), &ev, &[]);
        assert_eq!((a.node, a.rule), (Some(2), Rule::NodeEvent));
        ev.findings.insert(3, vec![mark(9_500, "pcie")]);
        let a = attribute(&run(&[1, 2, 3], 1), &ev, &[]);
        assert_eq!(
            (a.node, a.rule, a.category.as_str()),
            (Some(3), Rule::Finding, "pcie")
        );
    }

    #[test]
    fn window_is_ten_minutes_before_to_five_after() {
        let mut ev = Evidence::default();
        ev.findings.insert(1, vec![mark(10_000 - 601, "xid")]);
        ev.findings.insert(2, vec![mark(10_000 + 301, "xid")]);
        let a = attribute(&run(&[1, 2], 1), &ev, &[]);
        assert_eq!(a.rule, Rule::Unattributed);
        ev.findings.insert(2, vec![mark(10_000 + 300, "ib")]);
        ev.sort();
        assert_eq!(attribute(&run(&[1, 2], 1), &ev, &[]).node, Some(2));
    }

    #[test]
    fn single_node_failures_blame_the_node_unless_user_error() {
        let ev = Evidence::default();
        let a = attribute(&run(&[7], 1), &ev, &[127]);
        assert_eq!(
            (a.node, a.rule, a.category.as_str()),
            (Some(7), Rule::SingleNode, "unknown")
        );
        let a = attribute(&run(&[7], 127), &ev, &[127]);
        assert_eq!((a.node, a.rule), (None, Rule::UserError));
        let mut nf = run(&[7], 127);
        nf.state = "NODE_FAIL".into();
        assert_eq!(attribute(&nf, &ev, &[127]).node, Some(7));
    }

    #[test]
    fn task_exits_of_other_nodes_or_runs_do_not_count() {
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(9, 5_000_000), (1, 20_000_000)]);
        assert_eq!(
            attribute(&run(&[1, 2], 1), &ev, &[]).rule,
            Rule::Unattributed
        );
    }

    #[test]
    fn the_first_failing_task_is_told_apart_within_a_second() {
        // Node 2's task failed at 5000.120 s, node 1's (killed by Slurm) at 5000.480 s:
        // the same second, node 2 first although its id is higher.
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 5_000_480), (2, 5_000_120), (3, 5_000_999)]);
        ev.sort();
        let a = attribute(&run(&[1, 2, 3], 1), &ev, &[]);
        assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit));
    }

    #[test]
    fn task_exits_in_whole_seconds_still_count() {
        // Records of older nodes come as `at * 1000`: the earlier second wins,
        // and within one second the lower node id.
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(3, 5_001_000), (2, 5_000_000), (1, 5_000_000)]);
        ev.sort();
        assert_eq!(attribute(&run(&[2, 3], 1), &ev, &[]).node, Some(2));
        assert_eq!(attribute(&run(&[1, 2, 3], 1), &ev, &[]).node, Some(1));
    }

    #[test]
    fn task_exit_window_covers_whole_seconds() {
        // The window ends at 10_300 s: its last millisecond counts, the next does not.
        let mut r = run(&[1, 2], 1);
        r.start = Some(4_000);
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_301_000)]);
        ev.sort();
        assert_eq!(attribute(&r, &ev, &[]).rule, Rule::Unattributed);
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 4_000_000)]);
        assert_eq!(attribute(&r, &ev, &[]).node, Some(2));
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_300_999)]);
        assert_eq!(attribute(&r, &ev, &[]).node, Some(2));
    }
}
