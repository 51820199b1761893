//! A seventh generator of per-node metric traces of training jobs, held out
//! from the tuning of `lemon watch` (issue 45), and its scorer.
//!
//! Written from a brief and from how real 2026 GPU fleets behave, without
//! reading the detector or the other generators. [`generate`] writes a
//! replay file (`time,job,node,metric,value`, rows in time order) and
//! returns the truth; [`score`] judges a detector's calls against it.
//!
//! # Jobs
//!
//! About 38 jobs a seed, 2 to 256 nodes of 8 GPUs, 30 to 90 minutes
//! (benchmarks 30 to 45), starting within 40 minutes of each other on
//! disjoint nodes. Nodes are named `hgx-<pod><unit>-<slot>`; racks hold 4
//! nodes, a leaf switch 16. The mix (share of jobs, node counts):
//!
//! | workload | share | nodes | what it does |
//! |---|---|---|---|
//! | `pretrain_megatron` | 22% | 16-256 | TP 8 inside a node, PP 2/4/8 stages in contiguous blocks (a quarter uneven), DP across; 40% MoE |
//! | `pretrain_fsdp` | 14% | 4-64 | every node alike, heavy IB (all-gather, reduce-scatter) |
//! | `finetune` | 20% | 2-16 | DDP/FSDP SFT; 35% with 1-2 distillation teacher nodes |
//! | `rl_post_training` | 18% | 4-64 | rollout 2-6 min, reward 20-60 s, train 1-4 min, weight sync 10-30 s, over and over; 40% colocated, else trainer and rollout pools; 60% with a reward-model node |
//! | `multimodal_diffusion` | 12% | 4-32 | CPU- and disk-heavy input (decode), strong per-node data skew; 70% with vision-encoder nodes at 75-90% of the others' compute |
//! | `eval_benchmark` | 14% | 2-8 | nccl-tests sweeps, GEMM burns, inference; 60% disaggregated (prefill nodes, decode nodes, one client node) |
//!
//! Scrapes: jobs under 16 nodes every 10 or 15 s (a fifth at 30 s), 16-63
//! nodes every 10-60 s, 64 or more every 15-60 s, mostly 30 or 60. Each
//! node scrapes on its own phase; a scrape averages three instants of its
//! window. Nodes report node-exporter (`cpu_util`,
//! `mem_used` in GiB, `disk_io`), DCGM (`gpu_util`, `gpu_power` summed over
//! 8 GPUs, `gpu_sm_clock`, `gpu_mem_util` as memory-bandwidth busy, and the
//! profiling fields `gpu_util_min`, `pcie_tx`, `nvlink_tx`), the IB exporter
//! (`ib_tx`, `ib_rx`) and, in 85% of jobs, switch counters (`pfc_pause`,
//! `cnp`), plus metrics the detector does not know (`gpu_temp`,
//! `DCGM_FI_DEV_XID_ERRORS`, `nic_errors`, `pcie_link_width`, ...).
//!
//! # How a synchronous job is coupled
//!
//! Each coupled node has a compute demand per iteration (its stage's level,
//! its lifelong slowness, data skew, MoE load, throttling, faults). The
//! slowest node sets the iteration time; the others wait inside NCCL, where
//! the spinning kernel keeps `gpu_util` high while power, SM clocks' load
//! and traffic fall. Time spent off the GPU (a starved input pipeline, a
//! checkpoint write, a dead process) reads as low `gpu_util`. IB, NVLink
//! and PCIe rates scale with the job's iteration rate, so a straggler slows
//! everyone's traffic alike. A hang leaves the living ranks spinning at
//! ~95% `gpu_util`, a third of their power, and no traffic.
//!
//! # Confounders
//!
//! Each job draws its own; [`IndependentJob::confounders`] lists them. All
//! are present in more than half the jobs (benchmarks never have the five
//! training ones). "Apart" says how often the confounder makes one node (not
//! the whole job) stand apart, and for how long.
//!
//! | confounder | jobs | shape | apart |
//! |---|---|---|---|
//! | `warmup_ramp` | 79% | 2.5-7 min start-up: CPU +25%, disk ×6 (checkpoint load), GPUs idle, then a ramp; nodes finish loading up to 15% of it apart. The rest join mid-run | every start and restart, the late nodes for up to a minute |
//! | `checkpoint` | 69% | every 8-30 min. Rank 0 (35%): a gather (IB burst), then rank 0 writes 3 GB/s off-GPU for 40-180 s while the others spin at a barrier. Sharded (40%): all write 1.5 GB/s, each finishing at its own time (60-100% of 30-120 s), then spin. Async (25%): a 5-20 s D2H stall, then writes in the background at 95% pace | rank 0 mode: rank 0, every checkpoint, 40-180 s; sharded: the slowest writers, 10-50 s |
//! | `eval_phase` | 61% | every 10-25 min for 1-4 min: compute ×0.8, power ×0.65, IB ×0.1, NVLink ×0.5; each node ends up to 15% early | with `rank0_extra`, rank 0 off-GPU for the last 10% while the rest spin |
//! | `dataloader_stall` | 60% | 3-12 an hour (multimodal 8-16), 8-75 s | 70% of stalls are one node (off-GPU, CPU +40, disk ×3) while the rest spin; 30% are job-wide with up to 10% start jitter |
//! | `lr_batch_change` | 58% | 1-3 steps: compute per iteration ×1.15-1.6 (batch ramp-up) or ×0.75-0.92, to the end | never |
//! | `layout_groups` | 59% | pipeline stages (levels 0.88-1.1, edge stages 80% IB), MoE load wandering ±5-15% in 5-min draws, RL role pools, a reward node, teachers, encoder nodes, prefill/decode/client | always: whole groups for life; a reward, teacher or client node is one node for life; under MoE the hottest node changes every few minutes; in RL each node ends its rollouts 0-90 s before the phase does, so the longest generation keeps one node busy alone |
//! | `rank0_extra` | 75% | rank 0: CPU +8-25%, memory +30-90 GiB, 0-3% slower, log bursts of 0.4 GB/s each minute; after 60% of checkpoints a 2-8 min upload (CPU +15, disk 2 GB/s, `eth_tx`) | always rank 0, for life |
//! | `lifelong_bias` | 85% | 1 + n/20 nodes (at most 4): 2-5% slower, power ±3-6%, +3-7 °C, up to 30 MHz lower clocks (all nodes: power sd 1.5%, slowness ≤ 1%) | always, for life: the slowest paces the job and draws more power than peers who spin |
//! | `data_skew` | 59% | each node's compute wanders with sd 2-6% (multimodal 4-9%) in 1-3 min blocks | always: the block's slowest node, 1-3 min at a time |
//! | `metric_subset` | 59% | 5-30% of nodes (at least one) lack profiling fields (50%), profiling and switch counters (25%), or the IB exporter and switch counters (25%) | always, for life |
//! | `unknown_metrics` | 90% | 1-9 extra metric names a job | never |
//! | `exporter_gap` | 59% | 1-3 nodes send nothing for 1-5 min | always one node at a time |
//! | `exporter_restart` | 55% | 1-2 nodes lose their GPU metrics for 20-90 s, then one scrape reads `gpu_util` = `gpu_util_min` = 0 | always one node |
//! | `missing_rows` | 70% | 0.1-1% of rows lost at random | rows, not nodes |
//! | `clock_skew` | 79% | each node's clock off by N(0, 2 s), within ±8 s (on top of scrape phases up to one interval apart) | job-wide drops reach nodes up to 16 s apart |
//! | `fabric_bursts` | 70% | 0.5-3% of each node's scrapes: `pfc_pause` ×30-500, `cnp` ×10-200 | one node, one scrape |
//! | `leaf_congestion` | 57% | 1-2 episodes of 5-20 min: the job's collectives +10-40% slower; the leaf's nodes show `pfc_pause` ×31-121, `cnp` ×16-61, IB -3-12% | 34% of episodes cover the whole job, 1.6% a single node, the rest a group |
//! | `rack_throttle` | 56% | 1-2 episodes of 5-25 min: a rack's nodes' clocks -5-20%, +10 °C, compute 4-16% slower (they pace the job) | 7.5% of episodes hit a single node of the job: a subtle thermal fault that ends |
//! | `noisy_neighbour` | 57% | 1-3 episodes of 3-15 min on one host: CPU +15-45%, memory +30 GiB, 1-5% slower | always one node |
//!
//! All values carry noise (utilisation 1% + 0.8 points, power 1.2% and a
//! 1% drift per 10 min, IB 3%, disk and switch counters log-normal).
//!
//! # Faults
//!
//! 40% of jobs have exactly one faulty node; 15% of faults are subtle. The
//! rest follow Minder's Table 2 (ECC 38.9, PCIe downgrade 6.6, NIC dropout
//! 5.7, GPU card drop 2.0, NVLink 1.7, AOC/cable 1.1, normalised). Onset is
//! after minute 10 (and after start-up), leaving at least 8 minutes.
//!
//! | kind | on the node | on the job |
//! |---|---|---|
//! | `ecc_error` | 35%: first 5-20 min of correctable storms and row remaps (one GPU 15-25 points below the node's mean, 5-15% slower, XID 63); then XID 48 kills the rank | a straggler while it lasts; then a hang |
//! | `pcie_downgrade` | link at x8: `pcie_tx` -40-65%, IB -20-33%, one GPU 24-33 points low, `pcie_link_width` 8 | collectives 24-39% slower, for good |
//! | `nic_dropout` | 20%: 1-5 min of flaps first; then IB 0 | flaps stall everyone; then a hang |
//! | `gpu_card_drop` | XID 79: the rank dies; in 60% the GPU exporter hangs and the node's GPU metrics stop | a hang |
//! | `nvlink_error` | 50%: 5-15 min with NVLink -30-50% first; 70% end in XID 74 | comm +9-15%; then a hang |
//! | `aoc_cable_error` | 5-25 min of flaps (5-30 s in every 1-4 min: IB -90%, PFC ×50, `nic_errors`) and IB -10-30% between; 60% end with the link down | every flap stalls the job; then a hang |
//! | `thermal_throttle` (subtle) | clocks -8-25%, +10-15 °C, compute 8-25% slower | paced by it, for good |
//! | `slow_host` (subtle) | input pipeline 8-25% slower: CPU +35, its GPUs idle (not spinning) that share | paced by it, for good |
//! | `degraded_link` (subtle) | IB rx -8-25%, tx half that, `nic_errors`, PFC ×5 | collectives 9-33% slower, for good |
//!
//! A hang lasts the NCCL or launcher timeout (90 s, 5, 10, 20 or 30 min),
//! the dead node idle and the rest spinning; then the job exits (55%) or
//! restarts from its checkpoint on the same nodes: an ECC GPU works again
//! after the reset 60% of the time, otherwise the new start hangs in NCCL
//! initialisation for 5 minutes and the job exits. `PlantedFault::onset` is
//! the first visible effect, `halt` the hang.
//!
//! # Scoring
//!
//! A call is right when it names its job's faulty node at or after onset.
//! Calls are counted once per (job, node): a healthy job's called nodes are
//! `healthy_calls`; a faulty job's other nodes, and its faulty node named
//! only before onset, are `wrong_node_calls`. Precision is detected over
//! detected plus false calls; recall is detected over faulty; the delay is
//! from onset to the first right call. The same again for drain-tier calls
//! alone, and per confounder, fault kind and workload.

mod events;
mod faults;
mod layout;
mod model;
mod plan;
mod rng;
mod score;
mod write;

#[cfg(test)]
mod tests;

pub use score::{score, Score, Tally, TierPair};

/// What to generate. Every figure of the traces is drawn from `seed`.
#[derive(Clone, Debug)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// Each job's planned length, drawn in [min_minutes, max_minutes]
    /// (benchmark jobs take the shortest quarter). Keep min at 20 or more:
    /// faults begin after minute 10 and need time to show.
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// The largest job; 256 for the full size, small for debug-mode tests.
    pub max_nodes: usize,
    /// Share of jobs with exactly one faulty node.
    pub faulty_share: f64,
    /// Share of faults that are subtle (a slowdown with no halt).
    pub subtle_share: f64,
    /// Unix seconds of the earliest job start.
    pub start: i64,
}

impl IndependentSpec {
    /// The full size: 38 jobs of 2 to 256 nodes, 30 to 90 minutes.
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            faulty_share: 0.4,
            subtle_share: 0.15,
            start: 1_790_000_000,
        }
    }

    /// A size for debug-mode tests: few, short jobs of at most 8 nodes.
    pub fn small(seed: u64, jobs: usize) -> Self {
        IndependentSpec {
            jobs,
            min_minutes: 20,
            max_minutes: 24,
            max_nodes: 8,
            ..Self::new(seed)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    /// Unix seconds of the fault's first visible effect on its node.
    pub onset: i64,
    pub subtle: bool,
    /// Unix seconds when the job halts (hangs in NCCL), if it does.
    pub halt: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndependentJob {
    pub job: String,
    /// In rank order: the first is rank 0's node.
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    /// The broad confounders this job has (names in the module doc).
    pub confounders: Vec<String>,
    pub workload: String,
    /// Free-text details: layout, checkpoint mode, the fault's course.
    pub details: Vec<String>,
    /// Unix seconds of the job's first and last second.
    pub start: i64,
    pub end: i64,
    pub interval: i64,
}

/// One call of a detector: the node it names in a job, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Writes the whole replay file (header + globally time-sorted rows);
/// returns the truth.
pub fn generate(
    spec: &IndependentSpec,
    out: &mut impl std::io::Write,
) -> std::io::Result<Vec<IndependentJob>> {
    let plans = plan::plan_jobs(spec);
    write::write_rows(&plans, out)?;
    Ok(plans.iter().map(truth).collect())
}

/// The truth `generate` would return, without writing the trace.
pub fn truth_only(spec: &IndependentSpec) -> Vec<IndependentJob> {
    plan::plan_jobs(spec).iter().map(truth).collect()
}

fn truth(job: &plan::JobPlan) -> IndependentJob {
    let mut details = job.details.clone();
    if let Some(mode) = job.events.iter().find_map(|e| match e.ev {
        plan::Ev::Ckpt(mode) => Some(mode),
        _ => None,
    }) {
        details.push(format!("checkpoint {mode:?}"));
    }
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.name().to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: job.start + f.onset,
            subtle: f.kind.subtle(),
            halt: f.halt.map(|h| job.start + h),
        }),
        confounders: job.confounders.iter().map(|c| c.to_string()).collect(),
        workload: job.workload.name().to_string(),
        details,
        start: job.start,
        end: job.start + job.end(),
        interval: job.interval,
    }
}
