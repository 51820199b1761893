//! An eleventh generator of per-node metric traces of multi-node training jobs
//! with planted faulty nodes, and its scorer. Written from a brief without
//! reading the detector (`lemon watch`) or the other generators, so that it
//! measures the detector on data its author could not tune against.
//!
//! # The site
//!
//! A big AI lab's shared cluster: 2048 H100 and 2048 H200 SXM nodes (8 GPUs,
//! 8x400 Gb/s RoCE NICs each), four nodes a rack, 32 under a leaf switch, named
//! `h200-r598n3` (model, rack, slot). About 40 jobs a seed
//! ([`IndependentSpec::new`]), started over 90 minutes, a seventh of them in a
//! burst right after a maintenance window (`after_maintenance`); each is
//! watched for 30 to 120 minutes (the biggest are trimmed to keep the file near
//! 3 million rows), or until an incident gets it killed. Slurm places a job on
//! near-contiguous slots. Time starts at 1_790_000_000 + seed days.
//!
//! # Jobs
//!
//! Pretraining with 3D parallelism (28%; 4-256 nodes), FSDP fine-tuning (20%),
//! MoE with expert parallelism (14%; up to 256 nodes), multimodal data-heavy
//! jobs (12%; busy CPUs and disks), RL post-training (14%; learner and rollout
//! groups) and offline inference sweeps (12%; independent replicas, the only
//! kind where nobody waits for anybody). Median size 8 nodes, 7% of jobs 64
//! nodes or more. Training is synchronous: the job runs at its slowest node's
//! pace. A node whose GPUs are slow (throttled, a slow GPU) computes all the
//! time while its peers wait in NCCL (their `gpu_util` stays high, their power,
//! clocks' load and traffic fall); a slow link (PCIe, NIC, NVLink, congestion)
//! slows every node alike, the culprit marked only by its own link's metrics; a
//! starved host leaves its own GPUs idle while its peers spin.
//!
//! # Confounders (healthy hardware; share of jobs that list each, seeds 1-20)
//!
//! One node stands apart in: `rank0_checkpoint` (14%: rank 0 writes 1-3 min
//! alone, idle GPUs and a busy disk, the others spin at the barrier),
//! `dataloader_stall_one_node` (13%: one node's GPUs idle 0.5-2.5 min),
//! `slow_node_for_life` (17%: one node 3-7% slower for good, so it is the
//! busiest), `rank0_extra` (30%: rank 0 7% lighter), `moe_hot_expert` (all MoE:
//! a node with 12% more work and 20% more traffic, moving every 3-8 min),
//! `exporter_gap` (18%: one node silent 1-5 min, then its exporter restarts and
//! the XID gauge reads 0), `clock_skew` (14%: 5-45 s), `stale_xid` (8%: an
//! earlier tenant's XID 13/31/43/45 still on one node's gauge), `dropped_rows`
//! (19%: 1-6% of a few nodes' rows), `requeue` (9%: no rows for 3-10 min, a new
//! warm-up, half the time with one node replaced), `metric_subset` (one node in
//! 12 runs a plain exporter without clocks, util_min, nvlink and XID),
//! `unknown_metrics` (15% of nodes also export `DCGM_FI_PROF_SM_ACTIVE`,
//! `node_load1`, `nic_errors`), `slow_scrape` (15 or 30 s scrapes), and the
//! site's `hot_rack` (6%: a rack's nodes throttled 8-22% for 10-25 min),
//! `leaf_congestion` (8%: other tenants' bursts, PFC pauses and CNPs on one
//! leaf's nodes, the job 2-10% slower) and `fabric_flap` (15%: a spine link
//! flapping, CNP bursts on a quarter of multi-leaf jobs' nodes). Groups of
//! nodes differ by design in `pipeline_stages` (18%: first and last stages
//! 12-18% lighter) and `role_switch` (all RL: rollout and learner groups swap
//! every 3-8 min). Every node changes together in `slow_warmup` (19%; every job
//! warms up, idle GPUs then a ramp), `checkpoint` (40%: all nodes drop 0.5-2
//! min, seconds apart), `eval_phase` (26%), `batch_change` (19%),
//! `dataloader_stall` (12%) and the site's `storage_outage` (33%: every running
//! job's GPUs idle for 2-6 min).
//!
//! # User errors (30% of jobs; healthy to the scorer, listed as confounders)
//!
//! `user_exception` and `user_cuda_oom` (the rank's node goes idle, its memory
//! freed; the others spin in NCCL until torchrun's agent (1.5-3 min), the NCCL
//! watchdog (10 min) or PyTorch's default (30 min) kills the job),
//! `user_nan_exit` (every rank exits together), `user_deadlock` (every rank
//! spins), `user_stuck_barrier` (one GPU idles, the rest spin), `user_app_xid`
//! (XID 13, 31 or 43 on the rank's node, then the crash), and `repeat_offender`
//! (2-3 jobs of one bad user crashing alike on rank 0's node). In inference
//! sweeps the other replicas carry on instead.
//!
//! # Faults (40% of jobs, at most one node, onset 5 min after the warm-up)
//!
//! Shares over seeds 1-20 (roughly Minder's, NSDI'25, table 1):
//! `ecc_uncorrectable` 19% (XID 94, 48, 95, 63 or 64; the node's processes die,
//! or an uncontained error leaves them stuck spinning at low power; the others
//! spin, then the job is killed), `gpu_off_bus` 7% (XID 79, idle, util_min 0),
//! `gsp_error` 4% (XID 119/120; stuck, and half the time the exporter's GPU
//! queries hang a minute later: no GPU rows), `nvlink_error` 14% (XID 74; a
//! hang with the node's NVLink at 0, or 1.3-2x slower with NVLink traffic moved
//! to PCIe, sometimes on/off), `pcie_downgrade` 12% (no XID; PCIe capped to
//! 20-70%, job 3-60% slower), `nic_down` 5% (no XID; a hang, or one rail down
//! and 20-50% slower; PFC pauses, CNPs, NIC errors), `nic_flap` 9% (on/off:
//! stalls of 10-90 s), `thermal_throttle` 6% (clocks 60-96%, +15-25 C, a third
//! of them on/off) and `power_throttle` 3% (clocks 35-60%, power capped),
//! `slow_gpu` 8% (one GPU of eight slow: the node's mean clock dips a little,
//! the job 4-70% slower), `host_cpu_memory` 7% (machine-check storms burn CPU
//! and starve the GPUs; sometimes the host stops), `unreachable` 6% (every
//! series of the node stops; the others spin until the kill). About 19% of the
//! faults are `subtle`: slow GPU, thermal, PCIe, NIC flap or host faults
//! costing 3-25%, no halt.
//!
//! # The XID gauge
//!
//! `DCGM_FI_DEV_XID_ERRORS`: only DCGM nodes report it; per node the max over
//! the GPUs of each GPU's last XID, held until the exporter restarts. Faults
//! without a real XID (PCIe, NIC, throttling, slow GPU, host, unreachable)
//! raise none. A kill may raise XID 45 (preemptive cleanup) on every node of a
//! crashed job in its last half minute.

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
            max_rows: 3_900_000,
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
