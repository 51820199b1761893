//! The `restart-imex` rung: for a node out for IMEX findings alone. The
//! channel device is recreated when missing, the daemon restarted
//! (`[checks.imex] restart_command`, argv, under `restart_timeout_s`), and
//! the checks run again in a fresh process: clean, the node is resumed;
//! still failing, the ladder's next rung (a reboot) follows at once.

use super::{checks_again, resume_if_clean, time_left, RepairCtx, ResetEnd};
use crate::checks::imex::channel::{self, Ensured};
use crate::policy::memory::{Memory, Ours};
use crate::root::NodeRoot;
use crate::state_change::ChangeOutcome;
use lemonade_slurm::reason::with_remark;
use std::time::Duration;

/// The action and remark of the rung.
pub const RESTART_IMEX: &str = "restart-imex";

pub(super) fn restart(
    ctx: &mut RepairCtx,
    root: &NodeRoot,
    ours: &Ours,
    down: bool,
    recheck: &[String],
    memory: &mut Memory,
) -> ResetEnd {
    let settings = &ctx.config.checks.imex;
    let marked = with_remark(&ours.reason, RESTART_IMEX);
    let timeout = Duration::from_secs_f64(settings.restart_timeout_s.max(1.0));
    if !ctx.dry_run && time_left(ctx.report) < timeout {
        ctx.result.messages.push(format!(
            "healthcheck: {RESTART_IMEX}: less than {:.0} s of this run is left; the next run restarts",
            timeout.as_secs_f64()
        ));
        return ResetEnd::Wait;
    }
    if !ctx.keep_out(RESTART_IMEX, ours, down, &marked) {
        return ResetEnd::Done;
    }
    memory
        .repairs
        .started_at
        .push(ctx.report.started_at.timestamp());
    let mut done = Vec::new();
    if settings.create_channel {
        match channel::ensure(root, &settings.channel, ctx.dry_run) {
            Ok(Ensured::AlreadyThere) => {}
            Ok(Ensured::Created { major, minor }) => {
                done.push(format!("{} made ({major}:{minor})", settings.channel))
            }
            Ok(Ensured::DryRun(shown)) => ctx.result.messages.push(format!("dry-run: {shown}")),
            Err(e) => {
                let detail = format!("the channel: {e}");
                ctx.change(RESTART_IMEX, &marked, ours, ChangeOutcome::Failed, detail);
                return ResetEnd::Escalate;
            }
        }
    }
    let argv = settings.restart_command.clone();
    let shown = lemonade_slurm::command::shown(argv.iter().map(String::as_str));
    if ctx.dry_run {
        ctx.result.messages.push(format!("dry-run: {shown}"));
        let detail = "then the checks again".to_string();
        ctx.change(RESTART_IMEX, &marked, ours, ChangeOutcome::DryRun, detail);
        return ResetEnd::Done;
    }
    match crate::bounded::run(&argv, b"", timeout.min(time_left(ctx.report))) {
        Ok(f) => done.push(format!("`{shown}` in {:.1} s", f.elapsed.as_secs_f64())),
        Err(e) => {
            let detail = format!("`{shown}`: {e}");
            ctx.change(RESTART_IMEX, &marked, ours, ChangeOutcome::Failed, detail);
            return ResetEnd::Escalate;
        }
    }
    let left = timeout.min(time_left(ctx.report));
    let again = checks_again(ours, recheck, left);
    resume_if_clean(ctx, RESTART_IMEX, ours, &marked, &[], &done, again, memory)
}
