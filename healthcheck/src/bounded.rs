//! One outside program (a hook, a GPU reset, the checks after it) run as
//! argv, never through a shell, under a deadline that kills its whole
//! process group: nothing it starts outlives the deadline or holds up a run.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

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
    let start = Instant::now();
    let Some(program) = argv.first() else {
        return Err("empty command".into());
    };
    let mut child = Command::new(program)
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    // A program that never reads its stdin must not block us on a full pipe,
    // nor one that writes much on a full stdout or stderr.
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        if let Some(mut pipe) = pipe {
            thread::spawn(move || {
                let mut s = Vec::new();
                let _ = pipe.read_to_end(&mut s);
                let _ = tx.send(s);
            });
        }
        rx
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let group = Pid::from_raw(child.id() as i32);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!(
                    "killed at the {:.1} s deadline",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    // Whatever it left in the group (a forked child holding a pipe) goes too.
    let _ = killpg(group, Signal::SIGKILL);
    let left = || timeout.saturating_sub(start.elapsed());
    if status.success() || any_status {
        return Ok(Finished {
            stdout: stdout.recv_timeout(left()).unwrap_or_default(),
            elapsed: start.elapsed(),
            code: status.code(),
        });
    }
    let stderr = stderr.recv_timeout(left()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr);
    let tail: String = stderr
        .trim()
        .chars()
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("exited with {status}: {tail}"))
}
