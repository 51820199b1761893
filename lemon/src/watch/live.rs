//! One poll of `lemon watch --live`: the running jobs' new samples through
//! one detector per job. Acting on what it calls is [`super::respond`]'s.
//!
//! Each job keeps its own detector and the time of its last sample taken:
//! a poll reads only what is newer, so a sample is never taken twice and
//! time never runs backwards within a job. A job that stops running is
//! forgotten, and so is what it learned.

use super::evidence::{Latest, MetricEvidence};
use super::{SampleSource, SourceError};
use lemonade_config::WatchSettings;
use lemonade_slurm::squeue::RunningJob;
use lemonade_watch::{Detection, Detector, Sample};
use std::collections::HashMap;

/// The detector state of the jobs being watched.
pub struct Watcher {
    settings: WatchSettings,
    jobs: HashMap<String, JobWatch>,
}

struct JobWatch {
    detector: Detector,
    /// The newest sample time taken; the next poll reads past it.
    last_time: i64,
    latest: Latest,
}

/// A call of this poll, with its evidence.
#[derive(Debug, Clone)]
pub struct Called {
    pub detection: Detection,
    pub evidence: Vec<MetricEvidence>,
}

/// What one poll did.
#[derive(Debug, Default)]
pub struct PollOutcome {
    pub called: Vec<Called>,
    /// Jobs read (running, on enough nodes).
    pub jobs: usize,
    pub samples: usize,
}

impl Watcher {
    pub fn new(settings: WatchSettings) -> Self {
        Self {
            settings,
            jobs: HashMap::new(),
        }
    }

    /// Reads every watched job's new samples and returns what the detectors
    /// called. A source error ends the poll before any job is fed: the
    /// caller skips it, and the next poll reads the same range again.
    pub fn poll(
        &mut self,
        running: &[RunningJob],
        source: &dyn SampleSource,
        now: i64,
    ) -> Result<PollOutcome, SourceError> {
        let min_nodes = self.settings.service.min_nodes.max(2);
        let watched: Vec<&RunningJob> = running
            .iter()
            .filter(|j| j.nodes.len() >= min_nodes)
            .collect();
        self.jobs
            .retain(|id, _| watched.iter().any(|j| &j.id == id));
        let first = now - self.settings.service.lookback_s.max(0);
        let since_of = |jobs: &HashMap<String, JobWatch>, id: &str| {
            jobs.get(id).map_or(first, |w| w.last_time)
        };
        let oldest = watched
            .iter()
            .map(|j| since_of(&self.jobs, &j.id))
            .min()
            .unwrap_or(now);
        let owned: Vec<RunningJob> = watched.iter().map(|j| (*j).clone()).collect();
        source.prepare(&owned, oldest, now)?;
        let mut batches = Vec::with_capacity(watched.len());
        for job in &watched {
            batches.push(source.recent(job, since_of(&self.jobs, &job.id))?);
        }
        let mut outcome = PollOutcome {
            jobs: watched.len(),
            ..PollOutcome::default()
        };
        for (job, mut samples) in watched.iter().zip(batches) {
            outcome.samples += samples.len();
            samples.sort_by_key(|s| s.time);
            let settings = &self.settings;
            let w = self.jobs.entry(job.id.clone()).or_insert_with(|| JobWatch {
                detector: Detector::new(settings.clone()),
                last_time: first,
                latest: Latest::default(),
            });
            feed(w, &job.id, &samples, &mut outcome.called);
        }
        Ok(outcome)
    }
}

/// Samples newer than the job's last, in time order, into its detector.
fn feed(w: &mut JobWatch, job: &str, samples: &[super::OwnedSample], called: &mut Vec<Called>) {
    for s in samples.iter().filter(|s| s.time > w.last_time) {
        let sample = Sample {
            time: s.time,
            job,
            node: &s.node,
            metric: &s.metric,
            value: s.value,
        };
        // Sorted and newer than the last: never out of order.
        let made = w.detector.push(sample).unwrap_or_default();
        w.latest.note(&s.metric, &s.node, s.value);
        for detection in made {
            let evidence = w.latest.evidence(&detection.node, &detection.metrics);
            called.push(Called {
                detection,
                evidence,
            });
        }
    }
    if let Some(last) = samples.last() {
        w.last_time = w.last_time.max(last.time);
    }
}
