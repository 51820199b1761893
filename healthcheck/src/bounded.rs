//! One outside program (a hook, a GPU reset, the checks after it) under a
//! deadline, through the one runner (`lemonade_slurm::bounded`: argv only,
//! its own process group, killed whole), with the one-line errors the
//! state changes and the hooks record.

use lemonade_slurm::bounded::{self, BoundedError, Streams};
use std::process::Command;
use std::time::Duration;

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
pub fn run(argv: &[String], input: &[u8], timeout: Duration) -> Result<Finished, String> {
    run_to_end(argv, input, timeout, false)
}

/// [`run`] for a program whose exit status is a result, not a failure (the
/// health checks exit 2 when they find a fault): any status is `Ok`.
pub fn run_any_status(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, String> {
    run_to_end(argv, input, timeout, true)
}

fn run_to_end(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
    any_status: bool,
) -> Result<Finished, String> {
    let Some(program) = argv.first() else {
        return Err("empty command".into());
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]);
    let done = bounded::run(cmd, Some(input), Streams::Capture, timeout).map_err(|e| match e {
        BoundedError::Spawn { source, .. } => format!("could not start: {source}"),
        BoundedError::Timeout { .. } => {
            format!("killed at the {:.1} s deadline", timeout.as_secs_f64())
        }
    })?;
    if done.status.success() || any_status {
        return Ok(Finished {
            stdout: done.stdout,
            elapsed: done.elapsed,
            code: done.status.code(),
        });
    }
    let stderr = String::from_utf8_lossy(&done.stderr);
    let tail: String = stderr
        .trim()
        .chars()
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("exited with {}: {tail}", done.status))
}
