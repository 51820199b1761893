//! Turns a node's activity into the exporter's rows: node-level
//! aggregates with per-node offsets, scrape jitter and counter-rate
//! artefacts, missing and unknown metrics.

use super::plan::Mode;
use super::rng::{h01, hn};
use super::sim::{Sim, Snap};

pub const METRICS: [&str; 20] = [
    "gpu_util",
    "gpu_util_min",
    "gpu_power",
    "gpu_mem_util",
    "gpu_mem_used",
    "gpu_temp",
    "gpu_sm_clock",
    "nvlink_tx",
    "pcie_tx",
    "ib_tx",
    "ib_rx",
    "pfc_pause",
    "cnp",
    "cpu_util",
    "mem_used",
    "disk_io",
    "DCGM_FI_DEV_XID_ERRORS",
    // Unknown to the detector: exported by some sites' exporters.
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "node_load1",
    "nvme_temp",
];

/// Metrics that come from DCGM (absent when DCGM stops answering).
const GPU: u32 = 0b1_0000_0001_1111_1111 | 1 << 17;
/// Metrics computed as rates of counters (jitter, resets, double counts).
const RATES: u32 = 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12 | 1 << 15;

/// A row before formatting; kept small since a seed has millions.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub value: f64,
    pub t: i64,
    pub job: u16,
    pub host: u16,
    pub metric: u8,
}

/// Per-node state carried between scrapes.
#[derive(Debug, Clone, Default)]
pub struct NodeState {
    pub temp: Option<f64>,
    pub last: Option<i64>,
}

/// Emits node `i`'s rows for the scrape at true time `t`.
pub fn scrape(sim: &Sim, job: u16, i: usize, t: i64, st: &mut NodeState, rows: &mut Vec<Row>) {
    let Some(s) = sim.snap(i, t) else { return };
    let p = sim.p;
    let iv = p.interval[i];
    // After a gap (exporter restart, requeue) the first rate reads 0.
    let reset = st.last.is_some_and(|l| t - l > 2 * iv);
    st.last = Some(t);
    let vals = values(sim, i, t, &s, st);
    let key = sim.key ^ (i as u64) << 20;
    let ts = t + p.skew[i];
    let host = p.hosts[i] as u16;
    for (m, v) in vals.iter().enumerate() {
        let bit = 1u32 << m;
        if p.missing[i] & bit != 0
            || (m >= 17 && !p.extra_metrics)
            || (s.mode == Mode::GpuGone && GPU & bit != 0)
        {
            continue;
        }
        let mut v = *v;
        if RATES & bit != 0 {
            let r = h01(key, t as u64, m as u64);
            v = if reset || r < 0.002 {
                0.0
            } else if r > 0.998 {
                2.0 * v
            } else {
                v * (1.0 + 0.025 * hn(key, t as u64, 40 + m as u64))
            };
        }
        rows.push(Row {
            value: v.max(0.0),
            t: ts,
            job,
            host,
            metric: m as u8,
        });
    }
}

/// The metric values (all 20) for one scrape.
fn values(sim: &Sim, i: usize, t: i64, s: &Snap, st: &mut NodeState) -> [f64; 20] {
    let hw = sim.p.hw;
    let k = sim.key ^ 0xa5a5 ^ (i as u64) << 24;
    let n = |m: u64| hn(k, t as u64, m);
    let off = |m: u64| hn(sim.key, sim.p.hosts[i] as u64, 1000 + m);
    let g = hw.gpus() as f64;
    let ge = g - s.fx.lost as f64;
    let act = (s.busy + s.spin).min(1.0);
    let util = (100.0 * act + 1.2 * n(0)).clamp(0.0, 100.0);
    // The least busy GPU lags the mean more when the node is not saturated.
    let spread = 1.0 + (100.0 - util) * 0.25 * h01(k, t as u64, 1) + 1.5 * h01(k, t as u64, 2);
    let (idle, lim) = hw.power();
    let pw =
        idle + (lim - idle) * (s.busy * s.intensity * s.fx.clock.powf(1.5) + s.spin * 0.24 + 0.02);
    let pw = pw.min(lim * s.fx.pcap) * (1.0 + 0.03 * off(0)) * (1.0 + 0.015 * n(3));
    let target = 27.0 + 44.0 * pw / lim + s.fx.heat + 3.0 * off(1);
    // Temperature follows power with a ~minute lag.
    let prev = st.temp.unwrap_or(target);
    let a = 1.0 - (-(sim.p.interval[i] as f64) / 60.0).exp();
    let temp = prev + a * (target - prev);
    st.temp = Some(temp);
    let busy_clk =
        hw.clock() * s.fx.clock * (1.0 - 0.05 * s.busy * s.intensity) * (1.0 + 0.008 * off(2));
    let w = (act * 1.2).min(1.0);
    let clock = busy_clk * w + 420.0 * (1.0 - w) + 6.0 * n(4);
    let load = (s.cpu + 3.0 * n(13)).clamp(0.3, 100.0);
    [
        util,
        (util - spread).max(0.0),
        pw * ge,
        (100.0 * (s.busy * s.memf + s.spin * 0.03) + 1.0 * n(5)).clamp(0.0, 100.0),
        (ge * hw.mem_mib() * s.mem * (1.0 + 0.002 * n(6))).round(),
        temp + 0.3 * n(7),
        clock.max(200.0).round(),
        hw.nvl() * s.nvl,
        g * 64e9 * s.pcie,
        hw.ib() * s.ib,
        hw.ib() * s.ib * (1.0 + 0.02 * n(10)),
        (3.0 + 3.0 * h01(k, t as u64, 11) + s.fx.pfc).round(),
        (1.0 * h01(k, t as u64, 12) + s.fx.cnp).round(),
        load,
        2.2e11
            + 2.5e11 * h01(sim.key, i as u64, 14)
            + 1.5e9 * n(14)
            + (t - sim.p.start) as f64 * 2e6,
        s.disk * (1.0 + 0.2 * n(15)),
        s.fx.xid as f64,
        (s.busy * s.intensity * 0.8).clamp(0.0, 1.0),
        load * 1.44,
        38.0 + 6.0 * off(19) + 4.0 * s.disk / 4e9,
    ]
}

/// Writes one row as CSV.
pub fn write_row(
    out: &mut impl std::io::Write,
    r: &Row,
    job: &str,
    host: &str,
) -> std::io::Result<()> {
    let m = METRICS[r.metric as usize];
    match r.metric {
        0 | 1 | 2 | 3 | 5 | 13 => writeln!(out, "{},{},{},{},{:.1}", r.t, job, host, m, r.value),
        17 | 18 => writeln!(out, "{},{},{},{},{:.3}", r.t, job, host, m, r.value),
        _ => writeln!(out, "{},{},{},{},{:.0}", r.t, job, host, m, r.value),
    }
}
