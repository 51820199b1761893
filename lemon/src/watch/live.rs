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
    /// Calls a poll could not act on (sinfo failed): offered again by the
    /// next poll while their job still runs, since a detector calls a node once.
    pending: Vec<Called>,
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
            pending: Vec::new(),
        }
    }

    /// Keeps calls that could not be acted on for the next poll.
    pub fn keep_pending(&mut self, calls: Vec<Called>) {
        self.pending.extend(calls);
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
        outcome.called = std::mem::take(&mut self.pending);
        outcome
            .called
            .retain(|c| self.jobs.contains_key(&c.detection.job));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::OwnedSample;
    use lemonade_watch::Tier;
    use std::cell::RefCell;

    /// Samples of 4 nodes every 10 s up to `until`; node `d` throttles hard from `fault_at`.
    struct Synthetic {
        until: RefCell<i64>,
        fault_at: i64,
        asked: RefCell<Vec<i64>>,
    }

    impl SampleSource for Synthetic {
        fn recent(&self, job: &RunningJob, since: i64) -> Result<Vec<OwnedSample>, SourceError> {
            self.asked.borrow_mut().push(since);
            let mut out = Vec::new();
            let until = *self.until.borrow();
            for t in (0..=until).step_by(10).filter(|t| *t > since) {
                for node in &job.nodes {
                    let bad = node == "d" && t >= self.fault_at;
                    for (metric, healthy, sick) in
                        [("gpu_util", 95.0, 60.0), ("gpu_sm_clock", 1980.0, 700.0)]
                    {
                        let value = if bad {
                            sick
                        } else {
                            healthy + (t % 7) as f64 * 0.1
                        };
                        out.push(OwnedSample {
                            time: t,
                            node: node.clone(),
                            metric: metric.into(),
                            value,
                        });
                    }
                }
            }
            Ok(out)
        }
    }

    fn job(id: &str) -> RunningJob {
        RunningJob {
            id: id.into(),
            nodes: ["a", "b", "c", "d"].map(String::from).to_vec(),
        }
    }

    #[test]
    fn polls_read_only_newer_samples_call_the_throttled_node_once_and_forget_ended_jobs() {
        let mut settings = WatchSettings::default();
        settings.service.lookback_s = 10_000;
        let mut watcher = Watcher::new(settings);
        let source = Synthetic {
            until: RefCell::new(600),
            fault_at: 400,
            asked: RefCell::new(Vec::new()),
        };
        let first = watcher.poll(&[job("7")], &source, 600).unwrap();
        assert!(first.called.is_empty() || first.called.iter().all(|c| c.detection.node == "d"));
        *source.until.borrow_mut() = 900;
        let second = watcher.poll(&[job("7")], &source, 900).unwrap();
        let all: Vec<_> = first.called.iter().chain(&second.called).collect();
        // Reported once, drained once: never a call twice over two polls.
        let tiers: Vec<_> = all
            .iter()
            .map(|c| (c.detection.node.as_str(), c.detection.tier))
            .collect();
        assert_eq!(tiers, [("d", Tier::Report), ("d", Tier::Drain)], "{all:?}");
        assert!(all[0].evidence[0].peers_median.unwrap() > all[0].evidence[0].node_value.unwrap());
        assert_eq!(
            source.asked.borrow()[1],
            600,
            "the second poll reads past the first"
        );
        assert_eq!(second.samples, 30 * 4 * 2);
        let third = watcher.poll(&[], &source, 930).unwrap();
        assert_eq!(third.jobs, 0);
        assert!(watcher.jobs.is_empty());
    }

    #[test]
    fn a_call_kept_pending_is_offered_again_while_its_job_runs() {
        let mut watcher = Watcher::new(WatchSettings::default());
        let source = Synthetic {
            until: RefCell::new(0),
            fault_at: i64::MAX,
            asked: RefCell::new(Vec::new()),
        };
        watcher.poll(&[job("7")], &source, 0).unwrap();
        let called = Called {
            detection: Detection {
                job: "7".into(),
                node: "d".into(),
                detected_at: 0,
                metrics: vec!["gpu_util".into()],
                score: 9.0,
                tier: lemonade_watch::Tier::Drain,
            },
            evidence: Vec::new(),
        };
        watcher.keep_pending(vec![called]);
        assert_eq!(
            watcher.poll(&[job("7")], &source, 10).unwrap().called.len(),
            1
        );
        assert!(watcher
            .poll(&[job("7")], &source, 20)
            .unwrap()
            .called
            .is_empty());
        watcher.keep_pending(vec![Called {
            detection: Detection {
                job: "8".into(),
                node: "d".into(),
                detected_at: 0,
                metrics: vec![],
                score: 9.0,
                tier: lemonade_watch::Tier::Drain,
            },
            evidence: Vec::new(),
        }]);
        assert!(
            watcher
                .poll(&[job("7")], &source, 30)
                .unwrap()
                .called
                .is_empty(),
            "job 8 ended"
        );
    }
}
