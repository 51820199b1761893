//! Acting on lemons: drain new ones, with every safety of the design.
//!
//! * Only nodes in service are drained; the state of all nodes comes from one
//!   `sinfo` call ([`lemonade_slurm::sinfo`]). A node that is down, drained,
//!   draining, in maintenance, rebooting, powered off, in a state we do not
//!   know, or carries any reason at all (an administrator's words included)
//!   is left alone.
//! * Nothing is ever resumed.
//! * A circuit breaker caps drains per run at `max_drain_fraction` of the
//!   fleet (rounded up) and at `max_drains_per_run`; past the cap the worst
//!   are drained and the rest are reported, and the run exits with an error.
//! * A failed or stale ingest drains nothing.
//! * `--dry-run` prints the scontrol argv and records only `would_drain`.
//! * The drain itself is [`lemonade_slurm::node_state`]'s, the one writer of node states.

use crate::db::{self, NodeIds};
use crate::decide::{self, Scores, Verdict};
use crate::error::{LemonError, Result};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{NodeWriter, StateCommand, StateWrite};
use lemonade_slurm::sinfo;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;

/// What was done about one flagged node.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Drained,
    WouldDrain,
    DrainFailed,
    SkippedOutOfService,
    SkippedUnknownToSlurm,
    HeldByBreaker,
    /// Not drained because the ingest failed or the history is stale.
    Refused,
    /// Drained by lemon earlier and not released: nothing new.
    KnownLemon,
    /// A `lemon watch` call below the drain tier's bar: recorded and told
    /// to the hooks, never drained.
    Reported,
}

impl Action {
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::Drained => "drained",
            Action::WouldDrain => "would_drain",
            Action::DrainFailed => "drain_failed",
            Action::SkippedOutOfService => "skipped_out_of_service",
            Action::SkippedUnknownToSlurm => "skipped_unknown_to_slurm",
            Action::HeldByBreaker => "held_by_breaker",
            Action::Refused => "refused",
            Action::KnownLemon => "known_lemon",
            Action::Reported => "reported",
        }
    }
}

/// One line of the action plan.
#[derive(Debug, Clone, Serialize)]
pub struct NodeOutcome {
    pub node: String,
    pub action: Action,
    pub reason: String,
    /// The scontrol argv, for drains (done or not).
    pub command: Option<String>,
    pub detail: String,
}

/// The result of acting.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ActReport {
    pub outcomes: Vec<NodeOutcome>,
    pub breaker_tripped: bool,
    pub breaker_cap: usize,
    /// Why nothing was drained, when so.
    pub refused: Option<String>,
}

impl ActReport {
    /// Nodes newly drained (or that would be, in a dry run).
    pub fn new_lemons(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o.action, Action::Drained | Action::WouldDrain))
            .count()
    }
}

/// Settings of acting.
pub struct ActParams<'a> {
    pub slurm: &'a SlurmCommands,
    pub dry_run: bool,
    pub window_days: u32,
    pub max_drain_fraction: f64,
    pub max_drains_per_run: u32,
    pub now: i64,
}

/// The breaker's cap for a fleet of `fleet` nodes.
pub fn breaker_cap(fleet: usize, fraction: f64, max: u32) -> usize {
    ((fleet as f64 * fraction).ceil() as usize).min(max as usize)
}

/// Decides and carries out the drains of the flagged nodes. `refuse` (a
/// failed or stale ingest) turns every drain into a report line.
pub fn act(
    conn: &Connection,
    scores: &Scores,
    p: &ActParams<'_>,
    refuse: Option<String>,
) -> Result<ActReport> {
    let mut report = ActReport {
        refused: refuse.clone(),
        ..ActReport::default()
    };
    let flagged: Vec<&Verdict> = scores.flagged().collect();
    if flagged.is_empty() {
        return Ok(report);
    }
    if let Some(why) = refuse {
        for v in flagged {
            report.outcomes.push(NodeOutcome {
                node: v.signals.node.clone(),
                action: Action::Refused,
                reason: decide::reason(v, p.window_days),
                command: None,
                detail: format!("not drained: {why}"),
            });
        }
        return Ok(report);
    }
    let active = db::active_lemons(conn)?;
    let ids = NodeIds::load(conn)?;
    let states = sinfo::all_nodes(p.slurm)
        .map_err(|source| LemonError::Slurm {
            what: "sinfo".into(),
            source,
        })?
        .nodes;
    report.breaker_cap = breaker_cap(states.len(), p.max_drain_fraction, p.max_drains_per_run);
    let writer = NodeWriter::new(p.slurm, p.dry_run);
    let mut drained = 0usize;
    for v in flagged {
        let node = &v.signals.node;
        let reason = decide::reason(v, p.window_days);
        let drain_node = StateCommand::drain(node, &reason);
        let command = writer.shown(&drain_node);
        let mut out = NodeOutcome {
            node: node.clone(),
            action: Action::KnownLemon,
            reason: reason.clone(),
            command: None,
            detail: String::new(),
        };
        let id = ids.get(node);
        if let Some(at) = id.and_then(|id| active.get(&id)) {
            out.detail = format!("drained by lemon at {}", db::fmt_time(*at));
        } else if let Some(state) = states.get(node).filter(|s| !s.in_service()) {
            out.action = Action::SkippedOutOfService;
            out.detail = format!("state {}, reason `{}`", state.state, state.reason);
        } else if !states.contains_key(node) {
            out.action = Action::SkippedUnknownToSlurm;
            out.detail = "sinfo does not list it".into();
        } else if drained >= report.breaker_cap {
            out.action = Action::HeldByBreaker;
            out.command = Some(command);
            out.detail = format!(
                "circuit breaker: at most {} drains per run",
                report.breaker_cap
            );
            report.breaker_tripped = true;
        } else {
            out.command = Some(command);
            (out.action, out.detail) = drain(&writer, &drain_node);
            if out.action != Action::DrainFailed {
                drained += 1;
            }
        }
        record(conn, v, &out, p)?;
        report.outcomes.push(out);
    }
    Ok(report)
}

/// Drains one node through the one writer (only shown in a dry run): what
/// that became, and why when it failed.
fn drain(writer: &NodeWriter, command: &StateCommand) -> (Action, String) {
    match writer.apply(command) {
        StateWrite::DryRun { .. } => (Action::WouldDrain, String::new()),
        StateWrite::Applied { .. } => (Action::Drained, String::new()),
        StateWrite::Failed { error, .. } => (Action::DrainFailed, error.to_string()),
    }
}

/// Writes a decision, skipping repeats of the node's last decision so that
/// an hourly cron does not fill the history with the same line.
fn record(conn: &Connection, v: &Verdict, out: &NodeOutcome, p: &ActParams<'_>) -> Result<()> {
    if out.action == Action::KnownLemon {
        return Ok(());
    }
    let mut ids = NodeIds::load(conn)?;
    let node = ids.get_or_insert(conn, &out.node)?;
    let last = db::decisions::last_action(conn, node)?;
    let action = out.action.as_str();
    if last.as_deref() == Some(action) && out.action != Action::Drained {
        return Ok(());
    }
    let signals = serde_json::json!({
        "signals": v.signals,
        "tripped": v.tripped,
        "p_value": v.p_value,
        "expected_fails": v.expected_fails,
        "detail": out.detail,
    });
    db::decisions::insert(
        conn,
        &db::decisions::NewDecision {
            at: p.now,
            node,
            action,
            reason: &out.reason,
            signals: &signals.to_string(),
            jobs: &serde_json::to_string(&v.signals.failing_jobs).unwrap_or_default(),
            dry_run: p.dry_run,
        },
    )
}

/// `lemon release NODE`: forgives the node's history from now on. Slurm is not touched.
pub fn release(conn: &Connection, node: &str, note: &str, now: i64) -> Result<()> {
    let mut ids = NodeIds::load(conn)?;
    let id = ids.get_or_insert(conn, node)?;
    db::decisions::insert_release(conn, id, note, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_rounds_up_and_respects_the_absolute_cap() {
        assert_eq!(breaker_cap(3, 0.02, 10), 1);
        assert_eq!(breaker_cap(4000, 0.02, 10), 10);
        assert_eq!(breaker_cap(100, 0.02, 10), 2);
        assert_eq!(breaker_cap(0, 0.02, 10), 0);
    }
}
