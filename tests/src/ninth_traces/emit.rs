//! A node's state as the exporter reports it: the values of `METRICS`,
//! with the node's hardware, its firmware's reading quirks and noise.

use super::design::NodeDesign;
use super::rng::Rng;
use super::sample::State;
use super::METRICS;

/// Indices into `METRICS` of the values a node's GPUs report: they vanish
/// with the card.
const GPU_METRICS: [usize; 8] = [3, 4, 5, 6, 7, 14, 16, 17];

/// The value of each metric (indexed as `METRICS`) for one scrape.
pub(super) fn values(node: &NodeDesign, s: &State, t: i64, rng: &mut Rng) -> [f64; METRICS.len()] {
    let mut v = [0.0; METRICS.len()];
    if s.zero {
        return v;
    }
    let noise = |rng: &mut Rng, sd: f64| 1.0 + sd * rng.normal();
    let (fw_power, fw_clock) = match node.fw_change {
        Some((at, p, c)) if t >= at => (p, c),
        _ => (1.0, 0.0),
    };
    let util = (100.0 * s.busy + 1.2 * rng.normal()).clamp(0.0, 100.0);
    let per_gpu = 70.0 + (node.cap_w - 70.0) * (0.16 * s.busy + 0.74 * s.sm).min(1.0);
    let power = s.gpus * per_gpu * node.power_f * s.power_mult * fw_power * noise(rng, 0.015);
    let clock = if s.clock_f <= 0.0 || s.busy < 0.02 {
        rng.range(345.0, 420.0)
    } else {
        node.clock_max * s.clock_f + fw_clock + 8.0 * rng.normal()
    };
    v[0] = (s.cpu + 1.5 * rng.normal()).clamp(0.3, 100.0);
    v[1] = (s.mem_gib * noise(rng, 0.003)).max(1.0) * 1_073_741_824.0;
    v[2] = (s.disk * noise(rng, 0.2)).max(0.0);
    v[3] = util;
    v[4] = (util - (2.5 + 1.5 * rng.normal()).abs() - s.min_gap).clamp(0.0, util);
    v[5] = power.max(0.0);
    v[6] = clock.max(0.0);
    v[7] =
        (100.0 * (0.08 * s.busy + 0.55 * s.sm) * s.mem_util_mult + rng.normal()).clamp(0.0, 100.0);
    v[8] = (s.pcie * noise(rng, 0.05)).max(0.0);
    v[9] = (s.nvl * noise(rng, 0.04)).max(0.0);
    v[10] = ((s.ib + s.ib_tx_extra) * noise(rng, 0.04)).max(0.0);
    v[11] = ((s.ib + s.ib_rx_extra) * noise(rng, 0.04)).max(0.0);
    v[12] = s.pfc.max(0.0);
    v[13] = s.cnp.max(0.0);
    v[14] = 28.0 + 45.0 * per_gpu / node.cap_w + node.temp_off + s.temp_add + 0.5 * rng.normal();
    v[15] = s.nic_err + if rng.chance(0.002) { 1.0 } else { 0.0 };
    v[16] = (0.55 * s.sm).clamp(0.0, 1.0);
    v[17] = s.xid;
    v[18] = (v[0] / 100.0 * 192.0 * noise(rng, 0.05)).max(0.0);
    v
}

/// Whether metric `m` is written for this node and state.
pub(super) fn reported(node: &NodeDesign, s: &State, m: usize) -> bool {
    node.mask & (1 << m) != 0 && !(s.gpu_gone && GPU_METRICS.contains(&m))
}

/// Appends `value` with two decimals (integers for large byte rates), the
/// way exporters print them; much faster than `format!` on millions of rows.
pub(super) fn push_value(out: &mut Vec<u8>, value: f64) {
    if value.abs() >= 1e5 {
        push_int(out, value.round() as i64);
        return;
    }
    let cents = (value * 100.0).round() as i64;
    if cents < 0 {
        out.push(b'-');
    }
    let cents = cents.abs();
    push_int(out, cents / 100);
    out.push(b'.');
    let frac = cents % 100;
    out.push(b'0' + (frac / 10) as u8);
    out.push(b'0' + (frac % 10) as u8);
}

pub(super) fn push_int(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    let mut n = value.unsigned_abs();
    let mut buf = [0u8; 20];
    let mut k = buf.len();
    loop {
        k -= 1;
        buf[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[k..]);
}
