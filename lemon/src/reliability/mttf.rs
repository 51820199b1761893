//! MTTF by job size: empirical (runtime over failures, with a chi-square
//! interval) next to the projection 1/(N·r_f).

use super::{JobRecord, ReportParams};
use crate::stats::chi2_quantile_even;
use serde::Serialize;

/// One job-size bucket: runs with more than half and at most `gpus` GPUs
/// (the last bucket also takes everything larger).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MttfRow {
    pub gpus: u32,
    pub open_ended: bool,
    pub jobs: u64,
    pub failures: u64,
    pub runtime_hours: f64,
    /// Runtime per failure; `None` without failures.
    pub empirical_hours: Option<f64>,
    /// Interval at the report's confidence, when there are enough failures.
    pub ci_low_hours: Option<f64>,
    pub ci_high_hours: Option<f64>,
    /// 1/(N·r_f) with N the bucket's node count.
    pub projected_hours: Option<f64>,
}

/// The MTTF section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MttfTable {
    pub failure_rate_per_1000_node_days: f64,
    pub confidence: f64,
    pub min_failures_for_interval: u64,
    pub rows: Vec<MttfRow>,
}

/// 1/(N·r_f) in hours for a job of `gpus` GPUs; `None` at a zero rate.
pub fn projected_mttf_hours(gpus: f64, gpus_per_node: u32, rate_per_node_day: f64) -> Option<f64> {
    let nodes = (gpus / gpus_per_node.max(1) as f64).max(1.0);
    (rate_per_node_day > 0.0).then(|| 24.0 / (nodes * rate_per_node_day))
}

/// Two-sided interval for the mean time between failures of a Poisson
/// process observed for `hours` with `failures` events (time-terminated).
/// Without failures the upper end is unbounded. The same interval, turned
/// over, bounds a failure rate ([`super::failure_rate::Rate`]).
pub fn mttf_interval(hours: f64, failures: u64, confidence: f64) -> (f64, f64) {
    let alpha = 1.0 - confidence;
    let low = 2.0 * hours / chi2_quantile_even(1.0 - alpha / 2.0, 2 * failures + 2);
    let high = if failures == 0 {
        f64::INFINITY
    } else {
        2.0 * hours / chi2_quantile_even(alpha / 2.0, 2 * failures)
    };
    (low, high)
}

/// The bucket bounds: 8, 16, …, `max`.
pub fn buckets(max: u32) -> Vec<u32> {
    let mut b = vec![8u32];
    while *b.last().unwrap() < max {
        b.push(b.last().unwrap() * 2);
    }
    b
}

/// Computes the MTTF table.
pub fn mttf_table(
    jobs: &[&JobRecord],
    rate_per_node_day: f64,
    gpus_per_node: u32,
    params: &ReportParams,
) -> MttfTable {
    let bounds = buckets(params.max_bucket_gpus.max(8));
    let mut acc = vec![(0u64, 0u64, 0f64); bounds.len()];
    for job in jobs.iter().filter(|j| j.gpus > 0) {
        let i = bounds
            .partition_point(|&b| b < job.gpus)
            .min(bounds.len() - 1);
        acc[i].0 += 1;
        acc[i].2 += job.runtime_s() / 3600.0;
        if job.is_hardware_failure() {
            acc[i].1 += 1;
        }
    }
    let rows = bounds
        .iter()
        .zip(acc)
        .enumerate()
        .map(|(i, (&gpus, (n, failures, hours)))| {
            let interval = (failures >= params.mttf_min_failures.max(1))
                .then(|| mttf_interval(hours, failures, params.confidence));
            MttfRow {
                gpus,
                open_ended: i + 1 == bounds.len(),
                jobs: n,
                failures,
                runtime_hours: hours,
                empirical_hours: (failures > 0).then(|| hours / failures as f64),
                ci_low_hours: interval.map(|i| i.0),
                ci_high_hours: interval.map(|i| i.1),
                projected_hours: projected_mttf_hours(
                    gpus as f64,
                    gpus_per_node,
                    rate_per_node_day,
                ),
            }
        })
        .collect();
    MttfTable {
        failure_rate_per_1000_node_days: rate_per_node_day * 1000.0,
        confidence: params.confidence,
        min_failures_for_interval: params.mttf_min_failures,
        rows,
    }
}
