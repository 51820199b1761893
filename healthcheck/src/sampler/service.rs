//! The sampler as a service: round after round, the node's metrics for the
//! jobs running here, in chunks to the spool export.
//!
//! The running jobs are the node database's (`jobs`: the prolog's start and
//! no epilog's end yet). With none, nothing is read and nothing recorded.
//! Every `flush_every` rounds the pending samples go out as one `samples`
//! record per job, under the run lock (the export's numbering is shared
//! with the healthcheck runs): a run holding the lock delays the chunk to
//! the next round, never a run. `prune_after` a job's end its chunks are
//! dropped from the node's file, and any chunk after `keep_chunks`.

use super::Sampler;
use crate::export::{self, ExportError, SamplePrune};
use lemonade_config::Config;
use lemonade_spool::Body;
use lemonade_sql::lock::RunLock;
use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SampleError {
    #[error(transparent)]
    Store(#[from] lemonade_sql::StoreError),
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// How the service samples; `healthcheck sample`'s flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub interval: Duration,
    /// Rounds per chunk.
    pub flush_every: u32,
    /// How long after a job's end its chunks stay in the node's file (for
    /// the head node's ingest to read them first: `lemon run` ingests hourly).
    pub prune_after: Duration,
    /// How long any chunk stays in the node's file: a long job's chunks
    /// would otherwise grow it to its bound, each write rewriting it all.
    pub keep_chunks: Duration,
    /// A job started longer ago than this is taken as ended (its epilog
    /// never ran): it is not sampled for ever.
    pub max_job_age: Duration,
    /// Rounds kept per job while the export cannot be written.
    pub max_pending_rounds: usize,
    /// How long a flush waits for a healthcheck run's lock.
    pub lock_wait: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            interval: Duration::from_secs(10),
            flush_every: 3,
            prune_after: Duration::from_secs(3600),
            keep_chunks: Duration::from_secs(2 * 3600),
            max_job_age: Duration::from_secs(30 * 24 * 3600),
            max_pending_rounds: 360,
            lock_wait: Duration::from_millis(200),
        }
    }
}

/// What one step did.
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    /// The jobs sampled this round.
    pub jobs: Vec<String>,
    /// Metrics read this round.
    pub metrics: usize,
    /// Records written to the export, when it flushed.
    pub exported: Option<usize>,
}

/// The service's state between rounds.
pub struct Service {
    config: Config,
    node: String,
    settings: Settings,
    sampler: Sampler,
    store: Option<NodeStore>,
    /// Per job, the samples not yet exported, oldest first.
    pending: BTreeMap<String, Vec<(i64, String, f64)>>,
    rounds_since_flush: u32,
    /// Jobs whose chunks were dropped from the node's file already.
    pruned: HashSet<String>,
    sampled_last_round: bool,
}

impl Service {
    pub fn new(config: Config, node: String, settings: Settings, sampler: Sampler) -> Service {
        Service {
            config,
            node,
            settings,
            sampler,
            store: None,
            pending: BTreeMap::new(),
            rounds_since_flush: 0,
            pruned: HashSet::new(),
            sampled_last_round: false,
        }
    }

    /// One round at `unix` seconds (`mono`: a monotonic clock in seconds).
    pub fn step(&mut self, unix: i64, mono: f64) -> Result<Step, SampleError> {
        let jobs = self.running_jobs(unix)?;
        let mut step = Step::default();
        if jobs.is_empty() {
            if self.sampled_last_round {
                self.sampler.forget();
            }
            self.sampled_last_round = false;
        } else {
            let metrics = self.sampler.round(mono);
            step.metrics = metrics.len();
            self.sampled_last_round = true;
            for job in &jobs {
                let rows = self.pending.entry(job.clone()).or_default();
                rows.extend(metrics.iter().map(|(m, v)| (unix, m.to_string(), *v)));
                let cap = self.settings.max_pending_rounds * metrics.len().max(1);
                if rows.len() > cap {
                    rows.drain(..rows.len() - cap);
                }
            }
        }
        step.jobs = jobs;
        self.rounds_since_flush += 1;
        if self.rounds_since_flush >= self.settings.flush_every {
            step.exported = self.flush(unix)?;
        }
        Ok(step)
    }

    /// Jobs running here; none while there is no node database.
    fn running_jobs(&mut self, unix: i64) -> Result<Vec<String>, SampleError> {
        let path = self.config.store.path.clone();
        if self.store.is_none() {
            if !path.exists() {
                return Ok(Vec::new());
            }
            let wait = Duration::from_millis(self.config.store.lock_wait_ms);
            self.store = Some(NodeStore::open(&path, wait)?);
        }
        let store = self.store.as_ref().expect("opened above");
        let oldest = unix - self.settings.max_job_age.as_secs() as i64;
        Ok(node_jobs::running_jobs(store.connection(), &path, oldest)?)
    }

    /// Exports the pending chunks and prunes ended jobs' chunks. `None`
    /// when there was nothing to do or a healthcheck run held the lock (the
    /// chunks wait for the next round).
    pub fn flush(&mut self, unix: i64) -> Result<Option<usize>, SampleError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let path = self.config.store.path.clone();
        let prune_before = unix - self.settings.prune_after.as_secs() as i64;
        let ended: Vec<String> =
            node_jobs::jobs_ended_before(store.connection(), &path, prune_before)?
                .into_iter()
                .filter(|j| !self.pruned.contains(j))
                .collect();
        if self.pending.values().all(Vec::is_empty) && ended.is_empty() {
            self.rounds_since_flush = 0;
            return Ok(None);
        }
        let Ok(_lock) = RunLock::acquire(&path, self.settings.lock_wait) else {
            return Ok(None);
        };
        let bodies: Vec<Body> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|(_, samples)| !samples.is_empty())
            .map(|(job_id, samples)| Body::Samples { job_id, samples })
            .collect();
        let prune = SamplePrune {
            ended_jobs: &ended,
            before: unix - self.settings.keep_chunks.as_secs() as i64,
        };
        let done = export::export_samples(&self.config, store, &self.node, unix, bodies, prune)?;
        self.pruned.extend(ended);
        self.rounds_since_flush = 0;
        Ok(Some(done.records))
    }

    /// Samples until `stop` says so (SIGTERM) or after `rounds` rounds,
    /// then exports what is pending.
    pub fn run(&mut self, rounds: Option<u64>, stop: &dyn Fn() -> bool) {
        let start = std::time::Instant::now();
        let mut next = start;
        let mut done = 0u64;
        while !stop() && rounds.is_none_or(|n| done < n) {
            let unix = chrono::Utc::now().timestamp();
            if let Err(e) = self.step(unix, start.elapsed().as_secs_f64()) {
                eprintln!("healthcheck sample: {e}");
            }
            done += 1;
            if rounds.is_some_and(|n| done >= n) {
                break;
            }
            next += self.settings.interval;
            // Fixed ticks, not fixed gaps: a slow round does not drift the rest.
            while !stop() && std::time::Instant::now() < next {
                std::thread::sleep(Duration::from_millis(200).min(self.settings.interval));
            }
        }
        if let Err(e) = self.flush(chrono::Utc::now().timestamp()) {
            eprintln!("healthcheck sample: last export: {e}");
        }
    }
}
