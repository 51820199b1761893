//! Opening an input file that may come from anyone (lemon runs as root): a
//! metric recording for `lemon watch --replay`, a results file for `lemon
//! validate judge`. No symlink as the last component, a regular file only,
//! and (when read whole) a size cap, so a FIFO cannot block lemon nor a
//! device or a huge file fill its memory.

use crate::error::{LemonError, Result};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading if it is a regular file reached without a
/// symlink as its last component. `what` names the file the user should
/// give instead ("a CSV file of results").
pub fn open_plain(path: &Path, what: &str) -> Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == Errno::ELOOP as i32 => LemonError::Usage(format!(
                "{}: is a symlink; give the file itself",
                path.display()
            )),
            _ => LemonError::io(path, e),
        })?;
    let meta = file.metadata().map_err(|e| LemonError::io(path, e))?;
    if !meta.is_file() {
        return Err(LemonError::Usage(format!(
            "{}: not a regular file; give {what}",
            path.display()
        )));
    }
    Ok(file)
}

/// The bytes of `path`, opened as [`open_plain`] does, if it is at most
/// `cap` bytes long.
pub fn read_plain(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    let file = open_plain(path, what)?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LemonError::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(LemonError::Usage(format!(
            "{}: larger than {} bytes; split it or keep only recent rows",
            path.display(),
            cap
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_a_fifo_and_an_oversized_file_are_refused_with_the_path_named() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("r.csv");
        std::fs::write(&real, "node,sku,time,metric,value\n").unwrap();
        assert_eq!(read_plain(&real, 100, "a CSV file").unwrap().len(), 27);
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = read_plain(&link, 100, "a CSV file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("link.csv: is a symlink"), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_plain(&fifo, 100, "a CSV file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("fifo: not a regular file"), "{err}");
        let err = read_plain(&real, 26, "a CSV file").unwrap_err().to_string();
        assert!(err.contains("r.csv: larger than 26 bytes"), "{err}");
        let err = read_plain(&dir.path().join("none"), 10, "a CSV file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("none"), "{err}");
    }
}
