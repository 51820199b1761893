//! A tenth generator of training-job metric traces (issue 45), held out from
//! the detector's tuning: a site shared by many teams, seen from the users' side.
//!
//! The file is `lemon watch --replay`'s CSV (`time,job,node,metric,value`),
//! globally time-sorted. Every parameter is drawn from the seed.
//!
//! # The model
//!
//! Each job is a synchronous collective: every step waits for the slowest
//! rank. A node has a *capacity* (1.0 healthy, its own bias of a few percent,
//! less when slowed) and a *load* (its pipeline stage's share, MoE experts).
//! The step takes `max(load / capacity)`; the job's *pace* is the healthy step
//! over the current one, and a node's *busy* share is its own compute time
//! over the step. Waiting ranks spin inside NCCL: their `gpu_util` stays high
//! while `gpu_power` and memory activity fall. A dead rank hangs the job: the
//! culprit goes idle (or vanishes), the others spin at full util, low power,
//! no fabric traffic, until the NCCL timeout (5-30 min); then the job exits or
//! restarts from its checkpoint on a spare node.
//!
//! # Confounders (recorded per job; how often one node stands apart)
//!
//! * `warmup` (all jobs): pace ramps 0.3→1 over 2-8 min. Never one node.
//! * `lr_batch_change`: pace steps by ±8-20% once. Never one node.
//! * `checkpoint_rank0`: every 10-20 min, 1-3 min: rank 0's node writes
//!   (disk_io 1-3 GB/s, cpu up) while the others spin in a barrier. One node
//!   (rank 0) stands apart every time.
//! * `checkpoint_sharded`: all nodes write, GPUs idle (util < 10). Never one node.
//! * `eval`: every 15-30 min, 2-5 min, pace 0.5, fabric 30%. Rank 0 runs the
//!   metric reduction (cpu +20) in about half the evaluations: one node then.
//! * `dataloader_stall`: 1-3 stalls of 30-120 s; in 30% of them only one
//!   node's loader stalls and the rest wait: one node then.
//! * `pipeline_stages`: 2-8 stages of unequal depth (load 0.75-1.25 per
//!   stage), the last stage's node also computes the loss (+5%). Whole
//!   stages stand apart by design for the whole job; a one-node stage does
//!   in small jobs.
//! * `moe_imbalance`: a hot expert on one node (+15-35% load), moving to
//!   another node every 4-12 min. One node always, but a moving one.
//! * `rank0_extra`: rank 0 does logging/upload: cpu +15-25, pcie +15%,
//!   disk_io +40 MB/s for the whole job. One node always.
//! * `node_bias`: each node ±3% capacity, ±6% power, ±4 °C for life. Every
//!   node, one at a time by a few percent.
//! * `metric_subset`: 10-40% of nodes lack DCGM (no clocks, util_min, nvlink,
//!   pfc/cnp). Every node emits `gpu_temp`, which the detector does not
//!   know; `unknown_metrics` (75% of jobs) adds DCGM_FI_PROF_SM_ACTIVE,
//!   nic_errors and node_load1.
//! * `exporter_gap`: one or two nodes missing for 1-5 min. `exporter_restart`:
//!   a node missing 20-60 s whose first sample after has only host metrics.
//!   `missing_rows`: 0.3% of rows dropped at random. `clock_skew`: nodes'
//!   clocks off by -4..4 s. One node each time.
//! * `pfc_bursts`: pfc_pause/cnp spikes of 10^3-10^4/s on random nodes (2% of
//!   samples). One node per spike, never lasting.
//! * `tenant_congestion`: another tenant's traffic on one leaf (a rack of 8
//!   nodes) for 3-15 min: ib capped at 55-80%, pfc/cnp up; the job slows.
//!   One node stands apart when a job has one node on that leaf.
//! * `hot_aisle`: one rack's clocks throttled 8-15% for 5-20 min. Same.
//! * Site-wide bursts: `maintenance_burst` (a third of the jobs start
//!   within two minutes of each other), `storage_outage` (every job running
//!   then stalls 3-10 min: util < 15, disk_io 0), `leaf_flap` (one leaf's
//!   links flap for 1-4 min: ib on its nodes near 0 in 20-s bursts, pfc up;
//!   every job there stalls while the flap lasts).
//!
//! # User errors (healthy jobs to the scorer: no node is faulty)
//!
//! * `user_exception`: one rank raises or OOMs and exits: its node goes to
//!   idle power, util 0, mem drops; the rest hang in NCCL until the timeout
//!   and the job exits. One node, exactly like a dead card.
//! * `user_deadlock`: one rank stuck in Python or a dataloader worker: its
//!   GPUs idle (60%) or spinning at 100% util with idle power (40%); the rest
//!   wait until the timeout. One node.
//! * `wrong_layout`: one node given twice the micro-batch (it is busy, the
//!   others wait at half power) or left idle by a bad rank mapping (util ~0)
//!   for the whole job. One node, whole job.
//! * `crash_loop`: 2-4 cycles of init (3 min, cpu/disk up, GPUs idle), 1-5
//!   min of training, crash, 1-2 min of nothing. Whole job.
//! * `requeue`: preempted mid-job; comes back 3-10 min later on other nodes.
//! * `profiler`: one rank profiled for 5-15 min: that node 10-30% slower,
//!   cpu +20. One node.
//!
//! # Faults (exactly one node; onset after the first 10 minutes)
//!
//! Minder's Table 2 mix normalised to 85%, plus 15% subtle:
//! `ecc_error` (the process dies at onset → hang), `gpu_card_drop` (XID 79:
//! one GPU's util_min 0, power −1/8, the process dies within 0-60 s → hang),
//! `nic_dropout` (ib on the node 0 at once → hang), `pcie_downgrade` (pcie_tx
//! ×0.25, node 10-30% slower, runs on), `nvlink_error` (nvlink ×0.1, pcie up;
//! half crash within 2 min, half run 20-35% slower), `aoc_cable_error` (the
//! link flaps: 30-120 s outages every 3-8 min, nic_errors up, pfc up; the job
//! stalls during each; a third escalate to a hang). Half the jobs whose
//! fault hangs them restart from the checkpoint 2-5 min after the timeout on
//! a spare node in the culprit's place (`restart_after_fault`). Subtle (8-25% slower, no
//! halt): `thermal_throttle` (clock ×0.8-0.9, temp +12, comes and goes),
//! `slow_host` (cpu +25, pcie ×0.7), `degraded_link` (ib ×0.75-0.9).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{self, Write};

/// The knobs of a generated replay.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// The shortest and longest job, in minutes.
    pub min_minutes: i64,
    pub max_minutes: i64,
    /// The largest job, in nodes.
    pub max_nodes: usize,
    /// Share of jobs with exactly one faulty node.
    pub fault_share: f64,
    /// Share of faults that are subtle (a slowdown with no halt).
    pub subtle_share: f64,
    /// Share of jobs carrying a user error (healthy to the scorer).
    pub user_error_share: f64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            fault_share: 0.4,
            subtle_share: 0.15,
            user_error_share: 0.3,
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

#[derive(Debug, Clone)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

const BASE_TIME: i64 = 1_790_000_000;
const KNOWN: [&str; 15] = [
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
];
const EXTRA: [&str; 3] = ["DCGM_FI_PROF_SM_ACTIVE", "nic_errors", "node_load1"];
/// Metrics a node without DCGM does not report (indices into KNOWN).
const DCGM_ONLY: [usize; 5] = [4, 6, 9, 12, 13];
const RACK: usize = 8;

/// splitmix64: small, fast, and the same everywhere.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.f() < p
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Order-independent noise in [-1, 1) for one sample of one metric.
fn noise(key: u64, tick: i64, metric: usize) -> f64 {
    let h = mix(key ^ mix(tick as u64 ^ ((metric as u64) << 48)));
    (h >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Ecc,
    CardDrop,
    NicDrop,
    Pcie,
    Nvlink,
    Aoc,
    Thermal,
    SlowHost,
    Link,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ecc => "ecc_error",
            Kind::CardDrop => "gpu_card_drop",
            Kind::NicDrop => "nic_dropout",
            Kind::Pcie => "pcie_downgrade",
            Kind::Nvlink => "nvlink_error",
            Kind::Aoc => "aoc_cable_error",
            Kind::Thermal => "thermal_throttle",
            Kind::SlowHost => "slow_host",
            Kind::Link => "degraded_link",
        }
    }
    fn subtle(self) -> bool {
        matches!(self, Kind::Thermal | Kind::SlowHost | Kind::Link)
    }
}

/// Minder's Table 2 weights (ECC 38.9, PCIe 6.6, NIC 5.7, card 2.0, NVLink 1.7, AOC 1.1).
fn draw_kind(r: &mut Rng, subtle_share: f64) -> Kind {
    if r.chance(subtle_share) {
        return [Kind::Thermal, Kind::SlowHost, Kind::Link][r.int(0, 2) as usize];
    }
    let w = [
        (Kind::Ecc, 38.9),
        (Kind::Pcie, 6.6),
        (Kind::NicDrop, 5.7),
        (Kind::CardDrop, 2.0),
        (Kind::Nvlink, 1.7),
        (Kind::Aoc, 1.1),
    ];
    let mut x = r.f() * w.iter().map(|p| p.1).sum::<f64>();
    for (k, p) in w {
        if x < p {
            return k;
        }
        x -= p;
    }
    Kind::Ecc
}

/// A window of time [from, to) in job-relative seconds.
#[derive(Clone, Copy, Debug)]
struct Win {
    from: i64,
    to: i64,
}

impl Win {
    fn has(&self, t: i64) -> bool {
        t >= self.from && t < self.to
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pause {
    CkptRank0,
    CkptAll,
    Eval,
    Stall,
    StallOne(usize),
    Storage,
    Init,
}

/// A slowdown of a set of nodes for a while (profiler, hot aisle, congestion).
#[derive(Clone, Debug)]
struct Slow {
    nodes: Vec<usize>,
    win: Win,
    cap: f64,
    clock: f64,
    ib: f64,
    congest: bool,
    flap: bool,
    cpu: f64,
}

/// How a hang began: who is the culprit and what it looks like.
#[derive(Clone, Copy, Debug)]
struct Hang {
    node: usize,
    at: i64,
    until: i64,
    /// The culprit's GPUs spin (deadlock) instead of going idle.
    spinning: bool,
    /// The culprit stops reporting (card or NIC gone, process gone).
    gone: bool,
}

#[derive(Clone, Debug)]
struct FaultPlan {
    kind: Kind,
    node: usize,
    onset: i64,
    cap: f64,
    /// Thermal comes and goes: period and duty.
    period: i64,
}

/// One job's plan: who, when, what happens.
struct Plan {
    id: String,
    key: u64,
    start: i64,
    len: i64,
    interval: i64,
    /// Global node indices; after a requeue or restart the second set.
    nodes: Vec<usize>,
    second: Vec<usize>,
    switch_at: Option<(i64, i64)>,
    load: Vec<f64>,
    bias: Vec<f64>,
    power_bias: Vec<f64>,
    skew: Vec<i64>,
    dcgm: Vec<bool>,
    extra: bool,
    warmup: i64,
    step_change: Option<(i64, f64)>,
    pauses: Vec<(Win, Pause)>,
    slows: Vec<Slow>,
    gaps: Vec<(usize, Win, bool)>,
    moe: Option<i64>,
    rank0_extra: bool,
    layout: Option<(usize, bool)>,
    hang: Option<Hang>,
    end_at: i64,
    fault: Option<FaultPlan>,
    pfc: bool,
    drop_rows: bool,
    crash_cycles: Vec<Win>,
    conf: BTreeSet<&'static str>,
}

/// Site-wide events shared by every job of a seed.
struct Site {
    storage: Win,
    flap_leaf: usize,
    flap: Win,
    burst_at: i64,
}

#[derive(Clone, Copy)]
struct Row {
    t: i64,
    job: u32,
    node: u32,
    metric: u8,
    value: f32,
}

fn node_name(i: usize) -> String {
    format!("gpu-r{:03}-n{:02}", i / RACK, i % RACK)
}

fn draw_nodes(r: &mut Rng, max: usize) -> usize {
    let x = r.f();
    let n = if x < 0.12 {
        2
    } else if x < 0.2 {
        3
    } else if x < 0.42 {
        r.int(4, 8) as usize
    } else if x < 0.7 {
        r.int(9, 32) as usize
    } else if x < 0.9 {
        r.int(33, 128) as usize
    } else {
        r.int(129, 256) as usize
    };
    n.min(max).max(2)
}

fn draw_interval(r: &mut Rng, n: usize) -> i64 {
    let opts: &[i64] = if n > 64 {
        &[30, 60, 60, 30, 15]
    } else if n > 16 {
        &[15, 30, 30, 60, 10]
    } else {
        &[10, 15, 15, 30, 60]
    };
    opts[r.int(0, opts.len() as i64 - 1) as usize]
}

/// Takes `n` nodes from the pool, rack-aligned, advancing the cursor.
fn take(cursor: &mut usize, n: usize) -> Vec<usize> {
    let start = cursor.div_ceil(RACK) * RACK;
    *cursor = start + n;
    (start..start + n).collect()
}

fn plan_layout(r: &mut Rng, p: &mut Plan) {
    let n = p.nodes.len();
    p.load = vec![1.0; n];
    if n >= 2 && r.chance(0.6) {
        let stages = (r.int(2, 8) as usize).min(n);
        let per = n.div_ceil(stages);
        let loads: Vec<f64> = (0..stages).map(|_| r.range(0.75, 1.25)).collect();
        for (i, l) in p.load.iter_mut().enumerate() {
            *l = loads[(i / per).min(stages - 1)];
        }
        p.load[n - 1] *= 1.05;
        p.conf.insert("pipeline_stages");
    }
    if r.chance(0.35) {
        p.moe = Some(r.int(240, 720));
        p.conf.insert("moe_imbalance");
    }
    p.bias = (0..n).map(|_| 1.0 + r.range(-0.03, 0.03)).collect();
    p.power_bias = (0..n).map(|_| 1.0 + r.range(-0.06, 0.06)).collect();
    p.conf.insert("node_bias");
    if r.chance(0.7) {
        p.rank0_extra = true;
        p.conf.insert("rank0_extra");
    }
}

fn plan_reporting(r: &mut Rng, p: &mut Plan) {
    let n = p.nodes.len();
    let share = if r.chance(0.6) {
        r.range(0.1, 0.4)
    } else {
        0.0
    };
    p.dcgm = (0..n).map(|_| !r.chance(share)).collect();
    if share > 0.0 {
        p.conf.insert("metric_subset");
    }
    p.extra = r.chance(0.75);
    if p.extra {
        p.conf.insert("unknown_metrics");
    }
    p.skew = vec![0; n];
    if r.chance(0.6) {
        p.skew = (0..n).map(|_| r.int(-4, 4)).collect();
        p.conf.insert("clock_skew");
    }
    if r.chance(0.6) {
        for _ in 0..r.int(1, 2) {
            let from = r.int(300, p.len - 400);
            let win = Win {
                from,
                to: from + r.int(60, 300),
            };
            p.gaps.push((r.int(0, n as i64 - 1) as usize, win, false));
        }
        p.conf.insert("exporter_gap");
    }
    if r.chance(0.5) {
        let from = r.int(300, p.len - 200);
        let win = Win {
            from,
            to: from + r.int(20, 60),
        };
        p.gaps.push((r.int(0, n as i64 - 1) as usize, win, true));
        p.conf.insert("exporter_restart");
    }
    p.drop_rows = r.chance(0.6);
    if p.drop_rows {
        p.conf.insert("missing_rows");
    }
    p.pfc = r.chance(0.7);
    if p.pfc {
        p.conf.insert("pfc_bursts");
    }
}

fn plan_phases(r: &mut Rng, p: &mut Plan) {
    p.warmup = r.int(120, 480);
    p.conf.insert("warmup");
    if r.chance(0.5) {
        p.step_change = Some((r.int(900, p.len - 300), r.range(0.8, 1.2)));
        p.conf.insert("lr_batch_change");
    }
    let ckpt = if r.chance(0.45) {
        Some(Pause::CkptRank0)
    } else if r.chance(0.7) {
        Some(Pause::CkptAll)
    } else {
        None
    };
    if let Some(kind) = ckpt {
        let every = r.int(600, 1200);
        let mut t = every;
        while t < p.len - 200 {
            p.pauses.push((
                Win {
                    from: t,
                    to: t + r.int(60, 180),
                },
                kind,
            ));
            t += every;
        }
        p.conf.insert(if kind == Pause::CkptRank0 {
            "checkpoint_rank0"
        } else {
            "checkpoint_sharded"
        });
    }
    if r.chance(0.6) {
        let every = r.int(900, 1800);
        let mut t = every + 120;
        while t < p.len - 300 {
            p.pauses.push((
                Win {
                    from: t,
                    to: t + r.int(120, 300),
                },
                Pause::Eval,
            ));
            t += every;
        }
        p.conf.insert("eval");
    }
    if r.chance(0.6) {
        for _ in 0..r.int(1, 3) {
            let from = r.int(300, p.len - 200);
            let kind = if r.chance(0.3) {
                Pause::StallOne(r.int(0, p.nodes.len() as i64 - 1) as usize)
            } else {
                Pause::Stall
            };
            p.pauses.push((
                Win {
                    from,
                    to: from + r.int(30, 120),
                },
                kind,
            ));
        }
        p.conf.insert("dataloader_stall");
    }
}

/// Nodes of the job that sit on one rack (leaf switch), chosen at random.
fn one_leaf(r: &mut Rng, nodes: &[usize]) -> Vec<usize> {
    let rack = nodes[r.int(0, nodes.len() as i64 - 1) as usize] / RACK;
    (0..nodes.len())
        .filter(|&i| nodes[i] / RACK == rack)
        .collect()
}

fn slow(nodes: Vec<usize>, win: Win, cap: f64) -> Slow {
    Slow {
        nodes,
        win,
        cap,
        clock: 1.0,
        ib: 1.0,
        congest: false,
        flap: false,
        cpu: 0.0,
    }
}

fn plan_fabric(r: &mut Rng, p: &mut Plan, site: &Site) {
    if r.chance(0.55) {
        let from = r.int(300, p.len - 300);
        let mut s = slow(
            one_leaf(r, &p.nodes),
            Win {
                from,
                to: from + r.int(180, 900),
            },
            1.0,
        );
        s.ib = r.range(0.55, 0.8);
        s.congest = true;
        p.slows.push(s);
        p.conf.insert("tenant_congestion");
    }
    if r.chance(0.5) {
        let from = r.int(300, p.len - 300);
        let mut s = slow(
            one_leaf(r, &p.nodes),
            Win {
                from,
                to: from + r.int(300, 1200),
            },
            0.0,
        );
        s.clock = r.range(0.85, 0.92);
        s.cap = s.clock;
        p.slows.push(s);
        p.conf.insert("hot_aisle");
    }
    let on_leaf: Vec<usize> = (0..p.nodes.len())
        .filter(|&i| p.nodes[i] / RACK == site.flap_leaf)
        .collect();
    let flap = Win {
        from: site.flap.from - p.start,
        to: site.flap.to - p.start,
    };
    if !on_leaf.is_empty() && flap.to > 0 && flap.from < p.len {
        let mut s = slow(on_leaf, flap, 1.0);
        s.flap = true;
        p.slows.push(s);
        p.conf.insert("leaf_flap");
    }
    let storage = Win {
        from: site.storage.from - p.start,
        to: site.storage.to - p.start,
    };
    if storage.to > 0 && storage.from < p.len {
        p.pauses.push((storage, Pause::Storage));
        p.conf.insert("storage_outage");
    }
}

/// Restart, fail again within minutes, restart: one job id throughout.
fn plan_crash_loop(r: &mut Rng, p: &mut Plan) {
    let mut t = 0;
    for _ in 0..r.int(2, 4) {
        let run = Win {
            from: t,
            to: t + r.int(240, 480),
        };
        p.pauses.push((
            Win {
                from: t,
                to: t + 180,
            },
            Pause::Init,
        ));
        p.crash_cycles.push(run);
        t = run.to + r.int(60, 120);
    }
    p.warmup = p.warmup.max(1);
    p.crash_cycles.push(Win { from: t, to: p.len });
    p.pauses.push((
        Win {
            from: t,
            to: t + 180,
        },
        Pause::Init,
    ));
    p.conf.insert("crash_loop");
}

fn plan_user_error(r: &mut Rng, p: &mut Plan, spare: &mut usize) {
    let n = p.nodes.len() as i64;
    let who = r.int(0, n - 1) as usize;
    let timeout = r.int(300, 1800);
    match r.int(0, 5) {
        0 | 1 => {
            let at = r.int(600, p.len - 300);
            let spinning = r.chance(0.4);
            let deadlock = r.chance(0.5);
            let gone = !deadlock && r.chance(0.3);
            p.hang = Some(Hang {
                node: who,
                at,
                until: at + timeout,
                spinning: deadlock && spinning,
                gone,
            });
            p.end_at = p.end_at.min(at + timeout);
            p.conf.insert(if deadlock {
                "user_deadlock"
            } else {
                "user_exception"
            });
        }
        2 => {
            p.layout = Some((who, r.chance(0.5)));
            p.conf.insert("wrong_layout");
        }
        3 => plan_crash_loop(r, p),
        4 => {
            let at = r.int(900, p.len - 900);
            let back = at + r.int(180, 600);
            p.second = take(spare, p.nodes.len());
            p.switch_at = Some((at, back));
            p.pauses.push((
                Win {
                    from: back,
                    to: back + 180,
                },
                Pause::Init,
            ));
            p.conf.insert("requeue");
        }
        _ => {
            let from = r.int(300, p.len - 900);
            let mut s = slow(
                vec![who],
                Win {
                    from,
                    to: from + r.int(300, 900),
                },
                r.range(0.7, 0.9),
            );
            s.cpu = 20.0;
            p.slows.push(s);
            p.conf.insert("profiler");
        }
    }
}

fn plan_fault(r: &mut Rng, p: &mut Plan, subtle_share: f64, spare: &mut usize) {
    let kind = draw_kind(r, subtle_share);
    let node = r.int(0, p.nodes.len() as i64 - 1) as usize;
    let onset = r.int(660, (p.len * 3 / 4).max(700));
    let mut f = FaultPlan {
        kind,
        node,
        onset,
        cap: 1.0,
        period: 0,
    };
    let timeout = r.int(300, 1800);
    let crash_at = match kind {
        Kind::Ecc | Kind::NicDrop => Some(onset),
        Kind::CardDrop => Some(onset + r.int(0, 60)),
        Kind::Nvlink if r.chance(0.5) => Some(onset + r.int(0, 120)),
        Kind::Aoc if r.chance(0.33) => Some(onset + r.int(600, 1200)),
        _ => None,
    };
    f.cap = match kind {
        Kind::Pcie => r.range(0.7, 0.9),
        Kind::Nvlink => r.range(0.65, 0.8),
        Kind::Thermal | Kind::SlowHost | Kind::Link => r.range(0.75, 0.92),
        _ => 1.0,
    };
    if kind == Kind::Thermal || kind == Kind::Aoc {
        f.period = r.int(180, 480);
    }
    if let Some(at) = crash_at {
        let gone = kind == Kind::CardDrop && r.chance(0.5);
        p.hang = Some(Hang {
            node,
            at,
            until: at + timeout,
            spinning: false,
            gone,
        });
        p.end_at = p.end_at.min(at + timeout);
        if r.chance(0.5) && at + timeout + 600 < p.len {
            // Restart from the checkpoint on a spare node in the culprit's place.
            let back = at + timeout + r.int(120, 300);
            let mut second = p.nodes.clone();
            second[node] = take(spare, 1)[0];
            p.second = second;
            p.switch_at = Some((at + timeout, back));
            p.pauses.push((
                Win {
                    from: back,
                    to: back + 180,
                },
                Pause::Init,
            ));
            p.end_at = p.len;
            p.conf.insert("restart_after_fault");
        }
    }
    p.fault = Some(f);
}

struct Ctx<'a> {
    spec: &'a IndependentSpec,
    site: &'a Site,
    cursor: usize,
    spare: usize,
}

fn plan_job(r: &mut Rng, idx: usize, cx: &mut Ctx) -> Plan {
    let spec = cx.spec;
    let n = draw_nodes(r, spec.max_nodes.max(2));
    let len = r.int(spec.min_minutes, spec.max_minutes.max(spec.min_minutes)) * 60;
    let mut conf = BTreeSet::new();
    let start = if r.chance(0.33) {
        conf.insert("maintenance_burst");
        cx.site.burst_at + r.int(0, 120)
    } else {
        BASE_TIME + r.int(0, 4 * 3600)
    };
    let mut p = Plan {
        id: format!("{}", 7_300_000 + (spec.seed % 1000) * 1000 + idx as u64),
        key: r.next(),
        start,
        len: len.max(1200),
        interval: draw_interval(r, n),
        nodes: take(&mut cx.cursor, n),
        second: Vec::new(),
        switch_at: None,
        load: vec![],
        bias: vec![],
        power_bias: vec![],
        skew: vec![],
        dcgm: vec![],
        extra: false,
        warmup: 0,
        step_change: None,
        pauses: vec![],
        slows: vec![],
        gaps: vec![],
        moe: None,
        rank0_extra: false,
        layout: None,
        hang: None,
        end_at: i64::MAX,
        fault: None,
        pfc: false,
        drop_rows: false,
        crash_cycles: vec![],
        conf,
    };
    p.end_at = p.len;
    plan_layout(r, &mut p);
    plan_reporting(r, &mut p);
    plan_phases(r, &mut p);
    plan_fabric(r, &mut p, cx.site);
    if r.chance(spec.fault_share) {
        plan_fault(r, &mut p, spec.subtle_share, &mut cx.spare);
    } else if r.chance(spec.user_error_share / (1.0 - spec.fault_share).max(0.01)) {
        plan_user_error(r, &mut p, &mut cx.spare);
    }
    p
}

/// The state of one node at one instant, before it becomes metric values.
#[derive(Default, Clone, Copy)]
struct NodeState {
    /// Share of the step the node spends computing (0 idle, 1 the bottleneck).
    busy: f64,
    /// GPUs spin in NCCL while waiting (util high at low power).
    spin: bool,
    /// The job's pace, which sets fabric traffic.
    pace: f64,
    clock: f64,
    ib: f64,
    pcie: f64,
    nvlink: f64,
    cpu: f64,
    disk: f64,
    congest: bool,
    errors: f64,
    card_gone: bool,
    temp: f64,
    mem_drop: bool,
}

fn moe_load(p: &Plan, i: usize, t: i64) -> f64 {
    match p.moe {
        Some(period) => {
            let epoch = (t / period) as u64;
            let hot = (mix(p.key ^ epoch) % p.nodes.len() as u64) as usize;
            if hot == i {
                1.15 + 0.2 * ((mix(p.key ^ epoch ^ 7) % 100) as f64 / 100.0)
            } else {
                1.0
            }
        }
        None => 1.0,
    }
}

/// Per-node capacity at time t (1.0 nominal) and the fault's effects on it.
fn capacity(p: &Plan, i: usize, t: i64, st: &mut NodeState) -> f64 {
    let mut cap = p.bias[i];
    for s in p
        .slows
        .iter()
        .filter(|s| s.win.has(t) && s.nodes.contains(&i))
    {
        if s.flap {
            let on = (t / 20) % 2 == 0;
            st.ib *= if on { 0.03 } else { 0.6 };
            st.congest = true;
            cap *= if on { 0.05 } else { 0.7 };
            continue;
        }
        cap *= if s.cap > 0.0 { s.cap } else { 1.0 };
        st.clock *= s.clock;
        st.ib *= s.ib;
        st.cpu += s.cpu;
        if s.congest {
            cap *= 0.85 + 0.15 * s.ib;
            st.congest = true;
        }
    }
    if let Some(f) = p.fault.as_ref().filter(|f| f.node == i && t >= f.onset) {
        cap *= fault_effect(f, t, st);
    }
    if let Some((who, idle)) = p.layout {
        if who == i && !idle {
            cap *= 0.5;
        }
    }
    cap
}

fn fault_effect(f: &FaultPlan, t: i64, st: &mut NodeState) -> f64 {
    let dt = t - f.onset;
    match f.kind {
        Kind::Pcie => {
            st.pcie *= 0.25;
            f.cap
        }
        Kind::Nvlink => {
            st.nvlink *= 0.1;
            st.pcie *= 2.0;
            st.errors += 5.0;
            f.cap
        }
        Kind::Aoc => {
            let down = dt % f.period < f.period / 4;
            st.errors += if down { 200.0 } else { 3.0 };
            if down {
                st.ib *= 0.02;
                st.congest = true;
                0.05
            } else {
                1.0
            }
        }
        Kind::Thermal => {
            if dt % f.period < f.period * 2 / 3 {
                st.clock *= f.cap.max(0.8);
                st.temp += 12.0;
                f.cap
            } else {
                1.0
            }
        }
        Kind::SlowHost => {
            st.cpu += 25.0;
            st.pcie *= 0.7;
            f.cap
        }
        Kind::Link => {
            st.ib *= f.cap;
            st.errors += 2.0;
            f.cap
        }
        Kind::CardDrop => {
            st.card_gone = true;
            1.0
        }
        Kind::Ecc | Kind::NicDrop => 1.0,
    }
}

/// Job-relative time to the states of all nodes; None when the job has no rows then.
fn job_states(p: &Plan, t: i64) -> Option<Vec<NodeState>> {
    if t >= p.end_at || p.switch_at.is_some_and(|(a, b)| t >= a && t < b) {
        return None;
    }
    if !p.crash_cycles.is_empty() && !p.crash_cycles.iter().any(|w| w.has(t)) {
        return None;
    }
    let n = p.nodes.len();
    let base = NodeState {
        clock: 1.0,
        ib: 1.0,
        pcie: 1.0,
        nvlink: 1.0,
        ..Default::default()
    };
    let mut st = vec![base; n];
    if let Some(h) = p.hang.filter(|h| t >= h.at && t < h.until) {
        return Some(hung(p, h, st));
    }
    let after_restart = p.switch_at.is_some_and(|(_, b)| t >= b) && p.fault.is_some();
    let caps: Vec<f64> = (0..n)
        .map(|i| {
            if after_restart && p.fault.as_ref().is_some_and(|f| f.node == i) {
                p.bias[i]
            } else {
                capacity(p, i, t, &mut st[i])
            }
        })
        .collect();
    let work: Vec<f64> = (0..n)
        .map(|i| p.load[i] * moe_load(p, i, t) / caps[i].max(0.01))
        .collect();
    let step = work.iter().cloned().fold(0.0, f64::max);
    let reference = (0..n).map(|i| p.load[i] / p.bias[i]).fold(0.0, f64::max);
    let mut pace = (reference / step).min(1.1);
    let ramp_t = p
        .crash_cycles
        .iter()
        .find(|w| w.has(t))
        .map_or(t, |w| t - w.from);
    pace *= (0.3 + 0.7 * ramp_t as f64 / p.warmup as f64).min(1.0);
    if let Some((at, f)) = p.step_change.filter(|s| t >= s.0) {
        let _ = at;
        pace *= f;
    }
    for (i, s) in st.iter_mut().enumerate() {
        s.busy = (work[i] / step).min(1.0);
        s.spin = true;
        s.pace = pace;
        if p.layout == Some((i, true)) {
            s.busy = 0.02;
            s.spin = false;
        }
    }
    apply_pauses(p, t, &mut st);
    Some(st)
}

fn hung(p: &Plan, h: Hang, mut st: Vec<NodeState>) -> Vec<NodeState> {
    for (i, s) in st.iter_mut().enumerate() {
        s.pace = 0.0;
        s.busy = 0.0;
        s.spin = true;
        if i == h.node {
            s.spin = h.spinning;
            s.mem_drop = !h.spinning;
            if let Some(f) = p.fault.as_ref().filter(|f| f.node == i) {
                match f.kind {
                    Kind::CardDrop => s.card_gone = true,
                    Kind::NicDrop => s.ib = 0.0,
                    _ => {}
                }
            }
        }
    }
    st
}

fn apply_pauses(p: &Plan, t: i64, st: &mut [NodeState]) {
    for (w, kind) in p.pauses.iter().filter(|(w, _)| w.has(t)) {
        for (i, s) in st.iter_mut().enumerate() {
            match kind {
                Pause::CkptRank0 => {
                    s.pace = 0.0;
                    s.busy = 0.0;
                    if i == 0 {
                        s.spin = false;
                        s.disk = 2.0e9;
                        s.cpu += 30.0;
                    }
                }
                Pause::CkptAll => {
                    s.pace = 0.0;
                    s.busy = 0.0;
                    s.spin = false;
                    s.disk = 1.5e9;
                    s.cpu += 20.0;
                }
                Pause::Eval => {
                    s.pace *= 0.5;
                    s.ib *= 0.3;
                    if i == 0 && w.from % 2 == 0 {
                        s.cpu += 20.0;
                    }
                }
                Pause::Stall | Pause::Storage => {
                    s.pace = 0.0;
                    s.busy = 0.0;
                    s.spin = false;
                    s.disk = if *kind == Pause::Storage {
                        -1.0
                    } else {
                        s.disk
                    };
                    s.cpu += 15.0;
                }
                Pause::StallOne(who) => {
                    s.pace = 0.0;
                    s.busy = 0.0;
                    s.spin = i != *who;
                    if i == *who {
                        s.cpu += 40.0;
                    }
                }
                Pause::Init => {
                    s.pace = 0.0;
                    s.busy = 0.0;
                    s.spin = false;
                    s.disk = 1.0e9;
                    s.cpu += 35.0;
                }
            }
        }
    }
}

/// The metric values of one node (indices into KNOWN then EXTRA).
fn values(p: &Plan, i: usize, tick: i64, s: &NodeState, out: &mut Vec<(usize, f64)>) {
    let k = p.key ^ (i as u64).wrapping_mul(0x1000_0000_01B3);
    let nz = |m: usize, scale: f64| noise(k, tick, m) * scale;
    let pb = p.power_bias[i];
    let util = if s.spin {
        92.0 + 7.0 * s.busy
    } else {
        96.0 * s.busy
    };
    let util = (util + nz(3, 2.0)).clamp(0.0, 100.0);
    let umin = if s.card_gone {
        0.0
    } else {
        (util - 2.0 - nz(4, 3.0).abs()).max(0.0)
    };
    let dyn_share = if s.spin { 0.18 + 0.82 * s.busy } else { s.busy };
    let gpus = if s.card_gone { 7.0 } else { 8.0 };
    let power = gpus * (72.0 + 610.0 * dyn_share * s.clock * s.clock) * pb + nz(5, 40.0);
    let clock = if s.busy > 0.05 || s.spin {
        1980.0 * s.clock
    } else {
        1410.0
    } + nz(6, 15.0);
    let extra0 = if i == 0 && p.rank0_extra { 1.0 } else { 0.0 };
    let cpu = (14.0 + 12.0 * s.pace + s.cpu + 20.0 * extra0 + nz(0, 3.0)).clamp(0.0, 100.0);
    let mem = if s.mem_drop {
        180.0
    } else {
        920.0 + 60.0 * extra0
    } + nz(1, 4.0);
    let disk = if s.disk < 0.0 {
        0.0
    } else {
        s.disk + 6.0e7 * s.pace + 4.0e7 * extra0 + nz(2, 5.0e6).abs()
    };
    let pcie = (6.0e9 * s.pace * (1.0 + 0.15 * extra0) + 3.0e8) * s.pcie + nz(8, 1.0e8).abs();
    let nvl = 1.4e11 * s.pace * s.nvlink * p.load[i] + nz(9, 1.0e9).abs();
    let ib = 2.2e10 * s.pace * s.ib + nz(10, 3.0e8).abs();
    let ibr = ib * (1.0 + nz(11, 0.03));
    let spike = p.pfc && noise(k, tick, 40) > 0.96;
    let base_pfc = if s.congest { 4000.0 } else { 5.0 };
    let pfc = base_pfc * (1.0 + nz(12, 0.5))
        + if spike {
            1.0e3 * (1.0 + 9.0 * noise(k, tick, 41).abs())
        } else {
            0.0
        };
    let cnp = pfc * 0.6 + nz(13, 2.0).abs();
    let temp = 38.0 + 30.0 * dyn_share + s.temp + (pb - 1.0) * 60.0 + nz(14, 1.0);
    let vals = [
        cpu,
        mem,
        disk,
        util,
        umin,
        power,
        clock,
        30.0 * s.busy + 4.0 + nz(7, 1.0),
    ];
    out.extend(vals.iter().cloned().enumerate());
    out.extend([
        (8, pcie),
        (9, nvl),
        (10, ib),
        (11, ibr),
        (12, pfc.max(0.0)),
        (13, cnp),
        (14, temp),
    ]);
    if p.extra {
        let errs = s.errors * (1.0 + nz(16, 0.3)).max(0.0);
        out.extend([
            (15, util * 0.8 * s.busy.max(0.05)),
            (16, errs),
            (17, 3.0 + 20.0 * s.pace),
        ]);
    }
}

fn emit_job(p: &Plan, j: u32, rows: &mut Vec<Row>, names: &mut BTreeMap<usize, u32>) {
    let mut vals = Vec::with_capacity(18);
    let mut restart_pending = vec![false; p.nodes.len()];
    let ticks = p.len / p.interval;
    for tick in 0..ticks {
        let t = tick * p.interval;
        let Some(states) = job_states(p, t) else {
            continue;
        };
        let set = if p.switch_at.is_some_and(|(_, b)| t >= b) {
            &p.second
        } else {
            &p.nodes
        };
        for (i, s) in states.iter().enumerate() {
            if p.hang.is_some_and(|h| h.node == i && h.gone && t >= h.at)
                && set.as_ptr() == p.nodes.as_ptr()
            {
                continue;
            }
            let gap = p.gaps.iter().find(|(n, w, _)| *n == i && w.has(t));
            if let Some((_, _, restart)) = gap {
                restart_pending[i] |= *restart;
                continue;
            }
            vals.clear();
            values(p, i, tick, s, &mut vals);
            let id = names.len() as u32;
            let node = *names.entry(set[i]).or_insert(id);
            let host_only = std::mem::take(&mut restart_pending[i]);
            for &(m, v) in &vals {
                if (!p.dcgm[i] && DCGM_ONLY.contains(&m)) || (host_only && (3..15).contains(&m)) {
                    continue;
                }
                if p.drop_rows && noise(p.key ^ 0xD50, tick * 32 + i as i64, m) > 0.994 {
                    continue;
                }
                let time = p.start + t + p.skew[i];
                rows.push(Row {
                    t: time,
                    job: j,
                    node,
                    metric: m as u8,
                    value: v as f32,
                });
            }
        }
    }
}

fn truth(p: &Plan) -> IndependentJob {
    let mut nodes: Vec<String> = p.nodes.iter().map(|&n| node_name(n)).collect();
    for &n in &p.second {
        let name = node_name(n);
        if !nodes.contains(&name) {
            nodes.push(name);
        }
    }
    let fault = p.fault.as_ref().map(|f| PlantedFault {
        kind: f.kind.name().to_string(),
        node: node_name(p.nodes[f.node]),
        onset: p.start + f.onset,
        subtle: f.kind.subtle(),
    });
    IndependentJob {
        job: p.id.clone(),
        nodes,
        fault,
        confounders: p.conf.iter().map(|c| c.to_string()).collect(),
    }
}

fn plan_all(spec: &IndependentSpec) -> Vec<Plan> {
    let mut r = Rng(spec.seed ^ 0x007E_1745);
    let storage_at = BASE_TIME + r.int(1800, 4 * 3600);
    let flap_at = BASE_TIME + r.int(1800, 4 * 3600);
    let site = Site {
        storage: Win {
            from: storage_at,
            to: storage_at + r.int(180, 600),
        },
        flap_leaf: r.int(0, 40) as usize,
        flap: Win {
            from: flap_at,
            to: flap_at + r.int(60, 240),
        },
        burst_at: BASE_TIME + r.int(600, 3600),
    };
    let mut cx = Ctx {
        spec,
        site: &site,
        cursor: 0,
        spare: 100_000,
    };
    (0..spec.jobs)
        .map(|j| plan_job(&mut r, j, &mut cx))
        .collect()
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let plans = plan_all(spec);
    let mut rows = Vec::new();
    let mut names = BTreeMap::new();
    for (j, p) in plans.iter().enumerate() {
        emit_job(p, j as u32, &mut rows, &mut names);
    }
    rows.sort_unstable_by_key(|r| (r.t, r.job, r.node, r.metric));
    let by_id: BTreeMap<u32, String> = names.iter().map(|(&n, &id)| (id, node_name(n))).collect();
    let mut buf = Vec::with_capacity(rows.len() * 48);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for r in &rows {
        let metric = if (r.metric as usize) < KNOWN.len() {
            KNOWN[r.metric as usize]
        } else {
            EXTRA[r.metric as usize - KNOWN.len()]
        };
        let v = r.value as f64;
        let p = &plans[r.job as usize];
        if v.abs() >= 1000.0 {
            writeln!(
                buf,
                "{},{},{},{},{:.0}",
                r.t, p.id, by_id[&r.node], metric, v
            )?;
        } else {
            writeln!(
                buf,
                "{},{},{},{},{:.2}",
                r.t, p.id, by_id[&r.node], metric, v
            )?;
        }
    }
    out.write_all(&buf)?;
    Ok(plans.iter().map(truth).collect())
}

/// One call of the detector.
#[derive(Debug, Clone)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Counts over a set of jobs and calls.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    /// Distinct (job, node) pairs called on healthy jobs.
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    /// Distinct (job, node) pairs called on faulty jobs naming another node.
    pub wrong_node_calls: usize,
    /// Faulty jobs whose faulty node was called before the onset (and not after).
    pub early_calls: usize,
    /// Distinct (job, node) pairs whose job is not in the truth.
    pub unknown_calls: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls + self.early_calls + self.unknown_calls
    }
    pub fn precision(&self) -> f64 {
        let all = self.detected + self.false_calls();
        if all == 0 {
            1.0
        } else {
            self.detected as f64 / all as f64
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
        d.get(d.len().saturating_sub(1) / 2).copied()
    }

    fn add_job(&mut self, job: &IndependentJob, calls: &[&Call]) {
        self.jobs += 1;
        let mut by_node: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for c in calls {
            by_node
                .entry(c.node.as_str())
                .or_default()
                .push(c.detected_at);
        }
        match &job.fault {
            None => {
                self.healthy_calls += by_node.len();
                self.healthy_jobs_called += usize::from(!by_node.is_empty());
            }
            Some(f) => {
                self.faulty += 1;
                for (node, times) in &by_node {
                    if *node != f.node {
                        self.wrong_node_calls += 1;
                    } else if let Some(t) = times.iter().filter(|&&t| t >= f.onset).min() {
                        self.detected += 1;
                        self.delays.push(t - f.onset);
                    } else {
                        self.early_calls += 1;
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

#[derive(Debug, Clone, Default)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

impl Score {
    /// Healthy jobs with at least one drain-tier call: the figure that matters most.
    pub fn healthy_jobs_drained(&self) -> usize {
        self.total.drain.healthy_jobs_called
    }
}

/// A call is right when it names the faulty node of its job at or after onset.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut s = Score::default();
    let known: BTreeSet<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
    for tier in [false, true] {
        let mut unknown = BTreeSet::new();
        for c in calls
            .iter()
            .filter(|c| (!tier || c.drain) && !known.contains(c.job.as_str()))
        {
            unknown.insert((c.job.as_str(), c.node.as_str()));
        }
        pick(&mut s.total, tier).unknown_calls = unknown.len();
    }
    for job in jobs {
        let mine: Vec<&Call> = calls.iter().filter(|c| c.job == job.job).collect();
        let drained: Vec<&Call> = mine.iter().copied().filter(|c| c.drain).collect();
        let add = |g: &mut TierPair| {
            g.all.add_job(job, &mine);
            g.drain.add_job(job, &drained);
        };
        add(&mut s.total);
        if let Some(f) = &job.fault {
            add(s.by_kind.entry(f.kind.clone()).or_default());
        }
        for c in &job.confounders {
            add(s.by_confounder.entry(c.clone()).or_default());
        }
    }
    s
}

fn pick(p: &mut TierPair, drain: bool) -> &mut Tally {
    if drain {
        &mut p.drain
    } else {
        &mut p.all
    }
}

fn row(f: &mut fmt::Formatter, name: &str, t: &Tally) -> fmt::Result {
    let delay = t
        .median_delay()
        .map_or("-".to_string(), |d| format!("{d} s"));
    writeln!(
        f,
        "| {name} | {} | {} | {} | {:.3} | {:.3} | {delay} | {} | {} | {} | {} | {} |",
        t.jobs,
        t.faulty,
        t.detected,
        t.precision(),
        t.recall(),
        t.healthy_jobs_called,
        t.healthy_calls,
        t.wrong_node_calls,
        t.early_calls,
        t.unknown_calls
    )
}

fn table(f: &mut fmt::Formatter, title: &str, rows: &[(&str, &Tally)]) -> fmt::Result {
    writeln!(f, "\n### {title}\n")?;
    writeln!(f, "| set | jobs | faulty | detected | precision | recall | median delay | healthy jobs called | healthy calls | wrong node | early | unknown |")?;
    writeln!(f, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for (name, t) in rows {
        row(f, name, t)?;
    }
    Ok(())
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for drain in [false, true] {
            let tier = if drain {
                "drain-tier calls"
            } else {
                "all calls"
            };
            let get = |p: &TierPair| {
                if drain {
                    p.drain.clone()
                } else {
                    p.all.clone()
                }
            };
            let total = get(&self.total);
            table(f, &format!("Total ({tier})"), &[("all jobs", &total)])?;
            let kinds: Vec<(String, Tally)> = self
                .by_kind
                .iter()
                .map(|(k, p)| (k.clone(), get(p)))
                .collect();
            let rows: Vec<(&str, &Tally)> = kinds.iter().map(|(k, t)| (k.as_str(), t)).collect();
            table(f, &format!("By fault kind ({tier})"), &rows)?;
            let conf: Vec<(String, Tally)> = self
                .by_confounder
                .iter()
                .map(|(k, p)| (k.clone(), get(p)))
                .collect();
            let rows: Vec<(&str, &Tally)> = conf.iter().map(|(k, t)| (k.as_str(), t)).collect();
            table(f, &format!("By confounder ({tier})"), &rows)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
