//! DOC PLACEHOLDER

mod events;
mod faults;
mod layout;
mod model;
mod plan;
mod rng;
mod score;
mod write;

#[cfg(test)]
mod tests;

pub use score::{score, Score, Tally, TierPair};

/// What to generate. Every figure of the traces is drawn from `seed`.
#[derive(Clone, Debug)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// Each job's planned length, drawn in [min_minutes, max_minutes]
    /// (benchmark jobs take the shortest quarter). Keep min at 20 or more:
    /// faults begin after minute 10 and need time to show.
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// The largest job; 256 for the full size, small for debug-mode tests.
    pub max_nodes: usize,
    /// Share of jobs with exactly one faulty node.
    pub faulty_share: f64,
    /// Share of faults that are subtle (a slowdown with no halt).
    pub subtle_share: f64,
    /// Unix seconds of the earliest job start.
    pub start: i64,
}

impl IndependentSpec {
    /// The full size: 38 jobs of 2 to 256 nodes, 30 to 90 minutes.
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            faulty_share: 0.4,
            subtle_share: 0.15,
            start: 1_790_000_000,
        }
    }

    /// A size for debug-mode tests: few, short jobs of at most 8 nodes.
    pub fn small(seed: u64, jobs: usize) -> Self {
        IndependentSpec {
            jobs,
            min_minutes: 20,
            max_minutes: 24,
            max_nodes: 8,
            ..Self::new(seed)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    /// Unix seconds of the fault's first visible effect on its node.
    pub onset: i64,
    pub subtle: bool,
    /// Unix seconds when the job halts (hangs in NCCL), if it does.
    pub halt: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndependentJob {
    pub job: String,
    /// In rank order: the first is rank 0's node.
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    /// The broad confounders this job has (names in the module doc).
    pub confounders: Vec<String>,
    pub workload: String,
    /// Free-text details: layout, checkpoint mode, the fault's course.
    pub details: Vec<String>,
    /// Unix seconds of the job's first and last second.
    pub start: i64,
    pub end: i64,
    pub interval: i64,
}

/// One call of a detector: the node it names in a job, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Writes the whole replay file (header + globally time-sorted rows);
/// returns the truth.
pub fn generate(
    spec: &IndependentSpec,
    out: &mut impl std::io::Write,
) -> std::io::Result<Vec<IndependentJob>> {
    let plans = plan::plan_jobs(spec);
    write::write_rows(&plans, out)?;
    Ok(plans.iter().map(truth).collect())
}

/// The truth `generate` would return, without writing the trace.
pub fn truth_only(spec: &IndependentSpec) -> Vec<IndependentJob> {
    plan::plan_jobs(spec).iter().map(truth).collect()
}

fn truth(job: &plan::JobPlan) -> IndependentJob {
    let mut details = job.details.clone();
    if let Some(mode) = job.events.iter().find_map(|e| match e.ev {
        plan::Ev::Ckpt(mode) => Some(mode),
        _ => None,
    }) {
        details.push(format!("checkpoint {mode:?}"));
    }
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.name().to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: job.start + f.onset,
            subtle: f.kind.subtle(),
            halt: f.halt.map(|h| job.start + h),
        }),
        confounders: job.confounders.iter().map(|c| c.to_string()).collect(),
        workload: job.workload.name().to_string(),
        details,
        start: job.start,
        end: job.start + job.end(),
        interval: job.interval,
    }
}
