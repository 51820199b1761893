//! `healthcheck snapshot OUT.tar.gz`: capture exactly what the checks read,
//! so that `healthcheck run --root <unpacked>` replays the node offline.
//!
//! The archive holds every file the checks read (at its path on the node),
//! what checks add for themselves (the kernel log, probe results, NVML
//! readings), and `lemonade-snapshot.json` describing the capture.

use crate::check::{Check, CheckContext, Profile, Shared};
use crate::pipeline;
use crate::record::{self, RunOptions, RunReport, Trigger, UnknownCheck};
use crate::root::NodeRoot;
use crate::session::StoreUse;
use lemonade_config::Config;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Name of the manifest inside the archive.
pub const MANIFEST: &str = "lemonade-snapshot.json";

#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Run(#[from] UnknownCheck),
}

#[derive(Serialize)]
struct Manifest<'a> {
    node: &'a str,
    taken_at: String,
    lemonade_version: &'a str,
    files: usize,
    report: &'a RunReport,
}

/// Runs every enabled check against `root_dir` while recording, and writes the archive.
pub fn capture(
    config: &Config,
    registry: &[Arc<dyn Check>],
    root_dir: &Path,
    node: &str,
    out: &Path,
) -> Result<RunReport, SnapshotError> {
    let root = Arc::new(NodeRoot::recording(root_dir));
    let opts = RunOptions {
        node: node.to_string(),
        root: Arc::clone(&root),
        profile: Profile::Full,
        only: None,
        trigger: Trigger::Manual,
        job: None,
        now: chrono::Utc::now(),
    };
    // From no previous state, as its replay will run: every XID in the log counts.
    let request = pipeline::Request {
        run: opts.clone(),
        store: StoreUse::Ignore,
        apply_policy: false,
        dry_run: true,
        job_record: None,
        recheck: Vec::new(),
    };
    let report = pipeline::run(Ok(config.clone()), registry, &request)
        .map_err(SnapshotError::Run)?
        .report;

    let mut files: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    for path in root.recorded() {
        let real = root.path(&path);
        let is_file = std::fs::metadata(&real)
            .map(|m| m.is_file())
            .unwrap_or(false);
        if is_file {
            if let Ok(bytes) = std::fs::read(&real) {
                files.insert(path, bytes);
            }
        }
    }
    let config = Arc::new(config.clone());
    let ctx = CheckContext {
        root: Arc::clone(&root),
        config: Arc::clone(&config),
        previous: None,
        now: opts.now,
        profile: Profile::Full,
        job: None,
        shared: Arc::new(Shared::default()),
    };
    for check in record::select(registry, &config, &opts).map_err(SnapshotError::Run)? {
        files.extend(check.snapshot_files(&ctx));
    }

    let manifest = Manifest {
        node,
        taken_at: opts.now.to_rfc3339(),
        lemonade_version: env!("CARGO_PKG_VERSION"),
        files: files.len(),
        report: &report,
    };
    let manifest = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    write_archive(out, &files, &manifest).map_err(|source| SnapshotError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(report)
}

fn write_archive(
    out: &Path,
    files: &BTreeMap<PathBuf, Vec<u8>>,
    manifest: &[u8],
) -> std::io::Result<()> {
    let file = std::fs::File::create(out)?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mut append = |path: &Path, bytes: &[u8]| -> std::io::Result<()> {
        let mut header = tar::Header::new_gnu();
        // sysfs reports 4096 for every file: the size is what we read.
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, path.strip_prefix("/").unwrap_or(path), bytes)
    };
    append(Path::new(MANIFEST), manifest)?;
    for (path, bytes) in files {
        append(path, bytes)?;
    }
    tar.into_inner()?.finish()?.sync_all()
}
