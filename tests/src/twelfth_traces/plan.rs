//! The plan of one job: its kind, nodes, timing, per-node exporter quirks,
//! and the list of timed events (confounders) that shape its trace.

use super::rng::Rng;
use super::site::{Hw, Site};

/// What a job runs; decides how its nodes are coupled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 3D-parallel LLM pretraining; pipeline stages loaded differently.
    Pretrain,
    /// Long-context fine-tuning with FSDP: heavy all-gathers, uniform load.
    LongCtx,
    /// Mixture of experts with expert parallelism: hot experts move.
    Moe,
    /// RL post-training, colocated: every node generates then trains.
    RlColo,
    /// RL post-training, disaggregated: rollout nodes and learner nodes.
    RlDisagg,
    /// Offline inference/eval sweep: independent replicas.
    Inference,
    /// One trial of a hyper-parameter sweep (1-2 nodes).
    Sweep,
    /// Elastic training that loses and gains a node.
    Elastic,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pretrain => "pretrain",
            Kind::LongCtx => "long_context_fsdp",
            Kind::Moe => "moe",
            Kind::RlColo => "rl_colocated",
            Kind::RlDisagg => "rl_disaggregated",
            Kind::Inference => "inference_sweep",
            Kind::Sweep => "hp_sweep",
            Kind::Elastic => "elastic",
        }
    }
    /// Whether ranks wait for each other at collectives.
    pub fn synchronous(self) -> bool {
        self != Kind::Inference
    }
    /// (compute power intensity, memory-copy share, IB share, NVLink share,
    /// communication time per step relative to compute).
    pub fn profile(self) -> (f64, f64, f64, f64, f64) {
        match self {
            Kind::Pretrain | Kind::Elastic => (0.86, 0.42, 0.35, 0.30, 0.12),
            Kind::LongCtx => (0.80, 0.50, 0.55, 0.20, 0.20),
            Kind::Moe => (0.74, 0.45, 0.60, 0.35, 0.25),
            Kind::RlColo | Kind::RlDisagg => (0.82, 0.40, 0.30, 0.25, 0.10),
            Kind::Inference => (0.58, 0.72, 0.02, 0.10, 0.0),
            Kind::Sweep => (0.84, 0.40, 0.25, 0.25, 0.08),
        }
    }
}

/// A timed confounder or job event; `node` None = every node of the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// Synchronous checkpoint: every node stops computing and writes.
    SyncCkpt,
    /// Asynchronous checkpoint: one node per group writes, others go on.
    AsyncCkpt,
    /// Evaluation phase: lighter compute, no gradient traffic.
    Eval,
    /// Data loader stall on every node.
    StallJob,
    /// Data loader stall on one node: its GPUs starve.
    StallNode,
    /// One rank gets long sequences: a short straggle.
    LongSeq,
    /// Mid-job batch-size change: load level moves.
    BatchChange,
    /// The node's exporter is down (gap), then restarts (counter reset).
    ExporterGap,
    /// Job requeued: every node silent, then warm-up again.
    Requeue,
    /// Elastic re-rendezvous: everyone idle while the world is rebuilt.
    Rendezvous,
}

#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub ev: Ev,
    pub node: Option<usize>,
    pub t0: i64,
    pub t1: i64,
    pub x: f64,
}

impl Event {
    pub fn active(&self, node: usize, t: i64) -> bool {
        t >= self.t0 && t < self.t1 && self.node.is_none_or(|n| n == node)
    }
}

/// How a node behaves once a job has halted (crash, hang, loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Run,
    /// The process exited: GPUs idle, memory freed.
    Dead,
    /// GPU stuck in a kernel: util reads 100, power low.
    Hung,
    /// Rank stuck in user code before a barrier: GPU idle, one CPU busy.
    Stuck,
    /// Waiting in NCCL for a peer: util 100, power and traffic low.
    Spin,
    /// No rows at all (machine unreachable).
    Gone,
    /// GPU metrics stop (DCGM stopped answering), host metrics go on.
    GpuGone,
}

/// A halt: from `t` the culprit (or everyone) is in `culprit`, the others
/// in `peers`, until `kill`, when the job ends.
#[derive(Debug, Clone, Copy)]
pub struct Halt {
    pub t: i64,
    pub culprit: Option<usize>,
    pub mode: Mode,
    pub peers: Mode,
    pub kill: i64,
}

/// Everything decided about a job before its rows are drawn.
#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub kind: Kind,
    pub hw: Hw,
    pub hosts: Vec<usize>,
    /// [from, to) during which each node belongs to the job.
    pub present: Vec<(i64, i64)>,
    pub start: i64,
    pub end: i64,
    /// When the job (last requeue/rendezvous included) is steady.
    pub steady: i64,
    /// Warm-up/compile phases: (from, steady); a node finishes its own
    /// compile `warm_off` seconds before the phase's steady, then waits.
    pub warmups: Vec<(i64, i64)>,
    pub warm_off: Vec<i64>,
    pub interval: Vec<i64>,
    pub skew: Vec<i64>,
    /// Per node: bitmask of metrics it does not export.
    pub missing: Vec<u32>,
    pub extra_metrics: bool,
    /// Per node: a slowdown for its whole life (silicon lottery), 1 = none.
    pub lottery: Vec<f64>,
    /// Per node: the pipeline stage / role weight (1 = full load).
    pub weight: Vec<f64>,
    /// Per node: true for RL rollout nodes (disaggregated RL).
    pub rollout: Vec<bool>,
    pub stale_xid: Option<(usize, u32)>,
    pub rank0_extra: bool,
    pub gc_pauses: bool,
    pub events: Vec<Event>,
    pub halt: Option<Halt>,
    pub fault: Option<super::faults::Fault>,
    pub user: Option<super::users::UserErr>,
    pub labels: Vec<String>,
}

/// Draws a node count: log-normal around 8, a few large jobs, clamped.
pub fn draw_nodes(rng: &mut Rng, kind: Kind) -> usize {
    if kind == Kind::Sweep {
        return rng.int(1, 2) as usize;
    }
    if rng.chance(0.07) {
        return *rng.pick(&[64, 128, 256]);
    }
    let n = (8f64.ln() + 0.85 * rng.normal()).exp().round() as usize;
    let lo = if kind == Kind::RlDisagg || kind == Kind::Elastic {
        3
    } else {
        2
    };
    n.clamp(lo, 96)
}

/// Draws the hardware: newer jobs favour GB200 and B200.
pub fn draw_hw(rng: &mut Rng) -> Hw {
    [Hw::Gb200, Hw::B200, Hw::H100][rng.weighted(&[0.4, 0.35, 0.25])]
}

/// The skeleton of a job: nodes, timing, exporter quirks; no events yet.
pub fn skeleton(
    rng: &mut Rng,
    site: &mut Site,
    id: String,
    kind: Kind,
    n: usize,
    start: i64,
    dur: i64,
) -> Plan {
    let hw = draw_hw(rng);
    let hosts = site.alloc(hw, n);
    let steady = start + rng.int(120, 720);
    // Most nodes of a job share the site's scrape interval; a few differ.
    let base_iv = *rng.pick(&[10, 15, 15, 15, 30]);
    Plan {
        id,
        kind,
        hw,
        present: vec![(start, start + dur); n],
        warmups: vec![(start, steady)],
        warm_off: (0..n).map(|_| rng.int(0, 90)).collect(),
        interval: vec![base_iv; n],
        skew: (0..n).map(|_| rng.int(-2, 2)).collect(),
        missing: vec![0; n],
        extra_metrics: false,
        lottery: vec![1.0; n],
        weight: stage_weights(rng, kind, n),
        rollout: (0..n)
            .map(|i| kind == Kind::RlDisagg && i < n.div_ceil(2))
            .collect(),
        hosts,
        start,
        end: start + dur,
        steady,
        stale_xid: None,
        rank0_extra: kind != Kind::Inference,
        gc_pauses: false,
        events: Vec::new(),
        halt: None,
        fault: None,
        user: None,
        labels: vec![format!("job:{}", kind.name())],
    }
}

impl Plan {
    pub fn n(&self) -> usize {
        self.hosts.len()
    }
    /// Moves the job's end, and every node still present at it.
    pub fn set_end(&mut self, end: i64) {
        for p in &mut self.present {
            if p.1 == self.end {
                p.1 = end;
            }
        }
        self.end = end;
    }
    /// Adds a node (replacement or elastic join) present from `from`.
    pub fn add_node(&mut self, host: usize, from: i64, rng: &mut Rng) {
        self.hosts.push(host);
        self.present.push((from, self.end));
        self.warm_off.push(rng.int(0, 60));
        self.interval.push(self.interval[0]);
        self.skew.push(rng.int(-2, 2));
        self.missing.push(0);
        self.lottery.push(1.0);
        self.weight.push(*self.weight.last().unwrap_or(&1.0));
        self.rollout.push(false);
    }
    /// Halts the job at `t`: the culprit enters `mode`, the peers `peers`;
    /// a synchronous job is killed after `wait` and its trace ends.
    pub fn halt(&mut self, t: i64, culprit: Option<usize>, mode: Mode, peers: Mode, wait: i64) {
        let sync = self.kind.synchronous();
        let peers = if sync { peers } else { Mode::Run };
        let kill = if sync { t + wait } else { self.end };
        self.halt = Some(Halt {
            t,
            culprit,
            mode,
            peers,
            kill,
        });
        if sync {
            self.set_end(kill + 20);
        }
    }
    pub fn label(&mut self, s: &str) {
        if !self.labels.iter().any(|l| l == s) {
            self.labels.push(s.to_string());
        }
    }
}

/// Pipeline stages: first and last lighter by design (embedding, loss).
fn stage_weights(rng: &mut Rng, kind: Kind, n: usize) -> Vec<f64> {
    if kind != Kind::Pretrain || n < 4 {
        return vec![1.0; n];
    }
    let stages = if n >= 16 { 8 } else { 4 };
    let (first, last) = (rng.range(0.78, 0.9), rng.range(0.8, 0.93));
    (0..n)
        .map(|i| match i * stages / n {
            0 => first,
            s if s == stages - 1 => last,
            _ => 1.0,
        })
        .collect()
}
