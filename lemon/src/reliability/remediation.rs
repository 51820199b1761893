//! Remediation figures: what the nodes' own repair loop did
//! (`healthcheck/src/repair`), read back from the state changes their spool
//! exports carry.
//!
//! An *incident* begins when our health check takes a node out (`drain` or
//! `down`, applied, with an `hc:` reason) and ends when the node is resumed.
//! Its category is that of its first reason code (`XID_79` is `xid`). Within
//! it, the node may be reset (`reset-gpu`), have a daemon restarted
//! (`restart-imex`), be rebooted (`reboot`) or be handed over to a human
//! (`hand-over`). An incident that began before the range
//! still counts its remediations and its return, but has no time out of
//! service. Incidents still open at the range's end did not return.

use super::{ratio, TimeRange, DAY_S};
use crate::stats::median;
use chrono::{DateTime, Utc};
use lemonade_slurm::reason::{self, ReasonOwner};
use serde::Serialize;
use std::collections::BTreeMap;

/// One state change of a node, as its spool export carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChangeRecord {
    pub node: String,
    pub at: DateTime<Utc>,
    /// `drain`, `down`, `resume`, `reset-gpu`, `reboot`, `hand-over`, ...
    pub action: String,
    /// `applied`, `failed`, `dry-run`, `breaker`, `skipped`.
    pub outcome: String,
    pub reason: String,
}

impl StateChangeRecord {
    /// From the spool's `code` (`reset-gpu (applied)`) and `detail` (the reason).
    pub fn from_spool(node: String, at: DateTime<Utc>, code: &str, reason: String) -> Self {
        let (action, outcome) = match code.split_once(" (") {
            Some((action, rest)) => (action, rest.trim_end_matches(')')),
            None => (code, ""),
        };
        StateChangeRecord {
            node,
            at,
            action: action.to_string(),
            outcome: outcome.to_string(),
            reason,
        }
    }
}

/// Incidents and remediations of one category (or of all: `total`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RemediationRow {
    pub category: String,
    pub incidents: u64,
    /// GPU resets tried (applied or failed).
    pub resets: u64,
    /// Daemon restarts tried (`restart-imex`, applied or failed).
    pub restarts: u64,
    pub reboots: u64,
    pub hand_overs: u64,
    /// Incidents with at least one reset or reboot.
    pub remediated: u64,
    /// ... of which the node came back without a human.
    pub remediated_returned: u64,
    /// `remediated_returned / remediated`.
    pub returned_share: f64,
    /// Median hours from taking the node out to resuming it, over the
    /// incidents that began and ended in the range.
    pub median_hours_out: Option<f64>,
}

/// A node with more than one incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeIncidents {
    pub node: String,
    pub incidents: u64,
    /// The range's days over its incidents.
    pub days_between: f64,
}

/// The remediation section.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RemediationSummary {
    /// Nodes whose exports carried a state change in the range: without a
    /// shared spool this is 0 and the section says so.
    pub nodes_reporting: u64,
    pub by_category: Vec<RemediationRow>,
    pub total: RemediationRow,
    /// Mean time between incidents per node, in days: fleet node-days over
    /// incidents. `None` without incidents.
    pub mtbi_days: Option<f64>,
    /// The nodes with the most incidents (at least 2), most first.
    pub repeat_nodes: Vec<NodeIncidents>,
}

#[derive(Debug, Default)]
struct Incident {
    category: String,
    start: Option<DateTime<Utc>>,
    resets: u64,
    restarts: u64,
    reboots: u64,
    hand_overs: u64,
    returned_after: Option<f64>,
    returned: bool,
}

/// Builds the section from the state changes of the range (any order).
pub fn summarize(
    changes: &[StateChangeRecord],
    range: TimeRange,
    fleet_nodes: u32,
) -> RemediationSummary {
    let mut by_node: BTreeMap<&str, Vec<&StateChangeRecord>> = BTreeMap::new();
    for c in changes.iter().filter(|c| range.contains(c.at)) {
        by_node.entry(&c.node).or_default().push(c);
    }
    let mut incidents: Vec<(&str, Incident)> = Vec::new();
    for (node, mut list) in by_node.iter().map(|(n, l)| (*n, l.clone())) {
        list.sort_by_key(|c| c.at);
        incidents.extend(node_incidents(&list).into_iter().map(|i| (node, i)));
    }
    let mut rows: BTreeMap<String, Vec<&Incident>> = BTreeMap::new();
    for (_, i) in &incidents {
        rows.entry(i.category.clone()).or_default().push(i);
    }
    let all: Vec<&Incident> = incidents.iter().map(|(_, i)| i).collect();
    let mut per_node: BTreeMap<&str, u64> = BTreeMap::new();
    for (node, _) in &incidents {
        *per_node.entry(node).or_default() += 1;
    }
    let range_days = (range.until - range.since).num_seconds().max(0) as f64 / DAY_S;
    let mut repeat_nodes: Vec<NodeIncidents> = per_node
        .iter()
        .filter(|(_, &n)| n >= 2)
        .map(|(node, &n)| NodeIncidents {
            node: node.to_string(),
            incidents: n,
            days_between: range_days / n as f64,
        })
        .collect();
    repeat_nodes.sort_by(|a, b| b.incidents.cmp(&a.incidents).then(a.node.cmp(&b.node)));
    repeat_nodes.truncate(10);
    RemediationSummary {
        nodes_reporting: by_node.len() as u64,
        by_category: rows.iter().map(|(c, list)| row(c, list)).collect(),
        total: row("total", &all),
        mtbi_days: (!all.is_empty())
            .then(|| f64::from(fleet_nodes.max(1)) * range_days / all.len() as f64),
        repeat_nodes,
    }
}

/// One node's incidents, from its state changes in time order.
fn node_incidents(changes: &[&StateChangeRecord]) -> Vec<Incident> {
    let mut out = Vec::new();
    let mut open: Option<Incident> = None;
    // A reset or restart that did not help was still tried; anything else
    // counts when applied.
    let happened = |c: &&&StateChangeRecord| {
        c.outcome == "applied"
            || (matches!(c.action.as_str(), "reset-gpu" | "restart-imex") && c.outcome == "failed")
    };
    for c in changes.iter().filter(happened) {
        let ours = reason::parse(&c.reason).owner == ReasonOwner::HealthCheck;
        match c.action.as_str() {
            "drain" | "down" if ours && open.is_none() => {
                open = Some(Incident {
                    category: category_of_reason(&c.reason),
                    start: Some(c.at),
                    ..Incident::default()
                });
            }
            "reset-gpu" | "restart-imex" | "reboot" | "hand-over" => {
                let i = open.get_or_insert_with(|| Incident {
                    category: category_of_reason(&c.reason),
                    ..Incident::default()
                });
                match c.action.as_str() {
                    "reset-gpu" => i.resets += 1,
                    "restart-imex" => i.restarts += 1,
                    "reboot" => i.reboots += 1,
                    _ => i.hand_overs += 1,
                }
            }
            "resume" => {
                if let Some(mut i) = open.take() {
                    i.returned = true;
                    i.returned_after = i.start.map(|s| (c.at - s).num_seconds() as f64 / 3600.0);
                    out.push(i);
                }
            }
            _ => {}
        }
    }
    out.extend(open);
    out
}

/// `hc: XID_79 gpu3 reset` → `xid`.
fn category_of_reason(text: &str) -> String {
    crate::attribute::category_of_code(reason::code_of(text).unwrap_or(""))
}

fn row(category: &str, incidents: &[&Incident]) -> RemediationRow {
    let remediated: Vec<&&Incident> = incidents
        .iter()
        .filter(|i| i.resets + i.restarts + i.reboots > 0)
        .collect();
    let remediated_returned = remediated
        .iter()
        .filter(|i| i.returned && i.hand_overs == 0)
        .count() as u64;
    let mut hours: Vec<f64> = incidents.iter().filter_map(|i| i.returned_after).collect();
    RemediationRow {
        category: category.to_string(),
        incidents: incidents.len() as u64,
        resets: incidents.iter().map(|i| i.resets).sum(),
        restarts: incidents.iter().map(|i| i.restarts).sum(),
        reboots: incidents.iter().map(|i| i.reboots).sum(),
        hand_overs: incidents.iter().map(|i| i.hand_overs).sum(),
        remediated: remediated.len() as u64,
        remediated_returned,
        returned_share: ratio(remediated_returned as f64, remediated.len() as f64),
        median_hours_out: median(&mut hours),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    fn change(node: &str, t: i64, code: &str, reason: &str) -> StateChangeRecord {
        StateChangeRecord::from_spool(node.into(), at(t), code, reason.into())
    }

    fn range() -> TimeRange {
        TimeRange {
            since: at(0),
            until: at(28 * DAY),
        }
    }

    #[test]
    fn a_spool_code_splits_into_action_and_outcome() {
        let c = change("n1", 5, "reset-gpu (failed)", "hc: XID_79 gpu3 reset");
        assert_eq!(
            (c.action.as_str(), c.outcome.as_str()),
            ("reset-gpu", "failed")
        );
    }

    #[test]
    fn an_imex_daemon_restart_is_a_remediation_of_its_own() {
        let changes = vec![
            change("n1", 1_000, "drain (applied)", "hc: IMEX_DOWN nvidia-imex"),
            change(
                "n1",
                1_100,
                "restart-imex (applied)",
                "hc: IMEX_DOWN nvidia-imex restart-imex",
            ),
            change("n1", 1_200, "resume (applied)", "hc: IMEX_DOWN nvidia-imex"),
        ];
        let s = summarize(&changes, range(), 100);
        let imex = &s.by_category[0];
        assert_eq!(imex.category, "imex");
        assert_eq!(
            (imex.restarts, imex.resets, imex.reboots, imex.remediated),
            (1, 0, 0, 1)
        );
        assert_eq!(imex.remediated_returned, 1);
    }

    #[test]
    fn a_reset_that_works_and_a_reboot_that_does_not_are_told_apart() {
        let changes = vec![
            // n1: XID, reset, back after two hours.
            change("n1", 1_000, "drain (applied)", "hc: XID_79 gpu3"),
            change("n1", 1_100, "reset-gpu (applied)", "hc: XID_79 gpu3 reset"),
            change("n1", 1_000 + 7_200, "resume (applied)", "hc: XID_79 gpu3"),
            // n2: a lost GPU, rebooted, the fault survives: a human's.
            change("n2", 2_000, "down (applied)", "hc: GPU_MISSING gpu1"),
            change(
                "n2",
                2_100,
                "reboot (applied)",
                "hc: GPU_MISSING gpu1 reboot",
            ),
            change(
                "n2",
                3_000,
                "hand-over (applied)",
                "hc: GPU_MISSING gpu1 reboot did not help",
            ),
            // n1 again, a week later: a mount that came back by itself.
            change(
                "n1",
                7 * DAY,
                "drain (applied)",
                "hc: MOUNT_MISSING /scratch",
            ),
            change(
                "n1",
                7 * DAY + 600,
                "resume (applied)",
                "hc: MOUNT_MISSING /scratch",
            ),
            // Not incidents: an administrator's drain, a dry run, a breaker hold.
            change("n3", 5_000, "drain (applied)", "bad fan"),
            change("n3", 5_000, "drain (dry-run)", "hc: XID_79 gpu0"),
            change("n4", 5_000, "remediation (breaker)", "hc: XID_79 gpu0"),
        ];
        let s = summarize(&changes, range(), 100);
        assert_eq!(s.nodes_reporting, 4);
        assert_eq!(s.total.incidents, 3);
        assert_eq!(
            (s.total.resets, s.total.reboots, s.total.hand_overs),
            (1, 1, 1)
        );
        assert_eq!((s.total.remediated, s.total.remediated_returned), (2, 1));
        assert_eq!(s.total.returned_share, 0.5);
        // Out for 2 h and for 10 min: of two, the report's medians take the upper.
        assert_eq!(s.total.median_hours_out, Some(2.0));
        let xid = s.by_category.iter().find(|r| r.category == "xid").unwrap();
        assert_eq!(
            (xid.incidents, xid.resets, xid.remediated_returned),
            (1, 1, 1)
        );
        let gpu = s.by_category.iter().find(|r| r.category == "gpu").unwrap();
        assert_eq!(
            (gpu.reboots, gpu.returned_share, gpu.median_hours_out),
            (1, 0.0, None)
        );
        // 100 nodes over 28 days, 3 incidents.
        assert!((s.mtbi_days.unwrap() - 100.0 * 28.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.repeat_nodes.len(), 1);
        assert_eq!(
            (s.repeat_nodes[0].node.as_str(), s.repeat_nodes[0].incidents),
            ("n1", 2)
        );
    }

    #[test]
    fn an_incident_from_before_the_range_counts_without_a_time_out() {
        let changes = vec![
            change("n1", -DAY, "drain (applied)", "hc: ECC_DBE_VOLATILE gpu2"),
            change(
                "n1",
                100,
                "reset-gpu (applied)",
                "hc: ECC_DBE_VOLATILE gpu2 reset",
            ),
            change("n1", 200, "resume (applied)", "hc: ECC_DBE_VOLATILE gpu2"),
        ];
        let s = summarize(&changes, range(), 10);
        assert_eq!(s.total.incidents, 1);
        assert_eq!(s.by_category[0].category, "ecc");
        assert_eq!(
            (s.total.remediated_returned, s.total.median_hours_out),
            (1, None)
        );
    }

    #[test]
    fn without_state_changes_the_section_is_empty_and_says_so() {
        let s = summarize(&[], range(), 10);
        assert_eq!(
            (s.nodes_reporting, s.total.incidents, s.mtbi_days),
            (0, 0, None)
        );
    }
}
