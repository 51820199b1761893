//! The scorer: calls against the planted truth, for all calls and for the
//! drain tier alone, in total, per confounder and per fault kind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Call, IndependentJob};

/// One tier's counts over a set of jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    /// Faulty jobs whose faulty node was named at or after onset.
    pub detected: usize,
    /// Distinct (job, node) pairs called on healthy jobs.
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    /// Distinct other nodes of faulty jobs named, plus the faulty node when
    /// it was named only before its onset.
    pub wrong_node_calls: usize,
    /// Calls naming a job the truth does not know.
    pub unknown_job_calls: usize,
    /// Seconds from onset to the first right call, one per detected job.
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls + self.unknown_job_calls
    }

    /// Right calls over all calls; 1 when there are no calls.
    pub fn precision(&self) -> f64 {
        let all = self.detected + self.false_calls();
        if all == 0 {
            1.0
        } else {
            self.detected as f64 / all as f64
        }
    }

    /// Detected over faulty; 1 when no job is faulty.
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
        let named: BTreeSet<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        let Some(fault) = &job.fault else {
            self.healthy_calls += named.len();
            self.healthy_jobs_called += usize::from(!named.is_empty());
            return;
        };
        self.faulty += 1;
        let right = calls.iter().filter(|c| c.node == fault.node);
        if let Some(first) = right
            .clone()
            .filter(|c| c.detected_at >= fault.onset)
            .map(|c| c.detected_at)
            .min()
        {
            self.detected += 1;
            self.delays.push(first - fault.onset);
        }
        let early = right.clone().any(|c| c.detected_at < fault.onset);
        self.wrong_node_calls +=
            named.iter().filter(|n| **n != fault.node).count() + usize::from(early);
    }
}

/// All calls and the drain tier's alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

impl TierPair {
    fn add_job(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.all.add_job(job, calls);
        let drains: Vec<&Call> = calls.iter().copied().filter(|c| c.drain).collect();
        self.drain.add_job(job, &drains);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    /// Per fault kind (faulty jobs of that kind only).
    pub by_kind: BTreeMap<String, TierPair>,
    /// Per workload (pretraining, RL, benchmarks, ...).
    pub by_workload: BTreeMap<String, TierPair>,
}

impl Score {
    /// Healthy jobs that lost a node to a drain: the figure that matters most.
    pub fn healthy_jobs_drained(&self) -> usize {
        self.total.drain.healthy_jobs_called
    }
}

pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in calls {
        by_job.entry(call.job.as_str()).or_default().push(call);
    }
    let mut s = Score::default();
    for job in jobs {
        let mine = by_job.remove(job.job.as_str()).unwrap_or_default();
        s.total.add_job(job, &mine);
        for c in &job.confounders {
            s.by_confounder
                .entry(c.clone())
                .or_default()
                .add_job(job, &mine);
        }
        if let Some(f) = &job.fault {
            s.by_kind
                .entry(f.kind.clone())
                .or_default()
                .add_job(job, &mine);
        }
        s.by_workload
            .entry(job.workload.clone())
            .or_default()
            .add_job(job, &mine);
    }
    for stray in by_job.values() {
        let nodes: BTreeSet<&str> = stray.iter().map(|c| c.node.as_str()).collect();
        s.total.all.unknown_job_calls += nodes.len();
        let drained: BTreeSet<&str> = stray
            .iter()
            .filter(|c| c.drain)
            .map(|c| c.node.as_str())
            .collect();
        s.total.drain.unknown_job_calls += drained.len();
    }
    s
}

fn delay(t: &Tally) -> String {
    t.median_delay()
        .map_or("-".to_string(), |d| format!("{d} s"))
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    writeln!(
        f,
        "| {name} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} |",
        t.jobs,
        t.faulty,
        t.detected,
        t.precision(),
        t.recall(),
        delay(t),
        t.healthy_calls,
        t.healthy_jobs_called,
        t.wrong_node_calls,
    )
}

fn table(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    rows: &BTreeMap<String, TierPair>,
) -> fmt::Result {
    writeln!(f, "\n### by {title}\n")?;
    writeln!(
        f,
        "| {title} | jobs | faulty | precision | recall | median delay | healthy jobs called | wrong-node calls \
         | drain: precision | drain: recall | drain: healthy jobs called | drain: wrong-node calls |"
    )?;
    writeln!(f, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for (name, p) in rows {
        let (a, d) = (&p.all, &p.drain);
        writeln!(
            f,
            "| {name} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {:.3} | {:.3} | {} | {} |",
            a.jobs,
            a.faulty,
            a.precision(),
            a.recall(),
            delay(a),
            a.healthy_jobs_called,
            a.wrong_node_calls,
            d.precision(),
            d.recall(),
            d.healthy_jobs_called,
            d.wrong_node_calls,
        )?;
    }
    Ok(())
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| tier | jobs | faulty | detected | precision | recall | median delay | healthy calls | healthy jobs called | wrong-node calls |")?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        row(f, "all calls", &self.total.all)?;
        row(f, "drain tier", &self.total.drain)?;
        table(f, "confounder", &self.by_confounder)?;
        table(f, "fault kind", &self.by_kind)?;
        table(f, "workload", &self.by_workload)
    }
}
