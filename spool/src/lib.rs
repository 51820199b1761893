//! The spool export: how a compute node tells the head node what happened.
//!
//! Each node owns one file, `<spool dir>/<node>.jsonl`, which only that node
//! writes, always by writing a temporary file and renaming it over the old one
//! (readers never see half a file, even over NFS). One JSON object per line,
//! each a [`Record`] with a per-node sequence number `seq` that only grows.
//! Past `max_bytes` the oldest records are dropped.
//!
//! The head node reads the file incrementally: it remembers the last `seq`
//! it took from each node (and the node's `epoch`, which changes when the node
//! database is recreated, resetting `seq`).
//!
//! Task exits come from the SPANK plugin inside a forked task, where no
//! database may be opened: they are appended to a node-local file (one
//! `write(2)` per record, `O_APPEND`), see [`append_task_exit`], and folded
//! into the export by the next healthcheck run.

pub mod atomic;
pub mod domain;

pub use lemonade_config::Severity;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// One line of a node's export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Per-node, strictly increasing.
    pub seq: u64,
    /// Identifies the node database that numbered `seq`; a new one restarts `seq`.
    pub epoch: String,
    pub node: String,
    /// Unix seconds.
    pub at: i64,
    #[serde(flatten)]
    pub body: Body,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// A non-ok finding of a run.
    Finding {
        check: String,
        entity: String,
        code: String,
        /// As its lowercase name, as ever: old exports still read.
        severity: Severity,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_id: Option<String>,
    },
    /// Something that happened once, such as an XID line.
    Event {
        check: String,
        entity: String,
        code: String,
        /// As its lowercase name, as ever: old exports still read.
        severity: Severity,
        detail: String,
    },
    /// The prolog saw a job start on this node.
    JobStart {
        job_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
    /// The epilog saw a job end on this node.
    JobEnd {
        job_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// One task of a job step ended (from the SPANK plugin).
    TaskExit {
        job_id: String,
        step_id: String,
        task_id: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Unix milliseconds of the exit; the record's `at` is the same time
        /// in whole seconds. The failing task of a multi-node job and the
        /// tasks Slurm kills right after it usually end within one second:
        /// only milliseconds tell which came first. `None` in records written
        /// before it existed: take `at * 1000`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
    /// We changed the node's Slurm state (drain, down, resume).
    StateChange { action: String, reason: String },
    /// A firmware version the node runs (`firmware`/`bios`, `firmware`/`mlx5_0`,
    /// `gpu`/`gpu0` for a VBIOS), or a GPU's NVLink domain (`fabric`/`gpu0`,
    /// see [`domain`]),
    /// sent when it is first seen or changes: the head node's lemon report
    /// shows the versions of flagged nodes.
    Inventory {
        check: String,
        entity: String,
        value: String,
    },
    /// One rank's NCCL flight-recorder dump (issue 32), collected by the
    /// epilog from the job's directory on this node: its summary, or why it
    /// could not be read. The raw dump stays on the node.
    FlightRecorder {
        job_id: String,
        /// The number ending the dump's file name; `None` when it had none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rank: Option<u32>,
        /// `flight_recorder::RankSummary` as JSON. Untyped here so that the
        /// export format stays below the crates that read user files; the
        /// head node reads it back into that type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<serde_json::Value>,
        /// Why the dump gave no summary (a symlink, a hostile pickle...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A chunk of the node sampler's metric samples for one job running
    /// here (`healthcheck sample`): `[time, metric, value]` triples, times in
    /// Unix seconds. Lemon versions before it report such a line as
    /// malformed and read on.
    Samples {
        job_id: String,
        samples: Vec<(i64, String, f64)>,
    },
    /// The verdict of one validation run on this node (`healthcheck
    /// validate`, issue 31): its metrics, for lemon to learn the fleet's
    /// bands from, and whether it passed and why not.
    Validation {
        /// The Slurm job the suite ran in, when it ran in one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_id: Option<String>,
        /// The node's SKU (`validate::sku`), as the node judged itself.
        sku: String,
        metrics: Vec<ValidationMetric>,
        passed: bool,
        /// One line per failure, e.g. `avg_busbw 312<371 GB/s (learned)`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failing: Vec<String>,
        /// What it was judged against: `learned <generated_at>` or
        /// `static floors`.
        criteria: String,
    },
}

/// One metric of a validation run, as the parsers name it
/// (`avg_busbw`, `busbw.out_of_place.1073741824`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationMetric {
    pub metric: String,
    pub value: f64,
}

/// The time (`at`) and job of a `samples` line, read without parsing the
/// line: the sampler drops old chunks and those of ended jobs from the
/// node's file on every write, and a full parse of a large file every
/// thirty seconds would cost more than the sampling. Relies on serde
/// writing the record's fields in their order (`seq`, `epoch`, `node`,
/// `at`, then the body's `kind` and `job_id`).
pub fn samples_chunk_of(line: &[u8]) -> Option<(i64, &str)> {
    const KEY: &[u8] = br#","kind":"samples","job_id":""#;
    // The kind follows seq, epoch, node and at: within the line's head.
    let head = &line[..line.len().min(HEAD_BYTES)];
    let key_at = memchr_find(head, KEY)?;
    let before = &line[..key_at];
    let digits = before
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit() || **b == b'-')
        .count();
    let number_at = key_at - digits;
    if !before[..number_at].ends_with(br#""at":"#) {
        return None;
    }
    let at = std::str::from_utf8(&before[number_at..])
        .ok()?
        .parse()
        .ok()?;
    let rest = &line[key_at + KEY.len()..];
    let end = rest.iter().position(|b| *b == b'"')?;
    Some((at, std::str::from_utf8(&rest[..end]).ok()?))
}

/// How far into a line [`samples_chunk_of`] looks for the kind: past a long
/// epoch and node name, short of the samples themselves.
const HEAD_BYTES: usize = 512;

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[derive(Debug, Error)]
pub enum SpoolError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: malformed record: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The export file of `node` in `dir`.
pub fn node_file(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("{node}.jsonl"))
}

/// Appends `new` to the node's export, dropping the oldest lines past
/// `max_bytes`, and replaces the file atomically.
pub fn write(dir: &Path, node: &str, new: &[Record], max_bytes: u64) -> Result<(), SpoolError> {
    write_dropping(dir, node, new, max_bytes, |_| false)
}

/// As [`write`], and drops the old lines for which `drop` is true (the
/// sampler's chunks of jobs that ended: see [`samples_job_of`]).
pub fn write_dropping(
    dir: &Path,
    node: &str,
    new: &[Record],
    max_bytes: u64,
    drop: impl Fn(&[u8]) -> bool,
) -> Result<(), SpoolError> {
    let path = node_file(dir, node);
    let io = |source| SpoolError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let old = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(e)),
    };
    let mut lines: Vec<&[u8]> = old
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty() && !drop(l))
        .collect();
    let fresh: Vec<Vec<u8>> = new
        .iter()
        .map(|r| serde_json::to_vec(r).unwrap_or_default())
        .collect();
    lines.extend(fresh.iter().map(|v| v.as_slice()));
    let mut total: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    let mut first = 0;
    while total > max_bytes && first < lines.len() {
        total -= lines[first].len() as u64 + 1;
        first += 1;
    }
    atomic::replace_with(&path, atomic::Durability::Synced, |file| {
        for line in &lines[first..] {
            file.write_all(line)?;
            file.write_all(b"\n")?;
        }
        Ok(())
    })
    .map_err(io)
}

/// Reads a node's export. Malformed lines are returned as errors beside the
/// good records, never stopping the read.
pub fn read(path: &Path) -> Result<(Vec<Record>, Vec<SpoolError>), SpoolError> {
    read_after(path, None)
}

/// [`read`], leaving out the records a reader already holds: those of
/// epoch `after.0` numbered up to `after.1`. A line is judged by its head
/// (`{"seq":N,"epoch":"E"`, as [`write`] puts every record) without
/// parsing the rest: a head node that re-reads every node's file each poll
/// pays for the new lines only. A line whose head reads otherwise is
/// parsed in full, as [`read`] does.
pub fn read_after(
    path: &Path,
    after: Option<(&str, u64)>,
) -> Result<(Vec<Record>, Vec<SpoolError>), SpoolError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpoolError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if let (Some((epoch, last)), Some((seq, line_epoch))) = (after, head(line)) {
            if line_epoch == epoch && seq <= last {
                continue;
            }
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(e) => errors.push(SpoolError::Malformed {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            }),
        }
    }
    Ok((records, errors))
}

/// `(seq, epoch)` of a line that starts `{"seq":N,"epoch":"E"` with no
/// escape in `E`; `None` for any other start.
fn head(line: &str) -> Option<(u64, &str)> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let seq = rest[..digits].parse().ok()?;
    let rest = rest[digits..].strip_prefix(",\"epoch\":\"")?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"').then(|| (seq, &rest[..end]))
}

/// A task exit as the SPANK plugin appends it to the node-local file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskExit {
    /// Unix seconds.
    pub at: i64,
    pub job_id: String,
    pub step_id: String,
    pub task_id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Unix milliseconds, the same time as `at`: the tasks of a job that
    /// fails often end within one second, and the head node blames the node
    /// whose task failed first. `None` in lines written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
}

impl TaskExit {
    /// The exit time in Unix milliseconds: `at_ms`, else `at` in whole seconds.
    pub fn time_ms(&self) -> i64 {
        self.at_ms.unwrap_or(self.at.saturating_mul(1000))
    }
}

/// Appends one task exit with a single `write(2)` on an `O_APPEND` file:
/// concurrent tasks on a node-local disk never interleave their lines.
pub fn append_task_exit(path: &Path, exit: &TaskExit) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(exit).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64) -> Record {
        Record {
            seq,
            epoch: "e1".into(),
            node: "node1".into(),
            at: 1_700_000_000 + seq as i64,
            body: Body::JobStart {
                job_id: seq.to_string(),
                user: Some("alice".into()),
            },
        }
    }

    #[test]
    fn round_trips_and_drops_oldest_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "node1", &[record(1), record(2)], 1 << 20).unwrap();
        write(dir.path(), "node1", &[record(3)], 1 << 20).unwrap();
        let (records, errors) = read(&node_file(dir.path(), "node1")).unwrap();
        assert!(errors.is_empty());
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        let line = serde_json::to_vec(&record(4)).unwrap().len() as u64 + 1;
        write(dir.path(), "node1", &[record(4)], 2 * line).unwrap();
        let (records, _) = read(&node_file(dir.path(), "node1")).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn read_after_leaves_out_what_the_reader_holds_of_that_epoch_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = record(2);
        other.epoch = "e2".into();
        write(
            dir.path(),
            "node1",
            &[record(1), record(2), record(3), other],
            1 << 20,
        )
        .unwrap();
        let path = node_file(dir.path(), "node1");
        let seqs = |after| {
            let (records, errors) = read_after(&path, after).unwrap();
            assert!(errors.is_empty(), "{errors:?}");
            records
                .iter()
                .map(|r| (r.seq, r.epoch.clone()))
                .collect::<Vec<_>>()
        };
        let all = seqs(None);
        assert_eq!(all.len(), 4);
        assert_eq!(seqs(Some(("e1", 2))), [(3, "e1".into()), (2, "e2".into())]);
        assert_eq!(
            seqs(Some(("e9", 3))),
            all,
            "another epoch: read from the start"
        );
        // Every line's head is what `head` reads.
        let text = std::fs::read_to_string(&path).unwrap();
        let heads: Vec<_> = text.lines().map(|l| head(l).unwrap()).collect();
        assert_eq!(heads, [(1, "e1"), (2, "e1"), (3, "e1"), (2, "e2")]);
        // A head written otherwise is parsed in full, never skipped unread.
        assert_eq!(head(r#"{"epoch":"e1","seq":1}"#), None);
        assert_eq!(head(r#"{"seq":1,"epoch":"e\"1"}"#), None);
    }

    #[test]
    fn malformed_lines_are_reported_with_their_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.jsonl");
        let good = serde_json::to_string(&record(1)).unwrap();
        std::fs::write(&path, format!("{good}\n{{not json\n{good}\n")).unwrap();
        let (records, errors) = read(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains(":2:"), "{}", errors[0]);
    }

    #[test]
    fn task_exits_append_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task-exits.jsonl");
        let exit = TaskExit {
            at: 1,
            job_id: "7".into(),
            step_id: "0".into(),
            task_id: 3,
            exit_code: Some(1),
            signal: None,
            at_ms: Some(1_234),
        };
        append_task_exit(&path, &exit).unwrap();
        append_task_exit(&path, &exit).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert_eq!(
            serde_json::from_str::<TaskExit>(text.lines().next().unwrap()).unwrap(),
            exit
        );
    }

    #[test]
    fn task_exits_without_milliseconds_still_parse() {
        // A line as the plugin wrote it before `at_ms`.
        let old: TaskExit = serde_json::from_str(
            r#"{"at":1700000000,"job_id":"7","step_id":"0","task_id":3,"exit_code":1}"#,
        )
        .unwrap();
        assert_eq!(old.at_ms, None);
        assert_eq!(old.time_ms(), 1_700_000_000_000);
        let new = TaskExit {
            at_ms: Some(1_700_000_000_123),
            ..old.clone()
        };
        assert_eq!(new.time_ms(), 1_700_000_000_123);
        assert!(!serde_json::to_string(&old).unwrap().contains("at_ms"));
    }

    #[test]
    fn severities_are_typed_and_written_as_their_lowercase_names() {
        // A finding and an event as nodes have always written them.
        let old = [
            r#"{"seq":1,"epoch":"e1","node":"node1","at":1700000000,"kind":"finding","check":"mounts","entity":"/checkpoint","code":"MOUNT_MISSING","severity":"drain","message":"gone"}"#,
            r#"{"seq":2,"epoch":"e1","node":"node1","at":1700000001,"kind":"event","check":"xid","entity":"gpu3","code":"XID_79","severity":"down","detail":"fell off the bus"}"#,
        ];
        let records: Vec<Record> = old
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(matches!(
            records[0].body,
            Body::Finding {
                severity: Severity::Drain,
                ..
            }
        ));
        assert!(matches!(
            records[1].body,
            Body::Event {
                severity: Severity::Down,
                ..
            }
        ));
        for (record, line) in records.iter().zip(old) {
            assert_eq!(
                serde_json::to_string(record).unwrap(),
                line,
                "same bytes out"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node1.jsonl");
        std::fs::write(
            &path,
            old[0].replace("\"drain\"", "\"critical\"") + "\n" + old[1] + "\n",
        )
        .unwrap();
        let (records, errors) = read(&path).unwrap();
        assert_eq!(
            records.len(),
            1,
            "the good record after a bad severity counts"
        );
        assert!(errors[0].to_string().contains(":1:"), "{}", errors[0]);
    }

    fn samples(seq: u64, job: &str) -> Record {
        Record {
            seq,
            epoch: "e1".into(),
            node: "node1".into(),
            at: 1_700_000_010,
            body: Body::Samples {
                job_id: job.into(),
                samples: vec![
                    (1_700_000_000, "gpu_util".into(), 97.5),
                    (1_700_000_010, "ib_tx".into(), 1.25e10),
                ],
            },
        }
    }

    #[test]
    fn sample_chunks_round_trip_as_compact_triples() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "node1", &[samples(1, "7")], 1 << 20).unwrap();
        let text = std::fs::read_to_string(node_file(dir.path(), "node1")).unwrap();
        assert!(
            text.contains(r#""samples":[[1700000000,"gpu_util",97.5],"#),
            "{text}"
        );
        let (records, errors) = read(&node_file(dir.path(), "node1")).unwrap();
        assert!(errors.is_empty());
        assert_eq!(records, [samples(1, "7")]);
    }

    #[test]
    fn the_chunks_of_an_ended_job_are_dropped_and_other_records_kept() {
        let dir = tempfile::tempdir().unwrap();
        let old = [record(1), samples(2, "7"), samples(3, "8")];
        write(dir.path(), "node1", &old, 1 << 20).unwrap();
        let ended = |line: &[u8]| samples_chunk_of(line).is_some_and(|(_, job)| job == "7");
        write_dropping(dir.path(), "node1", &[record(4)], 1 << 20, ended).unwrap();
        let (records, _) = read(&node_file(dir.path(), "node1")).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 3, 4]);
        // A job start of a job named like the kind is no chunk.
        let line = serde_json::to_vec(&record(7)).unwrap();
        assert_eq!(samples_chunk_of(&line), None);
        let line = serde_json::to_vec(&samples(9, "8")).unwrap();
        assert_eq!(samples_chunk_of(&line), Some((1_700_000_010, "8")));
    }

    #[test]
    fn validation_records_round_trip_with_their_kind_and_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let validation = Record {
            body: Body::Validation {
                job_id: Some("42".into()),
                sku: "H100x8".into(),
                metrics: vec![ValidationMetric {
                    metric: "avg_busbw".into(),
                    value: 312.5,
                }],
                passed: false,
                failing: vec!["avg_busbw 312.5<371 GB/s (learned)".into()],
                criteria: "learned 1700000000".into(),
            },
            ..record(2)
        };
        write(
            dir.path(),
            "node1",
            &[record(1), validation.clone()],
            1 << 20,
        )
        .unwrap();
        let path = node_file(dir.path(), "node1");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""kind":"validation","job_id":"42","sku":"H100x8""#),
            "{text}"
        );
        let (records, errors) = read(&path).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records, [record(1), validation]);
    }

    #[test]
    fn flight_recorder_records_round_trip_beside_old_kinds() {
        let rec = Record {
            seq: 9,
            epoch: "e1".into(),
            node: "node1".into(),
            at: 1_700_000_000,
            body: Body::FlightRecorder {
                job_id: "7".into(),
                rank: Some(13),
                summary: Some(serde_json::json!({"rank": 13, "groups": {}})),
                error: None,
            },
        };
        let line = serde_json::to_string(&rec).unwrap();
        assert!(line.contains(r#""kind":"flight_recorder""#), "{line}");
        assert!(!line.contains("error"), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), rec);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node1.jsonl");
        let old = r#"{"seq":1,"epoch":"e1","node":"node1","at":1700000000,"kind":"job_end","job_id":"7","exit_code":1}"#;
        std::fs::write(&path, format!("{old}\n{line}\n")).unwrap();
        let (records, errors) = read(&path).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), 2);
    }

    #[test]
    fn task_exit_records_carry_milliseconds_and_read_old_exports() {
        let rec = Record {
            seq: 1,
            epoch: "e1".into(),
            node: "node1".into(),
            at: 1_700_000_000,
            body: Body::TaskExit {
                job_id: "7".into(),
                step_id: "0".into(),
                task_id: 3,
                exit_code: None,
                signal: Some(9),
                at_ms: Some(1_700_000_000_042),
            },
        };
        let line = serde_json::to_string(&rec).unwrap();
        assert!(line.contains(r#""at_ms":1700000000042"#), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), rec);
        let old: Record = serde_json::from_str(
            r#"{"seq":1,"epoch":"e1","node":"node1","at":1700000000,"kind":"task_exit","job_id":"7","step_id":"0","task_id":3,"signal":9}"#,
        )
        .unwrap();
        assert!(matches!(old.body, Body::TaskExit { at_ms: None, .. }));
    }
}

/// Random input: records and errors, never a panic, and every good record
/// around a bad line still counts.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn record(seq: u64, job: &str) -> Record {
        Record {
            seq,
            epoch: "e1".into(),
            node: "node1".into(),
            at: 1_700_000_000 + seq as i64,
            body: Body::JobStart {
                job_id: job.to_string(),
                user: None,
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn a_file_of_any_bytes_reads_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("node1.jsonl");
            std::fs::write(&path, &bytes).unwrap();
            let _ = read(&path);
        }

        #[test]
        fn good_records_around_bad_lines_all_count(
            layout in proptest::collection::vec((any::<bool>(), "[a-z0-9{}\":,]{1,30}"), 0..30),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("node1.jsonl");
            let mut text = String::new();
            let mut want = Vec::new();
            let mut bad_lines = Vec::new();
            for (i, (good, words)) in layout.iter().enumerate() {
                if *good {
                    let r = record(i as u64, words);
                    text.push_str(&serde_json::to_string(&r).unwrap());
                    want.push(r);
                } else {
                    // Not a record: a torn line, a stray word.
                    text.push_str(&format!("{{\"seq\":{i},{words}"));
                    bad_lines.push(i + 1);
                }
                text.push('\n');
            }
            std::fs::write(&path, text).unwrap();
            let (records, errors) = read(&path).unwrap();
            prop_assert_eq!(records, want);
            let lines: Vec<usize> = errors
                .iter()
                .map(|e| match e {
                    SpoolError::Malformed { line, .. } => *line,
                    other => panic!("{other}"),
                })
                .collect();
            prop_assert_eq!(lines, bad_lines);
        }
    }
}
