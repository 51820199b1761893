//! Reading a file that may be hostile (a benchmark output a user names, the
//! criteria file in a shared directory), as root: no symlink as the last
//! component, a regular file only (a FIFO must not block, a device must not
//! be read), and never more than a cap. Callers word the refusal for their
//! own file.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum Refusal {
    Symlink,
    NotRegular,
    /// Over the cap given.
    TooLarge,
    Io(std::io::Error),
}

/// The bytes of `path` if it is a regular file reached without a symlink
/// as its last component and at most `max` bytes long; reading stops one
/// byte past `max`.
pub fn read_capped(path: &Path, max: usize) -> Result<Vec<u8>, Refusal> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: opening a FIFO must not wait for a writer.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Refusal::Symlink,
            _ => Refusal::Io(e),
        })?;
    if !file.metadata().map_err(Refusal::Io)?.is_file() {
        return Err(Refusal::NotRegular);
    }
    let mut bytes = Vec::new();
    File::take(file, max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(Refusal::Io)?;
    if bytes.len() > max {
        return Err(Refusal::TooLarge);
    }
    Ok(bytes)
}
