//! A time limit on a blocking read. A read from a hung NFS mount sleeps in
//! the kernel and cannot be interrupted, so the work runs in a thread of its
//! own: the caller waits up to the deadline, then abandons the thread. The
//! abandoned threads still hanging are counted process-wide, and once there
//! are `max_stalled` of them no new read is started: a dead mount then costs
//! a few threads and a few deadlines, not one thread per job.

use super::Skip;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Threads abandoned past their deadline that have not finished yet.
static STALLED: AtomicUsize = AtomicUsize::new(0);

/// How many abandoned reads are still hanging in this process.
pub fn stalled_now() -> usize {
    STALLED.load(Ordering::SeqCst)
}

struct Slot<T> {
    result: Option<Result<T, Skip>>,
    abandoned: bool,
}

/// The worker's slot and the signal that it filled it.
type Shared<T> = Arc<(Mutex<Slot<T>>, Condvar)>;

/// A read under way in its own thread, started at `started`.
pub struct Pending<T> {
    shared: Shared<T>,
    started: Instant,
}

/// Runs `work` in a new thread and returns its result, or
/// [`Skip::TimedOut`] when it takes longer than `timeout` (the thread is
/// left to finish on its own), or [`Skip::TooManyStalled`] without starting
/// it when `max_stalled` earlier reads are still hanging.
pub fn run<T, F>(timeout: Duration, max_stalled: usize, work: F) -> Result<T, Skip>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Skip> + Send + 'static,
{
    start(max_stalled, work)?.wait(timeout)
}

/// Starts `work` in a new thread, unless `max_stalled` earlier reads are
/// still hanging.
pub fn start<T, F>(max_stalled: usize, work: F) -> Result<Pending<T>, Skip>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Skip> + Send + 'static,
{
    if stalled_now() >= max_stalled {
        return Err(Skip::TooManyStalled);
    }
    let shared = Arc::new((
        Mutex::new(Slot {
            result: None,
            abandoned: false,
        }),
        Condvar::new(),
    ));
    let theirs = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("joblog-read".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let result = work();
            let (lock, ready) = &*theirs;
            let mut slot = lock.lock().unwrap_or_else(|e| e.into_inner());
            if slot.abandoned {
                STALLED.fetch_sub(1, Ordering::SeqCst);
            } else {
                slot.result = Some(result);
                ready.notify_one();
            }
        })
        .map_err(|_| Skip::Unreadable)?;
    Ok(Pending {
        shared,
        started: Instant::now(),
    })
}

impl<T> Pending<T> {
    /// The result, once the worker has one and within `timeout` of the
    /// start; past it, the slot is marked abandoned under the lock the
    /// worker takes, so that exactly one side accounts for the thread.
    pub fn wait(self, timeout: Duration) -> Result<T, Skip> {
        let (lock, ready) = &*self.shared;
        let deadline = self.started + timeout;
        let mut slot = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(result) = slot.result.take() {
                return result;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                slot.abandoned = true;
                STALLED.fetch_add(1, Ordering::SeqCst);
                return Err(Skip::TimedOut);
            }
            slot = ready
                .wait_timeout(slot, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_read_within_its_time_returns_its_result() {
        assert_eq!(run(Duration::from_secs(5), 4, || Ok(7)), Ok(7));
        assert_eq!(
            run::<u8, _>(Duration::from_secs(5), 4, || Err(Skip::Symlink)),
            Err(Skip::Symlink)
        );
    }

    // One test drives the process-wide count, so that parallel tests in this
    // binary never see each other's stalled threads.
    #[test]
    fn a_stuck_read_is_abandoned_and_stuck_reads_are_bounded() {
        let mut releases = Vec::new();
        for _ in 0..2 {
            let (release, wait_here) = mpsc::channel::<()>();
            releases.push(release);
            let r = run(Duration::from_millis(50), 2, move || {
                let _ = wait_here.recv();
                Ok(())
            });
            assert_eq!(r, Err(Skip::TimedOut));
        }
        assert_eq!(stalled_now(), 2);
        let started = Instant::now();
        assert_eq!(
            run(Duration::from_secs(5), 2, || Ok(())),
            Err(Skip::TooManyStalled)
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        drop(releases);
        let until = Instant::now() + Duration::from_secs(10);
        while stalled_now() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(stalled_now(), 0, "finished threads leave the count");
        assert_eq!(run(Duration::from_secs(5), 2, || Ok(1)), Ok(1));
    }
}
