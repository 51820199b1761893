//! What each fault does: its timeline (drawn once) and its effect on the
//! faulty node's sample and speed. The rest of the job feels a fault only
//! through the pace (everyone waits for the slowest node) and through hangs.

use super::design::{Fault, FaultKind};
use super::rng::Rng;
use super::sample::State;

/// Draws the variant of a fault: when it degrades, whether it recovers,
/// relapses or escalates into a crash.
pub(super) fn shape(rng: &mut Rng, f: &mut Fault, end: i64) {
    let onset = f.onset;
    let short = |rng: &mut Rng| onset + rng.int(60, 180);
    match f.kind {
        FaultKind::Ecc => {
            // Uncorrectable (XID 48/95: the ranks die), or a row-remap storm
            // that slows the node, then retires pages and recovers, or one
            // that escalates into the crash.
            f.mag = rng.range(0.04, 0.15);
            match rng.pick(&[(0, 0.5), (1, 0.3), (2, 0.2)]) {
                0 => {
                    f.crash_at = Some(onset);
                    f.degrade_end = onset;
                }
                1 => {
                    f.degrade_end = short(rng);
                    if rng.chance(0.5) {
                        let again = f.degrade_end + rng.int(300, 600);
                        f.relapse = Some((again, again + rng.int(60, 180)));
                    }
                }
                _ => {
                    f.degrade_end = short(rng);
                    f.crash_at = Some(f.degrade_end);
                }
            }
        }
        FaultKind::PcieDowngrade => {
            f.mag = rng.range(0.1, 0.35);
            if rng.chance(0.2) {
                f.degrade_end = short(rng);
            }
        }
        FaultKind::NicDropout => {
            if rng.chance(0.6) {
                // The HCA is gone; NCCL's IB retries run out, the ranks abort.
                f.crash_at = Some(onset + rng.int(30, 120));
                f.period = 1;
                f.duty = 1;
            } else {
                f.period = rng.int(90, 300);
                f.duty = rng.int(20, 60);
                if rng.chance(0.5) {
                    f.degrade_end = onset + rng.int(2, 4) * f.period;
                }
            }
        }
        FaultKind::GpuCardDrop => {
            f.crash_at = Some(onset);
            f.vanish = rng.chance(0.5);
        }
        FaultKind::NvlinkError => {
            f.mag = rng.range(0.1, 0.4);
            if rng.chance(0.4) {
                f.crash_at = Some(short(rng));
                f.degrade_end = f.crash_at.unwrap_or(end);
            }
        }
        FaultKind::AocError => {
            // Variant 1: the link renegotiated at half speed; otherwise
            // symbol errors and retransmits on a marginal cable.
            f.variant = u8::from(rng.chance(0.5));
            f.mag = rng.range(0.5, 0.8);
            if rng.chance(0.3) {
                f.degrade_end = short(rng);
            }
        }
        FaultKind::SubtleGpu | FaultKind::SubtleCpu | FaultKind::SubtleLink => {
            f.mag = rng.range(0.08, 0.25);
        }
    }
    f.degrade_end = f.degrade_end.min(end);
}

/// Whether the fault's degradation is felt at `t`.
pub(super) fn degraded(f: &Fault, t: i64) -> bool {
    let bout = |(s, e): (i64, i64)| s <= t && t < e;
    let on = bout((f.onset, f.degrade_end)) || f.relapse.is_some_and(bout);
    if !on {
        return false;
    }
    if f.period > 1 {
        return (t - f.onset) % f.period < f.duty;
    }
    true
}

/// The faulty node's work factor while degraded (> 1: slower).
pub(super) fn work(f: &Fault) -> f64 {
    match f.kind {
        FaultKind::Ecc => 1.0 + f.mag,
        FaultKind::PcieDowngrade => 1.0 + f.mag,
        FaultKind::NicDropout => 20.0,
        FaultKind::GpuCardDrop => 1.0,
        FaultKind::NvlinkError => 1.0 + 1.5 * (1.0 - f.mag) * 0.4,
        FaultKind::AocError => 1.0 + (1.0 - f.mag) * 0.5,
        FaultKind::SubtleGpu | FaultKind::SubtleCpu => 1.0 / (1.0 - f.mag),
        FaultKind::SubtleLink => 1.0 / (1.0 - 0.6 * f.mag),
    }
}

/// The faulty node's own readings while degraded.
pub(super) fn apply(f: &Fault, s: &mut State, rng: &mut Rng) {
    match f.kind {
        FaultKind::Ecc => {
            s.min_gap += 15.0 + 250.0 * f.mag * rng.f();
            s.sm *= 1.0 - 0.5 * f.mag;
            s.xid = 63.0;
        }
        FaultKind::PcieDowngrade => {
            // Half the lanes: what crossed the link now takes twice as long.
            s.pcie *= rng.range(0.45, 0.55);
            s.ib *= 0.6;
        }
        FaultKind::NicDropout => {
            s.ib *= 0.02;
            s.nic_err += rng.range(1.0, 40.0);
        }
        FaultKind::GpuCardDrop => {}
        FaultKind::NvlinkError => {
            s.nvl *= f.mag;
            s.pcie *= rng.range(2.0, 3.0);
            s.xid = 74.0;
        }
        FaultKind::AocError if f.variant == 1 => {
            s.ib *= 0.5;
            s.nic_err += rng.range(0.0, 3.0);
        }
        FaultKind::AocError => {
            s.ib *= if rng.chance(0.2) { 0.1 } else { f.mag };
            s.nic_err += rng.range(5.0, 200.0);
        }
        FaultKind::SubtleGpu => {
            s.clock_f *= 1.0 - 0.9 * f.mag;
            s.power_mult *= 1.0 - 0.6 * f.mag;
            s.temp_add += 8.0 + 30.0 * f.mag;
        }
        FaultKind::SubtleCpu => {
            s.cpu += 15.0 + 80.0 * f.mag;
            s.busy *= 1.0 - f.mag;
            s.sm *= 1.0 - f.mag;
            s.disk *= 1.0 - f.mag;
        }
        FaultKind::SubtleLink => {
            s.ib *= 1.0 - 0.5 * f.mag;
            s.cnp *= 3.0;
        }
    }
}

/// The XID a crash leaves in the exporter's XID field.
pub(super) fn crash_xid(f: &Fault) -> f64 {
    match f.kind {
        FaultKind::Ecc => 48.0,
        FaultKind::GpuCardDrop => 79.0,
        FaultKind::NvlinkError => 74.0,
        _ => 0.0,
    }
}
