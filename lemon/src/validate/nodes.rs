//! The selector's view of each node (issue 31 part 4): [`NodeInfo`] built
//! from what Slurm says now and what lemon.db remembers. Pure: the facts
//! in, one [`NodeInfo`] per node `sinfo` lists out.
//!
//! * **Returned from repair**: the node sits in its own reservation
//!   `lemonade_validate_<node>` (the node's repair loop parks it there
//!   after a reboot or repair and resumes it into it) and was not validated
//!   since the reservation began. The node deletes the reservation after
//!   its verdict.
//! * **New**: first seen (its first inventory export) within
//!   `new_node_days`, and never validated.
//! * **Firmware changed**: a firmware, VBIOS or software version changed
//!   value after its last validation.
//! * **Score**: `1 - p`, where `p` is lemon's Poisson tail of the node's
//!   uncaught failures under the fleet's rate (1 with none): how improbable
//!   its record is; a flagged node scores 1.
//! * **Hazard**: incidents a day, the node's attributed failures shrunk
//!   towards the fleet's rate: `(fails + r * D0) / (node_days + D0)` with
//!   `r` the fleet's failures per node-day and `D0` = [`PRIOR_NODE_DAYS`],
//!   so a node with little runtime is neither spotless nor doomed. `r` is
//!   at least [`MIN_RATE_PER_DAY`]: a fleet whose short history shows no
//!   failure yet still wears, and its unvalidated nodes must still come up.
//! * **Node-hours**: 24 a day for every node in service or ours to repair;
//!   nodes down or drained by someone else bring none.

use super::selector::{NodeInfo, NodeState};
use crate::decide::Scores;
use lemonade_slurm::reason::{owner, ReasonOwner};
use lemonade_slurm::sinfo;
use std::collections::{BTreeMap, BTreeSet};

/// The fleet's rate weighs as much as this many node-days of a node's own
/// history in its hazard.
pub const PRIOR_NODE_DAYS: f64 = 30.0;

/// The least fleet rate the hazard assumes: 1 incident per 1000 node-days
/// (the reliability paper's clusters saw 5 to 7 hardware failures per 1000
/// node-days).
pub const MIN_RATE_PER_DAY: f64 = 0.001;

/// What lemon.db knows of the nodes' validations and inventory.
#[derive(Debug, Clone, Default)]
pub struct Remembered {
    /// Each node's latest validation time.
    pub last_validated: BTreeMap<String, i64>,
    /// Each node's first inventory export.
    pub first_seen: BTreeMap<String, i64>,
    /// Each node's latest version change.
    pub firmware_changed_at: BTreeMap<String, i64>,
}

/// What Slurm says now.
#[derive(Debug, Clone, Default)]
pub struct SlurmNow {
    pub nodes: BTreeMap<String, sinfo::NodeState>,
    /// Nodes in their validation reservation, with its start.
    pub reservations: BTreeMap<String, Option<i64>>,
    /// Nodes with a validation job pending or running: never picked twice.
    pub queued: BTreeSet<String>,
}

/// One [`NodeInfo`] per node `sinfo` lists.
pub fn node_infos(
    slurm: &SlurmNow,
    db: &Remembered,
    scores: &Scores,
    new_node_days: u32,
    now: i64,
) -> Vec<NodeInfo> {
    let verdicts: BTreeMap<&str, _> = (scores.verdicts.iter())
        .map(|v| (v.signals.node.as_str(), v))
        .collect();
    let rate_per_day = (scores.fleet_rate_per_1000_node_days / 1000.0).max(MIN_RATE_PER_DAY);
    slurm
        .nodes
        .values()
        .map(|s| {
            let name = s.name.as_str();
            let last = db.last_validated.get(name).copied();
            let reserved = slurm.reservations.get(name);
            let returned_at = reserved
                .map(|start| start.unwrap_or(now))
                .filter(|&start| last.is_none_or(|l| l < start));
            let verdict = verdicts.get(name);
            let (score, hazard) = match verdict {
                Some(v) if v.flagged => (
                    1.0,
                    hazard(v.signals.fails(), v.signals.node_days, rate_per_day),
                ),
                Some(v) => (
                    1.0 - v.p_value,
                    hazard(v.signals.fails(), v.signals.node_days, rate_per_day),
                ),
                None => (0.0, rate_per_day),
            };
            let recently = now - i64::from(new_node_days) * 86_400;
            NodeInfo {
                name: name.to_string(),
                state: if slurm.queued.contains(name) {
                    NodeState::Other
                } else {
                    state_of(s, reserved.is_some())
                },
                returned_at,
                new_node: last.is_none() && db.first_seen.get(name).is_some_and(|&t| t >= recently),
                firmware_changed: (db.firmware_changed_at.get(name))
                    .is_some_and(|&t| t > last.unwrap_or(i64::MIN)),
                score: score.clamp(0.0, 1.0),
                hazard_per_day: hazard,
                last_validated: last,
                node_hours_per_day: if counts_in_fleet(s) { 24.0 } else { 0.0 },
            }
        })
        .collect()
}

/// `(fails + rate * D0) / (node_days + D0)`.
fn hazard(fails: u32, node_days: f64, rate_per_day: f64) -> f64 {
    (f64::from(fails) + rate_per_day * PRIOR_NODE_DAYS) / (node_days.max(0.0) + PRIOR_NODE_DAYS)
}

/// The selector's state of a node; `reserved`: it is in its validation
/// reservation, where `sinfo` shows it `maint`, `reserved` or with `$`.
fn state_of(s: &sinfo::NodeState, reserved: bool) -> NodeState {
    let base = s.base();
    let words: Vec<&str> = base.split('+').collect();
    let ours = matches!(
        owner(&s.reason),
        ReasonOwner::HealthCheck | ReasonOwner::Lemon
    );
    if s.is_drain() || s.is_down() {
        return if ours && !s.is_down() {
            NodeState::DrainedForRepair
        } else {
            NodeState::Other
        };
    }
    if words
        .iter()
        .any(|w| matches!(*w, "allocated" | "mixed" | "completing"))
    {
        return NodeState::Allocated;
    }
    if s.in_service() {
        return NodeState::Idle;
    }
    let parked = words
        .iter()
        .all(|w| matches!(*w, "idle" | "maint" | "reserved"))
        && s.flags().chars().all(|c| matches!(c, '$' | '-'))
        && (s.reason.is_empty() || ours);
    if reserved && parked {
        NodeState::Idle
    } else {
        NodeState::Other
    }
}

/// Whether a node brings its node-hours to the fleet's budget.
fn counts_in_fleet(s: &sinfo::NodeState) -> bool {
    let ours = matches!(
        owner(&s.reason),
        ReasonOwner::HealthCheck | ReasonOwner::Lemon | ReasonOwner::None
    );
    !s.is_down() && (!s.is_drain() || ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: &str, reason: &str) -> sinfo::NodeState {
        sinfo::NodeState {
            name: name.into(),
            state: state.into(),
            reason: reason.into(),
            user: "root".into(),
        }
    }

    #[test]
    fn slurm_states_map_to_what_the_selector_may_take() {
        let cases = [
            ("idle", "", false, NodeState::Idle),
            ("mixed", "", false, NodeState::Allocated),
            ("allocated", "", false, NodeState::Allocated),
            (
                "drained",
                "hc: XID_79 gpu3",
                false,
                NodeState::DrainedForRepair,
            ),
            (
                "drained",
                "lemon: 4 failing jobs",
                false,
                NodeState::DrainedForRepair,
            ),
            (
                "drained",
                "bad dimm, ticket 42 (bob)",
                false,
                NodeState::Other,
            ),
            ("down*", "Not responding", false, NodeState::Other),
            ("maint", "", true, NodeState::Idle),
            ("idle$", "", true, NodeState::Idle),
            ("reserved", "", true, NodeState::Idle),
            ("reserved", "", false, NodeState::Other),
            ("idle~", "", false, NodeState::Other),
        ];
        for (state, reason, reserved, want) in cases {
            assert_eq!(
                state_of(&node("n", state, reason), reserved),
                want,
                "{state} {reason}"
            );
        }
    }

    #[test]
    fn a_reserved_node_not_validated_since_is_returning_and_a_queued_one_is_never_picked() {
        let now = 1_800_000_000;
        let mut slurm = SlurmNow::default();
        for (n, st) in [
            ("n1", "maint"),
            ("n2", "maint"),
            ("n3", "idle"),
            ("n4", "idle"),
        ] {
            slurm.nodes.insert(n.into(), node(n, st, ""));
        }
        slurm.reservations.insert("n1".into(), Some(now - 600));
        slurm.reservations.insert("n2".into(), Some(now - 600));
        slurm.queued.insert("n4".into());
        let mut db = Remembered::default();
        db.last_validated.insert("n2".into(), now - 60); // judged, reservation not yet gone
        db.first_seen.insert("n3".into(), now - 86_400);
        db.firmware_changed_at.insert("n2".into(), now - 7200);
        let infos = node_infos(&slurm, &db, &scores_of(&[]), 7, now);
        let by: BTreeMap<&str, &NodeInfo> = infos.iter().map(|i| (i.name.as_str(), i)).collect();
        assert_eq!(by["n1"].returned_at, Some(now - 600));
        assert_eq!(by["n1"].state, NodeState::Idle);
        assert_eq!(by["n2"].returned_at, None);
        assert!(
            !by["n2"].firmware_changed,
            "changed before its last validation"
        );
        assert!(by["n3"].new_node);
        assert_eq!(by["n4"].state, NodeState::Other);
        assert!(infos.iter().all(|i| i.node_hours_per_day == 24.0));
    }

    #[test]
    fn hazard_shrinks_a_short_record_towards_the_fleet_rate() {
        // No runtime: the fleet's rate. Many node-days: the node's own.
        assert!((hazard(0, 0.0, 0.01) - 0.01).abs() < 1e-12);
        assert!((hazard(3, 30.0, 0.01) - 3.3 / 60.0).abs() < 1e-12);
        assert!((hazard(10, 1e6, 0.01) - 1e-5).abs() < 1e-6);
        // A fleet without failures still wears: never-validated nodes carry risk.
        let slurm = SlurmNow {
            nodes: [("n1".to_string(), node("n1", "idle", ""))].into(),
            ..SlurmNow::default()
        };
        let infos = node_infos(&slurm, &Remembered::default(), &scores_of(&[]), 7, 0);
        assert_eq!(infos[0].hazard_per_day, MIN_RATE_PER_DAY);
    }

    fn scores_of(_nodes: &[&str]) -> Scores {
        crate::decide::decide(crate::signals::FleetSignals::default(), &Default::default())
    }
}
