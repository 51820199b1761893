//! All of a check's file I/O goes through [`NodeRoot`], which knows the root
//! directory: `/` on a node, a fixture tree in tests, an unpacked snapshot
//! when replaying a node offline.
//!
//! When recording, it remembers every path read, so that `healthcheck snapshot`
//! captures exactly what the checks looked at.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

/// An I/O failure, naming the file as the node sees it (`/sys/...`, not the fixture path).
#[derive(Debug, Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    pub path: String,
    #[source]
    pub source: io::Error,
}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }
}

/// The node's file system as the checks see it.
#[derive(Debug)]
pub struct NodeRoot {
    root: PathBuf,
    recorded: Option<Mutex<BTreeSet<PathBuf>>>,
}

impl NodeRoot {
    pub fn new(root: impl Into<PathBuf>) -> NodeRoot {
        NodeRoot {
            root: root.into(),
            recorded: None,
        }
    }

    /// A root that remembers every path read through it.
    pub fn recording(root: impl Into<PathBuf>) -> NodeRoot {
        NodeRoot {
            root: root.into(),
            recorded: Some(Mutex::new(BTreeSet::new())),
        }
    }

    /// True on a real node (root `/`), where probes such as `statfs` mean something.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real path of `node_path` (an absolute path as the node sees it).
    pub fn path(&self, node_path: impl AsRef<Path>) -> PathBuf {
        let p = node_path.as_ref();
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    /// Notes that `node_path` was read by other means (kmsg, statfs), for snapshots.
    pub fn note(&self, node_path: impl AsRef<Path>) {
        if let Some(set) = &self.recorded {
            set.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(node_path.as_ref().to_path_buf());
        }
    }

    /// Paths read so far (when recording).
    pub fn recorded(&self) -> Vec<PathBuf> {
        match &self.recorded {
            Some(set) => set
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    }

    fn err(node_path: &Path, source: io::Error) -> ReadError {
        ReadError {
            path: node_path.display().to_string(),
            source,
        }
    }

    /// Reads a whole file.
    pub fn read_to_string(&self, node_path: impl AsRef<Path>) -> Result<String, ReadError> {
        let p = node_path.as_ref();
        let text = std::fs::read_to_string(self.path(p)).map_err(|e| Self::err(p, e))?;
        self.note(p);
        Ok(text)
    }

    /// Reads a one-value sysfs file, without its trailing newline.
    pub fn read_value(&self, node_path: impl AsRef<Path>) -> Result<String, ReadError> {
        Ok(self.read_to_string(node_path)?.trim_end().to_string())
    }

    /// Reads a one-value file if it exists.
    pub fn read_value_opt(&self, node_path: impl AsRef<Path>) -> Result<Option<String>, ReadError> {
        match self.read_value(node_path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Names in a directory, sorted; a missing directory is empty.
    pub fn list_dir(&self, node_path: impl AsRef<Path>) -> Result<Vec<String>, ReadError> {
        let p = node_path.as_ref();
        let entries = match std::fs::read_dir(self.path(p)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::err(p, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Self::err(p, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    pub fn exists(&self, node_path: impl AsRef<Path>) -> bool {
        self.path(node_path).exists()
    }
}
