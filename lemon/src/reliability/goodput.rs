//! Goodput lost to failures: min(runtime, cap) × GPUs per failed run (the
//! work since the last checkpoint), and the second-order preemptions that
//! requeued large jobs cause.

use super::{ratio, JobState, ReportParams, Run};
use crate::fast_hash::FastMap;
use serde::Serialize;

/// Lost GPU-hours of one kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lost {
    pub what: String,
    pub jobs: u64,
    pub gpu_hours: f64,
}

/// The lost-goodput section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LostGoodput {
    pub cap_min: f64,
    /// Hardware failures (the r_f rule, any job size).
    pub hardware: Lost,
    /// Hardware failures by category.
    pub by_category: Vec<Lost>,
    /// Every `FAILED`/`NODE_FAIL` run, whatever the cause.
    pub all_failed: Lost,
    /// `PREEMPTED` runs that ended within the window after a large failed
    /// job was requeued.
    pub second_order_preemptions: Lost,
    /// Second-order preemptions as a share of hardware plus second-order loss.
    pub second_order_share: f64,
}

fn lost_hours<R: Run>(job: &R, cap_s: f64) -> f64 {
    job.gpus() as f64 * job.runtime_s().min(cap_s) / 3600.0
}

/// Computes the lost-goodput section.
pub fn lost_goodput<R: Run>(jobs: &[&R], params: &ReportParams) -> LostGoodput {
    let cap_s = params.goodput_cap_min * 60.0;
    let mut hardware = Lost {
        what: "hardware failures".into(),
        jobs: 0,
        gpu_hours: 0.0,
    };
    let mut all_failed = Lost {
        what: "all FAILED/NODE_FAIL".into(),
        jobs: 0,
        gpu_hours: 0.0,
    };
    let mut by_cat: FastMap<&str, (u64, f64)> = FastMap::default();
    // Requeue instants of large failed jobs; a requeue happens as the run ends.
    let mut requeues: Vec<i64> = Vec::new();
    for job in jobs {
        let failed = matches!(job.state(), JobState::Failed | JobState::NodeFail);
        if failed {
            all_failed.jobs += 1;
            all_failed.gpu_hours += lost_hours(*job, cap_s);
        }
        if job.is_hardware_failure() {
            let h = lost_hours(*job, cap_s);
            hardware.jobs += 1;
            hardware.gpu_hours += h;
            let e = by_cat.entry(job.failure_category()).or_default();
            e.0 += 1;
            e.1 += h;
        }
        let large_failure = failed || job.state() == JobState::Requeued;
        if large_failure && job.requeued() && job.gpus() > params.large_job_gpus {
            requeues.push(job.end_s());
        }
    }
    requeues.sort_unstable();
    let window_s = (params.preempt_window_min * 60.0) as i64;
    let mut second = Lost {
        what: format!(
            "PREEMPTED within {} min after a job > {} GPUs failed and was requeued",
            params.preempt_window_min, params.large_job_gpus
        ),
        jobs: 0,
        gpu_hours: 0.0,
    };
    for job in jobs.iter().filter(|j| j.state() == JobState::Preempted) {
        let t = job.end_s();
        // The latest requeue at or before the preemption.
        let i = requeues.partition_point(|&r| r <= t);
        if i > 0 && t - requeues[i - 1] <= window_s {
            second.jobs += 1;
            second.gpu_hours += lost_hours(*job, cap_s);
        }
    }
    let mut by_category: Vec<Lost> = by_cat
        .into_iter()
        .map(|(c, (n, h))| Lost {
            what: c.to_string(),
            jobs: n,
            gpu_hours: h,
        })
        .collect();
    by_category.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then(a.what.cmp(&b.what))
    });
    let second_order_share = ratio(second.gpu_hours, second.gpu_hours + hardware.gpu_hours);
    LostGoodput {
        cap_min: params.goodput_cap_min,
        hardware,
        by_category,
        all_failed,
        second_order_preemptions: second,
        second_order_share,
    }
}
