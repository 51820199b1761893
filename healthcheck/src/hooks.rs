//! `[hooks]`: the site's commands, told about every state change the policy
//! made or tried (drain, down, resume, requeue; applied, refused by the
//! breaker, failed), with one JSON object on stdin. This is how a site opens
//! a ticket or posts to a chat channel (`packaging/hooks/`).
//!
//! A hook is an argv list run without a shell, in a process group of its
//! own, under `[hooks] timeout_s`: at the deadline the whole group is killed,
//! so a hook that forks `curl` and hangs costs the run its timeout and no
//! more. Every hook run is a `state_changes` row (`action = hook`), failed or
//! not; a failure is also a line on stderr. `--dry-run` prints the hook and
//! its input instead of running it.

use crate::record::RunReport;
use crate::state_change::{Cause, ChangeOutcome, StateChange};
use lemonade_config::HooksSettings;
use serde::Serialize;

/// What a hook reads on stdin: one state change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HookEvent {
    pub node: String,
    /// Unix seconds of the run.
    pub at: i64,
    /// `drain`, `down`, `resume` or `requeue`.
    pub event: String,
    /// `applied`, `dry-run`, `failed`, `breaker` or `skipped`.
    pub outcome: String,
    pub reason: String,
    /// The first cause's code (`XID_79`), empty when there is none.
    pub code: String,
    /// The worst severity among the causes this run saw; `None` for a resume.
    pub severity: Option<String>,
    /// The first cause's repair action (`reboot`, `reset-gpu`, ...), as its
    /// finding says; `None` for a resume.
    pub action: Option<String>,
    /// Every cause: `{check, code, entity}`.
    pub causes: Vec<Cause>,
    /// Jobs running on the node as its prolog and epilog recorded them.
    pub job_ids: Vec<String>,
    /// What the attempt said: for a refusal by the fleet breaker, how many
    /// nodes took the same code how recently, which is what a site on call
    /// needs to tell a pushed config from a real fault.
    pub detail: String,
}

impl HookEvent {
    /// The event of `change`, with the severity and action of its causes in `report`.
    pub fn of(change: &StateChange, report: &RunReport, job_ids: &[String]) -> HookEvent {
        let findings: Vec<&crate::finding::Finding> = change
            .causes
            .iter()
            .filter_map(|c| {
                report
                    .findings
                    .iter()
                    .find(|f| f.check == c.check && f.code == c.code && f.entity == c.entity)
            })
            .collect();
        let resume = change.action == "resume";
        HookEvent {
            node: report.node.clone(),
            at: report.started_at.timestamp(),
            event: change.action.clone(),
            outcome: change.outcome.as_str().to_string(),
            reason: change.reason.clone(),
            code: change
                .causes
                .first()
                .map(|c| c.code.clone())
                .unwrap_or_default(),
            severity: (!resume && !findings.is_empty())
                .then(|| crate::finding::worst(findings.iter().copied()).to_string()),
            action: findings
                .first()
                .filter(|_| !resume)
                .map(|f| f.action.to_string()),
            causes: change.causes.clone(),
            job_ids: job_ids.to_vec(),
            detail: change.detail.clone(),
        }
    }
}

/// How one hook run went.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRun {
    /// Index of the event it was told about.
    pub event: usize,
    /// The hook as it would be typed.
    pub shown: String,
    pub outcome: ChangeOutcome,
    /// `ok in 12 ms`, `exited with status 3: <stderr>`, `killed at the 10 s deadline`.
    pub detail: String,
}

/// Runs every hook for every change; in dry-run, shows them instead.
pub fn notify(settings: &HooksSettings, events: &[HookEvent], dry_run: bool) -> Vec<HookRun> {
    let mut runs = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let input = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
        for argv in settings.commands.iter().filter(|a| !a.is_empty()) {
            let shown = lemonade_slurm::command::shown(argv.iter().map(String::as_str));
            if dry_run {
                runs.push(HookRun {
                    event: i,
                    detail: format!("{shown} <<< {input}"),
                    shown,
                    outcome: ChangeOutcome::DryRun,
                });
                continue;
            }
            let (outcome, detail) =
                match crate::bounded::run(argv, input.as_bytes(), settings.timeout()) {
                    Ok(done) => (
                        ChangeOutcome::Applied,
                        format!("ok in {:.0} ms", done.elapsed.as_secs_f64() * 1000.0),
                    ),
                    Err(e) => (ChangeOutcome::Failed, e.to_string()),
                };
            runs.push(HookRun {
                event: i,
                shown,
                outcome,
                detail,
            });
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::{Duration, Instant};

    fn event() -> HookEvent {
        HookEvent {
            node: "node1".into(),
            at: 1_700_000_000,
            event: "down".into(),
            outcome: "applied".into(),
            reason: "hc: XID_79 gpu3".into(),
            code: "XID_79".into(),
            severity: Some("down".into()),
            action: Some("reboot".into()),
            causes: vec![Cause {
                check: "xid".into(),
                code: "XID_79".into(),
                entity: "gpu3".into(),
                action: lemonade_config::Action::None,
                pci: None,
            }],
            job_ids: vec!["42".into()],
            detail: String::new(),
        }
    }

    fn script(dir: &Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn settings(commands: Vec<Vec<String>>, timeout_s: f64) -> HooksSettings {
        HooksSettings {
            commands,
            timeout_s,
        }
    }

    #[test]
    fn a_hook_reads_the_change_as_one_json_object_with_its_arguments_as_given() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("got");
        let hook = script(
            dir.path(),
            "hook",
            &format!("printf '%s\\n' \"$1\" > {0}; cat >> {0}", out.display()),
        );
        let runs = notify(
            &settings(vec![vec![hook, "a b; rm -rf /".into()]], 5.0),
            &[event()],
            false,
        );
        assert_eq!(runs[0].outcome, ChangeOutcome::Applied, "{runs:?}");
        let got = std::fs::read_to_string(&out).unwrap();
        let (arg, json) = got.split_once('\n').unwrap();
        assert_eq!(arg, "a b; rm -rf /", "one argument, no shell");
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(v["node"], "node1");
        assert_eq!(v["code"], "XID_79");
        assert_eq!(v["severity"], "down");
        assert_eq!(v["action"], "reboot");
        assert_eq!(v["job_ids"][0], "42");
        assert_eq!(v["causes"][0]["entity"], "gpu3");
    }

    #[test]
    fn a_failing_hook_is_recorded_with_its_status_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let hook = script(dir.path(), "hook", "echo 'ticket system down' >&2; exit 3");
        let runs = notify(&settings(vec![vec![hook]], 5.0), &[event()], false);
        assert_eq!(runs[0].outcome, ChangeOutcome::Failed);
        assert!(runs[0].detail.contains("3"), "{}", runs[0].detail);
        assert!(
            runs[0].detail.contains("ticket system down"),
            "{}",
            runs[0].detail
        );
        let missing = notify(
            &settings(vec![vec!["/nonexistent/hook".into()]], 5.0),
            &[event()],
            false,
        );
        assert_eq!(missing[0].outcome, ChangeOutcome::Failed);
        assert!(missing[0].detail.contains("could not start"));
    }

    #[test]
    fn a_hanging_hook_and_what_it_forked_are_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        // The forked `sleep` keeps stderr open: waiting for it would hang.
        let hook = script(
            dir.path(),
            "hook",
            &format!("sleep 60 & echo $! > {}; wait", pid_file.display()),
        );
        let start = Instant::now();
        let runs = notify(&settings(vec![vec![hook]], 0.5), &[event()], false);
        let took = start.elapsed();
        assert_eq!(runs[0].outcome, ChangeOutcome::Failed);
        assert!(runs[0].detail.contains("deadline"), "{}", runs[0].detail);
        assert!(took < Duration::from_secs(10), "{took:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed with its group (reaped by init: allow it a moment).
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z ")
        });
        assert!(gone, "the hook's child {pid} still runs");
    }

    #[test]
    fn dry_run_shows_the_hook_and_its_input_without_running_it() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let hook = script(dir.path(), "hook", &format!("touch {}", marker.display()));
        let runs = notify(&settings(vec![vec![hook.clone()]], 5.0), &[event()], true);
        assert_eq!(runs[0].outcome, ChangeOutcome::DryRun);
        assert!(runs[0].detail.starts_with(&hook), "{}", runs[0].detail);
        assert!(runs[0].detail.contains("\"XID_79\""));
        assert!(!marker.exists());
    }
}
