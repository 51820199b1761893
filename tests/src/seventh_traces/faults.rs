//! What each planted fault does to its node, and, where the pace does not
//! already carry it, to the rest of the job.

use super::model::Load;
use super::plan::{FaultKind, JobPlan, Role};
use super::rng::hunit;

/// Whether an intermittent link (a bad cable, a flapping NIC) is down at
/// `t`: a flap of 5-30 s in every 1-4 minutes, at places drawn per window.
pub(crate) fn flapping(job: &JobPlan, t: i64) -> bool {
    let Some(f) = job.fault.as_ref() else {
        return false;
    };
    let flaps = matches!(f.kind, FaultKind::AocCable | FaultKind::NicDropout);
    if !flaps || t < f.onset || f.halt.is_some_and(|h| t >= h) {
        return false;
    }
    let window = 60 + (180.0 * hunit(job.seed, 91, 0)) as i64;
    let k = ((t - f.onset) / window) as u64;
    let start = (hunit(job.seed, 92, k) * (window - 30) as f64) as i64;
    let len = 5 + (25.0 * hunit(job.seed, 93, k)) as i64;
    let at = (t - f.onset) % window;
    at >= start && at < start + len
}

pub(crate) fn apply(job: &JobPlan, i: usize, t: i64, l: &mut Load) {
    let Some(f) = job.fault.as_ref() else {
        return;
    };
    if t < f.onset {
        return;
    }
    let role = job.nodes[i].role;
    let coupled = matches!(role, Role::Worker | Role::Trainer);
    if flapping(job, t) {
        if f.node == i {
            l.off_gpu_flap();
        } else if coupled && l.alive > 0.5 && l.busy > 0.2 {
            l.blocked();
        }
    }
    if f.node != i {
        return;
    }
    let halted = f.halt.is_some_and(|h| t >= h);
    let s = f.severity;
    match f.kind {
        FaultKind::Ecc if halted => l.xid = 48.0,
        FaultKind::Ecc => {
            // Correctable storms and row remaps on one GPU before the crash.
            l.min_gap += 10.0 + 100.0 * s;
            l.xid = 63.0;
        }
        FaultKind::PcieDowngrade => {
            l.pcie *= 1.0 - s;
            (l.ib_tx, l.ib_rx) = (l.ib_tx * (1.0 - 0.5 * s), l.ib_rx * (1.0 - 0.5 * s));
            l.min_gap += 10.0 + 35.0 * s;
            l.width = 8.0;
        }
        FaultKind::NicDropout | FaultKind::AocCable if halted => {
            (l.ib_tx, l.ib_rx, l.nic_err) = (0.0, 0.0, 5.0);
        }
        FaultKind::NicDropout | FaultKind::AocCable => {
            (l.ib_tx, l.ib_rx) = (l.ib_tx * (1.0 - s), l.ib_rx * (1.0 - s));
            l.nic_err += 20.0 + 200.0 * s;
            (l.pfc, l.cnp) = (l.pfc * 8.0, l.cnp * 4.0);
        }
        FaultKind::GpuCardDrop => {
            l.xid = 79.0;
            l.min_gap = 200.0;
        }
        FaultKind::NvlinkError if halted => l.xid = 74.0,
        FaultKind::NvlinkError => {
            l.nvl *= 1.0 - s;
            l.min_gap += 5.0;
        }
        FaultKind::ThermalThrottle => {
            (l.clock, l.temp) = (l.clock * (1.0 - s), l.temp + 8.0 + 30.0 * s);
            l.act *= 1.0 - 0.5 * s;
        }
        FaultKind::SlowHost => {
            // The GPUs wait for a starved input pipeline: idle, not spinning
            // (peers spin in NCCL for the same time).
            let gap = s * (l.busy + l.spin);
            l.spin = (l.spin - gap).max(0.0);
            l.cpu = (l.cpu + 35.0).min(98.0);
            l.act = l.busy * job.intensity + l.spin * 0.1;
        }
        FaultKind::DegradedLink => {
            (l.ib_tx, l.ib_rx) = (l.ib_tx * (1.0 - 0.5 * s), l.ib_rx * (1.0 - s));
            (l.nic_err, l.pfc) = (l.nic_err + 50.0 * s, l.pfc * 5.0);
        }
    }
}
