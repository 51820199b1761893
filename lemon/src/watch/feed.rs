//! The embedded source's feed: before each poll, the nodes' spool exports
//! into lemon.db, through the one spool ingest (`ingest::ingest` with the
//! spool alone, what `lemon ingest --no-slurm` runs), so that the service
//! alone keeps its samples fresh. Never sacct: that stays with `lemon run`.
//!
//! It runs beside a cron `lemon run` or `lemon ingest`: it takes their run
//! lock without waiting, so a command that is ingesting (or scoring) keeps
//! lemon.db to itself and its own spool ingest never fails on the watch's
//! writes. A lock held, a busy database or an unreadable spool skips this
//! poll's ingest with a logged line; the poll goes on with what lemon.db
//! has, and `[watch.service] max_sample_age_s` keeps it from acting on
//! samples that are too old. Records are keyed by node, epoch and seq, and
//! samples by job, node, metric and time, so nothing is stored twice.

use crate::db;
use crate::error::Result;
use crate::ingest::{self, IngestContext, Sources};
use lemonade_config::Config;
use lemonade_slurm::command::SlurmCommands;
use lemonade_sql::lock::RunLock;
use lemonade_sql::wal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the feed reads and writes.
pub struct SpoolFeed<'a> {
    /// lemon.db; the feed opens its own connection to write.
    pub db_path: &'a Path,
    /// The compute nodes' exports (`[lemon] spool_dir`, else `[spool] dir`).
    pub spool_dir: PathBuf,
}

/// What one feed did.
#[derive(Debug, PartialEq)]
pub enum Fed {
    /// Ingested; the report's summary lines.
    Ingested(String),
    /// Not this poll: why.
    Skipped(String),
}

impl SpoolFeed<'_> {
    /// Ingests the spool once; never fails the poll.
    pub fn feed(&self, cfg: &Config, slurm: &SlurmCommands, now: i64) -> Fed {
        // Zero wait: a command holding the lock is ingesting right now.
        let _lock = match RunLock::acquire(self.db_path, Duration::ZERO) {
            Ok(lock) => lock,
            Err(e) => return Fed::Skipped(format!("{e} (lemon run or lemon ingest at work)")),
        };
        match self.ingest_locked(cfg, slurm, now) {
            Ok(fed) => fed,
            Err(e) => Fed::Skipped(e.to_string()),
        }
    }

    fn ingest_locked(&self, cfg: &Config, slurm: &SlurmCommands, now: i64) -> Result<Fed> {
        let busy = Duration::from_millis(cfg.lemon.busy_timeout_ms);
        let mut conn = db::open(self.db_path, busy)?;
        let sources = Sources {
            spool_dir: Some(self.spool_dir.clone()),
            use_slurm: false,
            ..Sources::default()
        };
        let rep = ingest::ingest(&mut conn, &sources, &IngestContext::of(cfg, slurm, now))?;
        // As the writing commands do when they are done (`lemonade_sql::wal`).
        wal::truncate_if_over(
            &conn,
            self.db_path,
            wal::DEFAULT_LIMIT_BYTES,
            wal::DEFAULT_WAIT,
            busy,
        )?;
        let text = rep.text().trim_end().to_string();
        Ok(if rep.ok() {
            Fed::Ingested(text)
        } else {
            Fed::Skipped(text)
        })
    }
}

/// Logs what a feed did, one line per line of its report.
pub fn log(fed: &Fed) {
    let (text, tail) = match fed {
        Fed::Ingested(text) => (text, ""),
        Fed::Skipped(text) => (
            text,
            " (spool not ingested this poll; reading what lemon.db has)",
        ),
    };
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let end = if lines.peek().is_none() { tail } else { "" };
        eprintln!("lemon watch: {line}{end}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_spool::{Body, Record};

    fn chunk(seq: u64, node: &str, at: i64) -> Record {
        Record {
            seq,
            epoch: "e".into(),
            node: node.into(),
            at,
            body: Body::Samples {
                job_id: "7".into(),
                samples: vec![(at, "gpu_util".into(), 97.0)],
            },
        }
    }

    fn count(db: &Path) -> u64 {
        db::samples::count(&db::open(db, Duration::from_secs(1)).unwrap()).unwrap()
    }

    #[test]
    fn each_feed_ingests_what_arrived_since_the_last_and_a_held_lock_skips_it() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let db_path = dir.path().join("lemon.db");
        let feed = SpoolFeed {
            db_path: &db_path,
            spool_dir: spool.clone(),
        };
        let cfg = Config::default();
        let slurm = cfg.slurm.commands();
        let now = chrono::Utc::now().timestamp();
        lemonade_spool::write(&spool, "n1", &[chunk(1, "n1", now - 2)], 1 << 20).unwrap();
        assert!(matches!(feed.feed(&cfg, &slurm, now), Fed::Ingested(t) if t.contains("1 new")));
        assert_eq!(count(&db_path), 1);
        // Read again from the start: the old record is not stored twice.
        lemonade_spool::write(&spool, "n1", &[chunk(2, "n1", now - 1)], 1 << 20).unwrap();
        let held = RunLock::acquire(&db_path, Duration::ZERO).unwrap();
        let fed = feed.feed(&cfg, &slurm, now);
        assert!(
            matches!(&fed, Fed::Skipped(why) if why.contains("lock")),
            "{fed:?}"
        );
        assert_eq!(count(&db_path), 1);
        drop(held);
        assert!(matches!(feed.feed(&cfg, &slurm, now), Fed::Ingested(t) if t.contains("1 new")));
        assert_eq!(count(&db_path), 2);
    }

    #[test]
    fn a_database_another_writer_keeps_busy_skips_the_feed_after_the_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let db_path = dir.path().join("lemon.db");
        let feed = SpoolFeed {
            db_path: &db_path,
            spool_dir: spool.clone(),
        };
        let mut cfg = Config::default();
        cfg.lemon.busy_timeout_ms = 100;
        let slurm = cfg.slurm.commands();
        let now = chrono::Utc::now().timestamp();
        lemonade_spool::write(&spool, "n1", &[chunk(1, "n1", now - 2)], 1 << 20).unwrap();
        // A writer that does not take the run lock (`lemon ticket`, say).
        let mut other = db::open(&db_path, Duration::from_secs(1)).unwrap();
        let tx = other
            .transaction_with_behavior(lemonade_sql::rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        let fed = feed.feed(&cfg, &slurm, now);
        assert!(
            matches!(&fed, Fed::Skipped(why) if why.contains("locked")),
            "{fed:?}"
        );
        drop(tx);
        assert_eq!(count(&db_path), 0);
        assert!(matches!(feed.feed(&cfg, &slurm, now), Fed::Ingested(t) if t.contains("1 new")));
        assert_eq!(count(&db_path), 1);
    }

    #[test]
    fn a_missing_spool_directory_skips_the_feed_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("lemon.db");
        let feed = SpoolFeed {
            db_path: &db_path,
            spool_dir: dir.path().join("absent"),
        };
        let cfg = Config::default();
        let fed = feed.feed(&cfg, &cfg.slurm.commands(), 0);
        assert!(
            matches!(&fed, Fed::Skipped(why) if why.contains("absent")),
            "{fed:?}"
        );
    }
}
