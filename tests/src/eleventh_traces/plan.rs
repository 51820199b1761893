//! The plan of a site: jobs, their nodes, their phases, the environment's
//! effects and the one incident (fault or user error) a job may have. The
//! planner fills it in; the sampler only reads it.

use std::collections::BTreeSet;

/// What a job is; it decides the per-node profile and the confounders it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    Pretrain,
    Fsdp,
    Moe,
    Multimodal,
    Rl,
    Inference,
}

/// A node's work at full pace, per node (8 GPUs, 8 NICs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Profile {
    /// Fraction of wall time the GPUs do real math (drives power, clocks).
    pub compute: f64,
    pub mem_util: f64,
    pub nvlink: f64,
    pub ib: f64,
    pub pcie: f64,
    pub cpu: f64,
    pub disk: f64,
    pub mem_gb: f64,
}

/// One machine of a job and its exporter.
#[derive(Debug, Clone)]
pub(crate) struct NodePlan {
    pub name: String,
    /// Site-wide slot: rack = gid / 4 (four 8-GPU nodes a rack), leaf = gid / 32.
    pub gid: usize,
    /// DCGM exporter (all metrics) or a plain node exporter (no clocks,
    /// util_min, nvlink, XID).
    pub dcgm: bool,
    /// Also exports metrics nobody asked for.
    pub extra: bool,
    pub interval: i64,
    pub phase: i64,
    pub skew: i64,
    /// > 1: slower than its peers for its whole life (silicon, cooling).
    pub speed: f64,
    /// Level by design: pipeline stage or role (1 = the job's profile).
    pub level: f64,
    /// Role group (RL) or pipeline stage.
    pub group: u8,
    /// Membership: a replacement node joins after a requeue.
    pub from: i64,
    pub until: i64,
    /// Exporter down in these windows; it restarts after (gauge resets).
    pub gaps: Vec<(i64, i64)>,
    pub drop_p: f64,
    /// An XID left on the gauge by an earlier job, until a restart.
    pub stale_xid: u32,
    pub warm_lag: i64,
    pub ckpt_lag: i64,
    /// Its hottest GPU runs this much warmer or cooler than the fleet's (°C).
    pub temp_off: f64,
    /// Board power differs a few percent between boards at the same work.
    pub power_gain: f64,
}

/// A job-wide phase; the first span that covers a time applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    Warmup,
    Checkpoint,
    Rank0Ckpt,
    Eval,
    Stall,
    NodeStall(usize),
    StorageOutage,
    /// Requeued: no rows at all.
    Gap,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub start: i64,
    pub end: i64,
    pub phase: Phase,
}

/// An effect of the environment (rack, leaf, fabric) on some of a job's
/// nodes: the job runs at 1/factor of its pace while it lasts.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    pub start: i64,
    pub end: i64,
    pub nodes: Vec<usize>,
    pub factor: f64,
    pub clock: f64,
    pub temp: f64,
    pub pfc: f64,
    pub cnp: f64,
    /// Bursts (on, off) seconds, or steady.
    pub cycle: Option<(i64, i64)>,
}

/// What a node does after an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Keeps training (perhaps slower, with the effect's metrics).
    Same,
    /// Its processes died: GPUs idle.
    Idle,
    /// Stuck in a kernel or an NCCL collective: util high, power low.
    Spin,
    /// Unreachable: no rows at all.
    Gone,
    /// DCGM hangs (GSP): no GPU rows, node rows go on, GPUs stuck.
    Blind,
}

/// Metric changes on the culprit node while the incident is active.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Effect {
    pub clock: f64,
    pub power_cap: f64,
    pub temp: f64,
    pub nvlink: f64,
    pub pcie: f64,
    pub ib: f64,
    pub pfc: f64,
    pub cnp: f64,
    pub cpu: f64,
    pub min_gpu: f64,
    pub mem: f64,
    pub nic_errors: f64,
}

impl Effect {
    pub(crate) const NONE: Effect = Effect {
        clock: 1.0,
        power_cap: 1.0,
        temp: 0.0,
        nvlink: 1.0,
        pcie: 1.0,
        ib: 1.0,
        pfc: 0.0,
        cnp: 0.0,
        cpu: 0.0,
        min_gpu: 1.0,
        mem: 0.0,
        nic_errors: 0.0,
    };
}

/// What a slow culprit is short of; it decides who waits for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Its GPUs compute slower: it works all the time, its peers wait in NCCL.
    Compute,
    /// A link is slow: every node, the culprit too, waits on the transfers.
    Comm,
    /// Its host starves its GPUs of input: they idle, its peers spin in NCCL.
    Input,
}

/// A hardware fault or a user error on one job.
#[derive(Debug, Clone)]
pub(crate) struct Incident {
    pub name: &'static str,
    pub fault: bool,
    pub subtle: bool,
    pub node: usize,
    pub onset: i64,
    pub culprit: After,
    pub others: After,
    /// When the other nodes change (they notice the culprit's collective missing).
    pub others_at: i64,
    pub xid: u32,
    pub xid_at: i64,
    /// XID 45 (preemptive cleanup) on every node when the job is killed.
    pub cleanup_xid_at: Option<i64>,
    /// Job-wide slowdown while active (1 = none).
    pub factor: f64,
    pub bound: Bound,
    pub cycle: Option<(i64, i64)>,
    pub eff: Effect,
}

impl Incident {
    /// Whether the incident's on/off cycle is "on" at `t` (always, if steady).
    pub(crate) fn active(&self, t: i64) -> bool {
        if t < self.onset {
            return false;
        }
        match self.cycle {
            None => true,
            Some((on, off)) => (t - self.onset) % (on + off) < on,
        }
    }
}

/// One job of the site as planned.
#[derive(Debug, Clone)]
pub(crate) struct JobPlan {
    pub id: String,
    pub kind: JobKind,
    pub profile: Profile,
    pub start: i64,
    pub end: i64,
    pub nodes: Vec<NodePlan>,
    pub spans: Vec<Span>,
    pub envs: Vec<Env>,
    pub incident: Option<Incident>,
    pub confounders: BTreeSet<&'static str>,
    /// The slowest node-for-life factor: the healthy job's pace.
    pub life_max: f64,
    /// MoE: the hot expert's node moves every this many seconds.
    pub hot_expert: Option<i64>,
    /// RL: roles swap every this many seconds.
    pub role_switch: Option<i64>,
    /// A learning-rate / batch-size change: (time, new compute level).
    pub batch_change: Option<(i64, f64)>,
}
