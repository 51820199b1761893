//! Planning a seed's jobs, and rendering one job's rows.

use super::{
    hash01, IndependentJob, IndependentSpec, PlantedFault, Rng, CONFOUNDERS, CONFOUNDER_P,
    FAULT_MIX, SIZES, SUBTLE_KINDS,
};

/// The metrics, known ones first (their order is the index in a row).
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
    // Emitted by real exporters, unknown to the detector.
    "gpu_temp",
    "nic_errors",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "node_load1",
];
const CPU: usize = 0;
const MEM: usize = 1;
const DISK: usize = 2;
const UTIL: usize = 3;
const UMIN: usize = 4;
const POWER: usize = 5;
const CLOCK: usize = 6;
const MUTIL: usize = 7;
const PCIE: usize = 8;
const NVL: usize = 9;
const IBTX: usize = 10;
const IBRX: usize = 11;
const PFC: usize = 12;
const CNP: usize = 13;
const TEMP: usize = 14;
const NICERR: usize = 15;
const SMACT: usize = 16;
const ECC: usize = 17;
const LOAD1: usize = 18;
const NM: usize = METRICS.len();
/// Rates computed from counters: an exporter's first scrape after a restart reads 0.
const RATES: [usize; 7] = [DISK, PCIE, NVL, IBTX, IBRX, PFC, CNP];
/// Groups of metrics a node's exporter may lack (no RDMA plugin, an old DCGM profile...).
const PARTIAL_GROUPS: [&[usize]; 4] = [
    &[PFC, CNP],
    &[IBTX, IBRX, PFC, CNP],
    &[UMIN, CLOCK, MUTIL, NVL],
    &[DISK, PCIE],
];
/// The throughput grid's step, seconds.
const GRID: i64 = 5;

pub(super) fn metric_name(i: u8) -> &'static str {
    METRICS[i as usize]
}

/// One sample as written.
pub(super) struct Row {
    pub time: i64,
    pub job: u32,
    pub node: u32,
    pub metric: u8,
    pub value: f64,
}

#[derive(Clone, Copy)]
struct Gpu {
    peak: f64,
    idle: f64,
    max_clock: f64,
    idle_clock: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum EventKind {
    Checkpoint,
    Eval,
    /// A loader stall: job-wide (`None`) or starting on one node.
    Stall(Option<usize>),
}

#[derive(Clone, Copy)]
struct Event {
    kind: EventKind,
    t0: i64,
    t1: i64,
}

#[derive(Clone, Copy)]
struct Stage {
    compute: f64,
    fabric: f64,
    nvlink: f64,
    pcie: f64,
}

pub(super) struct NodePlan {
    pub name: String,
    stage: usize,
    rack: u64,
    leaf: u64,
    speed: f64,
    power_f: f64,
    temp_off: f64,
    clock_off: f64,
    skew: i64,
    phase: i64,
    missing: u32,
    gaps: Vec<(i64, i64)>,
    moe_phase: f64,
    congested: bool,
    throttled: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Ecc,
    Pcie,
    Nic,
    CardDrop,
    Nvlink,
    Aoc,
    Thermal,
    SlowHost,
    Link,
}

struct FaultPlan {
    node: usize,
    kind: Kind,
    onset: i64,
    /// The job hangs in NCCL from onset until this time.
    hang_end: Option<i64>,
    /// After the hang: restart without the node (else the job exits).
    restart: bool,
    /// The node's capacity while the fault lasts (slow faults).
    cap: f64,
    /// A per-kind variant (ECC: process died; card drop: rows vanish; ...).
    variant: bool,
    /// How much the node's own metric drops (PCIe share, link share ...).
    share: f64,
}

pub(super) struct JobPlan {
    pub truth: IndependentJob,
    pub nodes: Vec<NodePlan>,
    start: i64,
    dur: i64,
    interval: i64,
    gpu: Gpu,
    stages: Vec<Stage>,
    events: Vec<Event>,
    fault: Option<FaultPlan>,
    has: [bool; 18],
    load_s: i64,
    ramp_s: i64,
    reload_s: i64,
    lr_change: (i64, f64),
    moe: (f64, f64),
    congestion: (i64, i64, f64),
    throttle: (i64, i64, f64),
    barrier_nccl: bool,
    rank0_only_ckpt: bool,
    levels: [f64; 6],
    pfc_burst_p: f64,
    drop_p: f64,
    unknown: Vec<usize>,
    restarts: Vec<(usize, i64)>,
    noise_seed: u64,
}

/// Indices of [`CONFOUNDERS`] in `JobPlan::has`.
const C_CHECKPOINT: usize = 0;
const C_EVAL: usize = 1;
const C_STALL: usize = 2;
const C_WARMUP: usize = 3;
const C_LR: usize = 4;
const C_PIPELINE: usize = 5;
const C_MOE: usize = 6;
const C_RANK0: usize = 7;
const C_OFFSETS: usize = 8;
const C_PARTIAL: usize = 9;
const C_UNKNOWN: usize = 10;
const C_RESTART: usize = 11;
const C_GAP: usize = 12;
const C_MISSING: usize = 13;
const C_SKEW: usize = 14;
const C_PFC: usize = 15;
const C_CONGESTION: usize = 16;
const C_THROTTLE: usize = 17;

/// Indices of `levels`.
const L_IB: usize = 0;
const L_NVL: usize = 1;
const L_PCIE: usize = 2;
const L_DISK: usize = 3;
const L_CPU: usize = 4;
const L_MEM: usize = 5;

pub(super) fn plan(spec: &IndependentSpec) -> Vec<JobPlan> {
    let mut rng = Rng::new(spec.seed, 0x0b11d);
    let base = 1_767_225_600 + (spec.seed % 1000) as i64 * 86_400;
    let first_id = 7_300_000 + (spec.seed.wrapping_mul(7919) % 600_000) as usize;
    let mut cursor = rng.int(0, 4000) as u64;
    (0..spec.jobs)
        .map(|i| {
            let mut jr = Rng::new(spec.seed, 1 + i as u64);
            let start = base + rng.int(0, 7200);
            plan_job(
                spec,
                &mut jr,
                (first_id + i).to_string(),
                start,
                &mut cursor,
            )
        })
        .collect()
}

fn plan_job(
    spec: &IndependentSpec,
    rng: &mut Rng,
    job: String,
    start: i64,
    cursor: &mut u64,
) -> JobPlan {
    let n = SIZES[rng.weighted(&SIZES.map(|s| s.1))]
        .0
        .min(spec.max_nodes.max(2));
    let dur = 60
        * rng.int(
            spec.min_minutes as i64,
            spec.max_minutes.max(spec.min_minutes) as i64,
        );
    let interval = [10, 15, 30][rng.weighted(&[0.5, 0.3, 0.2])];
    let mut has = [false; 18];
    for (h, p) in has.iter_mut().zip(CONFOUNDER_P) {
        *h = rng.chance(p);
    }
    let (gpu, levels) = hardware(rng);
    let nodes = plan_nodes(rng, n, &has, interval, cursor);
    let stages = plan_stages(rng, has[C_PIPELINE]);
    let mut plan = JobPlan {
        truth: IndependentJob {
            job,
            nodes: Vec::new(),
            fault: None,
            confounders: Vec::new(),
        },
        nodes,
        start,
        dur,
        interval,
        gpu,
        stages,
        events: Vec::new(),
        fault: None,
        has,
        load_s: if has[C_WARMUP] { rng.int(60, 240) } else { 20 },
        ramp_s: if has[C_WARMUP] { rng.int(60, 300) } else { 0 },
        reload_s: rng.int(60, 180),
        lr_change: (
            rng.int(dur / 4, dur * 3 / 4),
            1.0 + rng.range(0.04, 0.12) * sign(rng),
        ),
        moe: (rng.range(0.05, 0.2), rng.range(240.0, 900.0)),
        congestion: window(rng, dur, (180, 900), (0.65, 0.9)),
        throttle: window(rng, dur, (300, 1200), (0.82, 0.92)),
        barrier_nccl: rng.chance(0.6),
        rank0_only_ckpt: rng.chance(0.4),
        levels,
        pfc_burst_p: rng.range(0.005, 0.03),
        drop_p: rng.range(0.003, 0.02),
        unknown: Vec::new(),
        restarts: Vec::new(),
        noise_seed: rng.next(),
    };
    assign_groups(&mut plan, rng);
    plan.events = plan_events(rng, &plan);
    if rng.chance(spec.fault_share) {
        plan.fault = Some(plan_fault(rng, &plan, spec.subtle_share));
    }
    plan.unknown = [TEMP, NICERR, SMACT, ECC, LOAD1]
        .into_iter()
        .filter(|_| plan.has[C_UNKNOWN] && rng.chance(0.6))
        .collect();
    if plan.has[C_UNKNOWN] && plan.unknown.is_empty() {
        plan.unknown.push(TEMP);
    }
    finish_truth(&mut plan);
    plan
}

/// The job's GPU model and its traffic levels (see `L_*`).
fn hardware(rng: &mut Rng) -> (Gpu, [f64; 6]) {
    let gpu = if rng.chance(0.7) {
        Gpu {
            peak: 700.0,
            idle: 75.0,
            max_clock: 1980.0,
            idle_clock: 345.0,
        }
    } else {
        Gpu {
            peak: 400.0,
            idle: 55.0,
            max_clock: 1410.0,
            idle_clock: 210.0,
        }
    };
    let tp = rng.chance(0.6);
    let levels = [
        rng.range(8e9, 35e9),
        if tp {
            rng.range(80e9, 250e9)
        } else {
            rng.range(15e9, 50e9)
        },
        rng.range(2e9, 8e9),
        rng.range(50e6, 300e6),
        rng.range(10.0, 25.0),
        rng.range(250.0, 700.0),
    ];
    (gpu, levels)
}

fn sign(rng: &mut Rng) -> f64 {
    if rng.chance(0.5) {
        1.0
    } else {
        -1.0
    }
}

/// A window of `lo..hi` seconds somewhere after the warm-up, and its factor.
fn window(rng: &mut Rng, dur: i64, len: (i64, i64), factor: (f64, f64)) -> (i64, i64, f64) {
    let len = rng.int(len.0, len.1).min(dur / 3);
    let t0 = rng.int(400, (dur - len - 60).max(401));
    (t0, t0 + len, rng.range(factor.0, factor.1))
}

fn plan_nodes(
    rng: &mut Rng,
    n: usize,
    has: &[bool; 18],
    interval: i64,
    cursor: &mut u64,
) -> Vec<NodePlan> {
    let max_skew = if has[C_SKEW] { rng.int(1, 5) } else { 0 };
    let moe_spread = rng.range(0.0, std::f64::consts::TAU);
    (0..n)
        .map(|i| {
            // Allocation skips a few nodes (down, drained, another job's).
            *cursor += 1 + u64::from(rng.chance(0.1)) * rng.int(1, 3) as u64;
            let pod = *cursor / 128;
            let num = *cursor % 128 + 1;
            let letter = (b'a' + (pod / 4 % 26) as u8) as char;
            NodePlan {
                name: format!("dgx-{letter}{}-{num:03}", pod % 4 + 1 + 4 * (pod / 104)),
                stage: 0,
                rack: *cursor / 4,
                leaf: *cursor / 32,
                speed: 1.0 + rng.normal() * 0.004,
                power_f: 1.0 + rng.normal() * 0.012,
                temp_off: rng.normal() * 1.5,
                clock_off: rng.normal() * 8.0,
                skew: if max_skew > 0 {
                    rng.int(-max_skew, max_skew)
                } else {
                    0
                },
                phase: rng.int(0, interval - 1),
                missing: 0,
                gaps: Vec::new(),
                moe_phase: moe_spread + i as f64 * rng.range(0.5, 2.5),
                congested: false,
                throttled: false,
            }
        })
        .collect()
}

fn plan_stages(rng: &mut Rng, pipeline: bool) -> Vec<Stage> {
    let count = if pipeline { rng.int(2, 4) as usize } else { 1 };
    (0..count)
        .map(|s| {
            let edge = s == 0 || s + 1 == count;
            Stage {
                compute: if count == 1 {
                    1.0
                } else {
                    rng.range(0.8, 1.05)
                },
                // First and last stages send activations one way only.
                fabric: if count == 1 {
                    1.0
                } else if edge {
                    rng.range(0.6, 0.9)
                } else {
                    rng.range(1.0, 1.3)
                },
                nvlink: if count == 1 { 1.0 } else { rng.range(0.8, 1.2) },
                pcie: if count == 1 { 1.0 } else { rng.range(0.7, 1.3) },
            }
        })
        .collect()
}

/// Stages, lifetime offsets, partial exporters, gaps, leaf congestion, rack heat.
fn assign_groups(plan: &mut JobPlan, rng: &mut Rng) {
    let n = plan.nodes.len();
    let stages = plan.stages.len().min(n);
    // Unequal stage sizes: cut points drawn, every stage keeps at least one node.
    let mut cuts: Vec<usize> = (1..stages)
        .map(|_| rng.int(1, n as i64 - 1) as usize)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    plan.stages.truncate(cuts.len() + 1);
    for (i, node) in plan.nodes.iter_mut().enumerate() {
        node.stage = cuts.iter().filter(|&&c| i >= c).count();
    }
    if plan.has[C_OFFSETS] {
        for _ in 0..rng.int(1, 3) {
            let node = &mut plan.nodes[rng.int(0, n as i64 - 1) as usize];
            node.speed *= 1.0 - rng.range(0.02, 0.05);
            node.power_f *= 1.0 + rng.range(0.03, 0.07) * sign(rng);
            node.temp_off += rng.range(3.0, 8.0);
        }
    }
    if plan.has[C_PARTIAL] {
        let group = PARTIAL_GROUPS[rng.int(0, 3) as usize];
        let mask = group.iter().fold(0u32, |m, &k| m | 1 << k);
        let count = ((n as f64 * rng.range(0.1, 0.4)).round() as usize).max(1);
        let first = rng.int(0, (n - count) as i64) as usize;
        for node in &mut plan.nodes[first..first + count] {
            node.missing = mask;
        }
    }
    let dur = plan.dur;
    if plan.has[C_RESTART] {
        for _ in 0..rng.int(1, 2) {
            let j = rng.int(0, n as i64 - 1) as usize;
            let t0 = rng.int(300, dur - 120);
            plan.nodes[j].gaps.push((t0, t0 + rng.int(15, 60)));
            plan.restarts.push((j, t0));
        }
    }
    if plan.has[C_GAP] {
        for _ in 0..rng.int(1, 2) {
            let j = rng.int(0, n as i64 - 1) as usize;
            let t0 = rng.int(300, dur - 360);
            plan.nodes[j].gaps.push((t0, t0 + rng.int(60, 300)));
        }
    }
    let leaf = plan.nodes[rng.int(0, n as i64 - 1) as usize].leaf;
    let racks: Vec<u64> = (0..rng.int(1, 2))
        .map(|_| plan.nodes[rng.int(0, n as i64 - 1) as usize].rack)
        .collect();
    for node in &mut plan.nodes {
        node.congested = plan.has[C_CONGESTION] && node.leaf == leaf;
        node.throttled = plan.has[C_THROTTLE] && racks.contains(&node.rack);
    }
}

fn plan_events(rng: &mut Rng, plan: &JobPlan) -> Vec<Event> {
    let mut events = Vec::new();
    let train = plan.load_s + plan.ramp_s + 60;
    let mut push_periodic = |rng: &mut Rng, kind, every: (i64, i64), len: (i64, i64)| {
        let mut t = train + rng.int(every.0 / 2, every.1);
        while t < plan.dur - 60 {
            let l = rng.int(len.0, len.1);
            events.push(Event {
                kind,
                t0: t,
                t1: t + l,
            });
            t += l + rng.int(every.0, every.1);
        }
    };
    if plan.has[C_CHECKPOINT] {
        push_periodic(rng, EventKind::Checkpoint, (480, 1500), (30, 150));
    }
    if plan.has[C_EVAL] {
        push_periodic(rng, EventKind::Eval, (720, 1800), (60, 240));
    }
    if plan.has[C_STALL] {
        for _ in 0..rng.int(2, 5) {
            let t0 = rng.int(train, plan.dur - 120);
            let origin = rng
                .chance(0.5)
                .then(|| rng.int(0, plan.nodes.len() as i64 - 1));
            let kind = EventKind::Stall(origin.map(|o| o as usize));
            events.push(Event {
                kind,
                t0,
                t1: t0 + rng.int(15, 90),
            });
        }
    }
    // Overlapping phases: the earlier one wins where they meet.
    events.sort_by_key(|e| e.t0);
    events
}

fn plan_fault(rng: &mut Rng, plan: &JobPlan, subtle_share: f64) -> FaultPlan {
    let subtle = rng.chance(subtle_share);
    let kind = if subtle {
        [Kind::Thermal, Kind::SlowHost, Kind::Link][rng.int(0, 2) as usize]
    } else {
        [
            Kind::Ecc,
            Kind::Pcie,
            Kind::Nic,
            Kind::CardDrop,
            Kind::Nvlink,
            Kind::Aoc,
        ][rng.weighted(&FAULT_MIX.map(|f| f.1))]
    };
    let onset = rng.int(600 + 30, (plan.dur - 300).max(631));
    let variant = rng.chance(match kind {
        Kind::Nic => 0.7,
        Kind::Nvlink => 0.8,
        Kind::Aoc => 0.3,
        _ => 0.5,
    });
    let hangs = matches!(kind, Kind::Ecc | Kind::CardDrop)
        || (variant && kind == Kind::Nic)
        || (variant && kind == Kind::Nvlink);
    let timeout = match kind {
        Kind::Nic => rng.int(60, 600),
        _ => rng.int(300, 1500),
    };
    let cap = match kind {
        Kind::Pcie => rng.range(0.65, 0.9),
        Kind::Nic => rng.range(0.75, 0.85),
        Kind::Nvlink => rng.range(0.3, 0.5),
        Kind::Aoc => rng.range(0.3, 0.7),
        _ => 1.0 - rng.range(0.08, 0.25),
    };
    FaultPlan {
        node: rng.int(0, plan.nodes.len() as i64 - 1) as usize,
        kind,
        onset,
        hang_end: hangs.then_some(onset + timeout),
        restart: rng.chance(0.4),
        cap,
        variant,
        share: match kind {
            Kind::Pcie => rng.range(0.6, 0.85),
            _ => rng.range(0.5, 0.8),
        },
    }
}

fn finish_truth(plan: &mut JobPlan) {
    plan.truth.nodes = plan.nodes.iter().map(|n| n.name.clone()).collect();
    plan.truth.confounders = CONFOUNDERS
        .iter()
        .zip(plan.has)
        .filter(|(_, h)| *h)
        .map(|(c, _)| c.to_string())
        .collect();
    plan.truth.fault = plan.fault.as_ref().map(|f| {
        let i = match f.kind {
            Kind::Ecc => 0,
            Kind::Pcie => 1,
            Kind::Nic => 2,
            Kind::CardDrop => 3,
            Kind::Nvlink => 4,
            Kind::Aoc => 5,
            Kind::Thermal => 6,
            Kind::SlowHost => 7,
            Kind::Link => 8,
        };
        let (kind, subtle) = if i < 6 {
            (FAULT_MIX[i].0, false)
        } else {
            (SUBTLE_KINDS[i - 6], true)
        };
        PlantedFault {
            kind: kind.to_string(),
            node: plan.nodes[f.node].name.clone(),
            onset: plan.start + f.onset,
            subtle,
        }
    });
}

/// What the job as a whole is doing at a (job-relative) moment.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Load,
    Ramp(f64),
    Train,
    Hung,
}

impl JobPlan {
    fn mode(&self, t: i64) -> Mode {
        if let Some(f) = &self.fault {
            if let Some(end) = f.hang_end {
                if t >= f.onset && t < end {
                    return Mode::Hung;
                }
                if t >= end {
                    let r = t - end;
                    return self.warm_mode(r - self.reload_s);
                }
            }
        }
        self.warm_mode(t - self.load_s)
    }

    fn warm_mode(&self, since_load: i64) -> Mode {
        if since_load < 0 {
            Mode::Load
        } else if since_load < self.ramp_s {
            Mode::Ramp(since_load as f64 / self.ramp_s as f64)
        } else {
            Mode::Train
        }
    }

    /// Where the rows of a node stop (job-relative).
    fn node_end(&self, j: usize) -> i64 {
        match &self.fault {
            Some(FaultPlan {
                hang_end: Some(end),
                restart,
                node,
                ..
            }) => {
                let end = (*end).min(self.dur);
                if !restart {
                    (end + 20).min(self.dur)
                } else if *node == j {
                    end
                } else {
                    self.dur
                }
            }
            _ => self.dur,
        }
    }

    fn alive(&self, j: usize, t: i64) -> bool {
        t < self.node_end(j)
    }

    fn in_window(w: (i64, i64, f64), t: i64) -> bool {
        t >= w.0 && t < w.1
    }

    fn moe_load(&self, j: usize, t: i64) -> f64 {
        if !self.has[C_MOE] {
            return 1.0;
        }
        let (amp, period) = self.moe;
        1.0 + amp * (std::f64::consts::TAU * t as f64 / period + self.nodes[j].moe_phase).sin()
    }

    fn aoc_episode(&self, t: i64) -> bool {
        // 30-120 s episodes every 3-8 minutes, fixed by the job's noise seed.
        let slot = t / 300;
        let at = (hash01(self.noise_seed, slot as u64) * 180.0) as i64;
        let len = 30 + (hash01(self.noise_seed ^ 0xa0c, slot as u64) * 90.0) as i64;
        let off = t - slot * 300;
        off >= at && off < at + len
    }

    /// A node's capacity, relative to a nominal node (1.0).
    fn capacity(&self, j: usize, t: i64) -> f64 {
        let node = &self.nodes[j];
        let mut cap = node.speed / self.stages[node.stage].compute / self.moe_load(j, t);
        if node.throttled && Self::in_window(self.throttle, t) {
            cap *= self.throttle.2;
        }
        if node.congested && Self::in_window(self.congestion, t) {
            cap *= 1.0 - 0.35 * (1.0 - self.congestion.2);
        }
        if let Some(Event {
            kind: EventKind::Stall(Some(o)),
            ..
        }) = self.event(j, t)
        {
            if o == j {
                cap *= 0.25;
            }
        }
        if let Some(f) = self.fault.as_ref().filter(|f| f.node == j && t >= f.onset) {
            if f.hang_end.is_none() && (f.kind != Kind::Aoc || self.aoc_episode(t)) {
                cap *= f.cap;
            }
        }
        cap
    }

    /// The job's throughput on a grid: the slowest living node sets it.
    fn throughput_grid(&self) -> Vec<f64> {
        (0..=self.dur / GRID + 1)
            .map(|k| {
                let t = k * GRID;
                (0..self.nodes.len())
                    .filter(|&j| self.alive(j, t))
                    .map(|j| self.capacity(j, t))
                    .fold(f64::INFINITY, f64::min)
                    .min(1.2)
            })
            .collect()
    }

    /// The phase a node is in; nodes enter and leave a phase a few seconds apart.
    fn event(&self, j: usize, t: i64) -> Option<Event> {
        // Sorted by start, and jitter only delays: later phases cannot hold `t`.
        let started = self.events.iter().take_while(|e| e.t0 <= t);
        started.enumerate().find_map(|(k, e)| {
            let jitter = if j == 0 {
                0
            } else {
                (hash01(k as u64, j as u64) * 8.0) as i64
            };
            (t >= e.t0 + jitter && t < e.t1 + jitter).then_some(*e)
        })
    }
}

pub(super) fn render(plan: &JobPlan, job: usize, rows: &mut Vec<Row>) {
    let grid = plan.throughput_grid();
    let mut rng = Rng::new(plan.noise_seed, job as u64);
    for j in 0..plan.nodes.len() {
        let node = &plan.nodes[j];
        let end = plan.node_end(j);
        let mut t = node.phase;
        let mut after_restart = false;
        while t < end {
            let gap = node.gaps.iter().any(|g| t >= g.0 && t < g.1);
            if gap {
                after_restart |= plan.restarts.iter().any(|r| r.0 == j && t >= r.1);
                t += plan.interval;
                continue;
            }
            let thr = grid[(t / GRID) as usize];
            let mut v = sample(plan, j, t, thr, &mut rng);
            if after_restart {
                RATES.iter().for_each(|&k| v[k] = 0.0);
                after_restart = false;
            }
            emit(plan, job, j, t, &v, &mut rng, rows);
            t += plan.interval;
        }
    }
}

fn emit(
    plan: &JobPlan,
    job: usize,
    j: usize,
    t: i64,
    v: &[f64; NM],
    rng: &mut Rng,
    rows: &mut Vec<Row>,
) {
    let node = &plan.nodes[j];
    let gpu_gone = plan
        .fault
        .as_ref()
        .is_some_and(|f| f.node == j && f.kind == Kind::CardDrop && f.variant && t >= f.onset);
    let time = plan.start + t + node.skew;
    let known = 0..UNKNOWN_FROM;
    for k in known.chain(plan.unknown.iter().copied()) {
        if node.missing & (1 << k) != 0 || (gpu_gone && (UTIL..=MUTIL).contains(&k)) {
            continue;
        }
        if plan.has[C_MISSING] && rng.chance(plan.drop_p) {
            continue;
        }
        rows.push(Row {
            time,
            job: job as u32,
            node: j as u32,
            metric: k as u8,
            value: v[k],
        });
    }
}

const UNKNOWN_FROM: usize = TEMP;

/// Relative noise: a value times (1 + sd * N(0,1)), never negative.
fn jitter(rng: &mut Rng, v: f64, sd: f64) -> f64 {
    (v * (1.0 + sd * rng.normal())).max(0.0)
}

fn sample(plan: &JobPlan, j: usize, t: i64, thr: f64, rng: &mut Rng) -> [f64; NM] {
    let mut v = [0.0; NM];
    match plan.mode(t) {
        Mode::Load => loading(plan, j, t, &mut v),
        Mode::Hung => hung(plan, &mut v),
        Mode::Ramp(r) => training(plan, j, t, thr * r, &mut v),
        Mode::Train => {
            training(plan, j, t, thr, &mut v);
            if let Some(e) = plan.event(j, t) {
                phase(plan, j, e, &mut v);
            }
        }
    }
    if let Mode::Ramp(r) = plan.mode(t) {
        v[UTIL] *= r.max(0.05);
        v[UMIN] *= r.max(0.05);
    }
    shared(plan, j, &mut v, rng);
    fault_effect(plan, j, t, &mut v, rng);
    noise(&mut v, rng);
    v
}

fn loading(plan: &JobPlan, j: usize, t: i64, v: &mut [f64; NM]) {
    let g = plan.gpu;
    v[CPU] = 55.0 + 30.0 * hash01(plan.noise_seed, j as u64);
    v[MEM] = plan.levels[L_MEM] * (0.3 + 0.7 * (t as f64 / plan.load_s.max(1) as f64).min(1.0));
    v[DISK] = plan.levels[L_DISK] * 8.0;
    v[UTIL] = 2.0;
    v[UMIN] = 0.0;
    v[POWER] = 8.0 * g.idle * 1.1;
    v[CLOCK] = g.idle_clock;
    v[PCIE] = plan.levels[L_PCIE] * 0.4;
    v[IBTX] = 2e7;
    v[IBRX] = 2e7;
    v[TEMP] = 38.0;
}

fn hung(plan: &JobPlan, v: &mut [f64; NM]) {
    let g = plan.gpu;
    v[CPU] = plan.levels[L_CPU] * 0.6;
    v[MEM] = plan.levels[L_MEM];
    v[DISK] = 1e5;
    // NCCL kernels spin: busy by the counters, cool by the power meter.
    v[UTIL] = 99.5;
    v[UMIN] = 99.0;
    v[POWER] = 8.0 * (g.idle + 0.22 * (g.peak - g.idle));
    v[CLOCK] = g.max_clock;
    v[MUTIL] = 0.5;
    v[PCIE] = 1e6;
    v[NVL] = 1e6;
    v[IBTX] = 5e4;
    v[IBRX] = 5e4;
    v[TEMP] = 45.0;
    v[SMACT] = 0.02;
}

fn training(plan: &JobPlan, j: usize, t: i64, thr: f64, v: &mut [f64; NM]) {
    let (g, node) = (plan.gpu, &plan.nodes[j]);
    let st = plan.stages[node.stage];
    let lr = if plan.has[C_LR] && t >= plan.lr_change.0 {
        plan.lr_change.1
    } else {
        1.0
    };
    let duty = (thr / plan.capacity(j, t)).clamp(0.0, 1.0) * lr.min(1.0);
    let clock_f = if node.throttled && JobPlan::in_window(plan.throttle, t) {
        plan.throttle.2
    } else {
        1.0
    };
    v[CPU] = plan.levels[L_CPU];
    v[MEM] = plan.levels[L_MEM] + t as f64 / 3600.0 * 6.0;
    v[DISK] = plan.levels[L_DISK] * thr;
    v[UTIL] = 88.0 + 9.0 * duty;
    v[UMIN] = v[UTIL] - 2.5;
    v[POWER] = 8.0 * (g.idle + (g.peak - g.idle) * (0.28 + 0.62 * duty * lr)) * node.power_f;
    v[POWER] *= clock_f.powi(2);
    v[CLOCK] = (g.max_clock * (0.93 - 0.05 * duty) + node.clock_off) * clock_f;
    v[MUTIL] = 50.0 * duty * lr;
    v[PCIE] = plan.levels[L_PCIE] * thr * st.pcie;
    v[NVL] = plan.levels[L_NVL] * thr * st.nvlink;
    v[IBTX] = plan.levels[L_IB] * thr * st.fabric * lr;
    v[IBRX] = v[IBTX];
    v[PFC] = 5.0;
    v[CNP] = 20.0;
    v[TEMP] = 52.0 + 22.0 * duty + node.temp_off + if clock_f < 1.0 { 12.0 } else { 0.0 };
    v[SMACT] = 0.78 * duty;
    if node.congested && JobPlan::in_window(plan.congestion, t) {
        v[PFC] = 3000.0;
        v[CNP] = 1500.0;
    }
}

/// Checkpoints, evaluation and stalls on top of training levels.
fn phase(plan: &JobPlan, j: usize, e: Event, v: &mut [f64; NM]) {
    let g = plan.gpu;
    let idle_power = 8.0 * (g.idle + 0.08 * (g.peak - g.idle));
    match e.kind {
        EventKind::Checkpoint if !plan.rank0_only_ckpt || j == 0 => {
            v[UTIL] = 8.0;
            v[UMIN] = 3.0;
            v[POWER] = idle_power;
            v[MUTIL] = 4.0;
            v[PCIE] = plan.levels[L_PCIE] * 3.0;
            v[DISK] = 2.5e9 / (1.0 + j as f64 % 3.0);
            v[IBTX] *= 0.05;
            v[IBRX] *= 0.05;
            v[CPU] += 20.0;
            v[MEM] += 40.0;
        }
        EventKind::Checkpoint => {
            let util = if plan.barrier_nccl { 99.0 } else { 1.0 };
            v[UTIL] = util;
            v[UMIN] = util - 1.0;
            v[POWER] = 8.0 * (g.idle + 0.2 * (g.peak - g.idle));
            v[MUTIL] = 0.5;
            v[IBTX] = 5e4;
            v[IBRX] = 5e4;
            v[NVL] = 1e6;
        }
        EventKind::Eval => {
            v[UTIL] = 76.0;
            v[UMIN] = 70.0;
            v[POWER] *= 0.62;
            v[MUTIL] *= 0.6;
            v[IBTX] *= 0.1;
            v[IBRX] *= 0.1;
            v[NVL] *= 0.5;
            v[CPU] += if j == 0 { 15.0 } else { 3.0 };
        }
        EventKind::Stall(origin) => {
            let starved = origin.is_none_or(|o| o == j);
            if starved {
                v[UTIL] = 30.0;
                v[UMIN] = 18.0;
                v[POWER] = idle_power * 1.2;
                v[CPU] += 35.0;
                v[DISK] *= 3.0;
            }
            if origin.is_none() {
                v[IBTX] *= 0.2;
                v[IBRX] *= 0.2;
            }
        }
    }
}

/// Rank 0's extra work, unknown metrics, fabric bursts.
fn shared(plan: &JobPlan, j: usize, v: &mut [f64; NM], rng: &mut Rng) {
    let node = &plan.nodes[j];
    let last =
        plan.stages.len() > 1 && node.stage + 1 == plan.stages.len() && j + 1 == plan.nodes.len();
    if plan.has[C_RANK0] && (j == 0 || last) {
        let extra = 10.0 + 20.0 * hash01(plan.noise_seed, 7);
        v[CPU] += extra;
        v[MEM] += 20.0 + 3.0 * extra;
        v[POWER] *= 1.02;
        if j == 0 && rng.chance(0.2) {
            v[DISK] += rng.range(1e8, 5e8);
        }
    }
    if plan.has[C_PFC] && rng.chance(plan.pfc_burst_p) {
        let f = rng.range(20.0, 200.0);
        v[PFC] = v[PFC].max(1.0) * f;
        v[CNP] = v[CNP].max(1.0) * f * 0.5;
    }
    v[LOAD1] = v[CPU] * 2.24 * 0.5;
    v[NICERR] = 0.0;
    v[ECC] = 0.0;
}

fn fault_effect(plan: &JobPlan, j: usize, t: i64, v: &mut [f64; NM], rng: &mut Rng) {
    let Some(f) = plan.fault.as_ref().filter(|f| f.node == j && t >= f.onset) else {
        return;
    };
    let hung = plan.mode(t) == Mode::Hung;
    match f.kind {
        Kind::Ecc => ecc(plan, f, hung, v),
        Kind::CardDrop if hung => {
            v[POWER] *= 7.0 / 8.0;
            v[UMIN] = v[UTIL];
        }
        Kind::Nic if hung => {
            v[IBTX] = 0.0;
            v[IBRX] = 0.0;
            v[NICERR] = 1.0;
        }
        Kind::Nic => {
            v[PCIE] *= 1.2;
            v[NVL] *= 1.15;
            v[NICERR] = 1.0;
        }
        Kind::Nvlink => {
            v[NVL] *= 0.02;
            if hung {
                v[UMIN] = 0.0;
            } else {
                v[PCIE] *= 2.0;
            }
        }
        Kind::Pcie => {
            v[PCIE] *= f.share;
            v[UMIN] -= 10.0 + 15.0 * (1.0 - f.share);
        }
        Kind::Aoc => {
            v[NICERR] = rng.range(5.0, 50.0);
            if plan.aoc_episode(t) {
                v[IBTX] *= f.share;
                v[IBRX] *= f.share;
                v[PFC] *= 100.0;
                v[CNP] *= 50.0;
            }
        }
        Kind::Thermal => {
            v[CLOCK] *= f.cap.sqrt();
            v[TEMP] += 12.0;
            v[POWER] *= 0.95;
        }
        Kind::SlowHost => {
            v[UTIL] -= 60.0 * (1.0 - f.cap);
            v[UMIN] -= 60.0 * (1.0 - f.cap);
            v[CPU] += 25.0;
        }
        Kind::Link => {
            v[IBTX] *= 1.0 - 0.6 * (1.0 - f.cap);
            v[IBRX] *= 1.0 - 0.6 * (1.0 - f.cap);
            v[CNP] *= 3.0;
        }
        Kind::CardDrop => {}
    }
}

/// An uncorrectable ECC error: the process dies (node idle) or one GPU stops.
fn ecc(plan: &JobPlan, f: &FaultPlan, hung: bool, v: &mut [f64; NM]) {
    let g = plan.gpu;
    v[ECC] = 1.0;
    if f.variant && hung {
        // The process died: the node idles while its peers spin.
        v[UTIL] = 0.0;
        v[UMIN] = 0.0;
        v[POWER] = 8.0 * g.idle;
        v[CLOCK] = g.idle_clock;
        v[CPU] = 1.5;
        v[MEM] *= 0.3;
        v[IBTX] = 0.0;
        v[IBRX] = 0.0;
        v[SMACT] = 0.0;
    } else if hung {
        v[UTIL] = 99.5 * 7.0 / 8.0;
        v[UMIN] = 0.0;
        v[POWER] -= g.peak * 0.15;
    }
}

fn noise(v: &mut [f64; NM], rng: &mut Rng) {
    for (k, x) in v.iter_mut().enumerate() {
        *x = match k {
            UTIL | UMIN => (*x + rng.normal() * 0.8).clamp(0.0, 100.0),
            MUTIL | CPU => (*x + rng.normal() * 1.0).clamp(0.0, 100.0),
            CLOCK => (*x + rng.normal() * 10.0).max(0.0),
            PFC | CNP => (*x * (0.3 + 1.4 * rng.unit())).round(),
            TEMP => *x + rng.normal() * 0.7,
            MEM => *x + rng.normal() * 0.5,
            ECC | NICERR => *x,
            _ => jitter(rng, *x, 0.025),
        };
    }
}
