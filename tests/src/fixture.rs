//! Fixture nodes: directory trees in the real formats of sysfs, procfs and the
//! kernel log, as a node presents them.
//!
//! `tests/fixtures/nodes/healthy/` is a whole healthy node (8 GPUs, 8 HCAs, mounts).
//! Every fault is an overlay, `tests/fixtures/nodes/<fault>/`, holding only
//! the files that differ, plus an optional `REMOVE` file listing node paths
//! (one per line) that the fault deletes: a missing device, a lost mount.
//! [`node`] composes healthy + overlay into a temporary directory that a test
//! may also change further.

use std::io;
use std::path::{Path, PathBuf};

/// The fixture tree root: `tests/fixtures/nodes`.
pub fn nodes_dir() -> PathBuf {
    crate::tests_dir().join("fixtures").join("nodes")
}

/// The node config every fixture node uses: `tests/fixtures/nodes/lemonade.toml`.
pub fn node_config() -> PathBuf {
    nodes_dir().join("lemonade.toml")
}

/// The name of the overlay's list of deleted paths.
pub const REMOVE_LIST: &str = "REMOVE";

/// A composed node, deleted on drop.
pub struct FixtureNode {
    dir: tempfile::TempDir,
}

impl FixtureNode {
    /// The node's root directory, for `--root`.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The real path of a node path (`/sys/...`).
    pub fn path(&self, node_path: &str) -> PathBuf {
        self.dir.path().join(node_path.trim_start_matches('/'))
    }

    /// Writes a file at a node path, creating directories.
    pub fn write(&self, node_path: &str, contents: impl AsRef<[u8]>) {
        let p = self.path(node_path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    }

    /// Appends to a file at a node path (a new kernel log line).
    pub fn append(&self, node_path: &str, contents: impl AsRef<[u8]>) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.path(node_path))
            .unwrap();
        f.write_all(contents.as_ref()).unwrap();
    }

    /// Deletes a file or directory at a node path.
    pub fn remove(&self, node_path: &str) {
        let p = self.path(node_path);
        if p.is_dir() {
            std::fs::remove_dir_all(p).unwrap();
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The healthy node with the overlay `fault` applied (`"healthy"` for none).
pub fn node(fault: &str) -> FixtureNode {
    let dir = tempfile::Builder::new()
        .prefix(&format!("lemonade-{fault}-"))
        .tempdir()
        .expect("temporary directory");
    compose(fault, dir.path()).unwrap_or_else(|e| panic!("composing fixture node `{fault}`: {e}"));
    FixtureNode { dir }
}

/// Composes healthy + overlay `fault` into `dest` (which must exist).
pub fn compose(fault: &str, dest: &Path) -> io::Result<()> {
    copy_tree(&nodes_dir().join("healthy"), dest)?;
    if fault != "healthy" {
        let overlay = nodes_dir().join(fault);
        if !overlay.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no fixture overlay {}", overlay.display()),
            ));
        }
        if let Ok(list) = std::fs::read_to_string(overlay.join(REMOVE_LIST)) {
            for line in list
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                let p = dest.join(line.trim_start_matches('/'));
                if p.is_dir() {
                    std::fs::remove_dir_all(&p)?;
                } else if p.exists() || p.is_symlink() {
                    std::fs::remove_file(&p)?;
                }
            }
        }
        copy_tree(&overlay, dest)?;
        let _ = std::fs::remove_file(dest.join(REMOVE_LIST));
    }
    Ok(())
}

/// Fault overlays available, for tests that walk all of them.
pub fn faults() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(nodes_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "healthy")
        .collect();
    names.sort();
    names
}

/// Copies a tree; symlinks are copied as symlinks (sysfs is full of them),
/// `.keep` files (which only make git keep empty directories) are skipped.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".keep" {
            continue;
        }
        let src = entry.path();
        let dst = to.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
            continue;
        }
        // A running cluster's checks read the tree while a test changes it
        // (`Cluster::set_fixture`): each file and link appears whole, by
        // rename, never truncated or missing halfway (an empty `comm` read
        // as a missing service once drained the demo's node3 for the wrong
        // reason).
        let staged = to.join(format!(".{}.lemonade-new", name.to_string_lossy()));
        if kind.is_symlink() {
            let _ = std::fs::remove_file(&staged);
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &staged)?;
        } else {
            std::fs::copy(&src, &staged)?;
        }
        std::fs::rename(&staged, &dst)?;
    }
    Ok(())
}
