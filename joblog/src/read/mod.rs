//! Reading a job's log as root, when the path came from the job's user:
//! [`read_tail`] returns the file's tail or the reason it was skipped. A
//! skipped log is never an error that stops the caller: `lemon ingest`
//! counts the reasons ([`Skip::name`]) in its summary.

mod deadline;
mod walk;

use crate::tail::{Limits, LogTail};
use nix::errno::Errno;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use deadline::stalled_now;

/// Why a log was not read. Each reason has a stable short name for the
/// ingest summary's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// No file there, an empty path, or `/dev/null`: the job kept no log.
    NoLog,
    /// The path is relative: Slurm's columns hold absolute, expanded paths.
    NotAbsolute,
    /// A component of the path, or the file itself, is a symbolic link.
    Symlink,
    /// A FIFO, socket, device or directory instead of a regular file.
    NotRegular,
    /// The file does not belong to the job's user.
    WrongOwner,
    /// A directory on the way belongs to another user, can be written by
    /// others without the sticky bit, or the path holds `..`.
    UnsafeParent,
    /// Opening and reading took longer than [`Limits::timeout`].
    TimedOut,
    /// Not tried: [`Limits::max_stalled`] earlier reads are still hanging.
    TooManyStalled,
    /// The file changed under us (replaced while opened, stale NFS handle).
    Vanished,
    /// Permission or I/O error.
    Unreadable,
}

impl Skip {
    /// The stable short name, e.g. `symlink` or `too_slow`.
    pub fn name(self) -> &'static str {
        match self {
            Skip::NoLog => "no_log",
            Skip::NotAbsolute => "not_absolute",
            Skip::Symlink => "symlink",
            Skip::NotRegular => "not_regular",
            Skip::WrongOwner => "wrong_owner",
            Skip::UnsafeParent => "unsafe_parent",
            Skip::TimedOut => "too_slow",
            Skip::TooManyStalled => "too_many_stalled",
            Skip::Vanished => "vanished",
            Skip::Unreadable => "unreadable",
        }
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the tail of the log at `path`, which must be a regular file owned
/// by `expected_owner_uid` reached through no symbolic link and no directory
/// another user could change (see issue 36, "Paths"). Takes at most
/// [`Limits::timeout`]: a read stuck on a hung mount is abandoned.
pub fn read_tail(path: &Path, expected_owner_uid: u32, limits: &Limits) -> Result<LogTail, Skip> {
    let path = path.to_path_buf();
    let limits_for_reader = limits.clone();
    deadline::run(limits.timeout, limits.max_stalled, move || {
        let file = walk::open_checked(&path, expected_owner_uid)?;
        read_end(&file, &limits_for_reader)
    })
}

/// The first `max_bytes + 1` bytes of the file at `path`, opened by the same
/// rules as [`read_tail`] (no symlink anywhere on the path, a regular file
/// of `expected_owner_uid`, no directory another user could change), within
/// `timeout`. For files read whole (flight-recorder dumps, issue 32): a
/// result longer than `max_bytes` means the file is over the caller's cap.
pub fn read_head(
    path: &Path,
    expected_owner_uid: u32,
    max_bytes: u64,
    timeout: std::time::Duration,
) -> Result<Vec<u8>, Skip> {
    let path = path.to_path_buf();
    deadline::run(timeout, Limits::default().max_stalled, move || {
        let file = walk::open_checked(&path, expected_owner_uid)?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, max_bytes + 1), &mut out)
            .map_err(|e| walk::skip_for(io_errno(&e)))?;
        Ok(out)
    })
}

/// [`read_tail`] for many logs, [`Limits::parallel_reads`] at a time (a
/// disk serves several reads at once faster than one after another: with
/// the page cache cold, this machine's virtual disk gives 290-310 MB/s to
/// one reader, 790-850 MB/s to 4 and about 1 GB/s to 8). `each` gets every
/// log's index in `logs` and its result, in order; at most
/// `parallel_reads` tails are held at once. Each log has its own
/// [`Limits::timeout`] from the moment its read starts, so abandoned reads
/// may exceed [`Limits::max_stalled`] by up to `parallel_reads - 1`.
pub fn read_tails(
    logs: &[(PathBuf, u32)],
    limits: &Limits,
    mut each: impl FnMut(usize, Result<LogTail, Skip>),
) {
    let mut in_flight = VecDeque::new();
    let mut next = 0;
    while next < logs.len() || !in_flight.is_empty() {
        while next < logs.len() && in_flight.len() < limits.parallel_reads.max(1) {
            let (path, owner) = (logs[next].0.clone(), logs[next].1);
            let reader_limits = limits.clone();
            let started = deadline::start(limits.max_stalled, move || {
                let file = walk::open_checked(&path, owner)?;
                read_end(&file, &reader_limits)
            });
            in_flight.push_back((next, started));
            next += 1;
        }
        if let Some((index, started)) = in_flight.pop_front() {
            each(index, started.and_then(|p| p.wait(limits.timeout)));
        }
    }
}

/// The last [`Limits::effective_tail_bytes`] of an opened file. A file that
/// shrinks meanwhile yields what is left; one deleted meanwhile is still
/// read through its descriptor.
fn read_end(file: &File, limits: &Limits) -> Result<LogTail, Skip> {
    let size = file
        .metadata()
        .map_err(|e| walk::skip_for(io_errno(&e)))?
        .len();
    let want = limits.effective_tail_bytes().min(size);
    let start = size - want;
    let mut buf = vec![0u8; want as usize];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], start + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(walk::skip_for(io_errno(&e))),
        }
    }
    buf.truncate(filled);
    Ok(LogTail::from_bytes(&buf, start > 0, limits))
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn my_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn a_file_deleted_after_it_was_opened_is_still_read_through_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slurm-1.out");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"step 1\nCUDA error: uncorrectable ECC error encountered\n")
            .unwrap();
        let opened = walk::open_checked(&path, my_uid()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let tail = read_end(&opened, &Limits::default()).unwrap();
        assert!(tail.lines().any(|l| l.starts_with(b"CUDA error")));
    }

    #[test]
    fn a_file_truncated_after_it_was_opened_yields_what_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slurm-1.out");
        std::fs::write(&path, b"a\nb\n").unwrap();
        let opened = walk::open_checked(&path, my_uid()).unwrap();
        std::fs::write(&path, b"").unwrap();
        assert_eq!(read_end(&opened, &Limits::default()).unwrap().bytes(), b"");
    }

    #[test]
    fn read_head_returns_one_byte_past_the_cap_so_the_caller_sees_it_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nccl_trace_rank_0");
        std::fs::write(&path, b"0123456789").unwrap();
        let t = std::time::Duration::from_secs(5);
        assert_eq!(read_head(&path, my_uid(), 20, t).unwrap(), b"0123456789");
        assert_eq!(read_head(&path, my_uid(), 4, t).unwrap(), b"01234");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read_head(&link, my_uid(), 20, t), Err(Skip::Symlink));
        assert_eq!(read_head(&path, my_uid() + 1, 20, t), Err(Skip::WrongOwner));
    }

    #[test]
    fn every_skip_has_a_distinct_short_name() {
        let all = [
            Skip::NoLog,
            Skip::NotAbsolute,
            Skip::Symlink,
            Skip::NotRegular,
            Skip::WrongOwner,
            Skip::UnsafeParent,
            Skip::TimedOut,
            Skip::TooManyStalled,
            Skip::Vanished,
            Skip::Unreadable,
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), all.len());
        assert_eq!(Skip::TimedOut.name(), "too_slow");
    }
}
