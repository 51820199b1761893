//! Runs Slurm's commands: by absolute path, argv only (never a shell), under
//! a deadline, with a known environment.
//!
//! Prolog, epilog and HealthCheckProgram run with no `PATH` and no
//! `SLURM_CONF`, so [`SlurmCommands`] carries both. A slurmctld that does not
//! answer must cost us a bounded time, never a hang.

use crate::bounded::{self, BoundedError, Streams};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use thiserror::Error;

/// Why a Slurm command did not give us its output.
#[derive(Debug, Error)]
pub enum CommandError {
    /// It could not start, or it outran its deadline ([`crate::bounded`]).
    #[error(transparent)]
    Bounded(#[from] BoundedError),
    #[error("{program} exited with {status}: {stderr}")]
    Failed {
        program: String,
        status: String,
        stderr: String,
    },
}

/// Where Slurm's commands are and how long they may take.
#[derive(Debug, Clone)]
pub struct SlurmCommands {
    pub bin_dir: PathBuf,
    pub conf: Option<PathBuf>,
    pub timeout: Duration,
}

/// A finished command's output.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

impl SlurmCommands {
    pub fn new(
        bin_dir: impl Into<PathBuf>,
        conf: Option<PathBuf>,
        timeout: Duration,
    ) -> SlurmCommands {
        SlurmCommands {
            bin_dir: bin_dir.into(),
            conf,
            timeout,
        }
    }

    /// Absolute path of a Slurm program.
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// Runs `name args...` and returns its output if it exits 0.
    pub fn run(&self, name: &str, args: &[&str]) -> Result<Output, CommandError> {
        self.run_with_env(name, args, &[])
    }

    /// Like [`run`](Self::run), with extra environment variables (e.g. `SLURM_TIME_FORMAT`).
    pub fn run_with_env(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Output, CommandError> {
        let program = self.program(name);
        let mut cmd = Command::new(&program);
        cmd.args(args);
        cmd.env_clear();
        cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        cmd.env("LC_ALL", "C");
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        } else if let Ok(conf) = std::env::var("SLURM_CONF") {
            cmd.env("SLURM_CONF", conf);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_bounded(cmd, &program, self.timeout)
    }

    /// How the command would be run, for `--dry-run` and logs: `/usr/bin/scontrol update ...`,
    /// with arguments quoted only for display.
    pub fn display(&self, name: &str, args: &[&str]) -> String {
        let program = self.program(name).display().to_string();
        shown(std::iter::once(program.as_str()).chain(args.iter().copied()))
    }
}

/// An argv as a shell would need it typed, for display only (commands are
/// always run as argv): words with blanks or quotes are single-quoted.
pub fn shown<'a>(argv: impl IntoIterator<Item = &'a str>) -> String {
    argv.into_iter()
        .map(|a| {
            if a.chars()
                .any(|c| c.is_whitespace() || c == '"' || c == '\'')
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` under `timeout` ([`crate::bounded`]) and returns its output if it exits 0.
fn run_bounded(cmd: Command, program: &Path, timeout: Duration) -> Result<Output, CommandError> {
    let done = bounded::run(cmd, None, Streams::Capture, timeout)?;
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    if !done.status.success() {
        return Err(CommandError::Failed {
            program: program.display().to_string(),
            status: done.status.to_string(),
            stderr: stderr.trim().to_string(),
        });
    }
    Ok(Output { stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn runs_by_absolute_path_without_a_shell() {
        let cmds = SlurmCommands::new("/bin", None, Duration::from_secs(5));
        let out = cmds.run("echo", &["a b", "$HOME;", "`x`"]).unwrap();
        assert_eq!(out.stdout, "a b $HOME; `x`\n");
    }

    #[test]
    fn kills_a_command_past_its_deadline() {
        let cmds = SlurmCommands::new("/bin", None, Duration::from_millis(200));
        let start = Instant::now();
        let err = cmds.run("sleep", &["10"]).unwrap_err();
        assert!(
            matches!(err, CommandError::Bounded(BoundedError::Timeout { .. })),
            "{err}"
        );
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn reports_failure_with_stderr_and_missing_programs() {
        let cmds = SlurmCommands::new("/bin", None, Duration::from_secs(5));
        let err = cmds
            .run("sh", &["-c", "echo nope >&2; exit 4"])
            .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
        let missing = SlurmCommands::new("/nonexistent", None, Duration::from_secs(1));
        assert!(matches!(
            missing.run("scontrol", &[]),
            Err(CommandError::Bounded(BoundedError::Spawn { .. }))
        ));
    }

    #[test]
    fn display_quotes_only_for_people() {
        let cmds = SlurmCommands::new("/usr/bin", None, Duration::from_secs(1));
        assert_eq!(
            cmds.display(
                "scontrol",
                &["update", "NodeName=n1", "Reason=hc: XID_79 gpu3"]
            ),
            "/usr/bin/scontrol update NodeName=n1 'Reason=hc: XID_79 gpu3'"
        );
    }
}
