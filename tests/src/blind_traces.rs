//! A fourth, held-out generator of training-job metric traces (issue 45).
//!
//! Written from a brief of how real distributed training jobs behave, by an
//! engineer who has read neither `lemon watch`'s detector nor the other three
//! generators, so that its score is a measure the detector was not fitted to.
//! [`generate`] writes a `lemon watch --replay` file and returns the truth;
//! [`score`] turns the detector's calls into tables.
//!
//! # The job model
//! A job runs on 2 to 256 nodes of 8 GPUs (H100 or A100) for 30-90 minutes,
//! scraped every 10, 15 or 30 s per job. Every step is synchronous: the job's
//! throughput is set by its slowest node, and a node's compute duty is
//! `job throughput / own capacity`; the rest of its time is spent waiting in
//! NCCL, where `gpu_util` stays high (NCCL kernels spin) while `gpu_power`,
//! `gpu_mem_util` and SM activity fall. A job starts with 1-4 min of loading
//! (CPU and disk busy, GPUs idle) and a 1-5 min ramp.
//!
//! # Confounders (drawn per job, each in most jobs; see [`CONFOUNDERS`])
//! * `checkpoint`: every 8-25 min for 30-150 s. Sharded: every node's GPUs
//!   idle, PCIe busy with device-to-host copies, disk writes 0.8-2.5 GB/s.
//!   Rank-0 only: rank 0 writes; the others wait in a barrier (either NCCL,
//!   util stays high at low power, or gloo, util near 0).
//! * `eval_phase`: every 12-30 min for 1-4 min: forward only, util ~75%,
//!   power ~55% of training, no gradient all-reduce on the fabric.
//! * `dataloader_stall`: 2-5 stalls of 15-90 s; half are job-wide (storage),
//!   half start on one node's loader and make that node the straggler.
//! * `warmup_ramp`: the loading phase and a ramp of GPU load.
//! * `lr_batch_change`: at one moment the per-step load changes by ±4-12%.
//! * `pipeline_stages`: 2-4 pipeline stages of unequal node counts, each at
//!   its own levels (compute 0.8-1.05, fabric 0.6-1.3, NVLink, PCIe).
//! * `moe_imbalance`: each node's expert load swings ±5-20% with a 4-15 min
//!   period and its own phase, so the hottest node moves.
//! * `rank0_extra`: rank 0 (and a pipeline's last-stage node) has +10-30%
//!   CPU, +50-110 GiB host memory, log and upload writes, slightly more power.
//! * `node_offsets`: 1-3 nodes are 2-5% slower, ±3-7% power, +3-8 °C all life.
//! * `partial_metrics`: 10-40% of nodes lack one group of metrics.
//! * `unknown_metrics`: DCGM names, temperatures, NIC error counters.
//! * `exporter_restart`: 1-2 nodes lose 15-60 s, then rate metrics read 0.
//! * `exporter_gap`: 1-2 nodes missing for 1-5 min.
//! * `missing_rows`: 0.3-2% of rows dropped at random.
//! * `clock_skew`: each node's clock off by up to ±1-5 s.
//! * `pfc_bursts`: 0.5-3% of samples carry a 20-200x pfc_pause/cnp spike.
//! * `tenant_congestion`: the job's nodes under one leaf switch see 3-15 min
//!   of another tenant's traffic: they run 3-12% slower (so the job does),
//!   pfc/cnp in thousands.
//! * `rack_throttle`: a hot aisle throttles one or two racks (4 nodes each)
//!   for 5-20 min: SM clock -8-18%, temperature +8-15 °C.
//!
//! # Faults (about 40% of jobs, exactly one faulty node, onset after 10 min)
//! Minder's Table 2 mix, normalised, for 85% of faults; 15% subtle.
//! * `ecc_error`: the process on the node dies (node idle) or one GPU stops
//!   (`gpu_util_min` 0); the rest hang in NCCL (util ~100, power low, fabric
//!   silent) for a 5-25 min timeout, then the job exits or restarts without
//!   the node after 1-3 min of reloading.
//! * `pcie_downgrade`: one GPU's link trains narrower: the node's `pcie_tx`
//!   falls to 60-85%, its least busy GPU waits on copies (`gpu_util_min`
//!   12-16 points lower), and its GPUDirect traffic slows the job 10-35%.
//! * `nic_dropout`: one HCA goes: 70% NCCL hangs then times out (the node's
//!   fabric goes first); 30% traffic moves over NVLink/PCIe to the other rails
//!   and the job runs 15-25% slower.
//! * `gpu_card_drop`: XID 79: the node's GPU rows vanish or it reports 7 GPUs
//!   (power one GPU lower), and the job hangs until its timeout.
//! * `nvlink_error`: the node's NVLink traffic stops; the job hangs (80%) or
//!   crawls at 30-50% over PCIe.
//! * `aoc_cable_error`: a flapping cable: episodes of 30-120 s with the node's
//!   fabric at 50-80%, pfc/cnp bursts and NIC errors; the job slows with it.
//! * Subtle (8-25% slower, no halt): `gpu_thermal_throttle` (clock down, hot),
//!   `slow_host` (CPU pegged, GPUs under-fed), `degraded_link` (one rail slow).

use std::io::{self, Write};

/// Every confounder a job may carry, by the name in [`IndependentJob::confounders`].
pub const CONFOUNDERS: [&str; 18] = [
    "checkpoint",
    "eval_phase",
    "dataloader_stall",
    "warmup_ramp",
    "lr_batch_change",
    "pipeline_stages",
    "moe_imbalance",
    "rank0_extra",
    "node_offsets",
    "partial_metrics",
    "unknown_metrics",
    "exporter_restart",
    "exporter_gap",
    "missing_rows",
    "clock_skew",
    "pfc_bursts",
    "tenant_congestion",
    "rack_throttle",
];

/// The chance a job carries each confounder of [`CONFOUNDERS`], in order.
const CONFOUNDER_P: [f64; 18] = [
    0.85, 0.7, 0.7, 0.9, 0.6, 0.6, 0.55, 0.75, 0.75, 0.65, 0.85, 0.6, 0.6, 0.7, 0.8, 0.7, 0.6, 0.6,
];

/// Minder's Table 2 hardware faults with their shares (percent).
const FAULT_MIX: [(&str, f64); 6] = [
    ("ecc_error", 38.9),
    ("pcie_downgrade", 6.6),
    ("nic_dropout", 5.7),
    ("gpu_card_drop", 2.0),
    ("nvlink_error", 1.7),
    ("aoc_cable_error", 1.1),
];

/// The subtle faults: throughput 8-25% lower, no halt.
const SUBTLE_KINDS: [&str; 3] = ["gpu_thermal_throttle", "slow_host", "degraded_link"];

/// Job sizes in nodes and their weights: mostly small jobs, a few large.
const SIZES: [(usize, f64); 15] = [
    (2, 8.0),
    (3, 6.0),
    (4, 8.0),
    (5, 3.0),
    (6, 4.0),
    (8, 8.0),
    (12, 5.0),
    (16, 6.0),
    (24, 4.0),
    (32, 4.0),
    (48, 2.0),
    (64, 2.5),
    (96, 1.0),
    (128, 0.8),
    (256, 0.3),
];

/// The generator's knobs.
#[derive(Clone, Debug)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    /// Shortest and longest job, minutes (a fault's onset needs more than 15).
    pub min_minutes: u32,
    pub max_minutes: u32,
    /// Jobs larger than this are cut to it (small seeds for debug-mode tests).
    pub max_nodes: usize,
    /// Share of jobs with one faulty node, and share of those faults that are subtle.
    pub fault_share: f64,
    pub subtle_share: f64,
}

impl IndependentSpec {
    /// The full size: 38 jobs of 30-90 min, up to 256 nodes, 1-4 M rows (2.4 M on average).
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            fault_share: 0.4,
            subtle_share: 0.15,
        }
    }
}

/// The faulty node of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

/// One job's truth.
#[derive(Clone, Debug, PartialEq)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

impl IndependentJob {
    pub fn has(&self, confounder: &str) -> bool {
        self.confounders.iter().any(|c| c == confounder)
    }
}

/// SplitMix64: small, fast and stable across platforms and releases.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
    fn weighted(&mut self, weights: &[f64]) -> usize {
        let mut x = self.unit() * weights.iter().sum::<f64>();
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

/// Deterministic per-(a, b) value in [0, 1): per-node jitter without state.
fn hash01(a: u64, b: u64) -> f64 {
    Rng::new(a, b).unit()
}

mod model;
mod scoring;

pub use scoring::{score, Call, Score, Tally};

/// The truth of a spec without rendering its rows (cheap).
pub fn truth(spec: &IndependentSpec) -> Vec<IndependentJob> {
    model::plan(spec).into_iter().map(|p| p.truth).collect()
}

/// Writes the whole replay file (header + globally time-sorted rows); returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let plans = model::plan(spec);
    let mut rows = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        model::render(p, i, &mut rows);
    }
    // Stable: rows of one second keep their generation order, so bytes repeat.
    rows.sort_by_key(|r| r.time);
    write_rows(&plans, &rows, out)?;
    Ok(plans.into_iter().map(|p| p.truth).collect())
}

fn write_rows(
    plans: &[model::JobPlan],
    rows: &[model::Row],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for r in rows {
        let plan = &plans[r.job as usize];
        push_int(&mut buf, r.time);
        buf.push(b',');
        buf.extend_from_slice(plan.truth.job.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(plan.nodes[r.node as usize].name.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(model::metric_name(r.metric).as_bytes());
        buf.push(b',');
        push_value(&mut buf, r.value);
        buf.push(b'\n');
        if buf.len() > (1 << 20) - 256 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

fn push_int(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Two decimals below a million, whole numbers above (byte rates).
fn push_value(buf: &mut Vec<u8>, v: f64) {
    let v = if v.is_finite() { v } else { 0.0 };
    if v.abs() >= 1e6 {
        push_int(buf, v.round() as i64);
        return;
    }
    let cents = (v * 100.0).round() as i64;
    if cents < 0 {
        buf.push(b'-');
    }
    let c = cents.unsigned_abs();
    push_int(buf, (c / 100) as i64);
    buf.push(b'.');
    buf.push(b'0' + (c / 10 % 10) as u8);
    buf.push(b'0' + (c % 10) as u8);
}

#[cfg(test)]
mod tests;
