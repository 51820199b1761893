//! The site's jobs before their confounders and incidents: kind, size,
//! start, observed length, nodes and their exporters, kept within the row
//! budget.

use super::plan::{JobKind, JobPlan, NodePlan, Profile};
use super::rng::Rng;
use super::IndependentSpec;
use std::collections::BTreeSet;

/// Slots on the site: 2048 H100 nodes then 2048 H200 nodes.
pub(crate) const SITE_SLOTS: usize = 4096;
/// Metrics a DCGM node reports (the sixteen asked for): the row estimate.
const ROWS_PER_SAMPLE: i64 = 16;

/// A job's skeleton, drawn before anything else so the budget can trim it.
struct Skeleton {
    kind: JobKind,
    size: usize,
    start: i64,
    len: i64,
    interval: i64,
    /// Started in the burst right after the maintenance window.
    burst: bool,
}

pub(crate) fn kind_profile(kind: JobKind) -> Profile {
    // Per-node (8 GPUs) levels; rates in bytes/s. 8x400 Gb/s NICs carry at
    // most 400 GB/s; NVLink 4 gives 900 GB/s per GPU; PCIe 5 x16 ~64 GB/s.
    let p = |compute, mem_util, nvlink, ib, pcie, cpu, disk, mem_gb| Profile {
        compute,
        mem_util,
        nvlink,
        ib,
        pcie,
        cpu,
        disk,
        mem_gb,
    };
    match kind {
        JobKind::Pretrain => p(0.80, 45.0, 6.0e11, 1.2e11, 1.5e10, 18.0, 5e7, 600.0),
        JobKind::Fsdp => p(0.70, 50.0, 3.0e11, 1.8e11, 2.0e10, 22.0, 8e7, 500.0),
        JobKind::Moe => p(0.62, 55.0, 4.0e11, 2.2e11, 2.0e10, 20.0, 5e7, 700.0),
        JobKind::Multimodal => p(0.64, 40.0, 2.0e11, 0.9e11, 4.0e10, 62.0, 1.5e9, 900.0),
        JobKind::Rl => p(0.56, 60.0, 2.5e11, 0.7e11, 1.5e10, 30.0, 3e7, 800.0),
        JobKind::Inference => p(0.50, 70.0, 1.0e11, 0.1e11, 1.0e10, 25.0, 2e8, 400.0),
    }
}

fn draw_kind(rng: &mut Rng) -> JobKind {
    const KINDS: [JobKind; 6] = [
        JobKind::Pretrain,
        JobKind::Fsdp,
        JobKind::Moe,
        JobKind::Multimodal,
        JobKind::Rl,
        JobKind::Inference,
    ];
    KINDS[rng.weighted(&[0.28, 0.20, 0.14, 0.12, 0.14, 0.12])]
}

/// Mostly 2-32 nodes; pretraining and MoE also 64-256.
fn draw_size(rng: &mut Rng, kind: JobKind) -> usize {
    let big = matches!(kind, JobKind::Pretrain | JobKind::Moe);
    let sizes = [2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256];
    let w: [f64; 12] = if big {
        [
            0.03, 0.0, 0.08, 0.0, 0.18, 0.04, 0.22, 0.05, 0.18, 0.12, 0.07, 0.03,
        ]
    } else {
        [
            0.18, 0.04, 0.22, 0.04, 0.22, 0.03, 0.15, 0.03, 0.09, 0.0, 0.0, 0.0,
        ]
    };
    sizes[rng.weighted(&w)]
}

fn estimate(s: &Skeleton) -> i64 {
    s.size as i64 * (s.len / s.interval) * ROWS_PER_SAMPLE
}

/// Trims the biggest jobs (first their length, down to 30 min, then their
/// size) until the site fits the row budget: real sites have more, but the
/// replay must stay a few million rows.
fn fit_budget(skels: &mut [Skeleton], max_rows: i64) {
    loop {
        let total: i64 = skels.iter().map(estimate).sum();
        let nodes: usize = skels.iter().map(|s| s.size).sum();
        // Room for every job on distinct slots, with holes between them.
        let crowded = nodes > SITE_SLOTS / 2;
        if total <= max_rows && !crowded {
            return;
        }
        let Some(big) = skels.iter_mut().max_by_key(|s| estimate(s)) else {
            return;
        };
        if big.len > 2400 && !crowded {
            big.len = (big.len * 4 / 5).max(1800);
        } else if big.size > 2 {
            big.size /= 2;
        } else {
            return;
        }
    }
}

fn draw_skeletons(spec: &IndependentSpec, rng: &mut Rng) -> Vec<Skeleton> {
    let base = base_time(spec);
    // Maintenance ends at this time; a burst of jobs starts right after.
    let maint = base + rng.int(20, 40) * 60;
    (0..spec.jobs)
        .map(|i| {
            let kind = draw_kind(rng);
            let burst = i % 7 == 3;
            let start = if burst {
                maint + rng.int(0, 90)
            } else {
                base + rng.int(0, spec.window_s)
            };
            Skeleton {
                kind,
                size: draw_size(rng, kind),
                start,
                len: rng.int(30, 120) * 60,
                interval: rng.pick(&[10, 10, 10, 10, 10, 10, 15, 30]),
                burst,
            }
        })
        .collect()
}

pub(crate) fn base_time(spec: &IndependentSpec) -> i64 {
    1_790_000_000 + (spec.seed % 10_000) as i64 * 86_400
}

/// Host names as the site names them: GPU model, rack, slot in the rack.
pub(crate) fn host_name(gid: usize) -> String {
    let model = if gid < SITE_SLOTS / 2 { "h100" } else { "h200" };
    format!("{model}-r{:03}n{}", gid / 4, gid % 4)
}

/// Slurm places a job on contiguous free slots (topology-aware), with holes
/// left by drained and other tenants' nodes between jobs.
fn allocate(rng: &mut Rng, sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut next = rng.below(SITE_SLOTS / 4) * 4;
    let mut used = BTreeSet::new();
    sizes
        .iter()
        .map(|&size| {
            let mut ids = Vec::with_capacity(size);
            while ids.len() < size {
                next = (next + 1 + usize::from(rng.chance(0.05)) * rng.below(8)) % SITE_SLOTS;
                if used.insert(next) {
                    ids.push(next);
                }
            }
            // Other tenants' jobs and drained nodes between ours.
            next += rng.below(160);
            ids
        })
        .collect()
}

fn node(rng: &mut Rng, gid: usize, interval: i64, start: i64, end: i64) -> NodePlan {
    // One node in 12 runs the plain node exporter, without DCGM's fields.
    let dcgm = !rng.chance(1.0 / 12.0);
    NodePlan {
        name: host_name(gid),
        gid,
        dcgm,
        extra: rng.chance(0.15),
        interval: if rng.chance(0.02) { 30 } else { interval },
        phase: rng.int(0, interval - 1),
        skew: 0,
        speed: 1.0 + rng.noise(0.006),
        level: 1.0,
        group: 0,
        from: start,
        until: end,
        gaps: Vec::new(),
        drop_p: 0.0,
        stale_xid: 0,
        warm_lag: rng.int(0, 40),
        ckpt_lag: rng.int(0, 12),
        temp_off: rng.noise(2.5),
        power_gain: 1.0 + rng.noise(0.02),
    }
}

/// The site's jobs with their nodes; confounders and incidents come later.
pub(crate) fn draw_jobs(spec: &IndependentSpec, rng: &mut Rng) -> Vec<JobPlan> {
    let mut skels = draw_skeletons(spec, rng);
    fit_budget(&mut skels, spec.max_rows);
    let sizes: Vec<usize> = skels.iter().map(|s| s.size).collect();
    let slots = allocate(rng, &sizes);
    let first_id = 4_810_000 + (spec.seed % 1000) * 1000;
    skels
        .iter()
        .zip(slots)
        .enumerate()
        .map(|(i, (s, gids))| {
            let end = s.start + s.len;
            let nodes = gids
                .iter()
                .map(|&g| node(rng, g, s.interval, s.start, end))
                .collect::<Vec<_>>();
            let life_max = nodes.iter().map(|n| n.speed).fold(1.0, f64::max);
            let mut confounders = BTreeSet::new();
            if s.burst {
                confounders.insert("after_maintenance");
            }
            JobPlan {
                id: (first_id + i as u64 * 7 + rng.int(0, 6) as u64).to_string(),
                kind: s.kind,
                profile: kind_profile(s.kind),
                start: s.start,
                end,
                nodes,
                spans: Vec::new(),
                envs: Vec::new(),
                incident: None,
                confounders,
                life_max,
                hot_expert: None,
                role_switch: None,
                batch_change: None,
            }
        })
        .collect()
}
