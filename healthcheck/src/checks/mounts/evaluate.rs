//! Judging the expected mounts: a pure function of mountinfo, probe results and config.

use super::mountinfo::MountEntry;
use super::probe::{FsStat, ProbeResult};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, MountExpectation, MountsSettings, Severity};
use std::collections::BTreeMap;
use std::path::PathBuf;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const MOUNT_MISSING: &str = "MOUNT_MISSING";
pub const MOUNT_WRONG_FSTYPE: &str = "MOUNT_WRONG_FSTYPE";
pub const MOUNT_READONLY: &str = "MOUNT_READONLY";
pub const MOUNT_OPTION_MISSING: &str = "MOUNT_OPTION_MISSING";
pub const MOUNT_HUNG: &str = "MOUNT_HUNG";
pub const MOUNT_ERROR: &str = "MOUNT_ERROR";
pub const MOUNT_PROBE_FAILED: &str = "MOUNT_PROBE_FAILED";
pub const MOUNT_NOT_PROBED: &str = "MOUNT_NOT_PROBED";
pub const MOUNT_LOW_SPACE: &str = "MOUNT_LOW_SPACE";
pub const MOUNT_LOW_INODES: &str = "MOUNT_LOW_INODES";

/// What gather found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MountsData {
    pub mounts: Vec<MountEntry>,
    /// Probe result per mount point, for the expected mounts that are mounted.
    pub probes: BTreeMap<PathBuf, ProbeResult>,
}

/// Findings for every expected mount.
pub fn evaluate(data: &MountsData, settings: &MountsSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    for expect in &settings.expect {
        let entity = expect.path.display().to_string();
        // Stacked mounts: the last one listed is the one jobs see.
        let Some(mount) = data
            .mounts
            .iter()
            .rev()
            .find(|m| m.mount_point == expect.path)
        else {
            findings.push(
                Finding::new(NAME, &entity, MOUNT_MISSING, Severity::Down)
                    .expected(expect.fstype.as_deref().unwrap_or("mounted"))
                    .actual("not mounted")
                    .message(format!("{entity} is not mounted")),
            );
            continue;
        };
        let mut own = how_mounted(&entity, expect, mount);
        own.extend(probed(
            &entity,
            expect,
            mount,
            data.probes.get(&expect.path),
            settings,
        ));
        if own.is_empty() {
            own.push(Finding::ok(NAME, &entity));
        }
        findings.extend(own);
    }
    findings
}

/// The filesystem type and the options against what is expected.
fn how_mounted(entity: &str, expect: &MountExpectation, mount: &MountEntry) -> Vec<Finding> {
    let mut own = Vec::new();
    if let Some(fstype) = &expect.fstype {
        if *fstype != mount.fstype {
            own.push(
                Finding::new(NAME, entity, MOUNT_WRONG_FSTYPE, Severity::Drain)
                    .expected(fstype)
                    .actual(&mount.fstype)
                    .message(format!(
                        "{entity} is {} from {} instead of {fstype}",
                        mount.fstype, mount.source
                    )),
            );
        }
    }
    for option in &expect.options {
        if option == "rw" && mount.read_only() {
            own.push(
                Finding::new(NAME, entity, MOUNT_READONLY, Severity::Drain)
                    .expected("rw")
                    .actual("ro")
                    .message(format!("{entity} is mounted read-only")),
            );
        } else if !mount.has_option(option) {
            own.push(
                Finding::new(NAME, entity, MOUNT_OPTION_MISSING, Severity::Warning)
                    .expected(option)
                    .actual(mount.options.join(","))
                    .message(format!("{entity} lacks mount option `{option}`")),
            );
        }
    }
    own
}

/// What the `statfs` probe of the mount says: hung, failing, or short of space.
fn probed(
    entity: &str,
    expect: &MountExpectation,
    mount: &MountEntry,
    probe: Option<&ProbeResult>,
    settings: &MountsSettings,
) -> Vec<Finding> {
    match probe {
        Some(ProbeResult::Ok(stat)) => free_space(entity, expect, stat),
        Some(ProbeResult::Hung { after_s }) => {
            vec![Finding::new(NAME, entity, MOUNT_HUNG, Severity::Down)
                .expected(format!(
                    "statfs answers within {} s",
                    settings.statfs_timeout_s
                ))
                .actual(format!("no answer after {after_s:.1} s"))
                .action(Action::Reboot)
                .message(format!(
                    "{entity} ({} from {}) does not answer statfs: hung",
                    mount.fstype, mount.source
                ))]
        }
        Some(ProbeResult::Failed { error }) => {
            vec![Finding::new(NAME, entity, MOUNT_ERROR, Severity::Down)
                .expected("statfs succeeds")
                .actual(error)
                .message(format!("{entity}: {error}"))]
        }
        Some(ProbeResult::NotRun { error }) => vec![Finding::unknown(
            NAME,
            entity,
            MOUNT_PROBE_FAILED,
            format!("{entity}: could not probe: {error}"),
        )],
        None => vec![Finding::unknown(
            NAME,
            entity,
            MOUNT_NOT_PROBED,
            format!("{entity}: no statfs result in the snapshot"),
        )],
    }
}

/// Free space and free inodes against their expected minimum.
fn free_space(entity: &str, expect: &MountExpectation, stat: &FsStat) -> Vec<Finding> {
    let free = percent(stat.bavail, stat.blocks);
    let inodes = percent(stat.ffree, stat.files);
    let mut own = Vec::new();
    for (code, what, have, want) in [
        (MOUNT_LOW_SPACE, "free space", free, expect.min_free_percent),
        (
            MOUNT_LOW_INODES,
            "free inodes",
            inodes,
            expect.min_free_inodes_percent,
        ),
    ] {
        if let (Some(have), Some(want)) = (have, want) {
            if have < want {
                own.push(
                    Finding::new(NAME, entity, code, Severity::Warning)
                        .expected(format!(">= {want}%"))
                        .actual(format!("{have:.1}%"))
                        .message(format!("{entity}: {have:.1}% {what} left")),
                );
            }
        }
    }
    own
}

/// `part` as a percentage of `whole`; `None` where the filesystem reports no total (NFS inodes).
fn percent(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}
