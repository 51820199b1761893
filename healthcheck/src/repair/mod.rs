//! The remediation: the periodic run repairs a node it took out, by the
//! action its findings name, and puts it back only after a clean check.
//!
//! * `reset-gpu`: once the node has no running job, the reset command per
//!   GPU under its deadline, then the checks that took the node out run
//!   again in a fresh process (NVML handles do not survive a reset). Clean:
//!   the node is resumed, and the XIDs of the reset GPUs are history. Not
//!   clean: a reboot.
//! * `restart-imex`: for a node out for IMEX findings alone, once it has no
//!   running job: the missing channel device recreated, the IMEX daemon
//!   restarted, the checks again (see [`imex`]). Clean: resumed. Not clean:
//!   a reboot.
//! * `reboot`: `scontrol reboot ASAP nextstate=DOWN reason="hc: CODE entity
//!   reboot"`. Slurm waits for the node's jobs, reboots it and keeps it DOWN:
//!   the health check that slurmd runs at start comes *before* the node
//!   registers, and a resume then would be undone by the registration, so it
//!   is the first periodic run after the reboot (Slurm no longer showing the
//!   reboot flags) that decides: clean, resume; the fault still there, the
//!   node stays DOWN with `... reboot did not help` and a human is called.
//!   With `nextstate=RESUME` the node would take jobs before any check ran.
//! * `repair`, `investigate`: never automatic; the node stays out, its reason
//!   says `human needed`, and the hooks hear of it (`hand-over`).
//! * The ladder: at most `max_remediations` within `window_days` per node;
//!   then the node stays out for a human.
//! * The breaker: one `sinfo` call; no new reset or reboot while more than
//!   `breaker_fraction` of the node's partitions is in a remediation.
//!
//! Every step is a `state_changes` row, honours `--dry-run` and is told to
//! the hooks like the policy's own changes. Never in the prolog or epilog.

pub mod breaker;
mod gate;
pub mod imex;
pub mod plan;

use crate::checks::gpu::recovery::RECOVERY_ACTION_UNAVAILABLE;
use crate::checks::xid::evaluate::{forget_before_reset, XidState};
use crate::policy::memory::{Memory, Ours, PendingReboot};
use crate::policy::{confirm, slurm, PolicyResult};
use crate::record::{RunReport, Trigger};
use crate::root::NodeRoot;
use crate::session::NodeSession;
use crate::state_change::{ChangeOutcome, StateChange};
use lemonade_config::Config;
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{
    reservation_exists, validation_reservation, NodeWriter, OutState, StateCommand, StateWrite,
};
use lemonade_slurm::reason::{owner, with_remark, ReasonOwner};
use lemonade_slurm::sinfo;
use lemonade_sql::node_jobs;
use plan::{GpuReset, HandOver, Step};
use std::time::Duration;

/// What the remediation did: its state changes and its lines for stderr.
#[derive(Debug, Clone, Default)]
pub struct RepairResult {
    pub changes: Vec<StateChange>,
    pub messages: Vec<String>,
}

/// Runs the remediation after the policy of a periodic run. Returns the
/// changes and messages it adds (the pipeline tells the hooks and exports
/// them with the policy's). `root` is the node's file system, where the
/// IMEX rung recreates a channel device.
pub fn apply(
    config: &Config,
    root: &NodeRoot,
    report: &RunReport,
    policy: &PolicyResult,
    dry_run: bool,
    recheck: &[String],
    session: &mut NodeSession,
) -> RepairResult {
    let settings = &config.remediation;
    // Slurm that just failed the policy is not asked again in this run.
    let slurm_trouble = policy
        .changes
        .iter()
        .any(|c| c.outcome == ChangeOutcome::Failed);
    if !settings.enabled || report.trigger != Trigger::Periodic || slurm_trouble {
        return RepairResult::default();
    }
    let path = session.path().to_path_buf();
    let Some(store) = session.writable() else {
        // Without the node database there is no ladder: do nothing.
        return RepairResult::default();
    };
    let mut memory = Memory::parse(
        node_jobs::policy_state(store.connection(), &path)
            .ok()
            .flatten()
            .as_deref(),
    );
    let now = report.started_at.timestamp();
    plan::prune(&mut memory.repairs, now, settings.window_days);
    let mut ctx = RepairCtx {
        config,
        report,
        dry_run: dry_run || config.policy.dry_run,
        cmds: config.slurm.commands(),
        result: RepairResult::default(),
        forget: Vec::new(),
    };
    if config.validate.gates_repair() {
        gate::release_after_verdict(&mut ctx, store.connection(), &path);
    }
    match memory.ours.clone() {
        None => memory.repairs.reboot = None,
        Some(ours) if memory.repairs.reboot.is_some() => {
            after_reboot(&mut ctx, &ours, policy, &mut memory)
        }
        Some(ours) => remediate(&mut ctx, root, &ours, recheck, &mut memory),
    }
    let _ = node_jobs::save_policy_state(store.connection(), &path, &memory.to_json());
    for change in &ctx.result.changes {
        let row = change.row(now, report.run_id);
        let _ = node_jobs::record_state_change(store.connection(), &path, &row);
    }
    if !ctx.forget.is_empty() {
        forget_xids(store, &ctx.forget, now);
    }
    ctx.result
}

/// The remediation at work on one run: what it acts with, and what it has
/// done so far.
struct RepairCtx<'a> {
    config: &'a Config,
    report: &'a RunReport,
    dry_run: bool,
    cmds: SlurmCommands,
    result: RepairResult,
    /// PCI bus ids of GPUs reset clean: their XIDs so far are history.
    forget: Vec<String>,
}

impl RepairCtx<'_> {
    fn node(&self) -> &str {
        &self.report.node
    }

    fn change(
        &mut self,
        action: &str,
        reason: &str,
        ours: &Ours,
        outcome: ChangeOutcome,
        detail: String,
    ) {
        if outcome != ChangeOutcome::Applied && outcome != ChangeOutcome::DryRun {
            self.result
                .messages
                .push(format!("healthcheck: {action}: {detail}"));
        }
        self.result.changes.push(StateChange {
            action: action.to_string(),
            reason: reason.to_string(),
            causes: ours.causes.clone(),
            outcome,
            detail,
        });
    }

    /// Makes a state change through the one writer (or shows it in
    /// dry-run); records a failure.
    fn write(&mut self, action: &str, reason: &str, ours: &Ours, command: &StateCommand) -> bool {
        match NodeWriter::new(&self.cmds, self.dry_run).apply(command) {
            StateWrite::DryRun { shown } => {
                self.result.messages.push(format!("dry-run: {shown}"));
                self.change(action, reason, ours, ChangeOutcome::DryRun, shown);
                true
            }
            StateWrite::Applied { shown } => {
                self.change(action, reason, ours, ChangeOutcome::Applied, shown);
                true
            }
            StateWrite::Failed { shown, error } => {
                let detail = format!("{shown}: {error}");
                self.change(action, reason, ours, ChangeOutcome::Failed, detail);
                false
            }
        }
    }

    /// The answer of a Slurm query, or `None` with the failure recorded
    /// (the next run asks again).
    fn ask<T, E: std::fmt::Display>(
        &mut self,
        action: &str,
        ours: &Ours,
        answer: Result<T, E>,
    ) -> Option<T> {
        match answer {
            Ok(t) => Some(t),
            Err(e) => {
                self.change(
                    action,
                    &ours.reason,
                    ours,
                    ChangeOutcome::Failed,
                    e.to_string(),
                );
                None
            }
        }
    }

    /// `scontrol update` keeping the node out (DOWN or DRAIN as it is) with `reason`.
    fn keep_out(&mut self, action: &str, ours: &Ours, down: bool, reason: &str) -> bool {
        let state = if down {
            OutState::Down
        } else {
            OutState::Drain
        };
        let command = StateCommand::take_out(self.node(), state, reason);
        self.write(action, reason, ours, &command)
    }
}

fn remediate(
    ctx: &mut RepairCtx,
    root: &NodeRoot,
    ours: &Ours,
    recheck: &[String],
    memory: &mut Memory,
) {
    let step = plan::next_step(ours, &memory.repairs, &ctx.config.remediation, false);
    if step == Step::Nothing {
        return;
    }
    let answer = sinfo::node(&ctx.cmds, ctx.node());
    let Some(current) = ctx.ask("remediation", ours, answer) else {
        return;
    };
    if owner(&current.reason) != ReasonOwner::HealthCheck {
        // Someone else's reason, or none: the node is no longer ours to repair.
        return;
    }
    let down = current.is_down() || ours.action == "down";
    match step {
        Step::Nothing => {}
        Step::HandOver(why) => hand_over(ctx, ours, down, &why, memory),
        Step::Reset(gpus) => {
            if !may_start(ctx, ours) {
                return;
            }
            if reset(ctx, ours, down, &gpus, recheck, memory) == ResetEnd::Escalate {
                next_rung(ctx, ours, down, memory);
            }
        }
        Step::RestartImex => {
            if !may_start(ctx, ours) {
                return;
            }
            if imex::restart(ctx, root, ours, down, recheck, memory) == ResetEnd::Escalate {
                next_rung(ctx, ours, down, memory);
            }
        }
        Step::Reboot => {
            if may_start(ctx, ours) {
                reboot(ctx, ours, memory);
            }
        }
    }
}

/// After a light rung that did not help: the reboot, unless the ladder ends here.
fn next_rung(ctx: &mut RepairCtx, ours: &Ours, down: bool, memory: &mut Memory) {
    match plan::next_step(ours, &memory.repairs, &ctx.config.remediation, true) {
        Step::HandOver(why) => hand_over(ctx, ours, down, &why, memory),
        _ => reboot(ctx, ours, memory),
    }
}

/// No running job, and the breaker lets a new remediation start.
fn may_start(ctx: &mut RepairCtx, ours: &Ours) -> bool {
    let answer = slurm::running_jobs(&ctx.cmds, ctx.node());
    match ctx.ask("remediation", ours, answer) {
        Some(jobs) if jobs.is_empty() => {}
        // Jobs still run (a drain lets them end), or Slurm did not answer:
        // the next run looks again.
        _ => return false,
    }
    let answer = breaker::count(&ctx.cmds, ctx.node());
    let Some(fleet) = ctx.ask("remediation", ours, answer) else {
        return false;
    };
    let fraction = ctx.config.remediation.breaker_fraction;
    if fleet.allows_one_more(fraction) {
        return true;
    }
    let detail = format!(
        "remediation breaker: {} of {} nodes in our partitions are already rebooting or in \
         remediation (limit {:.0}%); {} waits",
        fleet.in_remediation,
        fleet.nodes,
        fraction * 100.0,
        ctx.node()
    );
    ctx.change(
        "remediation",
        &ours.reason,
        ours,
        ChangeOutcome::Breaker,
        detail,
    );
    false
}

/// How a reset ended.
#[derive(Debug, PartialEq)]
enum ResetEnd {
    /// Resumed clean, printed (dry-run), or not started: nothing more now.
    Done,
    /// The reset failed or the fault is still there: the ladder's next rung.
    Escalate,
    /// The checks after it could not tell, or the run's time is spent: the
    /// node stays out and the next run goes on.
    Wait,
}

/// What the checks after a reset said.
#[derive(Debug, PartialEq)]
enum Recheck {
    Clean,
    Fault(String),
    Undecided(String),
}

/// slurmd kills HealthCheckProgram after 60 s, and the systemd unit stops
/// at 60 s too: everything a periodic run does ends within this.
const RUN_BUDGET: Duration = Duration::from_secs(55);

/// What is left of [`RUN_BUDGET`] since the run started.
fn time_left(report: &RunReport) -> Duration {
    let spent = (chrono::Utc::now() - report.started_at)
        .to_std()
        .unwrap_or_default();
    RUN_BUDGET.saturating_sub(spent)
}

/// Resets each GPU and checks again.
fn reset(
    ctx: &mut RepairCtx,
    ours: &Ours,
    down: bool,
    gpus: &[GpuReset],
    recheck: &[String],
    memory: &mut Memory,
) -> ResetEnd {
    let marked = with_remark(&ours.reason, "reset");
    let timeout = ctx.config.remediation.reset_timeout();
    if !ctx.dry_run && time_left(ctx.report) < timeout {
        ctx.result.messages.push(format!(
            "healthcheck: reset-gpu: less than {:.0} s of this run is left; the next run resets",
            timeout.as_secs_f64()
        ));
        return ResetEnd::Wait;
    }
    // Our reason says what is under way, for `sinfo -R` and the breakers of the others.
    if !ctx.keep_out("reset-gpu", ours, down, &marked) {
        return ResetEnd::Done;
    }
    memory
        .repairs
        .started_at
        .push(ctx.report.started_at.timestamp());
    let done = match reset_each(ctx, ours, &marked, gpus, timeout) {
        Ok(done) => done,
        Err(end) => return end,
    };
    if ctx.dry_run {
        ctx.change(
            "reset-gpu",
            &marked,
            ours,
            ChangeOutcome::DryRun,
            "then the checks again".into(),
        );
        return ResetEnd::Done;
    }
    let left = timeout.min(time_left(ctx.report));
    let recheck = checks_again(ours, recheck, left);
    resume_if_clean(
        ctx,
        "reset-gpu",
        ours,
        &marked,
        gpus,
        &done,
        recheck,
        memory,
    )
}

/// Runs the reset command for each GPU in turn (prints it in dry-run).
/// Returns what each reset did, or the end of the remediation at the first
/// that fails.
fn reset_each(
    ctx: &mut RepairCtx,
    ours: &Ours,
    marked: &str,
    gpus: &[GpuReset],
    timeout: Duration,
) -> Result<Vec<String>, ResetEnd> {
    let config = ctx.config;
    let mut done = Vec::new();
    for gpu in gpus {
        let argv: Vec<String> = config
            .remediation
            .reset_command
            .iter()
            .map(|a| a.replace("{gpu}", &gpu.index.to_string()))
            .collect();
        let shown = lemonade_slurm::command::shown(argv.iter().map(String::as_str));
        if ctx.dry_run {
            ctx.result.messages.push(format!("dry-run: {shown}"));
            continue;
        }
        match crate::bounded::run(&argv, b"", timeout.min(time_left(ctx.report))) {
            Ok(f) => done.push(format!(
                "{} reset in {:.1} s",
                gpu.entity,
                f.elapsed.as_secs_f64()
            )),
            Err(e) => {
                let detail = format!("`{shown}`: {e}");
                ctx.change("reset-gpu", marked, ours, ChangeOutcome::Failed, detail);
                return Err(ResetEnd::Escalate);
            }
        }
    }
    Ok(done)
}

/// After a rung's `action` (`done`: what it did): the node is resumed, and
/// the reset GPUs' XIDs forgotten, only when the checks again are clean.
#[allow(clippy::too_many_arguments)]
fn resume_if_clean(
    ctx: &mut RepairCtx,
    action: &str,
    ours: &Ours,
    marked: &str,
    gpus: &[GpuReset],
    done: &[String],
    recheck: Recheck,
    memory: &mut Memory,
) -> ResetEnd {
    let why = match recheck {
        Recheck::Clean => None,
        Recheck::Fault(why) => Some((why, ResetEnd::Escalate)),
        Recheck::Undecided(why) => Some((
            format!("{why}; the node stays out and the next run looks again"),
            ResetEnd::Wait,
        )),
    };
    if let Some((why, end)) = why {
        let detail = format!("{}; {why}", done.join(", "));
        ctx.change(action, marked, ours, ChangeOutcome::Failed, detail);
        return end;
    }
    let detail = format!("{}; the checks are clean", done.join(", "));
    ctx.change(action, marked, ours, ChangeOutcome::Applied, detail);
    let command = StateCommand::resume(ctx.node());
    if ctx.write("resume", &ours.reason, ours, &command) {
        ctx.forget.extend(gpus.iter().filter_map(|g| g.pci.clone()));
        memory.ours = None;
        memory.repairs.handed_over = None;
    }
    ResetEnd::Done
}

/// The checks of the node's causes, again, in a fresh process. The XID
/// check is not among them: its log keeps what the reset just repaired.
fn checks_again(ours: &Ours, recheck: &[String], timeout: Duration) -> Recheck {
    if recheck.is_empty() {
        return Recheck::Undecided("this run cannot run the checks again".into());
    }
    let mut names: Vec<&str> = ours
        .causes
        .iter()
        .map(|c| c.check.as_str())
        .filter(|c| *c != "xid")
        .collect();
    names.push("gpu");
    names.sort_unstable();
    names.dedup();
    let mut argv = recheck.to_vec();
    argv.extend(["run", "--no-record", "--format", "json", "--checks"].map(String::from));
    argv.push(names.join(","));
    // The checks' exit status says what they found: the report says more.
    let out = match crate::bounded::run_any_status(&argv, b"", timeout) {
        Ok(f) => f.stdout,
        Err(e) => return Recheck::Undecided(format!("the checks after it did not run: {e}")),
    };
    let report: serde_json::Value = match serde_json::from_slice(&out) {
        Ok(r) => r,
        Err(e) => return Recheck::Undecided(format!("the checks after it printed no report: {e}")),
    };
    judge_recheck(&report)
}

/// A re-check's JSON report: a fault when a finding takes the node out,
/// undecided when a check could not run.
fn judge_recheck(report: &serde_json::Value) -> Recheck {
    let with = |severities: &[&str]| -> Vec<String> {
        report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| {
                f["severity"]
                    .as_str()
                    .is_some_and(|s| severities.contains(&s))
            })
            // A driver without the recovery-action field (before R570) can
            // never tell: waiting on it would keep every reset node out.
            .filter(|f| f["code"] != RECOVERY_ACTION_UNAVAILABLE)
            .map(|f| {
                format!(
                    "{} {}",
                    f["code"].as_str().unwrap_or("?"),
                    f["entity"].as_str().unwrap_or("?")
                )
            })
            .collect()
    };
    if report["findings"].as_array().is_none() {
        return Recheck::Undecided("the checks after it printed no findings".into());
    }
    let faults = with(&["drain", "down"]);
    if !faults.is_empty() {
        return Recheck::Fault(format!(
            "the checks after it still find {}",
            faults.join(", ")
        ));
    }
    let unknown = with(&["unknown"]);
    if !unknown.is_empty() {
        return Recheck::Undecided(format!(
            "the checks after it could not tell ({})",
            unknown.join(", ")
        ));
    }
    Recheck::Clean
}

fn reboot(ctx: &mut RepairCtx, ours: &Ours, memory: &mut Memory) {
    let reason = with_remark(&ours.reason, "reboot");
    let command = StateCommand::reboot(ctx.node(), &reason);
    memory
        .repairs
        .started_at
        .push(ctx.report.started_at.timestamp());
    if ctx.write("reboot", &reason, ours, &command) && !ctx.dry_run {
        memory.repairs.reboot = Some(PendingReboot {
            at: ctx.report.started_at.timestamp(),
            reason: ours.reason.clone(),
        });
    }
}

fn hand_over(ctx: &mut RepairCtx, ours: &Ours, down: bool, why: &HandOver, memory: &mut Memory) {
    let reason = with_remark(&ours.reason, why.remark());
    if ctx.keep_out("hand-over", ours, down, &reason) {
        if let Some(c) = ctx.result.changes.last_mut() {
            c.detail = format!("{}: {}", why.explain(), c.detail);
        }
        if !ctx.dry_run {
            memory.repairs.handed_over = Some(ours.reason.clone());
        }
    }
}

/// The first periodic run after the reboot Slurm did decides.
fn after_reboot(ctx: &mut RepairCtx, ours: &Ours, policy: &PolicyResult, memory: &mut Memory) {
    let answer = sinfo::node(&ctx.cmds, ctx.node());
    let Some(current) = ctx.ask("reboot", ours, answer) else {
        return;
    };
    if breaker::rebooting(&current.state) {
        return;
    }
    if matches!(
        owner(&current.reason),
        ReasonOwner::Administrator | ReasonOwner::Lemon
    ) {
        // An administrator (or lemon) took the node over meanwhile.
        memory.repairs.reboot = None;
        return;
    }
    if !policy.unconfirmed.is_empty() {
        // A link that flaps after a boot: wait until it is confirmed or gone.
        return;
    }
    if ctx
        .report
        .findings
        .iter()
        .any(|f| f.severity == lemonade_config::Severity::Unknown)
    {
        // A check that could not run (NVML still starting) proves nothing:
        // the node stays DOWN until a run can tell.
        return;
    }
    let pending = memory.repairs.reboot.take();
    let faults: Vec<String> = ctx
        .report
        .findings
        .iter()
        .filter(|f| f.severity.removes_node())
        .filter(|f| !policy.unconfirmed.iter().any(|w| confirm::same(f, w)))
        .map(|f| format!("{} {}", f.code, f.entity))
        .collect();
    if faults.is_empty() {
        let held = ctx.config.validate.gates_repair();
        if held && !hold_for_validation(ctx, ours) {
            // No reservation, no resume: the next run tries again.
            memory.repairs.reboot = pending;
            return;
        }
        let command = StateCommand::resume(ctx.node());
        let gate = if held {
            format!(
                " (held for validation in {})",
                validation_reservation(ctx.node())
            )
        } else {
            String::new()
        };
        if ctx.write("resume", &ours.reason, ours, &command) {
            if let Some(c) = ctx.result.changes.last_mut() {
                c.detail = format!("clean check after the reboot{gate}: {}", c.detail);
            }
            if !ctx.dry_run {
                memory.ours = None;
                memory.repairs.handed_over = None;
            }
        }
        return;
    }
    hand_over(ctx, ours, true, &HandOver::RebootDidNotHelp, memory);
    if let Some(c) = ctx.result.changes.last_mut() {
        c.detail = format!("{} (still: {})", c.detail, faults.join(", "));
    }
}

/// `[validate] after_repair`: before the clean node is resumed, a
/// reservation of ours (`lemonade_validate_<node>`, `Flags=MAINT,IGNORE_JOBS`,
/// `[validate] reservation_users` only) is put on it, so that it takes no
/// user job until lemon's validation job, submitted into the reservation,
/// passes and `healthcheck validate` deletes it. Made while the node is
/// still DOWN: Slurm 22.05 reserves a DOWN node named in `Nodes=`, and so no
/// job can slip in between the resume and the reservation. False when the
/// reservation could not be made (recorded): the node then stays DOWN.
fn hold_for_validation(ctx: &mut RepairCtx, ours: &Ours) -> bool {
    let name = validation_reservation(ctx.node());
    let answer = reservation_exists(&ctx.cmds, &name);
    match ctx.ask("reserve", ours, answer) {
        None => false,
        Some(true) => true,
        Some(false) => {
            let settings = &ctx.config.validate;
            let command = StateCommand::reserve(
                &name,
                ctx.node(),
                settings.reservation_minutes,
                &settings.reservation_users,
            );
            ctx.write("reserve", &ours.reason, ours, &command)
        }
    }
}

/// Drops the XIDs of GPUs reset clean from the XID check's state.
fn forget_xids(store: &mut lemonade_sql::node::NodeStore, pci: &[String], at: i64) {
    let Some(mut state) = store
        .check_state("xid")
        .ok()
        .flatten()
        .and_then(|json| serde_json::from_str::<XidState>(&json).ok())
    else {
        return;
    };
    for bus in pci {
        forget_before_reset(&mut state, bus, at);
    }
    if let Ok(json) = serde_json::to_string(&state) {
        let _ = store.set_check_state("xid", &json, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn finding(code: &str, severity: &str) -> serde_json::Value {
        json!({"check": "gpu", "entity": "gpu3", "code": code, "severity": severity})
    }

    #[test]
    fn a_recheck_with_only_ok_and_warnings_is_clean() {
        let report = json!({"findings": [finding("GPU_OK", "ok"), finding("GPU_TEMP", "warning")]});
        assert_eq!(judge_recheck(&report), Recheck::Clean);
    }

    #[test]
    fn a_recheck_that_still_finds_the_fault_escalates_even_beside_an_unknown() {
        let report =
            json!({"findings": [finding("NVML_TIMEOUT", "unknown"), finding("GPU_LOST", "down")]});
        match judge_recheck(&report) {
            Recheck::Fault(why) => assert!(why.contains("GPU_LOST gpu3"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_recheck_that_could_not_tell_is_undecided_not_a_fault() {
        let report = json!({"findings": [finding("NVML_TIMEOUT", "unknown")]});
        assert!(matches!(judge_recheck(&report), Recheck::Undecided(_)));
        assert!(matches!(
            judge_recheck(&json!({"oops": 1})),
            Recheck::Undecided(_)
        ));
    }

    #[test]
    fn a_driver_that_cannot_give_its_recovery_action_does_not_hold_a_clean_recheck() {
        let report = json!({"findings": [
            finding("RECOVERY_ACTION_UNAVAILABLE", "unknown"),
            finding("GPU_OK", "ok")
        ]});
        assert_eq!(judge_recheck(&report), Recheck::Clean);
        // The action itself still decides.
        let report = json!({"findings": [finding("RECOVERY_GPU_RESET", "down")]});
        assert!(matches!(judge_recheck(&report), Recheck::Fault(_)));
    }

    #[test]
    fn checks_that_cannot_run_again_leave_the_node_waiting() {
        let ours: Ours = serde_json::from_value(json!({
            "action": "drain", "reason": "hc: GPU_LOST gpu3", "causes": [], "at": 0, "clean_runs": 0
        }))
        .unwrap();
        assert!(matches!(
            checks_again(&ours, &[], Duration::from_secs(1)),
            Recheck::Undecided(_)
        ));
        let missing = vec!["/nonexistent/healthcheck".to_string()];
        match checks_again(&ours, &missing, Duration::from_secs(1)) {
            Recheck::Undecided(why) => assert!(why.contains("did not run"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
