//! One lock per database for runs that update counters, so that the timer and
//! the prolog running at the same moment cannot both apply a delta.

use crate::StoreError;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Held for the length of a run; released on drop.
pub struct RunLock {
    _lock: Flock<File>,
}

impl RunLock {
    /// Takes `<db>.lock`, waiting at most `wait`.
    pub fn acquire(db_path: &Path, wait: Duration) -> Result<RunLock, StoreError> {
        let lock_path = lock_path(db_path);
        if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let start = Instant::now();
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| StoreError::Directory {
                path: lock_path.clone(),
                source,
            })?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(RunLock { _lock: lock }),
                Err((f, _)) => {
                    if start.elapsed() >= wait {
                        return Err(StoreError::Locked {
                            path: lock_path,
                            waited_ms: wait.as_millis() as u64,
                        });
                    }
                    file = f;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }
}

fn lock_path(db_path: &Path) -> PathBuf {
    let mut name = db_path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    db_path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_waits_then_gives_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("node.db");
        let first = RunLock::acquire(&db, Duration::from_millis(10)).unwrap();
        let second = RunLock::acquire(&db, Duration::from_millis(30));
        assert!(matches!(second, Err(StoreError::Locked { .. })));
        drop(first);
        assert!(RunLock::acquire(&db, Duration::from_millis(10)).is_ok());
    }
}
