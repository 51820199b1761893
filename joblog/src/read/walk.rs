//! Opening a user-named path as root without being tricked: walk it from `/`
//! one component at a time with `openat(O_NOFOLLOW)`, check each directory
//! on the open descriptor (no path is looked up twice), and open the file
//! itself only when it is a regular file of the job's user.

use super::Skip;
use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

/// Opens `path` for reading when every rule of issue 36 holds, else says
/// which rule it broke.
pub fn open_checked(path: &Path, owner_uid: u32) -> Result<File, Skip> {
    if path.as_os_str().is_empty() || path == Path::new("/dev/null") {
        return Err(Skip::NoLog);
    }
    if !path.is_absolute() {
        return Err(Skip::NotAbsolute);
    }
    let mut names: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::RootDir | Component::CurDir => {}
            // `..` would step back over a directory already checked.
            Component::ParentDir | Component::Prefix(_) => return Err(Skip::UnsafeParent),
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return Err(Skip::NotRegular);
    };
    let mut dir = nix::fcntl::open("/", dir_flags(), Mode::empty()).map_err(skip_for)?;
    check_directory(&dir, owner_uid)?;
    for name in parents {
        dir = open_directory(&dir, name)?;
        check_directory(&dir, owner_uid)?;
    }
    open_file(&dir, last, owner_uid)
}

/// `O_PATH`: a directory the job's user may search but not list still walks.
fn dir_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn open_directory(parent: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Skip> {
    match openat(parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => Ok(fd),
        // A symlink under O_NOFOLLOW|O_DIRECTORY fails ENOTDIR (or ELOOP):
        // look at the entry itself, without following it, to say which.
        Err(Errno::ENOTDIR | Errno::ELOOP) => {
            match fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if kind(&st) == SFlag::S_IFLNK => Err(Skip::Symlink),
                // A file where a directory should be: the path names nothing.
                Ok(_) => Err(Skip::NoLog),
                Err(e) => Err(skip_for(e)),
            }
        }
        Err(e) => Err(skip_for(e)),
    }
}

/// A directory on the way may belong to root or to the job's user, and
/// nobody else may write to it unless it is sticky (`/tmp`, `/scratch`):
/// otherwise another user could swap the log for a link or a file of theirs.
fn check_directory(dir: &OwnedFd, owner_uid: u32) -> Result<(), Skip> {
    let st = fstat(dir).map_err(skip_for)?;
    let mode = st.st_mode as libc::mode_t;
    let shared_writable = mode & (libc::S_IWGRP | libc::S_IWOTH) != 0;
    let sticky = mode & libc::S_ISVTX != 0;
    if (st.st_uid != 0 && st.st_uid != owner_uid) || (shared_writable && !sticky) {
        return Err(Skip::UnsafeParent);
    }
    Ok(())
}

/// The last component: looked at first without following it (so that a
/// FIFO or device is never opened), then opened without following it, and
/// the open file checked again to be the one looked at.
fn open_file(dir: &OwnedFd, name: &OsStr, owner_uid: u32) -> Result<File, Skip> {
    let seen = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(skip_for)?;
    check_file(&seen, owner_uid)?;
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_CLOEXEC
        | OFlag::O_NOCTTY;
    let fd = openat(dir, name, flags, Mode::empty()).map_err(|e| match e {
        Errno::ELOOP => Skip::Symlink,
        Errno::ENXIO => Skip::NotRegular,
        e => skip_for(e),
    })?;
    let opened = fstat(fd.as_fd()).map_err(skip_for)?;
    check_file(&opened, owner_uid)?;
    if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino) {
        // Swapped between the look and the open: someone is racing us.
        return Err(Skip::Vanished);
    }
    Ok(File::from(fd))
}

fn check_file(st: &FileStat, owner_uid: u32) -> Result<(), Skip> {
    match kind(st) {
        SFlag::S_IFREG => {}
        SFlag::S_IFLNK => return Err(Skip::Symlink),
        SFlag::S_IFCHR if st.st_rdev == libc::makedev(1, 3) => return Err(Skip::NoLog),
        _ => return Err(Skip::NotRegular),
    }
    if st.st_uid != owner_uid {
        return Err(Skip::WrongOwner);
    }
    Ok(())
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode as libc::mode_t & libc::S_IFMT)
}

/// The skip for an error of the walk or of the read.
pub fn skip_for(e: Errno) -> Skip {
    match e {
        Errno::ENOENT | Errno::ENOTDIR => Skip::NoLog,
        Errno::ELOOP => Skip::Symlink,
        Errno::ESTALE => Skip::Vanished,
        _ => Skip::Unreadable,
    }
}
