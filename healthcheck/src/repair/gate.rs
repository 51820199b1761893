//! The end of the validation gate (see `hold_for_validation`): the
//! reservation that held a repaired node cannot be deleted by
//! `healthcheck validate` while the validation job it runs in is still in
//! it (Slurm: "Requested reservation is in use"). So the periodic run
//! deletes it: once the node database holds a verdict (pass or fail) newer
//! than the reservation, whichever job ran it has ended or is ending.

use super::RepairCtx;
use crate::state_change::{ChangeOutcome, StateChange};
use lemonade_slurm::node_state::{
    reservation_exists, validation_reservation, NodeWriter, StateCommand, StateWrite,
};
use lemonade_sql::rusqlite::Connection;
use lemonade_sql::{node_jobs, node_validation};
use std::path::Path;

/// Deletes the node's validation reservation when a verdict came after it.
pub(super) fn release_after_verdict(ctx: &mut RepairCtx, conn: &Connection, path: &Path) {
    let now = ctx.report.started_at.timestamp();
    let horizon = now - 60 * ctx.config.validate.reservation_minutes as i64;
    let Ok(rows) = node_jobs::state_changes_since(conn, path, horizon) else {
        return;
    };
    let applied = |action: &str| {
        rows.iter()
            .filter(|r| r.action == action && r.outcome == "applied")
            .map(|r| r.at)
            .max()
    };
    let Some(reserved_at) = applied("reserve") else {
        return;
    };
    if applied("unreserve").is_some_and(|at| at >= reserved_at) {
        return;
    }
    let judged = matches!(
        node_validation::last(conn, path),
        Ok(Some((at, verdict))) if at >= reserved_at && verdict != "unknown"
    );
    if !judged {
        return;
    }
    let name = validation_reservation(ctx.node());
    if !reservation_exists(&ctx.cmds, &name).unwrap_or(false) {
        return;
    }
    let command = StateCommand::unreserve(&name);
    let (outcome, detail) = match NodeWriter::new(&ctx.cmds, ctx.dry_run).apply(&command) {
        StateWrite::Applied { shown } => (ChangeOutcome::Applied, shown),
        StateWrite::DryRun { shown } => (ChangeOutcome::DryRun, shown),
        // The validation job still ends: the next run tries again.
        StateWrite::Failed { shown, error } => (ChangeOutcome::Failed, format!("{shown}: {error}")),
    };
    ctx.result.changes.push(StateChange {
        action: "unreserve".into(),
        reason: name,
        causes: Vec::new(),
        outcome,
        detail: format!("validated since the repair: {detail}"),
    });
}
