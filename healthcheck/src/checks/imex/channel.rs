//! Recreating a missing IMEX channel device, as NVIDIA's IMEX guide says:
//! channel devices do not survive a reboot, and the prolog makes
//! `channel<N>` with `mknod <path> c <major> <N>`, the major being the
//! `nvidia-caps-imex-channels` line of `/proc/devices`.
//!
//! Everything goes through the root (a fixture tree in tests) and no symlink
//! is followed: a symlink where a directory or the device should be is an
//! error, never a way to create a device elsewhere.

use super::gather::{self, Channel};
use crate::root::NodeRoot;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

pub const PROC_DEVICES: &str = "/proc/devices";
/// The driver name of the channel devices in `/proc/devices`.
pub const CHANNEL_DRIVER: &str = "nvidia-caps-imex-channels";

/// What [`ensure`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ensured {
    AlreadyThere,
    Created {
        major: u32,
        minor: u32,
    },
    /// `--dry-run`: what it would run.
    DryRun(String),
}

#[derive(Debug, Error)]
pub enum ChannelError {
    #[error("{0}: the name is not `channel<N>`")]
    NotAChannel(String),
    #[error("{0} is {1}: left as it is")]
    InTheWay(String, &'static str),
    #[error("{0} is a symlink: not followed")]
    Symlink(String),
    #[error("no `{CHANNEL_DRIVER}` line in {PROC_DEVICES}: is the NVIDIA driver loaded?")]
    NoMajor,
    #[error(transparent)]
    Read(#[from] crate::root::ReadError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// The character major of the channel devices, from `/proc/devices`
/// (`234 nvidia-caps-imex-channels` under `Character devices:`).
pub fn major(proc_devices: &str) -> Option<u32> {
    proc_devices
        .lines()
        .skip_while(|l| l.trim() != "Character devices:")
        .take_while(|l| l.trim() != "Block devices:")
        .find_map(|l| {
            let mut words = l.split_whitespace();
            let major = words.next()?.parse().ok()?;
            (words.next() == Some(CHANNEL_DRIVER) && words.next().is_none()).then_some(major)
        })
}

/// `channel7` → 7.
pub fn minor(node_path: &str) -> Option<u32> {
    let name = Path::new(node_path).file_name()?.to_str()?;
    let digits = name.strip_prefix("channel")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Makes `node_path` (`/dev/nvidia-caps-imex-channels/channel0`) when it is
/// missing, its directory too; prints instead with `dry_run`.
pub fn ensure(root: &NodeRoot, node_path: &str, dry_run: bool) -> Result<Ensured, ChannelError> {
    let minor = minor(node_path).ok_or_else(|| ChannelError::NotAChannel(node_path.into()))?;
    match gather::channel(root, node_path)? {
        Channel::Present => return Ok(Ensured::AlreadyThere),
        Channel::NotADevice(what) => return Err(ChannelError::InTheWay(node_path.into(), what)),
        Channel::Missing => {}
    }
    let devices = root.read_to_string(PROC_DEVICES)?;
    let major = major(&devices).ok_or(ChannelError::NoMajor)?;
    if dry_run {
        return Ok(Ensured::DryRun(format!(
            "mknod {node_path} c {major} {minor}"
        )));
    }
    let parent = Path::new(node_path).parent().unwrap_or(Path::new("/"));
    make_dirs(root, parent)?;
    mknod(&root.path(node_path), node_path, major, minor)?;
    Ok(Ensured::Created { major, minor })
}

/// The prolog's part, before the checks: on a node in an NVLink domain
/// (`[checks.imex] enabled` and `create_channel`), a missing channel is
/// made. Returns the line to print, if anything happened; failing to make
/// it is a line too: the check then finds `IMEX_CHANNEL_MISSING`.
pub fn for_prolog(
    settings: &lemonade_config::ImexSettings,
    root: &NodeRoot,
    dry_run: bool,
) -> Option<String> {
    if !settings.enabled || !settings.create_channel {
        return None;
    }
    match ensure(root, &settings.channel, dry_run) {
        Ok(Ensured::AlreadyThere) => None,
        Ok(Ensured::Created { major, minor }) => Some(format!(
            "imex: made {} (c {major} {minor})",
            settings.channel
        )),
        Ok(Ensured::DryRun(shown)) => Some(format!("dry-run: {shown}")),
        Err(e) => Some(format!("imex: cannot make {}: {e}", settings.channel)),
    }
}

/// Creates each missing directory of `node_dir` under the root; an existing
/// component must be a real directory, not a symlink.
fn make_dirs(root: &NodeRoot, node_dir: &Path) -> Result<(), ChannelError> {
    let mut node = PathBuf::from("/");
    for part in node_dir.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        node.push(name);
        let real = root.path(&node);
        let shown = node.display().to_string();
        match std::fs::symlink_metadata(&real) {
            Ok(m) if m.file_type().is_symlink() => return Err(ChannelError::Symlink(shown)),
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(ChannelError::InTheWay(shown, "not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&real).map_err(|source| ChannelError::Io {
                    path: shown,
                    source,
                })?;
            }
            Err(source) => {
                return Err(ChannelError::Io {
                    path: shown,
                    source,
                })
            }
        }
    }
    Ok(())
}

fn mknod(real: &Path, shown: &str, major: u32, minor: u32) -> Result<(), ChannelError> {
    use nix::sys::stat::{makedev, Mode, SFlag};
    // Readable and writable by all, as the guide's default channel: jobs of
    // any user on the node use channel0. mknod does not follow a symlink
    // that appeared meanwhile: it fails with EEXIST.
    let mode = Mode::from_bits_truncate(0o666);
    let dev = makedev(u64::from(major), u64::from(minor));
    let io = |source: std::io::Error| ChannelError::Io {
        path: shown.to_string(),
        source,
    };
    nix::sys::stat::mknod(real, SFlag::S_IFCHR, mode, dev).map_err(|e| io(e.into()))?;
    // The umask took bits off; the device we just made in a root-only
    // directory gets them back.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(real, std::fs::Permissions::from_mode(0o666)).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVICES: &str = "Character devices:
  1 mem
195 nvidia
234 nvidia-caps-imex-channels
235 nvidia-caps

Block devices:
  8 sd
";
    const CHANNEL: &str = "/dev/nvidia-caps-imex-channels/channel0";

    fn tree() -> (tempfile::TempDir, NodeRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/devices"), DEVICES).unwrap();
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        let root = NodeRoot::new(dir.path());
        (dir, root)
    }

    #[test]
    fn the_major_is_the_channel_drivers_character_line() {
        assert_eq!(major(DEVICES), Some(234));
        assert_eq!(major("Character devices:\n195 nvidia\n"), None);
        assert_eq!(
            major("Block devices:\n234 nvidia-caps-imex-channels\n"),
            None
        );
        assert_eq!(
            (
                minor(CHANNEL),
                minor("/dev/x/channel"),
                minor("/dev/x/chan1")
            ),
            (Some(0), None, None)
        );
    }

    #[test]
    fn a_dry_run_says_the_mknod_and_creates_nothing() {
        let (dir, root) = tree();
        let done = ensure(&root, CHANNEL, true).unwrap();
        assert_eq!(done, Ensured::DryRun(format!("mknod {CHANNEL} c 234 0")));
        assert!(!dir.path().join("dev/nvidia-caps-imex-channels").exists());
    }

    #[test]
    fn a_missing_channel_is_made_with_the_major_from_proc_devices() {
        let (dir, root) = tree();
        match ensure(&root, CHANNEL, false) {
            Ok(done) => {
                assert_eq!(
                    done,
                    Ensured::Created {
                        major: 234,
                        minor: 0
                    }
                );
                assert_eq!(gather::channel(&root, CHANNEL).unwrap(), Channel::Present);
                use std::os::unix::fs::PermissionsExt;
                let meta = std::fs::metadata(dir.path().join(&CHANNEL[1..])).unwrap();
                assert_eq!(meta.permissions().mode() & 0o777, 0o666);
                assert_eq!(
                    ensure(&root, CHANNEL, false).unwrap(),
                    Ensured::AlreadyThere
                );
            }
            // Without CAP_MKNOD (an unprivileged test run) the directory is
            // made and the mknod refused: the error names the device.
            Err(ChannelError::Io { path, .. }) => {
                assert_eq!(path, CHANNEL);
                assert!(dir.path().join("dev/nvidia-caps-imex-channels").is_dir());
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_symlinked_directory_or_something_in_the_way_is_refused() {
        let (dir, root) = tree();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("dev/nvidia-caps-imex-channels"))
            .unwrap();
        let err = ensure(&root, CHANNEL, false).unwrap_err();
        assert!(
            matches!(err, ChannelError::Symlink(ref p) if p == "/dev/nvidia-caps-imex-channels"),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        std::fs::remove_file(dir.path().join("dev/nvidia-caps-imex-channels")).unwrap();
        std::fs::create_dir(dir.path().join("dev/nvidia-caps-imex-channels")).unwrap();
        std::fs::write(
            dir.path().join("dev/nvidia-caps-imex-channels/channel0"),
            "x",
        )
        .unwrap();
        assert!(matches!(
            ensure(&root, CHANNEL, false),
            Err(ChannelError::InTheWay(..))
        ));
    }

    #[test]
    fn the_prolog_makes_the_channel_only_on_a_node_of_an_nvlink_domain() {
        let (dir, root) = tree();
        let mut settings = lemonade_config::ImexSettings::default();
        assert_eq!(for_prolog(&settings, &root, false), None);
        assert!(!dir.path().join("dev/nvidia-caps-imex-channels").exists());
        settings.enabled = true;
        let line = for_prolog(&settings, &root, true).unwrap();
        assert_eq!(line, format!("dry-run: mknod {CHANNEL} c 234 0"));
        let line = for_prolog(&settings, &root, false).unwrap();
        assert!(line.contains(CHANNEL), "{line}");
        settings.create_channel = false;
        std::fs::remove_dir_all(dir.path().join("dev/nvidia-caps-imex-channels")).unwrap();
        assert_eq!(for_prolog(&settings, &root, false), None);
    }

    #[test]
    fn without_the_driver_line_nothing_is_made() {
        let (dir, root) = tree();
        std::fs::write(
            dir.path().join("proc/devices"),
            "Character devices:\n195 nvidia\n",
        )
        .unwrap();
        assert!(matches!(
            ensure(&root, CHANNEL, false),
            Err(ChannelError::NoMajor)
        ));
        assert!(!dir.path().join("dev/nvidia-caps-imex-channels").exists());
    }
}
