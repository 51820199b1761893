//! The node-state policy: from a run's findings to what Slurm is told.
//!
//! One module, used by every entry point (periodic run, prolog, epilog, SPANK):
//!
//! * `down` findings take the node out now (`State=DOWN`, so slurmctld
//!   requeues its batch jobs; or `drain-requeue`), `drain` findings drain it;
//! * a drain or down finding of a check in `confirm_runs` acts only once seen
//!   in N of its last M runs ([`confirm`]); until then it is a warning;
//! * `warning` and `unknown` are only recorded, but `unknown` on the same
//!   check for `unknown_runs_to_warning` runs in a row adds a warning of its own;
//! * the reason is ours (`hc: <CODE> <entity>`), and a reason without our
//!   prefix is never overwritten nor resumed;
//! * a node we took out only for auto-resumable checks (mounts), or for the
//!   driver's DRAIN_P2P recovery action, which asks only to be re-queried, is
//!   resumed after `clean_runs_to_resume` clean runs;
//! * the fleet breaker asks `sinfo` once, only when about to act, how many
//!   nodes of our partitions took the same code within
//!   `fleet_breaker_window_s`, and stands down when at least
//!   `fleet_breaker_min_nodes` and more than `fleet_breaker_fraction` did;
//! * Slurm that does not answer is recorded (a state change `failed` and an
//!   `unknown` finding), never retried within the run: the next run tries again.
//!
//! Every change (and every refusal to change) is a row of `state_changes`.

pub mod confirm;
pub mod grace;
pub mod memory;
pub mod reason;
pub mod slurm;

use crate::finding::Finding;
use crate::record::RunReport;
use crate::session::NodeSession;
use crate::state_change::{Cause, ChangeOutcome, StateChange};
use lemonade_config::{Config, DownAction, Severity};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{NodeWriter, OutState, StateCommand, StateWrite};
use lemonade_slurm::reason::{is_ours_remarked, owner, ReasonOwner};
use lemonade_slurm::sinfo;
use lemonade_sql::node::FindingRow;
use lemonade_sql::node_jobs;
use lemonade_sql::rusqlite::Connection;
use lemonade_sql::StoreError;
use memory::{Memory, Ours};
use std::collections::BTreeSet;
use std::path::Path;

/// Code of the policy's warning for a check that keeps being `unknown`.
pub const UNKNOWN_STREAK: &str = "UNKNOWN_STREAK";
/// Code of the policy's finding when Slurm could not be reached.
pub const SLURM_UNREACHABLE: &str = "SLURM_UNREACHABLE";

/// What applying the policy did.
#[derive(Debug, Clone, Default)]
pub struct PolicyResult {
    pub changes: Vec<StateChange>,
    /// The policy's own findings (unknown streaks, Slurm unreachable).
    pub findings: Vec<Finding>,
    /// Lines for stderr: the dry-run commands, the breaker's alarm.
    pub messages: Vec<String>,
    /// Drain and down findings that wait, for confirmation (see [`confirm`])
    /// or for the boot grace to end (see [`grace`]), as the warnings they
    /// stand for meanwhile.
    pub unconfirmed: Vec<Finding>,
}

/// Applies the policy to a finished run and returns what it adds: its state
/// changes, its own findings and its messages; the report is left as it is.
/// What it remembers (and what it did) is written to the node database when
/// the run records.
pub fn apply(
    config: &Config,
    report: &RunReport,
    dry_run: bool,
    session: &mut NodeSession,
) -> PolicyResult {
    let path = session.path().to_path_buf();
    let mut memory = Memory::parse(
        session
            .readable()
            .and_then(|s| {
                node_jobs::policy_state(s.connection(), &path)
                    .ok()
                    .flatten()
            })
            .as_deref(),
    );
    let dry_run = dry_run || config.policy.dry_run;
    let mut result = decide(
        config,
        report,
        dry_run,
        &mut memory,
        &config.slurm.commands(),
        &mut |_| {},
    );
    if let Some(store) = session.writable() {
        let lost = remember(store.connection(), &path, &memory, &result, report);
        result.messages.extend(lost);
    }
    result
}

/// Writes the memory, the state changes and the policy's findings. Best
/// effort, since the node's state is already set: what could not be written
/// comes back as lines for stderr, so that a lost record is at least said.
fn remember(
    conn: &Connection,
    path: &Path,
    memory: &Memory,
    result: &PolicyResult,
    report: &RunReport,
) -> Vec<String> {
    let mut lost = Vec::new();
    let mut keep = |what: &str, written: Result<(), StoreError>| {
        if let Err(e) = written {
            lost.push(format!(
                "healthcheck: the policy's {what} was not recorded: {e}"
            ));
        }
    };
    keep(
        "memory",
        node_jobs::save_policy_state(conn, path, &memory.to_json()),
    );
    let at = report.started_at.timestamp();
    for change in &result.changes {
        let written = node_jobs::record_state_change(conn, path, &change.row(at, report.run_id));
        keep("state change", written);
    }
    if let Some(run_id) = report.run_id {
        let rows: Vec<FindingRow> = result.findings.iter().map(FindingRow::from).collect();
        keep(
            "findings",
            node_jobs::add_findings(conn, path, run_id, &rows),
        );
    }
    lost
}

/// The policy proper, over a memory and a Slurm. `before_slurm` is called
/// before each Slurm command (tests use it to observe the calls).
pub fn decide(
    config: &Config,
    report: &RunReport,
    dry_run: bool,
    memory: &mut Memory,
    cmds: &SlurmCommands,
    before_slurm: &mut dyn FnMut(&str),
) -> PolicyResult {
    let mut result = PolicyResult::default();
    unknown_streaks(config, report, memory, &mut result);
    result.unconfirmed =
        confirm::unconfirmed(&config.policy.confirm_runs, report, &mut memory.seen);
    for w in grace::waiting(config.policy.boot_grace_s, report) {
        if !result.unconfirmed.iter().any(|u| confirm::same(u, &w)) {
            result.unconfirmed.push(w);
        }
    }
    let confirmed: Vec<Finding> = report
        .findings
        .iter()
        .filter(|f| !result.unconfirmed.iter().any(|w| confirm::same(f, w)))
        .cloned()
        .collect();
    let causes = reason::causes(&confirmed);
    let waiting = !result.unconfirmed.is_empty();
    let mut ctx = PolicyCtx {
        config,
        now: report.started_at.timestamp(),
        node: &report.node,
        dry_run,
        cmds,
        before_slurm,
        result,
    };
    if memory.repairs.reboot.is_some() {
        // Between `scontrol reboot` and the first run after it, the node is
        // the remediation's: an update now could cancel the reboot.
    } else if !causes.is_empty() {
        take_out(&mut ctx, &causes, memory);
    } else if memory.ours.is_some() && !waiting {
        // A run with a finding that waits is not clean.
        maybe_resume(&mut ctx, report, memory);
    }
    ctx.result
}

fn unknown_streaks(
    config: &Config,
    report: &RunReport,
    memory: &mut Memory,
    out: &mut PolicyResult,
) {
    let limit = config.policy.unknown_runs_to_warning;
    for check in &report.checks {
        if check.worst == Severity::Unknown {
            let streak = memory.unknown_streak.entry(check.name.clone()).or_insert(0);
            *streak += 1;
            if limit > 0 && *streak >= limit {
                out.findings.push(
                    Finding::new(&check.name, "node", UNKNOWN_STREAK, Severity::Warning)
                        .expected(format!("fewer than {limit} unknown runs in a row"))
                        .actual(*streak)
                        .message(format!(
                            "check `{}` could not run {} times in a row",
                            check.name, streak
                        )),
                );
            }
        } else {
            memory.unknown_streak.remove(&check.name);
        }
    }
}

/// The policy at work on one run: what it decides with, and what it has
/// done so far.
struct PolicyCtx<'a> {
    config: &'a Config,
    now: i64,
    node: &'a str,
    dry_run: bool,
    cmds: &'a SlurmCommands,
    before_slurm: &'a mut dyn FnMut(&str),
    result: PolicyResult,
}

impl PolicyCtx<'_> {
    fn change(
        &mut self,
        action: &str,
        reason: &str,
        causes: &[Cause],
        outcome: ChangeOutcome,
        detail: String,
    ) {
        self.result.changes.push(StateChange {
            action: action.to_string(),
            reason: reason.to_string(),
            causes: causes.to_vec(),
            outcome,
            detail,
        });
    }

    fn slurm_failed(&mut self, action: &str, reason: &str, causes: &[Cause], error: String) {
        self.result.messages.push(format!(
            "healthcheck: Slurm did not answer ({error}); {action} not applied, the next run tries again"
        ));
        self.result.findings.push(Finding::unknown(
            "policy",
            "slurm",
            SLURM_UNREACHABLE,
            format!("{action} `{reason}` not applied: {error}"),
        ));
        self.change(action, reason, causes, ChangeOutcome::Failed, error);
    }

    /// Makes a state change through the one writer (or prints it in
    /// dry-run). Returns false on failure.
    fn write(
        &mut self,
        action: &str,
        reason: &str,
        causes: &[Cause],
        command: &StateCommand,
    ) -> bool {
        let writer = NodeWriter::new(self.cmds, self.dry_run);
        if !self.dry_run {
            (self.before_slurm)(&writer.shown(command));
        }
        match writer.apply(command) {
            StateWrite::DryRun { shown } => {
                self.result.messages.push(format!("dry-run: {shown}"));
                self.change(action, reason, causes, ChangeOutcome::DryRun, shown);
                true
            }
            StateWrite::Applied { shown } => {
                self.change(action, reason, causes, ChangeOutcome::Applied, shown);
                true
            }
            StateWrite::Failed { error, .. } => {
                self.slurm_failed(action, reason, causes, error.to_string());
                false
            }
        }
    }
}

fn take_out(ctx: &mut PolicyCtx, causes: &[&Finding], memory: &mut Memory) {
    let down = causes[0].severity == Severity::Down;
    let action = if down { "down" } else { "drain" };
    let reason = reason::text(causes);
    let cause_list: Vec<Cause> = causes.iter().map(|f| Cause::of(f)).collect();

    (ctx.before_slurm)("sinfo node");
    let current = match sinfo::node(ctx.cmds, ctx.node) {
        Ok(s) => s,
        Err(e) => return ctx.slurm_failed(action, &reason, &cause_list, e.to_string()),
    };
    match owner(&current.reason) {
        ReasonOwner::None | ReasonOwner::HealthCheck => {}
        other => {
            // An administrator's (or lemon's, or Slurm's) reason stays: it says
            // more than ours to whoever set it, and clearing it is theirs to do.
            memory.ours = None;
            let detail = format!(
                "node carries a reason that is not ours ({other:?}): `{}`; left alone",
                current.reason
            );
            ctx.result.messages.push(format!("healthcheck: {detail}"));
            return ctx.change(action, &reason, &cause_list, ChangeOutcome::Skipped, detail);
        }
    }
    let state_done = if down {
        current.is_down()
    } else {
        current.is_drain() || current.is_down()
    };
    if state_done && is_ours_remarked(&current.reason, &reason) {
        // Already out for this very reason (or for it with the remediation's
        // remark, `... human needed`): nothing to tell Slurm again.
        keep_ours(memory, action, &reason, cause_list, ctx.now);
        return;
    }
    let ours_already = owner(&current.reason) == ReasonOwner::HealthCheck
        && (current.is_drain() || current.is_down());
    // The breaker guards the first step out of service, not a reason update.
    if !ours_already && !breaker_allows(ctx, action, &reason, &cause_list, &causes[0].code) {
        return;
    }
    // A node already down stays down (a reason update must not bring it
    // back as drained); otherwise `down_action` says how `down` is done.
    let state = if down && (current.is_down() || ctx.config.policy.down_action == DownAction::Down)
    {
        OutState::Down
    } else {
        OutState::Drain
    };
    // The remediation's remark (`... reboot did not help`, `... human
    // needed`) says where the repair stands: a state update for the same
    // cause keeps it (after Slurm timed a reboot out, the node is drained,
    // not down, and the update is due).
    let written = if is_ours_remarked(&current.reason, &reason) {
        current.reason.clone()
    } else {
        reason.clone()
    };
    let command = StateCommand::take_out(ctx.node, state, &written);
    if !ctx.write(action, &written, &cause_list, &command) {
        return;
    }
    if down && state == OutState::Drain && !current.is_down() {
        requeue_running(ctx, &written, &cause_list);
    }
    keep_ours(memory, action, &reason, cause_list, ctx.now);
}

/// Asks the fleet breaker: false, with the refusal recorded, when Slurm
/// does not answer or a burst of take-outs with `code` is under way: at
/// least `fleet_breaker_min_nodes` other nodes of our partitions, and more
/// than `fleet_breaker_fraction` of them, took `hc: <code>` within
/// `fleet_breaker_window_s`. Nodes that carry it longer are a repair
/// backlog: counting them kept a node with a fresh uncorrectable error in
/// service for as long as another waited for its repair (issue 48).
fn breaker_allows(
    ctx: &mut PolicyCtx,
    action: &str,
    reason: &str,
    causes: &[Cause],
    code: &str,
) -> bool {
    (ctx.before_slurm)("sinfo fleet");
    let p = &ctx.config.policy;
    let (fraction, window_s, floor) = (
        p.fleet_breaker_fraction,
        p.fleet_breaker_window_s,
        p.fleet_breaker_min_nodes,
    );
    let since = ctx.now.saturating_sub(window_s as i64);
    let fleet = match slurm::fleet(ctx.cmds, ctx.node, code, since) {
        Ok(fleet) => fleet,
        Err(e) => {
            ctx.slurm_failed(action, reason, causes, e.to_string());
            return false;
        }
    };
    let recent = fleet.recent_same_code;
    let over =
        recent >= floor.max(1) && fleet.nodes > 0 && recent as f64 / fleet.nodes as f64 > fraction;
    if !over {
        return true;
    }
    let detail = format!(
        "fleet breaker: {recent} of {} nodes in our partitions took `hc: {code}` in the last \
         {} s (floor {floor} nodes, limit {:.0}%; {} older ones are a repair backlog and do \
         not count); not touching {}: check the config that was pushed",
        fleet.nodes,
        window_s,
        fraction * 100.0,
        fleet.same_code - recent,
        ctx.node
    );
    ctx.result
        .messages
        .push(format!("healthcheck: FLEET BREAKER: {detail}"));
    ctx.change(action, reason, causes, ChangeOutcome::Breaker, detail);
    false
}

fn keep_ours(memory: &mut Memory, action: &str, reason: &str, causes: Vec<Cause>, now: i64) {
    let at = memory
        .ours
        .as_ref()
        .filter(|o| o.reason == reason)
        .map_or(now, |o| o.at);
    memory.ours = Some(Ours {
        action: action.to_string(),
        reason: reason.to_string(),
        causes,
        at,
        clean_runs: 0,
    });
}

/// `drain-requeue`: the node is drained; requeue what runs on it.
fn requeue_running(ctx: &mut PolicyCtx, reason: &str, causes: &[Cause]) {
    if ctx.dry_run {
        // Which jobs run is not asked in a dry run: the command shows where they go.
        let placeholder = StateCommand::requeue(&["<jobs running on node>".into()]);
        let shown = NodeWriter::new(ctx.cmds, true).shown(&placeholder);
        ctx.result.messages.push(format!("dry-run: {shown}"));
        return;
    }
    (ctx.before_slurm)("squeue");
    let jobs = match slurm::running_jobs(ctx.cmds, ctx.node) {
        Ok(j) => j,
        Err(e) => return ctx.slurm_failed("requeue", reason, causes, e.to_string()),
    };
    if jobs.is_empty() {
        return;
    }
    ctx.write("requeue", reason, causes, &StateCommand::requeue(&jobs));
}

fn maybe_resume(ctx: &mut PolicyCtx, report: &RunReport, memory: &mut Memory) {
    let Some(ours) = memory.ours.as_mut() else {
        return;
    };
    let ran: BTreeSet<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    // A clean run counts only if it ran every check that took the node out.
    if ours.causes.iter().all(|c| ran.contains(c.check.as_str())) {
        ours.clean_runs += 1;
    }
    let auto = ours.causes.iter().all(|c| {
        ctx.config
            .policy
            .auto_resume_checks
            .iter()
            .any(|a| a == &c.check)
            || crate::checks::gpu::recovery::resumes_once_clear(&c.code)
    });
    if !auto || ours.clean_runs < ctx.config.policy.clean_runs_to_resume {
        return;
    }
    let ours = ours.clone();
    (ctx.before_slurm)("sinfo node");
    let current = match sinfo::node(ctx.cmds, ctx.node) {
        Ok(s) => s,
        Err(e) => return ctx.slurm_failed("resume", &ours.reason, &ours.causes, e.to_string()),
    };
    if owner(&current.reason) != ReasonOwner::HealthCheck
        || !(current.is_drain() || current.is_down())
    {
        // Someone resumed it or put their own reason on it: no longer ours.
        memory.ours = None;
        if !current.reason.is_empty() {
            let detail = format!("reason is now `{}`, not ours: not resuming", current.reason);
            ctx.change(
                "resume",
                &ours.reason,
                &ours.causes,
                ChangeOutcome::Skipped,
                detail,
            );
        }
        return;
    }
    let command = StateCommand::resume(ctx.node);
    if ctx.write("resume", &ours.reason, &ours.causes, &command) && !ctx.dry_run {
        memory.ours = None;
    }
}

#[cfg(test)]
mod tests;
