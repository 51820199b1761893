//! `[watch]` as a service (`lemon watch --live`): where samples come from,
//! how often, and what a detection does. `[watch.prometheus]` maps a site's
//! dcgm-exporter and node_exporter metrics to the detector's vocabulary.

use serde::{Deserialize, Serialize};

/// Where `lemon watch --live` reads running jobs' samples.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WatchSourceKind {
    /// The node sampler's samples in lemon.db (needs nothing but Lemonade).
    #[default]
    Embedded,
    /// A Prometheus server that scrapes dcgm-exporter and node_exporter.
    Prometheus,
}

/// `[watch.prometheus]`: the HTTP API and the metric mapping.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusSettings {
    /// Deadline of one HTTP request, in seconds.
    pub timeout_s: f64,
    /// The newest this many seconds are not asked for: a scrape in flight
    /// would show some nodes and not others, and a missing node is no fault.
    pub delay_s: i64,
    /// Window of `rate()` for counters, in seconds (at least 4 scrapes).
    pub rate_window_s: i64,
    /// Label values are host names as exporters see them (`gpu001:9400`,
    /// `gpu001.cluster.example:9100`): cut at the first `:` (the port) ...
    pub strip_port: bool,
    /// ... and at the first `.` (the domain), to give the Slurm node name.
    pub strip_domain: bool,
    /// One entry per vocabulary metric (see [`PrometheusMetric`]).
    pub metrics: Vec<PrometheusMetric>,
}

/// `[[watch.prometheus.metrics]]`: one vocabulary metric from one selector.
/// The query is `AGG by (LABEL) (SELECTOR{LABEL=~"nodes"})`, or with
/// `rate(...[rate_window_s])` around the selector for counters.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PrometheusMetric {
    /// The detector's name (`gpu_util`, `ib_tx`, ...).
    pub name: String,
    /// A metric selector: a name, optionally with label matchers
    /// (`node_cpu_seconds_total{mode!="idle"}`). Nothing else: the node
    /// matcher is added inside its braces.
    pub selector: String,
    /// The label that names the host (`Hostname` for dcgm-exporter, `instance` for node_exporter).
    pub label: String,
    /// How the series of one node (its GPUs, HCAs, CPUs) become one value:
    /// `avg`, `min`, `max` or `sum`.
    #[serde(default = "default_aggregate")]
    pub aggregate: String,
    /// A counter: its per-second rate is the value.
    #[serde(default)]
    pub rate: bool,
}

fn default_aggregate() -> String {
    "avg".into()
}

impl Default for PrometheusSettings {
    fn default() -> Self {
        let m = |name: &str, selector: &str, label: &str, aggregate: &str, rate: bool| {
            PrometheusMetric {
                name: name.into(),
                selector: selector.into(),
                label: label.into(),
                aggregate: aggregate.into(),
                rate,
            }
        };
        let (dcgm, node) = ("Hostname", "instance");
        Self {
            timeout_s: 10.0,
            delay_s: 15,
            rate_window_s: 60,
            strip_port: true,
            strip_domain: true,
            metrics: vec![
                m("gpu_util", "DCGM_FI_DEV_GPU_UTIL", dcgm, "avg", false),
                m("gpu_util_min", "DCGM_FI_DEV_GPU_UTIL", dcgm, "min", false),
                m("gpu_power", "DCGM_FI_DEV_POWER_USAGE", dcgm, "avg", false),
                m("gpu_sm_clock", "DCGM_FI_DEV_SM_CLOCK", dcgm, "avg", false),
                m(
                    "gpu_mem_util",
                    "DCGM_FI_DEV_MEM_COPY_UTIL",
                    dcgm,
                    "avg",
                    false,
                ),
                m("gpu_mem_used", "DCGM_FI_DEV_FB_USED", dcgm, "sum", false),
                // Whole XID numbers, never averaged (`[watch] xid_metric`).
                m(
                    "DCGM_FI_DEV_XID_ERRORS",
                    "DCGM_FI_DEV_XID_ERRORS",
                    dcgm,
                    "max",
                    false,
                ),
                m("pcie_tx", "DCGM_FI_PROF_PCIE_TX_BYTES", dcgm, "sum", false),
                m(
                    "nvlink_tx",
                    "DCGM_FI_PROF_NVLINK_TX_BYTES",
                    dcgm,
                    "sum",
                    false,
                ),
                m(
                    "ib_tx",
                    "node_infiniband_port_data_transmitted_bytes_total",
                    node,
                    "sum",
                    true,
                ),
                m(
                    "ib_rx",
                    "node_infiniband_port_data_received_bytes_total",
                    node,
                    "sum",
                    true,
                ),
                m(
                    "cpu_util",
                    "node_cpu_seconds_total{mode!=\"idle\"}",
                    node,
                    "sum",
                    true,
                ),
                m(
                    "disk_io",
                    "node_disk_io_time_seconds_total",
                    node,
                    "sum",
                    true,
                ),
            ],
        }
    }
}

/// `[watch.actions]`-like settings of the live service, kept apart from the
/// detector's thresholds.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WatchService {
    /// Seconds between polls.
    pub poll_s: u64,
    /// How far back the first poll of a job reads, in seconds: enough for
    /// its warm-up, so a restarted service does not start blind.
    pub lookback_s: i64,
    /// Jobs on fewer nodes are not watched (a single node has no peers).
    pub min_nodes: usize,
    /// `scontrol requeue` the job of a drained node, so that it restarts
    /// without it. Off: many jobs cannot be requeued safely.
    pub requeue: bool,
    /// A call whose newest sample (the one that closed its step) is older
    /// than this, in seconds, when the service would act on it is recorded
    /// but never acted on: samples that arrive late (a node's export held
    /// back, an ingest that caught up) describe a node as it was, and the
    /// fault may be gone, the node already repaired, the job over.
    pub max_sample_age_s: i64,
    /// The embedded source: how far, in seconds, a node whose chunks lag
    /// may hold back its job's newer samples of the other nodes before
    /// they are read without it (nodes flush and are ingested at their own
    /// moments; a sample read past is never read again).
    pub embedded_wait_s: i64,
    /// Drain the node of a drain-tier call. Off (the default), a drain-tier
    /// call is recorded and told to the hooks like a report-tier one, and
    /// no node is drained: on traces written by an engineer who never saw
    /// the detector, its drain tier drained healthy jobs (the watch chapter
    /// has the figures). Turn it on once `lemon report`'s outliers on the
    /// site's own jobs have been checked.
    pub drain: bool,
}

impl Default for WatchService {
    fn default() -> Self {
        Self {
            poll_s: 30,
            lookback_s: 900,
            min_nodes: 2,
            requeue: false,
            max_sample_age_s: 600,
            embedded_wait_s: 120,
            drain: false,
        }
    }
}
