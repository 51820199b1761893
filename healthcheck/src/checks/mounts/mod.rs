//! `mounts`: the filesystems jobs need are mounted as expected and answer.
//!
//! Gather reads `/proc/self/mountinfo` and probes each expected mount with
//! `statfs` in a child process under `statfs_timeout_s` (see [`probe`]), all
//! mounts at once. Under a root other than `/`, `<root>/<mount point>` is
//! probed; a snapshot carries the probe results in [`STATFS_FILE`], and
//! gather replays them from there when the file exists.

pub mod evaluate;
pub mod mountinfo;
pub mod probe;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use crate::root::NodeRoot;
use lemonade_config::{Config, MountsSettings};
use probe::ProbeResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use evaluate::{evaluate, MountsData};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "mounts";

/// Probe results captured by `healthcheck snapshot`, as the node sees the path.
pub const STATFS_FILE: &str = "/.lemonade/statfs.json";

/// The `mounts` check.
pub struct Mounts;

impl Check for Mounts {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "expected mounts present with fstype and options, statfs answers in time, free space"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.mounts;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.mounts;
        let data = gather(&ctx.root, settings)?;
        Ok(CheckOutput::findings(evaluate(&data, settings)))
    }

    fn snapshot_files(&self, ctx: &CheckContext) -> Vec<(PathBuf, Vec<u8>)> {
        match gather(&ctx.root, &ctx.config.checks.mounts) {
            Ok(data) => {
                let by_path: BTreeMap<String, ProbeResult> = data
                    .probes
                    .into_iter()
                    .map(|(p, r)| (p.display().to_string(), r))
                    .collect();
                let json = serde_json::to_vec_pretty(&by_path).unwrap_or_default();
                vec![(PathBuf::from(STATFS_FILE), json)]
            }
            Err(_) => Vec::new(),
        }
    }
}

/// Reads mountinfo and probes the expected mounts that are mounted (or
/// reads their results from [`STATFS_FILE`] when replaying a snapshot).
pub fn gather(root: &NodeRoot, settings: &MountsSettings) -> Result<MountsData, CheckError> {
    let mounts = mountinfo::parse(&root.read_to_string(mountinfo::MOUNTINFO)?)?;
    let wanted: Vec<_> = settings
        .expect
        .iter()
        .filter(|e| mounts.iter().any(|m| m.mount_point == e.path))
        .collect();
    // On a live node the mounts are always probed, whatever lies in `/`.
    let recorded = if root.is_live() {
        None
    } else {
        root.read_value_opt(STATFS_FILE)?
    };
    let probes = match recorded {
        Some(text) => {
            let recorded: BTreeMap<PathBuf, ProbeResult> = serde_json::from_str(&text)
                .map_err(|e| CheckError::malformed(STATFS_FILE, e.to_string()))?;
            recorded
                .into_iter()
                .filter(|(p, _)| wanted.iter().any(|e| e.path == *p))
                .collect()
        }
        None => {
            let real: Vec<PathBuf> = wanted.iter().map(|e| root.path(&e.path)).collect();
            let targets: Vec<(&Path, _)> = real
                .iter()
                .zip(&wanted)
                .map(|(p, e)| (p.as_path(), e.probe))
                .collect();
            let timeout = Duration::from_secs_f64(settings.statfs_timeout_s.max(0.001));
            let results = probe::probe_all(&targets, timeout);
            wanted.iter().map(|e| e.path.clone()).zip(results).collect()
        }
    };
    Ok(MountsData { mounts, probes })
}
