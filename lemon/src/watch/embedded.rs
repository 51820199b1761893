//! The embedded source: the node sampler's samples (`healthcheck sample`),
//! shipped through the spool export into lemon.db's `samples` table by the
//! spool ingest, which the service runs before each poll ([`super::feed`]).
//! It needs nothing but Lemonade.
//!
//! Nodes flush their chunks at their own moments, so after an ingest one
//! node's samples may reach further than another's. The watcher reads only
//! past the newest time it took, and the detector takes time in order: a
//! node's chunk that arrived after a peer's newer one would be lost. So a
//! read stops at the job's watermark, the newest time every node of the
//! job has reached (a node's chunks arrive in order); the rest waits for
//! the next poll. A node that lags more than `[watch.service]
//! embedded_wait_s` behind its newest peer (its sampler stopped, its export
//! held back) no longer holds the others back.

use super::{OwnedSample, SampleSource, SourceError};
use crate::db::samples;
use lemonade_slurm::squeue::RunningJob;
use lemonade_sql::rusqlite::Connection;
use std::collections::HashMap;

/// Samples from lemon.db.
pub struct EmbeddedSource<'a> {
    /// lemon.db, opened by the service.
    conn: &'a Connection,
    /// Seconds a lagging node holds its peers' newer samples back.
    wait_s: i64,
}

impl<'a> EmbeddedSource<'a> {
    pub fn new(conn: &'a Connection, wait_s: i64) -> Self {
        Self {
            conn,
            wait_s: wait_s.max(0),
        }
    }
}

/// The newest time up to which every node of `nodes` has delivered, among
/// `samples` (those after `since`): a node without any holds it at `since`.
/// Never more than `wait_s` behind the newest sample.
fn watermark(nodes: &[String], samples: &[OwnedSample], since: i64, wait_s: i64) -> i64 {
    // One pass: a poll reads thousands of samples per job.
    let mut newest_of: HashMap<&str, i64> = HashMap::with_capacity(nodes.len());
    for s in samples {
        let t = newest_of.entry(s.node.as_str()).or_insert(s.time);
        *t = (*t).max(s.time);
    }
    let slowest = nodes
        .iter()
        .map(|n| newest_of.get(n.as_str()).copied().unwrap_or(since))
        .min()
        .unwrap_or(since);
    let newest = newest_of.values().copied().max().unwrap_or(since);
    slowest.max(newest - wait_s)
}

impl SampleSource for EmbeddedSource<'_> {
    fn recent(&self, job: &RunningJob, since: i64) -> Result<Vec<OwnedSample>, SourceError> {
        let nodes: Vec<&str> = job.nodes.iter().map(String::as_str).collect();
        // `recent` counts `since` in; the source's contract is "later than".
        let rows = samples::recent(self.conn, &job.id, &nodes, since + 1).map_err(|e| {
            SourceError::Unreachable {
                what: "lemon.db samples".into(),
                why: e.to_string(),
            }
        })?;
        let mut samples: Vec<OwnedSample> = rows
            .into_iter()
            .map(|r| OwnedSample {
                time: r.time,
                node: r.node,
                metric: r.metric,
                value: r.value,
            })
            .collect();
        let until = watermark(&job.nodes, &samples, since, self.wait_s);
        samples.retain(|s| s.time <= until);
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::spool::ingest_dir;
    use lemonade_spool::{Body, Record};
    use std::time::Duration;

    fn chunk(node: &str, job: &str, at: i64, util: f64) -> Record {
        Record {
            seq: 1,
            epoch: "e".into(),
            node: node.into(),
            at,
            body: Body::Samples {
                job_id: job.into(),
                samples: vec![
                    (at - 10, "gpu_util".into(), util),
                    (at, "gpu_util".into(), util),
                ],
            },
        }
    }

    #[test]
    fn a_running_jobs_samples_come_from_the_nodes_exports_and_only_its_nodes_and_newer_ones() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let now = chrono::Utc::now().timestamp();
        for (node, job, util) in [("n1", "7", 96.0), ("n2", "7", 12.0), ("n3", "8", 90.0)] {
            lemonade_spool::write(&spool, node, &[chunk(node, job, now, util)], 1 << 20).unwrap();
        }
        ingest_dir(&mut conn, &spool).unwrap();
        let source = EmbeddedSource::new(&conn, 120);
        let job = RunningJob {
            id: "7".into(),
            nodes: vec!["n1".into(), "n2".into()],
        };
        let mut got: Vec<_> = source
            .recent(&job, now - 10)
            .unwrap()
            .into_iter()
            .map(|s| (s.node, s.time, s.value))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, [("n1".into(), now, 96.0), ("n2".into(), now, 12.0)]);
    }

    /// The samples node `node` sent up to `until`, every 10 s from `from`.
    fn sent(conn: &mut Connection, spool: &std::path::Path, node: &str, from: i64, until: i64) {
        let samples = (from..=until)
            .step_by(10)
            .map(|t| (t, "gpu_util".to_string(), 95.0))
            .collect();
        let record = Record {
            seq: 1,
            epoch: format!("{node}-{until}"),
            node: node.into(),
            at: until,
            body: Body::Samples {
                job_id: "7".into(),
                samples,
            },
        };
        lemonade_spool::write(spool, node, &[record], 1 << 20).unwrap();
        ingest_dir(conn, spool).unwrap();
    }

    #[test]
    fn a_node_whose_chunk_comes_late_holds_its_peers_newer_samples_back_until_the_wait_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let t0 = chrono::Utc::now().timestamp() - 1000;
        let job = RunningJob {
            id: "7".into(),
            nodes: vec!["n1".into(), "n2".into()],
        };
        let times = |got: Vec<OwnedSample>, node: &str| -> Vec<i64> {
            got.into_iter()
                .filter(|s| s.node == node)
                .map(|s| s.time - t0)
                .collect()
        };
        // n1 flushed up to t0+50, n2 only up to t0+20.
        sent(&mut conn, &spool, "n1", t0, t0 + 50);
        sent(&mut conn, &spool, "n2", t0, t0 + 20);
        let source = EmbeddedSource::new(&conn, 120);
        let got = source.recent(&job, t0 - 1).unwrap();
        assert_eq!(times(got.clone(), "n1"), [0, 10, 20]);
        assert_eq!(times(got, "n2"), [0, 10, 20]);
        // n2's next chunk arrives: nothing of it is older than what was read.
        sent(&mut conn, &spool, "n2", t0 + 30, t0 + 60);
        let source = EmbeddedSource::new(&conn, 120);
        let got = source.recent(&job, t0 + 20).unwrap();
        assert_eq!(times(got.clone(), "n1"), [30, 40, 50]);
        assert_eq!(times(got, "n2"), [30, 40, 50]);
        // n2 falls silent: n1 is read on, wait_s behind its newest sample.
        sent(&mut conn, &spool, "n1", t0 + 60, t0 + 200);
        let source = EmbeddedSource::new(&conn, 120);
        let got = source.recent(&job, t0 + 50).unwrap();
        assert_eq!(times(got.clone(), "n1"), [60, 70, 80]);
        assert_eq!(times(got, "n2"), [60]);
    }
}
