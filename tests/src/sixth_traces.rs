//! A sixth generator of per-node metric traces of multi-node training jobs
//! on a GPU Slurm cluster, with ground truth: which job has a faulty node,
//! which node, and from when.
//!
//! It was written from a brief that describes only real jobs, real faults
//! and the replay format, without reading the detector, its documentation or
//! any other trace generator of this repository; it shares none of their
//! code or constants.
//!
//! # What it models
//!
//! **Fleet.** Four pools: `hgx0001..` (H100, 8 GPUs, 700 W each),
//! `h200n0001..` (H200, 8 x 700 W), `b200-001..` (B200, 8 x 1000 W) and
//! `gb200t0001..` (GB200 trays, 4 x 1000 W). Four 8-GPU nodes or eighteen
//! trays share a rack; 32 nodes (36 trays) share a leaf switch. Slurm hands a
//! job mostly consecutive free nodes, so node numbers have gaps where other
//! jobs run.
//!
//! **Jobs.** Sizes 2-256 nodes, skewed small (30 % 2-4 nodes, 20 % 5-8,
//! 18 % 9-16, 14 % 17-32, 9 % 33-64, 5 % 65-127, 4 % 128-256). Scrape interval
//! 10/15/30/60 s (30/60 s only from 64 nodes up); each exporter of each node
//! has its own phase. A job steps synchronously: the step time is the
//! slowest node's compute plus exposed communication, and faster nodes spin
//! in NCCL (GPU utilisation still reads busy, power and traffic drop).
//! Traffic per step is fixed, so a slower job moves fewer bytes per second
//! on every node. DCGM PCIe counters include the GPUDirect RDMA traffic of
//! the NICs. Every value carries 1-3 % noise.
//!
//! **Confounders** (independent draws per job; a job records the ones that
//! actually happened in `confounders`):
//!
//! | confounder | share | what happens |
//! |---|---|---|
//! | `long_startup` | 30 % | model load + compile take 8-20 min instead of 2-5 |
//! | `checkpoint_rank0` | 22 % | every 15-45 min rank 0 writes alone (1-5 min), the rest spin at a barrier |
//! | `checkpoint_sharded` | 25 % | every 15-45 min all nodes write shards, GPUs idle |
//! | `checkpoint_async` | 12 % | a short device-to-host copy, then background writes while training |
//! | `eval` | 30 % | every 20-60 min a 2-8 min forward-only phase: less power, little IB |
//! | `dataloader_stall` | 20 % | 2-6 times a node waits 20-120 s for data; the job waits with it |
//! | `bursty_steps` | 25 % | gradient accumulation / variable sequence length: step time wanders 8-18 % |
//! | `pipeline` | 22 % | 2-8 stages; first and last stages have bubbles, the last one sets the pace, middle stages carry twice the p2p traffic |
//! | `tensor_parallel` | 40 % | heavy NVLink traffic |
//! | `moe_imbalance` | 12 % | heavy all-to-all; a hot-expert node 6-30 % slower, moving every 2-10 min |
//! | `rank0_extra` | 30 % | rank 0 logs/gathers: more CPU and memory, 1-4 % slower |
//! | `silicon_lottery` | 40 % | wider persistent per-node speed/power/clock spread |
//! | `healthy_straggler` | 10 % | one healthy node 3-6 % slower all job long |
//! | `partial_metrics` | 15 % | 10-40 % of nodes lack the IB, host or DCGM-profiling family |
//! | `unknown_metrics` | 30 % | `gpu_temp`, `DCGM_FI_DEV_XID_ERRORS`, `node_load15`, `ib_symbol_errors` |
//! | `exporter_restart` | 15 % | 1-3 nodes silent for 1-3 scrapes, then counters read 0 once |
//! | `exporter_gap` | 12 % | 1-2 nodes silent for 2-10 min |
//! | `dropped_rows` | 25 % | 0.3-3 % of rows lost |
//! | `clock_skew` | 20 % | node clocks off by seconds, a few by up to 9 s |
//! | `tenant_noise` | 20 % | PFC/CNP bursts on 1-3 nodes from other tenants |
//! | `leaf_congestion` | 12 % | a leaf congested for 2-10 min: its nodes pause, the job slows 3-30 % |
//! | `rack_throttle` | 8 % | a rack's nodes (at least two of the job) clock down 6-20 % for 5-20 min |
//! | `idle_wait` | 8 % | all nodes idle 3-15 min |
//! | `requeue_restart` | 7 % | whole job down 2-10 min, reloads a checkpoint |
//! | `elastic_shrink` | 4 % | the job restarts on fewer nodes (the rest stop reporting) |
//! | `nccl_user_hang` | 5 % | a user bug hangs every node alike for 10/30 min; the job restarts or ends |
//! | `oom_restart` | 5 % | every rank runs out of memory at once; the job restarts |
//! | `sidecar_process` | 10 % | one node runs a profiler / data-prep process for 5-20 min |
//! | `mixed_intervals` | 12 % | exporters at different intervals, or some nodes at another one |
//!
//! The four checkpoint styles are exclusive (41 % of jobs have none).
//! Job-wide interruptions of faulty jobs happen before the fault.
//!
//! **Faults**: `round(jobs x fault_fraction)` jobs have exactly one faulty
//! node, drawn uniformly over the job's ranks (rank 0 included), onset at
//! least 10 min into the job and 5 min before its planned end.
//!
//! | fault | share | effect on the faulty node / the job |
//! |---|---|---|
//! | `ecc_error` | 38 % | uncorrectable ECC: one GPU (or, 30 %, the node's whole process group) dies at onset; the job hangs in NCCL for 10/30 min, then ends or restarts without the node |
//! | `cuda_error` | 10 % | as above (half the time the whole node), other XIDs |
//! | `machine_unreachable` | 8 % | the node stops reporting at onset; the job hangs |
//! | `storage_slow` | 7 % | the node's data reads slow down intermittently: its GPUs starve, the job slows 30-200 % |
//! | `pcie_downgrade` | 7 % | 1-2 GPUs' links train down: PCIe capped, the job 8-35 % slower |
//! | `nic_dropout` | 6 % | the node's IB goes to zero (70 % all rails); the job hangs |
//! | `gpu_memory_error` | 5 % | HBM errors: 3-10 % slower for 3-10 min, then a GPU dies as with ECC |
//! | `gpu_card_drop` | 2 % | a GPU falls off the bus: it vanishes from the sums (power, NVLink, PCIe); the job hangs |
//! | `nvlink_error` | 2 % | NVLink drops to 5-30 %, traffic shifts to PCIe, 15-50 % slower; 25 % later hang |
//! | `aoc_cable` | 1 % | IB dips every 1-6 min with PFC/CNP/symbol errors; 30 % later the link dies |
//! | `thermal_throttle` | 6 % | subtle: clock and power down over 2-6 min, 5-25 % slower, hot |
//! | `slow_host` | 5 % | subtle: CPU contention, GPUs starve, 5-25 % slower |
//! | `degraded_link` | 4 % | subtle: link errors, PFC/CNP up on the node, job 5-20 % slower |
//!
//! The last three are `subtle` (no hang). A hanging job's faulty node is
//! told apart only by what it lost: a GPU at zero, a missing GPU's power,
//! its NIC at zero, or its silence.
//!
//! # Output
//!
//! `time,job,node,metric,value` rows sorted by time, written in well under
//! a second for a default seed (a few million rows).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};

/// The first job starts shortly after this (Unix seconds).
const BASE_TIME: i64 = 1_780_000_000;
/// Row times are stored as offsets from here (clock skew may go below BASE_TIME).
const ROW_EPOCH: i64 = BASE_TIME - 3_600;
/// Resolution of a job's timeline, seconds.
const SLOT: i64 = 5;

// ===================== public API =====================

/// What to generate.
#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    pub min_minutes: u32,
    pub max_minutes: u32,
    pub max_nodes: usize,
    pub fault_fraction: f64,
}

impl IndependentSpec {
    /// 40 jobs of 30-90 minutes, up to 256 nodes, 40 % with a faulty node.
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 40,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            fault_fraction: 0.4,
        }
    }
}

/// The faulty node of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    /// Unix seconds (true time, not the node's skewed clock).
    pub onset: i64,
    pub subtle: bool,
}

/// The truth about one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// One node named by the detector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// Counts over a set of jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub jobs: usize,
    pub faulty: usize,
    pub detected: usize,
    pub healthy_calls: usize,
    pub healthy_jobs_called: usize,
    pub wrong_node_calls: usize,
    pub delays: Vec<i64>,
}

impl Tally {
    pub fn false_calls(&self) -> usize {
        self.healthy_calls + self.wrong_node_calls
    }

    pub fn precision(&self) -> f64 {
        let called = self.detected + self.false_calls();
        if called == 0 {
            1.0
        } else {
            self.detected as f64 / called as f64
        }
    }

    /// 1.0 when there is nothing to find.
    pub fn recall(&self) -> f64 {
        if self.faulty == 0 {
            1.0
        } else {
            self.detected as f64 / self.faulty as f64
        }
    }

    pub fn median_delay(&self) -> Option<i64> {
        let mut sorted = self.delays.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len().saturating_sub(1) / 2).copied()
    }

    fn add(&mut self, other: &Tally) {
        self.jobs += other.jobs;
        self.faulty += other.faulty;
        self.detected += other.detected;
        self.healthy_calls += other.healthy_calls;
        self.healthy_jobs_called += other.healthy_jobs_called;
        self.wrong_node_calls += other.wrong_node_calls;
        self.delays.extend_from_slice(&other.delays);
    }
}

/// All calls, and only the calls that asked for a drain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TierPair {
    pub all: Tally,
    pub drain: Tally,
}

impl TierPair {
    fn add(&mut self, other: &TierPair) {
        self.all.add(&other.all);
        self.drain.add(&other.drain);
    }
}

/// Totals and breakdowns by confounder and by fault kind ("healthy" for none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    pub total: TierPair,
    pub by_confounder: BTreeMap<String, TierPair>,
    pub by_kind: BTreeMap<String, TierPair>,
}

/// The truth of every job, without generating rows.
pub fn plan(spec: &IndependentSpec) -> Vec<IndependentJob> {
    design(spec).into_iter().map(|d| d.truth).collect()
}

/// Writes the replay CSV and returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let designs = design(spec);
    let mut rows = Vec::new();
    for (index, job) in designs.iter().enumerate() {
        render_job(job, index as u16, &mut rows);
    }
    let rows = sort_by_time(rows);
    write_rows(&designs, &rows, out)?;
    Ok(designs.into_iter().map(|d| d.truth).collect())
}

// ===================== randomness =====================

/// splitmix64: small, fast, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng(seed.wrapping_mul(0xA076_1D64_78BD_642F)
            ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ 0x5EED_0006);
        rng.next_u64();
        rng
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Inclusive.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
        }
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-12);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Triangular on [-1, 1]: cheap bounded noise.
    fn jitter(&mut self) -> f64 {
        self.unit() + self.unit() - 1.0
    }

    fn weighted<T: Copy>(&mut self, table: &[(T, f64)]) -> T {
        let total: f64 = table.iter().map(|entry| entry.1).sum();
        let mut x = self.unit() * total;
        for &(value, weight) in table {
            if x < weight {
                return value;
            }
            x -= weight;
        }
        table[table.len() - 1].0
    }
}

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stateless uniform draw in [0, 1) for (key, index).
fn hash01(key: u64, index: i64) -> f64 {
    (mix64(key ^ (index as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)) >> 11) as f64
        / (1u64 << 53) as f64
}

// ===================== fleet =====================

#[derive(Debug, Clone, Copy)]
struct Hardware {
    gpus: u32,
    tdp_w: f64,
    idle_w: f64,
    boost_mhz: f64,
    idle_mhz: f64,
    /// Per GPU, bytes/s, practical.
    pcie_bps: f64,
    /// Per GPU, transmit, bytes/s.
    nvlink_bps: f64,
    /// Whole node, transmit over all rails, bytes/s.
    ib_bps: f64,
    cpus: f64,
}

struct Pool {
    prefix: &'static str,
    width: usize,
    size: usize,
    rack_nodes: usize,
    leaf_nodes: usize,
    weight: f64,
    hw: Hardware,
}

const POOLS: [Pool; 4] = [
    Pool {
        prefix: "hgx",
        width: 4,
        size: 640,
        rack_nodes: 4,
        leaf_nodes: 32,
        weight: 0.40,
        hw: Hardware {
            gpus: 8,
            tdp_w: 700.0,
            idle_w: 72.0,
            boost_mhz: 1980.0,
            idle_mhz: 345.0,
            pcie_bps: 55e9,
            nvlink_bps: 450e9,
            ib_bps: 400e9,
            cpus: 224.0,
        },
    },
    Pool {
        prefix: "h200n",
        width: 4,
        size: 448,
        rack_nodes: 4,
        leaf_nodes: 32,
        weight: 0.30,
        hw: Hardware {
            gpus: 8,
            tdp_w: 700.0,
            idle_w: 78.0,
            boost_mhz: 1980.0,
            idle_mhz: 345.0,
            pcie_bps: 55e9,
            nvlink_bps: 450e9,
            ib_bps: 400e9,
            cpus: 192.0,
        },
    },
    Pool {
        prefix: "b200-",
        width: 3,
        size: 320,
        rack_nodes: 4,
        leaf_nodes: 32,
        weight: 0.15,
        hw: Hardware {
            gpus: 8,
            tdp_w: 1000.0,
            idle_w: 140.0,
            boost_mhz: 1965.0,
            idle_mhz: 420.0,
            pcie_bps: 55e9,
            nvlink_bps: 900e9,
            ib_bps: 400e9,
            cpus: 224.0,
        },
    },
    Pool {
        prefix: "gb200t",
        width: 4,
        size: 288,
        rack_nodes: 18,
        leaf_nodes: 36,
        weight: 0.15,
        hw: Hardware {
            gpus: 4,
            tdp_w: 1000.0,
            idle_w: 150.0,
            boost_mhz: 2062.0,
            idle_mhz: 420.0,
            pcie_bps: 60e9,
            nvlink_bps: 900e9,
            ib_bps: 400e9,
            cpus: 144.0,
        },
    },
];

/// Which node of each pool is taken until when.
struct Fleet {
    busy_until: Vec<Vec<i64>>,
}

impl Fleet {
    fn new() -> Fleet {
        Fleet {
            busy_until: POOLS.iter().map(|pool| vec![0; pool.size]).collect(),
        }
    }

    /// Slurm hands out mostly consecutive free nodes; nodes busy with other
    /// jobs, and a few skipped ones, leave gaps in the numbers.
    fn allocate(
        &mut self,
        rng: &mut Rng,
        pool: usize,
        count: usize,
        start: i64,
        until: i64,
    ) -> Option<Vec<usize>> {
        let free: Vec<usize> = (0..POOLS[pool].size)
            .filter(|&node| self.busy_until[pool][node] <= start)
            .collect();
        if free.len() < count {
            return None;
        }
        let skip = rng.range(0.0, 0.2);
        let first = rng.below(free.len());
        let mut taken = vec![false; free.len()];
        let mut chosen = Vec::with_capacity(count);
        for pass in 0..2 {
            for k in 0..free.len() {
                let at = (first + k) % free.len();
                if chosen.len() == count || taken[at] || (pass == 0 && rng.chance(skip)) {
                    continue;
                }
                taken[at] = true;
                chosen.push(free[at]);
            }
        }
        chosen.sort_unstable();
        for &node in &chosen {
            self.busy_until[pool][node] = until;
        }
        Some(chosen)
    }
}

// ===================== faults =====================

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Ecc,
    Cuda,
    Unreachable,
    Storage,
    Pcie,
    Nic,
    Hbm,
    CardDrop,
    Nvlink,
    Aoc,
    Thermal,
    SlowHost,
    DegradedLink,
}

/// Minder's Table 2 shares, normalised to 85 %, plus 15 % subtle slowdowns.
const FAULT_MIX: [(FaultKind, f64); 13] = [
    (FaultKind::Ecc, 0.381),
    (FaultKind::Cuda, 0.098),
    (FaultKind::Unreachable, 0.078),
    (FaultKind::Storage, 0.068),
    (FaultKind::Pcie, 0.068),
    (FaultKind::Nic, 0.059),
    (FaultKind::Hbm, 0.049),
    (FaultKind::CardDrop, 0.020),
    (FaultKind::Nvlink, 0.020),
    (FaultKind::Aoc, 0.010),
    (FaultKind::Thermal, 0.060),
    (FaultKind::SlowHost, 0.050),
    (FaultKind::DegradedLink, 0.040),
];

impl FaultKind {
    fn name(self) -> &'static str {
        match self {
            FaultKind::Ecc => "ecc_error",
            FaultKind::Cuda => "cuda_error",
            FaultKind::Unreachable => "machine_unreachable",
            FaultKind::Storage => "storage_slow",
            FaultKind::Pcie => "pcie_downgrade",
            FaultKind::Nic => "nic_dropout",
            FaultKind::Hbm => "gpu_memory_error",
            FaultKind::CardDrop => "gpu_card_drop",
            FaultKind::Nvlink => "nvlink_error",
            FaultKind::Aoc => "aoc_cable",
            FaultKind::Thermal => "thermal_throttle",
            FaultKind::SlowHost => "slow_host",
            FaultKind::DegradedLink => "degraded_link",
        }
    }

    fn subtle(self) -> bool {
        matches!(
            self,
            FaultKind::Thermal | FaultKind::SlowHost | FaultKind::DegradedLink
        )
    }
}

/// An intermittent IB dip of a flapping cable.
#[derive(Debug, Clone, Copy)]
struct Dip {
    start: i64,
    end: i64,
    ib_factor: f64,
    slowdown: f64,
}

#[derive(Debug, Clone)]
struct FaultPlan {
    kind: FaultKind,
    node: usize,
    /// Seconds from the job's start.
    onset: i64,
    /// When the job hangs because of it, if it does.
    hang_at: Option<i64>,
    timeout: i64,
    /// After the hang the job restarts without the node (else it ends).
    restart: bool,
    reload: i64,
    /// GPUs dead (present, idle) after the hang starts.
    dead_gpus: u32,
    /// GPUs gone from the bus.
    missing_gpus: u32,
    /// Size of the slowdown (meaning depends on the kind).
    slow: f64,
    /// A kind-specific second magnitude (NVLink left, CPU added, PFC factor, ...).
    aux: f64,
    /// Seconds a thermal throttle takes to settle.
    ramp: i64,
    /// GPUs whose PCIe link trained down.
    gpus_hit: u32,
    dips: Vec<Dip>,
    xid: f64,
}

impl FaultPlan {
    fn active(&self, t: i64) -> bool {
        t >= self.onset
    }

    fn hung(&self, t: i64) -> bool {
        self.hang_at.is_some_and(|at| t >= at)
    }

    fn dip_at(&self, t: i64) -> Option<&Dip> {
        self.dips.iter().find(|dip| t >= dip.start && t < dip.end)
    }

    /// Whether slow storage is slow right now: it comes and goes by the 2 minutes.
    fn storage_slow_now(&self, t: i64) -> bool {
        hash01(self.onset as u64 ^ 0x5707, t / 120) < 0.7
    }

    /// Multipliers on the node's GPU work, host work and SM clock.
    fn own_effect(&self, t: i64, host_part: f64) -> (f64, f64, f64) {
        if !self.active(t) {
            return (1.0, 1.0, 1.0);
        }
        match self.kind {
            FaultKind::Thermal => {
                let settled = ((t - self.onset) as f64 / self.ramp as f64).min(1.0);
                let factor = 1.0 + self.slow * settled;
                (factor, 1.0, 1.0 / factor)
            }
            FaultKind::SlowHost => (1.0, 1.0 + self.slow / host_part, 1.0),
            FaultKind::Storage if self.storage_slow_now(t) => {
                (1.0, 1.0 + self.slow / host_part, 1.0)
            }
            FaultKind::Pcie => (1.0, 1.0 + 0.5 * self.slow / host_part, 1.0),
            FaultKind::Nvlink => (1.0 + self.slow, 1.0, 1.0),
            FaultKind::Hbm if !self.hung(t) => (1.0 + self.slow, 1.0, 1.0),
            _ => (1.0, 1.0, 1.0),
        }
    }

    /// Step time the whole job loses to this fault's network side.
    fn pace_added(&self, t: i64) -> f64 {
        if !self.active(t) || self.hung(t) {
            return 0.0;
        }
        match self.kind {
            FaultKind::Pcie => 0.5 * self.slow,
            FaultKind::DegradedLink => self.slow,
            FaultKind::Aoc => self.dip_at(t).map_or(0.0, |dip| dip.slowdown),
            _ => 0.0,
        }
    }
}

fn draw_fault(rng: &mut Rng, nodes: usize, planned: i64, hw: &Hardware) -> FaultPlan {
    let kind = rng.weighted(&FAULT_MIX);
    let onset = rng.int(600, planned - 300);
    let mut fault = FaultPlan {
        kind,
        node: rng.below(nodes),
        onset,
        hang_at: None,
        timeout: if rng.chance(0.6) { 600 } else { 1800 },
        restart: rng.chance(0.45),
        reload: rng.int(120, 360),
        dead_gpus: 0,
        missing_gpus: 0,
        slow: 0.0,
        aux: 0.0,
        ramp: 1,
        gpus_hit: 0,
        dips: Vec::new(),
        xid: 0.0,
    };
    shape_fault(rng, &mut fault, planned, hw);
    fault
}

/// Kind-specific magnitudes: which crash, how slow, which XID.
fn shape_fault(rng: &mut Rng, f: &mut FaultPlan, planned: i64, hw: &Hardware) {
    let all_gpus = hw.gpus;
    match f.kind {
        FaultKind::Ecc => {
            f.hang_at = Some(f.onset);
            f.dead_gpus = if rng.chance(0.3) { all_gpus } else { 1 };
            f.xid = if rng.chance(0.5) {
                48.0
            } else {
                94.0 + rng.int(0, 1) as f64
            };
        }
        FaultKind::Cuda => {
            f.hang_at = Some(f.onset);
            f.dead_gpus = if rng.chance(0.5) { all_gpus } else { 1 };
            f.xid = rng.weighted(&[(13.0, 0.4), (31.0, 0.4), (43.0, 0.2)]);
        }
        FaultKind::Unreachable | FaultKind::Nic => {
            f.hang_at = Some(f.onset);
            f.aux = if rng.chance(0.7) {
                0.0
            } else {
                1.0 - 1.0 / 8.0
            };
        }
        FaultKind::CardDrop => {
            f.hang_at = Some(f.onset);
            f.missing_gpus = 1;
            f.xid = 79.0;
        }
        FaultKind::Hbm => {
            f.slow = rng.range(0.03, 0.10);
            f.hang_at = Some(f.onset + rng.int(180, 600));
            f.dead_gpus = 1;
            f.xid = rng.weighted(&[(63.0, 0.5), (64.0, 0.3), (92.0, 0.2)]);
        }
        FaultKind::Storage => f.slow = rng.range(0.3, 2.0),
        FaultKind::Pcie => {
            f.slow = rng.range(0.08, 0.35);
            // Gen1 x16, Gen3 x16 or Gen4 x8 instead of Gen5 x16.
            f.aux = rng.weighted(&[(3e9, 0.4), (13e9, 0.4), (27e9, 0.2)]);
            f.gpus_hit = rng.int(1, 2) as u32;
        }
        FaultKind::Nvlink => {
            f.slow = rng.range(0.15, 0.5);
            f.aux = rng.range(0.05, 0.3);
            f.xid = 74.0;
            if rng.chance(0.25) {
                f.hang_at = Some(f.onset + rng.int(300, 900));
                f.dead_gpus = 1;
            }
        }
        FaultKind::Aoc => shape_aoc(rng, f, planned),
        FaultKind::Thermal => {
            f.slow = rng.range(0.05, 0.25);
            f.ramp = rng.int(120, 360);
        }
        FaultKind::SlowHost => {
            f.slow = rng.range(0.05, 0.25);
            f.aux = rng.range(25.0, 60.0);
        }
        FaultKind::DegradedLink => {
            f.slow = rng.range(0.05, 0.20);
            f.aux = rng.range(5.0, 20.0);
        }
    }
    if f.hang_at.is_some_and(|at| at >= planned) {
        f.hang_at = None;
    }
}

fn shape_aoc(rng: &mut Rng, f: &mut FaultPlan, planned: i64) {
    let mut t = f.onset;
    let end = planned + 3_600;
    while t < end {
        let len = rng.int(5, 40);
        f.dips.push(Dip {
            start: t,
            end: t + len,
            ib_factor: rng.range(0.05, 0.6),
            slowdown: rng.range(0.3, 2.0),
        });
        t += len + rng.int(60, 360);
    }
    if rng.chance(0.3) {
        f.hang_at = Some(f.onset + rng.int(600, 1500));
        f.aux = 0.0;
    } else {
        f.aux = 1.0;
    }
}

// ===================== job design =====================

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventKind {
    /// The node waits for data (host work multiplied).
    Stall,
    /// An extra process on the node.
    Sidecar,
    /// The node hosts the hot experts.
    MoeHot,
    /// The node clocks down with its rack.
    Throttle,
    /// Other tenants' traffic pauses the node's port.
    TenantBurst,
    /// The node's leaf switch is congested.
    LeafJam,
    /// The node's exporters are not scraped.
    Gap,
    /// The node's exporters restart: silence, then counters from zero.
    Reset,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    kind: EventKind,
    start: i64,
    end: i64,
    mag: f64,
    aux: f64,
}

impl Event {
    fn covers(&self, t: i64) -> bool {
        t >= self.start && t < self.end
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CkptStyle {
    Rank0,
    Sharded,
    Async,
}

#[derive(Debug, Clone, Copy)]
struct Periodic {
    period: i64,
    len: i64,
    first: i64,
}

#[derive(Debug, Clone, Copy)]
enum Interruption {
    Idle {
        at: i64,
        len: i64,
    },
    UserHang {
        at: i64,
        timeout: i64,
        restart: bool,
        reload: i64,
    },
    Oom {
        at: i64,
        down: i64,
        reload: i64,
    },
    Requeue {
        at: i64,
        down: i64,
        reload: i64,
    },
    Shrink {
        at: i64,
        keep: usize,
        down: i64,
        reload: i64,
    },
}

impl Interruption {
    fn at(&self) -> i64 {
        match *self {
            Interruption::Idle { at, .. }
            | Interruption::UserHang { at, .. }
            | Interruption::Oom { at, .. }
            | Interruption::Requeue { at, .. }
            | Interruption::Shrink { at, .. } => at,
        }
    }

    /// How long until the job trains again.
    fn extent(&self) -> i64 {
        match *self {
            Interruption::Idle { len, .. } => len,
            Interruption::UserHang {
                timeout, reload, ..
            } => timeout + 90 + reload,
            Interruption::Oom { down, reload, .. }
            | Interruption::Requeue { down, reload, .. }
            | Interruption::Shrink { down, reload, .. } => down + reload,
        }
    }
}

/// How a job's model drives the hardware at nominal speed.
#[derive(Debug, Clone)]
struct Workload {
    /// Fractions of a nominal step: GPU compute, exposed host work, exposed communication.
    gpu_part: f64,
    host_part: f64,
    comm: f64,
    /// Share of TDP drawn while computing.
    intensity: f64,
    mem_intensity: f64,
    ib_frac: f64,
    nvlink_frac: f64,
    data_bps: f64,
    load_bps: f64,
    ckpt_bps: f64,
    pfc_level: f64,
    cnp_level: f64,
    bursty_sd: f64,
}

#[derive(Debug, Clone)]
struct NodeTraits {
    gpu_speed: f64,
    host_speed: f64,
    power_bias: f64,
    clock_bias: f64,
    stage_busy: f64,
    stage_ib: f64,
    cpu_base: f64,
    mem_base: f64,
    temp_offset: f64,
    ib_asym: f64,
    skew: i64,
    mask: u32,
    /// (interval, phase) per exporter family.
    scrape: [(i64, i64); 3],
    leave_at: i64,
}

/// Everything about a job needed to render it, drawn once from the seed.
struct JobDesign {
    truth: IndependentJob,
    start: i64,
    len: i64,
    hw: Hardware,
    work: Workload,
    nodes: Vec<NodeTraits>,
    node_events: Vec<Vec<Event>>,
    /// Events that change a node's own step time: (node, start, end).
    own_events: Vec<(usize, i64, i64)>,
    /// Leaf congestion: (start, end, step time added).
    job_slowdowns: Vec<(i64, i64, f64)>,
    startup: i64,
    ckpt: Option<(CkptStyle, Periodic)>,
    eval: Option<Periodic>,
    interruptions: Vec<Interruption>,
    fault: Option<FaultPlan>,
    noise: f64,
    drop_p: f64,
    render_seed: u64,
}

const CONFOUNDER_SHARES: [(&str, f64); 26] = [
    ("long_startup", 0.30),
    ("eval", 0.30),
    ("dataloader_stall", 0.20),
    ("bursty_steps", 0.25),
    ("pipeline", 0.22),
    ("tensor_parallel", 0.40),
    ("moe_imbalance", 0.12),
    ("rank0_extra", 0.30),
    ("silicon_lottery", 0.40),
    ("healthy_straggler", 0.10),
    ("partial_metrics", 0.15),
    ("unknown_metrics", 0.30),
    ("exporter_restart", 0.15),
    ("exporter_gap", 0.12),
    ("dropped_rows", 0.25),
    ("clock_skew", 0.20),
    ("tenant_noise", 0.20),
    ("leaf_congestion", 0.12),
    ("rack_throttle", 0.08),
    ("idle_wait", 0.08),
    ("requeue_restart", 0.07),
    ("elastic_shrink", 0.04),
    ("nccl_user_hang", 0.05),
    ("oom_restart", 0.05),
    ("sidecar_process", 0.10),
    ("mixed_intervals", 0.12),
];

fn design(spec: &IndependentSpec) -> Vec<JobDesign> {
    let mut rng = Rng::new(spec.seed, 0xF1EE7);
    let mut starts: Vec<i64> = (0..spec.jobs)
        .map(|_| BASE_TIME + rng.int(0, 9_000))
        .collect();
    starts.sort_unstable();
    let faulty = choose_faulty(&mut rng, spec);
    let mut fleet = Fleet::new();
    let mut job_id = 5_100_000 + rng.int(0, 90_000) as u64;
    let mut designs = Vec::with_capacity(spec.jobs);
    for (index, &start) in starts.iter().enumerate() {
        job_id += 1 + rng.int(0, 40) as u64;
        let mut job_rng = Rng::new(spec.seed, 1 + index as u64);
        designs.push(design_job(
            spec,
            job_id,
            start,
            faulty[index],
            &mut fleet,
            &mut job_rng,
        ));
    }
    designs
}

fn choose_faulty(rng: &mut Rng, spec: &IndependentSpec) -> Vec<bool> {
    let count = ((spec.jobs as f64 * spec.fault_fraction).round() as usize).min(spec.jobs);
    let mut order: Vec<usize> = (0..spec.jobs).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut faulty = vec![false; spec.jobs];
    for &job in order.iter().take(count) {
        faulty[job] = true;
    }
    faulty
}

fn draw_size(rng: &mut Rng, max_nodes: usize) -> usize {
    let (lo, hi) = rng.weighted(&[
        ((2, 4), 0.30),
        ((5, 8), 0.20),
        ((9, 16), 0.18),
        ((17, 32), 0.14),
        ((33, 64), 0.09),
        ((65, 127), 0.05),
        ((128, 256), 0.04),
    ]);
    (rng.int(lo, hi) as usize).clamp(2, max_nodes.max(2))
}

/// Finds a pool with enough free nodes, waiting in the queue if none has.
fn place_job(
    rng: &mut Rng,
    fleet: &mut Fleet,
    count: usize,
    mut start: i64,
    planned: i64,
) -> (usize, Vec<usize>, i64) {
    let weights: Vec<(usize, f64)> = POOLS
        .iter()
        .enumerate()
        .map(|(i, p)| (i, p.weight))
        .collect();
    let first_choice = rng.weighted(&weights);
    loop {
        for k in 0..POOLS.len() {
            let pool = (first_choice + k) % POOLS.len();
            let count = count.min(POOLS[pool].size);
            let until = start + planned + 3_600;
            if let Some(nodes) = fleet.allocate(rng, pool, count, start, until) {
                return (pool, nodes, start);
            }
        }
        start += rng.int(300, 900);
    }
}

fn draw_confounders(rng: &mut Rng) -> Vec<&'static str> {
    let mut names = Vec::new();
    let ckpt = rng.unit();
    if ckpt < 0.22 {
        names.push("checkpoint_rank0");
    } else if ckpt < 0.47 {
        names.push("checkpoint_sharded");
    } else if ckpt < 0.59 {
        names.push("checkpoint_async");
    }
    for &(name, share) in &CONFOUNDER_SHARES {
        if rng.chance(share) {
            names.push(name);
        }
    }
    names
}

fn design_job(
    spec: &IndependentSpec,
    job_id: u64,
    start: i64,
    faulty: bool,
    fleet: &mut Fleet,
    rng: &mut Rng,
) -> JobDesign {
    let count = draw_size(rng, spec.max_nodes);
    let planned = rng
        .int(
            spec.min_minutes as i64 * 60,
            spec.max_minutes.max(spec.min_minutes) as i64 * 60,
        )
        .max(1_200);
    let (pool, indices, start) = place_job(rng, fleet, count, start, planned);
    let count = indices.len();
    let hw = POOLS[pool].hw;
    let wanted = draw_confounders(rng);
    let wants = |name: &str| wanted.contains(&name);
    let work = draw_workload(rng, &hw, &wants);
    let startup = if wants("long_startup") {
        rng.int(480, 1_200)
    } else {
        rng.int(120, 300)
    };
    let fault = faulty.then(|| draw_fault(rng, count, planned, &hw));
    let mut design = JobDesign {
        truth: IndependentJob {
            job: job_id.to_string(),
            nodes: indices.iter().map(|&i| hostname(pool, i)).collect(),
            fault: None,
            confounders: Vec::new(),
        },
        start,
        len: planned,
        hw,
        work,
        nodes: Vec::new(),
        node_events: vec![Vec::new(); count],
        own_events: Vec::new(),
        job_slowdowns: Vec::new(),
        startup,
        ckpt: None,
        eval: None,
        interruptions: Vec::new(),
        fault,
        noise: rng.range(0.01, 0.03),
        drop_p: 0.0,
        render_seed: rng.next_u64(),
    };
    let mut kept = Vec::new();
    draw_nodes(rng, &mut design, pool, &indices, &wanted, &mut kept);
    draw_phases(rng, &mut design, &wanted, &mut kept);
    draw_events(rng, &mut design, pool, &indices, &wanted, &mut kept);
    draw_interruptions(rng, &mut design, &wanted, &mut kept);
    finish_job(&mut design, planned);
    kept.sort_unstable();
    design.truth.confounders = kept.into_iter().map(String::from).collect();
    design
}

fn hostname(pool: usize, index: usize) -> String {
    let p = &POOLS[pool];
    format!("{}{:0width$}", p.prefix, index + 1, width = p.width)
}

fn draw_workload(rng: &mut Rng, hw: &Hardware, wants: &dyn Fn(&str) -> bool) -> Workload {
    let gpu_part = rng.range(0.86, 0.95);
    let comm = rng.range(0.02, 0.09);
    let host_part = (1.0 - gpu_part - comm).max(0.02);
    let mut ib_frac = if wants("moe_imbalance") {
        rng.range(0.35, 0.7)
    } else {
        rng.range(0.10, 0.45)
    };
    let mut nvlink_frac = if wants("tensor_parallel") {
        rng.range(0.25, 0.6)
    } else {
        rng.range(0.04, 0.15)
    };
    if hw.gpus == 4 {
        // NVL72: much of the traffic stays on NVLink across trays.
        ib_frac *= 0.5;
        nvlink_frac = (nvlink_frac * 1.5).min(0.8);
    }
    Workload {
        gpu_part,
        host_part,
        comm,
        intensity: rng.range(0.70, 0.95),
        mem_intensity: rng.range(0.25, 0.65),
        ib_frac,
        nvlink_frac,
        data_bps: if rng.chance(0.3) {
            rng.range(1e5, 1e6)
        } else {
            rng.range(2e7, 4e8)
        },
        load_bps: rng.range(0.8e9, 4e9),
        ckpt_bps: rng.range(0.5e9, 3e9),
        pfc_level: rng.range(1e3, 3e4),
        cnp_level: rng.range(5.0, 200.0),
        bursty_sd: if wants("bursty_steps") {
            rng.range(0.08, 0.18)
        } else {
            rng.range(0.005, 0.015)
        },
    }
}

// ===================== metrics =====================

const GPU_UTIL: usize = 0;
const GPU_UTIL_MIN: usize = 1;
const GPU_MEM_UTIL: usize = 2;
const GPU_POWER: usize = 3;
const GPU_SM_CLOCK: usize = 4;
const PCIE_TX: usize = 5;
const PCIE_RX: usize = 6;
const NVLINK_TX: usize = 7;
const IB_TX: usize = 8;
const IB_RX: usize = 9;
const PFC_PAUSE: usize = 10;
const CNP: usize = 11;
const CPU_UTIL: usize = 12;
const MEM_USED: usize = 13;
const DISK_IO: usize = 14;
const GPU_TEMP: usize = 15;
const XID: usize = 16;
const LOAD15: usize = 17;
const SYMBOL_ERRORS: usize = 18;
const METRIC_COUNT: usize = 19;

/// Exporter families: DCGM, the RDMA/IB exporter, node_exporter.
const DCGM: usize = 0;
const IB: usize = 1;
const HOST: usize = 2;

/// (name, family, is a counter turned into a rate).
const METRICS: [(&str, usize, bool); METRIC_COUNT] = [
    ("gpu_util", DCGM, false),
    ("gpu_util_min", DCGM, false),
    ("gpu_mem_util", DCGM, false),
    ("gpu_power", DCGM, false),
    ("gpu_sm_clock", DCGM, false),
    ("pcie_tx", DCGM, false),
    ("pcie_rx", DCGM, false),
    ("nvlink_tx", DCGM, false),
    ("ib_tx", IB, true),
    ("ib_rx", IB, true),
    ("pfc_pause", IB, true),
    ("cnp", IB, true),
    ("cpu_util", HOST, false),
    ("mem_used", HOST, false),
    ("disk_io", HOST, true),
    ("gpu_temp", DCGM, false),
    ("DCGM_FI_DEV_XID_ERRORS", DCGM, false),
    ("node_load15", HOST, false),
    ("ib_symbol_errors", IB, true),
];

fn family_mask(family: usize) -> u32 {
    (0..METRIC_COUNT)
        .filter(|&m| METRICS[m].1 == family)
        .fold(0, |mask, m| mask | 1 << m)
}

/// The DCGM profiling fields (need the profiling module loaded).
const PROFILING_MASK: u32 = 1 << GPU_MEM_UTIL | 1 << PCIE_TX | 1 << PCIE_RX | 1 << NVLINK_TX;

// ===================== per-node draws =====================

fn job_metric_mask(rng: &mut Rng, wanted: &[&str]) -> u32 {
    let mut mask: u32 = (1 << 15) - 1;
    if rng.chance(0.5) {
        mask &= !(1 << PCIE_RX);
    }
    if wanted.contains(&"unknown_metrics") {
        for metric in GPU_TEMP..METRIC_COUNT {
            if rng.chance(0.6) {
                mask |= 1 << metric;
            }
        }
        mask |= 1 << GPU_TEMP;
    }
    mask
}

fn job_interval(rng: &mut Rng, nodes: usize) -> i64 {
    if nodes >= 64 {
        rng.weighted(&[(30, 0.5), (60, 0.5)])
    } else {
        rng.weighted(&[(10, 0.15), (15, 0.30), (30, 0.30), (60, 0.25)])
    }
}

/// Per exporter family (interval, phase). Separate exporters are scraped at
/// separate phases; some sites run one agent for everything.
fn node_scrape(rng: &mut Rng, base: [i64; 3], one_agent: bool) -> [(i64, i64); 3] {
    let shared = rng.int(0, base[0] - 1);
    let mut scrape = [(0, 0); 3];
    for family in 0..3 {
        let phase = if one_agent && base[family] == base[0] {
            shared
        } else {
            rng.int(0, base[family] - 1)
        };
        scrape[family] = (base[family], phase);
    }
    scrape
}

fn draw_nodes(
    rng: &mut Rng,
    d: &mut JobDesign,
    pool: usize,
    indices: &[usize],
    wanted: &[&str],
    kept: &mut Vec<&'static str>,
) {
    let count = indices.len();
    let mask = job_metric_mask(rng, wanted);
    let interval = job_interval(rng, count);
    let mixed = wanted.contains(&"mixed_intervals");
    let family_intervals = if mixed && rng.chance(0.6) {
        [
            rng.weighted(&[(10, 0.3), (15, 0.4), (30, 0.3)]),
            rng.weighted(&[(30, 0.5), (60, 0.5)]),
            60,
        ]
    } else {
        [interval; 3]
    };
    let other_interval = if interval >= 30 { 15 } else { 60 };
    let odd_share = if mixed && family_intervals == [interval; 3] {
        rng.range(0.2, 0.4)
    } else {
        0.0
    };
    let one_agent = rng.chance(0.5);
    let lottery = wanted.contains(&"silicon_lottery");
    let (speed_sd, power_sd, clock_sd) = if lottery {
        (0.012, 0.05, 0.012)
    } else {
        (0.004, 0.015, 0.004)
    };
    let cpu_job = rng.range(6.0, 25.0);
    let mem_job = rng.range(18.0, 55.0);
    let rack_heat: Vec<f64> = (0..64).map(|_| rng.range(-3.0, 5.0)).collect();
    for &index in indices {
        let base = if rng.chance(odd_share) {
            [other_interval; 3]
        } else {
            family_intervals
        };
        let rack = index / POOLS[pool].rack_nodes;
        d.nodes.push(NodeTraits {
            gpu_speed: 1.0 + speed_sd * rng.normal(),
            host_speed: 1.0 + 0.1 * rng.normal().abs(),
            power_bias: (1.0 + power_sd * rng.normal()).clamp(0.85, 1.15),
            clock_bias: (1.0 + clock_sd * rng.normal()).clamp(0.96, 1.02),
            stage_busy: 1.0,
            stage_ib: 1.0,
            cpu_base: (cpu_job + 1.5 * rng.normal()).max(1.0),
            mem_base: (mem_job + 2.0 * rng.normal()).clamp(5.0, 90.0),
            temp_offset: rack_heat[rack % rack_heat.len()] + 1.5 * rng.normal(),
            ib_asym: rng.range(0.97, 1.03),
            skew: 0,
            mask,
            scrape: node_scrape(rng, base, one_agent),
            leave_at: i64::MAX,
        });
    }
    if lottery {
        kept.push("silicon_lottery");
    }
    if mixed {
        kept.push("mixed_intervals");
    }
    draw_node_quirks(rng, d, wanted, kept);
}

/// Persistent per-node differences a healthy job shows.
fn draw_node_quirks(
    rng: &mut Rng,
    d: &mut JobDesign,
    wanted: &[&str],
    kept: &mut Vec<&'static str>,
) {
    let count = d.nodes.len();
    let host_part = d.work.host_part;
    if wanted.contains(&"rank0_extra") {
        let rank0 = &mut d.nodes[0];
        rank0.host_speed *= 1.0 + rng.range(0.01, 0.04) / host_part;
        rank0.cpu_base += rng.range(8.0, 20.0);
        rank0.mem_base = (rank0.mem_base + rng.range(5.0, 12.0)).min(95.0);
        kept.push("rank0_extra");
    }
    if wanted.contains(&"healthy_straggler") {
        let node = rng.below(count);
        d.nodes[node].gpu_speed *= rng.range(1.035, 1.065);
        kept.push("healthy_straggler");
    }
    if wanted.contains(&"pipeline") {
        draw_pipeline(rng, d);
        kept.push("pipeline");
    }
    if wanted.contains(&"clock_skew") {
        for node in d.nodes.iter_mut() {
            node.skew = (1.5 * rng.normal()).round() as i64;
        }
        for _ in 0..rng.int(1, 3) {
            let node = rng.below(count);
            d.nodes[node].skew = rng.int(3, 9) * if rng.chance(0.5) { 1 } else { -1 };
        }
        kept.push("clock_skew");
    }
    if wanted.contains(&"partial_metrics") {
        let family = rng.weighted(&[
            (family_mask(IB), 0.4),
            (family_mask(HOST), 0.3),
            (PROFILING_MASK, 0.3),
        ]);
        let share = rng.range(0.1, 0.4);
        for node in d.nodes.iter_mut() {
            if rng.chance(share) {
                node.mask &= !family;
            }
        }
        kept.push("partial_metrics");
    }
    if wanted.contains(&"unknown_metrics") {
        kept.push("unknown_metrics");
    }
    if wanted.contains(&"tensor_parallel") {
        kept.push("tensor_parallel");
    }
}

/// Contiguous ranks form a stage. First and last stages have bubbles; the
/// last one also computes the loss head and sets the pace; middle stages
/// exchange activations with two neighbours.
fn draw_pipeline(rng: &mut Rng, d: &mut JobDesign) {
    let count = d.nodes.len();
    let stages = rng
        .weighted(&[(2usize, 0.35), (4, 0.4), (8, 0.25)])
        .min(count);
    let dp_share = rng.range(0.3, 0.7);
    let edge_bubble = rng.range(0.05, 0.15);
    let head_cost = rng.range(1.03, 1.10);
    for (rank, node) in d.nodes.iter_mut().enumerate() {
        let stage = rank * stages / count;
        let edge = stage == 0 || stage == stages - 1;
        node.stage_busy = if edge {
            1.0 - edge_bubble
        } else {
            1.0 - edge_bubble * 0.3
        };
        let neighbours = if stages == 1 {
            0.0
        } else if edge {
            1.0
        } else {
            2.0
        };
        node.stage_ib = dp_share + (1.0 - dp_share) * neighbours / 1.5;
        if stage == stages - 1 {
            node.gpu_speed *= head_cost;
        }
    }
}

/// Checkpoint and evaluation cadence.
fn draw_phases(rng: &mut Rng, d: &mut JobDesign, wanted: &[&str], kept: &mut Vec<&'static str>) {
    let styles = [
        ("checkpoint_rank0", CkptStyle::Rank0, (60, 300)),
        ("checkpoint_sharded", CkptStyle::Sharded, (30, 150)),
        ("checkpoint_async", CkptStyle::Async, (60, 240)),
    ];
    for (name, style, (lo, hi)) in styles {
        if wanted.contains(&name) {
            let period = rng.int(900, 2_700);
            let first = d.startup + rng.int(period / 3, period);
            d.ckpt = Some((
                style,
                Periodic {
                    period,
                    len: rng.int(lo, hi),
                    first,
                },
            ));
            kept.push(name);
        }
    }
    if wanted.contains(&"eval") {
        let period = rng.int(1_200, 3_600);
        let first = d.startup + rng.int(period / 2, period);
        d.eval = Some(Periodic {
            period,
            len: rng.int(120, 480),
            first,
        });
        kept.push("eval");
    }
    if wanted.contains(&"long_startup") {
        kept.push("long_startup");
    }
    if wanted.contains(&"bursty_steps") {
        kept.push("bursty_steps");
    }
    if wanted.contains(&"dropped_rows") {
        d.drop_p = rng.range(0.003, 0.03);
        kept.push("dropped_rows");
    }
}

// ===================== events =====================

fn push_event(
    d: &mut JobDesign,
    node: usize,
    kind: EventKind,
    (start, end): (i64, i64),
    mag: f64,
    aux: f64,
) {
    d.node_events[node].push(Event {
        kind,
        start,
        end,
        mag,
        aux,
    });
    if matches!(
        kind,
        EventKind::Stall | EventKind::Sidecar | EventKind::MoeHot | EventKind::Throttle
    ) {
        d.own_events.push((node, start, end));
    }
}

/// A random window of `lo..=hi` seconds inside training time.
fn window(rng: &mut Rng, d: &JobDesign, (lo, hi): (i64, i64)) -> (i64, i64) {
    let len = rng.int(lo, hi);
    let start = rng.int(d.startup + 60, (d.len - len - 60).max(d.startup + 60));
    (start, start + len)
}

fn draw_events(
    rng: &mut Rng,
    d: &mut JobDesign,
    pool: usize,
    indices: &[usize],
    wanted: &[&str],
    kept: &mut Vec<&'static str>,
) {
    let count = d.nodes.len();
    if wanted.contains(&"dataloader_stall") {
        for _ in 0..rng.int(2, 6) {
            let span = window(rng, d, (20, 120));
            push_event(d, rng.below(count), EventKind::Stall, span, 30.0, 0.0);
        }
        kept.push("dataloader_stall");
    }
    if wanted.contains(&"sidecar_process") {
        let span = window(rng, d, (300, 1_200));
        let slow = rng.range(1.01, 1.05);
        push_event(
            d,
            rng.below(count),
            EventKind::Sidecar,
            span,
            slow,
            rng.range(15.0, 35.0),
        );
        kept.push("sidecar_process");
    }
    if wanted.contains(&"moe_imbalance") {
        let mut t = d.startup;
        while t < d.len {
            let end = t + rng.int(120, 600);
            push_event(
                d,
                rng.below(count),
                EventKind::MoeHot,
                (t, end),
                rng.range(1.06, 1.3),
                0.0,
            );
            t = end;
        }
        kept.push("moe_imbalance");
    }
    if wanted.contains(&"rack_throttle") && draw_rack_throttle(rng, d, pool, indices) {
        kept.push("rack_throttle");
    }
    if wanted.contains(&"tenant_noise") {
        for _ in 0..rng.int(1, 3.min(count as i64)) {
            let node = rng.below(count);
            for _ in 0..rng.int(2, 6) {
                let span = window(rng, d, (30, 300));
                push_event(
                    d,
                    node,
                    EventKind::TenantBurst,
                    span,
                    rng.range(10.0, 80.0),
                    rng.range(5.0, 40.0),
                );
            }
        }
        kept.push("tenant_noise");
    }
    if wanted.contains(&"leaf_congestion") {
        draw_leaf_congestion(rng, d, pool, indices);
        kept.push("leaf_congestion");
    }
    draw_exporter_trouble(rng, d, wanted, kept);
}

/// A rack's cooling falls behind: at least two of the job's nodes clock down together.
fn draw_rack_throttle(rng: &mut Rng, d: &mut JobDesign, pool: usize, indices: &[usize]) -> bool {
    let rack_of = |index: usize| index / POOLS[pool].rack_nodes;
    let shared: Vec<usize> = indices
        .iter()
        .map(|&i| rack_of(i))
        .filter(|&rack| indices.iter().filter(|&&i| rack_of(i) == rack).count() >= 2)
        .collect();
    if shared.is_empty() {
        return false;
    }
    let rack = shared[rng.below(shared.len())];
    let span = window(rng, d, (300, 1_200));
    let mag = rng.range(1.06, 1.2);
    for (node, &index) in indices.iter().enumerate() {
        if rack_of(index) == rack {
            push_event(
                d,
                node,
                EventKind::Throttle,
                span,
                mag * rng.range(0.99, 1.01),
                0.0,
            );
        }
    }
    true
}

fn draw_leaf_congestion(rng: &mut Rng, d: &mut JobDesign, pool: usize, indices: &[usize]) {
    let leaf_of = |index: usize| index / POOLS[pool].leaf_nodes;
    let leaf = leaf_of(indices[rng.below(indices.len())]);
    for _ in 0..rng.int(1, 3) {
        let span = window(rng, d, (120, 600));
        let pfc = rng.range(5.0, 30.0);
        let cnp = rng.range(3.0, 20.0);
        for (node, &index) in indices.iter().enumerate() {
            if leaf_of(index) == leaf {
                push_event(d, node, EventKind::LeafJam, span, pfc, cnp);
            }
        }
        d.job_slowdowns.push((span.0, span.1, rng.range(0.03, 0.3)));
    }
}

fn draw_exporter_trouble(
    rng: &mut Rng,
    d: &mut JobDesign,
    wanted: &[&str],
    kept: &mut Vec<&'static str>,
) {
    let count = d.nodes.len();
    if wanted.contains(&"exporter_gap") {
        for _ in 0..rng.int(1, 2) {
            let len = rng.int(120, 600);
            let start = rng.int(0, (d.len - len).max(1));
            push_event(
                d,
                rng.below(count),
                EventKind::Gap,
                (start, start + len),
                0.0,
                0.0,
            );
        }
        kept.push("exporter_gap");
    }
    if wanted.contains(&"exporter_restart") {
        for _ in 0..rng.int(1, 3) {
            let node = rng.below(count);
            let interval = d.nodes[node].scrape[IB].0;
            let len = interval * rng.int(1, 3) + rng.int(1, 9);
            let start = rng.int(0, (d.len - len).max(1));
            push_event(
                d,
                node,
                EventKind::Reset,
                (start, start + len),
                interval as f64,
                0.0,
            );
        }
        kept.push("exporter_restart");
    }
}

// ===================== interruptions and the end of the job =====================

/// Each wanted interruption at a random time in `lo..hi` (they may overlap; the caller keeps the first).
fn draw_interruption_times(
    rng: &mut Rng,
    d: &JobDesign,
    wanted: &[&str],
    (lo, hi): (i64, i64),
) -> Vec<(&'static str, Interruption)> {
    let mut drawn = Vec::new();
    for name in [
        "idle_wait",
        "requeue_restart",
        "elastic_shrink",
        "nccl_user_hang",
        "oom_restart",
    ] {
        if !wanted.contains(&name) || hi - lo < 300 {
            continue;
        }
        let at = rng.int(lo, hi - 240);
        let reload = rng.int(120, 360);
        let it = match name {
            "idle_wait" => Interruption::Idle {
                at,
                len: rng.int(180, 900),
            },
            "requeue_restart" => Interruption::Requeue {
                at,
                down: rng.int(120, 600),
                reload,
            },
            "elastic_shrink" if d.nodes.len() >= 4 => {
                let keep = d.nodes.len() - rng.int(1, (d.nodes.len() / 4).max(1) as i64) as usize;
                Interruption::Shrink {
                    at,
                    keep,
                    down: rng.int(60, 120),
                    reload,
                }
            }
            "nccl_user_hang" => {
                let timeout = if rng.chance(0.6) { 600 } else { 1_800 };
                let restart = d.fault.is_some() || rng.chance(0.6);
                Interruption::UserHang {
                    at,
                    timeout,
                    restart,
                    reload,
                }
            }
            "oom_restart" => Interruption::Oom {
                at,
                down: rng.int(60, 180),
                reload,
            },
            _ => continue,
        };
        drawn.push((name, it));
    }
    drawn
}

fn draw_interruptions(
    rng: &mut Rng,
    d: &mut JobDesign,
    wanted: &[&str],
    kept: &mut Vec<&'static str>,
) {
    let lo = d.startup + 120;
    // A faulty job's own interruptions come before the fault, so the fault is the last word.
    let hi = d.fault.as_ref().map_or(d.len - 300, |f| f.onset - 120);
    let mut drawn = draw_interruption_times(rng, d, wanted, (lo, hi));
    drawn.sort_by_key(|(_, it)| it.at());
    let mut free_from = 0;
    for (name, it) in drawn {
        let fits = d
            .fault
            .as_ref()
            .is_none_or(|f| it.at() + it.extent() <= f.onset - 60);
        if it.at() < free_from || !fits {
            continue;
        }
        free_from = it.at() + it.extent() + 60;
        apply_interruption(d, &it);
        d.interruptions.push(it);
        kept.push(name);
        if matches!(it, Interruption::UserHang { restart: false, .. }) {
            break;
        }
    }
}

fn apply_interruption(d: &mut JobDesign, it: &Interruption) {
    match *it {
        Interruption::Shrink { at, keep, .. } => {
            // The job gives back the nodes it does not need; the faulty one stays.
            let fault_node = d.fault.as_ref().map(|f| f.node);
            let mut leaving = d.nodes.len() - keep;
            for node in (0..d.nodes.len()).rev() {
                if leaving > 0 && Some(node) != fault_node {
                    d.nodes[node].leave_at = at;
                    leaving -= 1;
                }
            }
        }
        Interruption::UserHang {
            at,
            timeout,
            restart: false,
            ..
        } => d.len = d.len.min(at + timeout + 60),
        _ => {}
    }
}

/// Where a fault leaves the job: ended after its hang, or restarted without the node.
fn finish_job(d: &mut JobDesign, planned: i64) {
    let Some(fault) = d.fault.as_ref() else {
        return;
    };
    if fault.kind == FaultKind::Unreachable {
        d.nodes[fault.node].leave_at = fault.onset;
    }
    if let Some(hang_at) = fault.hang_at {
        let over = hang_at + fault.timeout + 60;
        if fault.restart {
            d.nodes[fault.node].leave_at =
                d.nodes[fault.node].leave_at.min(hang_at + fault.timeout);
            d.len = planned.max(over + fault.reload + 600);
        } else {
            d.len = over;
        }
    }
    let host = d.truth.nodes[fault.node].clone();
    d.truth.fault = Some(PlantedFault {
        kind: fault.kind.name().to_string(),
        node: host,
        onset: d.start + fault.onset,
        subtle: fault.kind.subtle(),
    });
}

// ===================== timeline =====================

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the model and optimizer state.
    Load,
    /// NCCL init and graph compilation: CPU-bound, GPUs mostly idle.
    Compile,
    /// First steps: caches warm up.
    Ramp,
    Train,
    CkptRank0,
    CkptSharded,
    CkptAsync,
    Eval,
    Idle,
    /// Every rank blocked in a collective that never completes.
    Hang,
    Oom,
    /// Processes gone, waiting for the restart.
    Down,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    phase: Phase,
    /// Progress through the phase, 0..1.
    level: f32,
    /// Step time relative to nominal.
    pace: f32,
}

struct Timeline {
    slots: Vec<Slot>,
}

impl Timeline {
    fn at(&self, t: i64) -> Slot {
        let index = (t.max(0) / SLOT) as usize;
        self.slots[index.min(self.slots.len() - 1)]
    }

    fn paint(&mut self, from: i64, to: i64, phase: Phase) {
        let first = (from.max(0) / SLOT) as usize;
        let last = ((to.max(0) / SLOT) as usize).min(self.slots.len());
        let count = last.saturating_sub(first).max(1) as f32;
        for (k, slot) in self.slots[first.min(last)..last].iter_mut().enumerate() {
            slot.phase = phase;
            slot.level = k as f32 / count;
        }
    }

    fn paint_startup(&mut self, at: i64, len: i64) {
        let load = at + len * 2 / 5;
        let compile = at + len * 3 / 4;
        self.paint(at, load, Phase::Load);
        self.paint(load, compile, Phase::Compile);
        self.paint(compile, at + len, Phase::Ramp);
    }

    fn paint_periodic(&mut self, every: Periodic, end: i64, phase: Phase) {
        let mut t = every.first;
        while t < end {
            self.paint(t, t + every.len, phase);
            t += every.period;
        }
    }
}

fn build_timeline(d: &JobDesign) -> Timeline {
    let idle = Slot {
        phase: Phase::Train,
        level: 0.0,
        pace: 1.0,
    };
    let mut tl = Timeline {
        slots: vec![idle; (d.len / SLOT + 1) as usize],
    };
    tl.paint_startup(0, d.startup);
    if let Some(every) = d.eval {
        tl.paint_periodic(every, d.len, Phase::Eval);
    }
    if let Some((style, every)) = d.ckpt {
        let phase = match style {
            CkptStyle::Rank0 => Phase::CkptRank0,
            CkptStyle::Sharded => Phase::CkptSharded,
            CkptStyle::Async => Phase::CkptAsync,
        };
        tl.paint_periodic(every, d.len, phase);
    }
    for it in &d.interruptions {
        paint_interruption(&mut tl, it);
    }
    if let Some(fault) = &d.fault {
        if let Some(hang_at) = fault.hang_at {
            let over = hang_at + fault.timeout;
            tl.paint(hang_at, over, Phase::Hang);
            tl.paint(over, over + 60, Phase::Down);
            if fault.restart {
                tl.paint_startup(over + 60, fault.reload);
            }
        }
    }
    compute_pace(d, &mut tl);
    tl
}

fn paint_interruption(tl: &mut Timeline, it: &Interruption) {
    match *it {
        Interruption::Idle { at, len } => tl.paint(at, at + len, Phase::Idle),
        Interruption::UserHang {
            at,
            timeout,
            restart,
            reload,
        } => {
            tl.paint(at, at + timeout, Phase::Hang);
            tl.paint(at + timeout, at + timeout + 90, Phase::Down);
            if restart {
                tl.paint_startup(at + timeout + 90, reload);
            }
        }
        Interruption::Oom { at, down, reload } => {
            tl.paint(at, at + 15, Phase::Oom);
            tl.paint(at + 15, at + down, Phase::Down);
            tl.paint_startup(at + down, reload);
        }
        Interruption::Requeue { at, down, reload }
        | Interruption::Shrink {
            at, down, reload, ..
        } => {
            tl.paint(at, at + down, Phase::Down);
            tl.paint_startup(at + down, reload);
        }
    }
}

/// Multipliers on a node's GPU work, host work and SM clock at `t`.
fn node_factors(d: &JobDesign, node: usize, t: i64) -> (f64, f64, f64) {
    let traits = &d.nodes[node];
    let (mut gpu, mut host, mut clock) = (traits.gpu_speed, traits.host_speed, 1.0);
    for event in &d.node_events[node] {
        if !event.covers(t) {
            continue;
        }
        match event.kind {
            EventKind::Stall => host *= event.mag,
            EventKind::Sidecar | EventKind::MoeHot => gpu *= event.mag,
            EventKind::Throttle => {
                gpu *= event.mag;
                clock /= event.mag;
            }
            _ => {}
        }
    }
    if let Some(fault) = d.fault.as_ref().filter(|f| f.node == node) {
        let (g, h, c) = fault.own_effect(t, d.work.host_part);
        gpu *= g;
        host *= h;
        clock *= c;
    }
    (gpu, host, clock)
}

fn own_time(d: &JobDesign, node: usize, t: i64) -> f64 {
    let (gpu, host, _) = node_factors(d, node, t);
    d.work.gpu_part * gpu + d.work.host_part * host
}

/// The job steps at its slowest node's pace plus exposed communication;
/// step times wander (gradient accumulation, sequence lengths).
fn compute_pace(d: &JobDesign, tl: &mut Timeline) {
    let mut rng = Rng::new(d.render_seed, 0x9ACE);
    let base_max = (0..d.nodes.len())
        .map(|node| own_time(d, node, -1))
        .fold(0.0, f64::max);
    let decay: f64 = 0.9;
    let spread = (1.0 - decay * decay).sqrt();
    let mut wander = 0.0;
    for (index, slot) in tl.slots.iter_mut().enumerate() {
        let t = index as i64 * SLOT;
        let mut slowest = base_max;
        for &(node, start, end) in &d.own_events {
            if t >= start && t < end && t < d.nodes[node].leave_at {
                slowest = slowest.max(own_time(d, node, t));
            }
        }
        let mut added = d.work.comm;
        if let Some(fault) = &d.fault {
            if fault.active(t) && t < d.nodes[fault.node].leave_at {
                slowest = slowest.max(own_time(d, fault.node, t));
            }
            added += fault.pace_added(t);
        }
        for &(start, end, slow) in &d.job_slowdowns {
            if t >= start && t < end {
                added += slow;
            }
        }
        wander = decay * wander + d.work.bursty_sd * spread * rng.normal();
        slot.pace = ((slowest + added) * wander.exp()) as f32;
    }
}

// ===================== what a node reads =====================

/// How a node spends its time at one instant.
#[derive(Debug, Clone, Copy)]
struct Activity {
    /// Fraction of time the GPUs compute.
    busy: f64,
    /// Fraction of time the GPUs spin in a collective (reads busy, draws little).
    spin: f64,
    /// Steps per nominal step time: scales traffic.
    rate: f64,
    ib_scale: f64,
    nvl_scale: f64,
    power_scale: f64,
    /// Bytes/s that flow even when nothing steps (keepalives, store heartbeats).
    trickle: f64,
    disk: f64,
    cpu: f64,
    mem: f64,
    pcie_extra: f64,
}

fn quiet(d: &JobDesign, node: usize) -> Activity {
    let traits = &d.nodes[node];
    Activity {
        busy: 0.0,
        spin: 0.0,
        rate: 0.0,
        ib_scale: 1.0,
        nvl_scale: 1.0,
        power_scale: 1.0,
        trickle: 0.0,
        disk: 0.0,
        cpu: traits.cpu_base * 0.3 + 1.0,
        mem: traits.mem_base,
        pcie_extra: 0.0,
    }
}

fn training(d: &JobDesign, slot: Slot, node: usize, t: i64) -> Activity {
    let w = &d.work;
    let traits = &d.nodes[node];
    let (gpu, host, _) = node_factors(d, node, t);
    let own_gpu = w.gpu_part * gpu;
    let own_host = w.host_part * host;
    let pace = (slot.pace as f64).max(own_gpu + own_host + w.comm);
    let compute = own_gpu / pace;
    let busy = compute * traits.stage_busy;
    let waiting_for_host = own_host / pace;
    // Half a pipeline bubble is spent spinning in a p2p receive.
    let spin = (1.0 - compute - waiting_for_host).max(0.0) + (compute - busy) * 0.5;
    Activity {
        busy,
        spin,
        rate: 1.0 / pace,
        ib_scale: traits.stage_ib,
        disk: w.data_bps / pace,
        cpu: traits.cpu_base + 5.0 / pace,
        ..quiet(d, node)
    }
}

fn compiling(d: &JobDesign, node: usize, rng: &mut Rng) -> Activity {
    Activity {
        busy: rng.range(0.02, 0.25),
        disk: 1e7,
        cpu: d.nodes[node].cpu_base + 45.0,
        ..quiet(d, node)
    }
}

fn blend(a: Activity, b: Activity, level: f64) -> Activity {
    let mix = |x: f64, y: f64| x + (y - x) * level;
    Activity {
        busy: mix(a.busy, b.busy),
        spin: mix(a.spin, b.spin),
        rate: mix(a.rate, b.rate),
        ib_scale: mix(a.ib_scale, b.ib_scale),
        nvl_scale: mix(a.nvl_scale, b.nvl_scale),
        power_scale: mix(a.power_scale, b.power_scale),
        trickle: mix(a.trickle, b.trickle),
        disk: mix(a.disk, b.disk),
        cpu: mix(a.cpu, b.cpu),
        mem: mix(a.mem, b.mem),
        pcie_extra: mix(a.pcie_extra, b.pcie_extra),
    }
}

fn activity(d: &JobDesign, slot: Slot, node: usize, t: i64, rng: &mut Rng) -> Activity {
    let mut a = match slot.phase {
        Phase::Train => training(d, slot, node, t),
        Phase::Ramp => blend(
            compiling(d, node, rng),
            training(d, slot, node, t),
            slot.level as f64,
        ),
        Phase::Compile => compiling(d, node, rng),
        Phase::Eval => {
            // Forward only: no gradient all-reduce, lighter kernels.
            let a = training(d, slot, node, t);
            let busy = a.busy * 0.92;
            Activity {
                busy,
                spin: a.spin + a.busy - busy,
                power_scale: 0.7,
                ib_scale: a.ib_scale * 0.12,
                nvl_scale: 0.5,
                ..a
            }
        }
        Phase::CkptAsync => {
            let a = training(d, slot, node, t);
            let copying = slot.level < 0.15;
            let pcie_extra = if copying {
                d.hw.pcie_bps * d.hw.gpus as f64 * 0.3
            } else {
                0.0
            };
            Activity {
                disk: a.disk + d.work.ckpt_bps * 0.6,
                cpu: a.cpu + 12.0,
                pcie_extra,
                ..a
            }
        }
        _ => not_stepping(d, slot, node, rng),
    };
    node_extras(d, node, t, &mut a);
    a
}

/// Phases in which the job takes no training steps.
fn not_stepping(d: &JobDesign, slot: Slot, node: usize, rng: &mut Rng) -> Activity {
    let traits = &d.nodes[node];
    let w = &d.work;
    let calm = quiet(d, node);
    match slot.phase {
        // Rank 0 writes alone; the others wait for it at a barrier.
        Phase::CkptRank0 if node == 0 => Activity {
            busy: 0.02,
            disk: w.ckpt_bps,
            cpu: traits.cpu_base + 30.0,
            mem: traits.mem_base + 6.0,
            ..calm
        },
        Phase::CkptRank0 => Activity {
            spin: 0.98,
            trickle: 5e5,
            ..calm
        },
        Phase::CkptSharded => Activity {
            busy: 0.04,
            spin: 0.1,
            disk: w.ckpt_bps * 0.8,
            cpu: traits.cpu_base + 15.0,
            ..calm
        },
        Phase::Load => {
            let disk = w.load_bps * (0.85 + 0.15 * rng.jitter());
            Activity {
                disk,
                pcie_extra: disk * 0.8,
                cpu: traits.cpu_base + 30.0,
                mem: traits.mem_base * (0.3 + 0.7 * slot.level as f64),
                ..calm
            }
        }
        Phase::Hang => Activity {
            spin: 0.99,
            trickle: 2e5,
            cpu: traits.cpu_base * 0.5 + 2.0,
            ..calm
        },
        Phase::Oom => Activity {
            mem: 97.0,
            cpu: 20.0,
            ..calm
        },
        Phase::Down => Activity {
            mem: 6.0,
            cpu: 1.5,
            ..calm
        },
        _ => calm,
    }
}

/// What extra processes and slow hosts add on top of the job's own work.
fn node_extras(d: &JobDesign, node: usize, t: i64, a: &mut Activity) {
    for event in d.node_events[node].iter().filter(|e| e.covers(t)) {
        match event.kind {
            EventKind::Sidecar => {
                a.cpu += event.aux;
                a.mem += 8.0;
            }
            EventKind::Stall => a.cpu += 15.0,
            EventKind::MoeHot => a.ib_scale *= event.mag,
            _ => {}
        }
    }
    let Some(fault) = d.fault.as_ref().filter(|f| f.node == node && f.active(t)) else {
        return;
    };
    match fault.kind {
        FaultKind::SlowHost => a.cpu += fault.aux,
        FaultKind::Storage if fault.storage_slow_now(t) => {
            a.disk *= 0.25;
            a.cpu += 4.0;
        }
        _ => {}
    }
    if fault.hung(t) && fault.dead_gpus >= d.hw.gpus {
        // The node's whole process group died: nothing left to drive the CPUs or the NICs.
        a.cpu *= 0.2;
        a.trickle = 0.0;
    }
}

/// (dead, missing) GPUs of a node at `t`.
fn gpu_loss(d: &JobDesign, node: usize, t: i64) -> (f64, f64) {
    match d.fault.as_ref() {
        Some(f) if f.node == node && f.hung(t) => (f.dead_gpus as f64, f.missing_gpus as f64),
        _ => (0.0, 0.0),
    }
}

fn gpu_values(
    d: &JobDesign,
    node: usize,
    t: i64,
    a: &Activity,
    v: &mut [f64; METRIC_COUNT],
    rng: &mut Rng,
) {
    let hw = &d.hw;
    let traits = &d.nodes[node];
    let w = &d.work;
    let (dead, missing) = gpu_loss(d, node, t);
    let reporting = hw.gpus as f64 - missing;
    let alive = reporting - dead;
    let (_, _, throttle) = node_factors(d, node, t);
    let util_alive = (100.0 * (a.busy * 0.985 + a.spin * 0.997)).min(100.0);
    v[GPU_UTIL] = util_alive * alive / reporting;
    let lowest = util_alive * (1.0 - rng.range(0.003, 0.02))
        - if a.busy > 0.0 && a.busy < 0.3 {
            rng.range(0.0, 10.0)
        } else {
            0.0
        };
    v[GPU_UTIL_MIN] = if dead > 0.0 { 0.0 } else { lowest.max(0.0) };
    v[GPU_MEM_UTIL] = (100.0 * a.busy * w.mem_intensity + 4.0 * a.spin) * alive / reporting;
    let draw = a.busy * w.intensity * a.power_scale * throttle * throttle + a.spin * 0.22;
    let per_gpu = (hw.idle_w + (hw.tdp_w - hw.idle_w) * draw.min(1.0)) * traits.power_bias;
    v[GPU_POWER] = per_gpu * alive + dead * hw.idle_w * 1.1;
    let clock_alive = if a.busy + a.spin > 0.05 {
        hw.boost_mhz * traits.clock_bias * throttle * (1.0 - 0.07 * a.busy * w.intensity)
    } else {
        hw.idle_mhz
    };
    v[GPU_SM_CLOCK] = (clock_alive * alive + hw.idle_mhz * dead) / reporting;
    v[GPU_TEMP] = 30.0 + traits.temp_offset + 50.0 * per_gpu / hw.tdp_w;
    v[NVLINK_TX] = hw.nvlink_bps * alive * w.nvlink_frac * a.nvl_scale * a.rate;
}

/// IB, and the PCIe traffic that carries it (GPUDirect RDMA) plus host copies.
fn network_values(d: &JobDesign, node: usize, a: &Activity, v: &mut [f64; METRIC_COUNT]) {
    let hw = &d.hw;
    let w = &d.work;
    let gpus = hw.gpus as f64;
    let ib = hw.ib_bps * w.ib_frac * a.ib_scale * a.rate + a.trickle;
    v[IB_TX] = ib;
    v[IB_RX] = ib * d.nodes[node].ib_asym;
    let load = ib / hw.ib_bps;
    v[PFC_PAUSE] = w.pfc_level * load;
    v[CNP] = w.cnp_level * load;
    let copies = hw.pcie_bps * gpus * 0.01 * a.rate;
    v[PCIE_TX] = 0.92 * v[IB_TX] + copies + a.pcie_extra;
    v[PCIE_RX] = 0.92 * v[IB_RX] + copies + a.disk * 1.1;
    v[SYMBOL_ERRORS] = 0.0;
}

fn host_values(d: &JobDesign, a: &Activity, v: &mut [f64; METRIC_COUNT]) {
    v[CPU_UTIL] = a.cpu.min(100.0);
    v[MEM_USED] = a.mem.min(99.0);
    v[DISK_IO] = a.disk;
    v[LOAD15] = a.cpu.min(100.0) / 100.0 * d.hw.cpus * 0.9;
    v[XID] = 0.0;
}

/// Port-level signs of other tenants, congested leaves and hot racks.
fn event_signals(d: &JobDesign, node: usize, t: i64, v: &mut [f64; METRIC_COUNT]) {
    let w = &d.work;
    for event in d.node_events[node].iter().filter(|e| e.covers(t)) {
        match event.kind {
            EventKind::TenantBurst | EventKind::LeafJam => {
                v[PFC_PAUSE] += w.pfc_level * 0.3 * event.mag;
                v[CNP] += w.cnp_level * 0.3 * event.aux;
                v[IB_TX] *= 0.97;
            }
            EventKind::Throttle => v[GPU_TEMP] += 12.0,
            _ => {}
        }
    }
}

/// What the faulty node's own counters show beyond its speed.
fn fault_signals(d: &JobDesign, node: usize, t: i64, v: &mut [f64; METRIC_COUNT], rng: &mut Rng) {
    let Some(f) = d.fault.as_ref().filter(|f| f.node == node && f.active(t)) else {
        return;
    };
    let gpus = d.hw.gpus as f64;
    v[XID] = f.xid;
    match f.kind {
        FaultKind::Nic => cut_ib(v, f.aux),
        FaultKind::Pcie => {
            let hit = f.gpus_hit as f64;
            for metric in [PCIE_TX, PCIE_RX] {
                let per_gpu = v[metric] / gpus;
                v[metric] = per_gpu * (gpus - hit) + per_gpu.min(f.aux) * hit;
            }
        }
        FaultKind::Nvlink => {
            let lost = v[NVLINK_TX] * (1.0 - f.aux);
            v[NVLINK_TX] -= lost;
            // What NVLink no longer carries crawls over PCIe and shared memory.
            v[PCIE_TX] += lost.min(d.hw.pcie_bps * gpus * 0.5);
        }
        FaultKind::Aoc if f.hung(t) => cut_ib(v, 0.0),
        FaultKind::Aoc => match f.dip_at(t) {
            Some(dip) => {
                v[IB_TX] *= dip.ib_factor;
                v[IB_RX] *= dip.ib_factor;
                v[PFC_PAUSE] = v[PFC_PAUSE] * 30.0 + d.work.pfc_level;
                v[CNP] = v[CNP] * 15.0 + d.work.cnp_level;
                v[SYMBOL_ERRORS] = rng.range(50.0, 5_000.0);
            }
            None => v[SYMBOL_ERRORS] = rng.range(0.0, 5.0).floor(),
        },
        FaultKind::Thermal => {
            let settled = ((t - f.onset) as f64 / f.ramp as f64).min(1.0);
            v[GPU_TEMP] = v[GPU_TEMP].max(78.0 + 12.0 * settled);
        }
        FaultKind::DegradedLink => {
            v[PFC_PAUSE] = v[PFC_PAUSE] * f.aux + d.work.pfc_level * 0.2;
            v[CNP] = v[CNP] * f.aux * 0.7 + d.work.cnp_level * 0.1;
            v[SYMBOL_ERRORS] = rng.range(1.0, 50.0).floor();
            v[IB_TX] *= 0.95;
        }
        _ => {}
    }
}

/// A NIC (or some of its rails) gone: what is left of IB, and of the PCIe traffic it carried.
fn cut_ib(v: &mut [f64; METRIC_COUNT], left: f64) {
    v[PCIE_TX] -= 0.92 * v[IB_TX] * (1.0 - left);
    v[PCIE_RX] -= 0.92 * v[IB_RX] * (1.0 - left);
    for metric in [IB_TX, IB_RX, PFC_PAUSE, CNP] {
        v[metric] *= left;
    }
}

fn node_values(
    d: &JobDesign,
    tl: &Timeline,
    node: usize,
    t: i64,
    rng: &mut Rng,
) -> [f64; METRIC_COUNT] {
    let a = activity(d, tl.at(t), node, t, rng);
    let mut v = [0.0; METRIC_COUNT];
    gpu_values(d, node, t, &a, &mut v, rng);
    network_values(d, node, &a, &mut v);
    host_values(d, &a, &mut v);
    event_signals(d, node, t, &mut v);
    fault_signals(d, node, t, &mut v, rng);
    v
}

// ===================== rendering =====================

#[derive(Debug, Clone, Copy)]
struct Row {
    t: u32,
    value: f32,
    job: u16,
    node: u16,
    metric: u8,
}

/// Exporter families scraped together: (interval, phase, family mask).
fn scrape_groups(traits: &NodeTraits) -> Vec<(i64, i64, u32)> {
    let mut groups: Vec<(i64, i64, u32)> = Vec::with_capacity(3);
    for family in [DCGM, IB, HOST] {
        let (interval, phase) = traits.scrape[family];
        match groups.iter_mut().find(|g| g.0 == interval && g.1 == phase) {
            Some(group) => group.2 |= family_mask(family),
            None => groups.push((interval, phase, family_mask(family))),
        }
    }
    groups
}

/// None while the node's exporters are silent; else whether its counters
/// just restarted from zero.
fn scrape_state(d: &JobDesign, node: usize, t: i64, interval: i64) -> Option<bool> {
    let mut fresh = false;
    for event in &d.node_events[node] {
        match event.kind {
            EventKind::Gap | EventKind::Reset if event.covers(t) => return None,
            EventKind::Reset if t >= event.end && t < event.end + interval => fresh = true,
            _ => {}
        }
    }
    Some(fresh)
}

fn render_job(d: &JobDesign, job: u16, rows: &mut Vec<Row>) {
    let tl = build_timeline(d);
    let mut rng = Rng::new(d.render_seed, 0x0E17);
    for node in 0..d.nodes.len() {
        let traits = &d.nodes[node];
        let end = traits.leave_at.min(d.len);
        for (interval, phase, families) in scrape_groups(traits) {
            let mask = traits.mask & families;
            let mut t = phase;
            while mask != 0 && t < end {
                if let Some(fresh) = scrape_state(d, node, t, interval) {
                    let values = node_values(d, &tl, node, t, &mut rng);
                    let at = (d.start + t + traits.skew - ROW_EPOCH) as u32;
                    emit(
                        d,
                        (job, node as u16, at),
                        mask,
                        fresh,
                        &values,
                        &mut rng,
                        rows,
                    );
                }
                t += interval;
            }
        }
    }
}

fn emit(
    d: &JobDesign,
    (job, node, t): (u16, u16, u32),
    mask: u32,
    fresh: bool,
    values: &[f64; METRIC_COUNT],
    rng: &mut Rng,
    rows: &mut Vec<Row>,
) {
    for (metric, &(_, _, counter)) in METRICS.iter().enumerate() {
        if mask & (1 << metric) == 0 || (d.drop_p > 0.0 && rng.chance(d.drop_p)) {
            continue;
        }
        let exact = values[metric].max(0.0);
        let value = match metric {
            _ if fresh && counter => 0.0,
            XID => exact,
            GPU_SM_CLOCK => exact * (1.0 + 0.3 * d.noise * rng.jitter()),
            GPU_UTIL | GPU_UTIL_MIN | GPU_MEM_UTIL | CPU_UTIL | MEM_USED => {
                (exact * (1.0 + d.noise * 1.5 * rng.jitter())).min(100.0)
            }
            _ => exact * (1.0 + d.noise * 1.5 * rng.jitter()),
        };
        rows.push(Row {
            t,
            value: value as f32,
            job,
            node,
            metric: metric as u8,
        });
    }
}

/// Counting sort on the second: linear, stable, deterministic.
fn sort_by_time(rows: Vec<Row>) -> Vec<Row> {
    let Some(latest) = rows.iter().map(|r| r.t).max() else {
        return rows;
    };
    let mut starts = vec![0usize; latest as usize + 2];
    for row in &rows {
        starts[row.t as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let filler = Row {
        t: 0,
        value: 0.0,
        job: 0,
        node: 0,
        metric: 0,
    };
    let mut sorted = vec![filler; rows.len()];
    for row in rows {
        let slot = &mut starts[row.t as usize];
        sorted[*slot] = row;
        *slot += 1;
    }
    sorted
}

fn write_rows(designs: &[JobDesign], rows: &[Row], out: &mut impl Write) -> io::Result<()> {
    let jobs: Vec<&[u8]> = designs.iter().map(|d| d.truth.job.as_bytes()).collect();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for row in rows {
        push_u64(&mut buf, (row.t as i64 + ROW_EPOCH) as u64);
        buf.push(b',');
        buf.extend_from_slice(jobs[row.job as usize]);
        buf.push(b',');
        buf.extend_from_slice(designs[row.job as usize].truth.nodes[row.node as usize].as_bytes());
        buf.push(b',');
        buf.extend_from_slice(METRICS[row.metric as usize].0.as_bytes());
        buf.push(b',');
        push_value(&mut buf, row.value as f64);
        buf.push(b'\n');
        if buf.len() > (1 << 20) - 256 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

fn push_u64(buf: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[at..]);
}

/// Integers from 100 000 up, one decimal from 100, else two.
fn push_value(buf: &mut Vec<u8>, value: f64) {
    let value = if value.is_finite() {
        value.max(0.0)
    } else {
        0.0
    };
    if value >= 1e5 {
        push_u64(buf, value.round() as u64);
    } else if value >= 100.0 {
        let tenths = (value * 10.0).round() as u64;
        push_u64(buf, tenths / 10);
        buf.push(b'.');
        buf.push(b'0' + (tenths % 10) as u8);
    } else {
        let hundredths = (value * 100.0).round() as u64;
        push_u64(buf, hundredths / 100);
        buf.push(b'.');
        buf.push(b'0' + (hundredths / 10 % 10) as u8);
        buf.push(b'0' + (hundredths % 10) as u8);
    }
}

// ===================== scoring =====================

/// Scores calls against the truth; a job's calls are those naming its id.
pub fn score(jobs: &[IndependentJob], calls: &[Call]) -> Score {
    let mut by_job: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in calls {
        by_job.entry(call.job.as_str()).or_default().push(call);
    }
    let mut result = Score::default();
    for job in jobs {
        let job_calls = by_job
            .get(job.job.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let drains: Vec<&Call> = job_calls.iter().copied().filter(|c| c.drain).collect();
        let pair = TierPair {
            all: tally_job(job, job_calls),
            drain: tally_job(job, &drains),
        };
        result.total.add(&pair);
        for confounder in &job.confounders {
            result
                .by_confounder
                .entry(confounder.clone())
                .or_default()
                .add(&pair);
        }
        let kind = job.fault.as_ref().map_or("healthy", |f| f.kind.as_str());
        result
            .by_kind
            .entry(kind.to_string())
            .or_default()
            .add(&pair);
    }
    result
}

fn tally_job(job: &IndependentJob, calls: &[&Call]) -> Tally {
    let mut called: Vec<&str> = calls.iter().map(|c| c.node.as_str()).collect();
    called.sort_unstable();
    called.dedup();
    let mut tally = Tally {
        jobs: 1,
        ..Tally::default()
    };
    let Some(fault) = &job.fault else {
        tally.healthy_calls = called.len();
        tally.healthy_jobs_called = usize::from(!called.is_empty());
        return tally;
    };
    tally.faulty = 1;
    let first_right = calls
        .iter()
        .filter(|c| c.node == fault.node && c.detected_at >= fault.onset)
        .map(|c| c.detected_at)
        .min();
    if let Some(at) = first_right {
        tally.detected = 1;
        tally.delays.push(at - fault.onset);
    }
    tally.wrong_node_calls = called
        .iter()
        .filter(|&&node| !(first_right.is_some() && node == fault.node))
        .count();
    tally
}

fn tally_cells(t: &Tally) -> String {
    let recall = if t.faulty == 0 {
        "-".to_string()
    } else {
        format!("{:.3}", t.recall())
    };
    let delay = t.median_delay().map_or("-".to_string(), |s| s.to_string());
    format!(
        "{} | {} | {} | {} | {:.3} | {} | {} | {}",
        t.faulty,
        t.detected,
        recall,
        t.false_calls(),
        t.precision(),
        t.healthy_jobs_called,
        t.wrong_node_calls,
        delay
    )
}

fn write_table(f: &mut fmt::Formatter<'_>, title: &str, rows: &[(&str, &TierPair)]) -> fmt::Result {
    writeln!(f, "### {title}\n")?;
    writeln!(f, "| group | tier | jobs | faulty | detected | recall | false calls | precision | healthy jobs called | wrong-node calls | median delay s |")?;
    writeln!(f, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for (name, pair) in rows {
        for (tier, tally) in [("all", &pair.all), ("drain", &pair.drain)] {
            writeln!(
                f,
                "| {name} | {tier} | {} | {} |",
                tally.jobs,
                tally_cells(tally)
            )?;
        }
    }
    writeln!(f)
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_table(f, "Total", &[("all jobs", &self.total)])?;
        let kinds: Vec<(&str, &TierPair)> =
            self.by_kind.iter().map(|(k, v)| (k.as_str(), v)).collect();
        write_table(f, "By fault kind", &kinds)?;
        let confounders: Vec<(&str, &TierPair)> = self
            .by_confounder
            .iter()
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        write_table(f, "By confounder", &confounders)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> IndependentSpec {
        IndependentSpec {
            jobs: 8,
            max_nodes: 16,
            ..IndependentSpec::new(seed)
        }
    }

    fn csv(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
        let mut bytes = Vec::new();
        let truth = generate(spec, &mut bytes).expect("writing to memory");
        (bytes, truth)
    }

    #[test]
    fn same_seed_same_bytes() {
        let (first, truth) = csv(&small(11));
        let (second, _) = csv(&small(11));
        let (other, _) = csv(&small(12));
        assert_eq!(first, second);
        assert_ne!(first, other);
        assert_eq!(truth, plan(&small(11)));
    }

    #[test]
    fn rows_are_sorted_by_time_and_well_formed() {
        let (bytes, truth) = csv(&small(3));
        let text = String::from_utf8(bytes).expect("utf-8");
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("time,job,node,metric,value"));
        let mut previous = 0i64;
        let mut count = 0;
        for line in lines {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), 5, "{line}");
            let time: i64 = fields[0].parse().expect("integer time");
            assert!(time >= previous, "{line} after {previous}");
            assert!(time > BASE_TIME - 60 && time < BASE_TIME + 86_400);
            let job = truth
                .iter()
                .find(|j| j.job == fields[1])
                .expect("a planned job");
            assert!(job.nodes.iter().any(|n| n == fields[2]), "{line}");
            let value: f64 = fields[4].parse().expect("decimal value");
            assert!(value >= 0.0);
            previous = time;
            count += 1;
        }
        assert!(count > 1_000);
    }

    #[test]
    fn faults_sit_in_their_jobs_with_room_around_the_onset() {
        for seed in 1..6 {
            let spec = IndependentSpec::new(seed);
            let jobs = plan(&spec);
            assert_eq!(jobs.len(), spec.jobs);
            let faulty = jobs.iter().filter(|j| j.fault.is_some()).count();
            assert_eq!(
                faulty,
                (spec.jobs as f64 * spec.fault_fraction).round() as usize
            );
            for (job, design) in jobs.iter().zip(design(&spec)) {
                let mut unique = job.nodes.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), job.nodes.len());
                assert!(job.nodes.len() >= 2 && job.nodes.len() <= spec.max_nodes);
                if let Some(fault) = &job.fault {
                    assert!(job.nodes.contains(&fault.node));
                    assert!(fault.onset >= design.start + 600);
                    assert!(fault.onset + 300 <= design.start + design.len);
                }
            }
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
    fn scorer_counts_right_wrong_and_healthy_calls() {
        let fault = PlantedFault {
            kind: "ecc_error".into(),
            node: "n2".into(),
            onset: 1_000,
            subtle: false,
        };
        let jobs = vec![
            IndependentJob {
                job: "1".into(),
                nodes: vec!["n1".into(), "n2".into()],
                fault: Some(fault),
                confounders: vec!["eval".into()],
            },
            IndependentJob {
                job: "2".into(),
                nodes: vec!["n3".into(), "n4".into()],
                fault: None,
                confounders: vec!["eval".into()],
            },
            IndependentJob {
                job: "3".into(),
                nodes: vec!["n5".into(), "n6".into()],
                fault: None,
                confounders: vec![],
            },
        ];
        let calls = vec![
            call("1", "n2", 900, false),
            call("1", "n2", 1_120, true),
            call("1", "n1", 1_200, false),
            call("2", "n3", 500, false),
            call("2", "n3", 700, false),
            call("2", "n4", 800, true),
        ];
        let s = score(&jobs, &calls);
        let all = &s.total.all;
        assert_eq!((all.jobs, all.faulty, all.detected), (3, 1, 1));
        assert_eq!(
            (
                all.healthy_calls,
                all.healthy_jobs_called,
                all.wrong_node_calls
            ),
            (2, 1, 1)
        );
        assert_eq!(all.delays, vec![120]);
        assert_eq!(all.false_calls(), 3);
        assert!((all.precision() - 0.25).abs() < 1e-9);
        assert!((all.recall() - 1.0).abs() < 1e-9);
        let drain = &s.total.drain;
        assert_eq!(
            (drain.detected, drain.healthy_calls, drain.wrong_node_calls),
            (1, 1, 0)
        );
        assert_eq!(drain.median_delay(), Some(120));
        assert_eq!(s.by_kind["healthy"].all.jobs, 2);
        assert_eq!(s.by_kind["ecc_error"].all.detected, 1);
        assert_eq!(s.by_confounder["eval"].all.jobs, 2);
        assert!(s
            .to_string()
            .contains("| all jobs | all | 3 | 1 | 1 | 1.000 | 3 | 0.250 |"));
    }

    #[test]
    fn a_call_before_onset_alone_is_a_wrong_node_call() {
        let fault = PlantedFault {
            kind: "slow_host".into(),
            node: "a".into(),
            onset: 100,
            subtle: true,
        };
        let jobs = vec![IndependentJob {
            job: "9".into(),
            nodes: vec!["a".into(), "b".into()],
            fault: Some(fault),
            confounders: vec![],
        }];
        let s = score(&jobs, &[call("9", "a", 50, true)]);
        assert_eq!((s.total.all.detected, s.total.all.wrong_node_calls), (0, 1));
        assert_eq!(score(&jobs, &[]).total.all.precision(), 1.0);
    }

    #[test]
    fn a_small_spec_generates_quickly() {
        let spec = IndependentSpec {
            jobs: 6,
            max_nodes: 8,
            min_minutes: 30,
            max_minutes: 40,
            ..IndependentSpec::new(5)
        };
        let began = std::time::Instant::now();
        let (bytes, _) = csv(&spec);
        assert!(!bytes.is_empty());
        assert!(began.elapsed().as_secs_f64() < 5.0, "{:?}", began.elapsed());
    }

    #[test]
    fn values_are_formatted_compactly() {
        let mut buf = Vec::new();
        for value in [0.0, 0.004, 3.14659, 99.999, 100.04, 12_345.67, 2.5e10] {
            push_value(&mut buf, value);
            buf.push(b' ');
        }
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "0.00 0.00 3.15 100.00 100.0 12345.7 25000000000 "
        );
    }
}
