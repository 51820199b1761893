//! Scoring a detector's calls against the truth.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{IndependentJob, CONFOUNDERS};

/// One call of the detector.
#[derive(Clone, Debug)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    /// The call cleared the drain tier's bar.
    pub drain: bool,
}

/// Counts over a set of jobs and the calls on them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    /// Faulty jobs whose faulty node was called at or after onset.
    pub detected: usize,
    /// Distinct (job, node) calls on healthy jobs.
    pub healthy_calls: usize,
    /// Healthy jobs with at least one call.
    pub healthy_jobs_called: usize,
    /// Distinct (job, node) calls naming a node of a faulty job that is not
    /// its faulty node at or after onset (wrong node, or called before onset).
    pub wrong_node: usize,
    /// Delays (s) from onset to the first right call.
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node
    }
    pub fn precision(&self) -> f64 {
        let called = self.detected + self.false_calls();
        if called == 0 {
            1.0
        } else {
            self.detected as f64 / called as f64
        }
    }
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.detected as f64 / self.faulty as f64
        }
    }
    /// Median delay in seconds; `None` without a right call.
    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        (!d.is_empty()).then(|| d[d.len() / 2])
    }

    fn add(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.jobs += 1;
        let named: BTreeSet<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        let Some(fault) = &job.fault else {
            self.healthy_calls += named.len();
            self.healthy_jobs_called += usize::from(!named.is_empty());
            return;
        };
        self.faulty += 1;
        let first_right = calls
            .iter()
            .filter(|c| c.node == fault.node && c.detected_at >= fault.onset)
            .map(|c| c.detected_at)
            .min();
        if let Some(at) = first_right {
            self.detected += 1;
            self.delays.push(at - fault.onset);
        }
        self.wrong_node += named
            .iter()
            .filter(|n| **n != fault.node || first_right.is_none())
            .count();
    }
}

/// The scorer's tables: all calls and the drain tier alone, per confounder, per fault kind.
#[derive(Clone, Debug, Default)]
pub struct Score {
    pub all: Tally,
    pub drain: Tally,
    /// Drain-tier calls (distinct job, node) on healthy jobs.
    pub drain_on_healthy: usize,
    /// Calls naming a job that is not in the truth.
    pub unknown_job_calls: usize,
    pub per_confounder: BTreeMap<String, Tally>,
    pub per_kind: BTreeMap<String, Tally>,
}

/// A call is right when it names the faulty node of its job at or after onset.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for c in calls {
        by_job.entry(c.job.as_str()).or_default().push(c);
    }
    let mut s = Score::default();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    let unknown = |drain_only: bool| {
        calls
            .iter()
            .filter(|c| !known.contains(c.job.as_str()) && (c.drain || !drain_only))
            .map(|c| (&c.job, &c.node))
            .collect::<BTreeSet<_>>()
            .len()
    };
    s.unknown_job_calls = unknown(false);
    for job in jobs {
        let all = by_job.get(job.job.as_str()).cloned().unwrap_or_default();
        let drain: Vec<&Call> = all.iter().copied().filter(|c| c.drain).collect();
        s.all.add(job, &all);
        s.drain.add(job, &drain);
        for c in &job.confounders {
            s.per_confounder
                .entry(c.clone())
                .or_default()
                .add(job, &all);
        }
        if let Some(f) = &job.fault {
            s.per_kind.entry(f.kind.clone()).or_default().add(job, &all);
        }
    }
    // A call on a job the truth does not know is a call on a healthy job.
    s.all.healthy_calls += s.unknown_job_calls;
    s.drain.healthy_calls += unknown(true);
    s.drain_on_healthy = s.drain.healthy_calls;
    s
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    let delay = t
        .median_delay()
        .map_or("-".to_string(), |d| format!("{d} s"));
    writeln!(
        f,
        "| {name} | {} | {} | {:.3} | {:.3} ({}/{}) | {delay} | {} | {} |",
        t.jobs,
        t.faulty,
        t.precision(),
        t.recall(),
        t.detected,
        t.faulty,
        t.healthy_jobs_called,
        t.wrong_node
    )
}

const HEADER: &str = "| jobs | faulty | precision | recall | median delay | healthy jobs called | wrong-node calls |\n|---|---|---|---|---|---|---|---|";

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| calls {HEADER}")?;
        row(f, "all", &self.all)?;
        row(f, "drain tier", &self.drain)?;
        writeln!(
            f,
            "\nDrain-tier calls on healthy jobs: {}. Calls naming unknown jobs: {}.\n",
            self.drain_on_healthy, self.unknown_job_calls
        )?;
        writeln!(f, "| confounder {HEADER}")?;
        for c in CONFOUNDERS {
            if let Some(t) = self.per_confounder.get(c) {
                row(f, c, t)?;
            }
        }
        writeln!(f, "\n| fault kind {HEADER}")?;
        for (k, t) in &self.per_kind {
            row(f, k, t)?;
        }
        Ok(())
    }
}
