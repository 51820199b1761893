//! Training-job metric traces written without reading the detector (issue 45).
//!
//! [`crate::metric_traces`] was written beside `lemon watch`; this generator
//! was written from a brief of how real jobs and faults behave, by someone who
//! never read the detector. It writes a `lemon watch --replay` file
//! (`time,job,node,metric,value`, time non-decreasing) and returns the truth.
//!
//! # The model
//! Every job runs synchronous collectives (data parallel, FSDP, optionally
//! pipeline parallel). Its throughput is the slowest node's: a straggler
//! makes every other node wait inside NCCL kernels, which DCGM counts as
//! "GPU busy", so the waiting nodes keep a high `gpu_util` while their power,
//! memory bandwidth and network traffic fall with the job's throughput. The
//! straggler itself shows what slows it (starved GPUs, capped PCIe, low clock).
//! A dead rank hangs the job: the other nodes spin in a collective (70% of
//! hangs: `gpu_util` near 100, power near idle, no traffic) or block on the
//! host (30%: everything near zero), until the NCCL timeout (8-25 min)
//! kills the job and its rows stop.
//!
//! Faults, about 40% of jobs, exactly one node each, onset after the first
//! 8 minutes. 85% are hard kinds in the proportions of Minder's Table 2
//! (ECC 38.9, PCIe downgrade 6.6, NIC dropout 5.7, GPU card drop 2.0,
//! NVLink error 1.7, AOC/cable 1.1), 15% subtle:
//! * `ecc`: the rank's process dies (XID 48). 60%: all the node's ranks are
//!   torn down (node idle); 40%: one GPU stops (`gpu_util_min` 0) and the
//!   node's other GPUs spin. The job hangs.
//! * `gpu_card_drop`: XID 79, the GPU falls off the bus; half the time the
//!   node's exporter stops emitting GPU metrics at all. The job hangs.
//! * `nvlink_error`, `nic_dropout`: 60% a hang (that node's NVLink or IB
//!   traffic stops first), 40% a degraded link: the node's traffic on that
//!   fabric falls and it becomes a straggler (job 10-35% slower).
//! * `pcie_downgrade`: link trained at x8/x4 or a lower generation; `pcie_tx`
//!   capped at 25-50% of normal, the node a straggler (10-35%).
//! * `aoc_cable`: a flapping cable; every 20-90 s the node's IB link is down
//!   for 10-30 s, pause frames and NIC errors climb, and the job stalls.
//! * subtle `cpu_slow` (a slow or contended host: GPUs starved, CPU high) and
//!   `gpu_throttle` (thermal: SM clock, power down, temperature up, utilisation
//!   unchanged), 8-25% slower, ramping in over 1-5 minutes, no halt.
//!
//! Confounders, each drawn per job with probability 0.6-0.85 (recorded in
//! [`IndependentJob::confounders`]): `checkpoint`, `eval`, `loader_stall`
//! (job-wide drops, each node entering up to 2-30 s apart), `pipeline` (2-4
//! stages of unequal size, each at its own GPU/PCIe/NVLink/IB levels, first
//! and last stages with asymmetric tx/rx), `rank0_extra`, `slow_node`
//! (nodes a few percent slower, hotter or drawing other power for life),
//! `metric_subset`, `unknown_metrics`, `exporter_gap` (1-5 min missing, rate
//! counters spiking on the first sample after), `missing_rows`, `clock_skew`
//! (up to ±4 s per node), `bursty_counters` (PFC/CNP spikes on healthy
//! nodes), `congestion` (another tenant's traffic under one leaf switch of
//! 16 nodes for 2-10 min: those nodes' IB falls, PFC/CNP climb, the job slows).
//! Noise and unaligned scrape phases are always present.
//!
//! A planted fault's `onset` is the earliest timestamp at which any row can
//! show it: the true onset plus the most negative clock skew of the job.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;

/// The metrics the detector knows, then some it does not.
const METRICS: [&str; 19] = [
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
    "gpu_mem_used",
    "nic_errors",
    "DCGM_FI_DEV_XID_ERRORS",
    "node_load1",
];
const KNOWN: usize = 14;
const CPU: usize = 0;
const MEM: usize = 1;
const DISK: usize = 2;
const UTIL: usize = 3;
const UTIL_MIN: usize = 4;
const POWER: usize = 5;
const CLOCK: usize = 6;
const MEM_UTIL: usize = 7;
const PCIE: usize = 8;
const NVLINK: usize = 9;
const IB_TX: usize = 10;
const IB_RX: usize = 11;
const PFC: usize = 12;
const CNP: usize = 13;
const TEMP: usize = 14;
const GPU_MEM: usize = 15;
const NIC_ERR: usize = 16;
const XID: usize = 17;
const LOAD: usize = 18;
/// Metrics a partial exporter may lack.
const OPTIONAL: [usize; 6] = [UTIL_MIN, MEM_UTIL, PCIE, NVLINK, PFC, CNP];
/// Rate counters that spike on the first scrape after an exporter gap.
const COUNTERS: [usize; 7] = [DISK, PCIE, NVLINK, IB_TX, IB_RX, PFC, CNP];
/// GPU metrics an exporter stops emitting when it loses the GPU.
const GPU_METRICS: [usize; 7] = [UTIL, UTIL_MIN, POWER, CLOCK, MEM_UTIL, TEMP, GPU_MEM];

const STEP: i64 = 10;
const BASE_TIME: i64 = 1_790_000_000;
const LEAF: usize = 16;

/// Confounder names, in the order [`Score`] reports them.
pub const CONFOUNDERS: [&str; 13] = [
    "checkpoint",
    "eval",
    "loader_stall",
    "pipeline",
    "rank0_extra",
    "slow_node",
    "metric_subset",
    "unknown_metrics",
    "exporter_gap",
    "missing_rows",
    "clock_skew",
    "bursty_counters",
    "congestion",
];

/// Fault kinds with their weights: Minder's Table 2 (hard, 85%), then subtle (15%).
pub const FAULT_KINDS: [(&str, f64, bool); 8] = [
    ("ecc", 38.9, false),
    ("pcie_downgrade", 6.6, false),
    ("nic_dropout", 5.7, false),
    ("gpu_card_drop", 2.0, false),
    ("nvlink_error", 1.7, false),
    ("aoc_cable", 1.1, false),
    ("cpu_slow", 0.5, true),
    ("gpu_throttle", 0.5, true),
];

/// What to generate. Everything else is drawn from `seed`.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    /// Jobs in the file.
    pub jobs: usize,
    /// Job length, drawn uniformly in minutes.
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// Largest job, in nodes (the smallest is 2).
    pub max_nodes: usize,
    /// Share of jobs with exactly one faulty node.
    pub fault_share: f64,
    /// Share of faults that are subtle (no halt, 8-25% slower).
    pub subtle_share: f64,
    /// Jobs start within this many seconds of each other.
    pub start_spread_s: i64,
}

impl IndependentSpec {
    /// The full size: ~38 jobs of 2-128 nodes, 30-60 min (~3 M rows).
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 60,
            max_nodes: 128,
            fault_share: 0.4,
            subtle_share: 0.15,
            start_spread_s: 3600,
        }
    }
}

/// The fault planted in a job.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    /// Earliest timestamp at which a row can show the fault.
    pub onset: i64,
    pub subtle: bool,
}

/// One generated job and its truth.
#[derive(Debug, Clone, PartialEq)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// A detector's call, as scored.
#[derive(Debug, Clone)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

// ---------------------------------------------------------------- random

/// SplitMix64: small, fast and the same on every platform.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(mix(seed ^ 0x5EED_1E55_0045_0001))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// Inclusive.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1).max(1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// Approximately standard normal (Irwin-Hall of four), bounded tails.
    fn normal(&mut self) -> f64 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.732
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable draw in [0, 1) from a few integers (per-node offsets of job events).
fn hunit(a: u64, b: u64, c: u64) -> f64 {
    let h = mix(mix(mix(a) ^ b.wrapping_mul(0x9E37_79B9)) ^ c.wrapping_mul(0x85EB_CA6B));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

// ---------------------------------------------------------------- plan

#[derive(Clone, Copy, PartialEq, Debug)]
enum EventKind {
    Checkpoint,
    Eval,
    Stall,
}

#[derive(Clone, Debug)]
struct Event {
    kind: EventKind,
    start: i64,
    len: i64,
    /// Nodes enter the event up to this many seconds apart.
    spread: f64,
    id: u64,
}

#[derive(Clone, Debug)]
struct Levels {
    gpu: f64,
    pcie: f64,
    nvlink: f64,
    ib_tx: f64,
    ib_rx: f64,
    mem: f64,
}

#[derive(Clone, Debug)]
struct NodeModel {
    name: String,
    leaf: usize,
    stage: usize,
    rank0: bool,
    skew: i64,
    phase: i64,
    util_off: f64,
    power: f64,
    clock: f64,
    temp: f64,
    metrics: Vec<usize>,
    gap: Option<(i64, i64)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Effect {
    /// The node's ranks die; the job hangs.
    Crash,
    /// One GPU stops; the node's other GPUs spin; the job hangs.
    OneGpu,
    /// The GPU falls off the bus and the exporter loses the GPU metrics.
    GpuGone,
    /// NVLink or IB traffic of the node stops, then the job hangs.
    LinkDead(usize),
    /// A degraded link on this metric: its traffic falls, the node straggles.
    LinkSlow(usize),
    PcieCap,
    Flap,
    CpuSlow,
    Throttle,
}

#[derive(Clone, Debug)]
struct FaultModel {
    kind: &'static str,
    subtle: bool,
    node: usize,
    onset: i64,
    effect: Effect,
    /// Fraction of speed lost by a straggler (0 for a hang).
    drop: f64,
    ramp: i64,
    /// The job is killed this long after onset (hangs only).
    timeout: Option<i64>,
    spin: bool,
    flap_period: i64,
    flap_down: i64,
}

#[derive(Clone, Debug)]
struct Base {
    util: f64,
    idle_w: f64,
    busy_w: f64,
    clock: f64,
    mem_util: f64,
    pcie: f64,
    nvlink: f64,
    ib: f64,
    cpu: f64,
    mem_gib: f64,
    disk: f64,
    gpu_mem: f64,
}

#[derive(Clone, Debug)]
struct Congestion {
    leaf: usize,
    start: i64,
    end: i64,
    ib: f64,
    slow: f64,
}

#[derive(Clone, Debug)]
struct JobModel {
    index: usize,
    id: String,
    start: i64,
    end: i64,
    nodes: Vec<NodeModel>,
    stages: Vec<Levels>,
    base: Base,
    events: Vec<Event>,
    congestion: Option<Congestion>,
    fault: Option<FaultModel>,
    confounders: Vec<&'static str>,
    bursty: bool,
    missing: f64,
    noise: f64,
}

impl JobModel {
    fn has(&self, c: &str) -> bool {
        self.confounders.contains(&c)
    }
    fn truth(&self) -> IndependentJob {
        let min_skew = self.nodes.iter().map(|n| n.skew).min().unwrap_or(0).min(0);
        IndependentJob {
            job: self.id.clone(),
            nodes: self.nodes.iter().map(|n| n.name.clone()).collect(),
            fault: self.fault.as_ref().map(|f| PlantedFault {
                kind: f.kind.to_string(),
                node: self.nodes[f.node].name.clone(),
                onset: f.onset + min_skew,
                subtle: f.subtle,
            }),
            confounders: self.confounders.iter().map(|c| c.to_string()).collect(),
        }
    }
}

fn node_count(rng: &mut Rng, max: usize) -> usize {
    let max = max.max(2) as f64;
    let (lo, hi): (f64, f64) = match rng.unit() {
        u if u < 0.15 => (2.0, 3.0),
        u if u < 0.40 => (4.0, 8.0),
        u if u < 0.80 => (9.0, 32.0),
        // Few jobs reach 128 nodes; most large ones are 33-64.
        u if u < 0.95 => (33.0, 64.0),
        _ => (65.0, 128.0),
    };
    let (lo, hi) = (lo.min(max), hi.min(max));
    (lo.ln() + (hi.ln() - lo.ln()) * rng.unit()).exp().round() as usize
}

fn node_name(global: usize) -> String {
    let rack = (b'a' + (global / 1000 % 26) as u8) as char;
    format!("gpu-{rack}{:03}", global % 1000)
}

fn draw_base(rng: &mut Rng) -> Base {
    let gpus = 8.0;
    Base {
        util: rng.range(82.0, 98.0),
        idle_w: gpus * rng.range(60.0, 90.0),
        busy_w: gpus * rng.range(380.0, 680.0),
        clock: rng.range(1590.0, 1980.0),
        mem_util: rng.range(25.0, 65.0),
        pcie: rng.range(2e9, 2e10),
        nvlink: rng.range(4e10, 2.5e11),
        ib: rng.range(8e9, 4.5e10),
        cpu: rng.range(8.0, 35.0),
        mem_gib: rng.range(180.0, 900.0),
        disk: rng.range(5e6, 4e8),
        gpu_mem: rng.range(40.0, 76.0),
    }
}

fn draw_confounders(rng: &mut Rng) -> Vec<&'static str> {
    CONFOUNDERS
        .iter()
        .copied()
        .filter(|_| rng.chance(rng.clone().range(0.6, 0.85)))
        .collect()
}

fn draw_stages(rng: &mut Rng, n: usize, pipeline: bool) -> (Vec<Levels>, Vec<usize>) {
    let count = if pipeline {
        rng.int(2, 4).min(n as i64) as usize
    } else {
        1
    };
    // Unequal stage sizes: cut points drawn at random, each stage non-empty.
    let mut cuts: BTreeSet<usize> = BTreeSet::new();
    while cuts.len() + 1 < count {
        cuts.insert(rng.int(1, n as i64 - 1) as usize);
    }
    let mut stage_of = Vec::with_capacity(n);
    for i in 0..n {
        stage_of.push(cuts.iter().filter(|&&c| c <= i).count());
    }
    let levels = (0..count)
        .map(|s| {
            if count == 1 {
                return Levels {
                    gpu: 1.0,
                    pcie: 1.0,
                    nvlink: 1.0,
                    ib_tx: 1.0,
                    ib_rx: 1.0,
                    mem: 1.0,
                };
            }
            let ib = rng.range(0.45, 1.6);
            // The first stage sends more activations than it receives, the last the reverse.
            let skew = if s == 0 {
                1.3
            } else if s + 1 == count {
                0.75
            } else {
                1.0
            };
            Levels {
                gpu: rng.range(0.72, 1.0),
                pcie: rng.range(0.5, 1.6),
                nvlink: rng.range(0.6, 1.3),
                ib_tx: ib * skew,
                ib_rx: ib / skew,
                mem: rng.range(0.7, 1.25),
            }
        })
        .collect();
    (levels, stage_of)
}

fn draw_metrics(rng: &mut Rng, subset: bool, force: bool, unknown: &[usize]) -> Vec<usize> {
    let mut metrics: Vec<usize> = (0..KNOWN).collect();
    if subset && (rng.chance(0.35) || force) {
        let drop = rng.int(1, 4);
        for _ in 0..drop {
            let m = OPTIONAL[rng.int(0, OPTIONAL.len() as i64 - 1) as usize];
            metrics.retain(|&x| x != m);
        }
    }
    metrics.extend_from_slice(unknown);
    metrics
}

fn draw_nodes(
    rng: &mut Rng,
    job: &JobModel,
    n: usize,
    first: usize,
    stage_of: &[usize],
) -> Vec<NodeModel> {
    let unknown: Vec<usize> = if job.has("unknown_metrics") {
        let mut some: Vec<usize> = (KNOWN..METRICS.len()).filter(|_| rng.chance(0.6)).collect();
        if some.is_empty() {
            some.push(TEMP);
        }
        some
    } else {
        Vec::new()
    };
    let slow_share = rng.range(0.05, 0.2);
    // A job recorded with a per-node confounder has it on at least one node.
    let forced = [0; 3].map(|_| rng.int(0, n as i64 - 1) as usize);
    (0..n)
        .map(|i| {
            let odd = job.has("slow_node") && (rng.chance(slow_share) || i == forced[0]);
            let skewed = job.has("clock_skew");
            let gapped = rng.chance(0.15) || i == forced[1];
            let gap = (job.has("exporter_gap") && gapped).then(|| {
                let at = rng.int(job.start + 120, job.end - 400);
                (at, at + rng.int(6, 30) * STEP)
            });
            NodeModel {
                name: node_name(first + i),
                leaf: (first + i) / LEAF,
                stage: stage_of[i],
                rank0: i == 0 && job.has("rank0_extra"),
                skew: if skewed { rng.int(-4, 4) } else { 0 },
                phase: rng.int(0, STEP - 1),
                util_off: if odd {
                    rng.range(-6.0, -1.5)
                } else {
                    rng.range(-0.8, 0.8)
                },
                power: if odd {
                    rng.range(0.88, 1.12)
                } else {
                    rng.range(0.98, 1.02)
                },
                clock: if odd { rng.range(0.95, 0.99) } else { 1.0 },
                temp: if odd {
                    rng.range(3.0, 12.0)
                } else {
                    rng.range(-2.0, 2.0)
                },
                metrics: draw_metrics(rng, job.has("metric_subset"), i == forced[2], &unknown),
                gap,
            }
        })
        .collect()
}

fn draw_events(rng: &mut Rng, job: &JobModel) -> Vec<Event> {
    let mut events = Vec::new();
    // Each draw is taken in a fixed order so a seed gives the same events.
    let mut add = |rng: &mut Rng, kind, start: i64, len: (i64, i64), spread: (f64, f64)| {
        let len = rng.int(len.0, len.1);
        let spread = rng.range(spread.0, spread.1);
        let id = rng.next();
        events.push(Event {
            kind,
            start,
            len,
            spread,
            id,
        });
    };
    if job.has("checkpoint") {
        let every = rng.int(8, 20) * 60;
        let len = rng.int(30, 150);
        let mut t = job.start + rng.int(3, 12) * 60;
        while t < job.end {
            add(
                rng,
                EventKind::Checkpoint,
                t,
                (len - 10, len + 10),
                (2.0, 30.0),
            );
            t += every;
        }
    }
    if job.has("eval") {
        for _ in 0..rng.int(1, 3) {
            let at = rng.int(job.start + 300, job.end - 300);
            add(rng, EventKind::Eval, at, (90, 300), (2.0, 25.0));
        }
    }
    if job.has("loader_stall") {
        for _ in 0..rng.int(2, 8) {
            let at = rng.int(job.start + 60, job.end - 60);
            add(rng, EventKind::Stall, at, (10, 45), (1.0, 12.0));
        }
    }
    events
}

fn draw_kind(rng: &mut Rng, subtle_share: f64) -> (&'static str, bool) {
    if rng.chance(subtle_share) {
        return if rng.chance(0.5) {
            ("cpu_slow", true)
        } else {
            ("gpu_throttle", true)
        };
    }
    let total: f64 = FAULT_KINDS.iter().filter(|k| !k.2).map(|k| k.1).sum();
    let mut u = rng.unit() * total;
    for (name, weight, subtle) in FAULT_KINDS.iter().filter(|k| !k.2) {
        if u < *weight {
            return (name, *subtle);
        }
        u -= weight;
    }
    ("ecc", false)
}

fn draw_fault(rng: &mut Rng, spec: &IndependentSpec, job: &JobModel) -> Option<FaultModel> {
    if !rng.chance(spec.fault_share) {
        return None;
    }
    let (kind, subtle) = draw_kind(rng, spec.subtle_share);
    let earliest = job.start + 8 * 60 + 30;
    let onset = rng.int(earliest, (job.end - 300).max(earliest));
    let hard_hang = rng.chance(0.6);
    let effect = match kind {
        "ecc" if rng.chance(0.6) => Effect::Crash,
        "ecc" => Effect::OneGpu,
        "gpu_card_drop" => Effect::GpuGone,
        "nvlink_error" if hard_hang => Effect::LinkDead(NVLINK),
        "nvlink_error" => Effect::LinkSlow(NVLINK),
        "nic_dropout" if hard_hang => Effect::LinkDead(IB_TX),
        "nic_dropout" => Effect::LinkSlow(IB_TX),
        "pcie_downgrade" => Effect::PcieCap,
        "aoc_cable" => Effect::Flap,
        "cpu_slow" => Effect::CpuSlow,
        _ => Effect::Throttle,
    };
    let hangs = matches!(
        effect,
        Effect::Crash | Effect::OneGpu | Effect::GpuGone | Effect::LinkDead(_)
    );
    Some(FaultModel {
        kind,
        subtle,
        node: rng.int(0, job.nodes.len() as i64 - 1) as usize,
        onset,
        effect,
        drop: if subtle {
            rng.range(0.08, 0.25)
        } else if hangs {
            0.0
        } else {
            rng.range(0.10, 0.35)
        },
        ramp: if subtle { rng.int(60, 300) } else { 0 },
        timeout: hangs.then(|| rng.int(8 * 60, 25 * 60)),
        spin: rng.chance(0.7),
        flap_period: rng.int(20, 90),
        flap_down: rng.int(10, 30),
    })
}

fn draw_job(spec: &IndependentSpec, index: usize, first: usize) -> JobModel {
    let mut rng = Rng::new(spec.seed.wrapping_mul(0x1000_0001) ^ index as u64);
    let n = node_count(&mut rng, spec.max_nodes);
    let start = BASE_TIME + rng.int(0, spec.start_spread_s);
    let minutes = rng.int(spec.min_minutes, spec.max_minutes.max(spec.min_minutes));
    let confounders = draw_confounders(&mut rng);
    let (stages, stage_of) = draw_stages(&mut rng, n, confounders.contains(&"pipeline"));
    let mut job = JobModel {
        index,
        id: format!("{}", 5_100_001 + index),
        start,
        end: start + minutes * 60,
        nodes: Vec::new(),
        stages,
        base: draw_base(&mut rng),
        events: Vec::new(),
        congestion: None,
        fault: None,
        bursty: confounders.contains(&"bursty_counters"),
        missing: 0.0,
        noise: rng.range(0.01, 0.04),
        confounders,
    };
    job.nodes = draw_nodes(&mut rng, &job, n, first, &stage_of);
    job.events = draw_events(&mut rng, &job);
    if job.has("missing_rows") {
        job.missing = rng.range(0.002, 0.015);
    }
    if job.has("congestion") {
        let leaf = job.nodes[rng.int(0, n as i64 - 1) as usize].leaf;
        let at = rng.int(job.start + 60, job.end - 200);
        job.congestion = Some(Congestion {
            leaf,
            start: at,
            end: at + rng.int(120, 600),
            ib: rng.range(0.55, 0.85),
            slow: rng.range(0.85, 0.96),
        });
    }
    job.fault = draw_fault(&mut rng, spec, &job);
    job
}

fn plan(spec: &IndependentSpec) -> Vec<JobModel> {
    let mut gaps = Rng::new(spec.seed ^ 0xC1A5_7E25);
    let mut next = gaps.int(0, 200) as usize;
    (0..spec.jobs)
        .map(|i| {
            let job = draw_job(spec, i, next);
            next += job.nodes.len() + gaps.int(0, 40) as usize;
            job
        })
        .collect()
}

// ---------------------------------------------------------------- state

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Train,
    Event(EventKind),
    HangSpin,
    HangIdle,
    Dead,
}

/// The job's state at true time `s` as node `k` sees it.
struct Moment {
    mode: Mode,
    /// Job throughput relative to healthy (the slowest node sets it).
    pace: f64,
    /// This node's own slow-down, fault severity ramped in (0 before onset).
    own: f64,
    congested: bool,
    flap_down: bool,
    fault_here: bool,
    fault_active: bool,
}

fn event_mode(job: &JobModel, k: usize, s: i64) -> Option<EventKind> {
    job.events.iter().find_map(|e| {
        let delay = (hunit(e.id, k as u64, 7) * e.spread) as i64;
        let exit = (hunit(e.id, k as u64, 9) * e.spread * 0.5) as i64;
        (s >= e.start + delay && s < e.start + e.len + exit).then_some(e.kind)
    })
}

fn job_end(job: &JobModel) -> i64 {
    match &job.fault {
        Some(f) => f.timeout.map_or(job.end, |t| job.end.min(f.onset + t)),
        None => job.end,
    }
}

fn moment(job: &JobModel, k: usize, s: i64) -> Moment {
    let mut m = Moment {
        mode: Mode::Train,
        pace: 1.0,
        own: 0.0,
        congested: false,
        flap_down: false,
        fault_here: false,
        fault_active: false,
    };
    if let Some(c) = &job.congestion {
        if s >= c.start && s < c.end {
            m.pace *= c.slow;
            m.congested = job.nodes[k].leaf == c.leaf;
        }
    }
    if let Some(f) = &job.fault {
        m.fault_here = f.node == k;
        if s >= f.onset {
            m.fault_active = true;
            fault_moment(job, f, k, s, &mut m);
        }
    }
    if m.mode == Mode::Train {
        if let Some(kind) = event_mode(job, k, s) {
            m.mode = Mode::Event(kind);
        }
    }
    m
}

fn fault_moment(job: &JobModel, f: &FaultModel, k: usize, s: i64, m: &mut Moment) {
    let since = s - f.onset;
    if f.timeout.is_some() {
        // Other ranks reach the next collective within a step or two.
        let lag = (hunit(job.index as u64, k as u64, 3) * 20.0) as i64;
        if m.fault_here {
            m.mode = match f.effect {
                Effect::OneGpu | Effect::LinkDead(_) => Mode::HangSpin,
                _ => Mode::Dead,
            };
        } else if since >= lag {
            m.mode = if f.spin {
                Mode::HangSpin
            } else {
                Mode::HangIdle
            };
        }
        return;
    }
    let ramp = if f.ramp > 0 {
        (since as f64 / f.ramp as f64).min(1.0)
    } else {
        1.0
    };
    let drop = f.drop * ramp;
    if f.effect == Effect::Flap {
        m.flap_down = since % f.flap_period < f.flap_down;
        if m.flap_down {
            m.pace *= 0.05;
        }
        return;
    }
    m.pace *= 1.0 - drop;
    if m.fault_here {
        m.own = drop;
    }
}

// ---------------------------------------------------------------- values

/// What a node is doing, relative to its healthy training levels.
struct Act {
    util: f64,
    compute: f64,
    pcie: f64,
    nvlink: f64,
    ib: f64,
    cpu: f64,
    disk: f64,
    clock: f64,
    temp_up: f64,
}

fn mode_activity(mode: Mode, b: &Base, rng: &mut Rng, a: &mut Act) {
    match mode {
        Mode::Train => {}
        Mode::Event(EventKind::Checkpoint) => {
            a.util = rng.range(0.0, 12.0);
            a.compute = 0.05;
            (a.pcie, a.nvlink, a.ib) = (1.8, 0.02, 0.03);
            a.disk = rng.range(8e8, 5e9);
            a.cpu += 25.0;
        }
        Mode::Event(EventKind::Eval) => {
            a.util *= 0.7;
            a.compute *= 0.65;
            a.ib *= 0.3;
            a.nvlink *= 0.5;
            a.disk *= 2.0;
        }
        Mode::Event(EventKind::Stall) => {
            a.util *= rng.range(0.1, 0.35);
            a.compute = 0.15;
            a.pcie *= 0.3;
            (a.nvlink, a.ib) = (0.05, 0.05);
            a.cpu += 35.0;
            a.disk *= 3.0;
        }
        Mode::HangSpin => {
            a.util = rng.range(98.5, 100.0);
            a.compute = 0.12;
            (a.pcie, a.nvlink, a.ib) = (0.005, 0.0, 0.001);
            a.cpu = b.cpu * 0.3;
            a.disk = 0.0;
        }
        Mode::HangIdle | Mode::Dead => {
            a.util = 0.0;
            a.compute = 0.0;
            (a.pcie, a.nvlink, a.ib) = (0.001, 0.0, 0.0005);
            // Hung ranks keep their NCCL watchdog threads polling; dead ones are gone.
            a.cpu = b.cpu * if mode == Mode::Dead { 0.05 } else { 0.4 };
            a.disk = 0.0;
        }
    }
}

fn sample(job: &JobModel, k: usize, s: i64, rng: &mut Rng) -> [f64; 19] {
    let m = moment(job, k, s);
    let node = &job.nodes[k];
    let b = &job.base;
    let lv = &job.stages[node.stage];
    let mut v = [0.0; 19];
    let pace = m.pace;
    let mut a = Act {
        // Waiting in NCCL counts as busy: the GPUs' utilisation barely follows the pace.
        util: (b.util * lv.gpu + node.util_off) * (0.93 + 0.07 * pace),
        compute: pace,
        pcie: pace,
        nvlink: pace,
        ib: pace,
        cpu: b.cpu,
        disk: b.disk,
        clock: b.clock * node.clock,
        temp_up: 0.0,
    };
    if m.fault_here && m.fault_active {
        apply_straggler(job, &m, &mut a);
    }
    mode_activity(m.mode, b, rng, &mut a);
    if node.rank0 {
        a.cpu += 22.0 + 8.0 * rng.unit();
        a.disk *= 4.0;
        a.util -= 3.0;
    }
    if m.fault_here && m.fault_active {
        apply_link_faults(job, &m, &mut a);
    }
    let noise = |rng: &mut Rng, x: f64| x * (1.0 + job.noise * rng.normal());
    v[UTIL] = noise(rng, a.util).clamp(0.0, 100.0);
    v[UTIL_MIN] = (v[UTIL] - rng.range(1.0, 6.0)).max(0.0);
    let dead = m.mode == Mode::Dead;
    // A GPU holding a hung context idles above one whose process exited.
    let floor = b.idle_w * if dead { 0.9 } else { 1.25 };
    let watts = floor + (b.busy_w - floor) * a.compute * lv.gpu;
    v[POWER] = noise(rng, watts * node.power);
    v[CLOCK] = (a.clock + 15.0 * rng.normal()).round();
    v[MEM_UTIL] = noise(rng, b.mem_util * lv.mem * a.compute);
    v[PCIE] = noise(rng, b.pcie * lv.pcie * a.pcie);
    v[NVLINK] = noise(rng, b.nvlink * lv.nvlink * a.nvlink);
    v[IB_TX] = noise(rng, b.ib * lv.ib_tx * a.ib);
    v[IB_RX] = noise(rng, b.ib * lv.ib_rx * a.ib);
    v[CPU] = noise(rng, a.cpu).clamp(0.0, 100.0);
    // A dead rank's host and device memory are freed.
    let held = if dead { 0.08 } else { 1.0 };
    v[MEM] = b.mem_gib * held + if node.rank0 { 120.0 } else { 0.0 } + 2.0 * rng.normal();
    v[DISK] = noise(rng, a.disk);
    v[TEMP] = 32.0 + 38.0 * (v[POWER] / b.busy_w).min(1.2) + node.temp + a.temp_up + rng.normal();
    v[GPU_MEM] = b.gpu_mem * held + 0.3 * rng.normal();
    v[LOAD] = noise(rng, a.cpu * 0.9);
    counters(job, &m, rng, &mut v);
    v
}

fn apply_straggler(job: &JobModel, m: &Moment, a: &mut Act) {
    let Some(f) = &job.fault else { return };
    match f.effect {
        // A starved GPU idles between kernels.
        Effect::CpuSlow | Effect::PcieCap | Effect::LinkSlow(_) => {
            a.util *= 1.0 - m.own;
            if f.effect == Effect::CpuSlow {
                a.cpu = (a.cpu + 55.0 * m.own / f.drop.max(0.01)).min(99.0);
            }
        }
        // Throttled GPUs stay busy, just slower: clock and power fall, heat rises.
        Effect::Throttle => {
            a.util = (a.util / (0.93 + 0.07 * m.pace)).min(99.5);
            a.clock *= 1.0 - m.own;
            a.compute = (1.0 - m.own * 1.3).max(0.3);
            a.temp_up = 60.0 * m.own;
        }
        _ => {}
    }
}

fn apply_link_faults(job: &JobModel, m: &Moment, a: &mut Act) {
    let Some(f) = &job.fault else { return };
    match f.effect {
        Effect::PcieCap => a.pcie = a.pcie.min(0.25 + f.drop * 0.5),
        Effect::LinkSlow(NVLINK) | Effect::LinkDead(NVLINK) => {
            a.nvlink *= if f.timeout.is_some() { 0.0 } else { 0.3 }
        }
        Effect::LinkSlow(_) => a.ib *= 0.875 - f.drop * 0.5,
        Effect::LinkDead(_) => a.ib = 0.0,
        Effect::Flap if m.flap_down => a.ib = 0.0,
        _ => {}
    }
}

fn counters(job: &JobModel, m: &Moment, rng: &mut Rng, v: &mut [f64; 19]) {
    v[PFC] = rng.range(0.0, 4.0);
    v[CNP] = rng.range(0.0, 2.0);
    if job.bursty && rng.chance(0.03) {
        v[PFC] += rng.range(200.0, 6000.0);
        v[CNP] += rng.range(50.0, 2500.0);
    }
    if m.congested {
        let ib = job.congestion.as_ref().map_or(1.0, |c| c.ib);
        v[IB_TX] *= ib;
        v[IB_RX] *= ib;
        v[PFC] += rng.range(300.0, 3000.0);
        v[CNP] += rng.range(100.0, 2000.0);
    }
    let faulty = m.fault_here && m.fault_active;
    let kind = job.fault.as_ref().map(|f| f.effect);
    if faulty && matches!(kind, Some(Effect::Flap | Effect::LinkSlow(IB_TX))) {
        v[PFC] += rng.range(100.0, 4000.0);
        v[NIC_ERR] = rng.range(1.0, 40.0).round();
    }
    if faulty && matches!(kind, Some(Effect::LinkDead(IB_TX))) {
        v[NIC_ERR] = rng.range(20.0, 200.0).round();
    }
    v[XID] = match kind {
        Some(Effect::Crash | Effect::OneGpu) if faulty => 48.0,
        Some(Effect::GpuGone) if faulty => 79.0,
        Some(Effect::LinkDead(NVLINK) | Effect::LinkSlow(NVLINK)) if faulty => 74.0,
        _ => 0.0,
    };
    if faulty && kind == Some(Effect::OneGpu) {
        v[UTIL_MIN] = 0.0;
        v[UTIL] *= 7.0 / 8.0;
    }
}

// ---------------------------------------------------------------- rows

struct Row {
    t: i64,
    job: u32,
    node: u32,
    metric: u8,
    value: f64,
}

fn node_rows(job: &JobModel, k: usize, rows: &mut Vec<Row>, rng: &mut Rng) {
    let node = &job.nodes[k];
    let end = job_end(job);
    let gpu_gone = job.fault.as_ref().is_some_and(|f| {
        f.node == k && f.effect == Effect::GpuGone && hunit(job.index as u64, 11, 13) < 0.5
    });
    let onset = job.fault.as_ref().map_or(i64::MAX, |f| f.onset);
    let mut after_gap = false;
    let mut s = job.start + node.phase;
    while s < end {
        if node.gap.is_some_and(|(a, b)| s >= a && s < b) {
            after_gap = true;
            s += STEP;
            continue;
        }
        let mut v = sample(job, k, s, rng);
        if after_gap {
            // A rate computed over the whole gap by a naive exporter.
            let burst = rng.range(2.0, 6.0);
            COUNTERS.iter().for_each(|&c| v[c] *= burst);
            after_gap = false;
        }
        for &metric in &node.metrics {
            if gpu_gone && s >= onset && GPU_METRICS.contains(&metric) {
                continue;
            }
            if job.missing > 0.0 && rng.chance(job.missing) {
                continue;
            }
            rows.push(Row {
                t: s + node.skew,
                job: job.index as u32,
                node: k as u32,
                metric: metric as u8,
                value: v[metric].max(0.0),
            });
        }
        s += STEP;
    }
}

fn push_int(buf: &mut Vec<u8>, mut x: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Two decimals below 1e5, whole numbers above; fast and exact to print.
fn push_value(buf: &mut Vec<u8>, v: f64) {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    if v >= 1e5 {
        push_int(buf, v.round() as u64);
        return;
    }
    let cents = (v * 100.0).round() as u64;
    push_int(buf, cents / 100);
    buf.push(b'.');
    buf.push(b'0' + (cents % 100 / 10) as u8);
    buf.push(b'0' + (cents % 10) as u8);
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(
    spec: &IndependentSpec,
    out: &mut impl Write,
) -> std::io::Result<Vec<IndependentJob>> {
    let jobs = plan(spec);
    let mut rows = Vec::new();
    for job in &jobs {
        let mut rng = Rng::new(spec.seed ^ mix(0xDA7A ^ job.index as u64));
        for k in 0..job.nodes.len() {
            node_rows(job, k, &mut rows, &mut rng);
        }
    }
    rows.sort_unstable_by_key(|r| (r.t, r.job, r.node, r.metric));
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for r in &rows {
        let job = &jobs[r.job as usize];
        push_int(&mut buf, r.t as u64);
        buf.push(b',');
        buf.extend_from_slice(job.id.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(job.nodes[r.node as usize].name.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(METRICS[r.metric as usize].as_bytes());
        buf.push(b',');
        push_value(&mut buf, r.value);
        buf.push(b'\n');
        if buf.len() > (1 << 20) - 256 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(jobs.iter().map(JobModel::truth).collect())
}

/// The truth alone, without writing rows (cheap: for statistics over many seeds).
pub fn truth(spec: &IndependentSpec) -> Vec<IndependentJob> {
    plan(spec).iter().map(JobModel::truth).collect()
}

/// The truth as JSON (no serde in this crate's normal dependencies).
pub fn truth_json(jobs: &[IndependentJob]) -> String {
    let s = |x: &str| {
        let mut o = String::from("\"");
        for c in x.chars() {
            match c {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o.push('"');
        o
    };
    let list = |xs: &[String]| xs.iter().map(|x| s(x)).collect::<Vec<_>>().join(",");
    let mut out = String::from("[\n");
    for (i, j) in jobs.iter().enumerate() {
        let fault = match &j.fault {
            None => "null".to_string(),
            Some(f) => format!(
                "{{\"kind\":{},\"node\":{},\"onset\":{},\"subtle\":{}}}",
                s(&f.kind),
                s(&f.node),
                f.onset,
                f.subtle
            ),
        };
        out.push_str(&format!(
            "{{\"job\":{},\"nodes\":[{}],\"fault\":{},\"confounders\":[{}]}}{}\n",
            s(&j.job),
            list(&j.nodes),
            fault,
            list(&j.confounders),
            if i + 1 < jobs.len() { "," } else { "" }
        ));
    }
    out.push_str("]\n");
    out
}

// ---------------------------------------------------------------- score

/// Counts for one slice of the jobs (all, one confounder, one fault kind).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    /// Faulty jobs whose faulty node was called at or after onset.
    pub found: usize,
    /// Distinct (job, node) calls, and how many of them were right.
    pub calls: usize,
    pub right: usize,
    pub healthy_called: usize,
    /// Calls on a faulty job naming another node, or the faulty node before onset.
    pub wrong_node: usize,
    pub drain_on_healthy: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn precision(&self) -> f64 {
        if self.calls == 0 {
            1.0
        } else {
            self.right as f64 / self.calls as f64
        }
    }
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.found as f64 / self.faulty as f64
        }
    }
    /// Adds `t`'s counts to these (scores of several seeds or slices).
    pub fn add(&mut self, t: &Tally) {
        self.jobs += t.jobs;
        self.faulty += t.faulty;
        self.found += t.found;
        self.calls += t.calls;
        self.right += t.right;
        self.healthy_called += t.healthy_called;
        self.wrong_node += t.wrong_node;
        self.drain_on_healthy += t.drain_on_healthy;
        self.delays.extend_from_slice(&t.delays);
    }

    /// Median delay from onset to the first right call (seconds), if any.
    pub fn median_delay(&self) -> Option<f64> {
        let mut d = self.delays.clone();
        if d.is_empty() {
            return None;
        }
        d.sort_unstable();
        let n = d.len();
        Some(if n % 2 == 1 {
            d[n / 2] as f64
        } else {
            (d[n / 2 - 1] + d[n / 2]) as f64 / 2.0
        })
    }
}

/// The scorer's result; `Display` prints markdown tables.
#[derive(Debug, Clone, Default)]
pub struct Score {
    pub all: Tally,
    /// Calls naming a job that is not in the truth.
    pub unknown_job_calls: usize,
    pub by_confounder: BTreeMap<String, Tally>,
    pub by_kind: BTreeMap<String, Tally>,
}

/// Scores calls: a call is right when it names the faulty node of its job at or after onset.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    // First call per (job, node); a node counts once even if called again.
    let mut first: BTreeMap<(&str, &str), (i64, bool)> = BTreeMap::new();
    for c in calls {
        let e = first
            .entry((c.job.as_str(), c.node.as_str()))
            .or_insert((c.detected_at, c.drain));
        e.0 = e.0.min(c.detected_at);
        e.1 |= c.drain;
    }
    let mut score = Score::default();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    score.unknown_job_calls = first.keys().filter(|(j, _)| !known.contains(j)).count();
    for job in jobs {
        let mine: Vec<(&str, i64, bool)> = first
            .range((job.job.as_str(), "")..)
            .take_while(|((j, _), _)| *j == job.job)
            .map(|((_, n), (t, d))| (*n, *t, *d))
            .collect();
        let tally = tally_job(job, &mine);
        score.all.add(&tally);
        for c in &job.confounders {
            score
                .by_confounder
                .entry(c.clone())
                .or_default()
                .add(&tally);
        }
        if let Some(f) = &job.fault {
            score.by_kind.entry(f.kind.clone()).or_default().add(&tally);
        }
    }
    score.all.calls += score.unknown_job_calls;
    score
}

fn tally_job(job: &IndependentJob, calls: &[(&str, i64, bool)]) -> Tally {
    let mut t = Tally {
        jobs: 1,
        calls: calls.len(),
        ..Tally::default()
    };
    match &job.fault {
        None => {
            t.healthy_called = usize::from(!calls.is_empty());
            t.drain_on_healthy = usize::from(calls.iter().any(|c| c.2));
        }
        Some(f) => {
            t.faulty = 1;
            for &(node, at, _) in calls {
                if node == f.node && at >= f.onset {
                    t.right += 1;
                    t.found = 1;
                    t.delays.push(at - f.onset);
                } else {
                    t.wrong_node += 1;
                }
            }
        }
    }
    t
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    let delay = t
        .median_delay()
        .map_or("-".to_string(), |d| format!("{d:.0}"));
    writeln!(
        f,
        "| {name} | {} | {} | {:.3} | {:.3} ({}/{}) | {delay} | {} | {} | {} |",
        t.jobs,
        t.calls,
        t.precision(),
        t.recall(),
        t.found,
        t.faulty,
        t.healthy_called,
        t.wrong_node,
        t.drain_on_healthy
    )
}

const HEADER: &str = "| jobs | calls | precision | recall | median delay (s) | healthy jobs called | wrong-node calls | drain calls on healthy jobs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|";

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| slice {HEADER}")?;
        row(f, "all", &self.all)?;
        if self.unknown_job_calls > 0 {
            writeln!(
                f,
                "\nCalls on jobs not in the truth: {}",
                self.unknown_job_calls
            )?;
        }
        writeln!(f, "\n| confounder {HEADER}")?;
        for (name, t) in &self.by_confounder {
            row(f, name, t)?;
        }
        writeln!(f, "\n| fault kind {HEADER}")?;
        for (name, t) in &self.by_kind {
            row(f, name, t)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
