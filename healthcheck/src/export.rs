//! The spool export: after each run, the node appends what the head node
//! needs (non-ok findings, new events, job records, our state changes, and
//! the task exits the SPANK plugin left in the node-local file) to its file in
//! the spool directory, with the sequence numbers kept in the node database.

use crate::finding::{Finding, OfJob};
use crate::record::RunReport;
use crate::state_change::StateChange;
use lemonade_config::Config;
use lemonade_spool::{self as spool, Body, TaskExit};
use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] lemonade_sql::StoreError),
    #[error(transparent)]
    Spool(#[from] lemonade_spool::SpoolError),
}

/// The records of one run: its non-ok findings, its new events, our state changes.
pub fn bodies_of_run(report: &RunReport, changes: &[StateChange]) -> Vec<Body> {
    let mut out: Vec<Body> = report
        .findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|finding| {
            Body::from(OfJob {
                finding,
                job_id: report.job_id.as_deref(),
            })
        })
        .collect();
    out.extend(report.new_events.iter().map(|e| Body::Event {
        check: e.check_name.clone(),
        entity: e.entity.clone(),
        code: e.code.clone(),
        severity: e.severity,
        detail: e.detail.clone(),
    }));
    out.extend(changes.iter().map(|c| Body::StateChange {
        action: format!("{} ({})", c.action, c.outcome.as_str()),
        reason: c.reason.clone(),
    }));
    out
}

/// The firmware versions a node runs, `check/entity` to version, as the
/// export last sent them (kept in the node database) or as a run read them.
/// Only changes travel: a version is sent when first seen or changed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inventory(BTreeMap<String, String>);

impl Inventory {
    /// Where the node database keeps what was sent (a `check_state` key no
    /// check uses).
    const KEY: &'static str = "export.inventory";
    /// The findings that carry a version: every `firmware` finding with a
    /// value, a GPU's VBIOS (its ok or `VBIOS_MISMATCH` finding), and a
    /// GPU's ECC history (the lifetime counts its ok `ecc` finding carries:
    /// no fault, but evidence the head node keeps per node), and every
    /// version the `versions` check read (kernel, driver, CUDA, NCCL, GSP),
    /// and a GPU's NVLink domain (its ok `fabric` finding, issue 50).
    fn is_version(f: &Finding) -> bool {
        match f.check.as_str() {
            "firmware" | "versions" => true,
            lemonade_spool::domain::CHECK => f.is_ok() && f.actual.is_some(),
            "gpu" => f.is_ok() || f.code == crate::checks::gpu::presence::VBIOS_MISMATCH,
            "ecc" => f.is_ok() && f.actual.is_some(),
            _ => false,
        }
    }

    /// The versions in `report`'s findings, ok or not.
    pub fn of_run(report: &RunReport) -> Inventory {
        Self::of_findings(&report.findings)
    }

    /// The versions in `findings`.
    pub fn of_findings(findings: &[Finding]) -> Inventory {
        Inventory(
            findings
                .iter()
                .filter(|f| Self::is_version(f))
                .filter_map(|f| Some((format!("{}/{}", f.check, f.entity), f.actual.clone()?)))
                .collect(),
        )
    }

    /// What the export last sent; empty when nothing was, or when the
    /// saved state is unreadable (everything is sent again).
    pub fn sent(store: &NodeStore) -> Inventory {
        store
            .check_state(Self::KEY)
            .ok()
            .flatten()
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default()
    }

    /// Records for the versions that differ from `sent`.
    pub fn changes_since(&self, sent: &Inventory) -> Vec<Body> {
        self.0
            .iter()
            .filter(|(item, value)| sent.0.get(*item) != Some(*value))
            .map(|(item, value)| {
                let (check, entity) = item.split_once('/').unwrap_or((item, ""));
                Body::Inventory {
                    check: check.to_string(),
                    entity: entity.to_string(),
                    value: value.clone(),
                }
            })
            .collect()
    }

    /// Remembers these versions as sent, keeping versions of checks that
    /// did not run this time (a prolog runs no firmware check).
    pub fn save_as_sent(
        &self,
        sent: Inventory,
        store: &NodeStore,
        at: i64,
    ) -> Result<(), ExportError> {
        let mut all = sent;
        all.0.extend(self.0.clone());
        let json = serde_json::to_string(&all).unwrap_or_default();
        store.set_check_state(Self::KEY, &json, at)?;
        Ok(())
    }
}

/// When the SPANK plugin's task-exit file is set aside for a new one.
///
/// The plugin appends without a lock (it must never make a task wait), so
/// the file is never truncated under it: once every line is exported and
/// the file is past `bytes`, it is renamed to `task-exits.jsonl.<length>`.
/// A task that opened it just before the rename still writes there; such
/// late lines are exported from that offset once the file has been quiet
/// for `quiet`, and then the file is removed.
#[derive(Debug, Clone, Copy)]
struct Rotation {
    bytes: u64,
    quiet: Duration,
}

const ROTATION: Rotation = Rotation {
    bytes: 1 << 20,
    quiet: Duration::from_secs(10),
};

/// What an export wrote, and what it could not.
#[derive(Debug, Default, PartialEq)]
pub struct Exported {
    /// Records appended to the node's export.
    pub records: usize,
    /// Task-exit lines that could not be read, one message each.
    pub malformed: Vec<String>,
}

/// Appends `bodies` (and any new task exits) to the node's export, with the
/// sequence numbers kept in `store` (the run's node database). Does nothing
/// when `[spool] dir` is unset.
pub fn export(
    config: &Config,
    store: &NodeStore,
    node: &str,
    at: i64,
    bodies: Vec<Body>,
) -> Result<Exported, ExportError> {
    export_rotating(
        config,
        store,
        node,
        at,
        bodies,
        SamplePrune::default(),
        ROTATION,
    )
}

/// What the node sampler drops from the node's file as it writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplePrune<'a> {
    /// Jobs that ended a while ago (the head node has read their chunks).
    pub ended_jobs: &'a [String],
    /// Chunks written before this (Unix seconds), whatever their job: a
    /// long job's chunks do not fill the file.
    pub before: i64,
}

/// As [`export`], for the node sampler: also drops from the node's file
/// the sample chunks that `prune` names, rewriting it even when `bodies` is
/// empty as long as there are ended jobs to drop.
pub fn export_samples(
    config: &Config,
    store: &NodeStore,
    node: &str,
    at: i64,
    bodies: Vec<Body>,
    prune: SamplePrune,
) -> Result<Exported, ExportError> {
    export_rotating(config, store, node, at, bodies, prune, ROTATION)
}

fn export_rotating(
    config: &Config,
    store: &NodeStore,
    node: &str,
    at: i64,
    bodies: Vec<Body>,
    prune: SamplePrune,
    rotation: Rotation,
) -> Result<Exported, ExportError> {
    let Some(dir) = &config.spool.dir else {
        return Ok(Exported::default());
    };
    let path = store.path();
    let conn = store.connection();
    let epoch = format!(
        "{}-{}",
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(at),
        std::process::id()
    );
    let mut state = node_jobs::spool_state(conn, path, &epoch, at)?;
    let exits_path = config.store.task_exits_path();
    let set_aside = quiet_set_aside_files(&exits_path, rotation.quiet);
    let read = all_task_exits(&exits_path, &set_aside, state.task_exits_offset);
    let malformed = read.malformed;
    let mut offset = read.offset;
    if set_aside_if_done(&exits_path, offset, rotation.bytes) {
        offset = 0;
    }
    let mut timed: Vec<(i64, Body)> = bodies.into_iter().map(|b| (at, b)).collect();
    timed.extend(read.exits.into_iter().map(|e| (e.at, task_exit_body(e))));
    let quiet = offset == state.task_exits_offset && set_aside.is_empty();
    if timed.is_empty() && quiet && prune.ended_jobs.is_empty() {
        return Ok(Exported {
            records: 0,
            malformed,
        });
    }
    let records: Vec<spool::Record> = timed
        .into_iter()
        .enumerate()
        .map(|(i, (t, body))| spool::Record {
            seq: state.next_seq + i as u64,
            epoch: state.epoch.clone(),
            node: node.to_string(),
            at: t,
            body,
        })
        .collect();
    if !records.is_empty() || !prune.ended_jobs.is_empty() {
        let pruned = |line: &[u8]| {
            spool::samples_chunk_of(line).is_some_and(|(at, job)| {
                at < prune.before || prune.ended_jobs.iter().any(|e| e == job)
            })
        };
        spool::write_dropping(dir, node, &records, config.spool.max_bytes, pruned)?;
    }
    state.next_seq += records.len() as u64;
    state.exported_until = at;
    state.task_exits_offset = offset;
    node_jobs::save_spool_state(conn, path, &state)?;
    for (file, _) in set_aside {
        let _ = std::fs::remove_file(file);
    }
    Ok(Exported {
        records: records.len(),
        malformed,
    })
}

/// The task exits of the files set aside (from their offsets), then of the
/// current file from `offset`; the offset is the current file's next.
fn all_task_exits(current: &Path, set_aside: &[(PathBuf, u64)], offset: u64) -> TaskExitsRead {
    let mut all = TaskExitsRead::default();
    for (file, from) in set_aside {
        let late = read_task_exits(file, *from);
        all.exits.extend(late.exits);
        all.malformed.extend(late.malformed);
    }
    let now = read_task_exits(current, offset);
    all.exits.extend(now.exits);
    all.malformed.extend(now.malformed);
    all.offset = now.offset;
    all
}

fn task_exit_body(e: TaskExit) -> Body {
    Body::TaskExit {
        job_id: e.job_id,
        step_id: e.step_id,
        task_id: e.task_id,
        exit_code: e.exit_code,
        signal: e.signal,
        // Lines of an older plugin have none: the head node falls back to `at`.
        at_ms: e.at_ms,
    }
}

/// Renames the task-exit file to `<name>.<offset>` when all of it is
/// exported and it is past `max_bytes`; true when it did.
fn set_aside_if_done(path: &Path, offset: u64, max_bytes: u64) -> bool {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if len != offset || len <= max_bytes {
        return false;
    }
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".{len}"));
    std::fs::rename(path, aside).is_ok()
}

/// Set-aside task-exit files untouched for `quiet`, with the offset their
/// late lines start at (the number in their name).
fn quiet_set_aside_files(path: &Path, quiet: Duration) -> Vec<(PathBuf, u64)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut files: Vec<(PathBuf, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let offset = e
                .file_name()
                .to_str()?
                .strip_prefix(&prefix)?
                .parse::<u64>()
                .ok()?;
            let modified = e.metadata().ok()?.modified().ok()?;
            let idle = now.duration_since(modified).unwrap_or_default();
            (idle >= quiet).then(|| (e.path(), offset))
        })
        .collect();
    files.sort();
    files
}

/// What one read of a task-exit file gave.
#[derive(Debug, Default)]
struct TaskExitsRead {
    exits: Vec<TaskExit>,
    /// Where the next read starts.
    offset: u64,
    /// Lines that are not task exits, named by file and byte offset.
    malformed: Vec<String>,
}

/// Complete lines of the task-exits file after `offset`, and the new offset.
/// A file shorter than the offset was rotated: read it from the start.
/// The plugin writes whole lines; a malformed one (a torn write, a full
/// disk) cannot be repaired and is reported rather than exported.
fn read_task_exits(path: &Path, offset: u64) -> TaskExitsRead {
    let unchanged = |offset| TaskExitsRead {
        offset,
        ..TaskExitsRead::default()
    };
    let Ok(mut file) = std::fs::File::open(path) else {
        return unchanged(0);
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len < offset { 0 } else { offset };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return unchanged(offset);
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return unchanged(offset);
    }
    // A line still being written has no newline yet: leave it for next time.
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut read = unchanged(start + complete as u64);
    let mut at = start;
    for line in bytes[..complete].split(|b| *b == b'\n') {
        if !line.is_empty() {
            match serde_json::from_slice(line) {
                Ok(exit) => read.exits.push(exit),
                Err(e) => read.malformed.push(format!(
                    "{}: byte {at}: not a task exit, skipped: {e}",
                    path.display()
                )),
            }
        }
        at += line.len() as u64 + 1;
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Write;

    /// A node config in a fresh directory: state directory made, spool set.
    fn node_with_spool() -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.path = dir.path().join("state/node.db");
        config.spool.dir = Some(dir.path().join("spool"));
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        (dir, config)
    }

    fn store(config: &Config) -> NodeStore {
        NodeStore::open(&config.store.path, Duration::from_secs(1)).unwrap()
    }

    fn versions(pairs: &[(&str, &str)]) -> Vec<Finding> {
        let mut found: Vec<Finding> = pairs
            .iter()
            .map(|&(entity, v)| Finding::ok("firmware", entity).actual(v))
            .collect();
        // A GPU's VBIOS is one; other values are not versions.
        found.push(Finding::ok("gpu", "gpu0").actual("96.00.89.00.01"));
        found.push(
            Finding::new(
                "gpu",
                "node",
                "GPU_COUNT_HIGH",
                lemonade_config::Severity::Warning,
            )
            .actual("9"),
        );
        found.push(Finding::ok("memory", "node").actual("512 GiB"));
        found
    }

    fn inventory_items(bodies: &[Body]) -> Vec<String> {
        bodies
            .iter()
            .map(|b| match b {
                Body::Inventory {
                    check,
                    entity,
                    value,
                } => format!("{check}/{entity}={value}"),
                other => panic!("not an inventory record: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn firmware_versions_are_sent_when_first_seen_or_changed_and_kept_across_runs_without_them() {
        let (_dir, config) = node_with_spool();
        let store = store(&config);
        let first =
            Inventory::of_findings(&versions(&[("bios", "1.6.7"), ("mlx5_0", "28.39.1002")]));
        let sent = Inventory::sent(&store);
        assert_eq!(
            inventory_items(&first.changes_since(&sent)),
            [
                "firmware/bios=1.6.7",
                "firmware/mlx5_0=28.39.1002",
                "gpu/gpu0=96.00.89.00.01"
            ]
        );
        first.save_as_sent(sent, &store, 100).unwrap();
        assert!(first.changes_since(&Inventory::sent(&store)).is_empty());
        // A prolog runs no firmware check: what was sent stays known.
        Inventory::default()
            .save_as_sent(Inventory::sent(&store), &store, 200)
            .unwrap();
        assert!(first.changes_since(&Inventory::sent(&store)).is_empty());
        let updated =
            Inventory::of_findings(&versions(&[("bios", "1.7.0"), ("mlx5_0", "28.39.1002")]));
        assert_eq!(
            inventory_items(&updated.changes_since(&Inventory::sent(&store))),
            ["firmware/bios=1.7.0"]
        );
    }

    #[test]
    fn a_gpus_nvlink_domain_travels_as_inventory_and_a_fabric_fault_does_not() {
        let domain = "cluster abababab-abab-abab-abab-abababababab clique 7";
        let ok = Finding::ok("fabric", "gpu0").actual(domain);
        let plain = Finding::ok("fabric", "fabric-manager");
        let fault = Finding::new(
            "fabric",
            "gpu1",
            "FABRIC_RECOVERY",
            lemonade_config::Severity::Warning,
        )
        .actual("access timeout recovery");
        let inventory = Inventory::of_findings(&[ok, plain, fault]);
        assert_eq!(
            inventory_items(&inventory.changes_since(&Inventory::default())),
            [format!("fabric/gpu0={domain}")]
        );
    }

    #[test]
    fn a_gpus_ecc_history_travels_as_inventory_and_a_clean_gpu_sends_nothing() {
        let history = Finding::ok("ecc", "gpu5").actual("2 uncorrected ECC errors in its lifetime");
        let healthy = Finding::ok("ecc", "gpu0");
        let inventory = Inventory::of_findings(&[history, healthy]);
        assert_eq!(
            inventory_items(&inventory.changes_since(&Inventory::default())),
            ["ecc/gpu5=2 uncorrected ECC errors in its lifetime"]
        );
    }

    fn export(
        config: &Config,
        node: &str,
        at: i64,
        bodies: Vec<Body>,
    ) -> Result<Exported, ExportError> {
        super::export(config, &store(config), node, at, bodies)
    }

    fn export_rotating(
        config: &Config,
        node: &str,
        at: i64,
        bodies: Vec<Body>,
        rotation: Rotation,
    ) -> Result<Exported, ExportError> {
        super::export_rotating(
            config,
            &store(config),
            node,
            at,
            bodies,
            SamplePrune::default(),
            rotation,
        )
    }

    #[test]
    fn exports_bodies_and_task_exits_once_with_growing_seq() {
        let (_dir, config) = node_with_spool();
        let exit = TaskExit {
            at: 5,
            job_id: "9".into(),
            step_id: "0".into(),
            task_id: 1,
            exit_code: Some(1),
            signal: None,
            at_ms: Some(5_678),
        };
        lemonade_spool::append_task_exit(&config.store.task_exits_path(), &exit).unwrap();
        let job = Body::JobStart {
            job_id: "9".into(),
            user: None,
        };
        assert_eq!(
            export(&config, "node1", 10, vec![job.clone()])
                .unwrap()
                .records,
            2
        );
        assert_eq!(
            export(&config, "node1", 11, vec![]).unwrap().records,
            0,
            "task exit taken once"
        );
        assert_eq!(export(&config, "node1", 12, vec![job]).unwrap().records, 1);
        let (records, errors) = lemonade_spool::read(&lemonade_spool::node_file(
            config.spool.dir.as_ref().unwrap(),
            "node1",
        ))
        .unwrap();
        assert!(errors.is_empty());
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(records[1].at, 5);
        assert!(matches!(
            records[1].body,
            Body::TaskExit {
                task_id: 1,
                at_ms: Some(5_678),
                ..
            }
        ));
    }

    fn exit(task_id: u32) -> TaskExit {
        TaskExit {
            at: 5,
            job_id: "9".into(),
            step_id: "0".into(),
            task_id,
            exit_code: Some(0),
            signal: None,
            at_ms: Some(5_000),
        }
    }

    fn exported_task_ids(config: &Config) -> Vec<u32> {
        let (records, _) = lemonade_spool::read(&lemonade_spool::node_file(
            config.spool.dir.as_ref().unwrap(),
            "node1",
        ))
        .unwrap();
        records
            .iter()
            .filter_map(|r| match r.body {
                Body::TaskExit { task_id, .. } => Some(task_id),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_large_exported_task_exit_file_is_set_aside_and_late_lines_still_count() {
        let (_dir, config) = node_with_spool();
        let path = config.store.task_exits_path();
        let small = Rotation {
            bytes: 100,
            quiet: Duration::ZERO,
        };
        for task in 0..3 {
            lemonade_spool::append_task_exit(&path, &exit(task)).unwrap();
        }
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len > small.bytes);

        assert_eq!(
            export_rotating(&config, "node1", 10, vec![], small)
                .unwrap()
                .records,
            3
        );
        let aside = PathBuf::from(format!("{}.{len}", path.display()));
        assert!(
            !path.exists() && aside.exists(),
            "set aside as {}",
            aside.display()
        );
        // A task that opened the file before the rename writes there late;
        // the plugin's next task starts a new file.
        lemonade_spool::append_task_exit(&aside, &exit(3)).unwrap();
        lemonade_spool::append_task_exit(&path, &exit(4)).unwrap();

        assert_eq!(
            export_rotating(&config, "node1", 11, vec![], small)
                .unwrap()
                .records,
            2
        );
        assert!(!aside.exists(), "the set-aside file is removed once read");
        assert_eq!(
            export_rotating(&config, "node1", 12, vec![], small)
                .unwrap()
                .records,
            0
        );
        assert_eq!(exported_task_ids(&config), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_file_still_being_written_or_small_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task-exits.jsonl");
        lemonade_spool::append_task_exit(&path, &exit(0)).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(!set_aside_if_done(&path, len - 1, 10), "not all exported");
        assert!(!set_aside_if_done(&path, len, len), "not past the size");
        assert!(set_aside_if_done(&path, len, 10));
        // A set-aside file written to just now is left for a later run.
        let quiet = Duration::from_secs(3600);
        assert!(quiet_set_aside_files(&path, quiet).is_empty());
        assert_eq!(
            quiet_set_aside_files(&path, Duration::ZERO),
            [(PathBuf::from(format!("{}.{len}", path.display())), len)]
        );
    }

    #[test]
    fn a_malformed_line_is_reported_with_its_place_and_the_rest_exported() {
        let (_dir, config) = node_with_spool();
        let path = config.store.task_exits_path();
        lemonade_spool::append_task_exit(&path, &exit(0)).unwrap();
        let torn_at = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"at\":5,\"job\n")
            .unwrap();
        lemonade_spool::append_task_exit(&path, &exit(2)).unwrap();
        let out = export(&config, "node1", 10, vec![]).unwrap();
        assert_eq!(out.records, 2);
        assert_eq!(out.malformed.len(), 1, "{:?}", out.malformed);
        assert!(
            out.malformed[0].contains(&format!("task-exits.jsonl: byte {torn_at}:")),
            "{}",
            out.malformed[0]
        );
        assert_eq!(exported_task_ids(&config), [0, 2]);
    }

    #[test]
    fn task_exits_of_an_older_plugin_have_no_milliseconds() {
        let (_dir, config) = node_with_spool();
        std::fs::write(
            config.store.task_exits_path(),
            concat!(
                r#"{"at":5,"job_id":"9","step_id":"0","task_id":1,"signal":9}"#,
                "\n"
            ),
        )
        .unwrap();
        assert_eq!(export(&config, "node1", 10, vec![]).unwrap().records, 1);
        let (records, errors) = lemonade_spool::read(&lemonade_spool::node_file(
            config.spool.dir.as_ref().unwrap(),
            "node1",
        ))
        .unwrap();
        assert!(errors.is_empty());
        assert_eq!(records[0].at, 5);
        assert!(matches!(
            records[0].body,
            Body::TaskExit {
                signal: Some(9),
                at_ms: None,
                ..
            }
        ));
    }
}
