//! Failure rate r_f: hardware failures per 1000 node-days of runtime, by the
//! paper's rule (large jobs only) and over all jobs, and a rolling series by
//! category.

use super::mttf::mttf_interval;
use super::{ratio, ReportParams, Run, TimeRange, DAY_S};
use crate::fast_hash::FastMap;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;

/// r_f under one counting rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    /// What is counted, in words.
    pub rule: String,
    /// Jobs with more GPUs than this count (0: all jobs).
    pub min_gpus_exclusive: u32,
    pub jobs: u64,
    pub failures: u64,
    pub node_days: f64,
    pub per_1000_node_days: f64,
    /// The chi-square interval of the rate (per 1000 node-days) at the
    /// report's confidence, when there are fewer than [`FEW_FAILURES`]
    /// failures: a rate from a handful of failures is mostly noise.
    pub interval_per_1000: Option<(f64, f64)>,
}

/// Below this many failures a rate carries its interval.
pub const FEW_FAILURES: u64 = 30;

impl Rate {
    /// Failures per node-day.
    pub fn per_node_day(&self) -> f64 {
        self.per_1000_node_days / 1000.0
    }
}

/// Failures of one category, over all jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryRate {
    pub category: String,
    pub failures: u64,
    pub per_1000_node_days: f64,
}

/// The rolling r_f series: `rates[c][d]` is category `c`'s rate over the
/// `window_days` days ending with `days[d]`. Rates of the categories add up
/// to the total, which is what makes the chart stackable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RollingRate {
    pub window_days: u32,
    pub days: Vec<NaiveDate>,
    pub categories: Vec<String>,
    pub rates: Vec<Vec<f64>>,
    pub total: Vec<f64>,
}

/// The failure-rate section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureRates {
    pub paper: Rate,
    pub all_jobs: Rate,
    pub by_category: Vec<CategoryRate>,
    pub rolling: RollingRate,
    /// Which rate the MTTF projection and the ETTR table use.
    pub projection_rule: String,
}

impl FailureRates {
    /// The rate the projections use: the paper's rule, or all jobs when the
    /// history has no large jobs at all.
    pub fn projection_rate_per_node_day(&self) -> f64 {
        if self.paper.node_days > 0.0 {
            self.paper.per_node_day()
        } else {
            self.all_jobs.per_node_day()
        }
    }
}

/// r_f over the runs with more than `min_gpus_exclusive` GPUs, with its
/// interval at `confidence` when the failures are few.
pub fn rate<R: Run>(jobs: &[&R], min_gpus_exclusive: u32, rule: &str, confidence: f64) -> Rate {
    let mut n = 0;
    let mut failures = 0;
    let mut node_days = 0.0;
    for job in jobs.iter().filter(|j| j.gpus() > min_gpus_exclusive) {
        n += 1;
        node_days += job.nodes() as f64 * job.runtime_s() / DAY_S;
        if job.is_hardware_failure() {
            failures += 1;
        }
    }
    Rate {
        rule: rule.to_string(),
        min_gpus_exclusive,
        jobs: n,
        failures,
        node_days,
        per_1000_node_days: 1000.0 * ratio(failures as f64, node_days),
        interval_per_1000: (failures < FEW_FAILURES && node_days > 0.0)
            .then(|| rate_interval(node_days, failures, confidence)),
    }
}

/// The rate's interval per 1000 node-days: the MTTF interval turned over.
fn rate_interval(node_days: f64, failures: u64, confidence: f64) -> (f64, f64) {
    let (shortest, longest) = mttf_interval(node_days, failures, confidence);
    (1000.0 / longest, 1000.0 / shortest)
}

/// Computes the failure-rate section.
pub fn failure_rates<R: Run>(jobs: &[&R], range: TimeRange, params: &ReportParams) -> FailureRates {
    let paper = rate(
        jobs,
        params.large_job_gpus,
        &format!(
            "jobs > {} GPUs: NODE_FAIL + attributed FAILED",
            params.large_job_gpus
        ),
        params.confidence,
    );
    let all_jobs = rate(
        jobs,
        0,
        "all GPU jobs: NODE_FAIL + attributed FAILED",
        params.confidence,
    );
    // Category names are ours (check and event codes): no SipHash per failure.
    let mut counts: FastMap<&str, u64> = FastMap::default();
    for job in jobs
        .iter()
        .filter(|j| j.gpus() > 0 && j.is_hardware_failure())
    {
        *counts.entry(job.failure_category()).or_default() += 1;
    }
    let mut by_category: Vec<CategoryRate> = counts
        .into_iter()
        .map(|(c, n)| CategoryRate {
            category: c.to_string(),
            failures: n,
            per_1000_node_days: 1000.0 * ratio(n as f64, all_jobs.node_days),
        })
        .collect();
    by_category.sort_by(|a, b| {
        b.failures
            .cmp(&a.failures)
            .then(a.category.cmp(&b.category))
    });
    let order: Vec<String> = by_category.iter().map(|c| c.category.clone()).collect();
    let rolling = rolling(jobs, range, params.rolling_days, order);
    let projection_rule = if paper.node_days > 0.0 {
        paper.rule.clone()
    } else {
        all_jobs.rule.clone()
    };
    FailureRates {
        paper,
        all_jobs,
        by_category,
        rolling,
        projection_rule,
    }
}

/// The rolling series over all GPU jobs: node-days are spread over the days
/// each run spans, failures fall on the day the run ended.
fn rolling<R: Run>(
    jobs: &[&R],
    range: TimeRange,
    window_days: u32,
    categories: Vec<String>,
) -> RollingRate {
    let first = range.since.date_naive();
    let day_start = |d: NaiveDate| -> DateTime<Utc> { d.and_hms_opt(0, 0, 0).unwrap().and_utc() };
    let n_days = ((range.until - day_start(first)).num_seconds() as f64 / DAY_S).ceil() as usize;
    let n_days = n_days.max(1);
    let origin = day_start(first).timestamp();
    let mut node_days = vec![0f64; n_days];
    let cat_index: FastMap<&str, usize> = categories
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    let mut fails = vec![vec![0u64; n_days]; categories.len()];
    let day_of = |t: i64| ((t - origin).div_euclid(86_400)).clamp(0, n_days as i64 - 1) as usize;
    for job in jobs.iter().filter(|j| j.gpus() > 0) {
        if let Some(start) = job.start_s() {
            // Clip to the range so that a run that started long before does
            // not pile its node-days on the first day.
            let s = start.max(range.since.timestamp());
            let e = job.end_s().min(range.until.timestamp());
            let mut t = s;
            while t < e {
                let d = day_of(t);
                let day_end = origin + (d as i64 + 1) * 86_400;
                let upto = e.min(day_end);
                node_days[d] += job.nodes() as f64 * (upto - t) as f64 / DAY_S;
                if upto <= t {
                    break;
                }
                t = upto;
            }
        }
        if job.is_hardware_failure() {
            if let Some(&c) = cat_index.get(job.failure_category()) {
                fails[c][day_of(job.end_s())] += 1;
            }
        }
    }
    let w = window_days as usize;
    let window_sum = |v: &[f64], d: usize| -> f64 {
        v[d.saturating_sub(w - 1)..=d]
            .iter()
            .fold(0.0, |a, b| a + b)
    };
    let nd: Vec<f64> = (0..n_days).map(|d| window_sum(&node_days, d)).collect();
    let rates: Vec<Vec<f64>> = fails
        .iter()
        .map(|f| {
            let f: Vec<f64> = f.iter().map(|&x| x as f64).collect();
            (0..n_days)
                .map(|d| 1000.0 * ratio(window_sum(&f, d), nd[d]))
                .collect()
        })
        .collect();
    let total = (0..n_days)
        .map(|d| rates.iter().map(|r| r[d]).fold(0.0, |a, b| a + b))
        .collect();
    RollingRate {
        window_days,
        days: (0..n_days)
            .map(|d| first + Duration::days(d as i64))
            .collect(),
        categories,
        rates,
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::chi2_quantile_even;

    #[test]
    fn a_rate_without_failures_is_bounded_above_by_the_chi_square_interval() {
        let (low, high) = rate_interval(100.0, 0, 0.95);
        assert_eq!(low, 0.0);
        let expected = 1000.0 * chi2_quantile_even(0.975, 2) / 200.0;
        assert!((high - expected).abs() < 1e-9, "{high} vs {expected}");
    }

    #[test]
    fn a_rate_interval_is_the_mttf_interval_turned_over() {
        let (short, long) = mttf_interval(500.0, 4, 0.95);
        let (low, high) = rate_interval(500.0, 4, 0.95);
        assert!((low - 1000.0 / long).abs() < 1e-12 && (high - 1000.0 / short).abs() < 1e-12);
        assert!(low < 8.0 && 8.0 < high, "the point estimate lies inside");
    }
}
