//! The scorer: a detector's calls against the planted truth, for every
//! call and for drains only, in total, per confounder and per fault kind.

use super::IndependentJob;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// One call of a detector: it named `node` of `job` at `detected_at`.
#[derive(Debug, Clone)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Counts for one tier over a set of jobs.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    pub wrong_node_calls: usize,
    pub early_calls: usize,
    pub unknown_calls: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls + self.early_calls + self.unknown_calls
    }
    pub fn precision(&self) -> f64 {
        let d = self.detected + self.false_calls();
        if d == 0 {
            1.0
        } else {
            self.detected as f64 / d as f64
        }
    }
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
        d.get(d.len().saturating_sub(1) / 2)
            .copied()
            .filter(|_| !d.is_empty())
    }

    /// Adds one job, given its calls in this tier as node -> times.
    fn add(&mut self, job: &IndependentJob, calls: &BTreeMap<&str, Vec<i64>>) {
        self.jobs += 1;
        let Some(f) = &job.fault else {
            self.healthy_calls += calls.len();
            self.healthy_jobs_called += usize::from(!calls.is_empty());
            return;
        };
        self.faulty += 1;
        self.wrong_node_calls += calls.keys().filter(|n| **n != f.node).count();
        if let Some(ts) = calls.get(f.node.as_str()) {
            match ts.iter().filter(|&&t| t >= f.onset).min() {
                Some(t) => {
                    self.detected += 1;
                    self.delays.push(t - f.onset);
                }
                None => self.early_calls += 1,
            }
        }
    }
}

/// Both tiers: every call, and drains only.
#[derive(Debug, Clone, Default)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

#[derive(Debug, Clone, Default)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

/// Scores `calls` against the truth `jobs`.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut s = Score::default();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    for (drain, pick) in [(false, 0u8), (true, 1)] {
        // job -> node -> call times, for this tier.
        let mut by_job: HashMap<&str, BTreeMap<&str, Vec<i64>>> = HashMap::new();
        let mut unknown = BTreeSet::new();
        for c in calls.iter().filter(|c| c.drain || !drain) {
            if known.contains(c.job.as_str()) {
                by_job
                    .entry(&c.job)
                    .or_default()
                    .entry(&c.node)
                    .or_default()
                    .push(c.detected_at);
            } else {
                unknown.insert((c.job.as_str(), c.node.as_str()));
            }
        }
        let empty = BTreeMap::new();
        for j in jobs {
            let jc = by_job.get(j.job.as_str()).unwrap_or(&empty);
            tier(&mut s.total, pick).add(j, jc);
            for c in &j.confounders {
                tier(s.by_confounder.entry(c.clone()).or_default(), pick).add(j, jc);
            }
            if let Some(f) = &j.fault {
                tier(s.by_kind.entry(f.kind.clone()).or_default(), pick).add(j, jc);
            }
        }
        tier(&mut s.total, pick).unknown_calls = unknown.len();
    }
    s
}

/// The tally of one tier (0 = all calls, 1 = drains).
fn tier(tp: &mut TierPair, pick: u8) -> &mut Tally {
    if pick == 0 {
        &mut tp.all
    } else {
        &mut tp.drain
    }
}

fn line(f: &mut fmt::Formatter<'_>, name: &str, tp: &TierPair) -> fmt::Result {
    let cell = |t: &Tally| {
        let d = t
            .median_delay()
            .map_or("-".to_string(), |d| format!("{d}s"));
        format!(
            "{:>3}/{:<3} r={:.2} p={:.2} false={:<3} (h{} w{} e{} u{}) d={:<6}",
            t.detected,
            t.faulty,
            t.recall(),
            t.precision(),
            t.false_calls(),
            t.healthy_calls,
            t.wrong_node_calls,
            t.early_calls,
            t.unknown_calls,
            d
        )
    };
    writeln!(
        f,
        "{:<28} {:>4} | {} | {}",
        name,
        tp.all.jobs,
        cell(&tp.all),
        cell(&tp.drain)
    )
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<28} {:>4} | {:<62} | drain only",
            "", "jobs", "all calls"
        )?;
        line(f, "TOTAL", &self.total)?;
        writeln!(f, "-- per confounder / user error / job kind")?;
        for (k, v) in &self.by_confounder {
            line(f, k, v)?;
        }
        writeln!(f, "-- per fault kind")?;
        for (k, v) in &self.by_kind {
            line(f, k, v)?;
        }
        Ok(())
    }
}
