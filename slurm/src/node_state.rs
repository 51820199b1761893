//! The one writer of node states: drain, down, resume, requeue and reboot,
//! each an `scontrol` argv (never a shell string; `Reason=...` is one argv
//! element), run through [`SlurmCommands`] under its deadline, or only shown
//! in a dry run.
//!
//! The writer does not read Slurm: whether a node may be changed (its
//! reason is ours or none, it is in service) is for the caller to decide
//! from the `sinfo` it already holds, so that one run asks Slurm once.
//! What it guards is the text: a drain, down or reboot reason without our
//! prefix ([`crate::reason`]) is refused, since we could never tell it from
//! an administrator's afterwards.

use crate::command::{CommandError, SlurmCommands};
use crate::reason::{owner, ReasonOwner};
use thiserror::Error;

/// How a node is taken out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutState {
    /// Running jobs finish, no new ones start.
    Drain,
    /// Running jobs are killed and batch jobs requeued.
    Down,
}

impl OutState {
    fn as_arg(self) -> &'static str {
        match self {
            OutState::Drain => "DRAIN",
            OutState::Down => "DOWN",
        }
    }
}

/// Why a state change was not made.
#[derive(Debug, Error)]
pub enum WriteError {
    /// A reason we could not recognise as ours later: refused, not run.
    #[error("reason `{0}` does not carry our prefix (hc: or lemon:); not run")]
    ForeignReason(String),
    #[error(transparent)]
    Slurm(#[from] CommandError),
}

/// One node-state change as the argv of `scontrol`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateCommand {
    args: Vec<String>,
    /// The reason it sets, checked before it runs.
    reason: Option<String>,
}

impl StateCommand {
    /// `scontrol update NodeName=N State=DRAIN|DOWN Reason=R`.
    pub fn take_out(node: &str, state: OutState, reason: &str) -> Self {
        StateCommand::of(&[
            "update",
            &format!("NodeName={node}"),
            &format!("State={}", state.as_arg()),
            &format!("Reason={reason}"),
        ])
        .setting(reason)
    }

    pub fn drain(node: &str, reason: &str) -> Self {
        StateCommand::take_out(node, OutState::Drain, reason)
    }

    pub fn down(node: &str, reason: &str) -> Self {
        StateCommand::take_out(node, OutState::Down, reason)
    }

    /// `scontrol update NodeName=N State=RESUME`: Slurm clears the reason.
    pub fn resume(node: &str) -> Self {
        StateCommand::of(&["update", &format!("NodeName={node}"), "State=RESUME"])
    }

    /// `scontrol requeue J1,J2,...`: only batch jobs that allow it.
    pub fn requeue(jobs: &[String]) -> Self {
        StateCommand::of(&["requeue", &jobs.join(",")])
    }

    /// `scontrol reboot ASAP nextstate=DOWN reason=R N`: Slurm waits for the
    /// node's jobs and keeps it DOWN after the boot, so that a check decides.
    pub fn reboot(node: &str, reason: &str) -> Self {
        StateCommand::of(&[
            "reboot",
            "ASAP",
            "nextstate=DOWN",
            &format!("reason={reason}"),
            node,
        ])
        .setting(reason)
    }

    /// `scontrol create reservation ReservationName=NAME Nodes=N
    /// StartTime=now Duration=M Users=root Flags=MAINT,IGNORE_JOBS`: the
    /// node takes only root's jobs (the validation job) until `M` minutes
    /// pass or the reservation is deleted.
    pub fn reserve(name: &str, node: &str, minutes: u64, users: &str) -> Self {
        StateCommand::of(&[
            "create",
            "reservation",
            &format!("ReservationName={name}"),
            &format!("Nodes={node}"),
            "StartTime=now",
            &format!("Duration={minutes}"),
            &format!("Users={users}"),
            "Flags=MAINT,IGNORE_JOBS",
        ])
    }

    /// `scontrol delete ReservationName=NAME`.
    pub fn unreserve(name: &str) -> Self {
        StateCommand::of(&["delete", &format!("ReservationName={name}")])
    }

    fn of(args: &[&str]) -> Self {
        StateCommand {
            args: args.iter().map(|a| a.to_string()).collect(),
            reason: None,
        }
    }

    fn setting(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_string());
        self
    }

    /// The arguments after `scontrol`.
    pub fn args(&self) -> &[String] {
        &self.args
    }
}

/// The reservation that holds a node for its validation after a repair:
/// created by the node's repair loop, used by lemon's validation job
/// (`sbatch --reservation`), deleted by `healthcheck validate`.
pub fn validation_reservation(node: &str) -> String {
    format!("lemonade_validate_{node}")
}

/// Whether the reservation `name` exists, from `scontrol -o show
/// reservation` (one line each). Not `show reservation NAME`: for a
/// reservation that does not exist, Slurm 22.05 prints `not found` on stdout
/// and exits 1, which reads like Slurm being unreachable.
pub fn reservation_exists(cmds: &SlurmCommands, name: &str) -> Result<bool, CommandError> {
    let out = cmds.run("scontrol", &["-o", "show", "reservation"])?;
    let wanted = format!("ReservationName={name} ");
    Ok(out
        .stdout
        .lines()
        .any(|line| line.starts_with(&wanted) || line == wanted.trim_end()))
}

/// Only reasons we can recognise later are written: a node that carries
/// one we could not tell from an administrator's would never be resumed.
fn check_ours(command: &StateCommand) -> Result<(), WriteError> {
    match command.reason.as_deref().map(owner) {
        None | Some(ReasonOwner::HealthCheck | ReasonOwner::Lemon) => Ok(()),
        Some(_) => Err(WriteError::ForeignReason(
            command.reason.clone().unwrap_or_default(),
        )),
    }
}

/// What became of a state change.
#[derive(Debug)]
pub enum StateWrite {
    /// Slurm took it.
    Applied { shown: String },
    /// Dry run: shown, not run.
    DryRun { shown: String },
    /// Slurm did not answer or refused, or the reason was not ours.
    Failed { shown: String, error: WriteError },
}

impl StateWrite {
    /// The command as a person would type it.
    pub fn shown(&self) -> &str {
        match self {
            StateWrite::Applied { shown }
            | StateWrite::DryRun { shown }
            | StateWrite::Failed { shown, .. } => shown,
        }
    }

    /// Applied or shown: not failed.
    pub fn is_ok(&self) -> bool {
        !matches!(self, StateWrite::Failed { .. })
    }
}

/// Runs node-state changes, or only shows them in a dry run.
#[derive(Debug, Clone, Copy)]
pub struct NodeWriter<'a> {
    cmds: &'a SlurmCommands,
    dry_run: bool,
}

impl<'a> NodeWriter<'a> {
    pub fn new(cmds: &'a SlurmCommands, dry_run: bool) -> Self {
        NodeWriter { cmds, dry_run }
    }

    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// `/usr/bin/scontrol update ... 'Reason=hc: XID_79 gpu3'`, for
    /// `--dry-run`, logs and the commands we tell people to run.
    pub fn shown(&self, command: &StateCommand) -> String {
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        self.cmds.display("scontrol", &args)
    }

    /// Runs the change (nothing in a dry run) and says how it went.
    pub fn apply(&self, command: &StateCommand) -> StateWrite {
        let shown = self.shown(command);
        if let Err(error) = check_ours(command) {
            return StateWrite::Failed { shown, error };
        }
        if self.dry_run {
            return StateWrite::DryRun { shown };
        }
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        match self.cmds.run("scontrol", &args) {
            Ok(_) => StateWrite::Applied { shown },
            Err(e) => StateWrite::Failed {
                shown,
                error: e.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::Duration;

    /// A `scontrol` that writes its argv, one element a line, to `argv.log`.
    fn fake_scontrol(dir: &Path, exit: i32) -> SlurmCommands {
        let log = dir.join("argv.log");
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> {}; done\nexit {exit}\n",
            log.display()
        );
        let path = dir.join("scontrol");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        SlurmCommands::new(dir, None, Duration::from_secs(5))
    }

    fn logged(dir: &Path) -> Option<String> {
        std::fs::read_to_string(dir.join("argv.log")).ok()
    }

    #[test]
    fn each_change_is_an_argv_with_the_reason_one_element() {
        let drain = StateCommand::drain("n1", "hc: XID_79 gpu3");
        assert_eq!(
            drain.args(),
            [
                "update",
                "NodeName=n1",
                "State=DRAIN",
                "Reason=hc: XID_79 gpu3"
            ]
        );
        let down = StateCommand::down("n1", "lemon: 5 fails/28d");
        assert_eq!(down.args()[2], "State=DOWN");
        assert_eq!(
            StateCommand::resume("n1").args(),
            ["update", "NodeName=n1", "State=RESUME"]
        );
        assert_eq!(
            StateCommand::requeue(&["12".into(), "13".into()]).args(),
            ["requeue", "12,13"]
        );
        assert_eq!(
            StateCommand::reboot("n1", "hc: X gpu1 reboot").args(),
            [
                "reboot",
                "ASAP",
                "nextstate=DOWN",
                "reason=hc: X gpu1 reboot",
                "n1"
            ]
        );
    }

    #[test]
    fn the_validation_reservation_is_made_and_deleted_by_name() {
        let name = validation_reservation("gpu017");
        assert_eq!(name, "lemonade_validate_gpu017");
        assert_eq!(
            StateCommand::reserve(&name, "gpu017", 240, "root").args(),
            [
                "create",
                "reservation",
                "ReservationName=lemonade_validate_gpu017",
                "Nodes=gpu017",
                "StartTime=now",
                "Duration=240",
                "Users=root",
                "Flags=MAINT,IGNORE_JOBS"
            ]
        );
        assert_eq!(
            StateCommand::unreserve(&name).args(),
            ["delete", "ReservationName=lemonade_validate_gpu017"]
        );
    }

    #[test]
    fn a_reservation_is_found_by_its_exact_name_in_the_one_line_listing() {
        let dir = tempfile::tempdir().unwrap();
        // As Slurm 22.05 prints `scontrol -o show reservation`.
        let listing = "ReservationName=lemonade_validate_gpu0171 StartTime=2026-11-25T01:00:00 \
                       Nodes=gpu0171 Flags=MAINT,IGNORE_JOBS\n\
                       ReservationName=lemonade_validate_gpu017 StartTime=2026-11-25T01:00:00 \
                       Nodes=gpu017 Flags=MAINT,IGNORE_JOBS\n";
        let script = format!("#!/bin/sh\nprintf '{listing}'\n");
        let path = dir.path().join("scontrol");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cmds = SlurmCommands::new(dir.path(), None, Duration::from_secs(5));
        assert!(reservation_exists(&cmds, "lemonade_validate_gpu017").unwrap());
        assert!(!reservation_exists(&cmds, "lemonade_validate_gpu01").unwrap());
        std::fs::write(&path, "#!/bin/sh\necho 'No reservations in the system'\n").unwrap();
        assert!(!reservation_exists(&cmds, "lemonade_validate_gpu017").unwrap());
    }

    #[test]
    fn a_reason_without_our_prefix_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let cmds = fake_scontrol(dir.path(), 0);
        let writer = NodeWriter::new(&cmds, false);
        for command in [
            StateCommand::drain("n1", "bad fan"),
            StateCommand::down("n1", ""),
            StateCommand::reboot("n1", "Not responding"),
        ] {
            let out = writer.apply(&command);
            assert!(
                matches!(
                    out,
                    StateWrite::Failed {
                        error: WriteError::ForeignReason(_),
                        ..
                    }
                ),
                "{out:?}"
            );
        }
        assert_eq!(logged(dir.path()), None, "nothing ran");
    }

    #[test]
    fn a_dry_run_shows_the_command_and_runs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cmds = fake_scontrol(dir.path(), 0);
        let command = StateCommand::drain("n1", "hc: XID_79 gpu3");
        let out = NodeWriter::new(&cmds, true).apply(&command);
        let expected = format!(
            "{}/scontrol update NodeName=n1 State=DRAIN 'Reason=hc: XID_79 gpu3'",
            dir.path().display()
        );
        assert!(
            matches!(&out, StateWrite::DryRun { shown } if *shown == expected),
            "{out:?}"
        );
        assert_eq!(logged(dir.path()), None, "nothing ran");
    }

    #[test]
    fn an_applied_change_passes_the_reason_as_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let cmds = fake_scontrol(dir.path(), 0);
        let command = StateCommand::drain("n1", "hc: XID_79 gpu3; +1: $(x)");
        let out = NodeWriter::new(&cmds, false).apply(&command);
        assert!(matches!(out, StateWrite::Applied { .. }), "{out:?}");
        assert_eq!(
            logged(dir.path()).unwrap(),
            "update\nNodeName=n1\nState=DRAIN\nReason=hc: XID_79 gpu3; +1: $(x)\n"
        );
    }

    #[test]
    fn a_refused_or_missing_scontrol_is_a_failure_with_its_why() {
        let dir = tempfile::tempdir().unwrap();
        let cmds = fake_scontrol(dir.path(), 1);
        let out = NodeWriter::new(&cmds, false).apply(&StateCommand::resume("n1"));
        match &out {
            StateWrite::Failed { shown, error } => {
                assert!(
                    shown.ends_with("scontrol update NodeName=n1 State=RESUME"),
                    "{shown}"
                );
                assert!(
                    matches!(error, WriteError::Slurm(CommandError::Failed { .. })),
                    "{error}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(!out.is_ok());
        let absent = SlurmCommands::new("/nonexistent/bin", None, Duration::from_secs(1));
        let out = NodeWriter::new(&absent, false).apply(&StateCommand::resume("n1"));
        assert!(
            matches!(
                out,
                StateWrite::Failed {
                    error: WriteError::Slurm(CommandError::Bounded(
                        crate::bounded::BoundedError::Spawn { .. }
                    )),
                    ..
                }
            ),
            "{out:?}"
        );
    }
}
