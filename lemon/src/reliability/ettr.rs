//! Expected ETTR (effective training time ratio) by the digest's formula:
//!
//! E[ETTR] ≈ (1 − N·r_f·(u0 + Δt/2)) / (1 + N·r_f·(q + (u0/R)(q + u0 + Δt/2)))
//!
//! with N nodes, r_f failures per node per unit time, checkpoint interval
//! Δt, restart overhead u0, queue time q and productive runtime R.

use super::{JobRecord, ReportParams};
use crate::stats::median;
use serde::Serialize;

const MIN_PER_DAY: f64 = 1440.0;

/// One ETTR case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EttrCase {
    pub gpus: f64,
    pub gpus_per_node: u32,
    pub rate_per_node_day: f64,
    pub checkpoint_min: f64,
    pub restart_min: f64,
    pub queue_min: f64,
    /// `None`: a job so long that u0/R vanishes.
    pub runtime_min: Option<f64>,
}

impl EttrCase {
    /// N·r_f in failures per minute.
    fn failures_per_min(&self) -> f64 {
        let nodes = (self.gpus / self.gpus_per_node.max(1) as f64).max(1.0);
        nodes * self.rate_per_node_day / MIN_PER_DAY
    }

    fn restart_share(&self) -> f64 {
        self.runtime_min.map_or(0.0, |r| self.restart_min / r)
    }

    /// The formula as written; it goes negative when failures come faster
    /// than a checkpoint interval plus a restart.
    pub fn expected_ettr_raw(&self) -> f64 {
        let a = self.failures_per_min();
        let (u0, q, dt) = (self.restart_min, self.queue_min, self.checkpoint_min);
        (1.0 - a * (u0 + dt / 2.0)) / (1.0 + a * (q + self.restart_share() * (q + u0 + dt / 2.0)))
    }

    /// E[ETTR], clamped to [0, 1].
    pub fn expected_ettr(&self) -> f64 {
        self.expected_ettr_raw().clamp(0.0, 1.0)
    }

    /// The long, high-priority-job form 1 − N·r_f·(u0 + Δt/2), clamped.
    pub fn expected_ettr_long_job(&self) -> f64 {
        let a = self.failures_per_min();
        (1.0 - a * (self.restart_min + self.checkpoint_min / 2.0)).clamp(0.0, 1.0)
    }

    /// The largest checkpoint interval (minutes) that still reaches
    /// `target`; `None` when even continuous checkpointing does not.
    pub fn checkpoint_for(&self, target: f64) -> Option<f64> {
        let a = self.failures_per_min();
        if a <= 0.0 {
            return Some(f64::INFINITY);
        }
        let (u0, q, s) = (self.restart_min, self.queue_min, self.restart_share());
        // Solve target·(1 + a(q + s(q + u0 + Δt/2))) = 1 − a(u0 + Δt/2) for Δt.
        let numerator = 1.0 - a * u0 - target * (1.0 + a * q + a * s * (q + u0));
        let dt = 2.0 * numerator / (a * (1.0 + target * s));
        (dt > 0.0).then_some(dt)
    }
}

/// Where the queue time of the ETTR table came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueTime {
    pub minutes: f64,
    pub source: String,
}

/// The queue time q: given, or the median wait (start − submit) of the
/// large jobs in the history, or of all jobs when there are no large ones.
pub fn queue_time(jobs: &[&JobRecord], params: &ReportParams) -> QueueTime {
    if let Some(q) = params.queue_min {
        return QueueTime {
            minutes: q,
            source: "given".into(),
        };
    }
    let waits = |min_gpus: u32| -> Vec<f64> {
        jobs.iter()
            .filter(|j| j.gpus > min_gpus)
            .filter_map(|j| Some((j.start? - j.submit?).num_seconds().max(0) as f64 / 60.0))
            .collect()
    };
    for (min_gpus, what) in [
        (
            params.large_job_gpus,
            format!("jobs > {} GPUs", params.large_job_gpus),
        ),
        (0, "all GPU jobs".to_string()),
    ] {
        let mut w = waits(min_gpus);
        if let Some(m) = median(&mut w) {
            return QueueTime {
                minutes: m,
                source: format!("median wait of {} {what} in the history", w.len()),
            };
        }
    }
    QueueTime {
        minutes: 0.0,
        source: "no waits in the history: 0".into(),
    }
}

/// One row of the ETTR table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EttrRow {
    pub gpus: u32,
    pub nodes: f64,
    pub mttf_hours: Option<f64>,
    pub ettr: f64,
    pub ettr_long_job: f64,
    /// Checkpoint interval for the target ETTR, minutes; `None`: unreachable.
    pub checkpoint_for_target_min: Option<f64>,
}

/// The ETTR section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EttrTable {
    pub failure_rate_per_1000_node_days: f64,
    pub checkpoint_min: f64,
    pub restart_min: f64,
    pub queue: QueueTime,
    pub runtime_hours: f64,
    pub target: f64,
    pub rows: Vec<EttrRow>,
}

/// Computes the ETTR table for the report's job sizes.
pub fn ettr_table(
    rate_per_node_day: f64,
    gpus_per_node: u32,
    queue: QueueTime,
    params: &ReportParams,
) -> EttrTable {
    let rows = params
        .ettr_sizes
        .iter()
        .map(|&gpus| {
            let case = EttrCase {
                gpus: gpus as f64,
                gpus_per_node,
                rate_per_node_day,
                checkpoint_min: params.checkpoint_min,
                restart_min: params.restart_min,
                queue_min: queue.minutes,
                runtime_min: Some(params.runtime_hours * 60.0),
            };
            EttrRow {
                gpus,
                nodes: (gpus as f64 / gpus_per_node.max(1) as f64).max(1.0),
                mttf_hours: super::mttf::projected_mttf_hours(
                    gpus as f64,
                    gpus_per_node,
                    rate_per_node_day,
                ),
                ettr: case.expected_ettr(),
                ettr_long_job: case.expected_ettr_long_job(),
                checkpoint_for_target_min: case.checkpoint_for(params.ettr_target),
            }
        })
        .collect();
    EttrTable {
        failure_rate_per_1000_node_days: rate_per_node_day * 1000.0,
        checkpoint_min: params.checkpoint_min,
        restart_min: params.restart_min,
        queue,
        runtime_hours: params.runtime_hours,
        target: params.ettr_target,
        rows,
    }
}
