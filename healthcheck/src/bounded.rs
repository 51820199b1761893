//! One outside program (a hook, a GPU reset, the checks after it) under a
//! deadline, through the one runner (`lemonade_slurm::bounded`: argv only,
//! its own process group, killed whole), with the one-line errors the
//! state changes and the hooks record.

use lemonade_slurm::bounded::{self, BoundedError, Streams};
use std::process::Command;
use std::time::Duration;
use thiserror::Error;

/// Why a program did not run to a good end; each says why in one line.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("empty command")]
    EmptyCommand,
    #[error("could not start: {0}")]
    Spawn(std::io::Error),
    #[error("killed at the {:.1} s deadline", .0.as_secs_f64())]
    Deadline(Duration),
    /// It ran and exited with a status other than 0; `stderr_tail` is the
    /// last 200 characters of what it wrote to stderr.
    #[error("exited with {status}: {stderr_tail}")]
    Failed {
        status: std::process::ExitStatus,
        stderr_tail: String,
    },
}

/// A program that ran to its end within the deadline.
#[derive(Debug)]
pub struct Finished {
    pub stdout: Vec<u8>,
    pub elapsed: Duration,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
}

/// Runs `argv` with `input` on stdin; any exit status other than 0 is an
/// error. An error says why in a line: `could not start: ...`, `killed at
/// the 10.0 s deadline`, or `exited with exit status: 3: <the end of its
/// stderr>`.
pub fn run(argv: &[String], input: &[u8], timeout: Duration) -> Result<Finished, RunError> {
    run_to_end(argv, input, timeout, false)
}

/// [`run`] for a program whose exit status is a result, not a failure (the
/// health checks exit 2 when they find a fault): any status is `Ok`.
pub fn run_any_status(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, RunError> {
    run_to_end(argv, input, timeout, true)
}

/// A program whose output was kept up to a cap, whatever its status.
#[derive(Debug)]
pub struct Captured {
    pub stdout: Vec<u8>,
    /// The last 200 characters of its stderr.
    pub stderr_tail: String,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub elapsed: Duration,
    /// Its stdout or stderr was longer than the cap; the head was kept.
    pub truncated: bool,
}

/// Runs `argv` with `env` added to ours, keeping at most `max_output`
/// bytes of each stream: for a benchmark, whose exit status and output are
/// judged by the caller. `could not start` and the deadline are errors.
pub fn run_capped(
    argv: &[String],
    env: &[(String, String)],
    timeout: Duration,
    max_output: usize,
) -> Result<Captured, RunError> {
    let Some(program) = argv.first() else {
        return Err(RunError::EmptyCommand);
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let streams = Streams::CaptureUpTo(max_output);
    let done = bounded::run(cmd, None, streams, timeout).map_err(|e| match e {
        BoundedError::Spawn { source, .. } => RunError::Spawn(source),
        BoundedError::Timeout { .. } => RunError::Deadline(timeout),
    })?;
    Ok(Captured {
        stderr_tail: tail(&done.stderr),
        stdout: done.stdout,
        code: done.status.code(),
        elapsed: done.elapsed,
        truncated: done.truncated,
    })
}

/// The last 200 characters of `stderr`, trimmed.
fn tail(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let chars: Vec<char> = stderr.trim().chars().collect();
    chars[chars.len().saturating_sub(200)..].iter().collect()
}

fn run_to_end(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
    any_status: bool,
) -> Result<Finished, RunError> {
    let Some(program) = argv.first() else {
        return Err(RunError::EmptyCommand);
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]);
    let done = bounded::run(cmd, Some(input), Streams::Capture, timeout).map_err(|e| match e {
        BoundedError::Spawn { source, .. } => RunError::Spawn(source),
        BoundedError::Timeout { .. } => RunError::Deadline(timeout),
    })?;
    if done.status.success() || any_status {
        return Ok(Finished {
            stdout: done.stdout,
            elapsed: done.elapsed,
            code: done.status.code(),
        });
    }
    Err(RunError::Failed {
        status: done.status,
        stderr_tail: tail(&done.stderr),
    })
}
