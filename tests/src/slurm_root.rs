//! Another Slurm release series, run from a Debian root on this machine.
//!
//! `scripts/slurm-root SERIES` builds and caches the root (trixie for 24.11,
//! sid for 26.05). [`SlurmRoot::command`] runs a program chrooted into it, in
//! a mount namespace of its own where `/proc`, `/sys` (Slurm 24.11's slurmd
//! needs the cgroup mounts), `/dev`, `/etc/hosts`, the temporary directory
//! and the repository are bound at their own paths. So the series' daemons
//! find the cluster's files, and run our binaries built on the host, at the
//! paths the host uses. Nothing stays mounted on the host: a namespace ends
//! with its last process.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A Debian root carrying one Slurm series.
#[derive(Debug, Clone)]
pub struct SlurmRoot {
    series: String,
    path: PathBuf,
}

/// Names the Slurm series the end-to-end tests run on (`24.11`, `26.05`);
/// unset or `22.05`: the host's. `scripts/test` runs the end-to-end set once
/// per series with it.
pub const SERIES_ENV: &str = "LEMONADE_SLURM_SERIES";

impl SlurmRoot {
    /// The root of the series `LEMONADE_SLURM_SERIES` names; `None` for the
    /// host's own. Panics, saying why, when that root cannot be had: a test
    /// asked to run on a series must never quietly run on another.
    pub fn from_env() -> Option<SlurmRoot> {
        let series = std::env::var(SERIES_ENV).ok()?;
        let series = series.trim();
        if series.is_empty() || series == "22.05" {
            return None;
        }
        Some(SlurmRoot::prepare(series).unwrap_or_else(|e| panic!("{SERIES_ENV}={series}: {e}")))
    }

    /// The root of `series` (`24.11`, `26.05`), built by `scripts/slurm-root`
    /// when it is missing or out of date (about a minute). An error says why
    /// it could not be had; callers fail on it, never skip.
    pub fn prepare(series: &str) -> Result<SlurmRoot, String> {
        let script = crate::repo_root().join("scripts/slurm-root");
        let out = Command::new(&script)
            .arg(series)
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "no root for Slurm {series}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(SlurmRoot {
            series: series.to_string(),
            path,
        })
    }

    /// `24.11`, `26.05`.
    pub fn series(&self) -> &str {
        &self.series
    }

    /// The root directory, as the host sees it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first of `names` installed in the root, as a path inside it
    /// (`/usr/sbin/slurmd`).
    pub fn program(&self, names: &[&str]) -> Option<PathBuf> {
        ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .flat_map(|dir| names.iter().map(move |n| Path::new(dir).join(n)))
            .find(|p| self.path.join(p.strip_prefix("/").unwrap_or(p)).is_file())
    }

    /// `program` (a path inside the root, or a host path under a bound
    /// directory) run chrooted into the root.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        let enter = Enter::new(&self.path, &bound_directories());
        // SAFETY: the closure only makes system calls (unshare, mount,
        // chroot, chdir) on memory prepared before the fork.
        unsafe { cmd.pre_exec(move || enter.run()) };
        cmd
    }
}

/// Directories of the host that programs in the root must see at the same
/// path: temporary files (clusters, test data) and the repository with its
/// build output (our binaries, fixtures, the fake NVML library).
fn bound_directories() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir(), crate::repo_root()];
    let bin = crate::target_bin_dir();
    if !bin.starts_with(crate::repo_root()) {
        dirs.push(bin);
    }
    dirs
}

/// What the child does between fork and exec, prepared in the parent
/// (no allocation after the fork).
struct Enter {
    root: CString,
    /// (source, target, recursive)
    binds: Vec<(CString, CString, bool)>,
}

impl Enter {
    fn new(root: &Path, extra: &[PathBuf]) -> Enter {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("no NUL in paths");
        let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
        let mut binds = Vec::new();
        for dir in ["/proc", "/sys", "/dev"] {
            binds.push((c(Path::new(dir)), c(&inside(Path::new(dir))), true));
        }
        // A current /etc/hosts: MariaDB's and Slurm's name lookups need it.
        binds.push((
            c(Path::new("/etc/hosts")),
            c(&inside(Path::new("/etc/hosts"))),
            false,
        ));
        for dir in extra {
            let target = inside(dir);
            // Mount points must exist; they stay as empty directories.
            let _ = std::fs::create_dir_all(&target);
            binds.push((c(dir), c(&target), true));
        }
        Enter {
            root: c(root),
            binds,
        }
    }

    fn run(&self) -> io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        // The working directory Command has set (the cluster's directory),
        // read into the stack: it is bound at the same path inside.
        let mut cwd = [0u8; 4096];
        // SAFETY: plain system calls on NUL-terminated strings we own and a
        // buffer of the length we pass.
        unsafe {
            let have_cwd = !libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()).is_null();
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Private: our binds never propagate back to the host.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (source, target, recursive) in &self.binds {
                let flags = libc::MS_BIND | if *recursive { libc::MS_REC } else { 0 };
                check(libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ))?;
            }
            check(libc::chroot(self.root.as_ptr()))?;
            if have_cwd && libc::chdir(cwd.as_ptr().cast()) == 0 {
                return Ok(());
            }
            check(libc::chdir(c"/".as_ptr()))
        }
    }
}
