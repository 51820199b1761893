//! What one job is, drawn from the seed before any row is written: its
//! nodes and their hardware, its layout and step, its life (init, hangs,
//! restarts), its events and its fault.

use super::rng::Rng;

/// What the job's own parallelism looks like.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Layout {
    Ddp,
    Fsdp,
    Megatron,
}

pub(super) struct NodeDesign {
    pub name: String,
    /// GPUs in the node: sums (power, NVLink, PCIe) scale with it.
    pub gpus: f64,
    /// Share of the usual HCAs (8 = 1.0): IB sums scale with it.
    pub nic_frac: f64,
    /// Lifelong work factor: > 1 is a slower node (hardware revision,
    /// power cap, a slightly slow part). The slowest node sets the pace.
    pub work: f64,
    pub power_f: f64,
    pub cap_w: f64,
    pub clock_max: f64,
    pub temp_off: f64,
    pub stage: usize,
    pub cp_mult: f64,
    pub rack: usize,
    pub leaf: usize,
    pub interval: i64,
    pub offset: i64,
    pub skew: i64,
    /// Bit i set: metric i of `METRICS` is reported.
    pub mask: u32,
    /// Seconds after each init window opens before this node's ranks start.
    pub join: i64,
    pub from: i64,
    pub until: i64,
    pub rank0: bool,
    pub last: bool,
    pub loader_host: bool,
    /// From this time on, the node's power reads `.1` times and its clock
    /// `.2` MHz off (a firmware or driver rollout mid-job).
    pub fw_change: Option<(i64, f64, f64)>,
    pub cpu_base: f64,
    pub mem_gib: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum EvKind {
    CkptSharded,
    CkptRank0,
    CkptAsync,
    Eval,
    LoaderStall,
    BatchChange,
    RackThrottle,
    RackPowerCap,
    LeafCongestion,
    FsSlow,
    RoleSwitch,
    ExporterGap,
    ExporterRestart,
    PfcBurst,
    MoeHot,
}

/// Something that happens to a set of nodes for a while. Each node sees it
/// from `start + off` to `end + off`, `off` drawn per node in `[0, stagger)`:
/// a job-wide phase reaches nodes at slightly different times.
pub(super) struct Event {
    pub kind: EvKind,
    pub start: i64,
    pub end: i64,
    pub mag: f64,
    /// Node indices; empty means every node of the job.
    pub nodes: Vec<usize>,
    pub stagger: i64,
    pub id: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum FaultKind {
    Ecc,
    PcieDowngrade,
    NicDropout,
    GpuCardDrop,
    NvlinkError,
    AocError,
    SubtleGpu,
    SubtleCpu,
    SubtleLink,
}

impl FaultKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            FaultKind::Ecc => "ecc_error",
            FaultKind::PcieDowngrade => "pcie_downgrade",
            FaultKind::NicDropout => "nic_dropout",
            FaultKind::GpuCardDrop => "gpu_card_drop",
            FaultKind::NvlinkError => "nvlink_error",
            FaultKind::AocError => "aoc_cable_error",
            FaultKind::SubtleGpu => "subtle_gpu_throttle",
            FaultKind::SubtleCpu => "subtle_slow_host",
            FaultKind::SubtleLink => "subtle_link_degraded",
        }
    }

    pub(super) fn subtle(self) -> bool {
        matches!(
            self,
            FaultKind::SubtleGpu | FaultKind::SubtleCpu | FaultKind::SubtleLink
        )
    }
}

pub(super) struct Fault {
    pub kind: FaultKind,
    pub node: usize,
    pub onset: i64,
    /// The degradation (slowdown, cap) is felt in `[onset, degrade_end)`.
    pub degrade_end: i64,
    /// The node's ranks die (crash) at this time; the job hangs.
    pub crash_at: Option<i64>,
    /// After a crash, the node's GPU metrics vanish instead of reading 0.
    pub vanish: bool,
    /// Size of the effect: a slowdown fraction or a cap, per kind.
    pub mag: f64,
    /// A second bout of the same degradation (row-remap storms recur).
    pub relapse: Option<(i64, i64)>,
    /// Flapping links: degraded for `duty` seconds of every `period`.
    pub period: i64,
    pub duty: i64,
    /// Which of a kind's shapes this is (the kind's `shape` says).
    pub variant: u8,
}

/// The job's life as windows: between `inits` and `hangs` and `downs` it trains.
#[derive(Default)]
pub(super) struct Life {
    pub start: i64,
    pub end: i64,
    pub inits: Vec<(i64, i64)>,
    pub hangs: Vec<(i64, i64)>,
    pub downs: Vec<(i64, i64)>,
    /// A healthy node whose ranks exit first in an application crash
    /// (the others hang until the timeout): time and node.
    pub app_exit: Option<(i64, usize)>,
    pub ramp: i64,
}

pub(super) struct JobDesign {
    pub id: String,
    pub nodes: Vec<NodeDesign>,
    pub layout: Layout,
    pub moe: bool,
    pub stages: usize,
    pub stage_work: Vec<f64>,
    pub stage_busy: Vec<f64>,
    pub step: f64,
    pub compute_frac: f64,
    pub overlap: f64,
    pub busy: f64,
    pub sm: f64,
    pub ib_avg: f64,
    pub nvl_avg: f64,
    pub pcie_avg: f64,
    pub life: Life,
    pub events: Vec<Event>,
    /// Share of rows the exporters lose at random.
    pub drop_rate: f64,
    pub fault: Option<Fault>,
    pub confounders: Vec<String>,
}

impl JobDesign {
    pub(super) fn has(&self, confounder: &str) -> bool {
        self.confounders.iter().any(|c| c == confounder)
    }

    pub(super) fn add(&mut self, confounder: &str) {
        if !self.has(confounder) {
            self.confounders.push(confounder.to_string());
        }
    }
}

/// Draws a job's size: many small jobs, a long tail of large ones.
pub(super) fn draw_size(rng: &mut Rng, max_nodes: usize) -> usize {
    let n = match rng.pick(&[
        (0, 10.0),
        (1, 8.0),
        (2, 27.0),
        (3, 31.0),
        (4, 18.0),
        (5, 6.0),
    ]) {
        0 => 2,
        1 => 3,
        2 => rng.int(4, 8) as usize,
        3 => rng.int(9, 32) as usize,
        4 => rng.int(33, 96) as usize,
        _ => rng.int(97, 256) as usize,
    };
    n.clamp(2, max_nodes.max(2))
}

/// The per-job scrape interval: large jobs scrape less often.
pub(super) fn draw_interval(rng: &mut Rng, nodes: usize) -> i64 {
    let small = [(10, 4.0), (15, 3.0), (30, 2.0), (60, 1.0)];
    let large = [(15, 1.0), (30, 4.5), (60, 4.5)];
    let mid = [(10, 1.5), (15, 2.5), (30, 3.5), (60, 2.5)];
    match nodes {
        0..=16 => rng.pick(&small),
        17..=64 => rng.pick(&mid),
        _ => rng.pick(&large),
    }
}

/// Minder's Table 2 mix for the loud faults, 15% subtle ones.
pub(super) fn draw_fault_kind(rng: &mut Rng) -> FaultKind {
    if rng.chance(0.15) {
        return rng.pick(&[
            (FaultKind::SubtleGpu, 0.4),
            (FaultKind::SubtleCpu, 0.3),
            (FaultKind::SubtleLink, 0.3),
        ]);
    }
    rng.pick(&[
        (FaultKind::Ecc, 38.9),
        (FaultKind::PcieDowngrade, 6.6),
        (FaultKind::NicDropout, 5.7),
        (FaultKind::GpuCardDrop, 2.0),
        (FaultKind::NvlinkError, 1.7),
        (FaultKind::AocError, 1.1),
    ])
}
