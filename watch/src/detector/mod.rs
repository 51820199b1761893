//! The streaming detector: samples in, one by one, in time order; calls out.
//!
//! Time is cut into steps of `interval_s` on the unix grid. A step is closed
//! when the first sample at or past its end arrives, before that sample is
//! taken in: every call is made from data strictly earlier than the sample
//! that triggered it, so a replay of a prefix makes the same calls up to the
//! prefix's end, and the end of the input closes nothing.

mod baseline;
mod job;
mod near_peak;
mod peers;
mod rules;
mod series;
mod small;
mod stall;
mod xid;

pub use rules::{Direction, MetricRule};

use crate::{Detection, Sample, Tier};
use job::{Job, StepScratch};
use lemonade_config::WatchSettings;
use std::collections::{HashMap, HashSet};
use thiserror::Error;

/// A sample earlier than one already taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "time {time} is before {previous}, an earlier sample's time: samples must come in time order"
)]
pub struct OutOfOrder {
    pub time: i64,
    pub previous: i64,
}

/// What the detector has taken in so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Samples offered.
    pub samples: u64,
    /// NaN or infinite values: skipped, never compared.
    pub non_finite: u64,
    /// First samples after an exporter gap: dropped (an inflated rate).
    pub after_gap: u64,
    /// Jobs seen.
    pub jobs: u64,
}

/// The detector over any number of jobs at once.
#[derive(Debug)]
pub struct Detector {
    cfg: WatchSettings,
    jobs: Vec<Job>,
    job_index: HashMap<Box<str>, usize>,
    /// (job, node, tier) already called, kept after their job is forgotten.
    called: HashSet<(String, String, Tier)>,
    clock: Option<i64>,
    /// The end of the step now open.
    step_end: Option<i64>,
    counts: Counts,
    scratch: StepScratch,
}

impl Detector {
    /// A detector with these settings (`[watch]`). An `interval_s` below 1 is taken as 1.
    pub fn new(mut cfg: WatchSettings) -> Self {
        cfg.interval_s = cfg.interval_s.max(1);
        Self {
            cfg,
            jobs: Vec::new(),
            job_index: HashMap::new(),
            called: HashSet::new(),
            clock: None,
            step_end: None,
            counts: Counts::default(),
            scratch: StepScratch::default(),
        }
    }

    /// Takes one sample and returns the calls that its arrival made (steps
    /// it closed). A NaN or infinite value is counted and skipped.
    pub fn push(&mut self, sample: Sample<'_>) -> Result<Vec<Detection>, OutOfOrder> {
        if let Some(previous) = self.clock {
            if sample.time < previous {
                return Err(OutOfOrder {
                    time: sample.time,
                    previous,
                });
            }
        }
        self.clock = Some(sample.time);
        self.counts.samples += 1;
        let mut out = Vec::new();
        self.close_steps(sample.time, &mut out);
        if !sample.value.is_finite() {
            self.counts.non_finite += 1;
            return Ok(out);
        }
        let job = self.job(sample.job, sample.time);
        let kept = self.jobs[job].push(
            sample.time,
            sample.node,
            sample.metric,
            sample.value,
            &self.cfg,
        );
        if !kept {
            self.counts.after_gap += 1;
        }
        Ok(out)
    }

    /// What was taken in so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The settings in force.
    pub fn settings(&self) -> &WatchSettings {
        &self.cfg
    }

    fn job(&mut self, id: &str, time: i64) -> usize {
        if let Some(&i) = self.job_index.get(id) {
            return i;
        }
        self.counts.jobs += 1;
        self.jobs.push(Job::new(id, time));
        self.job_index.insert(id.into(), self.jobs.len() - 1);
        self.jobs.len() - 1
    }

    /// Closes the open step if `time` is at or past its end: every job is
    /// judged once at the latest step end not after `time` (steps with no
    /// sample at all in between would judge the same data again).
    fn close_steps(&mut self, time: i64, out: &mut Vec<Detection>) {
        let interval = self.cfg.interval_s;
        let latest_end = time.div_euclid(interval) * interval;
        let Some(end) = self.step_end else {
            self.step_end = Some(latest_end + interval);
            return;
        };
        if time < end {
            return;
        }
        self.step_end = Some(latest_end + interval);
        self.forget_ended(latest_end);
        let first = out.len();
        for job in &mut self.jobs {
            job.close_step(latest_end, time, &self.cfg, &mut self.scratch, out);
        }
        let called = &mut self.called;
        let mut i = first;
        while i < out.len() {
            let key = (out[i].job.clone(), out[i].node.clone(), out[i].tier);
            if called.insert(key) {
                i += 1;
            } else {
                out.remove(i);
            }
        }
    }

    /// Drops the jobs whose every node has been silent for `forget_after_s`.
    fn forget_ended(&mut self, now: i64) {
        let horizon = now - self.cfg.forget_after_s;
        if self.jobs.iter().all(|j| j.last_seen >= horizon) {
            return;
        }
        self.jobs.retain(|j| j.last_seen >= horizon);
        self.job_index = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.id.clone(), i))
            .collect();
    }
}
