//! Attributed hardware failures: which check categories explain the
//! `FAILED`/`NODE_FAIL` runs, and which categories fire together.

use super::{gpu_hours, ratio, JobState, Run, Totals};
use crate::fast_hash::FastMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// Failed runs attributed to one category (or to none).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryRow {
    pub category: String,
    pub jobs: u64,
    pub gpu_hours: f64,
    /// Of all runs in the range.
    pub share_of_jobs: f64,
    /// Of all GPU runtime in the range.
    pub share_of_gpu_runtime: f64,
}

/// Two categories in the same attribution window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoOccurrence {
    pub category: String,
    pub with: String,
    pub jobs: u64,
    /// Of the runs attributed to `category`.
    pub share_of_category: f64,
}

/// The attribution section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributionSummary {
    /// `FAILED` plus `NODE_FAIL` runs.
    pub failed_jobs: u64,
    /// By category, most jobs first.
    pub attributed: Vec<CategoryRow>,
    pub attributed_total: CategoryRow,
    pub unattributed: CategoryRow,
    /// Pairs by count, most first.
    pub co_occurrence: Vec<CoOccurrence>,
}

#[derive(Default)]
struct Acc {
    jobs: u64,
    gpu_hours: f64,
}

/// Summarises the failed runs by attributed category.
pub fn summarize<R: Run>(jobs: &[&R], totals: &Totals) -> AttributionSummary {
    let mut by_cat: FastMap<&str, Acc> = FastMap::default();
    let mut pairs: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut unattributed = Acc::default();
    let mut failed_jobs = 0;
    for job in jobs
        .iter()
        .filter(|j| matches!(j.state(), JobState::Failed | JobState::NodeFail))
    {
        failed_jobs += 1;
        let hours = gpu_hours(*job);
        match job.category() {
            Some(cat) => {
                let acc = by_cat.entry(cat).or_default();
                acc.jobs += 1;
                acc.gpu_hours += hours;
                for other in job.co_categories() {
                    if other != cat {
                        *pairs.entry((cat, other.as_str())).or_default() += 1;
                    }
                }
            }
            None => {
                unattributed.jobs += 1;
                unattributed.gpu_hours += hours;
            }
        }
    }
    let row = |category: &str, acc: &Acc| CategoryRow {
        category: category.to_string(),
        jobs: acc.jobs,
        gpu_hours: acc.gpu_hours,
        share_of_jobs: ratio(acc.jobs as f64, totals.jobs as f64),
        share_of_gpu_runtime: ratio(acc.gpu_hours, totals.gpu_hours),
    };
    let mut attributed: Vec<CategoryRow> = by_cat.iter().map(|(c, a)| row(c, a)).collect();
    attributed.sort_by(|a, b| b.jobs.cmp(&a.jobs).then(a.category.cmp(&b.category)));
    let total = Acc {
        jobs: attributed.iter().map(|r| r.jobs).sum(),
        gpu_hours: attributed
            .iter()
            .map(|r| r.gpu_hours)
            .fold(0.0, |a, b| a + b),
    };
    let mut co_occurrence: Vec<CoOccurrence> = pairs
        .into_iter()
        .map(|((cat, with), n)| CoOccurrence {
            category: cat.to_string(),
            with: with.to_string(),
            jobs: n,
            share_of_category: ratio(n as f64, by_cat[cat].jobs as f64),
        })
        .collect();
    co_occurrence.sort_by_key(|c| std::cmp::Reverse(c.jobs));
    AttributionSummary {
        failed_jobs,
        attributed_total: row("all attributed", &total),
        unattributed: row("unattributed", &unattributed),
        attributed,
        co_occurrence,
    }
}
