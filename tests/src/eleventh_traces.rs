//! An eleventh generator of per-node metric traces of multi-node training
//! jobs with planted faulty nodes, and its scorer. Written from a brief
//! without reading the detector (`lemon watch`) or the other generators, so
//! that it measures the detector on data its author could not tune against.
//!
//! # The site
//!
//! A big AI lab's shared cluster: 2048 H100 and 2048 H200 SXM nodes (8 GPUs,
//! 8x400 Gb/s RoCE NICs each), four nodes a rack, 32 under a leaf switch,
//! named `h100-r041n2` (model, rack, slot). About 40 jobs a seed
//! ([`IndependentSpec::new`]), started over 90 minutes, a seventh of them in a
//! burst right after a maintenance window (`after_maintenance`); each is
//! watched for 30 to 120 minutes (the biggest are trimmed to keep the file
//! at a few million rows). Slurm places a job on contiguous slots.
//!
//! # Jobs
//!
//! Pretraining with 3D parallelism (28%; 4-256 nodes), FSDP fine-tuning
//! (20%), MoE with expert parallelism (14%; up to 256 nodes), multimodal
//! data-heavy jobs (12%; busy CPUs and disks), RL post-training (14%;
//! learner and rollout groups) and offline inference sweeps (12%;
//! independent replicas, the only kind where nobody waits for a slow node).
//! Most are 2-32 nodes. Training is synchronous: every node runs at the
//! slowest node's pace, so a slow node's peers compute less (lower power,
//! lower clocks' load, less traffic) while their `gpu_util` stays high
//! (NCCL kernels spin while waiting).
//!
//! # Confounders (healthy hardware; share of jobs that list each)
//!
//! Per job: `slow_warmup` (20%: long, nodes up to 3 min apart; every job has
//! a warm-up), `checkpoint` (~40%: every node drops for 30-120 s, seconds
//! apart), `rank0_checkpoint` (~17%: rank 0 writes alone, the others spin at
//! the barrier: one node stands apart), `eval_phase` (~25%), `batch_change`
//! (20%), `dataloader_stall` / `dataloader_stall_one_node` (12% each; the
//! latter stands one node apart), `pipeline_stages` (~18%: first and last
//! stage 12-18% lower by design), `rank0_extra` (30%: rank 0's node a little
//! different), `role_switch` (all RL), `moe_hot_expert` (all MoE: a node with
//! 12% more work, moving every 3-8 min), `slow_node_for_life` (~20%: one node
//! 3-7% slower for good), `exporter_gap` (20%: one node silent 1-5 min, then
//! its exporter restarts and the XID gauge reads 0), `dropped_rows` (20%),
//! `clock_skew` (15%: 5-45 s), `stale_xid` (8%: an earlier tenant's XID
//! 13/31/43/45 still on one node's gauge), `requeue` (~7% of long jobs: no
//! rows for 3-10 min, then a new warm-up, half the time with one node
//! replaced), `metric_subset` (a node in 12 runs a plain exporter without
//! clocks, util_min, nvlink and XID), `unknown_metrics` (15% of nodes also
//! export `DCGM_FI_PROF_SM_ACTIVE`, `node_load1`, `nic_errors`),
//! `slow_scrape` (15 or 30 s scrapes). Site-wide: `storage_outage` (70% of
//! seeds: every running job's GPUs idle for 2-6 min), `leaf_congestion` (1-3
//! a seed: other tenants' bursts, PFC pauses and CNPs on one leaf's nodes,
//! the job 2-10% slower), `fabric_flap` (60% of seeds: a spine link flapping,
//! CNP bursts on a quarter of multi-leaf jobs' nodes), `hot_rack` (1-2 a
//! seed: a rack's four nodes throttled 8-22% for 10-25 min).
//!
//! # User errors (30% of jobs; healthy to the scorer, listed as confounders)
//!
//! `user_exception` and `user_cuda_oom` (the rank's node goes idle, the
//! others spin in NCCL until torchrun's agent, the 10 min NCCL watchdog or
//! PyTorch's 30 min timeout kills the job), `user_nan_exit` (every rank exits
//! together), `user_deadlock` (every rank spins), `user_stuck_barrier` (one
//! GPU idles, everything else spins), `user_app_xid` (XID 13, 31 or 43 on
//! the rank's node, then the crash; the kill may raise XID 45 on every node
//! in the last seconds), and `repeat_offender` (2-3 jobs of one bad user
//! crashing alike on rank 0's node).
//!
//! # Faults (40% of jobs, at most one node, onset after the warm-up)
//!
//! Shares roughly after Minder (NSDI'25): `ecc_uncorrectable` 22% (XID 94,
//! 48, 95, 63 or 64; the node's processes die, idle or stuck; the job hangs
//! then is killed), `gpu_off_bus` 8% (XID 79), `gsp_error` 6% (XID 119/120;
//! half the time DCGM then hangs and the node's GPU rows stop a minute
//! later), `nvlink_error` 13% (XID 74; hang with the node's NVLink at 0, or
//! a 1.3-2x slowdown, sometimes on/off, traffic moving to PCIe),
//! `pcie_downgrade` 8% (no XID; PCIe capped, job 15-60% slower),
//! `nic_down` 8% (no XID; hang, or one rail down and 20-50% slower; PFC
//! pauses, CNPs, NIC errors), `nic_flap` 7% (on/off stalls), `thermal_throttle`
//! 6% and `power_throttle` 4% (no XID; clocks and power down), `slow_gpu` 4%,
//! `host_cpu_memory` 6% (CPU burnt by machine checks, the data loader starves;
//! sometimes the host stops), `unreachable` 8% (every series of the node
//! stops, the job hangs). A fifth of the faults are `subtle` (slow_gpu,
//! thermal, PCIe, NIC flap or host faults costing 3-25%, no halt).
//!
//! # The gauge
//!
//! `DCGM_FI_DEV_XID_ERRORS` is the last XID of the node's GPUs (max), held
//! until the exporter restarts; only DCGM nodes report it. Faults without a
//! real XID (PCIe, NIC, throttling, slow GPU, host, unreachable) raise none.

mod assign;
mod confound;
mod emit;
mod incident;
mod jobs;
mod metrics;
mod plan;
mod rng;
mod score;
mod site;
mod state;
#[cfg(test)]
mod tests;

pub use score::{score, Call, Score, Tally, TierPair};

use plan::{JobPlan, Phase};
use rng::Rng;
use std::collections::BTreeSet;

/// The site to generate.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    /// Jobs on the site.
    pub jobs: usize,
    /// Share of jobs with one faulty node.
    pub fault_share: f64,
    /// Share of jobs whose user code fails on healthy hardware.
    pub user_share: f64,
    /// Row budget: the biggest jobs are trimmed to stay under it.
    pub max_rows: i64,
    /// Jobs start within this many seconds of the base time.
    pub window_s: i64,
}

impl IndependentSpec {
    /// The default site; seeds 1..=20 are the evaluation.
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 40,
            fault_share: 0.4,
            user_share: 0.3,
            max_rows: 3_600_000,
            window_s: 5400,
        }
    }
}

/// A planted fault: its kind, its node, when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

/// The truth about one job.
#[derive(Debug, Clone)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// Which span wins where they overlap: a requeue's gap over everything,
/// a storage outage over the job's own phases.
fn priority(p: Phase) -> u8 {
    match p {
        Phase::Gap => 0,
        Phase::StorageOutage => 1,
        Phase::Warmup => 2,
        Phase::Rank0Ckpt => 3,
        Phase::Checkpoint => 4,
        Phase::NodeStall(_) => 5,
        Phase::Stall => 6,
        Phase::Eval => 7,
    }
}

/// The whole site's plan; each stage draws from its own stream.
fn plan_site(spec: &IndependentSpec) -> Vec<JobPlan> {
    let root = Rng::new(spec.seed);
    let mut jobs = jobs::draw_jobs(spec, &mut root.fork(1));
    let used: BTreeSet<usize> = jobs
        .iter()
        .flat_map(|j| j.nodes.iter().map(|n| n.gid))
        .collect();
    let mut spares = (0..jobs::SITE_SLOTS).rev().filter(|g| !used.contains(g));
    let mut rng = root.fork(2);
    for job in &mut jobs {
        confound::confound(job, &mut rng, spares.next().unwrap_or(0));
    }
    assign::assign(&mut jobs, spec, &mut root.fork(3));
    site::site_events(&mut jobs, &mut root.fork(4));
    for job in &mut jobs {
        job.spans.sort_by_key(|s| priority(s.phase));
    }
    jobs
}

fn truth(job: &JobPlan) -> IndependentJob {
    let fault = job
        .incident
        .as_ref()
        .filter(|i| i.fault)
        .map(|i| PlantedFault {
            kind: i.name.to_string(),
            node: job.nodes[i.node].name.clone(),
            onset: i.onset,
            subtle: i.subtle,
        });
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault,
        confounders: job.confounders.iter().map(|c| c.to_string()).collect(),
    }
}

/// Writes the replay CSV to `out` and returns the truth for each job.
pub fn generate(
    spec: &IndependentSpec,
    out: &mut impl std::io::Write,
) -> std::io::Result<Vec<IndependentJob>> {
    let jobs = plan_site(spec);
    let mut rng = Rng::new(spec.seed).fork(5);
    let mut prefixes = Vec::new();
    let mut rows = Vec::with_capacity(spec.max_rows.clamp(0, 8_000_000) as usize);
    for job in &jobs {
        emit::job_rows(job, &mut rng, &mut prefixes, &mut rows);
    }
    emit::write_rows(&rows, &prefixes, out)?;
    Ok(jobs.iter().map(truth).collect())
}
