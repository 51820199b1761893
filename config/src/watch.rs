//! `[watch]`: the in-job faulty-machine detector (`lemon watch`, after Minder).
//!
//! Every value is relative to the job itself: the detector needs no training
//! data from outside the job. The defaults suit samples 10 s apart from
//! data-parallel training jobs of 4 or more nodes.

use crate::{PrometheusSettings, WatchService, WatchSourceKind};
use serde::{Deserialize, Serialize};

/// `[watch]`: how samples are bucketed, learned, compared and called.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WatchSettings {
    /// Length of one detection step in seconds. Samples are bucketed into
    /// steps, so nodes whose clocks differ by a few seconds still meet.
    pub interval_s: i64,
    /// A node's latest sample counts for a step only if it is at most this
    /// old; older, the node is missing for that step. A node scraped less
    /// often is given two and a half of its own usual intervals instead
    /// (75 s at 30 s), and only a silence longer than that is an exporter gap.
    pub stale_s: i64,
    /// A job whose nodes have all been silent this long is forgotten (it ended).
    pub forget_after_s: i64,
    /// Seconds from a job's first sample during which nothing is called:
    /// start-up and data loading are noisy and nodes start at different times.
    pub warmup_s: i64,
    /// The last part of the warm-up, in seconds, from which each node's own
    /// place among its peers (its baseline) and each metric's noise are learned.
    pub baseline_s: i64,
    /// The latest a warm-up ends, in seconds from the job's first sample.
    /// Past `warmup_s` it ends only once the job's level of its nodes' own
    /// work has held within `transition_change` for `baseline_s`: a
    /// start-up still under way would teach each node its place in the
    /// start-up. A job never that steady is learned at this age.
    pub warmup_max_s: i64,
    /// Denoising: each value is the median of a node's last this many samples
    /// of the metric (one inflated or dropped sample never makes a call).
    pub denoise_samples: usize,
    /// A node is a candidate when its combined distance from its peers, in
    /// robust standard deviations, reaches this.
    pub threshold: f64,
    /// Per metric, a distance below this many robust deviations is noise and
    /// adds nothing to the combined distance.
    pub evidence_z: f64,
    /// The smallest spread a metric is given, as a fraction of the job's
    /// level of it: peers that agree to the last digit do not make 1% a fault.
    pub min_spread: f64,
    /// Values are divided by the job's level plus this fraction of the
    /// metric's warm-up level, so metrics that sit at 0 (`pfc_pause`, `cnp`)
    /// compare without dividing by zero.
    pub floor_fraction: f64,
    /// The candidate is called only if no other node is at least this
    /// fraction as far out: several nodes moving together are a group (a
    /// pipeline stage) or a shared phase, not one faulty machine.
    pub uniqueness: f64,
    /// Continuity: consecutive steps a node must stay the candidate before
    /// the call. 18 steps (3 minutes at 10 s): the job's own passing shapes
    /// (a loader stall on one node, an exporter restart, a congestion burst)
    /// rarely last that long, and NCCL's 10-30 minute timeout leaves the time.
    pub continuity_steps: u32,
    /// A shared phase change: the job's level of a primary metric moved by
    /// more than this (natural log, 0.25 is about 28%) since the last step.
    /// Nodes whose clocks lag cross such an edge a sample late, so ...
    pub transition_change: f64,
    /// ... for this many steps after one, no candidate counts, for or
    /// against continuity.
    pub settle_steps: u32,
    /// A node that sits where the whole job was within this many seconds
    /// (it is late into or out of a shared phase: rank 0 still writing the
    /// checkpoint, a node that left the evaluation last) is lagging the job,
    /// not failing: it is no candidate while that holds.
    pub phase_lag_s: i64,
    /// A falling metric gives no evidence while the job's level of it is
    /// below this fraction of its warm-up level: the whole job is in a
    /// checkpoint, an evaluation or a stall, and who is lowest says nothing.
    pub shared_phase_fraction: f64,
    /// Jobs with at most this many nodes get only the drastic-drop rule: with
    /// 2 or 3 nodes "the odd one out" is not defined by peers.
    pub small_job_max_nodes: usize,
    /// Small jobs: a node is called when a primary falling metric, relative to its
    /// own warm-up level, sits below this fraction of every peer's ...
    pub small_job_drop: f64,
    /// ... for this many seconds without a break.
    pub small_job_sustain_s: i64,
    /// Two tiers of action. A call of a job of 4+ nodes drains only when its
    /// combined distance reaches this (well above `threshold`), and its own
    /// work's metrics alone reach `threshold`; below it the call is reported
    /// (`lemon report`, the hooks, the JSON) and no node is drained.
    pub drain_score: f64,
    /// A drain is never the first word: a call of the drain tier is first
    /// reported, and the node is drained only once it has stayed at the
    /// drain bar for this many seconds since (0: at once). A role's
    /// episode (rank 0 writing a checkpoint while its peers wait) ends; a
    /// broken machine does not, and NCCL's own timeout is 10 to 30 minutes.
    /// A node scraped less often than every `interval_s` holds it × √(its
    /// interval ÷ `interval_s`), so that a drain rests on more fresh samples.
    pub drain_after_s: i64,
    /// A node whose `stopped_metric` fell below this fraction of its peers'
    /// level (in a job of 2 or 3 nodes: of its closest peer's, each against
    /// its own warm-up) has stopped (its ranks exited, its GPUs are gone)
    /// while the rest wait for it in the collective. A user's
    /// crash on one rank looks the same as a dead GPU, so the metrics alone
    /// never drain it: the node's XID gauge (`xid_metric`) decides where it
    /// is exported, and otherwise the call is reported and the node's own
    /// checks (XID, ECC, the epilog's) judge its hardware. 0: drained like
    /// any other call.
    pub stopped_fraction: f64,
    /// The metric that says a node stopped.
    pub stopped_metric: String,
    /// The metric that says one of a node's GPUs stopped: its least busy
    /// GPU's utilisation. A rank stuck in the user's barrier idles its GPU
    /// while the node's other GPUs spin in the collective, as a dead GPU's
    /// would; such a node is judged as a stopped node (`stopped_fraction`).
    /// "": not read.
    pub stopped_gpu_metric: String,
    /// The metric that says a node's GPUs spin without work: their memory
    /// traffic. A rank blocked in a collective or a lock keeps its GPUs'
    /// utilisation at 100% (NCCL's kernel waits on the GPU) while they
    /// move no memory. Only a node that does so while its peers work is
    /// flagged: one hung rank of a job whose nodes do not wait for each
    /// other (an inference sweep's replica, a deadlocked worker), or a
    /// broken link. Below `stopped_fraction` of its peers, it is reported
    /// and never drained while its fresh XID gauge names no hardware XID:
    /// the user's code may hang there, and a NIC's fault shows in no XID.
    /// Without a gauge the metrics judge it as before. "": not read.
    pub spinning_metric: String,
    /// The exporter's gauge of each node's last XID (DCGM's
    /// `DCGM_FI_DEV_XID_ERRORS`). A stopped node whose gauge turned to one
    /// of `hardware_xids` during the job may be drained; one whose fresh
    /// gauge shows no such XID stopped by its job's own doing (an
    /// exception, a kill) and is not called. Empty: not read.
    pub xid_metric: String,
    /// The XIDs that say the GPU itself failed: those the node's XID check
    /// takes the node out for (NVIDIA's catalog: reset the GPU, reboot,
    /// repair). An application's XIDs (13, 31, 43, 45) are not among them.
    pub hardware_xids: Vec<u32>,
    /// Seconds a stopped node with no fresh XID gauge to say why must stay
    /// stopped before it is reported (never fewer than `continuity_steps`).
    /// Rank 0 writing a checkpoint alone while its peers wait at a barrier
    /// looks like a dead GPU for minutes; a hung collective waits for
    /// NCCL's watchdog, 10 minutes by default, so a dead GPU is still
    /// reported while its job hangs.
    pub unexplained_stop_s: i64,
    /// Small jobs: unset (the default), their calls are reported and never
    /// drained: with two or three machines, the one that stands apart is as
    /// often the one waiting for a broken peer. Set, a call drains when the
    /// node sits at least this many times below every peer (the call itself
    /// needs `1 / small_job_drop`).
    pub small_job_drain_ratio: Option<f64>,
    /// Metric priority, most sensitive first: these weigh fully in the
    /// combined distance. A fall is the fault sign unless listed in `rising`.
    pub primary: Vec<String>,
    /// Host metrics that roles by design move (a rank 0 that logs, a loader):
    /// they weigh `secondary_weight`, as do metrics not named anywhere.
    pub secondary: Vec<String>,
    /// Weight of secondary and unknown metrics in the combined distance.
    pub secondary_weight: f64,
    /// Metrics whose rise is the fault sign (congestion counters).
    pub rising: Vec<String>,
    /// Metrics the shared network moves as well as the node (other tenants'
    /// traffic, incast): evidence from these alone must hold
    /// `fabric_only_steps` before a call, and never drains. `pcie_tx` is one:
    /// GPUDirect RDMA carries the network's traffic over the GPU's PCIe
    /// link, so congestion lowers it; a link that trained down is the
    /// `pcie` check's finding, which drains on its own.
    pub fabric: Vec<String>,
    /// Consecutive steps a node must stand apart on `fabric` metrics alone
    /// (no fall in its own GPU or NVLink work) before it is called; never
    /// fewer than `continuity_steps`. Six minutes by default: longer than
    /// another tenant's bursts, while a failing link does not let up.
    pub fabric_only_steps: u32,
    /// `lemon watch --live`: `embedded` (the node sampler's samples in
    /// lemon.db) or `prometheus` (needs `prometheus_url`).
    pub source: WatchSourceKind,
    /// The Prometheus server, e.g. `http://prometheus.example:9090`.
    pub prometheus_url: Option<String>,
    /// `[watch.prometheus]`: the metric and host-label mapping.
    pub prometheus: PrometheusSettings,
    /// `[watch.service]`: poll interval, look-back, requeue.
    pub service: WatchService,
}

/// The XIDs of NVIDIA's catalog that the node's XID check takes a node out
/// for (severity `drain` or `down`): the GPU itself failed. The healthcheck
/// crate's catalog owns the classification; its test
/// `the_watchs_hardware_xids_are_the_catalogs_drain_and_down_xids` keeps this
/// list equal to it (the watch cannot import the node side).
pub const HARDWARE_XIDS: &[u32] = &[
    46, 48, 54, 61, 62, 63, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 144, 145, 146, 147,
    148, 149, 150, 151, 155, 156, 158,
];

impl Default for WatchSettings {
    fn default() -> Self {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        Self {
            interval_s: 10,
            stale_s: 25,
            forget_after_s: 900,
            warmup_s: 300,
            baseline_s: 120,
            warmup_max_s: 900,
            denoise_samples: 3,
            threshold: 6.0,
            evidence_z: 2.0,
            min_spread: 0.02,
            floor_fraction: 0.05,
            uniqueness: 0.5,
            continuity_steps: 18,
            transition_change: 0.25,
            settle_steps: 2,
            phase_lag_s: 120,
            shared_phase_fraction: 0.5,
            small_job_max_nodes: 3,
            small_job_drop: 0.5,
            small_job_sustain_s: 180,
            drain_score: 12.0,
            drain_after_s: 180,
            stopped_fraction: 0.1,
            stopped_metric: "gpu_util".to_string(),
            stopped_gpu_metric: "gpu_util_min".to_string(),
            spinning_metric: "gpu_mem_util".to_string(),
            xid_metric: "DCGM_FI_DEV_XID_ERRORS".to_string(),
            hardware_xids: HARDWARE_XIDS.to_vec(),
            unexplained_stop_s: 300,
            small_job_drain_ratio: None,
            primary: names(&[
                "gpu_util_min",
                "gpu_util",
                "gpu_power",
                "gpu_sm_clock",
                "gpu_mem_util",
                "gpu_mem_used",
                "nvlink_tx",
                "pcie_tx",
                "ib_tx",
                "ib_rx",
                "pfc_pause",
                "cnp",
            ]),
            secondary: names(&["cpu_util", "mem_used", "disk_io"]),
            secondary_weight: 0.5,
            rising: names(&["pfc_pause", "cnp"]),
            fabric: names(&["pcie_tx", "ib_tx", "ib_rx", "pfc_pause", "cnp"]),
            fabric_only_steps: 36,
            source: WatchSourceKind::default(),
            prometheus_url: None,
            prometheus: PrometheusSettings::default(),
            service: WatchService::default(),
        }
    }
}
