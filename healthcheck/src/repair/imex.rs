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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Profile;
    use crate::exit_status::ExitStatus;
    use crate::record::{RunReport, Trigger};
    use crate::state_change::Cause;
    use lemonade_config::{Action, Config, Severity};
    use lemonade_slurm::command::SlurmCommands;
    use std::path::Path;

    fn script(dir: &Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    /// A GB200 tray out for a missing channel: a fake `scontrol` logging
    /// its arguments, a restart command leaving a mark, the checks again
    /// printing `recheck` as their report.
    struct Tray {
        dir: tempfile::TempDir,
        config: Config,
        report: RunReport,
        recheck: Vec<String>,
    }

    impl Tray {
        fn new(recheck: &str) -> Tray {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            std::fs::create_dir_all(d.join("root/proc")).unwrap();
            std::fs::create_dir_all(d.join("root/dev")).unwrap();
            std::fs::write(
                d.join("root/proc/devices"),
                "Character devices:\n511 nvidia-caps-imex-channels\n",
            )
            .unwrap();
            script(
                d,
                "scontrol",
                &format!("echo \"$@\" >> '{}/scontrol.log'", d.display()),
            );
            let restart = script(d, "restart", &format!("touch '{}/restarted'", d.display()));
            let report_path = d.join("recheck.json");
            std::fs::write(&report_path, recheck).unwrap();
            let recheck = vec![script(
                d,
                "healthcheck",
                &format!("cat '{}'", report_path.display()),
            )];
            let mut config = Config::default();
            config.slurm.bin_dir = d.to_path_buf();
            config.checks.imex.enabled = true;
            config.checks.imex.restart_command = vec![restart];
            config.checks.imex.restart_timeout_s = 5.0;
            let report = RunReport {
                node: "gb01".into(),
                started_at: chrono::Utc::now(),
                duration_ms: 0.0,
                profile: Profile::Periodic,
                trigger: Trigger::Periodic,
                job_id: None,
                worst: Severity::Drain,
                exit_code: ExitStatus::Critical,
                checks: Vec::new(),
                findings: Vec::new(),
                uptime_s: None,
                new_events: Vec::new(),
                run_id: None,
            };
            Tray {
                dir,
                config,
                report,
                recheck,
            }
        }

        fn restart(&self, dry_run: bool) -> (ResetEnd, RepairResult, Memory) {
            let mut ctx = RepairCtx {
                config: &self.config,
                report: &self.report,
                dry_run,
                cmds: SlurmCommands::new(self.dir.path(), None, Duration::from_secs(5)),
                result: RepairResult::default(),
                forget: Vec::new(),
            };
            let ours = Ours {
                action: "drain".into(),
                reason: "hc: IMEX_CHANNEL_MISSING".into(),
                causes: vec![Cause {
                    check: "imex".into(),
                    code: "IMEX_CHANNEL_MISSING".into(),
                    entity: lemonade_config::DEFAULT_IMEX_CHANNEL.into(),
                    action: Action::RestartImex,
                    pci: None,
                }],
                at: 0,
                clean_runs: 0,
            };
            let mut memory = Memory::default();
            let root = NodeRoot::new(self.dir.path().join("root"));
            let end = restart(&mut ctx, &root, &ours, false, &self.recheck, &mut memory);
            (end, ctx.result, memory)
        }

        fn scontrol(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("scontrol.log")).unwrap_or_default()
        }

        fn has(&self, path: &str) -> bool {
            self.dir.path().join(path).exists()
        }
    }

    use super::super::RepairResult;

    const CLEAN: &str = r#"{"findings": [{"check": "imex", "entity": "imex-domain", "code": "OK", "severity": "ok"}]}"#;
    const STILL: &str = r#"{"findings": [{"check": "imex", "entity": "nvidia-imex", "code": "IMEX_DOWN", "severity": "drain"}]}"#;

    #[test]
    fn the_rung_remakes_the_channel_restarts_imex_and_resumes_a_clean_node() {
        let mut tray = Tray::new(CLEAN);
        // Only root may make a device node: elsewhere the rung runs without.
        // SAFETY: geteuid has no preconditions and cannot fail.
        let may_mknod = unsafe { libc::geteuid() } == 0;
        tray.config.checks.imex.create_channel = may_mknod;
        let (end, result, memory) = tray.restart(false);
        assert_eq!(end, ResetEnd::Done);
        assert!(tray.has("restarted"));
        assert_eq!(
            tray.has("root/dev/nvidia-caps-imex-channels/channel0"),
            may_mknod
        );
        let log = tray.scontrol();
        assert!(log.contains("IMEX_CHANNEL_MISSING restart-imex"), "{log}");
        assert!(log.contains("State=RESUME"), "{log}");
        let actions: Vec<&str> = result.changes.iter().map(|c| c.action.as_str()).collect();
        assert_eq!(actions, ["restart-imex", "restart-imex", "resume"]);
        assert!(result.changes[1].detail.contains("the checks are clean"));
        assert_eq!(memory.repairs.started_at.len(), 1);
        assert!(memory.ours.is_none());
    }

    #[test]
    fn a_restart_that_did_not_help_escalates_without_resuming() {
        let tray = Tray::new(STILL);
        let (end, result, _) = tray.restart(false);
        assert_eq!(end, ResetEnd::Escalate);
        assert!(tray.has("restarted"));
        assert!(!tray.scontrol().contains("State=RESUME"));
        let last = result.changes.last().unwrap();
        assert!(
            last.detail.contains("IMEX_DOWN nvidia-imex"),
            "{}",
            last.detail
        );
    }

    #[test]
    fn a_dry_run_restarts_nothing_and_says_what_it_would_do() {
        let tray = Tray::new(CLEAN);
        let (end, result, _) = tray.restart(true);
        assert_eq!(end, ResetEnd::Done);
        assert!(!tray.has("restarted"));
        assert!(!tray.has("root/dev/nvidia-caps-imex-channels"));
        assert!(tray.scontrol().is_empty());
        let said = result.messages.join("\n");
        assert!(
            said.contains("dry-run: mknod /dev/nvidia-caps-imex-channels/channel0 c 511 0"),
            "{said}"
        );
        assert!(said.contains("/restart"), "{said}");
    }
}
