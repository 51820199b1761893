//! An eighth, held-out generator of training-job metric traces (issue 45).
//!
//! Written from a brief and public knowledge of real distributed training
//! (PyTorch DDP/FSDP, Megatron TP/PP/DP, DeepSpeed, MoE) without reading the
//! detector or any other generator. It models what a site running long
//! pretraining jobs sees over a week, compressed into 30-90 minute jobs.
//!
//! # Jobs
//! 2 to 256 nodes of 8 GPUs (15% 2-node, 10% 3-node, 20% 4-8, 25% 9-32,
//! 20% 33-128, 10% 129-256). Scrape interval per job: 10/15/30 s for small
//! jobs, 30/60 s for most jobs over 32 nodes; 15% of nodes scrape at a
//! different interval from the rest of their job. About 40% of jobs have
//! exactly one faulty node, onset at least 10 minutes after the start.
//!
//! # Confounders (drawn per job; "apart" = how often it makes ONE node stand apart)
//! * `warmup` (every run, 100%): 2-6 min of init (CPU busy, GPUs idle) then a
//!   ramp; each node ends its ramp up to 90 s later than others. Apart: never
//!   for long (under 90 s).
//! * `checkpoint` (~90%): every 6-15 min, 30-150 s with GPUs near idle; half
//!   the jobs write sharded (every node 1.5-4 GB/s disk), half rank 0 only
//!   (rank 0's node writes while the others wait). Node start/end jitter 0-25 s.
//!   Apart: rank-0-only checkpoints make rank 0's node differ on disk_io and
//!   cpu every cycle.
//! * `eval` (~70%): every 12-25 min, 60-240 s at 55% work and 30% traffic.
//!   Apart: rank 0 only, which gathers the results (util 80% not 70%, CPU +10).
//! * `loader_stall` (~65%): 2-6 job-wide stalls of 20-90 s. Apart: never.
//! * `batch_change` (~60%): from one moment on, work x0.88-1.12 job-wide.
//! * `fs_slowdown` (~60%): a slow shared filesystem, 5-20 min at 20-50% less
//!   work; nodes leave it up to 5 min apart. Apart: during those 5 minutes the
//!   last nodes to recover stand apart.
//! * `pipeline` (~60%): 2-8 stages of uneven size; each stage has its own
//!   util (85-100%), power (80-105%), IB (first/last stage 55-80%), PCIe and
//!   memory levels. Apart: a 1-node stage always stands apart from the rest.
//! * `moe_imbalance` (~60%): 1-3 hot nodes carry 10-30% more IB and 5-10% more
//!   power; the hot set moves every 4-10 min. Apart: always, a moving node.
//! * `rank0_extra` (~85%): rank 0's node runs +18 points of CPU, +60 GiB
//!   memory, logging I/O, 2% less GPU util; with a pipeline, the last rank
//!   (loss and logits) also runs +8 CPU and +5% power. Apart: always.
//! * `node_offset` (~70%): 1-3 nodes 2-5% slower, power +-4-8%, 3-8 C hotter
//!   for life. Apart: always, small.
//! * `node_transient` (~65%): 1-2 healthy nodes a little off for 10-40 min:
//!   a noisy neighbour (CPU +20, util -3-6%), slow local NVMe (disk -60%,
//!   util -2-8%), NIC port renegotiating (IB -30% in 1-3 min bursts, PFC up),
//!   or swapping (memory at the top, CPU +15, util -5-10%). Apart: always.
//! * `rack_heat` (~60%): a hot aisle throttles every node of one rack (8
//!   consecutive nodes): SM clock -8-20%, +8-15 C, power -5-15%, 10-30 min;
//!   the whole job slows with them. Apart: the rack's nodes as a group; a
//!   job with one node in that rack sees exactly one node apart.
//! * `leaf_congestion` (~60%): other tenants under one leaf switch (16
//!   consecutive nodes): IB -10-30%, PFC +200-2000/s, CNP +100-1000/s,
//!   5-20 min. Apart: as `rack_heat`, a group or a single node.
//! * `pfc_bursts` (~70%): 1-3 tick spikes of PFC 500-5000/s and CNP 200-3000/s
//!   on random nodes. Apart: for one scrape, often.
//! * `per_gpu_scale` (~60%): 10-50% of nodes report per-GPU averages of
//!   power, PCIe, NVLink and IB where others report node sums (8x less).
//!   Apart: always, by a constant factor.
//! * `metric_subset` (~60%): 10-30% of nodes lack a family of metrics
//!   (no gpu_util_min/nvlink/clock, or no pfc/cnp, or no pcie/mem_util).
//! * `unknown_metrics` (~80%): gpu_temp, nic_errors, DCGM_FI_PROF_SM_ACTIVE,
//!   node_load1 beside the known vocabulary.
//! * `exporter_gap` (~60%): 1-3 nodes silent for 1-5 min.
//! * `exporter_restart` (~60%): 1-2 nodes silent 15-45 s, then one sample of
//!   zero for every rate metric. Apart: for one scrape.
//! * `missing_rows` (~65%): 0.5-3% of rows dropped at random.
//! * `clock_skew` (~70%): each node's clock off by up to +-5 s.
//! * `restart` (~60%): a software crash (all ranks exit within 20 s), 2-6 min
//!   down, back from the checkpoint with 1-3 nodes replaced by new names
//!   under the same job id (a fatal fault's restart also counts). Apart: never
//!   for long; the new names have no history before the restart.
//!
//! # Faults
//! Minder's Table 2 mix, normalised (ECC 38.9, PCIe downgrade 6.6, NIC
//! dropout 5.7, GPU card drop 2.0, NVLink 1.7, AOC cable 1.1), plus 15% subtle.
//! * `ecc_error`: one GPU's process dies: the node's util_min 0, util 7/8 and
//!   one GPU's power at idle; every other rank spins in NCCL (util ~99%,
//!   power ~25% of TDP, no traffic). A quarter of jobs (an agent tears the
//!   job down) exit 60-120 s later, the rest hang until the NCCL watchdog
//!   (5-20 min). 70% then restart from the checkpoint without the faulty node.
//! * `gpu_card_drop`: as ECC, but the GPU vanishes: util and util_min are
//!   over 7 GPUs (spinning), power and PCIe lose one GPU's share.
//! * `nvlink_error`: the node's NVLink traffic stops and all its ranks exit
//!   (node idle); the rest hang.
//! * `nic_dropout`, `aoc_cable_error`: the node's IB traffic goes to 0, peers
//!   keep a 1-3% trickle and spin. AOC: 5-15 min earlier its nic_errors climb
//!   and its PFC rises while the job loses up to 10%. 30% of these are flaps
//!   of 1-3 min after which the job goes on.
//! * `pcie_downgrade`: the node's PCIe traffic halves, its util_min drops
//!   10-25 points, the whole job slows 15-40% (peers wait: util stays, power
//!   falls).
//! * subtle (no halt, 8-25% slower job): `subtle_gpu_thermal` (heats up over
//!   10-25 min, then SM clock low; half abrupt), `subtle_slow_host` (CPU
//!   saturated, its GPUs idle waiting for input), `subtle_degraded_link`
//!   (its IB lower, PFC and nic_errors up).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{self, Write};

const BASE_TIME: i64 = 1_786_000_000;

const METRICS: [&str; 18] = [
    "cpu_util",
    "mem_used",
    "disk_io",
    "gpu_util",
    "gpu_util_min",
    "gpu_power",
    "gpu_sm_clock",
    "gpu_mem_util",
    "pcie_tx",
    "nvlink_tx",
    "ib_tx",
    "ib_rx",
    "pfc_pause",
    "cnp",
    "gpu_temp",
    "nic_errors",
    "DCGM_FI_PROF_SM_ACTIVE",
    "node_load1",
];
const KNOWN: usize = 14;
/// Metrics that are rates of counters: zero on the first scrape after an exporter restart.
const RATE_METRICS: [usize; 8] = [2, 8, 9, 10, 11, 12, 13, 15];
/// Node-sum metrics that per-GPU exporters report divided by 8.
const SUM_METRICS: [usize; 5] = [5, 8, 9, 10, 11];
const SUBSETS: [&[usize]; 3] = [&[4, 6, 9], &[12, 13], &[7, 8]];

const FAULT_KINDS: [(&str, f64); 6] = [
    ("ecc_error", 38.9),
    ("pcie_downgrade", 6.6),
    ("nic_dropout", 5.7),
    ("gpu_card_drop", 2.0),
    ("nvlink_error", 1.7),
    ("aoc_cable_error", 1.1),
];
const SUBTLE_KINDS: [&str; 3] = [
    "subtle_gpu_thermal",
    "subtle_slow_host",
    "subtle_degraded_link",
];

/// Every confounder name a job can carry.
pub const CONFOUNDERS: [&str; 22] = [
    "warmup",
    "checkpoint",
    "eval",
    "loader_stall",
    "batch_change",
    "fs_slowdown",
    "pipeline",
    "moe_imbalance",
    "rank0_extra",
    "node_offset",
    "node_transient",
    "rack_heat",
    "leaf_congestion",
    "pfc_bursts",
    "per_gpu_scale",
    "metric_subset",
    "unknown_metrics",
    "exporter_gap",
    "exporter_restart",
    "missing_rows",
    "clock_skew",
    "restart",
];

/// The knobs of one generated file.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// Caps the job size (small values for debug-mode tests).
    pub max_nodes: usize,
    pub faulty_share: f64,
    pub subtle_share: f64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            faulty_share: 0.4,
            subtle_share: 0.15,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndependentJob {
    pub job: String,
    /// Every node that ran in the job, replacements after a restart included.
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

// ---------------------------------------------------------------- randomness

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// Approximately standard normal; cheap enough for millions of rows.
    fn normal(&mut self) -> f64 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.732
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A per-(node, event) jitter in [0, spread] that needs no stored state.
fn jitter(salt: u64, node: u32, event: usize, spread: i64) -> i64 {
    if spread <= 0 {
        return 0;
    }
    let h = mix(salt ^ ((node as u64) << 20) ^ (event as u64).wrapping_mul(0x2545_F491));
    (h % (spread as u64 + 1)) as i64
}

// ---------------------------------------------------------------- the plan

#[derive(Clone, Copy, PartialEq)]
enum Transient {
    NoisyNeighbour,
    SlowNvme,
    NicRenegotiate,
    Swapping,
}

struct NodePlan {
    name: String,
    g: u32,
    stage: usize,
    skew: i64,
    interval: i64,
    per_gpu: bool,
    missing: Vec<usize>,
    speed: f64,
    power: f64,
    temp: f64,
    /// The highest rank of the first run: the last pipeline stage's loss and logits.
    last_rank: bool,
    gaps: Vec<(i64, i64)>,
    restarts: Vec<(i64, i64)>,
    transient: Option<(i64, i64, Transient, f64)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Seg {
    Warmup,
    Ckpt,
    Eval,
    Stall,
    FsSlow(f64),
    Batch(f64),
    Congestion(u32, f64),
    RackHeat(u32, f64),
}

struct Run {
    start: i64,
    end: i64,
    /// Indices into the job's nodes; rank order (rank 0 first).
    ranks: Vec<usize>,
}

struct FaultPlan {
    kind: &'static str,
    subtle: bool,
    node: usize,
    onset: i64,
    /// Seconds over which a growing fault reaches its depth.
    ramp: i64,
    depth: f64,
    /// The window in which the job hangs (or the link is down).
    hang: Option<(i64, i64)>,
}

struct Stage {
    util: f64,
    power: f64,
    ib: f64,
    pcie: f64,
    mem: f64,
}

struct JobPlan {
    id: String,
    salt: u64,
    nodes: Vec<NodePlan>,
    runs: Vec<Run>,
    segs: Vec<(i64, i64, Seg)>,
    fault: Option<FaultPlan>,
    confounders: Vec<&'static str>,
    stages: Vec<Stage>,
    sharded_ckpt: bool,
    moe_period: Option<i64>,
    pfc_burst: f64,
    missing_rows: f64,
    unknown: bool,
    tdp: f64,
    ib_base: f64,
}

fn job_size(rng: &mut Rng, cap: usize) -> usize {
    let u = rng.unit();
    let n = if u < 0.15 {
        2
    } else if u < 0.25 {
        3
    } else if u < 0.45 {
        rng.int(4, 8) as usize
    } else if u < 0.70 {
        rng.int(9, 32) as usize
    } else if u < 0.90 {
        rng.int(33, 128) as usize
    } else {
        rng.int(129, 256) as usize
    };
    n.clamp(2, cap.max(2))
}

fn node_name(g: u32) -> String {
    format!("dgx-r{:03}-n{}", g / 8, g % 8 + 1)
}

fn plan_nodes(rng: &mut Rng, n: usize, next_g: &mut u32, interval: i64) -> Vec<NodePlan> {
    *next_g += rng.int(0, 5) as u32;
    (0..n)
        .map(|_| {
            let g = *next_g;
            *next_g += 1;
            new_node(rng, g, interval)
        })
        .collect()
}

fn new_node(rng: &mut Rng, g: u32, interval: i64) -> NodePlan {
    let odd = rng.chance(0.15);
    let interval = if odd {
        [10, 15, 30, 60][rng.int(0, 3) as usize]
    } else {
        interval
    };
    NodePlan {
        name: node_name(g),
        g,
        stage: 0,
        skew: 0,
        interval,
        per_gpu: false,
        missing: Vec::new(),
        speed: 1.0,
        power: 1.0,
        temp: 0.0,
        last_rank: false,
        gaps: Vec::new(),
        restarts: Vec::new(),
        transient: None,
    }
}

fn plan_job(rng: &mut Rng, spec: &IndependentSpec, idx: usize, next_g: &mut u32) -> JobPlan {
    let n = job_size(rng, spec.max_nodes);
    let minutes = rng.int(spec.min_minutes, spec.max_minutes.max(spec.min_minutes));
    let start = BASE_TIME + rng.int(0, 40 * 60);
    let end = start + minutes * 60;
    let interval = if n > 32 {
        [15, 30, 30, 60, 60][rng.int(0, 4) as usize]
    } else {
        [10, 10, 15, 30][rng.int(0, 3) as usize]
    };
    let nodes = plan_nodes(rng, n, next_g, interval);
    let mut job = JobPlan {
        id: format!("{}", 8_450_001 + idx as u64 * 3 + rng.int(0, 2) as u64),
        salt: rng.next_u64(),
        nodes,
        runs: vec![Run {
            start,
            end,
            ranks: (0..n).collect(),
        }],
        segs: Vec::new(),
        fault: None,
        confounders: vec!["warmup"],
        stages: Vec::new(),
        sharded_ckpt: rng.chance(0.5),
        moe_period: None,
        pfc_burst: 0.0,
        missing_rows: 0.0,
        unknown: false,
        tdp: rng.range(640.0, 700.0),
        ib_base: rng.range(12e9, 22e9),
    };
    plan_layout(rng, &mut job);
    plan_software_restart(rng, &mut job, next_g, interval);
    if rng.chance(spec.faulty_share) {
        plan_fault(rng, spec, &mut job, next_g, interval);
    }
    plan_phases(rng, &mut job);
    plan_node_quirks(rng, &mut job);
    plan_exporters(rng, &mut job);
    job
}

fn plan_layout(rng: &mut Rng, job: &mut JobPlan) {
    let n = job.nodes.len();
    let mut stages = 1;
    if rng.chance(0.62) {
        stages = [2, 2, 3, 4, 4, 6, 8][rng.int(0, 6) as usize].min(n);
        job.confounders.push("pipeline");
    }
    // Uneven stage sizes: random cut points.
    let mut cuts: Vec<usize> = (1..n).collect();
    for i in 0..cuts.len() {
        let j = rng.int(i as i64, cuts.len() as i64 - 1) as usize;
        cuts.swap(i, j);
    }
    let mut cuts: Vec<usize> = cuts.into_iter().take(stages - 1).collect();
    cuts.sort_unstable();
    for (i, node) in job.nodes.iter_mut().enumerate() {
        node.stage = cuts.iter().filter(|&&c| c <= i).count();
        node.last_rank = i + 1 == n;
    }
    for s in 0..stages {
        let edge = stages > 1 && (s == 0 || s == stages - 1);
        job.stages.push(Stage {
            util: if stages > 1 {
                rng.range(0.85, 1.0)
            } else {
                1.0
            },
            power: if stages > 1 {
                rng.range(0.8, 1.05)
            } else {
                1.0
            },
            ib: if edge { rng.range(0.55, 0.8) } else { 1.0 },
            pcie: if stages > 1 { rng.range(0.7, 1.2) } else { 1.0 },
            mem: if stages > 1 { rng.range(0.8, 1.2) } else { 1.0 },
        });
    }
    if rng.chance(0.6) {
        job.moe_period = Some(rng.int(240, 600));
        job.confounders.push("moe_imbalance");
    }
}

fn plan_software_restart(rng: &mut Rng, job: &mut JobPlan, next_g: &mut u32, interval: i64) {
    let (start, end) = (job.runs[0].start, job.runs[0].end);
    if end - start < 40 * 60 || !rng.chance(0.72) {
        return;
    }
    let crash = rng.int(start + 14 * 60, end - 22 * 60);
    let back = crash + rng.int(120, 360);
    let mut ranks = job.runs[0].ranks.clone();
    job.runs[0].end = crash;
    for _ in 0..rng.int(1, 3).min(ranks.len() as i64) {
        let slot = rng.int(1, ranks.len() as i64 - 1).max(0) as usize;
        // Spares come from the same pool, so every name stays unique in the file.
        *next_g += rng.int(0, 3) as u32;
        job.nodes.push(new_node(rng, *next_g, interval));
        *next_g += 1;
        let stage = job.nodes[ranks[slot]].stage;
        let last = job.nodes.len() - 1;
        job.nodes[last].stage = stage;
        ranks[slot] = last;
    }
    job.runs.push(Run {
        start: back,
        end,
        ranks,
    });
    job.confounders.push("restart");
}

fn pick_kind(rng: &mut Rng, subtle_share: f64) -> (&'static str, bool) {
    if rng.chance(subtle_share) {
        return (SUBTLE_KINDS[rng.int(0, 2) as usize], true);
    }
    let total: f64 = FAULT_KINDS.iter().map(|k| k.1).sum();
    let mut u = rng.range(0.0, total);
    for (kind, w) in FAULT_KINDS {
        if u < w {
            return (kind, false);
        }
        u -= w;
    }
    (FAULT_KINDS[0].0, false)
}

fn plan_fault(
    rng: &mut Rng,
    spec: &IndependentSpec,
    job: &mut JobPlan,
    next_g: &mut u32,
    interval: i64,
) {
    let (kind, subtle) = pick_kind(rng, spec.subtle_share);
    let job_start = job.runs[0].start;
    // A run long enough to hold an onset 5 min after its start, 10 min after the job's, 8 before its end.
    let choices: Vec<usize> = (0..job.runs.len())
        .filter(|&r| {
            let lo = (job.runs[r].start + 300).max(job_start + 600);
            job.runs[r].end - 480 > lo
        })
        .collect();
    let Some(&r) = choices.get(rng.int(0, choices.len().max(1) as i64 - 1) as usize) else {
        return;
    };
    let lo = (job.runs[r].start + 300).max(job_start + 600);
    let onset = rng.int(lo, job.runs[r].end - 480);
    let node = job.runs[r].ranks[rng.int(0, job.runs[r].ranks.len() as i64 - 1) as usize];
    let mut fault = FaultPlan {
        kind,
        subtle,
        node,
        onset,
        ramp: 0,
        depth: 0.0,
        hang: None,
    };
    shape_fault(rng, &mut fault);
    if let Some((h0, h1)) = fault.hang {
        let flap = matches!(kind, "nic_dropout" | "aoc_cable_error") && h1 - h0 <= 180;
        if !flap {
            end_run_after_fault(rng, job, r, h0, h1, node, next_g, interval);
        }
    }
    job.fault = Some(fault);
}

fn shape_fault(rng: &mut Rng, f: &mut FaultPlan) {
    // A quarter of jobs run under an agent that tears the job down soon after
    // a rank dies; the rest hang in NCCL until the watchdog fires.
    let watchdog = if rng.chance(0.25) {
        rng.int(60, 120)
    } else {
        rng.int(300, 1200)
    };
    match f.kind {
        "ecc_error" | "gpu_card_drop" | "nvlink_error" => {
            f.hang = Some((f.onset, f.onset + watchdog))
        }
        "nic_dropout" | "aoc_cable_error" => {
            let precursor = if f.kind == "aoc_cable_error" {
                rng.int(300, 900)
            } else {
                0
            };
            f.ramp = precursor;
            f.depth = rng.range(0.03, 0.10);
            let down = f.onset + precursor;
            let len = if rng.chance(0.3) {
                rng.int(60, 180)
            } else {
                watchdog.max(200)
            };
            f.hang = Some((down, down + len));
        }
        "pcie_downgrade" => f.depth = rng.range(0.15, 0.4),
        "subtle_gpu_thermal" => {
            f.depth = rng.range(0.08, 0.25);
            if rng.chance(0.5) {
                f.ramp = rng.int(600, 1500);
            }
        }
        _ => f.depth = rng.range(0.08, 0.25),
    }
}

#[allow(clippy::too_many_arguments)]
fn end_run_after_fault(
    rng: &mut Rng,
    job: &mut JobPlan,
    r: usize,
    h0: i64,
    h1: i64,
    faulty: usize,
    next_g: &mut u32,
    interval: i64,
) {
    let job_end = job.runs.last().map(|x| x.end).unwrap_or(h1);
    let mut ranks = job.runs[r].ranks.clone();
    job.runs.truncate(r + 1);
    job.confounders.retain(|&c| c != "restart");
    job.runs[r].end = h1.min(job_end).max(h0 + 30);
    let back = job.runs[r].end + rng.int(180, 480);
    if back + 600 < job_end && rng.chance(0.7) {
        // Spares come from the same pool, so every name stays unique in the file.
        *next_g += rng.int(0, 3) as u32;
        job.nodes.push(new_node(rng, *next_g, interval));
        *next_g += 1;
        let last = job.nodes.len() - 1;
        job.nodes[last].stage = job.nodes[faulty].stage;
        for x in ranks.iter_mut() {
            if *x == faulty {
                *x = last;
            }
        }
        job.runs.push(Run {
            start: back,
            end: job_end,
            ranks,
        });
    }
    if job.runs.len() > 1 {
        job.confounders.push("restart");
    }
}

fn plan_phases(rng: &mut Rng, job: &mut JobPlan) {
    let runs: Vec<(i64, i64)> = job.runs.iter().map(|r| (r.start, r.end)).collect();
    let ckpt = rng.chance(0.9);
    let eval = rng.chance(0.7);
    for &(s, e) in &runs {
        job.segs.push((s, s + rng.int(120, 360), Seg::Warmup));
        if ckpt {
            let mut t = s + rng.int(360, 900);
            while t + 200 < e {
                job.segs.push((t, t + rng.int(30, 150), Seg::Ckpt));
                t += rng.int(360, 900);
            }
        }
        if eval {
            let mut t = s + rng.int(720, 1500);
            while t + 300 < e {
                job.segs.push((t, t + rng.int(60, 240), Seg::Eval));
                t += rng.int(720, 1500);
            }
        }
    }
    let (s, e) = (runs[0].0, runs[runs.len() - 1].1);
    let span = |rng: &mut Rng, lo: i64, hi: i64| {
        let t = rng.int(s + 360, (e - hi).max(s + 361));
        (t, t + rng.int(lo, hi))
    };
    if ckpt {
        job.confounders.push("checkpoint");
    }
    if eval {
        job.confounders.push("eval");
    }
    if rng.chance(0.65) {
        for _ in 0..rng.int(2, 6) {
            let (a, b) = span(rng, 20, 90);
            job.segs.push((a, b, Seg::Stall));
        }
        job.confounders.push("loader_stall");
    }
    if rng.chance(0.6) {
        let t = rng.int(s + 600, e - 300);
        job.segs.push((t, e, Seg::Batch(rng.range(0.88, 1.12))));
        job.confounders.push("batch_change");
    }
    if rng.chance(0.6) {
        let (a, b) = span(rng, 300, 1200);
        job.segs.push((a, b, Seg::FsSlow(rng.range(0.2, 0.5))));
        job.confounders.push("fs_slowdown");
    }
    plan_fabric(rng, job, s, e);
}

fn plan_fabric(rng: &mut Rng, job: &mut JobPlan, s: i64, e: i64) {
    let pick =
        |rng: &mut Rng, job: &JobPlan| job.nodes[rng.int(0, job.nodes.len() as i64 - 1) as usize].g;
    if rng.chance(0.6) {
        let rack = pick(rng, job) / 8;
        let t = rng.int(s + 300, (e - 600).max(s + 301));
        let d = rng.range(0.08, 0.2);
        job.segs
            .push((t, t + rng.int(600, 1800), Seg::RackHeat(rack, d)));
        job.confounders.push("rack_heat");
    }
    if rng.chance(0.6) {
        let leaf = pick(rng, job) / 16;
        let t = rng.int(s + 300, (e - 300).max(s + 301));
        let d = rng.range(0.1, 0.3);
        job.segs
            .push((t, t + rng.int(300, 1200), Seg::Congestion(leaf, d)));
        job.confounders.push("leaf_congestion");
    }
    if rng.chance(0.7) {
        job.pfc_burst = rng.range(0.002, 0.01);
        job.confounders.push("pfc_bursts");
    }
}

fn plan_node_quirks(rng: &mut Rng, job: &mut JobPlan) {
    let n = job.nodes.len();
    let (s, e) = (job.runs[0].start, job.runs[job.runs.len() - 1].end);
    job.confounders.push("rank0_extra");
    if !rng.chance(0.85) {
        job.confounders.pop();
    }
    if rng.chance(0.7) {
        for _ in 0..rng.int(1, 3) {
            let node = &mut job.nodes[rng.int(0, n as i64 - 1) as usize];
            node.speed = rng.range(0.95, 0.98);
            node.power = 1.0 + rng.range(0.04, 0.08) * if rng.chance(0.5) { 1.0 } else { -1.0 };
            node.temp = rng.range(3.0, 8.0);
        }
        job.confounders.push("node_offset");
    }
    if rng.chance(0.65) {
        for _ in 0..rng.int(1, 2) {
            let kind = [
                Transient::NoisyNeighbour,
                Transient::SlowNvme,
                Transient::NicRenegotiate,
                Transient::Swapping,
            ][rng.int(0, 3) as usize];
            let t = rng.int(s + 300, (e - 600).max(s + 301));
            let node = &mut job.nodes[rng.int(0, n as i64 - 1) as usize];
            node.transient = Some((t, t + rng.int(600, 2400), kind, rng.range(0.3, 1.0)));
        }
        job.confounders.push("node_transient");
    }
}

fn plan_exporters(rng: &mut Rng, job: &mut JobPlan) {
    let n = job.nodes.len() as i64;
    let (s, e) = (job.runs[0].start, job.runs[job.runs.len() - 1].end);
    let flag = |rng: &mut Rng, p: f64, name: &'static str, job: &mut JobPlan| {
        let on = rng.chance(p);
        if on {
            job.confounders.push(name);
        }
        on
    };
    if flag(rng, 0.6, "per_gpu_scale", job) {
        let share = rng.range(0.1, 0.5);
        for node in job.nodes.iter_mut() {
            node.per_gpu = rng.chance(share);
        }
        job.nodes[rng.int(0, n - 1) as usize].per_gpu = true;
    }
    if flag(rng, 0.6, "metric_subset", job) {
        let share = rng.range(0.1, 0.3);
        let sure = rng.int(0, n - 1) as usize;
        for (i, node) in job.nodes.iter_mut().enumerate() {
            if i == sure || rng.chance(share) {
                node.missing = SUBSETS[rng.int(0, 2) as usize].to_vec();
            }
        }
    }
    job.unknown = flag(rng, 0.8, "unknown_metrics", job);
    if flag(rng, 0.6, "exporter_gap", job) {
        for _ in 0..rng.int(1, 3) {
            let t = rng.int(s + 120, (e - 400).max(s + 121));
            job.nodes[rng.int(0, n - 1) as usize]
                .gaps
                .push((t, t + rng.int(60, 300)));
        }
    }
    if flag(rng, 0.6, "exporter_restart", job) {
        for _ in 0..rng.int(1, 2) {
            let t = rng.int(s + 120, (e - 200).max(s + 121));
            job.nodes[rng.int(0, n - 1) as usize]
                .restarts
                .push((t, t + rng.int(15, 45)));
        }
    }
    if flag(rng, 0.65, "missing_rows", job) {
        job.missing_rows = rng.range(0.005, 0.03);
    }
    if flag(rng, 0.7, "clock_skew", job) {
        for node in job.nodes.iter_mut() {
            node.skew = rng.int(-5, 5);
        }
    }
}

// ---------------------------------------------------------------- the load model

/// What a node is doing at one moment, before the exporter reads it.
struct Load {
    busy: f64,
    work: f64,
    comm: f64,
    clock: f64,
    temp: f64,
    power: f64,
    cpu: f64,
    mem: f64,
    disk: f64,
    ib: f64,
    pcie: f64,
    pfc: f64,
    cnp: f64,
    nic_err: f64,
    util_gap: f64,
    dead: f64,
    gone: f64,
    hung: bool,
}

impl Load {
    fn training() -> Self {
        Load {
            busy: 0.97,
            work: 1.0,
            comm: 1.0,
            clock: 1.0,
            temp: 0.0,
            power: 1.0,
            cpu: 0.0,
            mem: 0.0,
            disk: 1.0,
            ib: 1.0,
            pcie: 1.0,
            pfc: 0.0,
            cnp: 0.0,
            nic_err: 0.0,
            util_gap: 0.0,
            dead: 0.0,
            gone: 0.0,
            hung: false,
        }
    }
}

/// Job-wide phases as this node lives them (each node enters and leaves a little apart).
fn apply_phases(job: &JobPlan, node: &NodePlan, rank: usize, t: i64, l: &mut Load) {
    for (i, &(s, e, seg)) in job.segs.iter().enumerate() {
        let (lag_in, lag_out) = match seg {
            Seg::Warmup => (0, 90),
            Seg::FsSlow(_) => (jitter(job.salt, node.g, i, 20), 300),
            Seg::Ckpt | Seg::Eval | Seg::Stall => (25, 25),
            _ => (0, 0),
        };
        let s = s + jitter(job.salt, node.g, i, lag_in);
        let e = e + jitter(job.salt ^ 1, node.g, i, lag_out);
        if t < s || t >= e {
            continue;
        }
        let p = (t - s) as f64 / (e - s).max(1) as f64;
        match seg {
            Seg::Warmup if p < 0.35 => {
                l.busy = 0.02;
                l.work = 0.0;
                l.comm = 0.02;
                l.cpu += 35.0;
                l.disk = 3.0;
            }
            Seg::Warmup => {
                let r = (p - 0.35) / 0.65;
                l.busy *= 0.3 + 0.7 * r;
                l.work *= 0.2 + 0.8 * r;
                l.comm *= r;
            }
            Seg::Ckpt => {
                l.busy = 0.04;
                l.work = 0.02;
                l.comm = 0.01;
                if job.sharded_ckpt || rank == 0 {
                    l.disk = 60.0;
                    l.cpu += 25.0;
                }
            }
            Seg::Eval => {
                // Rank 0 gathers and logs the eval metrics.
                l.busy *= if rank == 0 { 0.8 } else { 0.7 };
                l.cpu += if rank == 0 { 10.0 } else { 0.0 };
                l.work *= 0.55;
                l.comm *= 0.3;
            }
            Seg::Stall => {
                l.busy = 0.06;
                l.work = 0.04;
                l.comm = 0.03;
                l.cpu += 30.0;
                l.disk = 4.0;
            }
            Seg::FsSlow(d) => {
                l.busy *= 1.0 - 0.8 * d;
                l.work *= 1.0 - d;
                l.comm *= 1.0 - d;
                l.disk *= 0.3;
            }
            Seg::Batch(f) => {
                l.work *= f;
                l.comm *= 2.0 - f;
            }
            Seg::Congestion(..) | Seg::RackHeat(..) => {}
        }
    }
}

/// Fabric and facility events: the nodes under them change, and the job slows with them.
fn apply_fabric(job: &JobPlan, node: &NodePlan, t: i64, l: &mut Load) {
    for &(s, e, seg) in &job.segs {
        if t < s || t >= e {
            continue;
        }
        match seg {
            Seg::RackHeat(rack, d) => {
                l.work *= 1.0 - d;
                l.comm *= 1.0 - d;
                if node.g / 8 == rack {
                    l.clock *= 1.0 - d;
                    l.temp += 8.0 + 40.0 * d;
                    l.power *= 1.0 - 0.7 * d;
                    l.busy = l.busy.clamp(0.9, 0.99);
                }
            }
            Seg::Congestion(leaf, d) => {
                l.work *= 1.0 - 0.5 * d;
                l.comm *= 1.0 - 0.5 * d;
                if node.g / 16 == leaf {
                    l.ib *= 1.0 - d;
                    l.pfc += 200.0 + 6000.0 * d;
                    l.cnp += 100.0 + 3000.0 * d;
                }
            }
            _ => {}
        }
    }
}

/// The node's own structure and habits: stage, rank 0, lifetime offsets, MoE, transients.
fn apply_node(job: &JobPlan, node: &NodePlan, rank: usize, t: i64, l: &mut Load) {
    let st = &job.stages[node.stage.min(job.stages.len() - 1)];
    l.busy *= st.util;
    l.power *= st.power * node.power;
    l.ib *= st.ib;
    l.pcie *= st.pcie;
    l.mem += 100.0 * (st.mem - 1.0);
    l.work *= node.speed;
    l.temp += node.temp;
    let extra = job.confounders.contains(&"rank0_extra");
    if extra && job.stages.len() > 1 && node.stage == job.stages.len() - 1 && node.last_rank {
        l.cpu += 8.0;
        l.power *= 1.05;
    }
    if rank == 0 && extra {
        l.cpu += 18.0;
        l.mem += 60.0;
        l.disk += 2.0;
        l.busy *= 0.98;
    }
    if let Some(period) = job.moe_period {
        let epoch = ((t - BASE_TIME) / period) as usize;
        let hot = jitter(job.salt ^ 7, 0, epoch, job.nodes.len() as i64 - 1) as usize;
        if job.nodes[hot].g == node.g {
            l.ib *= 1.2;
            l.power *= 1.07;
        }
    }
    if let Some((s, e, kind, d)) = node.transient {
        if t >= s && t < e {
            apply_transient(kind, d, t, l);
        }
    }
}

fn apply_transient(kind: Transient, d: f64, t: i64, l: &mut Load) {
    match kind {
        Transient::NoisyNeighbour => {
            l.cpu += 20.0 * d;
            l.busy *= 1.0 - 0.06 * d;
        }
        Transient::SlowNvme => {
            l.disk *= 0.4;
            l.busy *= 1.0 - 0.08 * d;
            l.cpu += 8.0;
        }
        Transient::NicRenegotiate => {
            if (t / 60) % 4 == 0 {
                l.ib *= 0.7;
                l.pfc += 300.0 * d;
            }
        }
        Transient::Swapping => {
            l.mem += 400.0;
            l.cpu += 15.0 * d;
            l.busy *= 1.0 - 0.1 * d;
        }
    }
}

fn grown(f: &FaultPlan, t: i64) -> f64 {
    if f.ramp <= 0 {
        1.0
    } else {
        ((t - f.onset) as f64 / f.ramp as f64).clamp(0.0, 1.0)
    }
}

/// What the fault does to its node and to the rest of the job.
fn apply_fault(job: &JobPlan, node_idx: usize, t: i64, l: &mut Load) {
    let Some(f) = &job.fault else { return };
    if t < f.onset {
        return;
    }
    let me = node_idx == f.node;
    if let Some((h0, h1)) = f.hang {
        if t >= h0 && t < h1 {
            hang(f.kind, me, l);
            return;
        }
        if t >= h1 && !matches!(f.kind, "nic_dropout" | "aoc_cable_error") {
            return;
        }
    }
    let g = grown(f, t);
    let d = f.depth * g;
    l.work *= 1.0 - d;
    l.comm *= 1.0 - d;
    if !me {
        return;
    }
    match f.kind {
        "pcie_downgrade" => {
            l.pcie *= 0.5;
            l.util_gap += 10.0 + 40.0 * f.depth;
        }
        "subtle_gpu_thermal" => {
            l.temp += 15.0 * g + if g >= 1.0 { 5.0 } else { 0.0 };
            l.clock *= 1.0 - d;
            l.power *= 1.0 - 0.8 * d;
            l.busy = l.busy.max(0.98);
        }
        "subtle_slow_host" => {
            l.cpu += 40.0;
            l.busy *= 1.0 - d;
            l.power *= 1.0 - 0.5 * d;
        }
        "subtle_degraded_link" => {
            l.ib *= 1.0 - 0.5 * f.depth;
            l.pfc += 150.0 + 1500.0 * f.depth;
            l.nic_err += 5.0 + 50.0 * f.depth;
        }
        "nic_dropout" | "aoc_cable_error" if t < f.onset + f.ramp => {
            l.nic_err += 2.0 + 400.0 * g * g;
            l.pfc += 50.0 + 800.0 * g;
        }
        _ => {}
    }
}

fn hang(kind: &str, me: bool, l: &mut Load) {
    l.hung = true;
    l.work = 0.02;
    l.comm = 0.02;
    l.pcie = 0.05;
    if !me {
        return;
    }
    match kind {
        "ecc_error" => l.dead = 1.0,
        "gpu_card_drop" => l.gone = 1.0,
        "nvlink_error" => l.dead = 8.0,
        _ => {
            l.ib = 0.0;
            l.nic_err += 500.0;
        }
    }
}

fn load_at(job: &JobPlan, node_idx: usize, rank: usize, t: i64) -> Load {
    let node = &job.nodes[node_idx];
    let mut l = Load::training();
    apply_phases(job, node, rank, t, &mut l);
    apply_fabric(job, node, t, &mut l);
    apply_node(job, node, rank, t, &mut l);
    apply_fault(job, node_idx, t, &mut l);
    l
}

// ---------------------------------------------------------------- the exporter

fn values(job: &JobPlan, l: &Load, rng: &mut Rng) -> [f64; 18] {
    let visible = 8.0 - l.gone;
    let alive = (visible - l.dead).max(0.0);
    let b = if l.hung { 0.99 } else { l.busy.clamp(0.0, 1.0) };
    let n = |rng: &mut Rng, s: f64| 1.0 + s * rng.normal();
    let util = 100.0 * b * alive / visible * n(rng, 0.01);
    let util_min = if l.dead > 0.0 {
        0.0
    } else {
        (util - 1.5 - l.util_gap - 3.0 * rng.unit()).max(0.0)
    };
    let idle = 70.0;
    let active = (0.72 * l.work * l.clock + 0.18 * b).min(1.1);
    let per_gpu = (idle + (job.tdp - idle) * active * l.power) * n(rng, 0.02);
    let power = per_gpu * alive + idle * (visible - alive);
    let clock = if b > 0.2 { 1980.0 * l.clock } else { 1410.0 } + 8.0 * rng.normal();
    let share = alive / 8.0;
    let comm = l.comm.max(0.0);
    let ib = job.ib_base * comm * l.ib * n(rng, 0.03);
    let burst = rng.chance(job.pfc_burst);
    let pfc = l.pfc + 3.0 * rng.unit() + if burst { rng.range(500.0, 5000.0) } else { 0.0 };
    let cnp = l.cnp + 20.0 * rng.unit() + if burst { rng.range(200.0, 3000.0) } else { 0.0 };
    [
        (14.0 + 10.0 * b + l.cpu).min(100.0) * n(rng, 0.04),
        (720.0 + l.mem) * n(rng, 0.002),
        60e6 * l.disk * n(rng, 0.2),
        util.min(100.0),
        util_min.min(100.0),
        power,
        clock,
        (58.0 * l.work.max(0.0) * share) * n(rng, 0.03),
        8.0 * 5e9 * l.pcie * l.work.max(0.02) * share * n(rng, 0.04),
        8.0 * 60e9 * comm * share * n(rng, 0.03),
        ib,
        ib * n(rng, 0.02),
        pfc,
        cnp,
        38.0 + 32.0 * active + l.temp + rng.normal(),
        l.nic_err * n(rng, 0.2).max(0.0),
        0.82 * l.work.max(0.0) * share * n(rng, 0.02),
        (30.0 + 40.0 * b + l.cpu) * n(rng, 0.05),
    ]
}

/// One sample: packed sort key (time, node, metric) and its value.
struct Row {
    key: u64,
    value: f64,
}

fn in_any(windows: &[(i64, i64)], t: i64) -> bool {
    windows.iter().any(|&(a, b)| t >= a && t < b)
}

fn emit_job(job: &JobPlan, rng: &mut Rng, rows: &mut Vec<Row>) {
    for run in &job.runs {
        let tail = rng.int(0, 60);
        for (rank, &ni) in run.ranks.iter().enumerate() {
            let node = &job.nodes[ni];
            let mut t = run.start + jitter(job.salt ^ 3, node.g, 0, node.interval - 1);
            let mut after_restart = false;
            while t < run.end + tail {
                let in_restart = in_any(&node.restarts, t);
                if in_any(&node.gaps, t) || in_restart {
                    after_restart |= in_restart;
                    t += node.interval;
                    continue;
                }
                let l = if t >= run.end {
                    let mut idle = Load::training();
                    (idle.busy, idle.work, idle.comm, idle.disk) = (0.0, 0.0, 0.0, 0.1);
                    idle
                } else {
                    load_at(job, ni, rank, t)
                };
                let mut v = values(job, &l, rng);
                if after_restart {
                    RATE_METRICS.iter().for_each(|&m| v[m] = 0.0);
                    after_restart = false;
                }
                if node.per_gpu {
                    SUM_METRICS.iter().for_each(|&m| v[m] /= 8.0);
                }
                let stamp = t + node.skew;
                let count = if job.unknown { v.len() } else { KNOWN };
                for (m, &value) in v.iter().enumerate().take(count) {
                    if node.missing.contains(&m) || rng.chance(job.missing_rows) {
                        continue;
                    }
                    let key = (((stamp - BASE_TIME + 3600) as u64) << 32)
                        | ((node.g as u64) << 8)
                        | m as u64;
                    rows.push(Row { key, value });
                }
                t += node.interval;
            }
        }
    }
}

fn write_value(buf: &mut Vec<u8>, v: f64) {
    let v = if v.is_finite() { v } else { 0.0 };
    if v.abs() >= 1000.0 {
        let _ = write!(buf, "{}", v.round() as i64);
    } else {
        let milli = (v * 1000.0).round() as i64;
        let sign = if milli < 0 { "-" } else { "" };
        let _ = write!(
            buf,
            "{}{}.{:03}",
            sign,
            milli.abs() / 1000,
            milli.abs() % 1000
        );
    }
}

fn plan_all(spec: &IndependentSpec) -> Vec<JobPlan> {
    let mut rng = Rng::new(spec.seed);
    let mut next_g = (rng.int(0, 400) * 8) as u32;
    (0..spec.jobs)
        .map(|i| plan_job(&mut rng, spec, i, &mut next_g))
        .collect()
}

/// The truth `generate` would return for this spec, without writing any rows.
pub fn truth_of(spec: &IndependentSpec) -> Vec<IndependentJob> {
    plan_all(spec).iter().map(truth).collect()
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let plans = plan_all(spec);
    let mut rows = Vec::new();
    for (j, job) in plans.iter().enumerate() {
        let mut job_rng = Rng::new(spec.seed ^ mix(j as u64 + 1));
        emit_job(job, &mut job_rng, &mut rows);
    }
    rows.sort_unstable_by_key(|r| r.key);
    let names: BTreeMap<u32, (&str, &str)> = plans
        .iter()
        .flat_map(|j| {
            j.nodes
                .iter()
                .map(move |n| (n.g, (j.id.as_str(), n.name.as_str())))
        })
        .collect();
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for row in &rows {
        let t = (row.key >> 32) as i64 + BASE_TIME - 3600;
        let g = ((row.key >> 8) & 0xFF_FFFF) as u32;
        let (job, node) = names[&g];
        let _ = write!(
            buf,
            "{},{},{},{},",
            t,
            job,
            node,
            METRICS[(row.key & 0xFF) as usize]
        );
        write_value(&mut buf, row.value);
        buf.push(b'\n');
        if buf.len() > (1 << 20) {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(plans.iter().map(truth).collect())
}

fn truth(job: &JobPlan) -> IndependentJob {
    IndependentJob {
        job: job.id.clone(),
        nodes: (0..job.nodes.len())
            .filter(|i| job.runs.iter().any(|r| r.ranks.contains(i)))
            .map(|i| job.nodes[i].name.clone())
            .collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: f.onset,
            subtle: f.subtle,
        }),
        confounders: job.confounders.iter().map(|c| c.to_string()).collect(),
    }
}

// ---------------------------------------------------------------- the scorer

/// One call of the detector.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Counts over a set of jobs. Calls are counted once per (job, node).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    /// Distinct nodes called in healthy jobs.
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    /// Distinct nodes called in faulty jobs that are not the faulty node at or after onset.
    pub wrong_node_calls: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls
    }
    /// Right calls over all calls; 1.0 when nothing was called.
    pub fn precision(&self) -> f64 {
        let all = self.detected + self.false_calls();
        if all == 0 {
            1.0
        } else {
            self.detected as f64 / all as f64
        }
    }
    /// Detected faulty jobs over faulty jobs; 1.0 when there were none.
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.detected as f64 / self.faulty as f64
        }
    }
    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        d.get(d.len().wrapping_sub(1) / 2)
            .copied()
            .filter(|_| !d.is_empty())
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
    /// Calls naming a job that is not in the truth.
    pub unknown_job_calls: usize,
}

impl Score {
    /// Drain-tier calls on healthy jobs: the figure that must be zero.
    pub fn healthy_jobs_drained(&self) -> usize {
        self.total.drain.healthy_jobs_called
    }
}

fn tally_job(job: &IndependentJob, calls: &[&Call], t: &mut Tally) {
    let mut right_at: Option<i64> = None;
    let mut wrong: BTreeSet<&str> = BTreeSet::new();
    for c in calls {
        let right = job
            .fault
            .as_ref()
            .is_some_and(|f| f.node == c.node && c.detected_at >= f.onset);
        if right {
            right_at = Some(right_at.map_or(c.detected_at, |a| a.min(c.detected_at)));
        } else {
            wrong.insert(c.node.as_str());
        }
    }
    // A faulty node called only before its onset is a wrong call; once it is also
    // called after onset, the early call is forgiven (it names the right machine).
    if right_at.is_some() {
        if let Some(f) = &job.fault {
            wrong.remove(f.node.as_str());
        }
    }
    t.jobs += 1;
    match &job.fault {
        None => {
            t.healthy_calls += wrong.len();
            t.healthy_jobs_called += usize::from(!wrong.is_empty());
        }
        Some(f) => {
            t.faulty += 1;
            t.wrong_node_calls += wrong.len();
            if let Some(at) = right_at {
                t.detected += 1;
                t.delays.push(at - f.onset);
            }
        }
    }
}

fn tier_of(job: &IndependentJob, calls: &[&Call], pair: &mut TierPair) {
    tally_job(job, calls, &mut pair.all);
    let drains: Vec<&Call> = calls.iter().copied().filter(|c| c.drain).collect();
    tally_job(job, &drains, &mut pair.drain);
}

/// Scores calls against the truth: a call is right when it names the faulty
/// node of its job at or after onset.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    let mut s = Score::default();
    for c in calls {
        if known.contains(c.job.as_str()) {
            by_job.entry(c.job.as_str()).or_default().push(c);
        } else {
            s.unknown_job_calls += 1;
        }
    }
    for job in jobs {
        let mine = by_job
            .get(job.job.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        tier_of(job, mine, &mut s.total);
        for c in &job.confounders {
            tier_of(job, mine, s.by_confounder.entry(c.clone()).or_default());
        }
        let kind = job.fault.as_ref().map_or("healthy", |f| f.kind.as_str());
        tier_of(job, mine, s.by_kind.entry(kind.to_string()).or_default());
    }
    s
}

fn table_row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    let delay = t
        .median_delay()
        .map_or("-".to_string(), |d| format!("{d} s"));
    writeln!(
        f,
        "| {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} |",
        name,
        t.jobs,
        t.faulty,
        t.precision(),
        t.recall(),
        delay,
        t.healthy_jobs_called,
        t.healthy_calls,
        t.wrong_node_calls
    )
}

fn table(f: &mut fmt::Formatter<'_>, title: &str, rows: &[(&str, &Tally)]) -> fmt::Result {
    writeln!(f, "\n### {title}\n")?;
    writeln!(f, "| set | jobs | faulty | precision | recall | median delay | healthy jobs called | healthy calls | wrong-node calls |")?;
    writeln!(f, "|---|---|---|---|---|---|---|---|---|")?;
    rows.iter().try_for_each(|(n, t)| table_row(f, n, t))
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for drain in [false, true] {
            fn pick(p: &TierPair, drain: bool) -> &Tally {
                if drain {
                    &p.drain
                } else {
                    &p.all
                }
            }
            let tier = if drain { "drain tier" } else { "all calls" };
            let mut rows = vec![("total", pick(&self.total, drain))];
            table(f, &format!("Total, {tier}"), &rows)?;
            rows = self
                .by_confounder
                .iter()
                .map(|(k, p)| (k.as_str(), pick(p, drain)))
                .collect();
            table(f, &format!("By confounder, {tier}"), &rows)?;
            rows = self
                .by_kind
                .iter()
                .map(|(k, p)| (k.as_str(), pick(p, drain)))
                .collect();
            table(f, &format!("By fault kind, {tier}"), &rows)?;
        }
        if self.unknown_job_calls > 0 {
            writeln!(
                f,
                "\n{} calls named jobs not in the truth.",
                self.unknown_job_calls
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> IndependentSpec {
        IndependentSpec {
            jobs: 8,
            max_nodes: 6,
            min_minutes: 30,
            max_minutes: 40,
            ..IndependentSpec::new(seed)
        }
    }

    fn bytes(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
        let mut out = Vec::new();
        let truth = generate(spec, &mut out).unwrap();
        (out, truth)
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
        let (a, ta) = bytes(&small(11));
        let (b, tb) = bytes(&small(11));
        let (c, _) = bytes(&small(12));
        assert!(a.len() > 10_000);
        assert_eq!(a, b);
        assert_eq!(ta, tb);
        assert_ne!(a, c);
        assert_eq!(ta, truth_of(&small(11)));
    }

    #[test]
    fn rows_are_time_sorted_well_formed_and_faults_start_after_ten_minutes() {
        let (out, truth) = bytes(&small(5));
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("time,job,node,metric,value"));
        let mut last = i64::MIN;
        let mut first_of: BTreeMap<String, i64> = BTreeMap::new();
        let mut rows = 0;
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 5, "{line}");
            let t: i64 = f[0].parse().unwrap();
            assert!(t >= last, "time goes backwards at {line}");
            last = t;
            assert!(f[4].parse::<f64>().unwrap().is_finite());
            let job = truth.iter().find(|j| j.job == f[1]).expect("a known job");
            assert!(job.nodes.iter().any(|n| n == f[2]), "{line}");
            first_of.entry(f[1].to_string()).or_insert(t);
            rows += 1;
        }
        assert!(rows > 10_000);
        for job in &truth {
            if let Some(fault) = &job.fault {
                assert!(fault.onset >= first_of[&job.job] + 590, "{fault:?}");
                assert!(job.nodes.contains(&fault.node));
            }
        }
    }

    fn many_jobs() -> Vec<IndependentJob> {
        (0..60)
            .flat_map(|s| truth_of(&IndependentSpec::new(s)))
            .collect()
    }

    #[test]
    fn the_fault_mix_follows_minders_table_with_a_subtle_share_over_many_seeds() {
        let jobs = many_jobs();
        let faults: Vec<&PlantedFault> = jobs.iter().filter_map(|j| j.fault.as_ref()).collect();
        let share = faults.len() as f64 / jobs.len() as f64;
        assert!((0.33..0.47).contains(&share), "faulty share {share}");
        let subtle = faults.iter().filter(|f| f.subtle).count() as f64 / faults.len() as f64;
        assert!((0.10..0.21).contains(&subtle), "subtle share {subtle}");
        let loud: Vec<&&PlantedFault> = faults.iter().filter(|f| !f.subtle).collect();
        let of = |k: &str| loud.iter().filter(|f| f.kind == k).count() as f64 / loud.len() as f64;
        assert!(
            (0.60..0.78).contains(&of("ecc_error")),
            "ecc {}",
            of("ecc_error")
        );
        assert!((0.06..0.18).contains(&of("pcie_downgrade")));
        assert!((0.05..0.16).contains(&of("nic_dropout")));
        assert!(of("gpu_card_drop") > 0.0 && of("nvlink_error") > 0.0);
        assert!(of("aoc_cable_error") > 0.0);
        assert!(jobs.iter().any(|j| j.nodes.len() == 2));
        assert!(jobs.iter().any(|j| j.nodes.len() > 128));
    }

    #[test]
    fn node_names_are_unique_across_jobs_and_restarts_bring_new_names() {
        let mut seen = BTreeSet::new();
        for seed in 0..20 {
            seen.clear();
            for job in truth_of(&IndependentSpec::new(seed)) {
                for node in &job.nodes {
                    assert!(seen.insert(node.clone()), "seed {seed}: {node} twice");
                }
            }
        }
        let spec = IndependentSpec::new(3);
        let plans = plan_all(&spec);
        let restarted = plans.iter().filter(|p| p.runs.len() > 1).count();
        assert!(restarted > 5, "{restarted} restarted jobs");
        for p in plans.iter().filter(|p| p.runs.len() > 1) {
            assert!(p.confounders.contains(&"restart"));
            let last = &p.runs[p.runs.len() - 1].ranks;
            assert!(
                last.iter().any(|i| !p.runs[0].ranks.contains(i)),
                "job {}",
                p.id
            );
        }
    }

    /// The first planned job with this fault kind, over seeds.
    fn job_with(kind: &str) -> JobPlan {
        (0..200)
            .flat_map(|seed| plan_all(&IndependentSpec::new(seed)))
            .find(|p| p.fault.as_ref().is_some_and(|f| f.kind == kind))
            .expect("the kind occurs")
    }

    fn sample(job: &JobPlan, node: usize, t: i64) -> [f64; 18] {
        let run = job.runs.iter().find(|r| r.ranks.contains(&node)).unwrap();
        let rank = run.ranks.iter().position(|&x| x == node).unwrap();
        values(job, &load_at(job, node, rank, t), &mut Rng::new(1))
    }

    #[test]
    fn an_ecc_error_idles_one_gpu_of_its_node_while_every_peer_spins_in_nccl() {
        let job = job_with("ecc_error");
        let f = job.fault.as_ref().unwrap();
        let t = f.onset + 20;
        let peer = job
            .runs
            .iter()
            .flat_map(|r| &r.ranks)
            .find(|&&x| x != f.node)
            .copied()
            .unwrap();
        let (bad, good) = (sample(&job, f.node, t), sample(&job, peer, t));
        assert_eq!(bad[4], 0.0, "util_min of the faulty node");
        assert!(
            good[4] > 90.0 && good[3] > 95.0,
            "peer util {} min {}",
            good[3],
            good[4]
        );
        assert!(bad[3] < 90.0 && bad[3] > 80.0, "faulty util {}", bad[3]);
        assert!(good[10] < job.ib_base * 0.05, "a hung peer moves no data");
    }

    #[test]
    fn a_heating_gpu_grows_from_nothing_to_a_throttled_clock() {
        let job = (0..400)
            .flat_map(|seed| plan_all(&IndependentSpec::new(seed)))
            .find(|p| {
                p.fault
                    .as_ref()
                    .is_some_and(|f| f.kind == "subtle_gpu_thermal" && f.ramp > 0)
            })
            .unwrap();
        let f = job.fault.as_ref().unwrap();
        let mut l = Load::training();
        apply_fault(&job, f.node, f.onset + 1, &mut l);
        assert!(l.clock > 0.99);
        let mut l = Load::training();
        apply_fault(&job, f.node, f.onset + f.ramp + 60, &mut l);
        assert!(
            (l.clock - (1.0 - f.depth)).abs() < 1e-9,
            "clock {}",
            l.clock
        );
        assert!((0.08..=0.25).contains(&f.depth));
    }

    #[test]
    fn each_confounder_is_present_in_most_jobs() {
        let jobs = many_jobs();
        for name in CONFOUNDERS {
            let n = jobs
                .iter()
                .filter(|j| j.confounders.iter().any(|c| c == name))
                .count();
            let share = n as f64 / jobs.len() as f64;
            assert!(share > 0.5, "{name} in only {share:.2} of jobs");
        }
    }

    fn job(id: &str, fault: Option<(&str, i64)>) -> IndependentJob {
        IndependentJob {
            job: id.to_string(),
            nodes: vec!["a".into(), "b".into(), "c".into()],
            fault: fault.map(|(node, onset)| PlantedFault {
                kind: "ecc_error".into(),
                node: node.into(),
                onset,
                subtle: false,
            }),
            confounders: vec!["checkpoint".into()],
        }
    }

    fn call(job: &str, node: &str, at: i64, drain: bool) -> Call {
        Call {
            job: job.into(),
            node: node.into(),
            detected_at: at,
            drain,
        }
    }

    #[test]
    fn the_scorer_counts_a_hand_made_case_right() {
        let jobs = vec![
            job("1", Some(("b", 1000))),
            job("2", Some(("c", 1000))),
            job("3", None),
            job("4", None),
        ];
        let calls = vec![
            call("1", "b", 1060, true),
            call("1", "b", 1030, false),
            call("1", "a", 1100, false),
            call("2", "c", 900, true),
            call("3", "a", 50, true),
            call("3", "a", 80, true),
            call("3", "c", 90, false),
            call("9", "a", 1, true),
        ];
        let s = score(&jobs, &calls);
        let all = &s.total.all;
        assert_eq!((all.jobs, all.faulty, all.detected), (4, 2, 1));
        assert_eq!((all.healthy_calls, all.healthy_jobs_called), (2, 1));
        assert_eq!(all.wrong_node_calls, 2);
        assert_eq!(all.false_calls(), 4);
        assert!((all.precision() - 0.2).abs() < 1e-9);
        assert!((all.recall() - 0.5).abs() < 1e-9);
        assert_eq!(all.median_delay(), Some(30));
        let drain = &s.total.drain;
        assert_eq!(
            (drain.detected, drain.healthy_calls, drain.wrong_node_calls),
            (1, 1, 1)
        );
        assert_eq!(drain.median_delay(), Some(60));
        assert_eq!(s.healthy_jobs_drained(), 1);
        assert_eq!(s.unknown_job_calls, 1);
        assert_eq!(s.by_confounder["checkpoint"], s.total);
        assert_eq!(s.by_kind["healthy"].all.healthy_calls, 2);
        assert_eq!(s.by_kind["ecc_error"].all.faulty, 2);
        let text = s.to_string();
        assert!(
            text.contains("| total | 4 | 2 | 0.200 | 0.500 | 30 s | 1 | 2 | 2 |"),
            "{text}"
        );
    }

    /// Release mode only: `cargo test --release -p lemonade-tests --lib full_size -- --ignored`.
    #[test]
    #[ignore]
    fn a_full_size_seed_has_two_to_four_million_rows_and_generates_in_under_a_second() {
        for seed in 1..4 {
            let began = std::time::Instant::now();
            let mut out = Vec::new();
            let truth = generate(&IndependentSpec::new(seed), &mut out).unwrap();
            let took = began.elapsed();
            let rows = out.iter().filter(|&&b| b == b'\n').count() - 1;
            let faulty = truth.iter().filter(|j| j.fault.is_some()).count();
            println!(
                "seed {seed}: {rows} rows, {} bytes, {faulty}/{} faulty, {took:?}",
                out.len(),
                truth.len()
            );
            assert!((2_000_000..4_500_000).contains(&rows), "{rows} rows");
            assert!(took.as_secs_f64() < 1.0, "{took:?}");
        }
    }
}
