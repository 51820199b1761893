//! Job outcomes: counts and GPU-hours per final state.

use super::{gpu_hours, ratio, JobState, Run};
use serde::Serialize;

/// One final state's share of the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeRow {
    pub state: JobState,
    pub jobs: u64,
    pub gpu_hours: f64,
    pub share_of_jobs: f64,
    pub share_of_gpu_hours: f64,
}

/// Counts and GPU-hours per state; states that never occur are left out,
/// except the ones the issue names, which always appear (as zero rows).
pub fn job_outcomes<R: Run>(jobs: &[&R]) -> Vec<OutcomeRow> {
    let mut counts = [0u64; JobState::ALL.len()];
    let mut hours = [0f64; JobState::ALL.len()];
    for job in jobs {
        counts[job.state().index()] += 1;
        hours[job.state().index()] += gpu_hours(*job);
    }
    let total_jobs = jobs.len() as f64;
    let total_hours = hours.iter().fold(0.0, |a, b| a + b);
    JobState::ALL
        .iter()
        .filter(|s| {
            counts[s.index()] > 0
                || !matches!(s, JobState::BootFail | JobState::Deadline | JobState::Other)
        })
        .map(|&state| OutcomeRow {
            state,
            jobs: counts[state.index()],
            gpu_hours: hours[state.index()],
            share_of_jobs: ratio(counts[state.index()] as f64, total_jobs),
            share_of_gpu_hours: ratio(hours[state.index()], total_hours),
        })
        .collect()
}
