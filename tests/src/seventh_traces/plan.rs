//! What each job is: its workload, nodes, layout, timeline, confounders and
//! fault. Everything here is drawn from the seed before a single row exists,
//! so the truth can be had without writing the trace.

use super::rng::Rng;
use super::IndependentSpec;

/// Every metric name a row may carry; the first [`KNOWN`] are the detector's.
pub(crate) const NAMES: [&str; 23] = [
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
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_XID_ERRORS",
    "nic_errors",
    "node_load1",
    "eth_tx",
    "pcie_link_width",
    "gpu_mem_used",
];
pub(crate) const KNOWN: usize = 14;

// Metric families by the exporter that emits them (bit masks over NAMES).
const NODE_EXPORTER: u32 = 0b111 | 1 << 19 | 1 << 20;
const DCGM_BASIC: u32 =
    1 << 3 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 14 | 1 << 15 | 1 << 17 | 1 << 21 | 1 << 22;
const DCGM_PROFILING: u32 = 1 << 4 | 1 << 8 | 1 << 9 | 1 << 16;
const IB_EXPORTER: u32 = 1 << 10 | 1 << 11 | 1 << 18;
const FABRIC: u32 = 1 << 12 | 1 << 13;
const UNKNOWN_ALL: u32 = !((1 << KNOWN) - 1) & ((1 << NAMES.len()) - 1);
/// The metrics a GPU exporter emits; they vanish together when it stalls.
pub(crate) const GPU_METRICS: u32 = DCGM_BASIC | DCGM_PROFILING;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Workload {
    Pretrain3d,
    PretrainFsdp,
    Finetune,
    RlPost,
    Multimodal,
    EvalBench,
}

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Pretrain3d => "pretrain_megatron",
            Workload::PretrainFsdp => "pretrain_fsdp",
            Workload::Finetune => "finetune",
            Workload::RlPost => "rl_post_training",
            Workload::Multimodal => "multimodal_diffusion",
            Workload::EvalBench => "eval_benchmark",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FaultKind {
    Ecc,
    PcieDowngrade,
    NicDropout,
    GpuCardDrop,
    NvlinkError,
    AocCable,
    ThermalThrottle,
    SlowHost,
    DegradedLink,
}

/// Minder's Table 2 shares of the hard faults (normalised when drawn).
pub(crate) const HARD_MIX: [(FaultKind, f64); 6] = [
    (FaultKind::Ecc, 38.9),
    (FaultKind::PcieDowngrade, 6.6),
    (FaultKind::NicDropout, 5.7),
    (FaultKind::GpuCardDrop, 2.0),
    (FaultKind::NvlinkError, 1.7),
    (FaultKind::AocCable, 1.1),
];

impl FaultKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::Ecc => "ecc_error",
            FaultKind::PcieDowngrade => "pcie_downgrade",
            FaultKind::NicDropout => "nic_dropout",
            FaultKind::GpuCardDrop => "gpu_card_drop",
            FaultKind::NvlinkError => "nvlink_error",
            FaultKind::AocCable => "aoc_cable_error",
            FaultKind::ThermalThrottle => "thermal_throttle",
            FaultKind::SlowHost => "slow_host",
            FaultKind::DegradedLink => "degraded_link",
        }
    }

    pub(crate) fn subtle(self) -> bool {
        matches!(
            self,
            FaultKind::ThermalThrottle | FaultKind::SlowHost | FaultKind::DegradedLink
        )
    }
}

/// What the job does after the hang's timeout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum After {
    Exit,
    /// Restart from the checkpoint on the same nodes; `healed` when the
    /// faulty GPU works again after the reset (a contained ECC error).
    Restart {
        healed: bool,
    },
}

pub(crate) struct FaultPlan {
    pub kind: FaultKind,
    pub node: usize,
    /// Job-relative seconds of the first visible effect on the node.
    pub onset: i64,
    /// Job-relative seconds of the halt, when the fault halts the job.
    pub halt: Option<i64>,
    /// The size of the effect: a throughput loss share, a bandwidth cut.
    pub severity: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CkptMode {
    Rank0,
    Sharded,
    Async,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Ev {
    Ckpt(CkptMode),
    Eval,
    StallNode(usize),
    StallAll,
    /// From this event's start on, compute per iteration times the factor.
    Batch(f64),
    Leaf {
        leaf: usize,
        slow: f64,
    },
    HotRack {
        rack: usize,
        slow: f64,
    },
    Noisy {
        node: usize,
        cpu: f64,
        slow: f64,
    },
    /// Rank 0 uploads the checkpoint it just wrote (CPU, disk, front-end net).
    Upload,
    Gap(usize),
    ExporterRestart(usize),
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) struct Event {
    pub a: i64,
    pub b: i64,
    pub ev: Ev,
}

/// A stretch of the job's life, job-wide.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Seg {
    Init,
    Train,
    Hung,
    /// Hung at start-up after a restart (the faulty node cannot join).
    InitHung,
    Idle,
}

/// What a role does during a stretch of an RL or benchmark job.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Act {
    Train,
    Rollout,
    Reward,
    Sync,
    Sweep,
    Gemm,
    Infer,
    Pause,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Worker,
    Trainer,
    Rollout,
    Reward,
    Teacher,
    Prefill,
    Decode,
    Client,
}

pub(crate) struct NodePlan {
    pub name: String,
    pub rack: usize,
    pub leaf: usize,
    pub role: Role,
    /// Pipeline stage or role group: nodes of one group share their levels.
    pub group: usize,
    /// Compute per iteration relative to a plain data-parallel node.
    pub level: f64,
    pub bubble: f64,
    pub ib_share: f64,
    pub nvl_share: f64,
    /// Lifelong slowness (1 = nominal), power multiplier, temperature and
    /// clock offsets: the silicon lottery and the node's place in the aisle.
    pub speed: f64,
    pub power: f64,
    pub temp: f64,
    pub clock: f64,
    pub skew: i64,
    pub phase: i64,
    pub metrics: u32,
    pub mem: f64,
    pub cpu: f64,
}

pub(crate) struct JobPlan {
    pub id: String,
    pub workload: Workload,
    pub start: i64,
    pub duration: i64,
    pub interval: i64,
    pub nodes: Vec<NodePlan>,
    pub segs: Vec<(i64, i64, Seg)>,
    pub acts: Vec<(i64, i64, Act)>,
    pub events: Vec<Event>,
    pub fault: Option<FaultPlan>,
    pub confounders: Vec<&'static str>,
    pub details: Vec<String>,
    /// Share of rows lost on the way (0 when the job has none missing).
    pub drop: f64,
    /// Share of waiting spent inside NCCL kernels (counted as GPU busy).
    pub kappa: f64,
    pub intensity: f64,
    pub membw: f64,
    pub comm: f64,
    pub ib_frac: f64,
    pub nvl_frac: f64,
    pub cpu_base: f64,
    pub disk_read: f64,
    pub skew_sd: f64,
    pub skew_block: i64,
    pub moe_amp: f64,
    pub bursts: f64,
    pub init_len: i64,
    pub seed: u64,
}

impl JobPlan {
    pub(crate) fn has(&self, confounder: &str) -> bool {
        self.confounders.contains(&confounder)
    }

    /// The job-relative second after which no node reports.
    pub(crate) fn end(&self) -> i64 {
        self.segs.last().map_or(self.duration, |s| s.1)
    }
}

/// The confounders and how often a job has each (see the module doc).
/// Benchmark jobs do not train, so they never have the five training ones:
/// the shares here are higher than the shares over all jobs.
pub(crate) const CONFOUNDERS: [(&str, f64); 19] = [
    ("warmup_ramp", 0.8),
    ("checkpoint", 0.8),
    ("eval_phase", 0.7),
    ("dataloader_stall", 0.7),
    ("lr_batch_change", 0.66),
    // Set by the workload's layout, not drawn: see `layout::groups`.
    ("layout_groups", 0.0),
    ("rank0_extra", 0.75),
    ("lifelong_bias", 0.85),
    ("data_skew", 0.68),
    ("metric_subset", 0.6),
    ("unknown_metrics", 0.9),
    ("exporter_gap", 0.6),
    ("exporter_restart", 0.55),
    ("missing_rows", 0.7),
    ("clock_skew", 0.8),
    ("fabric_bursts", 0.7),
    ("leaf_congestion", 0.56),
    ("rack_throttle", 0.56),
    ("noisy_neighbour", 0.56),
];

const WORKLOADS: [(Workload, f64); 6] = [
    (Workload::Pretrain3d, 0.22),
    (Workload::PretrainFsdp, 0.14),
    (Workload::Finetune, 0.20),
    (Workload::RlPost, 0.18),
    (Workload::Multimodal, 0.12),
    (Workload::EvalBench, 0.14),
];

/// The whole seed's jobs, in job order.
/// What a benchmark job (no training loop) cannot have.
pub(crate) const TRAINING_ONLY: [&str; 5] = [
    "checkpoint",
    "eval_phase",
    "dataloader_stall",
    "lr_batch_change",
    "data_skew",
];

pub(crate) fn plan_jobs(spec: &IndependentSpec) -> Vec<JobPlan> {
    let mut top = Rng::new(spec.seed);
    let mut cursor = top.below(64);
    let mut jobs = Vec::with_capacity(spec.jobs);
    for index in 0..spec.jobs {
        let weights: Vec<f64> = WORKLOADS.iter().map(|w| w.1).collect();
        let workload = WORKLOADS[top.weighted(&weights)].0;
        let size = node_count(&mut top, workload, spec.max_nodes);
        let faulty = top.chance(spec.faulty_share);
        let kind = faulty.then(|| fault_kind(&mut top, spec.subtle_share));
        let mut rng = Rng::derive(spec.seed, index as u64, 1);
        let names = allocate(&mut rng, &mut cursor, size);
        jobs.push(super::layout::build_job(
            spec, index, workload, names, kind, &mut rng,
        ));
    }
    jobs
}

pub(crate) fn fault_kind(rng: &mut Rng, subtle_share: f64) -> FaultKind {
    if rng.chance(subtle_share) {
        return rng.pick(&[
            FaultKind::ThermalThrottle,
            FaultKind::SlowHost,
            FaultKind::DegradedLink,
        ]);
    }
    let weights: Vec<f64> = HARD_MIX.iter().map(|k| k.1).collect();
    HARD_MIX[rng.weighted(&weights)].0
}

fn node_count(rng: &mut Rng, workload: Workload, cap: usize) -> usize {
    let choices: &[usize] = match workload {
        Workload::Pretrain3d => &[16, 24, 32, 32, 48, 64, 64, 96, 128, 128, 192, 256],
        Workload::PretrainFsdp => &[4, 8, 8, 12, 16, 16, 32, 48, 64],
        Workload::Finetune => &[2, 2, 3, 3, 4, 4, 6, 8, 8, 16],
        Workload::RlPost => &[4, 6, 8, 12, 16, 16, 24, 32, 48, 64],
        Workload::Multimodal => &[4, 8, 8, 16, 16, 24, 32],
        Workload::EvalBench => &[2, 2, 3, 4, 4, 5, 6, 8],
    };
    rng.pick(choices).clamp(2, cap.max(2))
}

/// Slurm hands out nodes mostly in topology order, with holes where other
/// jobs or drained nodes sit. Names: pod letter, scalable unit of 32 nodes,
/// slot. Racks hold 4 nodes; a leaf switch group 16.
fn allocate(rng: &mut Rng, cursor: &mut usize, n: usize) -> Vec<(String, usize, usize)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let g = *cursor;
        *cursor += 1;
        if rng.chance(0.12) {
            continue;
        }
        let su = g / 32;
        let pod = (b'a' + (su / 8 % 26) as u8) as char;
        let name = format!(
            "hgx-{pod}{}-{:03}",
            su % 8 + 1,
            g % 32 + 1 + (su / 208) * 100
        );
        out.push((name, g / 4, g / 16));
    }
    if rng.chance(0.3) {
        // A job's last nodes sometimes come from far away in the fleet.
        *cursor += rng.below(96);
    }
    out
}

/// The metric families a node reports: a full set, or one of the subsets
/// that real fleets show (no profiling fields, no switch counters, no IB
/// exporter).
pub(crate) fn metric_set(rng: &mut Rng, job_unknown: u32, fabric: bool, subset: bool) -> u32 {
    let mut set = NODE_EXPORTER | DCGM_BASIC | DCGM_PROFILING | IB_EXPORTER;
    if fabric {
        set |= FABRIC;
    }
    if subset {
        match rng.below(4) {
            0 | 1 => set &= !DCGM_PROFILING,
            2 => set &= !(FABRIC | DCGM_PROFILING),
            _ => set &= !(IB_EXPORTER | FABRIC),
        }
    }
    set & (!UNKNOWN_ALL | job_unknown)
}

/// The unknown metrics a job's exporters emit (most jobs have some).
pub(crate) fn unknown_set(rng: &mut Rng, present: bool) -> u32 {
    if !present {
        return 0;
    }
    let mut set = 0;
    for bit in KNOWN..NAMES.len() {
        if rng.chance(0.55) {
            set |= 1 << bit;
        }
    }
    set | 1 << 14
}
