//! `statfs` in a child process, under a deadline.
//!
//! A `statfs` on a dead NFS or Lustre server puts the caller in uninterruptible
//! sleep (D state). A thread stuck like that cannot be abandoned cleanly: the
//! process cannot exit until the kernel lets go. So each probe runs in a forked
//! child that only calls `statfs`, writes the answer to a pipe and `_exit`s.
//! The parent polls all pipes at once until the deadline, SIGKILLs the children
//! that did not answer and never waits for them: they are reaped later with
//! `WNOHANG`, or by init once we are gone.

use lemonade_config::MountProbe;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::resource::{getrlimit, Resource};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Block and inode counts from `statfs`; the thresholds are ratios, so the block size is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FsStat {
    pub blocks: u64,
    /// Blocks available to unprivileged users.
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
}

/// What probing one mount gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum ProbeResult {
    Ok(FsStat),
    /// No answer within the deadline.
    Hung {
        after_s: f64,
    },
    /// `statfs` answered with an error (`ESTALE`, `EIO`, ...).
    Failed {
        error: String,
    },
    /// We could not run the probe (fork or pipe failed): our problem, not the mount's.
    NotRun {
        error: String,
    },
}

/// Children killed after their deadline and not yet reaped.
static ABANDONED: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// The child's answer: errno (0 on success), then the four counts.
const ANSWER_LEN: usize = 4 + 4 * 8;

struct Pending {
    pid: Pid,
    pipe: OwnedFd,
    index: usize,
}

/// Probes every path in parallel; returns when all answered or `timeout` passed.
pub fn probe_all(targets: &[(&Path, MountProbe)], timeout: Duration) -> Vec<ProbeResult> {
    reap_abandoned();
    let started = Instant::now();
    let mut results: Vec<Option<ProbeResult>> = vec![None; targets.len()];
    let mut pending = Vec::new();
    let max_fd = getrlimit(Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft.min(65_536) as i32)
        .unwrap_or(1024);
    for (index, (path, probe)) in targets.iter().enumerate() {
        match spawn(path, *probe, max_fd) {
            Ok((pid, pipe)) => pending.push(Pending { pid, pipe, index }),
            Err(error) => results[index] = Some(ProbeResult::NotRun { error }),
        }
    }

    while !pending.is_empty() {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        let mut fds: Vec<PollFd> = pending
            .iter()
            .map(|p| PollFd::new(p.pipe.as_fd(), PollFlags::POLLIN))
            .collect();
        // Rounded up, so that a timeout means the deadline has passed.
        let wait = PollTimeout::try_from(left.as_micros().div_ceil(1000) as u64)
            .unwrap_or(PollTimeout::MAX);
        match nix::poll::poll(&mut fds, wait) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => {
                for p in pending.drain(..) {
                    results[p.index] = Some(ProbeResult::NotRun {
                        error: format!("poll: {e}"),
                    });
                    abandon(p.pid);
                }
                break;
            }
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        let mut still = Vec::with_capacity(pending.len());
        for (p, ready) in pending.into_iter().zip(ready) {
            if ready {
                results[p.index] = Some(read_answer(&p.pipe));
                finish(p.pid);
            } else {
                still.push(p);
            }
        }
        pending = still;
    }

    let waited = started.elapsed().as_secs_f64();
    for p in pending {
        results[p.index] = Some(ProbeResult::Hung { after_s: waited });
        abandon(p.pid);
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or(ProbeResult::NotRun {
                error: "no answer".into(),
            })
        })
        .collect()
}

fn spawn(path: &Path, probe: MountProbe, max_fd: i32) -> Result<(Pid, OwnedFd), String> {
    // Everything the child needs is prepared here: after fork, only
    // async-signal-safe calls (no allocation, no locks).
    let c_path =
        CString::new(path.as_os_str().as_bytes()).map_err(|_| "path contains a NUL".to_string())?;
    // CLOEXEC: a concurrent fork+exec elsewhere in the process must not keep our pipe open.
    let (read_end, write_end) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .map_err(|e| format!("pipe: {e}"))?;
    let write_fd = write_end.as_raw_fd();
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the child below only calls async-signal-safe functions and `_exit`s.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => unsafe {
            close_all_but(write_fd, max_fd);
            child(&c_path, probe, &mut buf, write_fd)
        },
        Ok(ForkResult::Parent { child }) => {
            drop(write_end);
            Ok((child, read_end))
        }
        Err(e) => Err(format!("fork: {e}")),
    }
}

/// Closes every inherited descriptor but `keep`, before the child can hang.
///
/// A child stuck in D state would otherwise hold the parent's descriptors
/// for as long as the mount is dead: the run lock (an `flock`, which lives as
/// long as any copy of its descriptor) would block every later run, and a
/// copy of stdout would keep Slurm waiting for the end of our output.
unsafe fn close_all_but(keep: i32, max_fd: i32) {
    let close_range = |first: i32, last: i32| {
        first > last || libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) == 0
    };
    if !(close_range(0, keep - 1) && close_range(keep + 1, i32::MAX)) {
        // Kernels before 5.9 have no close_range.
        for fd in (0..max_fd.max(keep + 1)).filter(|fd| *fd != keep) {
            libc::close(fd);
        }
    }
}

/// The child: probe, write the answer, `_exit`. Never returns.
unsafe fn child(path: &CString, probe: MountProbe, buf: &mut libc::statfs, fd: i32) -> ! {
    let errno = match probe {
        MountProbe::Statfs => {
            if libc::statfs(path.as_ptr(), buf) == 0 {
                0
            } else {
                *libc::__errno_location()
            }
        }
        MountProbe::BlockForever => loop {
            libc::pause();
        },
    };
    let mut answer = [0u8; ANSWER_LEN];
    answer[..4].copy_from_slice(&errno.to_ne_bytes());
    // fsblkcnt_t and fsfilcnt_t are 32 bits on some targets.
    #[allow(clippy::unnecessary_cast)]
    let fields = [
        buf.f_blocks as u64,
        buf.f_bavail as u64,
        buf.f_files as u64,
        buf.f_ffree as u64,
    ];
    for (i, v) in fields.iter().enumerate() {
        answer[4 + i * 8..12 + i * 8].copy_from_slice(&v.to_ne_bytes());
    }
    // The pipe is non-blocking and the answer smaller than PIPE_BUF: one atomic write.
    libc::write(fd, answer.as_ptr().cast(), ANSWER_LEN);
    libc::_exit(0)
}

fn read_answer(pipe: &OwnedFd) -> ProbeResult {
    let mut answer = [0u8; ANSWER_LEN];
    match nix::unistd::read(pipe, &mut answer) {
        Ok(ANSWER_LEN) => {}
        Ok(_) => {
            return ProbeResult::NotRun {
                error: "the probe died without answering".into(),
            }
        }
        Err(e) => {
            return ProbeResult::NotRun {
                error: format!("reading the probe's answer: {e}"),
            }
        }
    }
    let word = |i: usize| u64::from_ne_bytes(answer[4 + i * 8..12 + i * 8].try_into().unwrap());
    let errno = i32::from_ne_bytes(answer[..4].try_into().unwrap());
    if errno != 0 {
        return ProbeResult::Failed {
            error: format!("statfs: {}", Errno::from_raw(errno).desc()),
        };
    }
    ProbeResult::Ok(FsStat {
        blocks: word(0),
        bavail: word(1),
        files: word(2),
        ffree: word(3),
    })
}

/// Reaps a child that answered; it is about to exit, but we do not wait for that.
fn finish(pid: Pid) {
    // ECHILD: already reaped (SIGCHLD ignored); remembering it could later
    // reap an unrelated child that reused the pid.
    if matches!(
        waitpid(pid, Some(WaitPidFlag::WNOHANG)),
        Ok(WaitStatus::StillAlive)
    ) {
        remember(pid);
    }
}

/// Kills a child that missed its deadline, without waiting: it may be in D state.
fn abandon(pid: Pid) {
    let _ = kill(pid, Signal::SIGKILL);
    finish(pid);
}

fn remember(pid: Pid) {
    ABANDONED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pid);
}

/// Reaps the abandoned children that have exited since; leaves the others.
fn reap_abandoned() {
    let mut list = ABANDONED.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|pid| {
        matches!(
            waitpid(*pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statfs_answers_and_a_missing_path_fails() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let results = probe_all(
            &[
                (dir.path(), MountProbe::Statfs),
                (&missing, MountProbe::Statfs),
            ],
            Duration::from_secs(10),
        );
        assert!(
            matches!(results[0], ProbeResult::Ok(s) if s.blocks > 0),
            "{results:?}"
        );
        assert!(
            matches!(&results[1], ProbeResult::Failed { error } if error.contains("No such file")),
            "{results:?}"
        );
    }

    #[test]
    fn a_child_keeps_only_its_pipe_open() {
        let dir = tempfile::tempdir().unwrap();
        let held = std::fs::File::create(dir.path().join("run.lock")).unwrap();
        let (pid, _pipe) = spawn(dir.path(), MountProbe::BlockForever, 1024).unwrap();
        // The child closes the descriptors it inherited right after fork; wait for that.
        let fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count());
        let mut open = fds();
        for _ in 0..500 {
            if matches!(open, Ok(1)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            open = fds();
        }
        abandon(pid);
        drop(held);
        assert_eq!(open.unwrap(), 1, "the child holds more than its pipe");
    }

    #[test]
    fn a_probe_that_never_answers_is_hung_and_abandoned() {
        let dir = tempfile::tempdir().unwrap();
        let results = probe_all(
            &[(dir.path(), MountProbe::BlockForever)],
            Duration::from_millis(100),
        );
        assert!(
            matches!(results[0], ProbeResult::Hung { .. }),
            "{results:?}"
        );
    }
}
