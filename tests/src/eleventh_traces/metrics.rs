//! The exporter: a node's `State` as the metric values it reports (node-level
//! aggregates over 8 GPUs and 8 NICs), with scrape jitter.

use super::plan::Profile;
use super::rng::Rng;
use super::state::State;

/// Metric names in row order; the index is the row's metric id.
pub(crate) const NAMES: [&str; 19] = [
    "gpu_util",
    "gpu_power",
    "gpu_mem_util",
    "gpu_temp",
    "gpu_util_min",
    "gpu_sm_clock",
    "nvlink_tx",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_PROF_SM_ACTIVE",
    "pcie_tx",
    "ib_tx",
    "ib_rx",
    "pfc_pause",
    "cnp",
    "cpu_util",
    "mem_used",
    "disk_io",
    "node_load1",
    "nic_errors",
];

/// GPU metrics any exporter has: ids 0..4; DCGM-only: 4..8; DCGM's extra
/// profiling field: 8; node metrics: 9..17; node extras: 17..19.
const GPU_ANY: std::ops::Range<usize> = 0..4;
const GPU_DCGM: std::ops::Range<usize> = 4..8;
const NODE: std::ops::Range<usize> = 9..17;

/// Which metric ids a node's exporter reports at this scrape.
pub(crate) fn reported(dcgm: bool, extra: bool, gpu: bool) -> impl Iterator<Item = usize> {
    let gpu_any = if gpu { GPU_ANY } else { 0..0 };
    let gpu_dcgm = if gpu && dcgm { GPU_DCGM } else { 0..0 };
    let sm = if gpu && dcgm && extra { 8..9 } else { 0..0 };
    let more = if extra { 17..19 } else { 0..0 };
    gpu_any.chain(gpu_dcgm).chain(sm).chain(NODE).chain(more)
}

/// H100/H200 SXM: 700 W board limit, ~70 W idle, 1980 MHz boost, ~345 MHz idle.
const TDP: f64 = 700.0;
const IDLE_W: f64 = 70.0;
const BOOST: f64 = 1980.0;

fn jitter(rng: &mut Rng, v: f64, rel: f64) -> f64 {
    (v * (1.0 + rng.noise(rel))).max(0.0)
}

/// The value of metric `id` for state `s`.
pub(crate) fn value(id: usize, s: &State, p: &Profile, rng: &mut Rng) -> f64 {
    let spin = (s.busy - s.compute).max(0.0);
    match id {
        0 => (100.0 * s.busy + rng.noise(0.8)).clamp(0.0, 100.0),
        1 => {
            let per = IDLE_W + 560.0 * s.compute * s.clock + 55.0 * spin;
            jitter(
                rng,
                (8.0 * per * s.power_gain).min(8.0 * TDP * s.power_cap),
                0.02,
            )
        }
        2 => (p.mem_util * s.compute / p.compute + 0.5 * spin + rng.noise(1.0)).clamp(0.0, 100.0),
        3 => 30.0 + 42.0 * s.compute + 6.0 * spin + s.temp + 3.0 + rng.noise(1.0),
        4 => (100.0 * s.min_busy.min(s.busy) - rng.unit() * 3.0).clamp(0.0, 100.0),
        5 if s.busy < 0.05 => 345.0 + rng.noise(5.0),
        5 => ((BOOST - 210.0 * s.compute) * s.clock + rng.noise(8.0)).round(),
        6 => jitter(rng, p.nvlink * s.nvlink, 0.04),
        7 => f64::from(s.xid),
        8 => (0.92 * s.compute + 0.25 * spin + rng.noise(0.01)).clamp(0.0, 1.0),
        9 => jitter(rng, p.pcie * s.pcie + 2.0e8, 0.05),
        10 => jitter(rng, p.ib * s.ib + 1.0e6, 0.04),
        11 => jitter(rng, p.ib * s.ib * 1.01 + 1.2e6, 0.04),
        12 => (s.pfc + 2.0 + rng.noise(2.0)).max(0.0).round(),
        13 => (s.cnp + 5.0 + rng.noise(4.0)).max(0.0).round(),
        14 => (s.cpu + rng.noise(2.0)).clamp(0.0, 100.0),
        15 => jitter(rng, s.mem_gb.max(20.0) * 1.0e9, 0.005).round(),
        16 => jitter(rng, s.disk + 1.0e5, 0.15).round(),
        17 => jitter(rng, s.cpu * 2.24, 0.05),
        _ => (s.nic_errors * (1.0 + rng.noise(0.2))).max(0.0).round(),
    }
}
