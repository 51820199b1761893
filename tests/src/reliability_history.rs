//! Synthetic job histories with a known hardware failure rate, for the
//! report's tests and benchmark.
//!
//! Every run fails of hardware after an exponential time with rate
//! `nodes × r_f` (a Poisson process per node), so failures over node-days
//! estimates r_f without bias whatever the run lengths and sizes.

use crate::history::Rng;
use chrono::{DateTime, Duration, Utc};
use lemon::reliability::{
    JobRecord, JobState, LemonEntry, ReliabilityError, ReportInput, SignalValues, TimeRange,
};
use lemonade_sql::rusqlite::Connection;

/// What to generate.
#[derive(Debug, Clone)]
pub struct SyntheticSpec {
    pub until: DateTime<Utc>,
    pub days: i64,
    pub fleet_nodes: u32,
    pub gpus_per_node: u32,
    pub jobs: usize,
    /// Hardware failures per 1000 node-days.
    pub rate_per_1000_node_days: f64,
    /// Longest planned run, hours (runs are log-uniform from 10 minutes).
    pub max_runtime_hours: f64,
    /// Job sizes (GPUs) and their relative frequencies.
    pub sizes: &'static [(u32, f64)],
    pub seed: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        Self {
            until: DateTime::from_timestamp(1_767_225_600, 0).expect("valid"), // 2026-01-01
            days: 28,
            fleet_nodes: 2000,
            gpus_per_node: 8,
            jobs: 10_000,
            rate_per_1000_node_days: 6.5,
            max_runtime_hours: 72.0,
            sizes: &SIZES_FOR_STATISTICS,
            seed: 42,
        }
    }
}

/// Job sizes (GPUs) with enough large jobs that every MTTF bucket sees
/// failures: what the statistical tests need, though no fleet looks like it.
pub const SIZES_FOR_STATISTICS: [(u32, f64); 11] = [
    (1, 10.0),
    (8, 30.0),
    (16, 12.0),
    (32, 10.0),
    (64, 8.0),
    (128, 7.0),
    (256, 8.0),
    (512, 6.0),
    (1024, 5.0),
    (2048, 3.0),
    (4096, 1.0),
];

/// Job sizes as a research cluster runs them: most jobs on one node, large
/// jobs rare by count (though not by GPU-hours).
pub const SIZES_REALISTIC: [(u32, f64); 11] = [
    (1, 400.0),
    (8, 400.0),
    (16, 80.0),
    (32, 50.0),
    (64, 30.0),
    (128, 20.0),
    (256, 10.0),
    (512, 5.0),
    (1024, 3.0),
    (2048, 1.5),
    (4096, 0.5),
];

/// Check categories of attributed failures, with weights like the paper's top causes.
pub const CATEGORIES: [(&str, f64); 5] = [
    ("ib", 30.0),
    ("mounts", 25.0),
    ("ecc", 20.0),
    ("pcie", 15.0),
    ("xid", 10.0),
];

/// Generates a history per `spec`, with a few lemons and signal values.
pub fn generate(spec: &SyntheticSpec) -> ReportInput {
    let mut rng = Rng::new(spec.seed);
    let range = TimeRange::last_days(spec.until, spec.days);
    let span_s = (range.until - range.since).num_seconds() as f64;
    let rate_per_node_s = spec.rate_per_1000_node_days / 1000.0 / 86_400.0;
    let size_weights: Vec<f64> = spec.sizes.iter().map(|s| s.1).collect();
    let cat_weights: Vec<f64> = CATEGORIES.iter().map(|c| c.1).collect();
    let (min_s, max_s) = (600f64, spec.max_runtime_hours * 3600.0);
    let mut jobs = Vec::with_capacity(spec.jobs);
    for i in 0..spec.jobs {
        let gpus = spec.sizes[rng.pick(&size_weights)].0;
        let nodes = gpus.div_ceil(spec.gpus_per_node).max(1);
        let planned = min_s * (max_s / min_s).powf(rng.f64()).min(span_s * 0.9);
        let start_s = rng.f64() * (span_s - planned);
        // The run's own end comes first (completion, a user's bug, a cancel,
        // ...); hardware then fails it if its failure time comes earlier.
        // Drawing in the other order would over-count failures relative to
        // the exposure of runs that end early.
        let own = match rng.pick(&[85.0, 5.0, 4.0, 3.0, 2.0, 1.0]) {
            0 => JobState::Completed,
            1 => JobState::Failed, // the user's own bug: never attributed
            2 => JobState::Cancelled,
            3 => JobState::Timeout,
            4 => JobState::Preempted,
            _ => JobState::OutOfMemory,
        };
        let own_runtime = if own == JobState::Completed || own == JobState::Timeout {
            planned
        } else {
            planned * rng.f64()
        };
        let fail_after = rng.exp(1.0 / (nodes as f64 * rate_per_node_s));
        let (state, runtime, category, co) = if fail_after < own_runtime {
            let cat = CATEGORIES[rng.pick(&cat_weights)].0;
            let mut co = Vec::new();
            if cat == "pcie" && rng.f64() < 0.43 {
                co.push("xid".to_string());
            }
            if rng.f64() < 0.4 {
                // NODE_FAIL: the node vanished; half the time a check explains it.
                let cat = (rng.f64() < 0.5).then(|| cat.to_string());
                (JobState::NodeFail, fail_after, cat, co)
            } else {
                (JobState::Failed, fail_after, Some(cat.to_string()), co)
            }
        } else {
            (own, own_runtime, None, Vec::new())
        };
        let start = range.since + Duration::milliseconds((start_s * 1000.0) as i64);
        let end = start + Duration::milliseconds((runtime * 1000.0) as i64);
        let wait = Duration::seconds(rng.exp(1200.0) as i64);
        let hardware = state == JobState::NodeFail || category.is_some();
        jobs.push(JobRecord {
            id: (1_000_000 + i).to_string(),
            state,
            submit: Some(start - wait),
            start: Some(start),
            end,
            gpus,
            nodes,
            category,
            co_categories: co,
            requeued: hardware && gpus > 128,
            partition: "gpu".into(),
        });
    }
    let names = [
        "excl_jobid_count",
        "xid_cnt",
        "out_count",
        "single_node_node_fails",
    ];
    let signals = names
        .iter()
        .enumerate()
        .map(|(k, name)| SignalValues {
            name: name.to_string(),
            threshold: Some(3.0 + k as f64),
            values: (0..spec.fleet_nodes)
                .map(|_| (rng.exp(0.6 + k as f64 * 0.3)).floor())
                .collect(),
        })
        .collect();
    let lemons = (0..3)
        .map(|i| LemonEntry {
            node: format!("gpu{:04}", 17 + i * 101),
            since: Some(spec.until - Duration::days(3 + i as i64)),
            reason: format!("lemon: {} fails/28d", 5 + i),
        })
        .collect();
    ReportInput {
        range,
        fleet_nodes: spec.fleet_nodes,
        gpus_per_node: spec.gpus_per_node,
        jobs,
        lemons,
        signals,
        state_changes: Vec::new(),
    }
}

/// Stores a history in lemon.db as `lemon ingest` would (rows in end-time
/// order, as the ingest's time windows leave them): every run in `jobs`,
/// the nodes of failed runs in `job_nodes` and packed in `jobs.node_ids`
/// as the ingest packs them (the only nodes the report reads), a `down`
/// finding on one of its nodes a minute before the end for every
/// attributed failure (co-occurring checks half a minute before), and a
/// `drained` decision per lemon.
pub fn store(conn: &mut Connection, input: &ReportInput) -> Result<(), ReliabilityError> {
    let mut order: Vec<&JobRecord> = input.jobs.iter().collect();
    order.sort_by_key(|j| j.end);
    let tx = conn.transaction()?;
    {
        let mut node = tx.prepare("INSERT INTO nodes(id, name) VALUES (?1, ?2)")?;
        let mut ids = std::collections::HashMap::new();
        let fleet = input.fleet_nodes.max(1);
        for n in 1..=fleet {
            let name = format!("gpu{n:04}");
            node.execute((n, &name))?;
            ids.insert(name, n);
        }
        let mut job = tx.prepare(
            "INSERT INTO jobs(id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition, nnodes, nodelist, gpus, node_ids)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'synthetic', ?10, ?11)",
        )?;
        let mut job_node = tx.prepare("INSERT INTO job_nodes(job, node) VALUES (?1, ?2)")?;
        let mut finding = tx.prepare(
            "INSERT INTO health(node, epoch, seq, at, kind, check_name, severity)
             VALUES (?1, 'synthetic', ?2, ?3, 'finding', ?4, 'down')",
        )?;
        let mut seq = 0i64;
        for (i, j) in order.into_iter().enumerate() {
            let id = i as i64 + 1;
            let raw: i64 = j.id.parse().unwrap_or(id);
            let failed = matches!(j.state, JobState::Failed | JobState::NodeFail);
            let first = (raw as u64 * 7919 % u64::from(fleet)) as u32;
            let mut nodes: Vec<i64> = if failed {
                (0..j.nodes.min(fleet))
                    .map(|k| i64::from((first + k) % fleet + 1))
                    .collect()
            } else {
                Vec::new()
            };
            let packed = lemon::db::pack_node_ids(&mut nodes).map_err(|e| {
                ReliabilityError::InvalidParameter {
                    name: "nodes",
                    why: e.to_string(),
                }
            })?;
            job.execute((
                id,
                raw,
                &j.id,
                j.submit.map(|t| t.timestamp()),
                j.start.map(|t| t.timestamp()),
                j.end.timestamp(),
                j.state.as_str(),
                &j.partition,
                j.nodes,
                j.gpus,
                packed,
            ))?;
            if !failed {
                continue;
            }
            for node in nodes {
                job_node.execute((id, node))?;
            }
            let end = j.end.timestamp();
            for (before_s, check) in j
                .category
                .iter()
                .map(|c| (60, c))
                .chain(j.co_categories.iter().map(|c| (30, c)))
            {
                seq += 1;
                finding.execute((first + 1, seq, end - before_s, check))?;
            }
        }
        let mut decision = tx.prepare(
            "INSERT INTO decisions(at, node, action, reason) VALUES (?1, ?2, 'drained', ?3)",
        )?;
        for l in &input.lemons {
            if let Some(&n) = ids.get(&l.node) {
                decision.execute((l.since.map_or(0, |t| t.timestamp()), n, &l.reason))?;
            }
        }
    }
    // As `lemon ingest` leaves them: the runs' blocks packed.
    lemon::db::run_blocks::refresh(&tx).map_err(|e| ReliabilityError::InvalidParameter {
        name: "lemon.db",
        why: e.to_string(),
    })?;
    tx.commit()?;
    Ok(())
}
