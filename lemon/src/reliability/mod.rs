//! The cluster reliability report (`lemon report --reliability`): job
//! outcomes, attributed hardware failures, failure rate r_f, MTTF by job
//! size, expected ETTR, lost goodput and the lemon signals, after section 1
//! of the research digest.
//!
//! Everything here is pure computation over plain input structs
//! ([`ReportInput`]), so that the numbers can be checked against synthetic
//! histories with known rates; [`load`] is the one place that reads
//! `lemon.db`, and [`render`] turns a [`ReliabilityReport`] into text, JSON
//! or a self-contained HTML page with inline SVG charts.

pub mod attribution;
pub mod cli;
pub mod ettr;
pub mod failure_rate;
pub mod goodput;
pub mod lemons;
pub mod load;
pub mod mttf;
pub mod outcomes;
pub mod remediation;
pub mod render;
pub mod run;
pub mod svg;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// Seconds in a day, for node-day arithmetic.
pub const DAY_S: f64 = 86_400.0;

/// The exposure below which rates are withheld, unless configured.
pub const DEFAULT_MIN_NODE_DAYS: f64 = 100.0;

pub use crate::error::ReliabilityError;

pub use crate::job_state::JobState;
pub use run::{Attributed, ReportRun, Run};

/// One run of a job allocation (a requeued job has one record per run).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    /// Job id as users see it (`123`, `123_4`, `123+1`).
    pub id: String,
    pub state: JobState,
    pub submit: Option<DateTime<Utc>>,
    /// `None`: the run never started.
    pub start: Option<DateTime<Utc>>,
    pub end: DateTime<Utc>,
    /// GPUs of the whole allocation: `gres/gpu=N` of AllocTRES, or nodes ×
    /// GPUs per node from config when AllocTRES has none.
    pub gpus: u32,
    pub nodes: u32,
    /// The health-check category a failure was attributed to (xid, ecc,
    /// pcie, ib, mounts, ...); `None`: not attributed to hardware.
    pub category: Option<String>,
    /// Other categories that fired in the same attribution window.
    pub co_categories: Vec<String>,
    /// Slurm started this job again after this run (same job id).
    pub requeued: bool,
    pub partition: String,
}

impl JobRecord {
    /// Wall-clock runtime in seconds (0 for runs that never started).
    pub fn runtime_s(&self) -> f64 {
        match self.start {
            Some(start) => ((self.end - start).num_milliseconds().max(0)) as f64 / 1000.0,
            None => 0.0,
        }
    }

    /// Counts toward r_f by the paper's rule: `NODE_FAIL`, or `FAILED` with a
    /// health check in the attribution window.
    pub fn is_hardware_failure(&self) -> bool {
        match self.state {
            JobState::NodeFail => true,
            JobState::Failed => self.category.is_some(),
            _ => false,
        }
    }

    /// The category a hardware failure is counted under.
    pub fn failure_category(&self) -> &str {
        self.category.as_deref().unwrap_or(UNATTRIBUTED)
    }
}

/// Category label of `NODE_FAIL` runs that no check explains.
pub const UNATTRIBUTED: &str = "unattributed";

/// A half-open time range `[since, until)`; runs are selected by end time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimeRange {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

impl TimeRange {
    /// The `days` days before `until`.
    pub fn last_days(until: DateTime<Utc>, days: i64) -> TimeRange {
        TimeRange {
            since: until - Duration::days(days),
            until,
        }
    }

    /// Whether `t` lies inside.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        t >= self.since && t < self.until
    }

    /// Whether a time of whole seconds `t` lies inside, without making a
    /// `DateTime` of it (a million runs' ends are checked).
    pub fn contains_seconds(&self, t: i64) -> bool {
        // The first and the first-past whole second inside.
        let ceil = |d: DateTime<Utc>| d.timestamp() + i64::from(d.timestamp_subsec_nanos() > 0);
        t >= ceil(self.since) && t < ceil(self.until)
    }

    /// Length in days.
    pub fn days(&self) -> f64 {
        (self.until - self.since).num_seconds() as f64 / DAY_S
    }
}

/// A node on the current lemon list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LemonEntry {
    pub node: String,
    pub since: Option<DateTime<Utc>>,
    /// The Slurm reason or decision summary (`lemon: 6 fails/28d`).
    pub reason: String,
}

/// One lemon signal over the fleet: its value on every node, and the
/// threshold in force.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalValues {
    pub name: String,
    pub threshold: Option<f64>,
    pub values: Vec<f64>,
}

/// Everything the report is computed from: the runs as [`JobRecord`]s,
/// or as the compact [`ReportRun`]s that lemon.db gives.
#[derive(Debug, Clone)]
pub struct ReportInput<J = JobRecord> {
    pub range: TimeRange,
    /// Nodes in the fleet (for the per-node projections and context).
    pub fleet_nodes: u32,
    pub gpus_per_node: u32,
    /// Runs of jobs; those ending outside `range` are ignored.
    pub jobs: Vec<J>,
    pub lemons: Vec<LemonEntry>,
    pub signals: Vec<SignalValues>,
    /// The nodes' state changes from their spool exports (any range: the
    /// report keeps those in its own).
    pub state_changes: Vec<remediation::StateChangeRecord>,
}

/// Knobs of the report; the defaults follow the paper.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportParams {
    /// The paper's r_f counts only jobs with more GPUs than this.
    pub large_job_gpus: u32,
    /// Width of the rolling failure-rate window.
    pub rolling_days: u32,
    /// Largest job-size bucket of the MTTF table (buckets double from 8).
    pub max_bucket_gpus: u32,
    /// Fewest failures in a bucket before a confidence interval is shown.
    pub mttf_min_failures: u64,
    /// Two-sided confidence level of the MTTF interval.
    pub confidence: f64,
    pub checkpoint_min: f64,
    pub restart_min: f64,
    /// `None`: the median queue wait of large jobs in the history.
    pub queue_min: Option<f64>,
    /// Productive runtime R of the job the ETTR table describes.
    pub runtime_hours: f64,
    pub ettr_target: f64,
    /// The GPU counts of the ETTR table.
    pub ettr_sizes: Vec<u32>,
    /// A failure loses at most this much work (time since the last checkpoint).
    pub goodput_cap_min: f64,
    /// A preemption this soon after a large failed job was requeued counts as second-order.
    pub preempt_window_min: f64,
    /// Below this exposure rates, MTTF and ETTR are withheld (`[lemon]
    /// min_report_node_days`).
    pub min_node_days: f64,
}

impl Default for ReportParams {
    fn default() -> Self {
        let mut ettr_sizes: Vec<u32> = (3..=16).map(|p| 1u32 << p).collect();
        ettr_sizes.push(100_000);
        Self {
            large_job_gpus: 128,
            rolling_days: 7,
            max_bucket_gpus: 4096,
            mttf_min_failures: 3,
            confidence: 0.95,
            checkpoint_min: 60.0,
            restart_min: 5.0,
            queue_min: None,
            runtime_hours: 168.0,
            ettr_target: 0.9,
            ettr_sizes,
            goodput_cap_min: 30.0,
            preempt_window_min: 10.0,
            min_node_days: DEFAULT_MIN_NODE_DAYS,
        }
    }
}

impl ReportParams {
    fn validate(&self) -> Result<(), ReliabilityError> {
        let bad = |name, why: &str| {
            Err(ReliabilityError::InvalidParameter {
                name,
                why: why.to_string(),
            })
        };
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return bad("confidence", "must lie strictly between 0 and 1");
        }
        if !(self.ettr_target > 0.0 && self.ettr_target < 1.0) {
            return bad("ettr_target", "must lie strictly between 0 and 1");
        }
        if self.checkpoint_min < 0.0 || self.restart_min < 0.0 || self.runtime_hours <= 0.0 {
            return bad(
                "checkpoint/restart/runtime",
                "must not be negative (runtime positive)",
            );
        }
        // NaN fails too.
        if self.min_node_days.is_nan() || self.min_node_days < 0.0 {
            return bad("min_node_days", "must not be negative");
        }
        if self.rolling_days == 0 {
            return bad("rolling_days", "must be at least 1");
        }
        Ok(())
    }
}

/// Totals over the selected runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    pub jobs: u64,
    pub gpu_hours: f64,
    pub node_days: f64,
}

/// Whether the history holds enough exposure for rates to mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Exposure {
    pub node_days: f64,
    pub gpu_hours: f64,
    /// The minimum below which rates, MTTF and ETTR are withheld.
    pub min_node_days: f64,
}

impl Exposure {
    /// Rates, MTTF and ETTR may be shown.
    pub fn enough(&self) -> bool {
        self.node_days >= self.min_node_days
    }

    /// `not enough history: 0.01 node-days of the 100 needed`.
    pub fn shortfall(&self) -> String {
        format!(
            "not enough history: {} node-days of the {} needed",
            render::significant(self.node_days),
            render::significant(self.min_node_days)
        )
    }
}

/// The computed report, ready to render.
#[derive(Debug, Clone, Serialize)]
pub struct ReliabilityReport {
    pub range: TimeRange,
    pub fleet_nodes: u32,
    pub gpus_per_node: u32,
    pub params: ReportParams,
    pub totals: Totals,
    pub exposure: Exposure,
    pub outcomes: Vec<outcomes::OutcomeRow>,
    pub attribution: attribution::AttributionSummary,
    pub failure_rate: failure_rate::FailureRates,
    pub mttf: mttf::MttfTable,
    pub ettr: ettr::EttrTable,
    pub goodput: goodput::LostGoodput,
    pub lemons: lemons::LemonSection,
    pub remediation: remediation::RemediationSummary,
}

/// Computes the whole report.
pub fn build_report<J: Run + Sync>(
    input: &ReportInput<J>,
    params: &ReportParams,
) -> Result<ReliabilityReport, ReliabilityError> {
    if input.range.since >= input.range.until {
        return Err(ReliabilityError::EmptyRange {
            since: input.range.since,
            until: input.range.until,
        });
    }
    params.validate()?;
    let gpn = input.gpus_per_node.max(1);
    let jobs: Vec<&J> = input
        .jobs
        .iter()
        .filter(|j| j.ended_in(&input.range))
        .collect();
    // Two threads, each with the sections that need only what it computes:
    // a million runs are read by each section.
    let ((outcomes, totals, attribution, goodput), (failure_rate, mttf, ettr)) =
        std::thread::scope(|s| {
            let rates = s.spawn(|| {
                let failure_rate = failure_rate::failure_rates(&jobs, input.range, params);
                let rate = failure_rate.projection_rate_per_node_day();
                let mttf = mttf::mttf_table(&jobs, rate, gpn, params);
                let queue = ettr::queue_time(&jobs, params);
                let ettr = ettr::ettr_table(rate, gpn, queue, params);
                (failure_rate, mttf, ettr)
            });
            let outcomes = outcomes::job_outcomes(&jobs);
            let totals = Totals {
                jobs: jobs.len() as u64,
                gpu_hours: outcomes.iter().map(|r| r.gpu_hours).fold(0.0, |a, b| a + b),
                node_days: jobs
                    .iter()
                    .map(|j| j.nodes() as f64 * j.runtime_s() / DAY_S)
                    .fold(0.0, |a, b| a + b),
            };
            let attribution = attribution::summarize(&jobs, &totals);
            let goodput = goodput::lost_goodput(&jobs, params);
            let rates = rates.join().expect("the report's rate sections panicked");
            ((outcomes, totals, attribution, goodput), rates)
        });
    let lemons = lemons::lemon_section(&input.lemons, &input.signals);
    let remediation = remediation::summarize(&input.state_changes, input.range, input.fleet_nodes);
    Ok(ReliabilityReport {
        range: input.range,
        fleet_nodes: input.fleet_nodes,
        gpus_per_node: gpn,
        params: params.clone(),
        exposure: Exposure {
            node_days: totals.node_days,
            gpu_hours: totals.gpu_hours,
            min_node_days: params.min_node_days,
        },
        totals,
        outcomes,
        attribution,
        failure_rate,
        mttf,
        ettr,
        goodput,
        lemons,
        remediation,
    })
}

/// `numerator / denominator`, 0 when the denominator is 0.
pub(crate) fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        0.0
    }
}

/// GPU-hours of one run.
pub(crate) fn gpu_hours<R: Run>(job: &R) -> f64 {
    job.gpus() as f64 * job.runtime_s() / 3600.0
}
