//! Scraping: each node's exporter samples its load on its own phase and
//! clock, rows go through the exporters' and the network's losses, and the
//! whole file is written in time order.

use std::io::{self, Write};

use super::model::{load, Load, Pace};
use super::plan::{Ev, FaultKind, JobPlan, GPU_METRICS, NAMES};
use super::rng::{hnorm, Rng};

struct Row {
    t: u32,
    node: u32,
    metric: u8,
    value: f64,
}

/// Decimals written per metric (same order as `NAMES`).
const DECIMALS: [u32; 23] = [
    1, 2, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 3, 0, 1, 2, 0, 0, 2,
];

/// Subsamples per scrape window: rates are averages over the window.
const SUBSAMPLES: i64 = 3;

pub(crate) fn write_rows(plans: &[JobPlan], out: &mut impl Write) -> io::Result<()> {
    let t0 = plans.iter().map(|j| j.start).min().unwrap_or(0) - 16;
    let t1 = plans.iter().map(|j| j.start + j.end()).max().unwrap_or(0) + 16;
    let mut buckets: Vec<Vec<Row>> = (0..=(t1 - t0)).map(|_| Vec::new()).collect();
    let mut labels: Vec<(&str, &str)> = Vec::new();
    for job in plans {
        let base = labels.len() as u32;
        render(job, base, t0, &mut |row| buckets[row.t as usize].push(row));
        labels.extend(job.nodes.iter().map(|n| (job.id.as_str(), n.name.as_str())));
    }
    let mut buf = Vec::with_capacity(1 << 21);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for (k, rows) in buckets.iter().enumerate() {
        let stamp = (t0 + k as i64).to_string();
        for row in rows {
            let (job, node) = labels[row.node as usize];
            buf.extend_from_slice(stamp.as_bytes());
            for field in [job, node, NAMES[row.metric as usize]] {
                buf.push(b',');
                buf.extend_from_slice(field.as_bytes());
            }
            buf.push(b',');
            push_fixed(&mut buf, row.value, DECIMALS[row.metric as usize]);
            buf.push(b'\n');
        }
        if buf.len() > 1 << 20 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

/// Fixed-point text without going through `format!` (millions of rows).
fn push_fixed(buf: &mut Vec<u8>, v: f64, decimals: u32) {
    let scale = 10u64.pow(decimals);
    let n = (v.abs() * scale as f64).round() as u64;
    if v < 0.0 && n > 0 {
        buf.push(b'-');
    }
    let mut digits = [0u8; 24];
    let mut len = 0;
    let mut int = n / scale;
    loop {
        digits[len] = b'0' + (int % 10) as u8;
        len += 1;
        int /= 10;
        if int == 0 {
            break;
        }
    }
    buf.extend(digits[..len].iter().rev());
    if decimals > 0 {
        buf.push(b'.');
        let mut frac = n % scale;
        let start = buf.len();
        for _ in 0..decimals {
            buf.push(b'0' + (frac % 10) as u8);
            frac /= 10;
        }
        buf[start..].reverse();
    }
}

fn render(job: &JobPlan, base: u32, t0: i64, emit: &mut impl FnMut(Row)) {
    let pace = Pace::new(job);
    let end = job.end();
    for (i, node) in job.nodes.iter().enumerate() {
        let mut rng = Rng::derive(job.seed, i as u64, 7);
        let mut restarting = false;
        let mut t = node.phase + job.interval;
        while t < end {
            let (gap, exporter_down) = exporter_state(job, i, t);
            if gap {
                t += job.interval;
                continue;
            }
            let gpu_down = exporter_down || gpu_gone(job, i, t);
            let l = window(job, &pace, i, t);
            let values = values(job, i, t, &l, &mut rng);
            let stamp = (job.start + t + node.skew - t0) as u32;
            for (m, value) in values.iter().enumerate() {
                let bit = 1u32 << m;
                if node.metrics & bit == 0
                    || (gpu_down && GPU_METRICS & bit != 0)
                    || rng.chance(job.drop)
                {
                    continue;
                }
                // The first scrape after a GPU exporter restart reads zeros.
                let value = if restarting && (m == 3 || m == 4) {
                    0.0
                } else {
                    *value
                };
                emit(Row {
                    t: stamp,
                    node: base + i as u32,
                    metric: m as u8,
                    value,
                });
            }
            restarting = exporter_down;
            t += job.interval;
        }
    }
}

/// (the node is missing entirely, its GPU exporter is restarting)
fn exporter_state(job: &JobPlan, i: usize, t: i64) -> (bool, bool) {
    let mut state = (false, false);
    for e in job.events.iter().filter(|e| t >= e.a && t < e.b) {
        match e.ev {
            Ev::Gap(k) if k == i => state.0 = true,
            Ev::ExporterRestart(k) if k == i => state.1 = true,
            _ => {}
        }
    }
    state
}

/// A GPU that fell off the bus often hangs the GPU exporter on its node.
fn gpu_gone(job: &JobPlan, i: usize, t: i64) -> bool {
    job.fault.as_ref().is_some_and(|f| {
        f.kind == FaultKind::GpuCardDrop
            && f.node == i
            && f.severity < 0.6
            && f.halt.is_some_and(|h| t >= h)
    })
}

fn window(job: &JobPlan, pace: &Pace, i: usize, t: i64) -> Load {
    let mut sum = Load::default();
    for k in 0..SUBSAMPLES {
        let at = t - job.interval * (2 * k + 1) / (2 * SUBSAMPLES);
        sum.add_scaled(&load(job, pace, i, at), 1.0 / SUBSAMPLES as f64);
    }
    sum
}

fn values(job: &JobPlan, i: usize, t: i64, l: &Load, rng: &mut Rng) -> [f64; 23] {
    let node = &job.nodes[i];
    let drift = 1.0 + 0.01 * hnorm(job.seed ^ 0x77, i as u64, (t / 600) as u64);
    let util = (100.0 * (l.busy + l.spin).min(1.0) * nz(rng, 0.01) + 0.8 * (nz(rng, 1.0) - 1.0))
        .clamp(0.0, 100.0);
    let spread = (nz(rng, 1.0) - 1.0).abs() * (1.5 + 10.0 * node.bubble + 30.0 * job.moe_amp);
    let util_min = (util - l.min_gap - spread).clamp(0.0, util);
    let power = 8.0 * (70.0 + 630.0 * l.act.min(1.0)) * node.power * drift * nz(rng, 0.012);
    let hot_clock = 1980.0 + node.clock - 230.0 * (l.act / l.alive.max(0.05)).min(1.0);
    let clock =
        l.alive * hot_clock * l.clock + (1.0 - l.alive) * 345.0 + 6.0 * (nz(rng, 1.0) - 1.0);
    let ib_avg = (l.ib_tx + l.ib_rx) / 2.0;
    let (burst_p, burst_c) = if rng.chance(job.bursts) {
        (rng.range(30.0, 500.0), rng.range(10.0, 200.0))
    } else {
        (1.0, 1.0)
    };
    let cpu = (l.cpu * nz(rng, 0.05)).clamp(0.5, 100.0);
    [
        cpu,
        l.mem * nz(rng, 0.002) + 20.0 * t as f64 / 3600.0,
        l.disk * lognormal(rng, 0.15),
        util,
        util_min,
        power,
        clock.max(200.0),
        (100.0 * (l.busy * l.membw + l.spin * 0.03) * nz(rng, 0.02)).clamp(0.0, 100.0),
        ((l.ib_tx * 4e11 + l.pcie + 2e8 * l.alive) * nz(rng, 0.03)).max(0.0),
        (l.nvl * 3.6e12 * nz(rng, 0.04)).max(0.0),
        (l.ib_tx * 4e11 * nz(rng, 0.03)).max(0.0) + 1e6,
        (l.ib_rx * 4e11 * nz(rng, 0.03)).max(0.0) + 1e6,
        (ib_avg * 40.0 + 0.5) * l.pfc * burst_p * lognormal(rng, 0.3),
        (ib_avg * 300.0 + 0.2) * l.cnp * burst_c * lognormal(rng, 0.2),
        30.0 + 45.0 * l.act + node.temp + l.temp + 0.4 * (nz(rng, 1.0) - 1.0),
        35.0 + 40.0 * l.busy * l.membw + 0.8 * node.temp + 0.6 * l.temp,
        (l.act * 0.65).clamp(0.0, 1.0),
        l.xid,
        l.nic_err * lognormal(rng, 0.3),
        (l.cpu / 100.0 * 134.0 + 1.0).max(0.0),
        l.eth + 5e6 * nz(rng, 0.1).abs(),
        l.width.round(),
        l.alive * (60.0 + 16.0 * super::rng::hunit(job.seed, 5, 5)),
    ]
}

fn nz(rng: &mut Rng, sd: f64) -> f64 {
    1.0 + sd * rng.normal()
}

fn lognormal(rng: &mut Rng, sd: f64) -> f64 {
    (sd * rng.normal()).exp()
}
