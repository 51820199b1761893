//! Which idle nodes to validate now, within a budget of machine time (issue
//! 31, after Anubis's selector). Pure: the nodes as lemon sees them in, the
//! picks in order out.
//!
//! # Order
//! 1. Nodes back from repair or reboot and not validated since. They are
//!    required: the repair loop resumes a node only once its validation
//!    passes, so until it runs the node is out of service anyway. They are
//!    picked whatever the budget says, and they are charged to it: a week
//!    of many repairs leaves less time for the nodes picked by risk, so the
//!    total stays near the budget without ever holding a repaired node back.
//!    The longest waiting goes first.
//! 2. New nodes, then nodes whose firmware changed: nothing the fleet
//!    learned holds for them yet. Within the budget.
//! 3. The rest by risk, highest first, within the budget. Anubis estimates
//!    from each node's incident history how likely an incident is before
//!    the next validation; lemon has the same two parts:
//!    `risk = 1 - (1 - score) * exp(-hazard_per_day * days_since_validation)`,
//!    the chance that lemon's suspicion (`score`, in [0, 1]) is right or
//!    that a fault arose, at the node's hazard, since its last validation.
//!    A node never validated counts as validated `never_validated_days` ago.
//!
//! # Budget
//! At most `budget_fraction` (default 2%) of the fleet's node-hours per day
//! go to validation: a 1000-node fleet in service 24 h gives 480
//! node-hours a day, 240 two-hour validations. What the last 24 hours spent
//! is deducted, so hourly `lemon run`s share one daily budget.

use serde::Serialize;

/// What Slurm and lemon say a node is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    Idle,
    /// Running jobs: never taken from its users.
    Allocated,
    /// Drained by Lemonade for repair (its reason starts `hc:` or `lemon:`).
    DrainedForRepair,
    /// Down, drained by someone else, reserved...: not ours to validate.
    Other,
}

/// One node as the selector sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub state: NodeState,
    /// When it came back from repair or reboot, if it has not been
    /// validated since.
    pub returned_at: Option<i64>,
    pub new_node: bool,
    pub firmware_changed: bool,
    /// lemon's suspicion of the node, in [0, 1].
    pub score: f64,
    /// Incidents a day expected of the node (lemon's hazard).
    pub hazard_per_day: f64,
    pub last_validated: Option<i64>,
    /// Hours a day the node is in service (24 for a full-time node): its
    /// share of the fleet's node-hours.
    pub node_hours_per_day: f64,
}

/// Why a node was picked, in the order the reasons are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ReturnedFromRepair,
    New,
    FirmwareChanged,
    Risk,
}

/// The budget's inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Fraction of the fleet's node-hours a day (`[validate] budget_fraction`).
    pub fraction: f64,
    /// Node-hours validation used over the last 24 hours.
    pub spent_node_hours: f64,
    /// How long one node's validation takes, in hours.
    pub duration_h: f64,
    /// `[validate] never_validated_days`.
    pub never_validated_days: f64,
}

/// One node to validate now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    pub node: String,
    pub reason: Reason,
    pub risk: f64,
}

/// The selector's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection {
    /// In the order to submit them.
    pub picks: Vec<Pick>,
    /// The day's budget, in node-hours.
    pub budget_node_hours: f64,
    /// What the budget has left after these picks (negative: required
    /// nodes overdrew it).
    pub left_node_hours: f64,
    /// Candidates left for lack of budget, most urgent first.
    pub deferred: Vec<String>,
}

/// Picks which idle nodes to validate now, at `now` (unix seconds).
pub fn select(nodes: &[NodeInfo], budget: &Budget, now: i64) -> Selection {
    let total: f64 = nodes.iter().map(|n| n.node_hours_per_day.max(0.0)).sum();
    let budget_node_hours = budget.fraction * total;
    let mut left = budget_node_hours - budget.spent_node_hours;
    let mut candidates: Vec<(Reason, f64, i64, &NodeInfo)> = nodes
        .iter()
        .filter_map(|n| {
            let reason = reason(n)?;
            let risk = risk(n, budget.never_validated_days, now);
            (reason != Reason::Risk || risk > 0.0)
                .then(|| (reason, risk, n.returned_at.unwrap_or(0), n))
        })
        .collect();
    // Reason first; then the longest waiting (returned) or the riskiest.
    candidates.sort_by(|a, b| {
        (a.0.cmp(&b.0))
            .then(a.2.cmp(&b.2))
            .then(b.1.total_cmp(&a.1))
            .then(a.3.name.cmp(&b.3.name))
    });
    let mut picks = Vec::new();
    let mut deferred = Vec::new();
    for (reason, risk, _, node) in candidates {
        let required = reason == Reason::ReturnedFromRepair;
        if required || left >= budget.duration_h {
            left -= budget.duration_h;
            picks.push(Pick {
                node: node.name.clone(),
                reason,
                risk,
            });
        } else {
            deferred.push(node.name.clone());
        }
    }
    Selection {
        picks,
        budget_node_hours,
        left_node_hours: left,
        deferred,
    }
}

/// Why `n` is a candidate, or `None` when it is not one now.
fn reason(n: &NodeInfo) -> Option<Reason> {
    match (n.state, n.returned_at.is_some()) {
        (NodeState::Idle | NodeState::DrainedForRepair, true) => Some(Reason::ReturnedFromRepair),
        (NodeState::Idle, false) if n.new_node => Some(Reason::New),
        (NodeState::Idle, false) if n.firmware_changed => Some(Reason::FirmwareChanged),
        (NodeState::Idle, false) => Some(Reason::Risk),
        _ => None,
    }
}

/// `1 - (1 - score) * exp(-hazard * days since the last validation)`.
pub fn risk(n: &NodeInfo, never_validated_days: f64, now: i64) -> f64 {
    let days = match n.last_validated {
        Some(t) => ((now - t).max(0)) as f64 / 86_400.0,
        None => never_validated_days,
    };
    let score = n.score.clamp(0.0, 1.0);
    let quiet = (-n.hazard_per_day.max(0.0) * days).exp();
    1.0 - (1.0 - score) * quiet
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_760_000_000;
    const DAY: i64 = 86_400;

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            state: NodeState::Idle,
            returned_at: None,
            new_node: false,
            firmware_changed: false,
            score: 0.0,
            hazard_per_day: 0.01,
            last_validated: Some(NOW - 10 * DAY),
            node_hours_per_day: 24.0,
        }
    }

    fn budget(spent: f64, duration_h: f64) -> Budget {
        Budget {
            fraction: 0.02,
            spent_node_hours: spent,
            duration_h,
            never_validated_days: 30.0,
        }
    }

    fn names(s: &Selection) -> Vec<&str> {
        s.picks.iter().map(|p| p.node.as_str()).collect()
    }

    #[test]
    fn two_percent_of_100_full_time_nodes_is_48_node_hours_or_24_two_hour_runs() {
        let fleet: Vec<NodeInfo> = (0..100).map(|i| node(&format!("n{i:03}"))).collect();
        let s = select(&fleet, &budget(0.0, 2.0), NOW);
        assert_eq!(s.budget_node_hours, 48.0);
        assert_eq!(s.picks.len(), 24);
        assert_eq!(s.deferred.len(), 76);
        assert_eq!(s.left_node_hours, 0.0);
        // What the last 24 hours spent is deducted: 40 of 48 leaves 4 runs.
        assert_eq!(select(&fleet, &budget(40.0, 2.0), NOW).picks.len(), 4);
        // A node in service half the day brings half the node-hours.
        let mut half = fleet.clone();
        half.iter_mut().for_each(|n| n.node_hours_per_day = 12.0);
        assert_eq!(select(&half, &budget(0.0, 2.0), NOW).picks.len(), 12);
    }

    #[test]
    fn nodes_back_from_repair_are_picked_first_even_past_the_budget_and_charged_to_it() {
        let mut fleet: Vec<NodeInfo> = (0..10).map(|i| node(&format!("n{i}"))).collect();
        fleet[7].state = NodeState::DrainedForRepair;
        fleet[7].returned_at = Some(NOW - 3600);
        fleet[2].returned_at = Some(NOW - 7200);
        // 10 nodes x 24 h x 2% = 4.8 node-hours; spent already.
        let s = select(&fleet, &budget(4.8, 2.0), NOW);
        assert_eq!(names(&s), ["n2", "n7"]);
        assert!(s
            .picks
            .iter()
            .all(|p| p.reason == Reason::ReturnedFromRepair));
        assert_eq!(s.left_node_hours, -4.0);
        assert_eq!(s.deferred.len(), 8);
    }

    #[test]
    fn new_nodes_then_changed_firmware_then_risk_and_busy_nodes_never() {
        let mut fleet: Vec<NodeInfo> = (0..50).map(|i| node(&format!("n{i:02}"))).collect();
        fleet[40].firmware_changed = true;
        fleet[30].new_node = true;
        fleet[20].score = 0.6; // lemon suspects it
        fleet[10].last_validated = None; // never validated: 30 days
        fleet[5].score = 0.9;
        fleet[5].state = NodeState::Allocated; // busy: left to its users
        fleet[6].state = NodeState::Other;
        fleet[6].returned_at = Some(NOW); // down by someone else's hand
        fleet[7].state = NodeState::DrainedForRepair; // still in repair
                                                      // 50 x 24 x 2% = 24 node-hours: four six-hour validations.
        let s = select(&fleet, &budget(0.0, 6.0), NOW);
        assert_eq!(names(&s), ["n30", "n40", "n20", "n10"]);
        let reasons: Vec<Reason> = s.picks.iter().map(|p| p.reason).collect();
        assert_eq!(
            reasons,
            [
                Reason::New,
                Reason::FirmwareChanged,
                Reason::Risk,
                Reason::Risk
            ]
        );
        assert!(!s
            .deferred
            .iter()
            .any(|n| ["n05", "n06", "n07"].contains(&n.as_str())));
    }

    #[test]
    fn risk_grows_with_hazard_and_time_since_validation_and_starts_at_the_score() {
        let mut n = node("a");
        n.last_validated = Some(NOW);
        n.score = 0.25;
        assert!((risk(&n, 30.0, NOW) - 0.25).abs() < 1e-12);
        n.score = 0.0;
        n.hazard_per_day = 0.1;
        n.last_validated = Some(NOW - 10 * DAY);
        assert!((risk(&n, 30.0, NOW) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        n.last_validated = None;
        assert!((risk(&n, 30.0, NOW) - (1.0 - (-3.0f64).exp())).abs() < 1e-12);
        // A node validated just now with no suspicion is no candidate.
        n.last_validated = Some(NOW);
        let s = select(&[n], &budget(0.0, 0.1), NOW);
        assert!(s.picks.is_empty());
    }
}
