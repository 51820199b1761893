//! The planted hardware faults (Minder's mix) and the marks they leave.

use super::plan::{Mode, Plan};
use super::rng::{h01, Rng};
use super::sim::Fx;
use super::site::Hw;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Ecc,
    OffBus,
    Gsp,
    NvLink,
    Pcie,
    Nic,
    Thermal,
    PowerBrake,
    SlowGpu,
    Host,
    Unreachable,
}

pub const KINDS: [FaultKind; 11] = [
    FaultKind::Ecc,
    FaultKind::OffBus,
    FaultKind::Gsp,
    FaultKind::NvLink,
    FaultKind::Pcie,
    FaultKind::Nic,
    FaultKind::Thermal,
    FaultKind::PowerBrake,
    FaultKind::SlowGpu,
    FaultKind::Host,
    FaultKind::Unreachable,
];

/// Relative frequencies, after Minder's fault mix (ECC, NIC and NVLink
/// lead; machine loss and GSP hangs rarer).
const WEIGHTS: [f64; 11] = [17.0, 9.0, 6.0, 11.0, 10.0, 15.0, 8.0, 5.0, 6.0, 7.0, 6.0];

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Ecc => "ecc_uncorrectable",
            FaultKind::OffBus => "gpu_fell_off_bus",
            FaultKind::Gsp => "gsp_firmware_hang",
            FaultKind::NvLink => "nvlink_error",
            FaultKind::Pcie => "pcie_downgrade",
            FaultKind::Nic => "nic_down_flapping",
            FaultKind::Thermal => "thermal_throttle",
            FaultKind::PowerBrake => "power_brake",
            FaultKind::SlowGpu => "slow_gpu",
            FaultKind::Host => "host_cpu_memory",
            FaultKind::Unreachable => "machine_unreachable",
        }
    }
    /// Kinds that can be subtle: a 4-25% slowdown with no halt.
    fn can_be_subtle(self) -> bool {
        matches!(
            self,
            FaultKind::Pcie
                | FaultKind::Nic
                | FaultKind::Thermal
                | FaultKind::PowerBrake
                | FaultKind::SlowGpu
                | FaultKind::Host
        )
    }
}

#[derive(Debug, Clone)]
pub struct Fault {
    pub kind: FaultKind,
    pub node: usize,
    pub onset: i64,
    pub subtle: bool,
    /// Severity: the slowdown factor (>1) or the degraded share.
    pub x: f64,
    pub xid: u32,
    /// (on, off) seconds when the fault cycles (flaps, throttles on/off).
    pub cycle: Option<(i64, i64)>,
}

/// Plants a fault in `p`: kind, node, onset, and the halt it causes.
pub fn plant(rng: &mut Rng, p: &mut Plan) {
    let mut kind = KINDS[rng.weighted(&WEIGHTS)];
    let subtle = rng.chance(0.15);
    if subtle && !kind.can_be_subtle() {
        kind = *rng.pick(&[
            FaultKind::Pcie,
            FaultKind::Nic,
            FaultKind::Thermal,
            FaultKind::SlowGpu,
            FaultKind::Host,
        ]);
    }
    // The node: present from before onset to the end.
    let cands: Vec<usize> = (0..p.n())
        .filter(|&i| p.present[i].1 == p.end && p.present[i].0 < p.steady)
        .collect();
    let node = *rng.pick(&cands);
    // Onset at least 5 minutes after steady, with 5 minutes left to see it.
    if p.end - p.steady < 900 {
        p.set_end(p.steady + 900 + rng.int(0, 600));
    }
    let onset = rng.int(p.steady + 300, p.end - 300);
    let x = if subtle {
        rng.range(1.04, 1.25)
    } else {
        severity(rng, kind)
    };
    let xid = match kind {
        FaultKind::Ecc => *rng.pick(&[48, 63, 64, 94, 95]),
        FaultKind::OffBus => 79,
        FaultKind::Gsp => *rng.pick(&[119, 120]),
        FaultKind::NvLink => 74,
        _ => 0,
    };
    let cycles = matches!(
        kind,
        FaultKind::Nic | FaultKind::Thermal | FaultKind::PowerBrake
    ) && rng.chance(0.45);
    let cycle = cycles.then(|| (rng.int(20, 180), rng.int(30, 240)));
    p.fault = Some(Fault {
        kind,
        node,
        onset,
        subtle,
        x,
        xid,
        cycle,
    });
    if !subtle {
        halt_for(rng, p, kind, node, onset);
    }
}

fn severity(rng: &mut Rng, kind: FaultKind) -> f64 {
    match kind {
        FaultKind::Thermal => rng.range(1.2, 1.55),
        FaultKind::PowerBrake => rng.range(1.7, 2.8),
        FaultKind::SlowGpu => rng.range(1.12, 1.5),
        FaultKind::Pcie => rng.range(1.05, 1.2),
        FaultKind::Host => rng.range(1.2, 1.7),
        FaultKind::Nic | FaultKind::NvLink => rng.range(1.15, 1.6),
        _ => 1.0,
    }
}

/// NCCL's watchdog (10 min) or PyTorch's 30-min default ends a hang;
/// torchrun's agent (1.5-3 min) ends a crash where the process exited.
fn hang_wait(rng: &mut Rng) -> i64 {
    if rng.chance(0.7) {
        600 + rng.int(0, 30)
    } else {
        1800 + rng.int(0, 30)
    }
}

fn halt_for(rng: &mut Rng, p: &mut Plan, kind: FaultKind, node: usize, onset: i64) {
    let crash = rng.int(90, 180);
    let t = onset + rng.int(0, 20);
    match kind {
        FaultKind::Ecc if rng.chance(0.6) => p.halt(t, Some(node), Mode::Dead, Mode::Spin, crash),
        FaultKind::Ecc => p.halt(t, Some(node), Mode::Hung, Mode::Spin, hang_wait(rng)),
        // The rank on the lost GPU dies; the node's other ranks wait too.
        FaultKind::OffBus => p.halt(t, Some(node), Mode::Spin, Mode::Spin, crash),
        FaultKind::Gsp => {
            let mode = if rng.chance(0.6) {
                Mode::GpuGone
            } else {
                Mode::Hung
            };
            p.halt(t, Some(node), mode, Mode::Spin, hang_wait(rng));
        }
        FaultKind::NvLink if rng.chance(0.5) => p.halt(
            onset + rng.int(30, 300),
            Some(node),
            Mode::Dead,
            Mode::Spin,
            crash,
        ),
        FaultKind::Unreachable => p.halt(onset, Some(node), Mode::Gone, Mode::Spin, hang_wait(rng)),
        _ => {}
    }
}

/// Whether a cycling fault is in its "on" part at `t`.
fn on(f: &Fault, t: i64) -> bool {
    match f.cycle {
        Some((a, b)) => (t - f.onset).rem_euclid(a + b) < a,
        None => true,
    }
}

/// The fault's mark on node `i` of `p` at `t` (after onset).
pub fn apply(
    f: &Fault,
    p: &Plan,
    site_rack: &dyn Fn(usize) -> usize,
    i: usize,
    t: i64,
    fx: &mut Fx,
) {
    if t < f.onset {
        return;
    }
    if i != f.node {
        // An NVLink error in an NVL72 rack: its whole domain's traffic suffers.
        if f.kind == FaultKind::NvLink && p.hw == Hw::Gb200 && site_rack(i) == site_rack(f.node) {
            fx.nvlf *= 0.75 + 0.1 * h01(f.onset as u64, i as u64, 7);
            fx.comm *= 1.0 + (f.x - 1.0) * 0.5;
        }
        return;
    }
    fx.xid = fx.xid.max(f.xid);
    let x = f.x;
    match f.kind {
        FaultKind::OffBus => fx.lost = 1,
        FaultKind::NvLink => {
            fx.nvlf *= 0.2 + 0.2 * h01(f.onset as u64, 1, 2);
            fx.comm *= x;
        }
        FaultKind::Pcie => {
            fx.pcief *= if x > 1.1 { 0.25 } else { 0.5 };
            fx.slow *= x;
            fx.ibf *= 0.9;
        }
        FaultKind::Nic if on(f, t) => nic(f, p, fx),
        FaultKind::Thermal if on(f, t) => {
            fx.clock *= 1.0 / x;
            fx.slow *= x;
            fx.heat += 8.0 + 30.0 * (x - 1.0);
        }
        FaultKind::PowerBrake if on(f, t) => {
            fx.clock *= 1.0 / x;
            fx.slow *= x;
            fx.pcap *= 1.0 / x.sqrt();
        }
        FaultKind::SlowGpu => {
            let g = p.hw.gpus() as f64;
            fx.slow *= x;
            fx.clock *= 1.0 - (1.0 - 1.0 / x) / g;
        }
        FaultKind::Host => {
            // Machine-check storms come and go in bursts.
            let burst = 0.5 + h01(f.onset as u64, (t / 30) as u64, 3);
            fx.starve += (x - 1.0) * burst;
            fx.cpu += 20.0 + 25.0 * burst;
        }
        _ => {}
    }
}

/// A NIC down (one rail's traffic lost, rerouted) or flapping.
fn nic(f: &Fault, p: &Plan, fx: &mut Fx) {
    let nics = if p.hw == Hw::Gb200 { 4.0 } else { 8.0 };
    let lost = if f.cycle.is_some() {
        0.3 + 0.3 * (f.x - 1.0)
    } else {
        1.0 / nics + 0.5 * (f.x - 1.0)
    };
    fx.ibf *= 1.0 - lost.min(0.8);
    fx.comm *= f.x;
    fx.pfc += 300.0 + 3000.0 * (f.x - 1.0);
    fx.cnp += 50.0 + 400.0 * (f.x - 1.0);
}
