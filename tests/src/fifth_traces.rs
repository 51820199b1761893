//! A fifth generator of training-job metric traces, held out from the
//! detector's tuning (issue 45), and its scorer.
//!
//! Written from a picture of real clusters, not from the detector nor the
//! other generators. A seed gives a set of jobs on a large fleet of H100,
//! H200 and GB200 nodes; each job's nodes report per-node sums or means over
//! their GPUs every 10, 15 or 30 s (`time,job,node,metric,value`).
//!
//! # Jobs
//! 2 to 256 nodes (40% of jobs have 2 to 8, 3% over 128), 30 to 90 minutes by
//! default. Training is synchronous: the job's step rate is the slowest
//! node's, so the other nodes wait inside NCCL, where their GPUs stay "busy"
//! (spinning kernels) while power, SM activity and traffic fall. A job starts
//! with 1-3 min of initialisation (model load, NCCL init) and a 2-5 min ramp.
//!
//! # Confounders (each drawn per job, recorded in [`IndependentJob::confounders`])
//! * `checkpoint` (85%): every 10-30 min for 40-240 s. Rank 0 only (rank 0's
//!   GPUs idle, its CPU and disk busy, the others spin at a barrier), every
//!   rank its shard (all nodes' disk and PCIe up, GPUs low), or async (a 5-15%
//!   dip).
//! * `eval` (65%): every 15-40 min for 2-8 min: GPUs at 55-80%, the network
//!   at a tenth, rank 0 a minute longer.
//! * `dataloader_stall` (70%): 1-4 stalls of 20-100 s where one node's input
//!   pipeline stops (its GPUs idle, CPU high) and every other node waits.
//! * `warmup` (90%): the ramp is slow (torch.compile, batch-size warm-up).
//! * `lr_batch_change` (60%): from one point on, GPU activity and traffic
//!   shift by -12% to +10%.
//! * `parallel_layout` (70%): 2-8 pipeline stages of unequal sizes; each
//!   stage has its own GPU (0.82-1.02), power and network (0.5-1.3) levels,
//!   the first and last stages the most different.
//! * `moe_imbalance` (60%): every 4-10 min, 1-3 nodes host the hot experts
//!   and run 5-20% longer, which moves between nodes.
//! * `rank0_extra` (80%): rank 0's node logs, evaluates and uploads: CPU
//!   +12-30 points, 40-80 GiB more memory, tens of MB/s of disk, GPUs 2-5%
//!   lower; with a pipeline the last stage's first node does the loss too.
//! * `node_bias` (90%): each node a lifetime bias: speed 0.96-1.0, power
//!   ±5%, SM clock ±1.5%, temperature ±4 C.
//! * `partial_metrics` (65%): 10-40% of nodes report only a subset (no
//!   node exporter, no RoCE counters, no NVLink/PCIe, no `gpu_util_min`).
//! * `unknown_metrics` (80%): `gpu_temp`, `nic_errors`,
//!   `DCGM_FI_PROF_SM_ACTIVE`, `node_load1` beside the known ones.
//! * `exporter_restart` (60%): 1-2 nodes' exporters restart: 20-90 s
//!   silent, then counter-derived rates read 0 once.
//! * `exporter_gap` (65%): 1-3 nodes missing for 1-5 min.
//! * `missing_rows` (80%): 0.3-2% of rows dropped at random.
//! * `clock_skew` (75%): each node's clock off by up to ±5 s.
//! * `noise` (always): 1-3% multiplicative noise per metric.
//! * `pfc_cnp_bursts` (70%): 10-60 s bursts of 1e3-5e4 pause frames/s and CNPs on
//!   random nodes.
//! * `leaf_congestion` (60%): another tenant loads one leaf switch for 5-20
//!   min: its 2-16 nodes see thousands of CNPs and pause frames a second, less
//!   bandwidth, and the job slows 3-10%.
//! * `rack_thermal` (60%): a hot aisle throttles the nodes of one rack for
//!   10-30 min: SM clock -5 to -12%, +8-14 C, the job slows with them.
//! * rarer: `mixed_intervals` (30%, some nodes scraped at another period),
//!   `long_idle` (20%, all GPUs idle 5-15 min waiting on an external step),
//!   `elastic_shrink` (12%, a healthy node leaves; 1-3 min re-rendezvous, the
//!   job continues without it).
//!
//! # Faults (about 40% of jobs, exactly one node, onset after 10 min)
//! Minder's Table 2 mix normalised to 85%, the other 15% subtle:
//! * `ecc` (uncorrectable ECC): the rank on one GPU dies. 80%: every rank
//!   hangs in NCCL (the faulty node shows one GPU at 0) until a 5-30 min
//!   timeout; 20%: the agent tears the job down within a minute.
//! * `gpu_card_drop`: a GPU falls off the bus: the node reports one GPU
//!   fewer (power down by a GPU), then the same hang.
//! * `nic_dropout`: 60%: the node's IB goes to 0 and the job hangs; 40%: a
//!   rail is lost, the node carries 7/8 of its traffic with errors and the
//!   job runs at 60-85%.
//! * `nvlink_error`: 50% fatal (hang); 50%: NVLink traffic falls to 5-15%,
//!   PCIe traffic triples and the job runs at 35-60%.
//! * `pcie_downgrade`: the node's PCIe traffic is capped at 25-50%, its GPUs
//!   starve a little and the job runs at 70-92%.
//! * `aoc_cable`: the link flaps every 1-5 min for 20-120 s: IB at 30-70%,
//!   pause frames and errors, the job at 50-80% during flaps; 30% end down.
//! * subtle (`subtle_thermal`, `subtle_slow_host`, `subtle_link`): the node's
//!   throughput drops by 8-25% with no halt; thermal lowers SM clock and power
//!   and raises temperature, a slow host raises CPU and idles the node's GPUs,
//!   a degraded link adds CNPs and errors while every node's traffic falls.
//!
//! After a hang the job exits (30%), restarts on the same nodes and hangs
//! again (30%), or restarts without the faulty node (40%); a restart reads
//! the checkpoint for 2-6 min.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};

/// The knobs of one set of traces.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// Job lengths are drawn between these (minutes; the minimum is raised to 16).
    pub min_minutes: u32,
    pub max_minutes: u32,
    /// The largest job (nodes, capped at 256).
    pub max_nodes: usize,
    /// The share of jobs with one faulty node.
    pub fault_fraction: f64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            fault_fraction: 0.4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// Confounders drawn with these probabilities; each is in most jobs.
pub const CONFOUNDERS: &[(&str, f64)] = &[
    ("checkpoint", 0.85),
    ("eval", 0.65),
    ("dataloader_stall", 0.7),
    ("warmup", 0.9),
    ("lr_batch_change", 0.6),
    ("parallel_layout", 0.7),
    ("moe_imbalance", 0.6),
    ("rank0_extra", 0.8),
    ("node_bias", 0.9),
    ("partial_metrics", 0.65),
    ("unknown_metrics", 0.8),
    ("exporter_restart", 0.6),
    ("exporter_gap", 0.65),
    ("missing_rows", 0.8),
    ("clock_skew", 0.75),
    ("noise", 1.0),
    ("pfc_cnp_bursts", 0.7),
    ("leaf_congestion", 0.6),
    ("rack_thermal", 0.6),
];

/// Rarer behaviours, recorded the same way.
pub const RARE_CONFOUNDERS: &[(&str, f64)] = &[
    ("mixed_intervals", 0.3),
    ("long_idle", 0.2),
    ("elastic_shrink", 0.12),
];

/// Table 2 weights of Minder (share of faults), normalised over the 85% non-subtle.
const FAULT_MIX: &[(&str, f64)] = &[
    ("ecc", 38.9),
    ("pcie_downgrade", 6.6),
    ("nic_dropout", 5.7),
    ("gpu_card_drop", 2.0),
    ("nvlink_error", 1.7),
    ("aoc_cable", 1.1),
];
const SUBTLE_SHARE: f64 = 0.15;
const SUBTLE_KINDS: &[&str] = &["subtle_thermal", "subtle_slow_host", "subtle_link"];

const METRICS: &[&str] = &[
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
const NM: usize = 18;
const KNOWN: u32 = (1 << 14) - 1;
const UNKNOWN: u32 = ((1 << NM) - 1) & !KNOWN;
// Subsets a partial node keeps.
const NO_HOST: u32 = !(1 << 0 | 1 << 1 | 1 << 2 | 1 << 17);
const NO_ROCE: u32 = !(1 << 12 | 1 << 13 | 1 << 15);
const NO_LINKS: u32 = !(1 << 8 | 1 << 9);
const NO_MIN: u32 = !(1 << 4);

/// SplitMix64: small, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5fe1_45e0_dead_beef)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn u(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }
    /// Uniform in [lo, hi]; `lo` when the range is empty (short jobs).
    fn i(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.f() < p
    }
    /// Unit-variance, zero-mean noise (triangular: cheap, and bounded).
    fn noise(&mut self) -> f64 {
        (self.f() + self.f() - 1.0) * 6f64.sqrt()
    }
}

/// What the job as a whole is doing at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Init,
    Train,
    Checkpoint,
    Eval,
    Idle,
    Hung,
    Restart,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CkptMode {
    Rank0,
    Sharded,
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Hw {
    H100,
    H200,
    Gb200,
}

/// A window of time [start, end) in seconds from the job's start.
type Win = (i64, i64);

fn inside(w: &[Win], t: i64) -> bool {
    w.iter().any(|&(a, b)| t >= a && t < b)
}

/// One node's lifetime parameters.
struct NodePlan {
    name: String,
    num: usize,
    speed: f64,
    power: f64,
    clock: f64,
    temp: f64,
    util_lvl: f64,
    power_lvl: f64,
    net_lvl: f64,
    cpu_extra: f64,
    mem_extra: f64,
    disk_extra: f64,
    mask: u32,
    interval: i64,
    offset: i64,
    skew: i64,
    gaps: Vec<Win>,
    restarts: Vec<Win>,
    bursts: Vec<Win>,
    /// Leaves the job (elastic shrink or exclusion after a fault) at this time.
    leaves: Option<i64>,
}

/// The fault as the simulation sees it.
struct FaultPlan {
    kind: &'static str,
    node: usize,
    onset: i64,
    /// The node's speed while degraded (1.0 when the fault only hangs the job).
    slow: f64,
    hangs_at: Option<i64>,
    flaps: Vec<Win>,
    rail_lost: bool,
}

/// Everything drawn for one job before any row is written.
struct JobPlan {
    id: String,
    start: i64,
    dur: i64,
    end: i64,
    hw: Hw,
    base_util: f64,
    ib_base: f64,
    nv_base: f64,
    pcie_base: f64,
    cpu_base: f64,
    mem_base: f64,
    noise: f64,
    drop_p: f64,
    init: i64,
    ramp: i64,
    ckpt_mode: CkptMode,
    ckpts: Vec<Win>,
    evals: Vec<Win>,
    idle: Vec<Win>,
    hung: Vec<Win>,
    restarts: Vec<Win>,
    lr_at: i64,
    lr_shift: f64,
    stalls: Vec<(i64, i64, usize)>,
    moe: Vec<(i64, i64, usize, f64)>,
    leaf: Option<(i64, i64, usize, usize, f64)>,
    rack: Option<(i64, i64, usize, usize, f64)>,
    last_stage_first: Option<usize>,
    nodes: Vec<NodePlan>,
    fault: Option<FaultPlan>,
    confounders: Vec<String>,
}

impl JobPlan {
    fn has(&self, c: &str) -> bool {
        self.confounders.iter().any(|x| x == c)
    }
}

fn draw_node_count(rng: &mut Rng, max: usize) -> usize {
    let max = max.clamp(2, 256);
    let n = match rng.f() {
        p if p < 0.10 => 2,
        p if p < 0.18 => 3,
        p if p < 0.40 => rng.i(4, 8) as usize,
        p if p < 0.78 => rng.i(9, 32) as usize,
        p if p < 0.97 => rng.i(33, 80) as usize,
        _ => rng.i(129, 256) as usize,
    };
    n.min(max)
}

fn draw_fault_kind(rng: &mut Rng) -> &'static str {
    if rng.chance(SUBTLE_SHARE) {
        return SUBTLE_KINDS[rng.i(0, 2) as usize];
    }
    let total: f64 = FAULT_MIX.iter().map(|k| k.1).sum();
    let mut x = rng.u(0.0, total);
    for &(k, w) in FAULT_MIX {
        if x < w {
            return k;
        }
        x -= w;
    }
    FAULT_MIX[0].0
}

/// Periodic windows: every `every` s (jittered) for `len` s, from `from` to `until`.
fn periodic(rng: &mut Rng, from: i64, until: i64, every: (i64, i64), len: (i64, i64)) -> Vec<Win> {
    let mut out = Vec::new();
    let mut t = from + rng.i(every.0, every.1);
    while t < until {
        let l = rng.i(len.0, len.1);
        out.push((t, t + l));
        t += l + rng.i(every.0, every.1);
    }
    out
}

fn plan_confounders(rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    for &(c, p) in CONFOUNDERS.iter().chain(RARE_CONFOUNDERS) {
        if rng.chance(p) {
            out.push(c.to_string());
        }
    }
    out
}

fn plan_nodes(rng: &mut Rng, n: usize, first: usize, hw: Hw, conf: &[String]) -> Vec<NodePlan> {
    let has = |c: &str| conf.iter().any(|x| x == c);
    let prefix = match hw {
        Hw::H100 => "dgx-h100",
        Hw::H200 => "dgx-h200",
        Hw::Gb200 => "gb200",
    };
    let interval = [10, 15, 30, 30][rng.i(0, 3) as usize];
    let mut idx = first;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        // Slurm hands out fragments: now and then a few node numbers are skipped.
        if rng.chance(0.1) {
            idx += rng.i(1, 6) as usize;
        }
        let bias = has("node_bias");
        let mut mask = KNOWN;
        if has("unknown_metrics") {
            mask |= UNKNOWN;
        }
        if has("partial_metrics") && rng.chance(0.25) {
            mask &= [NO_HOST, NO_ROCE, NO_LINKS, NO_MIN][rng.i(0, 3) as usize];
        }
        let own = if has("mixed_intervals") && rng.chance(0.2) {
            [10, 15, 30][rng.i(0, 2) as usize]
        } else {
            interval
        };
        nodes.push(NodePlan {
            name: format!("{prefix}-{:04}", idx % 10_000),
            num: idx,
            speed: if bias { rng.u(0.96, 1.0) } else { 1.0 },
            power: if bias { rng.u(0.95, 1.05) } else { 1.0 },
            clock: if bias { rng.u(0.985, 1.015) } else { 1.0 },
            temp: if bias { rng.u(-4.0, 4.0) } else { 0.0 },
            util_lvl: 1.0,
            power_lvl: 1.0,
            net_lvl: 1.0,
            cpu_extra: 0.0,
            mem_extra: 0.0,
            disk_extra: 0.0,
            mask,
            interval: own,
            offset: rng.i(0, own - 1),
            skew: if has("clock_skew") { rng.i(-5, 5) } else { 0 },
            gaps: Vec::new(),
            restarts: Vec::new(),
            bursts: Vec::new(),
            leaves: None,
        });
        idx += 1;
    }
    nodes
}

/// Pipeline stages of unequal sizes, each with its own levels; rank 0's extra work.
fn plan_layout(rng: &mut Rng, job: &mut JobPlan) {
    let n = job.nodes.len();
    if job.has("parallel_layout") {
        let stages = (rng.i(2, 8) as usize).min(n);
        let mut cuts: Vec<usize> = (0..stages - 1)
            .map(|_| rng.i(1, n as i64 - 1) as usize)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut bounds = vec![0];
        bounds.extend(cuts);
        bounds.push(n);
        let last = bounds.len() - 2;
        for s in 0..bounds.len() - 1 {
            let (u, p, net) = if s == 0 {
                (rng.u(0.82, 0.92), rng.u(0.8, 0.92), rng.u(0.5, 0.8))
            } else if s == last {
                (rng.u(0.95, 1.02), rng.u(1.0, 1.1), rng.u(0.9, 1.3))
            } else {
                (rng.u(0.88, 1.0), rng.u(0.9, 1.02), rng.u(0.8, 1.2))
            };
            for node in &mut job.nodes[bounds[s]..bounds[s + 1]] {
                node.util_lvl = u;
                node.power_lvl = p;
                node.net_lvl = net;
            }
        }
        job.last_stage_first = Some(bounds[last]);
    }
    if job.has("rank0_extra") {
        let r0 = &mut job.nodes[0];
        r0.cpu_extra = rng.u(12.0, 30.0);
        r0.mem_extra = rng.u(40.0, 80.0);
        r0.disk_extra = rng.u(10e6, 60e6);
        r0.util_lvl *= rng.u(0.95, 0.98);
        if let Some(l) = job.last_stage_first {
            job.nodes[l].cpu_extra = rng.u(5.0, 15.0);
            job.nodes[l].util_lvl *= 1.02;
        }
    }
}

/// Positions [lo, hi) of the job's nodes sharing `num / size` with position `at`.
fn group_of(nodes: &[NodePlan], at: usize, size: usize) -> (usize, usize) {
    let g = nodes[at].num / size;
    let lo = nodes.iter().position(|n| n.num / size == g).unwrap_or(at);
    let hi = nodes.iter().rposition(|n| n.num / size == g).unwrap_or(at) + 1;
    (lo, hi)
}

/// Job-wide phases and the confounders that act over time.
fn plan_timeline(rng: &mut Rng, job: &mut JobPlan) {
    let (dur, n) = (job.dur, job.nodes.len());
    job.init = rng.i(60, 180);
    job.ramp = if job.has("warmup") {
        rng.i(120, 300)
    } else {
        30
    };
    job.ckpt_mode = [CkptMode::Rank0, CkptMode::Sharded, CkptMode::Async][rng.i(0, 2) as usize];
    if job.has("checkpoint") {
        job.ckpts = periodic(rng, job.init, dur - 60, (600, 1800), (40, 240));
    }
    if job.has("eval") {
        job.evals = periodic(rng, job.init + 300, dur - 120, (900, 2400), (120, 480));
    }
    if job.has("long_idle") {
        let a = rng.i(900, (dur - 900).max(901));
        job.idle.push((a, a + rng.i(300, 900)));
    }
    job.lr_at = if job.has("lr_batch_change") {
        rng.i(600, dur - 300)
    } else {
        i64::MAX
    };
    job.lr_shift = rng.u(0.88, 1.1);
    if job.has("dataloader_stall") {
        for _ in 0..rng.i(1, 4) {
            let a = rng.i(job.init + job.ramp, dur - 120);
            job.stalls
                .push((a, a + rng.i(20, 100), rng.i(0, n as i64 - 1) as usize));
        }
    }
    if job.has("moe_imbalance") {
        let mut t = job.init;
        while t < dur {
            let len = rng.i(240, 600);
            for _ in 0..rng.i(1, 3) {
                let node = rng.i(0, n as i64 - 1) as usize;
                job.moe.push((t, t + len, node, 1.0 / rng.u(1.05, 1.2)));
            }
            t += len;
        }
    }
    let win = |rng: &mut Rng, lo: i64, hi: i64| {
        let a = rng.i(300, (dur - hi).max(301));
        (a, a + rng.i(lo, hi))
    };
    if job.has("leaf_congestion") {
        let (a, b) = win(rng, 300, 1200);
        let (lo, hi) = group_of(&job.nodes, rng.i(0, n as i64 - 1) as usize, 16);
        job.leaf = Some((a, b, lo, hi, rng.u(0.9, 0.97)));
    }
    if job.has("rack_thermal") {
        let (a, b) = win(rng, 600, 1800);
        let size = if job.hw == Hw::Gb200 { 18 } else { 8 };
        let (lo, hi) = group_of(&job.nodes, rng.i(0, n as i64 - 1) as usize, size);
        job.rack = Some((a, b, lo, hi, rng.u(0.88, 0.95)));
    }
}

/// Exporter troubles and fabric bursts, node by node.
fn plan_exporters(rng: &mut Rng, job: &mut JobPlan) {
    let (dur, n) = (job.dur, job.nodes.len() as i64);
    if job.has("exporter_gap") {
        for _ in 0..rng.i(1, 3) {
            let a = rng.i(120, dur - 360);
            let node = rng.i(0, n - 1) as usize;
            job.nodes[node].gaps.push((a, a + rng.i(60, 300)));
        }
    }
    if job.has("exporter_restart") {
        for _ in 0..rng.i(1, 2) {
            let a = rng.i(120, dur - 120);
            let node = rng.i(0, n - 1) as usize;
            job.nodes[node].restarts.push((a, a + rng.i(20, 90)));
        }
    }
    if job.has("pfc_cnp_bursts") {
        for _ in 0..rng.i(2, 8) {
            let a = rng.i(60, dur - 60);
            let node = rng.i(0, n - 1) as usize;
            job.nodes[node].bursts.push((a, a + rng.i(10, 60)));
        }
    }
    job.drop_p = if job.has("missing_rows") {
        rng.u(0.003, 0.02)
    } else {
        0.0
    };
    job.noise = rng.u(0.01, 0.03);
}

/// What happens after a hang: exit, crash loop, or restart without the node.
fn plan_after_hang(rng: &mut Rng, job: &mut JobPlan, node: usize, h: i64, timeout: i64) {
    let dur = job.dur;
    let t = (h + timeout).min(dur);
    job.hung.push((h, t));
    let outcome = rng.f();
    if outcome < 0.3 || t >= dur - 60 {
        job.end = (t + rng.i(30, 90)).min(dur);
        return;
    }
    let r = rng.i(120, 360);
    job.restarts.push((t, t + r));
    if outcome < 0.6 {
        let again = t + r + rng.i(60, 180);
        if again < dur {
            job.hung.push((again, (again + timeout).min(dur)));
            job.end = (again + timeout + rng.i(30, 90)).min(dur);
        }
    } else {
        job.nodes[node].leaves = Some(t);
    }
}

fn plan_fault(rng: &mut Rng, job: &mut JobPlan, kind: &'static str) {
    let n = job.nodes.len() as i64;
    let node = rng.i(0, n - 1) as usize;
    let onset = rng.i(600, (job.dur - 300).max(600));
    let mut f = FaultPlan {
        kind,
        node,
        onset,
        slow: 1.0,
        hangs_at: None,
        flaps: Vec::new(),
        rail_lost: false,
    };
    let timeout = [600, 1800, rng.i(300, 1200)][rng.i(0, 2) as usize];
    match kind {
        "ecc" | "gpu_card_drop" => {
            let h = onset + rng.i(0, 20);
            f.hangs_at = Some(h);
            let quick = kind == "ecc" && rng.chance(0.2);
            let wait = if quick { rng.i(20, 60) } else { timeout };
            plan_after_hang(rng, job, node, h, wait);
        }
        "nic_dropout" if rng.chance(0.6) => {
            let h = onset + rng.i(10, 60);
            f.hangs_at = Some(h);
            plan_after_hang(rng, job, node, h, timeout);
        }
        "nic_dropout" => {
            f.rail_lost = true;
            f.slow = rng.u(0.6, 0.85);
        }
        "nvlink_error" if rng.chance(0.5) => {
            let h = onset + rng.i(0, 30);
            f.hangs_at = Some(h);
            plan_after_hang(rng, job, node, h, timeout);
        }
        "nvlink_error" => f.slow = rng.u(0.35, 0.6),
        "pcie_downgrade" => f.slow = rng.u(0.7, 0.92),
        "aoc_cable" => {
            f.slow = rng.u(0.5, 0.8);
            f.flaps = periodic(rng, onset - 60, job.dur, (60, 300), (20, 120));
            f.flaps.insert(0, (onset, onset + rng.i(20, 120)));
            if rng.chance(0.3) {
                let h = onset + rng.i(300, 900);
                if h < job.dur - 120 {
                    f.hangs_at = Some(h);
                    plan_after_hang(rng, job, node, h, timeout);
                }
            }
        }
        _ => f.slow = 1.0 - rng.u(0.08, 0.25),
    }
    job.fault = Some(f);
}

fn plan_job(
    rng: &mut Rng,
    spec: &IndependentSpec,
    index: usize,
    start: i64,
    first: &mut usize,
) -> JobPlan {
    let lo = spec.min_minutes.max(16) as i64;
    let hi = (spec.max_minutes as i64).max(lo);
    let dur = rng.i(lo, hi) * 60 + rng.i(0, 59);
    let n = draw_node_count(rng, spec.max_nodes);
    let hw = [Hw::H100, Hw::H100, Hw::H200, Hw::Gb200][rng.i(0, 3) as usize];
    let confounders = plan_confounders(rng);
    let nodes = plan_nodes(rng, n, *first, hw, &confounders);
    *first = nodes.last().map_or(*first, |x| x.num) + rng.i(1, 40) as usize;
    let mut job = JobPlan {
        id: format!("{}", 7_300_000 + (spec.seed % 1000) * 1000 + index as u64),
        start,
        dur,
        end: dur,
        hw,
        base_util: rng.u(88.0, 99.0),
        ib_base: rng.u(0.15, 0.5) * 400e9,
        nv_base: rng.u(0.1, 0.35) * 8.0 * 450e9,
        pcie_base: rng.u(2e9, 8e9),
        cpu_base: rng.u(8.0, 30.0),
        mem_base: rng.u(300.0, 900.0),
        noise: 0.02,
        drop_p: 0.0,
        init: 120,
        ramp: 60,
        ckpt_mode: CkptMode::Async,
        ckpts: Vec::new(),
        evals: Vec::new(),
        idle: Vec::new(),
        hung: Vec::new(),
        restarts: Vec::new(),
        lr_at: i64::MAX,
        lr_shift: 1.0,
        stalls: Vec::new(),
        moe: Vec::new(),
        leaf: None,
        rack: None,
        last_stage_first: None,
        nodes,
        fault: None,
        confounders,
    };
    plan_layout(rng, &mut job);
    plan_timeline(rng, &mut job);
    plan_exporters(rng, &mut job);
    if rng.chance(spec.fault_fraction) {
        let kind = draw_fault_kind(rng);
        plan_fault(rng, &mut job, kind);
    }
    if job.has("elastic_shrink") && n > 2 {
        let node = rng.i(1, n as i64 - 1) as usize;
        let at = rng.i(600, job.dur - 600);
        let clash = job.fault.as_ref().is_some_and(|f| f.node == node) || inside(&job.hung, at);
        if !clash && at < job.end && job.nodes[node].leaves.is_none() {
            job.nodes[node].leaves = Some(at);
            job.restarts.push((at, at + rng.i(60, 180)));
        }
    }
    job
}

fn phase(job: &JobPlan, t: i64) -> Phase {
    if inside(&job.hung, t) {
        Phase::Hung
    } else if inside(&job.restarts, t) {
        Phase::Restart
    } else if t < job.init {
        Phase::Init
    } else if inside(&job.idle, t) {
        Phase::Idle
    } else if inside(&job.ckpts, t) {
        Phase::Checkpoint
    } else if inside(&job.evals, t) {
        Phase::Eval
    } else {
        Phase::Train
    }
}

/// Rank 0 gathers the evaluation's results for a minute while the others wait.
fn eval_tail(job: &JobPlan, t: i64) -> bool {
    job.evals.iter().any(|&(_, b)| t >= b && t < b + 60)
}

fn stalled(job: &JobPlan, i: usize, t: i64) -> bool {
    job.stalls
        .iter()
        .any(|&(a, b, n)| n == i && t >= a && t < b)
}

fn in_group(g: &Option<(i64, i64, usize, usize, f64)>, i: usize, t: i64) -> Option<f64> {
    g.filter(|&(a, b, lo, hi, _)| t >= a && t < b && i >= lo && i < hi)
        .map(|g| g.4)
}

/// The fault's effect on the faulty node at `t`, if it is in force.
fn fault_on(job: &JobPlan, i: usize, t: i64) -> Option<&FaultPlan> {
    job.fault.as_ref().filter(|f| f.node == i && t >= f.onset)
}

fn in_flap(f: &FaultPlan, t: i64) -> bool {
    f.kind != "aoc_cable" || inside(&f.flaps, t)
}

/// How fast node `i` could run a step now, relative to nominal.
fn node_speed(job: &JobPlan, i: usize, t: i64) -> f64 {
    let mut s = job.nodes[i].speed;
    for &(a, b, n, f) in &job.moe {
        if n == i && t >= a && t < b {
            s *= f;
        }
    }
    if stalled(job, i, t) {
        s *= 0.05;
    }
    s *= in_group(&job.leaf, i, t).unwrap_or(1.0);
    s *= in_group(&job.rack, i, t).unwrap_or(1.0);
    if let Some(f) = fault_on(job, i, t) {
        if f.kind == "nic_dropout" && !f.rail_lost {
            s *= 0.02;
        } else if in_flap(f, t) {
            s *= f.slow;
        }
    }
    s
}

fn present(job: &JobPlan, i: usize, t: i64) -> bool {
    job.nodes[i].leaves.is_none_or(|l| t < l)
}

const GRID: i64 = 5;

/// The job's step rate on a 5 s grid: the slowest present node's.
fn job_rates(job: &JobPlan) -> Vec<f64> {
    (0..=job.end / GRID)
        .map(|k| {
            let t = k * GRID;
            (0..job.nodes.len())
                .filter(|&i| present(job, i, t))
                .map(|i| node_speed(job, i, t))
                .fold(1.0, f64::min)
        })
        .collect()
}

/// Hardware per node: GPUs, W per GPU at peak and idle, boost MHz.
fn hw_params(hw: Hw) -> (f64, f64, f64, f64) {
    match hw {
        Hw::H100 => (8.0, 700.0, 75.0, 1980.0),
        Hw::H200 => (8.0, 700.0, 80.0, 1980.0),
        Hw::Gb200 => (4.0, 1200.0, 140.0, 2062.0),
    }
}

/// GPU activity (util, power activity, traffic share, cpu extra, disk) of a phase.
struct Activity {
    util: f64,
    act: f64,
    thr: f64,
    sm: f64,
    cpu: f64,
    disk: f64,
    pcie: f64,
}

fn activity(job: &JobPlan, i: usize, t: i64, rate: f64) -> Activity {
    let node = &job.nodes[i];
    let spin = Activity {
        util: 98.5,
        act: 0.2,
        thr: 0.0005,
        sm: 0.02,
        cpu: 0.5,
        disk: 0.0,
        pcie: 0.001,
    };
    let idle = Activity {
        util: 0.0,
        act: 0.0,
        thr: 0.0,
        sm: 0.0,
        cpu: 0.3,
        disk: 0.0,
        pcie: 0.0,
    };
    match phase(job, t) {
        Phase::Hung => spin,
        Phase::Idle => idle,
        Phase::Restart => Activity {
            cpu: 2.5,
            disk: 2.5e9,
            pcie: 0.5,
            ..idle
        },
        Phase::Init => Activity {
            cpu: 3.0,
            disk: 1.5e9,
            pcie: 0.6,
            util: 2.0,
            ..idle
        },
        Phase::Checkpoint => match job.ckpt_mode {
            CkptMode::Rank0 if i == 0 => Activity {
                util: 4.0,
                act: 0.05,
                cpu: 2.5,
                disk: 2.2e9,
                pcie: 3.0,
                ..idle
            },
            CkptMode::Rank0 => spin,
            CkptMode::Sharded => Activity {
                util: 18.0,
                act: 0.12,
                cpu: 2.0,
                disk: 1.2e9,
                pcie: 4.0,
                sm: 0.05,
                thr: 0.01,
            },
            CkptMode::Async => Activity {
                disk: 0.8e9,
                pcie: 1.6,
                ..train(job, node, i, t, rate * 0.9)
            },
        },
        Phase::Eval => Activity {
            util: 68.0 * node.util_lvl,
            act: 0.45,
            thr: 0.1,
            sm: 0.4,
            cpu: 1.3,
            disk: 5e6,
            pcie: 0.5,
        },
        Phase::Train if eval_tail(job, t) && i == 0 => Activity {
            util: 30.0,
            act: 0.15,
            cpu: 1.8,
            ..idle
        },
        Phase::Train if eval_tail(job, t) => spin,
        Phase::Train => train(job, node, i, t, rate),
    }
}

fn train(job: &JobPlan, node: &NodePlan, i: usize, t: i64, rate: f64) -> Activity {
    let ramp = ((t - job.init) as f64 / job.ramp as f64).clamp(0.0, 1.0);
    let rf = 0.3 + 0.7 * ramp;
    let m = if t >= job.lr_at { job.lr_shift } else { 1.0 };
    let own = node_speed(job, i, t).max(1e-3);
    let mut busy = (rate / own).min(1.0);
    let mut util =
        job.base_util * node.util_lvl * (0.93 + 0.07 * busy) * (0.6 + 0.4 * rf) * m.min(1.02);
    let mut cpu = 1.0;
    if stalled(job, i, t) {
        // Its GPUs wait for input: idle, not spinning; its loader workers burn CPU.
        util = 8.0;
        busy = 0.05;
        cpu = 2.5;
    }
    if let Some(f) = fault_on(job, i, t).filter(|f| f.kind == "subtle_slow_host") {
        util *= 0.7 + 0.3 * f.slow;
        busy *= f.slow;
        cpu += 1.2;
    }
    let thr = rate * rf * m;
    Activity {
        util,
        act: (0.3 + 0.7 * busy) * rf * m * node.power_lvl,
        thr,
        sm: 0.8 * busy * rf * m * node.util_lvl,
        cpu,
        disk: 8e6,
        pcie: 1.0,
    }
}

/// One node's noiseless values at `t` (seconds from the job's start).
fn sample(job: &JobPlan, i: usize, t: i64, rate: f64) -> [f64; NM] {
    let node = &job.nodes[i];
    let (g, peak, idle_w, boost) = hw_params(job.hw);
    let a = activity(job, i, t, rate);
    let mut v = [0.0; NM];
    let thermal = in_group(&job.rack, i, t);
    let clock_f = thermal.unwrap_or(1.0) * node.clock;
    v[0] = (job.cpu_base * a.cpu + 4.0 * a.thr + node.cpu_extra).min(100.0);
    v[1] = (job.mem_base + node.mem_extra + 0.02 * t as f64 / 60.0) * (1u64 << 30) as f64;
    // Checkpoint and restart I/O is a burst of its own; the input pipeline follows the steps.
    v[2] = node.disk_extra
        + if a.disk > 1e8 {
            a.disk
        } else {
            a.disk * a.thr + 2e6
        };
    v[3] = a.util;
    v[4] = (a.util - 3.0).max(0.0);
    v[5] = g * (idle_w + (peak * 0.88 - idle_w) * a.act) * node.power;
    v[6] = boost * (1.0 - 0.07 * a.act) * clock_f;
    v[7] = 55.0 * a.sm / 0.8 * node.util_lvl;
    v[8] = job.pcie_base * (a.thr + a.pcie) * (0.5 + 0.5 * node.net_lvl);
    v[9] = job.nv_base * a.thr * node.util_lvl;
    v[10] = job.ib_base * a.thr * node.net_lvl;
    v[11] = v[10] * 1.01;
    v[12] = 2.0;
    v[13] = 6.0;
    v[14] = 30.0 + 45.0 * a.act + node.temp + if thermal.is_some() { 11.0 } else { 0.0 };
    v[15] = 0.0;
    v[16] = a.sm;
    v[17] = v[0] * 2.2;
    if in_group(&job.leaf, i, t).is_some() {
        v[10] *= 0.85;
        v[11] *= 0.85;
        v[12] += 1500.0;
        v[13] += 3000.0;
    }
    if inside(&node.bursts, t) {
        v[12] += 2e4;
        v[13] += 8e3;
    }
    if let Some(f) = fault_on(job, i, t) {
        apply_fault(f, job, &mut v, g, t);
    }
    v
}

/// What the fault shows on the faulty node itself (the job-wide slowdown or
/// hang comes from the step rate and the phases).
fn apply_fault(f: &FaultPlan, job: &JobPlan, v: &mut [f64; NM], g: f64, t: i64) {
    let (_, _, idle_w, _) = hw_params(job.hw);
    let hung = f.hangs_at.is_some_and(|h| t >= h);
    match f.kind {
        "ecc" if hung => {
            // The dead rank's GPU is idle, not spinning.
            v[3] *= (g - 1.0) / g;
            v[4] = 0.0;
            v[5] -= (v[5] / g - idle_w).max(0.0);
            v[16] *= (g - 1.0) / g;
        }
        "gpu_card_drop" => {
            // The GPU is gone from the bus: the sums lose it, the means do not see it.
            v[5] *= (g - 1.0) / g;
            v[8] *= (g - 1.0) / g;
            v[9] *= (g - 1.0) / g;
        }
        "nic_dropout" if f.rail_lost => {
            v[10] *= 0.875;
            v[11] *= 0.875;
            v[15] = 8.0;
        }
        "nic_dropout" => {
            v[10] = 0.0;
            v[11] = 0.0;
            v[15] = 300.0;
        }
        "nvlink_error" if hung => v[9] = 0.0,
        "nvlink_error" => {
            v[9] *= 0.1;
            v[8] *= 3.0;
        }
        "pcie_downgrade" => v[8] *= 0.25 + (f.slow - 0.7) * 1.1,
        "aoc_cable" if in_flap(f, t) => {
            v[10] *= f.slow * 0.8;
            v[11] *= f.slow * 0.8;
            v[12] += 5000.0;
            v[13] += 2000.0;
            v[15] = 100.0;
        }
        "aoc_cable" => v[15] = 1.0,
        "subtle_thermal" => {
            v[6] *= f.slow.powf(0.8);
            v[14] += 12.0;
            v[5] *= 0.93;
        }
        "subtle_link" => {
            v[10] *= 0.95;
            v[11] *= 0.95;
            v[12] += 300.0;
            v[13] += 800.0;
            v[15] = 2.0;
        }
        _ => {}
    }
}

/// Rows of one job: packed sort key and value.
fn job_rows(job: &JobPlan, jid: u64, rel0: i64, rng: &mut Rng, rows: &mut Vec<(u64, f32)>) {
    let rates = job_rates(job);
    let rate_at = |t: i64| rates[((t.max(0) / GRID) as usize).min(rates.len() - 1)];
    for (i, node) in job.nodes.iter().enumerate() {
        let mut t = node.offset;
        let mut after_restart = false;
        while t < job.end && present(job, i, t) {
            if inside(&node.gaps, t) {
                t += node.interval;
                continue;
            }
            if inside(&node.restarts, t) {
                after_restart = true;
                t += node.interval;
                continue;
            }
            let v = sample(job, i, t, rate_at(t));
            let time = (job.start - rel0 + t + node.skew) as u64;
            let mut util = 100.0;
            for (m, &x) in v.iter().enumerate() {
                let mut x = x * (1.0 + job.noise * rng.noise());
                if matches!(m, 3 | 4) {
                    // The least busy GPU is never busier than the mean.
                    x = x.clamp(0.0, util);
                    util = x;
                }
                if node.mask & (1 << m) == 0 || rng.chance(job.drop_p) {
                    continue;
                }
                if after_restart && matches!(m, 2 | 8..=13 | 15) {
                    x = 0.0;
                }
                let key = time << 36 | jid << 24 | (i as u64) << 8 | m as u64;
                rows.push((key, x.max(0.0) as f32));
            }
            after_restart = false;
            t += node.interval;
        }
    }
}

fn plan_all(spec: &IndependentSpec) -> (Vec<JobPlan>, i64) {
    let mut rng = Rng::new(spec.seed);
    let base = 1_767_225_600 + (spec.seed % 5000) as i64 * 7200;
    let mut start = base;
    let mut first = rng.i(0, 2000) as usize;
    let jobs = (0..spec.jobs)
        .map(|k| {
            start += rng.i(0, 240);
            plan_job(&mut rng, spec, k, start, &mut first)
        })
        .collect();
    (jobs, base - 16)
}

fn truth(job: &JobPlan) -> IndependentJob {
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: job.start + f.onset,
            subtle: f.kind.starts_with("subtle"),
        }),
        confounders: job.confounders.clone(),
    }
}

/// The truth of a spec without writing any row.
pub fn plan(spec: &IndependentSpec) -> Vec<IndependentJob> {
    plan_all(spec).0.iter().map(truth).collect()
}

/// Counting sort on the time (a few hours of seconds), then each second's rows by key.
fn sort_rows(rows: &mut Vec<(u64, f32)>) {
    let Some(max) = rows.iter().map(|r| r.0 >> 36).max() else {
        return;
    };
    let mut start = vec![0usize; max as usize + 2];
    for r in rows.iter() {
        start[(r.0 >> 36) as usize + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut sorted = vec![(0u64, 0f32); rows.len()];
    let mut next = start.clone();
    for &r in rows.iter() {
        let b = (r.0 >> 36) as usize;
        sorted[next[b]] = r;
        next[b] += 1;
    }
    for w in start.windows(2) {
        sorted[w[0]..w[1]].sort_unstable_by_key(|r| r.0);
    }
    *rows = sorted;
}

fn push_u64(buf: &mut Vec<u8>, mut x: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Large values as integers, small ones with three decimals.
fn push_value(buf: &mut Vec<u8>, x: f32) {
    if x >= 1000.0 {
        push_u64(buf, x.round() as u64);
    } else {
        let milli = (x as f64 * 1000.0).round() as u64;
        push_u64(buf, milli / 1000);
        buf.push(b'.');
        let f = milli % 1000;
        buf.extend_from_slice(&[
            b'0' + (f / 100) as u8,
            b'0' + (f / 10 % 10) as u8,
            b'0' + (f % 10) as u8,
        ]);
    }
}

fn write_rows(
    jobs: &[JobPlan],
    rel0: i64,
    rows: &[(u64, f32)],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 21);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for &(key, x) in rows {
        push_u64(&mut buf, ((key >> 36) as i64 + rel0) as u64);
        let job = &jobs[((key >> 24) & 0xfff) as usize];
        for part in [
            job.id.as_str(),
            &job.nodes[((key >> 8) & 0xffff) as usize].name,
            METRICS[(key & 0xff) as usize],
        ] {
            buf.push(b',');
            buf.extend_from_slice(part.as_bytes());
        }
        buf.push(b',');
        push_value(&mut buf, x);
        buf.push(b'\n');
        if buf.len() > 1 << 20 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    if spec.jobs >= 1 << 12 {
        // The packed sort key holds 12 bits of job index.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at most 4095 jobs per file",
        ));
    }
    let (jobs, rel0) = plan_all(spec);
    let mut rng = Rng::new(spec.seed.wrapping_mul(31).wrapping_add(7));
    let mut rows = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        job_rows(job, k as u64, rel0, &mut rng, &mut rows);
    }
    sort_rows(&mut rows);
    write_rows(&jobs, rel0, &rows, out)?;
    Ok(jobs.iter().map(truth).collect())
}

/// One call of the detector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Counts of one tier of calls over a set of jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    /// Distinct (job, node) pairs called on healthy jobs.
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    /// Distinct (job, node) pairs on faulty jobs that are not a right call.
    pub wrong_node_calls: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls
    }
    /// Right jobs over right jobs plus false calls; 1 when nothing was called.
    pub fn precision(&self) -> f64 {
        let d = self.detected + self.false_calls();
        if d == 0 {
            1.0
        } else {
            self.detected as f64 / d as f64
        }
    }
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
        d.get(d.len().saturating_sub(1) / 2)
            .copied()
            .filter(|_| !d.is_empty())
    }

    fn add(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.jobs += 1;
        let mut pairs: Vec<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let Some(f) = &job.fault else {
            self.healthy_calls += pairs.len();
            self.healthy_jobs_called += usize::from(!pairs.is_empty());
            return;
        };
        self.faulty += 1;
        let before = self.delays.len();
        let right = calls
            .iter()
            .filter(|c| c.node == f.node && c.detected_at >= f.onset);
        if let Some(first) = right.map(|c| c.detected_at).min() {
            self.detected += 1;
            self.delays.push(first - f.onset);
        }
        let named = self.delays.len() > before;
        // A pair is wrong unless it is the faulty node called at or after onset.
        self.wrong_node_calls += pairs.iter().filter(|&&n| n != f.node || !named).count();
    }
}

/// Both tiers over one set of jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

impl TierPair {
    fn add(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.all.add(job, calls);
        let drains: Vec<&Call> = calls.iter().copied().filter(|c| c.drain).collect();
        self.drain.add(job, &drains);
    }
}

/// The score of a set of calls against the truth.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut s = Score::default();
    for job in jobs {
        let mine: Vec<&Call> = calls.iter().filter(|c| c.job == job.job).collect();
        s.total.add(job, &mine);
        for c in &job.confounders {
            s.by_confounder
                .entry(c.clone())
                .or_default()
                .add(job, &mine);
        }
        let kind = job.fault.as_ref().map_or("healthy", |f| f.kind.as_str());
        s.by_kind
            .entry(kind.to_string())
            .or_default()
            .add(job, &mine);
    }
    s
}

fn delay(t: &Tally) -> String {
    t.median_delay().map_or("-".into(), |d| format!("{d} s"))
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    writeln!(
        f,
        "| {name} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} |",
        t.jobs,
        t.faulty,
        t.detected,
        t.precision(),
        t.recall(),
        delay(t),
        t.healthy_jobs_called,
        t.wrong_node_calls,
    )
}

const HEAD: &str = "| jobs | faulty | detected | precision | recall | median delay | healthy jobs called | wrong-node calls |\n\
|---|---|---|---|---|---|---|---|---|";

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| tier {HEAD}")?;
        row(f, "all calls", &self.total.all)?;
        row(f, "drain tier", &self.total.drain)?;
        writeln!(
            f,
            "\ndrain-tier calls on healthy jobs: {}\n",
            self.total.drain.healthy_calls
        )?;
        for (title, map) in [
            ("confounder", &self.by_confounder),
            ("fault kind", &self.by_kind),
        ] {
            for (tier, pick) in [("all calls", false), ("drain tier", true)] {
                writeln!(f, "\nBy {title}, {tier}:\n\n| {title} {HEAD}")?;
                for (name, pair) in map {
                    row(f, name, if pick { &pair.drain } else { &pair.all })?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> IndependentSpec {
        IndependentSpec {
            jobs: 6,
            min_minutes: 16,
            max_minutes: 20,
            max_nodes: 6,
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
        assert_eq!(a, b);
        assert_eq!(ta, tb);
        assert_ne!(a, c);
    }

    #[test]
    fn rows_are_time_sorted_well_formed_and_name_the_jobs_nodes() {
        let spec = small(3);
        let (out, truth) = bytes(&spec);
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("time,job,node,metric,value"));
        let mut last = i64::MIN;
        let mut rows = 0;
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 5, "{line}");
            let t: i64 = f[0].parse().unwrap();
            assert!(t >= last, "time went back at {line}");
            last = t;
            let v: f64 = f[4].parse().unwrap();
            assert!(v.is_finite() && v >= 0.0, "{line}");
            let job = truth.iter().find(|j| j.job == f[1]).expect("a known job");
            assert!(job.nodes.iter().any(|n| n == f[2]), "{line}");
            rows += 1;
        }
        assert!(rows > 10_000, "only {rows} rows");
    }

    #[test]
    fn faults_start_after_ten_minutes_on_a_node_of_their_job() {
        for seed in 0..20 {
            let (jobs, _) = plan_all(&small(seed));
            for (job, t) in jobs.iter().zip(plan(&small(seed))) {
                if let (Some(f), Some(p)) = (&job.fault, &t.fault) {
                    assert!(f.onset >= 600 && f.onset < job.dur);
                    assert!(t.nodes.contains(&p.node));
                    assert_eq!(p.subtle, SUBTLE_KINDS.contains(&f.kind));
                }
            }
        }
    }

    #[test]
    fn the_fault_mix_follows_minders_table_with_a_subtle_share() {
        let spec = IndependentSpec {
            jobs: 4000,
            fault_fraction: 1.0,
            ..small(5)
        };
        let jobs = plan(&spec);
        let kinds: Vec<&str> = jobs
            .iter()
            .filter_map(|j| j.fault.as_ref())
            .map(|f| f.kind.as_str())
            .collect();
        let share = |k: &str| kinds.iter().filter(|&&x| x == k).count() as f64 / kinds.len() as f64;
        let total: f64 = FAULT_MIX.iter().map(|k| k.1).sum();
        for &(k, w) in FAULT_MIX {
            let want = w / total * (1.0 - SUBTLE_SHARE);
            assert!(
                (share(k) - want).abs() < 0.02 + want * 0.25,
                "{k}: {} vs {want}",
                share(k)
            );
        }
        let subtle: f64 = SUBTLE_KINDS.iter().map(|k| share(k)).sum();
        assert!((subtle - SUBTLE_SHARE).abs() < 0.03, "subtle {subtle}");
        let faulty = plan(&IndependentSpec {
            jobs: 2000,
            ..small(9)
        })
        .iter()
        .filter(|j| j.fault.is_some())
        .count();
        assert!((700..=900).contains(&faulty), "{faulty} faulty of 2000");
    }

    #[test]
    fn each_confounder_is_present_in_most_jobs_and_the_rare_ones_appear() {
        let jobs = plan(&IndependentSpec {
            jobs: 1000,
            ..small(21)
        });
        for &(c, _) in CONFOUNDERS {
            let n = jobs
                .iter()
                .filter(|j| j.confounders.iter().any(|x| x == c))
                .count();
            assert!(n > 500, "{c} in {n} of 1000 jobs");
        }
        for &(c, _) in RARE_CONFOUNDERS {
            assert!(
                jobs.iter().any(|j| j.confounders.iter().any(|x| x == c)),
                "{c} never drawn"
            );
        }
    }

    #[test]
    fn job_sizes_cover_two_three_and_small_jobs_up_to_the_cap() {
        let jobs = plan(&IndependentSpec {
            jobs: 500,
            ..IndependentSpec::new(2)
        });
        let sizes: Vec<usize> = jobs.iter().map(|j| j.nodes.len()).collect();
        for want in [2, 3] {
            assert!(sizes.contains(&want), "no {want}-node job");
        }
        assert!(sizes.iter().any(|&n| (4..=8).contains(&n)));
        assert!(sizes.iter().any(|&n| n > 128) && sizes.iter().all(|&n| n <= 256));
    }

    #[test]
    fn a_hung_job_shows_its_faulty_ecc_gpu_idle_while_peers_spin() {
        let mut rng = Rng::new(1);
        let spec = IndependentSpec {
            fault_fraction: 0.0,
            ..small(1)
        };
        let mut job = plan_job(&mut rng, &spec, 0, 0, &mut 0);
        plan_fault(&mut rng, &mut job, "ecc");
        let f = job.fault.as_ref().unwrap();
        let (h, node) = (f.hangs_at.unwrap(), f.node);
        let peer = (node + 1) % job.nodes.len();
        let t = h + 10;
        let (bad, good) = (sample(&job, node, t, 0.0), sample(&job, peer, t, 0.0));
        assert_eq!(bad[4], 0.0);
        assert!(
            good[3] > 90.0 && good[10] < 1e9,
            "a peer spins with no traffic: {good:?}"
        );
    }

    #[test]
    fn a_slow_faulty_node_slows_the_whole_job_and_its_peers_draw_less_power() {
        let mut rng = Rng::new(4);
        let spec = IndependentSpec {
            fault_fraction: 0.0,
            max_nodes: 4,
            ..small(4)
        };
        let mut job = plan_job(&mut rng, &spec, 0, 0, &mut 0);
        // Only the fault acts: no phases, stalls or groups around onset.
        (job.ckpts, job.evals, job.idle, job.stalls, job.moe) =
            (vec![], vec![], vec![], vec![], vec![]);
        (job.leaf, job.rack, job.lr_at) = (None, None, i64::MAX);
        plan_fault(&mut rng, &mut job, "pcie_downgrade");
        let f = job.fault.as_ref().unwrap();
        let (node, onset, slow) = (f.node, f.onset, f.slow);
        let peer = (node + 1) % job.nodes.len();
        let rates = job_rates(&job);
        let (before, after) = (
            rates[((onset - 60) / GRID) as usize],
            rates[((onset + 60) / GRID) as usize],
        );
        assert!(
            before > 0.95 && after <= slow + 1e-9,
            "rate {before} -> {after}, slow {slow}"
        );
        let (p0, p1) = (
            sample(&job, peer, onset - 60, before),
            sample(&job, peer, onset + 60, after),
        );
        assert!(
            p1[5] < p0[5] * 0.97 && p1[10] < p0[10],
            "peer power {} -> {}",
            p0[5],
            p1[5]
        );
        assert!(p1[3] > p0[3] * 0.9, "a waiting peer's GPUs still read busy");
        let bad = sample(&job, node, onset + 60, after);
        assert!(
            bad[8] < p1[8] * 0.6,
            "the downgraded link carries less: {} vs {}",
            bad[8],
            p1[8]
        );
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
    fn the_scorer_counts_right_wrong_and_healthy_calls_on_a_hand_case() {
        let fault = |node: &str, onset| {
            Some(PlantedFault {
                kind: "ecc".into(),
                node: node.into(),
                onset,
                subtle: false,
            })
        };
        let job = |id: &str, fault, conf: &[&str]| IndependentJob {
            job: id.into(),
            nodes: vec!["a".into(), "b".into()],
            fault,
            confounders: conf.iter().map(|c| c.to_string()).collect(),
        };
        let jobs = vec![
            job("1", fault("a", 100), &["eval"]),
            job("2", fault("b", 100), &[]),
            job("3", None, &["eval"]),
            job("4", fault("a", 100), &[]),
        ];
        let calls = vec![
            call("1", "a", 160, false),
            call("1", "a", 200, true),
            call("2", "b", 50, true),
            call("2", "a", 120, false),
            call("3", "b", 500, true),
            call("3", "b", 510, true),
            call("4", "a", 130, true),
        ];
        let s = score(&jobs, &calls);
        let all = &s.total.all;
        assert_eq!(
            (
                all.faulty,
                all.detected,
                all.healthy_calls,
                all.wrong_node_calls
            ),
            (3, 2, 1, 2)
        );
        assert!((all.precision() - 0.4).abs() < 1e-9);
        assert!((all.recall() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(all.median_delay(), Some(30));
        let drain = &s.total.drain;
        assert_eq!(
            (drain.detected, drain.healthy_calls, drain.wrong_node_calls),
            (2, 1, 1)
        );
        assert_eq!(drain.delays, vec![100, 30]);
        assert_eq!(drain.median_delay(), Some(30));
        let eval = &s.by_confounder["eval"].all;
        assert_eq!(
            (eval.jobs, eval.detected, eval.healthy_jobs_called),
            (2, 1, 1)
        );
        assert_eq!(s.by_kind["ecc"].all.faulty, 3);
        let text = s.to_string();
        assert!(
            text.contains("| all calls | 4 | 3 | 2 | 0.400 | 0.667 | 30 s | 1 | 2 |"),
            "{text}"
        );
    }
}
