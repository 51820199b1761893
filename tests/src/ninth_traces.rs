//! A ninth generator of training-job metric traces (issue 45), held out from
//! the detector's tuning: written from a brief and from how real DDP, FSDP,
//! Megatron and MoE jobs behave on a mixed, busy fleet, without reading the
//! detector or the other generators.
//!
//! # The job
//!
//! Jobs of 2 to 256 nodes (10% 2-node, 8% 3-node, 27% 4-8, 31% 9-32, 18%
//! 33-96, 6% 97-256), 30-90 minutes, scraped every 10/15/30/60 s (jobs over
//! 64 nodes at 15/30/60 s, 90% of them at 30 or 60 s). Every node runs the same synchronous step: a compute
//! phase (share 0.6-0.9) and a communication phase, period 2-40 s (micro-step
//! times gradient-accumulation), 20% of jobs with 18-40 s steps. A scrape
//! samples one instant, so long steps alias into slow beats and one node can
//! be caught mid-communication while its peer computes. The slowest node sets
//! the pace; the others wait inside NCCL: `gpu_util` stays high while SM
//! activity, power and traffic fall. A crashed rank hangs the job (everyone
//! spins at ~100% util at ~200 W a GPU) until the timeout (3-15 min); then
//! the job exits (40%), restarts without the node (30%) or with a spare (30%).
//!
//! # Confounders (drawn per job; `IndependentJob::confounders` names them)
//!
//! | name | share of jobs | shape | one node apart? |
//! |---|---:|---|---|
//! | checkpoint | 85% | every 8-25 min; sharded (all nodes idle 30-180 s, disk and D2H PCIe), rank 0 only (rank 0 writes 20-120 s, peers spin in the barrier), or async (10 s dip, background writes) | rank-0 mode: rank 0 for 20-120 s each time (35% of such jobs) |
//! | eval | 70% | every 15-40 min, 1-5 min: util ×0.6-0.8, IB ×0.08 | no (rank 0 / last stage CPU +15) |
//! | loader_stall | 70% | 1-5 stalls of 10-90 s | half the stalls: one starved node idles while peers spin |
//! | warmup_ramp | 90% | throughput 55%→100% over 2-10 min after each init | no |
//! | lr_batch_change | 55% | 1-2 batch-size steps: step ×1.3-2, IB ÷√ | no |
//! | step_beats | 100% | the step structure above (`long_steps`: 20%) | each scrape, by aliasing |
//! | pipeline_stages | ~55% | Megatron, 2/3/4/8 stages of uneven node counts; stage work 0.88-1, bubbles, first stage PCIe ×1.6, last stage SM ×1.04, first/last IB ×0.85, stages shifted in step phase | a 1-node stage is one node apart all job long |
//! | moe_imbalance | 55% | a hot node every 2-8 min: work +6-30%, IB ×(1+2m); peers wait | yes, moving, for the whole job |
//! | rank0_extra | 80% | rank 0 CPU +8-25, memory +30-90 GiB, work ×1-1.02; half: last node CPU +4-15 | yes, all job long |
//! | role_switch | 60% | 1-2 windows of 3-12 min: one node CPU +30, IB tx +2.5 GB/s, disk +0.4 GB/s, work ×1.01-1.04 | yes, for the window |
//! | loader_host | 55% | 1 node in 32 serves data: CPU +25-45, IB tx +2-6 GB/s, disk ×3 | yes, all job long |
//! | context_parallel | 55% | groups of 2-4 nodes with IB ×0.8-1.5 | a group, all job long |
//! | hetero_hw | 60% | 5-15% of nodes: power cap 500/600 W and clock 1755/1830 MHz (work ×1.02-1.07), or 4 GPUs (half the sums), or 2/4 HCAs (IB ×0.66-0.81) | yes, all job long |
//! | slow_node_lifelong | 70% | 1-3 nodes work ×1.02-1.06, power ×0.92-1.10, +3-9 °C | yes, all job long; the slowest sets the pace |
//! | metric_subset | 70% | 30% of nodes lack PFC/CNP, NVLink, util_min/mem_util, or PCIe/disk | its rows, all job long |
//! | unknown_metrics | 85% | `gpu_temp`, `nic_errors`, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`, `DCGM_FI_DEV_XID_ERRORS`, `node_load1` | no |
//! | exporter_restart | 60% | 1-3 nodes (+1 per 64): one all-zero scrape, then 20-90 s of nothing | yes, one scrape |
//! | exporter_gap | 70% | 1-3 nodes (+1 per 64) missing 1-5 min | yes, 1-5 min |
//! | missing_rows | 80% | 0.3-2% of rows lost at random | no |
//! | clock_skew | 80% | per-node timestamp offsets of -5..+5 s | no (phases arrive shifted) |
//! | pfc_bursts | 75% | per scrape 0.5-3%: PFC +100-20k/s, CNP +100-30k/s | yes, one scrape |
//! | leaf_congestion | 55% | another tenant's all-to-all on one leaf (16 fleet slots), 2-20 min: PFC 2-30k/s, CNP 5-50k/s, IB ×0.6-1.15, work +3-15% | the leaf's nodes |
//! | rack_throttle | 55% | hot aisle on one rack (4 slots), 5-20 min: clock ×0.8-0.92, +8 °C | the rack's nodes |
//! | rack_power_cap | 55% | rack power capped ×0.7-0.85 for 3-15 min | the rack's nodes |
//! | fs_slowdown | 55% | shared filesystem slow: each node for 1-4 min, starts staggered over 1-5 min; disk halves, util ×0.7-0.9 | each node in turn |
//! | firmware_rollout | 55% | 1-2 nodes from mid-job: power reads ×0.9-1.1, clock -105/-60/+45 MHz | yes, to the end |
//! | long_init | 60% | compile/NCCL init 1-15 min, nodes join over its first 60% | nodes join apart |
//! | job_restart | 55% of jobs without a crash fault | an application crash: 60% one node's ranks exit first and the rest hang 2-10 min; then 20-60 s idle, 1-4 min init, warm-up | the exiting node, for the hang |
//! | early_end | 55% | the job is killed: nodes stop 0-20 s apart (otherwise a 30-120 s idle tail) | no |
//! | scrape_mix | 40% | 12% of nodes scrape at another interval | no |
//! | elastic_shrink / elastic_replace | after crash faults | the job continues without the node, or with a spare | - |
//!
//! # Faults (about 40% of jobs, one node, onset after 10 min and after init)
//!
//! 85% loud, in Minder's Table 2 proportions; 15% subtle (an 8-25% drop).
//! The rest of the job feels a fault through the pace and through hangs.
//!
//! * `ecc_error`: 50% uncorrectable (the node's ranks die: util 0, the job
//!   hangs); 30% a 1-3 min row-remap storm (`gpu_util_min` 15-50 lower, work
//!   +4-15%) that recovers, half relapsing; 20% a storm that ends in the crash.
//! * `pcie_downgrade`: x8 link, PCIe and IB halved-ish, work +10-35%; 20% retrain.
//! * `nic_dropout`: 60% the HCA is gone (IB ~0, the job stalls, ranks abort
//!   after 30-120 s); 40% a flapping link, down 20-60 s of every 90-300 s.
//! * `gpu_card_drop`: XID 79, GPU metrics vanish or read 0, the job hangs.
//! * `nvlink_error`: NVLink ×0.1-0.4, PCIe ×2-3, work +36-54%; 40% crash later.
//! * `aoc_cable_error`: half-speed renegotiation or a marginal cable (IB
//!   ×0.5-0.8, errors), work +10-25%; 30% recover.
//! * `subtle_gpu_throttle` (clock and power down), `subtle_slow_host` (CPU
//!   up, util down: a failing DIMM), `subtle_link_degraded` (IB down, CNP up).

mod design;
mod draw;
mod emit;
mod faults;
mod rng;
mod sample;
mod score;

use std::io::{self, Write};

pub use score::{score, Score, Tally, TierPair};

use design::JobDesign;
use draw::{draw_job, Fleet};
use rng::Rng;
use sample::{Ctx, Exporter};

/// Every metric a node may report; the first 14 are the detector's
/// vocabulary, the rest are exporters' own.
pub(crate) const METRICS: [&str; 19] = [
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
    "nic_errors",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_XID_ERRORS",
    "node_load1",
];

/// What to generate. `new` gives the full size (~38 jobs, 2-4 M rows);
/// tests shrink `jobs`, `max_nodes` and the durations.
#[derive(Clone, Debug)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    pub min_minutes: i64,
    pub max_minutes: i64,
    pub max_nodes: usize,
    /// Share of jobs with one faulty node.
    pub fault_rate: f64,
    /// Jobs start within this many seconds of each other.
    pub start_spread_s: i64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 38,
            min_minutes: 30,
            max_minutes: 90,
            max_nodes: 256,
            fault_rate: 0.4,
            start_spread_s: 2400,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndependentJob {
    pub job: String,
    /// Every node that reported under the job, spares included.
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// One call of a detector: it names a node of a job at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    pub drain: bool,
}

/// One sample before it is written: kept small, as millions are sorted.
struct Row {
    t: i64,
    job: u32,
    node: u32,
    metric: u8,
    value: f64,
}

fn plan(spec: &IndependentSpec) -> Vec<JobDesign> {
    let mut fleet = Fleet {
        cursor: (spec.seed % 997) as usize * 3,
    };
    (0..spec.jobs)
        .map(|j| draw_job(spec, j, &mut fleet))
        .collect()
}

/// Writes the whole replay file (header + globally time-sorted rows);
/// returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let designs = plan(spec);
    let mut rows = Vec::new();
    for (j, job) in designs.iter().enumerate() {
        job_rows(spec.seed, j, job, &mut rows);
    }
    let order = time_order(&rows);
    write_rows(&designs, &rows, &order, out)?;
    Ok(designs.iter().map(truth).collect())
}

fn job_rows(seed: u64, j: usize, job: &JobDesign, rows: &mut Vec<Row>) {
    let ctx = Ctx::new(job);
    for (i, node) in job.nodes.iter().enumerate() {
        let mut rng = Rng::new(seed ^ ((j as u64) << 40) ^ ((i as u64) << 20) ^ 0x5EED);
        let stop = node.until.min(job.life.end);
        let mut t = node.from + node.offset;
        while t < stop {
            let here = t;
            t += node.interval;
            let up = sample::exporter(job, i, here);
            if up == Exporter::Gap {
                continue;
            }
            let Some(mut s) = sample::state(job, &ctx, i, here, &mut rng) else {
                continue;
            };
            s.zero = up == Exporter::Zero;
            let values = emit::values(node, &s, here, &mut rng);
            for (m, value) in values.iter().enumerate() {
                if !emit::reported(node, &s, m) || rng.chance(job.drop_rate) {
                    continue;
                }
                rows.push(Row {
                    t: here + node.skew,
                    job: j as u32,
                    node: i as u32,
                    metric: m as u8,
                    value: *value,
                });
            }
        }
    }
}

/// The rows' indices in time order. Rows are made job by job, node by
/// node, tick by tick, metric by metric, so a stable counting sort on time
/// alone orders them by (time, job, node, metric), in linear time.
fn time_order(rows: &[Row]) -> Vec<u32> {
    let Some(lo) = rows.iter().map(|r| r.t).min() else {
        return Vec::new();
    };
    let hi = rows.iter().map(|r| r.t).max().unwrap_or(lo);
    let mut starts = vec![0u32; (hi - lo + 2) as usize];
    for r in rows {
        starts[(r.t - lo + 1) as usize] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut order = vec![0u32; rows.len()];
    for (k, r) in rows.iter().enumerate() {
        let slot = &mut starts[(r.t - lo) as usize];
        order[*slot as usize] = k as u32;
        *slot += 1;
    }
    order
}

fn write_rows(
    designs: &[JobDesign],
    rows: &[Row],
    order: &[u32],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for r in order.iter().map(|&k| &rows[k as usize]) {
        let job = &designs[r.job as usize];
        emit::push_int(&mut buf, r.t);
        buf.push(b',');
        buf.extend_from_slice(job.id.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(job.nodes[r.node as usize].name.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(METRICS[r.metric as usize].as_bytes());
        buf.push(b',');
        emit::push_value(&mut buf, r.value);
        buf.push(b'\n');
        if buf.len() > (1 << 20) {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

fn truth(job: &JobDesign) -> IndependentJob {
    IndependentJob {
        job: job.id.clone(),
        nodes: job.nodes.iter().map(|n| n.name.clone()).collect(),
        fault: job.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.name().to_string(),
            node: job.nodes[f.node].name.clone(),
            onset: f.onset,
            subtle: f.kind.subtle(),
        }),
        confounders: job.confounders.clone(),
    }
}

#[cfg(test)]
mod tests;
