//! The scorer: calls against the truth, for all calls and for the drain
//! tier alone, in total, per confounder and per fault kind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Call, IndependentJob};

/// Counts over a set of jobs. Calls are counted once per (job, node): a
/// detector that repeats a call is not punished twice, nor rewarded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    /// Faulty jobs whose faulty node was called at or after onset.
    pub detected: usize,
    /// Distinct nodes called on healthy jobs.
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    /// Distinct nodes called on a faulty job that are not its faulty node.
    pub wrong_node_calls: usize,
    /// The faulty node, called only before its fault began.
    pub early_calls: usize,
    /// Calls naming a job that is not in the truth (only in the total).
    pub unknown_job_calls: usize,
    /// Seconds from onset to the first right call, one per detected job.
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls + self.early_calls + self.unknown_job_calls
    }

    /// Right calls over all calls; 1.0 when nothing was called.
    pub fn precision(&self) -> f64 {
        let all = self.detected + self.false_calls();
        if all == 0 {
            1.0
        } else {
            self.detected as f64 / all as f64
        }
    }

    /// Detected faulty jobs over faulty jobs; 1.0 when none was faulty.
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.detected as f64 / self.faulty as f64
        }
    }

    /// The lower median of the delays.
    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        d.get(d.len().saturating_sub(1) / 2).copied()
    }

    fn add_job(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.jobs += 1;
        let called: BTreeSet<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        let Some(fault) = &job.fault else {
            self.healthy_calls += called.len();
            self.healthy_jobs_called += usize::from(!called.is_empty());
            return;
        };
        self.faulty += 1;
        for node in called {
            if node != fault.node {
                self.wrong_node_calls += 1;
                continue;
            }
            let first_right = calls
                .iter()
                .filter(|c| c.node == node && c.detected_at >= fault.onset)
                .map(|c| c.detected_at)
                .min();
            match first_right {
                Some(at) => {
                    self.detected += 1;
                    self.delays.push(at - fault.onset);
                }
                None => self.early_calls += 1,
            }
        }
    }
}

/// The same counts for all calls and for drain-tier calls alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

impl Score {
    /// Healthy jobs with at least one drain-tier call: the figure that
    /// matters most (each is a healthy node drained out of a running job).
    pub fn healthy_jobs_drained(&self) -> usize {
        self.total.drain.healthy_jobs_called
    }
}

pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, (Vec<&Call>, Vec<&Call>)> = BTreeMap::new();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    let mut score = Score::default();
    for call in calls {
        if !known.contains(call.job.as_str()) {
            score.total.all.unknown_job_calls += 1;
            score.total.drain.unknown_job_calls += usize::from(call.drain);
            continue;
        }
        let entry = by_job.entry(call.job.as_str()).or_default();
        entry.0.push(call);
        if call.drain {
            entry.1.push(call);
        }
    }
    let empty = (Vec::new(), Vec::new());
    for job in jobs {
        let (all, drain) = by_job.get(job.job.as_str()).unwrap_or(&empty);
        let add = |pair: &mut TierPair| {
            pair.all.add_job(job, all);
            pair.drain.add_job(job, drain);
        };
        add(&mut score.total);
        let unique: BTreeSet<&String> = job.confounders.iter().collect();
        for c in unique {
            add(score.by_confounder.entry(c.clone()).or_default());
        }
        if let Some(fault) = &job.fault {
            add(score.by_kind.entry(fault.kind.clone()).or_default());
        }
    }
    score
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    let delay = t.median_delay().map_or("-".to_string(), |d| d.to_string());
    writeln!(
        f,
        "| {name} | {} | {} | {} | {:.3} | {:.3} | {delay} | {} | {} | {} |",
        t.jobs,
        t.faulty,
        t.detected,
        t.precision(),
        t.recall(),
        t.healthy_calls,
        t.healthy_jobs_called,
        t.wrong_node_calls + t.early_calls,
    )
}

const HEAD: &str = "| jobs | faulty | detected | precision | recall | median delay (s) | healthy calls | healthy jobs called | wrong-node calls |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| tier {HEAD}")?;
        row(f, "all calls", &self.total.all)?;
        row(f, "drain tier", &self.total.drain)?;
        writeln!(
            f,
            "\nHealthy jobs drained: {}\n",
            self.healthy_jobs_drained()
        )?;
        for (title, map) in [
            ("confounder", &self.by_confounder),
            ("fault kind", &self.by_kind),
        ] {
            writeln!(f, "| {title} (tier) {HEAD}")?;
            for (name, pair) in map {
                row(f, &format!("{name} (all)"), &pair.all)?;
                row(f, &format!("{name} (drain)"), &pair.drain)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
