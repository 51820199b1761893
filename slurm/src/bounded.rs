//! Runs one program under a deadline: the one implementation behind Slurm's
//! commands ([`crate::command`]), the node's hooks and GPU resets, and the
//! SPANK plugin's programs.
//!
//! The program runs as argv (never through a shell) in a process group of
//! its own. At the deadline the whole group is killed, and so is whatever is
//! left of it when the program exits: a forked child that still holds our
//! pipe would otherwise keep the readers waiting. The readers themselves are
//! waited for only until the deadline, so even a grandchild that left the
//! group (`setsid`) cannot hold a run past it; it costs its output, not time.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};
use thiserror::Error;

/// What becomes of the program's stdout and stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streams {
    /// Read into [`Finished`], on threads of their own so that a full pipe
    /// never blocks the program.
    Capture,
    /// As `Capture`, keeping at most this many bytes of each stream (the
    /// rest is read and dropped, so the program never blocks on a full
    /// pipe); [`Finished::truncated`] says so. For programs whose output
    /// is not ours to bound (benchmarks).
    CaptureUpTo(usize),
    /// Left to ours. No thread is started: the SPANK plugin runs programs
    /// from slurmstepd, where it keeps its footprint small.
    Inherit,
}

/// A program that ended by itself within the deadline, whatever its status.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    /// Empty with [`Streams::Inherit`], or when a grandchild outside the
    /// group held the pipe past the deadline.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
    /// A stream was longer than [`Streams::CaptureUpTo`]'s cap.
    pub truncated: bool,
}

/// Why a program did not end by itself.
#[derive(Debug, Error)]
pub enum BoundedError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?} (killed)")]
    Timeout { program: String, timeout: Duration },
}

/// Runs `cmd` with `input` on its stdin (none: `/dev/null`) and waits at
/// most `timeout` for it.
pub fn run(
    mut cmd: Command,
    input: Option<&[u8]>,
    streams: Streams,
    timeout: Duration,
) -> Result<Finished, BoundedError> {
    let start = Instant::now();
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = || match streams {
        Streams::Capture | Streams::CaptureUpTo(_) => Stdio::piped(),
        Streams::Inherit => Stdio::inherit(),
    };
    let cap = match streams {
        Streams::CaptureUpTo(max) => max,
        _ => usize::MAX,
    };
    cmd.stdin(input.map_or_else(Stdio::null, |_| Stdio::piped()))
        .stdout(out())
        .stderr(out())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|source| BoundedError::Spawn {
        program: program.clone(),
        source,
    })?;
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        // A program that never reads its stdin must not block us on a full pipe.
        let input = input.to_vec();
        thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let stdout = child.stdout.take().map(|pipe| drain(pipe, cap));
    let stderr = child.stderr.take().map(|pipe| drain(pipe, cap));
    let group = Pid::from_raw(child.id() as i32);
    let status = wait_until(&mut child, start + timeout);
    // Whatever the program left in its group goes too: at the deadline, the
    // program with it; after its exit, a forked child that holds a pipe.
    let _ = killpg(group, Signal::SIGKILL);
    let Some(status) = status else {
        let _ = child.wait();
        return Err(BoundedError::Timeout { program, timeout });
    };
    let left = || timeout.saturating_sub(start.elapsed());
    let collect = |rx: Option<Receiver<(Vec<u8>, bool)>>| {
        rx.and_then(|rx| rx.recv_timeout(left()).ok())
            .unwrap_or_default()
    };
    let (stdout, cut_out) = collect(stdout);
    let (stderr, cut_err) = collect(stderr);
    Ok(Finished {
        status,
        stdout,
        stderr,
        elapsed: start.elapsed(),
        truncated: cut_out || cut_err,
    })
}

/// Reads a pipe to its end on a thread, keeping its first `cap` bytes; the
/// receiver gets them at once, and whether more came.
fn drain(pipe: impl Read + Send + 'static, cap: usize) -> Receiver<(Vec<u8>, bool)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut pipe = pipe;
        let _ = (&mut pipe)
            .take(cap.try_into().unwrap_or(u64::MAX))
            .read_to_end(&mut kept);
        // Past the cap: read on and drop, so the program is never blocked.
        let more = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0);
        let _ = tx.send((kept, more > 0));
    });
    rx
}

/// The child's status once it exits, or `None` at `deadline`. Short polls
/// first: a quick program ends in milliseconds, and a job may wait for it.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            // The child cannot be waited for (it is ours, so this does not
            // happen): treat it as hung rather than spin.
            Err(_) => return None,
            Ok(None) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script]);
        cmd
    }

    fn alive(pid: i32) -> bool {
        // SAFETY: probing a pid with signal 0.
        let exists = unsafe { libc::kill(pid, 0) } == 0;
        exists
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.contains(") Z "))
    }

    fn gone_within(pid: i32, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while alive(pid) && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
        }
        !alive(pid)
    }

    #[test]
    fn a_capped_capture_keeps_the_head_and_says_it_was_cut() {
        let script = "head -c 100000 /dev/zero; echo end >&2";
        let capped = Streams::CaptureUpTo(1000);
        let done = run(sh(script), None, capped, Duration::from_secs(10)).unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout.len(), 1000);
        assert_eq!(done.stderr, b"end\n");
        assert!(done.truncated);
        let done = run(sh("echo short"), None, capped, Duration::from_secs(10)).unwrap();
        assert!(!done.truncated && done.stdout == b"short\n");
    }

    #[test]
    fn a_grandchild_that_keeps_stdout_open_does_not_hold_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; echo done", pidfile.display());
        let done = run(sh(&script), None, Streams::Capture, Duration::from_secs(30)).unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout, b"done\n");
        assert!(
            done.elapsed < Duration::from_secs(5),
            "waited {:?} for the grandchild's pipe",
            done.elapsed
        );
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "{pid} outlived the run"
        );
    }

    #[test]
    fn a_grandchild_outside_the_group_costs_its_output_not_more_than_the_deadline() {
        let script = "setsid sleep 60 & echo started";
        let timeout = Duration::from_millis(500);
        let done = run(sh(script), None, Streams::Capture, timeout).unwrap();
        assert!(done.status.success());
        assert!(
            done.elapsed < timeout + Duration::from_secs(2),
            "{:?}",
            done.elapsed
        );
    }

    #[test]
    fn the_deadline_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let started = Instant::now();
        let err = run(
            sh(&script),
            None,
            Streams::Inherit,
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert!(matches!(err, BoundedError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("the script wrote its child's pid")
            .trim()
            .parse()
            .unwrap();
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "{pid} survived the deadline"
        );
    }

    #[test]
    fn input_reaches_stdin_and_a_program_that_ignores_it_is_not_blocked() {
        let echo = run(
            sh("cat"),
            Some(b"hello"),
            Streams::Capture,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(echo.stdout, b"hello");
        let big = vec![b'x'; 1 << 20];
        let deaf = run(
            sh("exit 3"),
            Some(&big),
            Streams::Capture,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(deaf.status.code(), Some(3));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_naming_it() {
        let err = run(
            Command::new("/nonexistent/scontrol"),
            None,
            Streams::Capture,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/scontrol"), "{err}");
    }
}
