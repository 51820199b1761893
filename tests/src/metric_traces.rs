//! Synthetic per-node metric traces of training jobs, with planted faulty
//! machines, and the scorer of a detector's calls against them (issue 37).
//!
//! Written from what the faults do to a machine, not from how any detector
//! looks at the data:
//!
//! * **The job** is data-parallel training on nodes of 8 GPUs and 8 RoCE
//!   HCAs. Every step all ranks compute, then meet in collectives, so when
//!   one machine is slow the others wait; NCCL's waiting kernels keep the
//!   GPU duty cycle high while power falls. Bytes per training step are the
//!   same on every node, so a slower job moves fewer bytes per second on
//!   *every* node alike.
//! * **Phases every node shares**: start-up (each node starts up to 45 s
//!   late, loads data for 40-110 s, ramps up over 30 s), checkpoints (GPUs
//!   idle, device-to-host copies, disks busy; in some jobs only rank 0
//!   writes), evaluations (forward only, little traffic), data-loader stalls,
//!   and slow-downs that are not faults: congestion from other tenants
//!   (PFC pauses and CNPs rise per leaf switch, eight nodes at a time).
//! * **Designed differences**: pipeline stages (2 or 4 equal groups with
//!   their own utilisation, power, memory and traffic; they even out while
//!   GPUs idle), a rank 0 that also logs (more CPU, memory, disk), and each
//!   machine's own offsets (power, clocks, counters).
//! * **Faults**, in the proportions of Minder's table (ECC 38.9, PCIe
//!   downgrade 6.6, NIC dropout 5.7, GPU card drop 2.0, NVLink 1.7; AOC
//!   errors are not in our digest of the table: 1.1 is our guess):
//!   - *ECC error* (uncorrectable): the rank on that GPU dies, the job hangs
//!     in NCCL until its timeout (10-30 min) kills it. The dead GPU idles
//!     (`gpu_util_min` 0, less power); its process's CPU and memory are gone.
//!   - *GPU card drop* (XID 79): the GPU leaves the bus; the exporter now
//!     averages and sums over 7 GPUs (power 7/8), the rank's CPU and memory
//!     are gone, and the job hangs.
//!   - *PCIe downgrade*: one GPU's link trains down; the NIC cannot DMA into
//!     that GPU fast enough, so its receive buffers fill and it sends PFC
//!     pauses (and CNPs); the machine is the straggler the others wait for.
//!   - *NIC dropout*: one HCA goes down. Most often NCCL moves its traffic
//!     onto the machine's other HCAs, which congest (PFC, CNP); otherwise
//!     the job hangs while the other ranks' queue pairs keep retrying.
//!   - *NVLink error*: a link goes down; NCCL routes that GPU pair's traffic
//!     over PCIe (less NVLink, more PCIe) and the machine is a straggler.
//!   - *AOC error*: an optical cable with bit errors flaps: link-level
//!     retries and pauses come and go, a few received packets are dropped.
//! * **Measurement**: sampling every 10 s; noise per sample; nodes' clocks
//!   skewed by up to ±4 s plus ±1 s jitter; whole scrapes and single rows
//!   missing; exporter gaps of 1-5 minutes after which the first counter
//!   rate is inflated (the counter's growth over the gap divided by one
//!   interval); zeros (`pfc_pause`, `cnp`, `gpu_util_min`).
//!
//! Every parameter is drawn from the seed; the same seed gives the same trace.

use crate::history::Rng;
use std::io::{self, Write};

/// The metric vocabulary of `lemon watch`.
pub const METRICS: [&str; 14] = [
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
];
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
/// Rates computed from counters: inflated after an exporter gap.
const COUNTERS: [usize; 7] = [DISK, PCIE, NVLINK, IB_TX, IB_RX, PFC, CNP];
/// Metrics that pipeline stages differ in.
const STAGED: [usize; 8] = [UTIL, UTIL_MIN, POWER, MEM, MEM_UTIL, NVLINK, IB_TX, IB_RX];
const GPUS: f64 = 8.0;
const TDP_W: f64 = 700.0;
const IDLE_W: f64 = 70.0;
/// Sampling interval of the traces.
pub const INTERVAL_S: i64 = 10;

/// A fault of one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Ecc,
    PcieDowngrade,
    NicDropout,
    GpuCardDrop,
    NvlinkError,
    AocError,
}

/// Minder's fault mix (shares in %, AOC ours).
pub const FAULT_MIX: [(FaultKind, f64); 6] = [
    (FaultKind::Ecc, 38.9),
    (FaultKind::PcieDowngrade, 6.6),
    (FaultKind::NicDropout, 5.7),
    (FaultKind::GpuCardDrop, 2.0),
    (FaultKind::NvlinkError, 1.7),
    (FaultKind::AocError, 1.1),
];

/// The planted fault of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub node: String,
    /// Unix seconds (true time) from which the machine is faulty.
    pub onset: i64,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    pub seed: u64,
    pub job: String,
    pub nodes: usize,
    /// Unix seconds of the job's start.
    pub start: i64,
    pub duration_s: i64,
    pub fault: Option<FaultKind>,
}

impl TraceSpec {
    /// A job drawn from the seed: 8 to 256 nodes, 35 to 60 minutes, and with
    /// probability `fault_share` one fault drawn from [`FAULT_MIX`].
    pub fn drawn(seed: u64, fault_share: f64) -> TraceSpec {
        let mut r = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let sizes = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
        let nodes = sizes[r.below(sizes.len())];
        let fault = (r.f64() < fault_share).then(|| {
            let weights: Vec<f64> = FAULT_MIX.iter().map(|(_, w)| *w).collect();
            FAULT_MIX[r.pick(&weights)].0
        });
        TraceSpec {
            seed,
            job: format!("{}", 4_400_000 + seed),
            nodes,
            start: 1_760_000_000 + r.below(86_400) as i64,
            duration_s: 2100 + 60 * r.below(26) as i64,
            fault,
        }
    }
}

/// One row: `time,job,node,metric,value` with the node and metric as indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub time: i64,
    pub node: u32,
    pub metric: u8,
    pub value: f64,
}

/// A generated job: its rows in time order and the truth.
#[derive(Debug, Clone)]
pub struct JobTrace {
    pub job: String,
    pub nodes: Vec<String>,
    pub rows: Vec<Row>,
    pub fault: Option<Fault>,
    /// The confounders drawn for this job, for messages.
    pub confounders: Vec<&'static str>,
}

impl JobTrace {
    /// The samples as (time, node, metric, value), in time order.
    pub fn samples(&self) -> impl Iterator<Item = (i64, &str, &'static str, f64)> + '_ {
        self.rows.iter().map(|r| {
            (
                r.time,
                self.nodes[r.node as usize].as_str(),
                METRICS[r.metric as usize],
                r.value,
            )
        })
    }
}

/// Writes `traces` as one replay file (header, rows of all jobs merged in time order).
pub fn write_csv(traces: &[JobTrace], out: &mut impl Write) -> io::Result<()> {
    let mut order: Vec<(i64, u32, u32)> = Vec::new();
    for (t, trace) in traces.iter().enumerate() {
        order.extend(
            trace
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.time, t as u32, i as u32)),
        );
    }
    order.sort_by_key(|&(time, t, i)| (time, t, i));
    writeln!(out, "time,job,node,metric,value")?;
    for (_, t, i) in order {
        let trace = &traces[t as usize];
        let r = trace.rows[i as usize];
        let node = &trace.nodes[r.node as usize];
        let metric = METRICS[r.metric as usize];
        if r.value.abs() >= 1000.0 {
            writeln!(
                out,
                "{},{},{node},{metric},{:.0}",
                r.time, trace.job, r.value
            )?;
        } else {
            writeln!(
                out,
                "{},{},{node},{metric},{:.3}",
                r.time, trace.job, r.value
            )?;
        }
    }
    Ok(())
}

/// A standard normal draw (Box-Muller).
fn normal(r: &mut Rng) -> f64 {
    let u = r.f64().max(1e-12);
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * r.f64()).cos()
}

fn uniform(r: &mut Rng, low: f64, high: f64) -> f64 {
    low + (high - low) * r.f64()
}

fn log_uniform(r: &mut Rng, low: f64, high: f64) -> f64 {
    (low.ln() + (high.ln() - low.ln()) * r.f64()).exp()
}

/// What every node does at one tick (the job-wide state).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Train,
    Checkpoint,
    Eval,
    LoaderStall,
    /// Other tenants' traffic: the job runs at this fraction of its speed.
    Congested(f64),
    /// A faulty machine makes the others wait: this fraction of the speed.
    Straggling(f64),
    /// A rank died: every other rank spins in NCCL until the timeout.
    Hung,
}

impl Phase {
    /// Multipliers of the training levels while in this phase.
    fn levels(self, train_power: f64) -> [f64; 14] {
        let idle_power = IDLE_W / (TDP_W * train_power);
        let waiting = |speed: f64| speed + (1.0 - speed) * 0.5;
        match self {
            Phase::Train => [1.0; 14],
            //            cpu  mem   disk  util  umin  power        clock mutil pcie  nvl   ibtx  ibrx  pfc   cnp
            Phase::Checkpoint => [
                1.8,
                1.05,
                20.0,
                0.03,
                0.0,
                idle_power * 1.3,
                0.9,
                0.02,
                1.5,
                0.01,
                0.02,
                0.02,
                0.05,
                0.05,
            ],
            Phase::Eval => [
                1.2, 1.0, 1.5, 0.6, 0.55, 0.6, 1.0, 0.5, 0.8, 0.3, 0.15, 0.15, 0.2, 0.2,
            ],
            Phase::LoaderStall => [
                1.6, 1.0, 3.0, 0.35, 0.2, 0.45, 1.0, 0.3, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3,
            ],
            Phase::Congested(s) => [
                1.0,
                1.0,
                1.0,
                0.97,
                0.95,
                waiting(s),
                1.0,
                s,
                s,
                s,
                s,
                s,
                4.0,
                3.0,
            ],
            Phase::Straggling(s) => [
                1.0,
                1.0,
                1.0,
                0.98,
                0.97,
                waiting(s),
                1.0,
                s,
                s,
                s,
                s,
                s,
                s,
                s,
            ],
            Phase::Hung => [
                0.5,
                1.0,
                0.05,
                1.03,
                1.03,
                0.45 / train_power,
                1.08,
                0.01,
                0.003,
                0.003,
                0.01,
                0.01,
                0.001,
                0.001,
            ],
        }
    }

    /// Whether the GPUs compute (pipeline stages differ only then).
    fn computing(self) -> bool {
        !matches!(self, Phase::Checkpoint | Phase::Hung)
    }
}

/// The planted fault, with its drawn severity.
#[derive(Debug, Clone)]
struct FaultPlan {
    kind: FaultKind,
    node: usize,
    onset_tick: usize,
    /// The job's speed while the machine is the straggler.
    speed: f64,
    /// Pause frames per second the faulty port adds (PCIe, NIC, AOC): a
    /// receiver that cannot drain its buffer pauses its link hundreds to
    /// thousands of times a second, whatever the fabric's own level.
    severity: f64,
    second: f64,
    /// NIC dropout: the job hangs instead of rerouting.
    hangs: bool,
    /// AOC: share of ticks with errors.
    flapping: f64,
}

/// Everything drawn for one job before its rows are written.
struct Job {
    n: usize,
    level: [f64; 14],
    train_power: f64,
    offsets: Vec<[f64; 14]>,
    stage: Vec<usize>,
    stage_factor: Vec<[f64; 14]>,
    /// Rank 0's extra CPU points, memory factor, disk bytes/s, and whether it alone writes checkpoints.
    rank0: Option<(f64, f64, f64, bool)>,
    start_delay: Vec<f64>,
    load_s: Vec<f64>,
    phases: Vec<Phase>,
    /// Per tick and leaf switch (8 nodes), the congestion multiplier.
    congestion: Vec<Vec<f64>>,
    fault: Option<FaultPlan>,
    /// Per node: (first tick silent, ticks silent).
    gaps: Vec<Option<(usize, usize)>>,
    skew: Vec<i64>,
    missing: f64,
    /// Ticks after which the job has ended (a hang's timeout).
    end_tick: usize,
    confounders: Vec<&'static str>,
    /// Per node, ticks by which it crosses the job's phases late (a job-wide
    /// drop seen tens of seconds apart): 0 in [`generate`]'s traces.
    lag: Vec<usize>,
    /// Per node, a bit per metric it never reports: 0 in [`generate`]'s traces.
    absent: Vec<u16>,
}

/// Generates the trace of `spec`.
pub fn generate(spec: &TraceSpec) -> JobTrace {
    generate_with(spec, false)
}

/// [`generate`]'s trace with the confounders issue 45 found missing, each
/// drawn from its own random stream (the rest of the trace is `generate`'s):
/// job-wide drops that nodes cross up to 30 s apart, 3 unequal pipeline
/// stages, nodes a few % slower all their life, and nodes that never
/// report some metrics.
pub fn generate_confounded(spec: &TraceSpec) -> JobTrace {
    generate_with(spec, true)
}

fn generate_with(spec: &TraceSpec, confounded: bool) -> JobTrace {
    let mut r = Rng::new(spec.seed ^ 0x6D65_7472_6963_7321);
    let mut job = draw_job(spec, &mut r);
    if confounded {
        confound(&mut job, &mut Rng::new(spec.seed ^ 0x0C0F_0C0F_0045_0045));
    }
    let mut rows = Vec::with_capacity(job.n * job.end_tick * METRICS.len());
    let mut noise = Rng::new(spec.seed ^ 0x0015_E000_0000_0001);
    for tick in 0..job.end_tick {
        for node in 0..job.n {
            emit_tick(&job, spec, tick, node, &mut noise, &mut rows);
        }
    }
    rows.sort_by_key(|row| row.time);
    let nodes: Vec<String> = (0..job.n)
        .map(|i| format!("n{:03}-{:04}", spec.seed % 1000, i + 1))
        .collect();
    let fault = job.fault.as_ref().map(|f| Fault {
        kind: f.kind,
        node: nodes[f.node].clone(),
        onset: spec.start + f.onset_tick as i64 * INTERVAL_S,
    });
    JobTrace {
        job: spec.job.clone(),
        nodes,
        rows,
        fault,
        confounders: job.confounders,
    }
}

fn draw_job(spec: &TraceSpec, r: &mut Rng) -> Job {
    let n = spec.nodes.max(1);
    let ticks = (spec.duration_s / INTERVAL_S) as usize;
    let train_power = uniform(r, 0.65, 0.85);
    let level = [
        uniform(r, 15.0, 35.0),     // cpu %
        uniform(r, 4e11, 9e11),     // mem bytes
        uniform(r, 5e7, 3e8),       // disk bytes/s
        uniform(r, 93.0, 98.0),     // gpu util %
        0.0,                        // set below from gpu util
        GPUS * TDP_W * train_power, // power W
        uniform(r, 1750.0, 1980.0), // clock MHz
        uniform(r, 40.0, 80.0),     // gpu mem util %
        uniform(r, 5e9, 3e10),      // pcie bytes/s
        uniform(r, 5e10, 2e11),     // nvlink bytes/s
        uniform(r, 2e10, 9e10),     // ib tx bytes/s
        0.0,                        // ib rx = tx
        log_uniform(r, 0.5, 500.0), // pfc pauses/s
        log_uniform(r, 0.5, 300.0), // cnp/s
    ];
    let mut level = level;
    level[UTIL_MIN] = level[UTIL] - uniform(r, 1.0, 5.0);
    level[IB_RX] = level[IB_TX];
    let mut confounders = Vec::new();
    let offsets = (0..n).map(|_| node_offsets(r)).collect();
    let (stage, stage_factor) = stages(n, r, &mut confounders);
    let rank0 = (r.f64() < 0.5).then(|| {
        confounders.push("rank 0 logs");
        let alone = r.f64() < 0.5;
        if alone {
            confounders.push("rank 0 writes the checkpoints");
        }
        (
            uniform(r, 8.0, 25.0),
            uniform(r, 1.05, 1.15),
            uniform(r, 5e7, 2e8),
            alone,
        )
    });
    let start_delay = (0..n).map(|_| uniform(r, 0.0, 45.0)).collect();
    let load_s = (0..n).map(|_| uniform(r, 40.0, 110.0)).collect();
    let fault = spec.fault.map(|kind| plan_fault(kind, n, ticks, r));
    let end_tick = match &fault {
        Some(f) if matches!(f.kind, FaultKind::Ecc | FaultKind::GpuCardDrop) || f.hangs => {
            (f.onset_tick + 60 + r.below(121)).min(ticks)
        }
        _ => ticks,
    };
    let phases = shared_phases(ticks, r, &fault, &mut confounders);
    let congestion = (0..ticks)
        .map(|_| {
            (0..n.div_ceil(8))
                .map(|_| (0.45 * normal(r)).exp())
                .collect()
        })
        .collect();
    let gaps = (0..n)
        .map(|_| {
            (r.f64() < 0.02).then(|| {
                (
                    30 + r.below(ticks.saturating_sub(60).max(1)),
                    6 + r.below(25),
                )
            })
        })
        .collect();
    let skew = (0..n).map(|_| r.below(9) as i64 - 4).collect();
    let missing = uniform(r, 0.002, 0.02);
    Job {
        n,
        level,
        train_power,
        offsets,
        stage,
        stage_factor,
        rank0,
        start_delay,
        load_s,
        phases,
        congestion,
        fault,
        gaps,
        skew,
        missing,
        end_tick,
        confounders,
        lag: vec![0; n],
        absent: vec![0; n],
    }
}

/// Adds [`generate_confounded`]'s confounders to a drawn job.
fn confound(job: &mut Job, r: &mut Rng) {
    let n = job.n;
    let faulty = job.fault.as_ref().map(|f| f.node);
    if r.f64() < 0.5 {
        job.confounders.push("staggered job-wide drops");
        job.lag = (0..n).map(|_| r.below(4)).collect();
    }
    if n >= 6 && r.f64() < 0.3 {
        job.confounders.push("3 unequal pipeline stages");
        let first = 1 + r.below(n / 2);
        let second = first + 1 + r.below((n - first - 1).max(1));
        job.stage = (0..n)
            .map(|i| usize::from(i >= first) + usize::from(i >= second))
            .collect();
        job.stage_factor = (0..3)
            .map(|s| {
                let mut f = [1.0; 14];
                if s > 0 {
                    for m in STAGED {
                        f[m] = uniform(r, 0.7, 1.3);
                    }
                    f[UTIL] = uniform(r, 0.8, 1.0);
                    f[UTIL_MIN] = f[UTIL] * uniform(r, 0.95, 1.0);
                }
                f
            })
            .collect();
    }
    if r.f64() < 0.4 {
        job.confounders.push("whole-life slow nodes");
        for _ in 0..(n / 16).max(1) {
            let node = r.below(n);
            if Some(node) == faulty {
                continue;
            }
            let slow = uniform(r, 0.93, 0.98);
            for m in [UTIL, UTIL_MIN, POWER, MEM_UTIL, PCIE, NVLINK, IB_TX, IB_RX] {
                job.offsets[node][m] *= slow;
            }
        }
    }
    if r.f64() < 0.3 {
        job.confounders.push("metric subsets");
        for node in 0..n {
            if Some(node) != faulty && r.f64() < 0.25 {
                for _ in 0..1 + r.below(4) {
                    job.absent[node] |= 1 << r.below(14);
                }
            }
        }
    }
}

/// A machine's own offsets from the job's levels (silicon, firmware, cabling).
fn node_offsets(r: &mut Rng) -> [f64; 14] {
    let mut o = [1.0; 14];
    let spread = [
        0.1, 0.03, 0.3, 0.005, 0.01, 0.03, 0.01, 0.03, 0.05, 0.02, 0.02, 0.02, 0.3, 0.3,
    ];
    for (m, s) in spread.iter().enumerate() {
        o[m] = (s * normal(r)).exp();
    }
    o
}

/// Pipeline stages: 2 or 4 equal groups of consecutive nodes in 30% of jobs.
fn stages(
    n: usize,
    r: &mut Rng,
    confounders: &mut Vec<&'static str>,
) -> (Vec<usize>, Vec<[f64; 14]>) {
    let count = if n >= 8 && r.f64() < 0.3 {
        [2, 4][r.below(2)]
    } else {
        1
    };
    if count > 1 {
        confounders.push("pipeline stages");
    }
    let factors = (0..count)
        .map(|s| {
            let mut f = [1.0; 14];
            if s > 0 {
                for m in STAGED {
                    f[m] = uniform(r, 0.7, 1.3);
                }
                f[UTIL] = uniform(r, 0.8, 1.0);
                f[UTIL_MIN] = f[UTIL] * uniform(r, 0.95, 1.0);
            }
            f
        })
        .collect();
    let stage = (0..n).map(|i| i * count / n).collect();
    (stage, factors)
}

fn plan_fault(kind: FaultKind, n: usize, ticks: usize, r: &mut Rng) -> FaultPlan {
    let first = 48; // 8 minutes in
    let last = ticks.saturating_sub(72).max(first + 1); // 12 minutes before the end
    FaultPlan {
        kind,
        node: r.below(n),
        onset_tick: first + r.below(last - first),
        speed: uniform(r, 0.7, 0.92),
        severity: log_uniform(r, 50.0, 5000.0),
        second: uniform(r, 0.0, 1.0),
        hangs: kind == FaultKind::NicDropout && r.f64() < 0.4,
        flapping: uniform(r, 0.6, 0.9),
    }
}

/// The job-wide phase of every tick: checkpoints, evaluations, loader
/// stalls, congestion, and what the fault does to the whole job.
fn shared_phases(
    ticks: usize,
    r: &mut Rng,
    fault: &Option<FaultPlan>,
    confounders: &mut Vec<&'static str>,
) -> Vec<Phase> {
    let mut phases = vec![Phase::Train; ticks];
    let mut paint = |from: usize, len: usize, p: Phase| {
        for slot in phases.iter_mut().skip(from).take(len) {
            *slot = p;
        }
    };
    let every = 72 + r.below(80); // 12-25 minutes
    let mut t = 18 + r.below(every);
    while t < ticks {
        paint(t, 3 + r.below(10), Phase::Checkpoint);
        t += every;
    }
    confounders.push("checkpoints");
    if r.f64() < 0.6 {
        confounders.push("evaluations");
        let every = 120 + r.below(120);
        let mut t = 30 + r.below(every);
        while t < ticks {
            paint(t, 6 + r.below(19), Phase::Eval);
            t += every;
        }
    }
    for _ in 0..r.below(4) {
        confounders.push("data-loader stall");
        paint(
            30 + r.below(ticks.max(31) - 30),
            2 + r.below(5),
            Phase::LoaderStall,
        );
    }
    for _ in 0..r.below(3) {
        confounders.push("congestion slow-down");
        paint(
            30 + r.below(ticks.max(31) - 30),
            18 + r.below(43),
            Phase::Congested(uniform(r, 0.5, 0.85)),
        );
    }
    if let Some(f) = fault {
        let effect = match f.kind {
            FaultKind::Ecc | FaultKind::GpuCardDrop => Phase::Hung,
            FaultKind::NicDropout if f.hangs => Phase::Hung,
            _ => Phase::Straggling(f.speed),
        };
        for p in phases.iter_mut().skip(f.onset_tick) {
            // A hang outlasts everything; a straggler still checkpoints and evaluates.
            if effect == Phase::Hung || matches!(p, Phase::Train | Phase::Congested(_)) {
                *p = effect;
            }
        }
    }
    phases
}

/// The rows of one node at one tick (none while its exporter is silent).
fn emit_tick(
    job: &Job,
    spec: &TraceSpec,
    tick: usize,
    node: usize,
    r: &mut Rng,
    rows: &mut Vec<Row>,
) {
    let silent =
        |t: usize| matches!(job.gaps[node], Some((from, len)) if t >= from && t < from + len);
    if silent(tick) || r.f64() < job.missing {
        return;
    }
    let inflate = match job.gaps[node] {
        Some((from, len)) if tick == from + len => (len + 1) as f64,
        _ => 1.0,
    };
    let mut v = true_values(job, tick, node, r);
    add_noise(&mut v, r);
    let time = spec.start + tick as i64 * INTERVAL_S + job.skew[node] + r.below(3) as i64 - 1;
    for (m, value) in v.iter().enumerate() {
        if r.f64() < job.missing / 4.0 || job.absent[node] & (1 << m) != 0 {
            continue;
        }
        let value = if COUNTERS.contains(&m) {
            value * inflate
        } else {
            *value
        };
        rows.push(Row {
            time,
            node: node as u32,
            metric: m as u8,
            value,
        });
    }
}

/// What the node's metrics are at a tick, before measurement noise.
fn true_values(job: &Job, tick: usize, node: usize, r: &mut Rng) -> [f64; 14] {
    let secs = tick as f64 * INTERVAL_S as f64;
    let phase = job.phases[tick.saturating_sub(job.lag[node])];
    let mut v = job.level;
    let levels = phase.levels(job.train_power);
    for m in 0..14 {
        v[m] *= job.offsets[node][m] * levels[m];
        if phase.computing() {
            v[m] *= job.stage_factor[job.stage[node]][m];
        }
    }
    if let Phase::Congested(_) = phase {
        let c = job.congestion[tick][node / 8];
        v[PFC] *= c;
        v[CNP] *= c;
    }
    rank_zero(job, node, phase, &mut v);
    start_up(job, node, secs, &mut v);
    if let Some(f) = &job.fault {
        if node == f.node && tick >= f.onset_tick {
            fault_effect(f, job.train_power, phase, &mut v, r);
        }
    }
    v
}

fn rank_zero(job: &Job, node: usize, phase: Phase, v: &mut [f64; 14]) {
    let Some((cpu, mem, disk, alone)) = job.rank0 else {
        return;
    };
    if node == 0 {
        v[CPU] += cpu;
        v[MEM] *= mem;
        v[DISK] += disk;
    }
    if alone && phase == Phase::Checkpoint {
        // Only rank 0 writes: its disks run flat out, the others' are nearly idle.
        v[DISK] = if node == 0 {
            v[DISK] * 4.0
        } else {
            v[DISK] / 20.0
        };
    }
}

/// Start-up: the node is idle until its processes start, then loads data,
/// then ramps up.
fn start_up(job: &Job, node: usize, secs: f64, v: &mut [f64; 14]) {
    let begin = job.start_delay[node];
    let loaded = begin + job.load_s[node];
    if secs >= loaded + 30.0 {
        return;
    }
    let busy = if secs < loaded {
        0.05
    } else {
        (secs - loaded) / 30.0
    };
    for m in [
        UTIL, UTIL_MIN, MEM_UTIL, PCIE, NVLINK, IB_TX, IB_RX, PFC, CNP,
    ] {
        v[m] *= busy;
    }
    v[POWER] = IDLE_W * GPUS + (v[POWER] - IDLE_W * GPUS).max(0.0) * busy;
    if secs >= begin && secs < loaded {
        v[DISK] *= 8.0;
        v[CPU] = (v[CPU] * 3.0).min(95.0);
        v[MEM] *= (secs - begin) / job.load_s[node];
    } else if secs < begin {
        v[CPU] = 2.0;
        v[MEM] *= 0.02;
        v[DISK] *= 0.01;
    }
}

/// What the fault does to the faulty machine's own metrics.
fn fault_effect(f: &FaultPlan, train_power: f64, phase: Phase, v: &mut [f64; 14], r: &mut Rng) {
    // Without waiting on anyone, the straggler's GPUs draw training power.
    let unwaiting = |v: &mut [f64; 14]| {
        if let Phase::Straggling(s) = phase {
            v[POWER] /= s + (1.0 - s) * 0.5;
        }
    };
    let rank_gone = |v: &mut [f64; 14]| {
        v[CPU] *= 7.0 / 8.0;
        v[MEM] *= 1.0 - 0.7 / 8.0;
    };
    match f.kind {
        FaultKind::Ecc => {
            let spinning = v[POWER] / GPUS;
            v[POWER] -= spinning - IDLE_W;
            v[UTIL] *= 7.0 / 8.0;
            v[UTIL_MIN] = 0.0;
            v[MEM_UTIL] *= 7.0 / 8.0;
            rank_gone(v);
            let _ = train_power;
        }
        FaultKind::GpuCardDrop => {
            v[POWER] *= 7.0 / 8.0;
            rank_gone(v);
        }
        FaultKind::PcieDowngrade => {
            unwaiting(v);
            v[PFC] += f.severity;
            v[CNP] += f.severity * f.second * 0.3;
        }
        FaultKind::NicDropout if f.hangs => {
            v[IB_TX] *= 0.02;
            v[IB_RX] *= 0.02;
        }
        FaultKind::NicDropout => {
            unwaiting(v);
            v[PFC] += f.severity;
            v[CNP] += f.severity * 0.3;
        }
        FaultKind::NvlinkError => {
            unwaiting(v);
            v[NVLINK] *= 0.5 + 0.35 * f.second;
            v[PCIE] *= 1.5 + 1.5 * f.second;
        }
        FaultKind::AocError => {
            if r.f64() < f.flapping {
                v[PFC] += f.severity * 0.5;
                v[CNP] += f.severity * 0.1;
                v[IB_RX] *= 0.93;
            }
        }
    }
}

/// Measurement noise of one scrape.
fn add_noise(v: &mut [f64; 14], r: &mut Rng) {
    v[CPU] = (v[CPU] + 3.0 * normal(r)).clamp(0.0, 100.0);
    v[MEM] *= 1.0 + 0.005 * normal(r);
    v[DISK] *= (0.5 * normal(r)).exp();
    v[UTIL] = (v[UTIL] + normal(r)).clamp(0.0, 100.0);
    v[UTIL_MIN] = (v[UTIL_MIN] - 1.5 * normal(r).abs()).clamp(0.0, v[UTIL]);
    v[POWER] *= 1.0 + 0.02 * normal(r);
    v[CLOCK] *= 1.0 + 0.005 * normal(r);
    v[MEM_UTIL] = (v[MEM_UTIL] + 1.5 * normal(r)).clamp(0.0, 100.0);
    for m in [PCIE, NVLINK, IB_TX, IB_RX] {
        v[m] *= (1.0 + 0.03 * normal(r)).max(0.0);
    }
    // Pauses and CNPs are counts over the interval: Poisson-like, with bursts.
    for m in [PFC, CNP] {
        let count = v[m] * INTERVAL_S as f64 * (0.35 * normal(r)).exp();
        let poisson = (count + count.sqrt() * normal(r)).max(0.0).round();
        v[m] = poisson / INTERVAL_S as f64;
    }
}

/// A detector's call, as the scorer reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
}

/// Precision, recall, F1 and detection delay of calls against traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub true_positives: usize,
    pub false_positives: usize,
    /// Planted faults never called.
    pub missed: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Seconds from onset to the call, per true positive.
    pub delays: Vec<i64>,
    /// The false calls and the missed faults, described.
    pub mistakes: Vec<String>,
}

impl Score {
    /// The median delay in seconds (`None` without a true positive).
    pub fn median_delay(&self) -> Option<i64> {
        let mut d = self.delays.clone();
        d.sort_unstable();
        d.get(d.len() / 2).copied()
    }
}

/// Scores `calls` against the faults planted in `traces`. A call is right
/// when it names the faulty node of its job at or after the onset; every
/// other call is false.
pub fn score(traces: &[JobTrace], calls: &[Call]) -> Score {
    let (mut tp, mut fp, mut delays, mut mistakes) = (0, 0, Vec::new(), Vec::new());
    let mut found = std::collections::HashSet::new();
    for call in calls {
        let trace = traces.iter().find(|t| t.job == call.job);
        let fault = trace.and_then(|t| t.fault.as_ref());
        match fault {
            Some(f) if f.node == call.node && call.detected_at >= f.onset => {
                if found.insert(call.job.clone()) {
                    tp += 1;
                    delays.push(call.detected_at - f.onset);
                }
            }
            _ => {
                fp += 1;
                let why = trace
                    .map(|t| format!("{:?} {:?}", t.fault, t.confounders))
                    .unwrap_or_default();
                mistakes.push(format!(
                    "false call {} {} at {}: {why}",
                    call.job, call.node, call.detected_at
                ));
            }
        }
    }
    let planted: Vec<&JobTrace> = traces.iter().filter(|t| t.fault.is_some()).collect();
    for t in &planted {
        if !found.contains(&t.job) {
            mistakes.push(format!(
                "missed {} {:?} ({} nodes)",
                t.job,
                t.fault,
                t.nodes.len()
            ));
        }
    }
    let precision = if tp + fp == 0 {
        1.0
    } else {
        tp as f64 / (tp + fp) as f64
    };
    let recall = if planted.is_empty() {
        1.0
    } else {
        tp as f64 / planted.len() as f64
    };
    let f1 = if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    Score {
        true_positives: tp,
        false_positives: fp,
        missed: planted.len() - tp,
        precision,
        recall,
        f1,
        delays,
        mistakes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(fault: Option<FaultKind>) -> TraceSpec {
        TraceSpec {
            seed: 7,
            job: "77".into(),
            nodes: 8,
            start: 1_760_000_000,
            duration_s: 2400,
            fault,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let a = generate(&spec(None));
        let b = generate(&spec(None));
        assert_eq!(a.rows, b.rows);
    }

    #[test]
    fn rows_come_in_time_order_with_skewed_clocks() {
        let t = generate(&spec(None));
        assert!(t.rows.windows(2).all(|w| w[0].time <= w[1].time));
        let off_grid = t
            .rows
            .iter()
            .filter(|r| (r.time - 1_760_000_000) % INTERVAL_S != 0)
            .count();
        assert!(off_grid > t.rows.len() / 2, "clocks are not skewed");
    }

    #[test]
    fn an_ecc_error_zeroes_the_lowest_gpu_of_its_machine_only() {
        let t = generate(&spec(Some(FaultKind::Ecc)));
        let f = t.fault.clone().unwrap();
        let faulty = t.nodes.iter().position(|n| *n == f.node).unwrap() as u32;
        let after = |node_is_faulty: bool| {
            t.rows
                .iter()
                .filter(|r| r.metric as usize == UTIL_MIN && r.time > f.onset + 30)
                .filter(|r| (r.node == faulty) == node_is_faulty)
                .map(|r| r.value)
                .fold(0.0f64, f64::max)
        };
        assert_eq!(after(true), 0.0);
        assert!(after(false) > 50.0);
    }

    #[test]
    fn a_right_call_a_false_call_and_a_miss_are_scored() {
        let mut traces = vec![generate(&spec(Some(FaultKind::Ecc)))];
        let mut other = spec(Some(FaultKind::Ecc));
        other.job = "78".into();
        traces.push(generate(&other));
        let f = traces[0].fault.clone().unwrap();
        let calls = vec![
            Call {
                job: "77".into(),
                node: f.node.clone(),
                detected_at: f.onset + 40,
            },
            Call {
                job: "77".into(),
                node: "elsewhere".into(),
                detected_at: f.onset,
            },
        ];
        let s = score(&traces, &calls);
        assert_eq!((s.true_positives, s.false_positives, s.missed), (1, 1, 1));
        assert_eq!(s.median_delay(), Some(40));
        assert!((s.precision - 0.5).abs() < 1e-9 && (s.recall - 0.5).abs() < 1e-9);
    }
}
