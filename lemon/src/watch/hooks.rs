//! `[hooks]` for `lemon watch`: the same commands the node runs tell about
//! state changes, told about each outlier the service acted on, with one
//! JSON object on stdin (the keys of the node's hook events, plus the
//! detection's metrics and score). Argv only, under `[hooks] timeout_s`; a
//! hook that fails or hangs is logged and killed and never stops the poll.
//! A dry run prints the hook and its input instead.

use lemonade_config::HooksSettings;
use lemonade_slurm::bounded::{self, Streams};
use serde::Serialize;
use std::process::Command;

/// What a hook reads on stdin.
#[derive(Debug, Clone, Serialize)]
pub struct OutlierEvent<'a> {
    pub node: &'a str,
    pub at: i64,
    /// `drain` or `report`: the call's tier.
    pub event: &'static str,
    /// The call's tier (`drain` or `report`): only a drain-tier call is drained.
    pub tier: &'static str,
    /// `applied`, `dry-run`, `failed`, `breaker`, `reported` or `skipped`.
    pub outcome: &'a str,
    pub reason: &'a str,
    /// Always `OUTLIER`.
    pub code: &'static str,
    pub job_ids: Vec<&'a str>,
    pub metrics: &'a [String],
    pub score: f64,
}

/// Runs every hook with `event`; lines for the log, one per hook.
pub fn notify(hooks: &HooksSettings, event: &OutlierEvent<'_>, dry_run: bool) -> Vec<String> {
    let input = serde_json::to_string(event).expect("plain strings and numbers");
    hooks
        .commands
        .iter()
        .filter(|argv| !argv.is_empty())
        .map(|argv| {
            let shown = lemonade_slurm::command::shown(argv.iter().map(String::as_str));
            if dry_run {
                return format!("hook (dry run, not run): {shown} <<< {input}");
            }
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            match bounded::run(
                cmd,
                Some(input.as_bytes()),
                Streams::Capture,
                hooks.timeout(),
            ) {
                Ok(done) if done.status.success() => format!("hook ran: {shown}"),
                Ok(done) => format!(
                    "hook failed: {shown}: {}: {}",
                    done.status,
                    String::from_utf8_lossy(&done.stderr).trim()
                ),
                Err(e) => format!("hook failed: {shown}: {e}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event<'a>(metrics: &'a [String]) -> OutlierEvent<'a> {
        OutlierEvent {
            node: "node2",
            at: 1_700_000_000,
            event: "drain",
            tier: "drain",
            outcome: "applied",
            reason: "lemon: j77 gpu OUTLIER gpu_util",
            code: "OUTLIER",
            job_ids: vec!["77"],
            metrics,
            score: 12.5,
        }
    }

    #[test]
    fn a_hook_reads_the_outlier_as_json_and_a_failing_one_is_only_logged() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("event.json");
        let hooks = HooksSettings {
            commands: vec![
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    format!("cat > {}", out.display()),
                ],
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "echo no ticket >&2; exit 3".into(),
                ],
            ],
            timeout_s: 5.0,
        };
        let metrics = vec!["gpu_util".to_string()];
        let lines = notify(&hooks, &event(&metrics), false);
        assert!(lines[0].starts_with("hook ran"), "{lines:?}");
        assert!(
            lines[1].contains("hook failed") && lines[1].contains("no ticket"),
            "{lines:?}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(json["node"], "node2");
        assert_eq!(json["code"], "OUTLIER");
        assert_eq!(json["tier"], "drain");
        assert_eq!(json["job_ids"][0], "77");

        std::fs::remove_file(&out).unwrap();
        let lines = notify(&hooks, &event(&metrics), true);
        assert!(lines.iter().all(|l| l.contains("dry run")), "{lines:?}");
        assert!(!out.exists(), "a dry run ran the hook");
    }
}
