//! Held-out metric traces of distributed training jobs (issue 45), written
//! from a brief of how real jobs and faults behave by an engineer who has not
//! read `lemon watch`'s detector, and the scorer of its calls.
//!
//! # The model of a job
//!
//! A job is synchronous training (data parallel / FSDP, optionally pipeline
//! stages, optionally MoE all-to-all) on 2 to 256 nodes of 8 GPUs and 8 HCAs.
//! Every step waits for the slowest node, so what one node does shows on all:
//!
//! * Each node's step time is split into compute, host idle (the GPU waits for
//!   the CPU or the data loader), transfer, and spin: time inside a collective
//!   waiting for the others. NCCL spins in a kernel, so spin counts as GPU
//!   *utilisation* but draws little *power*. A straggler therefore shows as
//!   lower power (not lower utilisation) on every other node, while the slow
//!   node itself keeps computing.
//! * The job's slowdown is the largest slowdown of any of its nodes plus any
//!   fabric congestion; all traffic rates (IB, NVLink, PCIe, disk) scale with
//!   the step rate, the same on every node, since the bytes per step are fixed.
//! * Pipeline stages (2 to 4, unequal sizes) get their own levels of GPU
//!   utilisation (bubbles), power, PCIe, NVLink, IB tx/rx (first stages send
//!   activations, last stages receive them) and memory; rank 0's node has
//!   extra CPU, memory and disk and a little more host idle.
//! * Job-wide phases hit every node, each shifted by its own jitter of a few
//!   to a few tens of seconds: checkpoints (sharded: everyone writes; or rank 0
//!   writes while the others spin in a barrier), evaluation (forward only,
//!   little traffic) and data-loader stalls (GPUs idle, CPU busy).
//!
//! # The model of a fault (Minder's Table 2 mix, plus ~15% subtle)
//!
//! * `ecc_error`, `gpu_card_drop`: the rank dies. Its node's GPUs go idle (all
//!   of them when the local agent kills its workers, or one while the other 7
//!   spin); a dropped card disappears from the node's sums. Every other node
//!   hangs in the collective: utilisation stays high (spin), power falls to
//!   near idle, traffic stops. After the NCCL timeout (5, 10 or 30 minutes)
//!   the job ends, or restarts from its checkpoint without the node (the node
//!   is drained mid-job and stops reporting).
//! * `nic_dropout`: mostly a hang as above in which the node's IB traffic is
//!   exactly zero; otherwise NCCL carries on over 7 rails, the node shows link
//!   errors, pause frames and CNPs, and the job slows a little.
//! * `nvlink_error`: a hang, or NCCL falls back to PCIe inside the node: its
//!   NVLink traffic nearly stops, its PCIe traffic triples, the job slows 20-40%.
//! * `pcie_downgrade`: the link trains at half width; the node's PCIe traffic
//!   is capped and its transfers take longer; the job slows 10-35%.
//! * `aoc_cable`: a flapping optical cable: in bursts the node retransmits
//!   (more IB bytes), pauses and counts link errors; the job slows while it flaps.
//! * Subtle (`thermal_throttle`, `slow_host`): a GPU clock or CPU throughput
//!   drop of 8-25% with no halt. A throttled node keeps its utilisation but
//!   runs lower clocks and hotter; a slow host idles its GPUs and burns CPU.
//!
//! Onsets fall between the 8th minute and 8 minutes before the job's end.
//!
//! # Confounders (drawn per job, recorded by name in the truth)
//!
//! `checkpoint`, `eval`, `loader_stall`, `pipeline`, `moe_alltoall`,
//! `rank0_extra`, `slow_nodes`, `hot_nodes`, `metric_subset`,
//! `unknown_metrics`, `exporter_gap`, `missing_rows`, `clock_skew`,
//! `exporter_15s`, `bursty_counters`, `leaf_congestion`, and, after a fault,
//! `restart` with `drained_mid_job`.

use std::fmt;
use std::io::{self, Write};

/// The metric names, the first [`KNOWN`] of which are the detector's vocabulary.
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
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "node_load1",
];
const KNOWN: usize = 14;
/// Metrics an older exporter does not have.
const SUBSET_MISSING: [usize; 5] = [4, 6, 9, 12, 13];
/// Rate metrics computed from counters: the first scrape after a gap divides
/// the whole gap's bytes by one interval.
const COUNTERS: [usize; 8] = [2, 8, 9, 10, 11, 12, 13, 16];
const GPUS: f64 = 8.0;
const NODES_PER_LEAF: usize = 16;

/// What to generate.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// Job length is drawn uniformly in `min_minutes..=max_minutes`.
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// The largest job (jobs are capped to it; at least 2).
    pub max_nodes: usize,
    /// Share of jobs with exactly one faulty node.
    pub fault_share: f64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 60,
            max_nodes: 256,
            fault_share: 0.4,
        }
    }
}

/// The faulty node of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    /// Unix seconds (true time, not the node's skewed clock).
    pub onset: i64,
    pub subtle: bool,
}

/// One job's truth.
#[derive(Debug, Clone, PartialEq)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// A call of the detector under test.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// A small deterministic generator (SplitMix64): the tests crate has no rand.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// Inclusive on both ends.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
    fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Ecc,
    PcieDowngrade,
    NicDropout,
    GpuCardDrop,
    NvlinkError,
    AocCable,
    ThermalThrottle,
    SlowHost,
}

/// Minder's Table 2 shares of the loud faults.
const LOUD: [(Kind, f64); 6] = [
    (Kind::Ecc, 38.9),
    (Kind::PcieDowngrade, 6.6),
    (Kind::NicDropout, 5.7),
    (Kind::GpuCardDrop, 2.0),
    (Kind::NvlinkError, 1.7),
    (Kind::AocCable, 1.1),
];
const SUBTLE_SHARE: f64 = 0.15;

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ecc => "ecc_error",
            Kind::PcieDowngrade => "pcie_downgrade",
            Kind::NicDropout => "nic_dropout",
            Kind::GpuCardDrop => "gpu_card_drop",
            Kind::NvlinkError => "nvlink_error",
            Kind::AocCable => "aoc_cable",
            Kind::ThermalThrottle => "thermal_throttle",
            Kind::SlowHost => "slow_host",
        }
    }
    fn subtle(self) -> bool {
        matches!(self, Kind::ThermalThrottle | Kind::SlowHost)
    }
    fn draw(rng: &mut Rng) -> Kind {
        if rng.chance(SUBTLE_SHARE) {
            return if rng.chance(0.5) {
                Kind::ThermalThrottle
            } else {
                Kind::SlowHost
            };
        }
        let total: f64 = LOUD.iter().map(|(_, w)| w).sum();
        let mut x = rng.range(0.0, total);
        for (kind, w) in LOUD {
            if x < w {
                return kind;
            }
            x -= w;
        }
        Kind::Ecc
    }
}

/// What happens to the job once the fault's rank is gone.
#[derive(Debug, Clone, Copy, PartialEq)]
enum After {
    End,
    RestartWithout,
}

#[derive(Debug, Clone)]
struct FaultPlan {
    kind: Kind,
    node: usize,
    onset: i64,
    /// `Some(until)`: the job hangs in a collective until then.
    hang_until: Option<i64>,
    after: After,
    /// A straggler's own slowdown (fraction of a step).
    slow: f64,
    /// The dying rank takes its node's other 7 workers with it.
    whole_node_idle: bool,
    /// Flapping cable: on for `flap.0` s out of every `flap.1` s.
    flap: (i64, i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    CheckpointSharded,
    CheckpointRank0,
    Eval,
    Stall,
    Reload,
}

#[derive(Debug, Clone)]
struct Event {
    phase: Phase,
    from: i64,
    to: i64,
}

/// Per-stage multipliers of a pipeline stage.
#[derive(Debug, Clone)]
struct Stage {
    bubble: f64,
    power: f64,
    pcie: f64,
    nvlink: f64,
    ib_tx: f64,
    ib_rx: f64,
    mem: f64,
}

impl Stage {
    fn flat() -> Self {
        Stage {
            bubble: 0.0,
            power: 1.0,
            pcie: 1.0,
            nvlink: 1.0,
            ib_tx: 1.0,
            ib_rx: 1.0,
            mem: 1.0,
        }
    }
}

/// Job-level base levels (node sums).
#[derive(Debug, Clone)]
struct Levels {
    compute: f64,
    idle: f64,
    cpu: f64,
    mem_gib: f64,
    disk: f64,
    pidle: f64,
    pmax: f64,
    clock: f64,
    mem_util: f64,
    pcie: f64,
    nvlink: f64,
    ib: f64,
    pfc: f64,
    cnp: f64,
    gpu_mem_gib: f64,
    ib_noise: f64,
}

#[derive(Debug, Clone)]
struct NodePlan {
    name: String,
    leaf: usize,
    stage: usize,
    rank0: bool,
    /// Whole-life slowdown (a few percent on slow nodes).
    speed: f64,
    power_f: f64,
    temp_off: f64,
    skew: i64,
    interval: i64,
    scrape_phase: i64,
    subset: bool,
    unknown: bool,
    gaps: Vec<(i64, i64)>,
    /// Per-event jitter, seconds.
    jitter: Vec<i64>,
}

#[derive(Debug, Clone)]
struct JobPlan {
    id: String,
    start: i64,
    /// Seconds after `start` when the job stops (hang timeout or wall time).
    end: i64,
    nodes: Vec<NodePlan>,
    stages: Vec<Stage>,
    levels: Levels,
    events: Vec<Event>,
    /// The slowest node's whole-life slowdown.
    max_speed: f64,
    /// (leaf, from, to, slowdown)
    congestion: Option<(usize, i64, i64, f64)>,
    bursty: bool,
    missing_rows: f64,
    fault: Option<FaultPlan>,
    confounders: Vec<String>,
}

fn draw_size(rng: &mut Rng, max: usize) -> usize {
    let x = rng.unit();
    let n = if x < 0.12 {
        2
    } else if x < 0.2 {
        3
    } else if x < 0.45 {
        rng.int(4, 8)
    } else if x < 0.75 {
        rng.int(9, 32)
    } else if x < 0.92 {
        rng.int(33, 64)
    } else if x < 0.99 {
        rng.int(65, 128)
    } else {
        rng.int(129, 256)
    };
    (n as usize).min(max).max(2)
}

fn node_name(index: usize) -> String {
    let letter = (b'a' + (index / 1000 % 26) as u8) as char;
    format!("gpu-{letter}{:03}", index % 1000)
}

fn draw_levels(rng: &mut Rng, moe: bool) -> Levels {
    Levels {
        compute: rng.range(0.62, 0.82),
        idle: rng.range(0.01, 0.05),
        cpu: rng.range(12.0, 35.0),
        mem_gib: rng.range(250.0, 900.0),
        disk: rng.range(2e7, 3e8),
        pidle: rng.range(65.0, 95.0),
        pmax: rng.range(520.0, 690.0),
        clock: rng.range(1755.0, 1980.0),
        mem_util: rng.range(25.0, 65.0),
        pcie: rng.range(2e9, 1.2e10),
        nvlink: rng.range(5e10, 3e11),
        ib: rng.range(1.5e10, 1.6e11) * if moe { 1.5 } else { 1.0 },
        pfc: rng.range(0.0, 40.0),
        cnp: rng.range(0.0, 150.0),
        gpu_mem_gib: rng.range(40.0, 76.0) * GPUS,
        ib_noise: if moe { rng.range(0.08, 0.2) } else { 0.03 },
    }
}

/// Unequal stage sizes: cut points drawn anywhere that leaves each stage a node.
fn draw_stages(rng: &mut Rng, nodes: usize) -> (Vec<Stage>, Vec<usize>) {
    let count = (rng.int(2, 4) as usize).min(nodes);
    let mut cuts: Vec<usize> = Vec::new();
    while cuts.len() + 1 < count {
        let c = rng.int(1, nodes as i64 - 1) as usize;
        if !cuts.contains(&c) {
            cuts.push(c);
        }
    }
    cuts.sort_unstable();
    let of_node = (0..nodes)
        .map(|i| cuts.iter().filter(|&&c| i >= c).count())
        .collect();
    let stages = (0..count)
        .map(|k| {
            let first = k == 0;
            let last = k + 1 == count;
            Stage {
                bubble: rng.range(0.0, 0.25),
                power: rng.range(0.8, 1.1),
                pcie: rng.range(0.6, 1.6) * if first { 1.5 } else { 1.0 },
                nvlink: rng.range(0.6, 1.3),
                ib_tx: rng.range(0.5, 1.5) * if last { 0.6 } else { 1.0 },
                ib_rx: rng.range(0.5, 1.5) * if first { 0.6 } else { 1.0 },
                mem: rng.range(0.75, 1.15) * if last { 1.1 } else { 1.0 },
            }
        })
        .collect();
    (stages, of_node)
}

/// Job-wide phases, and the confounder names of those that occur.
fn draw_events(rng: &mut Rng, dur: i64, names: &mut Vec<String>) -> Vec<Event> {
    let mut events = Vec::new();
    if rng.chance(0.8) {
        names.push("checkpoint".into());
        let every = rng.int(480, 1200);
        let sharded = rng.chance(0.6);
        let mut t = every;
        while t + 60 < dur {
            let phase = if sharded {
                Phase::CheckpointSharded
            } else {
                Phase::CheckpointRank0
            };
            events.push(Event {
                phase,
                from: t,
                to: t + rng.int(20, 150),
            });
            t += every + rng.int(-30, 30);
        }
    }
    if rng.chance(0.65) {
        names.push("eval".into());
        let every = rng.int(600, 1500);
        let mut t = every + rng.int(30, 200);
        while t + 60 < dur {
            events.push(Event {
                phase: Phase::Eval,
                from: t,
                to: t + rng.int(45, 240),
            });
            t += every;
        }
    }
    if rng.chance(0.65) {
        names.push("loader_stall".into());
        for _ in 0..rng.int(1, 6) {
            let from = rng.int(60, dur - 60);
            events.push(Event {
                phase: Phase::Stall,
                from,
                to: from + rng.int(10, 60),
            });
        }
    }
    events
}

/// Which whole-life and exporter confounders a job has.
#[derive(Debug, Clone, Copy)]
struct NodeTraits {
    slow: bool,
    hot: bool,
    subset: bool,
    unknown: bool,
    gaps: bool,
    skew: bool,
    slow15: bool,
}

impl NodeTraits {
    fn draw(rng: &mut Rng, names: &mut Vec<String>) -> Self {
        let mut flag = |p: f64, name: &str| {
            let on = rng.chance(p);
            if on {
                names.push(name.to_string());
            }
            on
        };
        NodeTraits {
            slow: flag(0.7, "slow_nodes"),
            hot: flag(0.6, "hot_nodes"),
            subset: flag(0.65, "metric_subset"),
            unknown: flag(0.75, "unknown_metrics"),
            gaps: flag(0.65, "exporter_gap"),
            skew: flag(0.7, "clock_skew"),
            slow15: flag(0.3, "exporter_15s"),
        }
    }
}

fn draw_node(rng: &mut Rng, index: usize, traits: NodeTraits, dur: i64, events: usize) -> NodePlan {
    let interval = if traits.slow15 && rng.chance(0.3) {
        15
    } else {
        10
    };
    let mut gaps = Vec::new();
    if traits.gaps && rng.chance(0.25) {
        let from = rng.int(120, dur - 360);
        gaps.push((from, from + rng.int(60, 300)));
    }
    let spread = rng.int(2, 30);
    NodePlan {
        name: node_name(index),
        leaf: index / NODES_PER_LEAF,
        stage: 0,
        rank0: false,
        speed: if traits.slow && rng.chance(0.15) {
            rng.range(0.01, 0.06)
        } else {
            0.0
        },
        power_f: if traits.hot {
            rng.range(0.93, 1.07)
        } else {
            rng.range(0.99, 1.01)
        },
        temp_off: if traits.hot && rng.chance(0.2) {
            rng.range(4.0, 12.0)
        } else {
            rng.range(-2.0, 2.0)
        },
        skew: if traits.skew { rng.int(-4, 4) } else { 0 },
        interval,
        scrape_phase: rng.int(0, interval - 1),
        subset: traits.subset && rng.chance(0.3),
        unknown: traits.unknown && rng.chance(0.8),
        gaps,
        jitter: (0..events).map(|_| rng.int(-spread, spread)).collect(),
    }
}

fn draw_fault(rng: &mut Rng, nodes: usize, dur: i64) -> FaultPlan {
    let kind = Kind::draw(rng);
    let onset = rng.int(480, (dur - 480).max(481));
    let hang = match kind {
        Kind::Ecc | Kind::GpuCardDrop => true,
        Kind::NicDropout => rng.chance(0.7),
        Kind::NvlinkError => rng.chance(0.5),
        _ => false,
    };
    let timeout = [300, 600, 600, 600, 1800][rng.int(0, 4) as usize];
    let slow = match kind {
        Kind::PcieDowngrade => rng.range(0.10, 0.35),
        Kind::NicDropout => rng.range(0.04, 0.12),
        Kind::NvlinkError => rng.range(0.2, 0.4),
        Kind::AocCable => rng.range(0.15, 0.4),
        _ => rng.range(0.08, 0.25),
    };
    FaultPlan {
        kind,
        node: rng.int(0, nodes as i64 - 1) as usize,
        onset,
        hang_until: hang.then_some(onset + timeout),
        after: if rng.chance(0.4) {
            After::RestartWithout
        } else {
            After::End
        },
        slow,
        whole_node_idle: rng.chance(0.5),
        flap: (rng.int(20, 120), rng.int(150, 300)),
    }
}

/// When a job with this fault stops sending, and the names its aftermath adds.
fn fault_end(f: &FaultPlan, dur: i64, names: &mut Vec<String>) -> i64 {
    match (f.hang_until, f.after) {
        (Some(until), After::End) => until.min(dur),
        (Some(until), After::RestartWithout) if until < dur => {
            names.push("restart".into());
            names.push("drained_mid_job".into());
            dur
        }
        _ => dur,
    }
}

/// Plans one job; `cursor` is the next free node of the cluster.
fn plan_job(
    spec: &IndependentSpec,
    rng: &mut Rng,
    id: u64,
    start: i64,
    cursor: &mut usize,
) -> JobPlan {
    let size = draw_size(rng, spec.max_nodes);
    let dur = rng.int(spec.min_minutes, spec.max_minutes.max(spec.min_minutes)) * 60;
    let mut names = Vec::new();
    let moe = rng.chance(0.25);
    if moe {
        names.push("moe_alltoall".to_string());
    }
    let levels = draw_levels(rng, moe);
    let events = draw_events(rng, dur, &mut names);
    let traits = NodeTraits::draw(rng, &mut names);
    *cursor += rng.int(0, 12) as usize;
    let mut nodes: Vec<NodePlan> = (0..size)
        .map(|i| draw_node(rng, *cursor + i, traits, dur, events.len()))
        .collect();
    *cursor += size;
    let (stages, of_node) = if size >= 2 && rng.chance(0.6) {
        names.push("pipeline".into());
        draw_stages(rng, size)
    } else {
        (vec![Stage::flat()], vec![0; size])
    };
    for (node, stage) in nodes.iter_mut().zip(of_node) {
        node.stage = stage;
    }
    if rng.chance(0.7) {
        names.push("rank0_extra".into());
        nodes[0].rank0 = true;
    }
    let bursty = rng.chance(0.7);
    if bursty {
        names.push("bursty_counters".into());
    }
    let missing_rows = if rng.chance(0.6) {
        names.push("missing_rows".into());
        rng.range(0.001, 0.01)
    } else {
        0.0
    };
    let congestion = rng.chance(0.6).then(|| {
        names.push("leaf_congestion".into());
        let leaf = nodes[rng.int(0, size as i64 - 1) as usize].leaf;
        let from = rng.int(120, dur - 300);
        (leaf, from, from + rng.int(120, 600), rng.range(0.03, 0.15))
    });
    let fault = rng
        .chance(spec.fault_share)
        .then(|| draw_fault(rng, size, dur));
    let end = fault
        .as_ref()
        .map_or(dur, |f| fault_end(f, dur, &mut names));
    JobPlan {
        id: id.to_string(),
        start,
        end,
        max_speed: nodes.iter().map(|n| n.speed).fold(0.0, f64::max),
        nodes,
        stages,
        levels,
        events,
        congestion,
        bursty,
        missing_rows,
        fault,
        confounders: names,
    }
}

/// What one node's GPUs, host and links do over one sample, as shares of
/// the sample's time (spin is the rest) and multipliers of the job's levels.
#[derive(Debug, Clone)]
struct State {
    compute: f64,
    idle: f64,
    xfer: f64,
    rate: f64,
    clock_f: f64,
    cpu_f: f64,
    disk_f: f64,
    mem_f: f64,
    pcie_f: f64,
    nvlink_f: f64,
    ib_f: f64,
    pfc_add: f64,
    cnp_add: f64,
    nic_err: f64,
    temp_add: f64,
    /// GPUs with no process (their rank died).
    dead_gpus: f64,
    /// A GPU fell off the bus: it is gone from the node's sums.
    gone_gpu: bool,
}

impl State {
    fn new(compute: f64, idle: f64, rate: f64) -> Self {
        State {
            compute,
            idle,
            xfer: 0.0,
            rate,
            clock_f: 1.0,
            cpu_f: 1.0,
            disk_f: 1.0,
            mem_f: 1.0,
            pcie_f: 1.0,
            nvlink_f: 1.0,
            ib_f: 1.0,
            pfc_add: 0.0,
            cnp_add: 0.0,
            nic_err: 0.0,
            temp_add: 0.0,
            dead_gpus: 0.0,
            gone_gpu: false,
        }
    }
    fn spin(&self) -> f64 {
        (1.0 - self.compute - self.idle - self.xfer).max(0.0)
    }
}

const RESTART_GAP: i64 = 60;
const RELOAD: i64 = 150;

impl JobPlan {
    fn straggling(&self, t: i64) -> Option<&FaultPlan> {
        let f = self.fault.as_ref()?;
        if t < f.onset || f.hang_until.is_some() {
            return None;
        }
        let flapping = f.kind != Kind::AocCable || (t - f.onset) % f.flap.1 < f.flap.0;
        flapping.then_some(f)
    }

    fn congested(&self, t: i64) -> Option<(usize, f64)> {
        self.congestion
            .filter(|c| t >= c.1 && t < c.2)
            .map(|c| (c.0, c.3))
    }

    /// The job's slowdown: its slowest node's, plus fabric congestion.
    fn slowdown(&self, t: i64) -> f64 {
        let fixed = self.max_speed;
        let fault = self.straggling(t).map_or(0.0, |f| f.slow);
        fixed.max(fault) + self.congested(t).map_or(0.0, |c| c.1)
    }

    /// `None` when the node sends nothing for the job at `t`.
    fn state(&self, n: usize, t: i64) -> Option<State> {
        if t >= self.end {
            return None;
        }
        if let Some(f) = &self.fault {
            if let Some(until) = f.hang_until.filter(|_| t >= f.onset) {
                if t < until {
                    return Some(self.hang_state(f, n));
                }
                if f.node == n {
                    return None;
                }
                if t < until + RESTART_GAP {
                    let mut s = State::new(0.0, 1.0, 0.0);
                    s.cpu_f = 0.2;
                    s.dead_gpus = GPUS;
                    return Some(s);
                }
                if t < until + RESTART_GAP + RELOAD {
                    return Some(phase_state(Phase::Reload, false));
                }
            }
        }
        let node = &self.nodes[n];
        let shifted = self
            .events
            .iter()
            .zip(&node.jitter)
            .find(|(e, j)| t - **j >= e.from && t - **j < e.to);
        if let Some((event, _)) = shifted {
            return Some(phase_state(event.phase, node.rank0));
        }
        Some(self.training_state(n, t))
    }

    fn hang_state(&self, f: &FaultPlan, n: usize) -> State {
        let mut s = State::new(0.0, 0.0, 0.003);
        s.cpu_f = 0.3;
        s.disk_f = 0.02;
        if n != f.node {
            return s;
        }
        match f.kind {
            Kind::Ecc | Kind::GpuCardDrop => {
                s.gone_gpu = f.kind == Kind::GpuCardDrop;
                let live = if s.gone_gpu { GPUS - 1.0 } else { GPUS };
                if f.whole_node_idle {
                    s.idle = 1.0;
                    s.dead_gpus = live;
                    s.cpu_f = 0.05;
                    s.mem_f = 0.3;
                } else if !s.gone_gpu {
                    s.dead_gpus = 1.0;
                }
            }
            Kind::NicDropout => {
                s.ib_f = 0.0;
                s.nic_err = 40.0;
            }
            _ => {
                s.nvlink_f = 0.0;
                s.nic_err = 0.0;
            }
        }
        s
    }

    fn training_state(&self, n: usize, t: i64) -> State {
        let node = &self.nodes[n];
        let lv = &self.levels;
        let stage = &self.stages[node.stage];
        let job_slow = 1.0 + self.slowdown(t);
        let compute = lv.compute * (1.0 - stage.bubble) * (1.0 + node.speed);
        let idle = lv.idle + stage.bubble + if node.rank0 { 0.03 } else { 0.0 };
        let mut s = State::new(compute, idle, 1.0 / job_slow);
        if node.rank0 {
            s.cpu_f = 1.8;
            s.disk_f = 4.0;
            s.mem_f = 1.15;
        }
        if let Some(f) = self.straggling(t).filter(|f| f.node == n) {
            apply_straggle(&mut s, f, lv.compute);
        }
        // Other tenants' traffic under one leaf switch: pauses and CNPs there.
        if self.congested(t).is_some_and(|c| c.0 == node.leaf) {
            s.pfc_add += lv.pfc.max(5.0) * 40.0;
            s.cnp_add += lv.cnp.max(20.0) * 25.0;
        }
        s.compute /= job_slow;
        s.idle /= job_slow;
        s.xfer /= job_slow;
        s
    }
}

/// A straggler's own behaviour, before the job's slowdown spreads it.
fn apply_straggle(s: &mut State, f: &FaultPlan, c0: f64) {
    match f.kind {
        Kind::ThermalThrottle => {
            s.compute *= 1.0 + f.slow;
            s.clock_f = 1.0 / (1.0 + f.slow);
            s.temp_add = 9.0;
        }
        Kind::SlowHost => {
            s.idle += c0 * f.slow;
            s.cpu_f *= 1.3 + f.slow;
        }
        Kind::PcieDowngrade => {
            s.xfer = c0 * f.slow;
            s.pcie_f = 0.5;
        }
        Kind::NicDropout => {
            s.xfer = c0 * f.slow;
            s.pfc_add = 300.0;
            s.cnp_add = 500.0;
            s.nic_err = 5.0;
        }
        Kind::NvlinkError => {
            s.xfer = c0 * f.slow;
            s.nvlink_f = 0.05;
            s.pcie_f = 3.0;
        }
        Kind::AocCable => {
            s.xfer = c0 * f.slow;
            s.ib_f = 1.1;
            s.pfc_add = 2000.0;
            s.nic_err = 25.0;
        }
        Kind::Ecc | Kind::GpuCardDrop => {}
    }
}

fn phase_state(phase: Phase, rank0: bool) -> State {
    let mut s = match phase {
        Phase::CheckpointSharded => State::new(0.03, 0.9, 0.02),
        Phase::CheckpointRank0 if rank0 => State::new(0.02, 0.95, 0.01),
        Phase::CheckpointRank0 => State::new(0.0, 0.02, 0.005),
        Phase::Eval => State::new(0.35, 0.3, 0.12),
        Phase::Stall => State::new(0.05, 0.9, 0.03),
        Phase::Reload => State::new(0.05, 0.85, 0.02),
    };
    (s.cpu_f, s.disk_f) = match phase {
        Phase::CheckpointSharded => (1.6, 40.0),
        Phase::CheckpointRank0 if rank0 => (1.8, 60.0),
        Phase::CheckpointRank0 => (0.5, 0.2),
        Phase::Eval => (1.1, 2.0),
        Phase::Stall => (2.0, 3.0),
        Phase::Reload => (1.5, 30.0),
    };
    s
}

/// One node's sample of every metric (before noise), node sums over its GPUs.
fn values(job: &JobPlan, n: usize, t: i64, s: &State) -> [f64; 19] {
    let node = &job.nodes[n];
    let lv = &job.levels;
    let stage = &job.stages[node.stage];
    let present = if s.gone_gpu { GPUS - 1.0 } else { GPUS };
    let live = (present - s.dead_gpus).max(0.0);
    let busy = (1.0 - s.idle).clamp(0.0, 1.0);
    let util = 100.0 * busy * live / present;
    let per_gpu = lv.pidle
        + (lv.pmax - lv.pidle)
            * (s.compute * s.clock_f * s.clock_f * stage.power + s.spin() * 0.25 + s.xfer * 0.4);
    let power = (per_gpu * live + lv.pidle * 0.9 * (present - live)) * node.power_f;
    let clock = lv.clock * s.clock_f * (live / present) + 345.0 * (1.0 - live / present);
    let rank0 = if node.rank0 { 1.0 } else { 0.0 };
    let cpu = (lv.cpu * s.cpu_f + 18.0 * rank0).min(100.0);
    let temp = 30.0 + 48.0 * power / (lv.pmax * GPUS) + node.temp_off + s.temp_add;
    [
        cpu,
        lv.mem_gib * s.mem_f + 0.4 * t as f64 / 60.0,
        lv.disk * s.rate.max(0.05) * s.disk_f,
        util,
        if s.dead_gpus > 0.0 { 0.0 } else { util - 1.0 },
        power,
        clock,
        lv.mem_util * (s.compute / lv.compute) * live / present,
        lv.pcie * s.rate * stage.pcie * s.pcie_f,
        lv.nvlink * s.rate * stage.nvlink * s.nvlink_f,
        lv.ib * s.rate * stage.ib_tx * s.ib_f,
        lv.ib * s.rate * stage.ib_rx * s.ib_f,
        lv.pfc * (0.2 + s.rate) + s.pfc_add,
        lv.cnp * (0.2 + s.rate) + s.cnp_add,
        temp,
        lv.gpu_mem_gib * stage.mem * live / GPUS,
        s.nic_err,
        0.7 * s.compute * live / present,
        cpu / 100.0 * 128.0,
    ]
}

/// Measurement noise: relative for rates and sums, additive for percentages.
fn noisy(rng: &mut Rng, job: &JobPlan, metric: usize, v: f64) -> f64 {
    let x = match metric {
        0 | 3 | 4 | 7 => v + rng.normal() * 1.2,
        6 => v + rng.normal() * 8.0,
        10 | 11 => v * (1.0 + job.levels.ib_noise * rng.normal()),
        12 | 13 | 16 => v * rng.range(0.5, 1.5),
        14 => v + rng.normal() * 0.7,
        _ => v * (1.0 + 0.025 * rng.normal()),
    };
    match metric {
        0 | 3 | 7 => x.clamp(0.0, 100.0),
        4 => x.clamp(0.0, 100.0) - rng.range(0.0, 4.0).min(x.max(0.0)),
        _ => x.max(0.0),
    }
}

#[derive(Clone, Copy)]
struct Row {
    t: i64,
    job: u32,
    node: u32,
    metric: u8,
    value: f64,
}

fn job_rows(job: &JobPlan, j: u32, rng: &mut Rng, rows: &mut Vec<Row>) {
    for (n, node) in job.nodes.iter().enumerate() {
        let mut rng = rng.fork();
        let mut after_gap = 0;
        let mut t = node.scrape_phase;
        while t < job.end {
            let in_gap = node.gaps.iter().find(|g| t >= g.0 && t < g.1);
            if let Some(g) = in_gap {
                after_gap = g.1 - g.0;
                t += node.interval;
                continue;
            }
            if let Some(state) = job.state(n, t) {
                let mut v = values(job, n, t, &state);
                if job.bursty && rng.chance(0.01) {
                    v[12] *= rng.range(20.0, 200.0);
                    v[13] *= rng.range(10.0, 100.0);
                }
                if after_gap > 0 && rng.chance(0.5) {
                    for m in COUNTERS {
                        v[m] *= after_gap as f64 / node.interval as f64;
                    }
                }
                after_gap = 0;
                for (m, &x) in v.iter().enumerate() {
                    let absent = (m >= KNOWN && !node.unknown)
                        || (node.subset && SUBSET_MISSING.contains(&m))
                        || rng.chance(job.missing_rows);
                    let value = noisy(&mut rng, job, m, x);
                    if !absent {
                        let t = job.start + t + node.skew;
                        rows.push(Row {
                            t,
                            job: j,
                            node: n as u32,
                            metric: m as u8,
                            value,
                        });
                    }
                }
            }
            t += node.interval;
        }
    }
}

fn truth(job: &JobPlan) -> IndependentJob {
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.name().to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: job.start + f.onset,
            subtle: f.kind.subtle(),
        }),
        confounders: job.confounders.clone(),
    }
}

fn plan_all(spec: &IndependentSpec) -> (Vec<JobPlan>, Rng) {
    let mut rng = Rng::new(spec.seed);
    let mut spec = spec.clone();
    spec.min_minutes = spec.min_minutes.max(16);
    let first_id = 5_100_000 + rng.int(1, 800_000) as u64;
    let mut start = 1_767_225_600 + rng.int(0, 86_400 * 30);
    let mut cursor = rng.int(0, 400) as usize;
    let plans = (0..spec.jobs)
        .map(|i| {
            let mut job_rng = rng.fork();
            start += rng.int(0, 90);
            plan_job(
                &spec,
                &mut job_rng,
                first_id + i as u64 * 3,
                start,
                &mut cursor,
            )
        })
        .collect();
    (plans, rng)
}

/// A stable counting sort on the second: millions of rows span a few hours,
/// and the writer's budget is well under a second a seed.
fn sort_by_time(rows: Vec<Row>) -> Vec<Row> {
    let Some(lo) = rows.iter().map(|r| r.t).min() else {
        return rows;
    };
    let hi = rows.iter().map(|r| r.t).max().unwrap_or(lo);
    let mut next = vec![0usize; (hi - lo + 2) as usize];
    for r in &rows {
        next[(r.t - lo + 1) as usize] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    let mut sorted = rows.clone();
    for r in rows {
        let slot = &mut next[(r.t - lo) as usize];
        sorted[*slot] = r;
        *slot += 1;
    }
    sorted
}

/// Formatting by hand: `write!` of floats was most of the writer's time.
fn push_int(line: &mut Vec<u8>, v: i64) {
    if v < 0 {
        line.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    line.extend_from_slice(&digits[i..]);
}

/// Whole numbers from 1000 up, two decimals below.
fn push_value(line: &mut Vec<u8>, v: f64) {
    if v.abs() >= 1000.0 {
        push_int(line, v.round() as i64);
        return;
    }
    let cents = (v * 100.0).round() as i64;
    if cents < 0 {
        line.push(b'-');
    }
    push_int(line, cents.abs() / 100);
    line.push(b'.');
    let frac = (cents.abs() % 100) as u8;
    line.extend_from_slice(&[b'0' + frac / 10, b'0' + frac % 10]);
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let (plans, mut rng) = plan_all(spec);
    let mut rows = Vec::new();
    for (j, job) in plans.iter().enumerate() {
        job_rows(job, j as u32, &mut rng.fork(), &mut rows);
    }
    let rows = sort_by_time(rows);
    let mut out = io::BufWriter::with_capacity(1 << 20, out);
    out.write_all(b"time,job,node,metric,value\n")?;
    let mut line = Vec::with_capacity(96);
    for r in &rows {
        let job = &plans[r.job as usize];
        line.clear();
        push_int(&mut line, r.t);
        line.push(b',');
        line.extend_from_slice(job.id.as_bytes());
        line.push(b',');
        line.extend_from_slice(job.nodes[r.node as usize].name.as_bytes());
        line.push(b',');
        line.extend_from_slice(METRICS[r.metric as usize].as_bytes());
        line.push(b',');
        push_value(&mut line, r.value);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    out.flush()?;
    Ok(plans.iter().map(truth).collect())
}

/// The counts of one slice of jobs (all, one confounder, one fault kind).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    /// Faulty jobs whose faulty node was called at or after onset.
    pub found: usize,
    /// Distinct (job, node) calls that are not a right call.
    pub false_calls: usize,
    pub healthy_called: usize,
    pub wrong_node: usize,
    /// Distinct (job, node) drain-tier calls on healthy jobs.
    pub drain_on_healthy: usize,
    /// Seconds from onset to the first right call, one per found job.
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn precision(&self) -> f64 {
        let calls = self.found + self.false_calls;
        if calls == 0 {
            1.0
        } else {
            self.found as f64 / calls as f64
        }
    }
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.found as f64 / self.faulty as f64
        }
    }
    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        d.get(d.len().saturating_sub(1) / 2).copied()
    }

    fn add_job(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.jobs += 1;
        let mut nodes: Vec<&str> = calls.iter().map(|c| c.node.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let Some(fault) = &job.fault else {
            self.false_calls += nodes.len();
            self.healthy_called += usize::from(!nodes.is_empty());
            let mut drains: Vec<&str> = calls
                .iter()
                .filter(|c| c.drain)
                .map(|c| c.node.as_str())
                .collect();
            drains.sort_unstable();
            drains.dedup();
            self.drain_on_healthy += drains.len();
            return;
        };
        self.faulty += 1;
        let first_right = calls
            .iter()
            .filter(|c| c.node == fault.node && c.detected_at >= fault.onset)
            .map(|c| c.detected_at)
            .min();
        let wrong = nodes.iter().filter(|n| **n != fault.node).count();
        self.wrong_node += wrong;
        self.false_calls += wrong;
        match first_right {
            Some(at) => {
                self.found += 1;
                self.delays.push(at - fault.onset);
            }
            // Calls on the faulty node only before its onset are false.
            None => self.false_calls += usize::from(nodes.contains(&fault.node.as_str())),
        }
    }
}

/// The scorer's answer: all jobs, then one row per confounder and per fault kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub overall: Tally,
    /// Calls naming a job that is not in the truth (counted false overall).
    pub unknown_job_calls: usize,
    pub by_confounder: Vec<(String, Tally)>,
    pub by_kind: Vec<(String, Tally)>,
}

fn slot<'a>(list: &'a mut Vec<(String, Tally)>, name: &str) -> &'a mut Tally {
    let i = match list.iter().position(|(n, _)| n == name) {
        Some(i) => i,
        None => {
            list.push((name.to_string(), Tally::default()));
            list.len() - 1
        }
    };
    &mut list[i].1
}

/// Scores calls: a call is right when it names the faulty node of its job at or after onset.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut s = Score {
        overall: Tally::default(),
        unknown_job_calls: 0,
        by_confounder: Vec::new(),
        by_kind: Vec::new(),
    };
    for job in jobs {
        let mine: Vec<&Call> = calls.iter().filter(|c| c.job == job.job).collect();
        s.overall.add_job(job, &mine);
        for name in &job.confounders {
            slot(&mut s.by_confounder, name).add_job(job, &mine);
        }
        if let Some(f) = &job.fault {
            slot(&mut s.by_kind, &f.kind).add_job(job, &mine);
        }
    }
    let mut unknown: Vec<(&str, &str)> = calls
        .iter()
        .filter(|c| !jobs.iter().any(|j| j.job == c.job))
        .map(|c| (c.job.as_str(), c.node.as_str()))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    s.unknown_job_calls = unknown.len();
    s.overall.false_calls += unknown.len();
    s.by_confounder.sort_by(|a, b| a.0.cmp(&b.0));
    s.by_kind.sort_by(|a, b| a.0.cmp(&b.0));
    s
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, t: &Tally) -> fmt::Result {
    let delay = t.median_delay().map_or("-".to_string(), |d| d.to_string());
    writeln!(
        f,
        "| {name} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {delay} |",
        t.jobs,
        t.faulty,
        t.found,
        t.precision(),
        t.recall(),
        t.false_calls,
        t.healthy_called,
        t.wrong_node,
        t.drain_on_healthy,
    )
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| slice | jobs | faulty | found | precision | recall | false calls | healthy jobs called | wrong-node calls | drain calls on healthy | median delay (s) |")?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|---|")?;
        row(f, "all jobs", &self.overall)?;
        for (name, t) in &self.by_confounder {
            row(f, &format!("confounder: {name}"), t)?;
        }
        for (name, t) in &self.by_kind {
            row(f, &format!("fault: {name}"), t)?;
        }
        Ok(())
    }
}

/// The truth as JSON (the tests crate has no serde outside its tests).
pub fn truth_json(jobs: &[IndependentJob]) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let list = |v: &[String]| v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(",");
    let items: Vec<String> = jobs
        .iter()
        .map(|j| {
            let fault = j.fault.as_ref().map_or("null".to_string(), |f| {
                format!(
                    "{{\"kind\":{},\"node\":{},\"onset\":{},\"subtle\":{}}}",
                    quote(&f.kind),
                    quote(&f.node),
                    f.onset,
                    f.subtle
                )
            });
            format!(
                "{{\"job\":{},\"nodes\":[{}],\"fault\":{fault},\"confounders\":[{}]}}",
                quote(&j.job),
                list(&j.nodes),
                list(&j.confounders)
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> IndependentSpec {
        IndependentSpec {
            jobs: 12,
            min_minutes: 18,
            max_minutes: 22,
            max_nodes: 12,
            ..IndependentSpec::new(seed)
        }
    }

    fn csv(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
        let mut out = Vec::new();
        let jobs = generate(spec, &mut out).unwrap();
        (out, jobs)
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
        let (a, ta) = csv(&small(7));
        let (b, tb) = csv(&small(7));
        let (c, _) = csv(&small(8));
        assert_eq!(a, b);
        assert_eq!(ta, tb);
        assert_ne!(a, c);
    }

    #[test]
    fn rows_are_time_sorted_finite_and_well_formed() {
        let (out, jobs) = csv(&small(3));
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("time,job,node,metric,value"));
        let mut last = i64::MIN;
        let mut count = 0;
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 5, "{line}");
            let t: i64 = f[0].parse().unwrap();
            assert!(t >= last, "time goes back at {line}");
            last = t;
            assert!(jobs
                .iter()
                .any(|j| j.job == f[1] && j.nodes.iter().any(|n| n == f[2])));
            assert!(METRICS.contains(&f[3]), "{line}");
            assert!(f[4].parse::<f64>().unwrap().is_finite());
            count += 1;
        }
        assert!(count > 10_000, "only {count} rows");
    }

    #[test]
    fn jobs_span_two_to_many_nodes_and_faults_follow_minders_mix() {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        let (mut faulty, mut total, mut subtle) = (0, 0, 0);
        let mut sizes = Vec::new();
        for seed in 0..300 {
            let spec = IndependentSpec::new(seed);
            let (plans, _) = plan_all(&spec);
            for job in plans.iter().map(truth) {
                total += 1;
                sizes.push(job.nodes.len());
                let Some(f) = job.fault else { continue };
                faulty += 1;
                subtle += usize::from(f.subtle);
                assert!(job.nodes.contains(&f.node));
                match kinds.iter_mut().find(|k| k.0 == f.kind) {
                    Some(k) => k.1 += 1,
                    None => kinds.push((f.kind, 1)),
                }
            }
        }
        let share =
            |k: &str| kinds.iter().find(|x| x.0 == k).map_or(0, |x| x.1) as f64 / faulty as f64;
        let faulty_share = faulty as f64 / total as f64;
        assert!((0.36..0.44).contains(&faulty_share), "{faulty_share}");
        assert!((0.12..0.18).contains(&(subtle as f64 / faulty as f64)));
        // Loud faults are 85% of all, in Table 2's proportions.
        assert!((share("ecc_error") - 0.85 * 38.9 / 56.0).abs() < 0.04);
        assert!((share("pcie_downgrade") - 0.85 * 6.6 / 56.0).abs() < 0.02);
        assert!((share("nic_dropout") - 0.85 * 5.7 / 56.0).abs() < 0.02);
        assert!(share("aoc_cable") > 0.0 && share("nvlink_error") > 0.0);
        assert!(sizes.contains(&2) && sizes.contains(&3) && sizes.iter().any(|&n| n > 128));
        assert!(sizes.iter().filter(|&&n| (4..=8).contains(&n)).count() > total / 5);
    }

    #[test]
    fn each_confounder_of_the_brief_is_present_in_most_jobs() {
        let names = [
            "checkpoint",
            "pipeline",
            "rank0_extra",
            "slow_nodes",
            "metric_subset",
            "unknown_metrics",
            "exporter_gap",
            "clock_skew",
            "bursty_counters",
            "leaf_congestion",
            "missing_rows",
        ];
        let jobs: Vec<IndependentJob> = (0..50)
            .flat_map(|seed| plan_all(&IndependentSpec::new(seed)).0)
            .map(|p| truth(&p))
            .collect();
        for name in names {
            let with = jobs
                .iter()
                .filter(|j| j.confounders.iter().any(|c| c == name))
                .count();
            assert!(with * 2 > jobs.len(), "{name}: {with} of {}", jobs.len());
        }
        let drops = jobs
            .iter()
            .filter(|j| {
                j.confounders
                    .iter()
                    .any(|c| ["eval", "loader_stall"].contains(&c.as_str()))
            })
            .count();
        assert!(drops * 2 > jobs.len());
    }

    #[test]
    fn a_hang_silences_the_network_and_lowers_power_on_every_node() {
        let spec = IndependentSpec::new(11);
        let (plans, _) = plan_all(&spec);
        let job = plans
            .iter()
            .find(|p| p.fault.as_ref().is_some_and(|f| f.hang_until.is_some()) && p.nodes.len() > 3)
            .expect("a hung job among 38");
        let f = job.fault.as_ref().unwrap();
        let other = (f.node + 1) % job.nodes.len();
        let before = job.training_state(other, f.onset - 30);
        let during = job.state(other, f.onset + 10).unwrap();
        let vb = values(job, other, f.onset - 30, &before);
        let vd = values(job, other, f.onset + 10, &during);
        assert!(vd[10] < vb[10] * 0.01, "ib_tx {} -> {}", vb[10], vd[10]);
        assert!(vd[5] < vb[5] * 0.7, "power {} -> {}", vb[5], vd[5]);
        assert!(vd[3] > 90.0, "a spinning collective keeps utilisation high");
    }

    #[test]
    fn a_throttled_node_slows_the_whole_job_and_runs_lower_clocks() {
        let mut job = plan_all(&IndependentSpec::new(5)).0.remove(0);
        job.events.clear();
        job.congestion = None;
        for n in &mut job.nodes {
            n.speed = 0.0;
        }
        job.fault = Some(FaultPlan {
            kind: Kind::ThermalThrottle,
            node: 0,
            onset: 600,
            hang_until: None,
            after: After::End,
            slow: 0.2,
            whole_node_idle: false,
            flap: (0, 1),
        });
        let peer = job.nodes.len() - 1;
        let v = |n: usize, t: i64| values(&job, n, t, &job.state(n, t).unwrap());
        assert!(
            v(0, 700)[6] < v(0, 500)[6] * 0.9,
            "clock drops on the throttled node"
        );
        assert!(
            v(peer, 700)[10] < v(peer, 500)[10] * 0.9,
            "everyone's traffic slows"
        );
        assert!(
            v(peer, 700)[5] < v(peer, 500)[5],
            "peers wait in the collective"
        );
    }

    fn job(id: &str, fault: Option<(&str, i64)>, confounders: &[&str]) -> IndependentJob {
        IndependentJob {
            job: id.to_string(),
            nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            fault: fault.map(|(node, onset)| PlantedFault {
                kind: "ecc_error".into(),
                node: node.into(),
                onset,
                subtle: false,
            }),
            confounders: confounders.iter().map(|c| c.to_string()).collect(),
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
    fn the_scorer_counts_right_false_early_and_drain_calls_by_hand() {
        let jobs = [
            job("1", Some(("n2", 100)), &["pipeline"]),
            job("2", Some(("n1", 100)), &[]),
            job("3", None, &["pipeline"]),
            job("4", None, &[]),
        ];
        let calls = [
            call("1", "n2", 90, false),  // early: not right by itself
            call("1", "n2", 160, true),  // right, delay 60
            call("1", "n2", 200, true),  // the same pair again
            call("1", "n3", 150, false), // wrong node
            call("2", "n1", 50, false),  // only before onset: false
            call("3", "n1", 70, true),   // drain on a healthy job
            call("3", "n2", 80, false),
            call("9", "n1", 80, false), // unknown job
        ];
        let s = score(&jobs, &calls);
        let o = &s.overall;
        assert_eq!((o.jobs, o.faulty, o.found), (4, 2, 1));
        assert_eq!(o.false_calls, 1 + 1 + 2 + 1);
        assert_eq!(
            (o.wrong_node, o.healthy_called, o.drain_on_healthy),
            (1, 1, 1)
        );
        assert_eq!(o.median_delay(), Some(60));
        assert!((o.precision() - 1.0 / 6.0).abs() < 1e-9);
        assert!((o.recall() - 0.5).abs() < 1e-9);
        let pipeline = &s
            .by_confounder
            .iter()
            .find(|c| c.0 == "pipeline")
            .unwrap()
            .1;
        assert_eq!(
            (pipeline.jobs, pipeline.found, pipeline.false_calls),
            (2, 1, 3)
        );
        let ecc = &s.by_kind[0];
        assert_eq!(
            (ecc.0.as_str(), ecc.1.faulty, ecc.1.found),
            ("ecc_error", 2, 1)
        );
        let table = s.to_string();
        assert!(
            table.contains("| all jobs | 4 | 2 | 1 | 0.167 | 0.500 | 5 | 1 | 1 | 1 | 60 |"),
            "{table}"
        );
    }

    #[test]
    fn values_are_written_as_the_float_formatter_would() {
        for v in [
            0.0,
            0.004,
            0.005,
            3.14857,
            99.999,
            999.994,
            1000.4,
            123456789.6,
            -2.5,
        ] {
            let mut line = Vec::new();
            push_value(&mut line, v);
            let want = if v.abs() >= 1000.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            };
            let got = String::from_utf8(line).unwrap();
            assert_eq!(
                got.parse::<f64>().unwrap(),
                want.parse::<f64>().unwrap(),
                "{v}"
            );
        }
    }

    #[test]
    fn the_counting_sort_keeps_each_seconds_rows_in_order() {
        let row = |t, metric| Row {
            t,
            job: 0,
            node: 0,
            metric,
            value: 0.0,
        };
        let sorted = sort_by_time(vec![row(5, 0), row(3, 1), row(5, 2), row(3, 3), row(4, 4)]);
        let got: Vec<(i64, u8)> = sorted.iter().map(|r| (r.t, r.metric)).collect();
        assert_eq!(got, [(3, 1), (3, 3), (4, 4), (5, 0), (5, 2)]);
    }

    #[test]
    fn the_truth_json_names_each_job_and_its_fault() {
        let text = truth_json(&[job("1", Some(("n2", 100)), &["eval"]), job("2", None, &[])]);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[0]["fault"]["node"], "n2");
        assert_eq!(v[0]["confounders"][0], "eval");
        assert!(v[1]["fault"].is_null());
    }
}
