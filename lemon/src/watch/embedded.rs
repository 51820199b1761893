//! The embedded source: the node sampler's samples (`healthcheck sample`),
//! shipped through the spool export into lemon.db's `samples` table by
//! `lemon ingest`. It needs nothing but Lemonade; the samples are as fresh
//! as the last ingest, so a site that watches live runs `lemon ingest`
//! often (the timer's hourly `lemon run` is too slow for it).

use super::{OwnedSample, SampleSource, SourceError};
use crate::db::samples;
use lemonade_slurm::squeue::RunningJob;
use lemonade_sql::rusqlite::Connection;

/// Samples from lemon.db.
pub struct EmbeddedSource<'a> {
    /// lemon.db, opened by the service.
    conn: &'a Connection,
}

impl<'a> EmbeddedSource<'a> {
    pub fn new(conn: &'a Connection) -> Self {
        Self { conn }
    }
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
        Ok(rows
            .into_iter()
            .map(|r| OwnedSample {
                time: r.time,
                node: r.node,
                metric: r.metric,
                value: r.value,
            })
            .collect())
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
        let source = EmbeddedSource::new(&conn);
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
}
