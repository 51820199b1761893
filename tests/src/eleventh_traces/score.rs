//! The scorer: a detector's calls against the truth, for every call and for
//! the calls that would drain a node, in total, per confounder, per fault kind.

use super::IndependentJob;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A detector's call: it names `node` of `job` faulty at `detected_at`.
#[derive(Debug, Clone)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// The counts of one tier over some jobs.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    /// Distinct (job, node) pairs called on healthy jobs.
    pub healthy_calls: usize,
    /// Healthy jobs with at least one call.
    pub healthy_jobs_called: usize,
    /// Distinct (job, node) pairs on faulty jobs naming another node.
    pub wrong_node_calls: usize,
    /// Faulty jobs whose faulty node was called only before the onset.
    pub early_calls: usize,
    /// Distinct (job, node) pairs whose job is not in the truth.
    pub unknown_calls: usize,
    /// detected_at - onset of each detected fault (first call at/after onset).
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls + self.early_calls + self.unknown_calls
    }

    /// detected / (detected + false calls); 1 when nothing was called.
    pub fn precision(&self) -> f64 {
        let all = self.detected + self.false_calls();
        if all == 0 {
            1.0
        } else {
            self.detected as f64 / all as f64
        }
    }

    /// detected / faulty; 1 when there was no fault to find.
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.detected as f64 / self.faulty as f64
        }
    }

    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        let n = d.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(d[n / 2]),
            _ => Some((d[n / 2 - 1] + d[n / 2]) / 2),
        }
    }

    fn add(&mut self, o: &Tally) {
        self.jobs += o.jobs;
        self.faulty += o.faulty;
        self.detected += o.detected;
        self.healthy_calls += o.healthy_calls;
        self.healthy_jobs_called += o.healthy_jobs_called;
        self.wrong_node_calls += o.wrong_node_calls;
        self.early_calls += o.early_calls;
        self.unknown_calls += o.unknown_calls;
        self.delays.extend_from_slice(&o.delays);
    }
}

/// Both tiers: every call, and only the calls that drain.
#[derive(Debug, Clone, Default)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

impl TierPair {
    fn add(&mut self, o: &TierPair) {
        self.all.add(&o.all);
        self.drain.add(&o.drain);
    }
}

#[derive(Debug, Clone, Default)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

/// One job's tally from the calls on it (one tier).
fn tally_job(job: &IndependentJob, calls: &[&Call]) -> Tally {
    let mut t = Tally {
        jobs: 1,
        ..Tally::default()
    };
    let nodes: BTreeSet<&str> = calls.iter().map(|c| c.node.as_str()).collect();
    let Some(fault) = &job.fault else {
        t.healthy_calls = nodes.len();
        t.healthy_jobs_called = usize::from(!nodes.is_empty());
        return t;
    };
    t.faulty = 1;
    t.wrong_node_calls = nodes.iter().filter(|n| **n != fault.node).count();
    let right = calls.iter().filter(|c| c.node == fault.node);
    let first_after = right
        .clone()
        .filter(|c| c.detected_at >= fault.onset)
        .map(|c| c.detected_at)
        .min();
    match first_after {
        Some(at) => {
            t.detected = 1;
            t.delays.push(at - fault.onset);
        }
        None => t.early_calls = usize::from(right.count() > 0),
    }
    t
}

fn tier(job: &IndependentJob, calls: &[&Call]) -> TierPair {
    let drains: Vec<&Call> = calls.iter().copied().filter(|c| c.drain).collect();
    TierPair {
        all: tally_job(job, calls),
        drain: tally_job(job, &drains),
    }
}

/// Scores `calls` against the truth `jobs`.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for c in calls {
        by_job.entry(c.job.as_str()).or_default().push(c);
    }
    let mut s = Score::default();
    for job in jobs {
        let on = by_job.remove(job.job.as_str()).unwrap_or_default();
        let pair = tier(job, &on);
        s.total.add(&pair);
        for c in &job.confounders {
            s.by_confounder.entry(c.clone()).or_default().add(&pair);
        }
        if let Some(f) = &job.fault {
            s.by_kind.entry(f.kind.clone()).or_default().add(&pair);
        }
    }
    for calls in by_job.values() {
        let pairs: BTreeSet<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        let drains: BTreeSet<&str> = calls
            .iter()
            .filter(|c| c.drain)
            .map(|c| c.node.as_str())
            .collect();
        s.total.all.unknown_calls += pairs.len();
        s.total.drain.unknown_calls += drains.len();
    }
    s
}

fn line(f: &mut fmt::Formatter<'_>, name: &str, tier: &str, t: &Tally) -> fmt::Result {
    let delay = t
        .median_delay()
        .map_or_else(|| "-".to_string(), |d| d.to_string());
    writeln!(
        f,
        "{name:<28} {tier:<5} {:>4} {:>4} {:>4} {:>6.2} {:>6.2} {:>4} {:>4} {:>4} {:>4} {:>4} {:>7}",
        t.jobs,
        t.faulty,
        t.detected,
        t.recall(),
        t.precision(),
        t.healthy_calls,
        t.healthy_jobs_called,
        t.wrong_node_calls,
        t.early_calls,
        t.unknown_calls,
        delay
    )
}

fn section(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    rows: &BTreeMap<String, TierPair>,
) -> fmt::Result {
    writeln!(f, "{title}")?;
    for (name, pair) in rows {
        line(f, name, "all", &pair.all)?;
        line(f, "", "drain", &pair.drain)?;
    }
    Ok(())
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<28} {:<5} {:>4} {:>4} {:>4} {:>6} {:>6} {:>4} {:>4} {:>4} {:>4} {:>4} {:>7}",
            "",
            "tier",
            "jobs",
            "flty",
            "det",
            "recall",
            "prec",
            "hlty",
            "hjob",
            "wrng",
            "erly",
            "unkn",
            "med_s"
        )?;
        line(f, "total", "all", &self.total.all)?;
        line(f, "", "drain", &self.total.drain)?;
        section(f, "by confounder", &self.by_confounder)?;
        section(f, "by fault kind", &self.by_kind)?;
        writeln!(
            f,
            "flty faulty jobs, det detected, hlty/hjob (job, node) pairs / jobs called while \
             healthy, wrng wrong node, erly called only before the onset, unkn unknown job, \
             med_s median delay (s)"
        )
    }
}
