//! Replacing a file so that readers see the old one or the new one, never
//! half of either: write a temporary file in the same directory, then rename
//! it over the target. On any error the temporary file is removed, so a full
//! disk or a failed rename leaves no litter beside the target.
//!
//! Every file Lemonade hands to someone else goes through here: the spool
//! export (the head node reads it, over NFS too), the Prometheus textfile,
//! the status line the SPANK plugin reads, lemon's reports.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether the data must be on disk before the rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fsync` before the rename: after a crash the file is the old or the
    /// new one, whole.
    Synced,
    /// No `fsync`, for small files rewritten on every run whose loss in a
    /// crash costs nothing (the node's status line, read before each job step).
    Unsynced,
}

/// Replaces `path` with `contents`, synced.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_with(path, Durability::Synced, |f| f.write_all(contents))
}

/// Replaces `path` with what `fill` writes to the temporary file.
pub fn replace_with(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<()>,
) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (tmp, file) = create_temporary(path, &NEXT)?;
    let result = (|| {
        let mut w = io::BufWriter::new(&file);
        fill(&mut w)?;
        w.flush()?;
        drop(w);
        if durability == Durability::Synced {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A new file beside `path`: `.<name>.<pid>.<n>.tmp`. Created exclusively,
/// so a stale one (a crashed run with the same pid) or a link planted there
/// is never written through; the next number is tried instead.
fn create_temporary(path: &Path, next: &AtomicU64) -> io::Result<(PathBuf, File)> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1 << 20 => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_file_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.prom");
        write_atomically(&path, b"one\n").unwrap();
        write_atomically(&path, b"two\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        assert_eq!(entries(dir.path()), ["out.prom"]);
    }

    #[test]
    fn a_failed_rename_removes_the_temporary_file_and_keeps_the_target() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory cannot be replaced by a file: the rename fails.
        let path = dir.path().join("report");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("kept"), "x").unwrap();
        let err = write_atomically(&path, b"new").unwrap_err();
        assert!(err.kind() != io::ErrorKind::NotFound, "{err}");
        assert_eq!(entries(dir.path()), ["report"]);
        assert_eq!(entries(&path), ["kept"]);
    }

    #[test]
    fn a_failed_write_removes_the_temporary_file_and_keeps_the_old_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node1.jsonl");
        write_atomically(&path, b"old\n").unwrap();
        let err = replace_with(&path, Durability::Synced, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(std::fs::read(&path).unwrap(), b"old\n");
        assert_eq!(entries(dir.path()), ["node1.jsonl"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_nothing_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("f");
        let err = write_atomically(&path, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn a_stale_temporary_name_is_skipped_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        let name = |k: u64| {
            dir.path()
                .join(format!(".status.{}.{k}.tmp", std::process::id()))
        };
        for k in 0..3 {
            std::fs::write(name(k), "stale").unwrap();
        }
        let (tmp, _file) = create_temporary(&path, &AtomicU64::new(0)).unwrap();
        assert_eq!(tmp, name(3));
        for k in 0..3 {
            assert_eq!(std::fs::read(name(k)).unwrap(), b"stale");
        }
    }
}
