//! Hardware faults and user errors: what each one does to the culprit node
//! and to the rest of its job, and when the job is torn down.

use super::plan::{After, Bound, Effect, Incident};
use super::rng::Rng;

/// Hardware fault kinds and their shares, roughly after Minder (NSDI'25,
/// table 1: ECC errors, NVLink, NIC, PCIe, GPU loss and unreachable machines
/// lead) and Meta's Llama 3 report (GPU and HBM faults dominate).
pub(crate) const FAULT_KINDS: [(&str, f64); 12] = [
    ("ecc_uncorrectable", 0.22),
    ("gpu_off_bus", 0.08),
    ("gsp_error", 0.06),
    ("nvlink_error", 0.13),
    ("pcie_downgrade", 0.08),
    ("nic_down", 0.08),
    ("nic_flap", 0.07),
    ("thermal_throttle", 0.06),
    ("power_throttle", 0.04),
    ("slow_gpu", 0.04),
    ("host_cpu_memory", 0.06),
    ("unreachable", 0.08),
];

/// The kinds that can be subtle: a slowdown of a few to 25%, no halt.
pub(crate) const SUBTLE_KINDS: [&str; 5] = [
    "slow_gpu",
    "thermal_throttle",
    "pcie_downgrade",
    "nic_flap",
    "host_cpu_memory",
];

/// User errors on healthy hardware (the scorer counts these jobs healthy).
pub(crate) const USER_KINDS: [(&str, f64); 6] = [
    ("user_exception", 0.25),
    ("user_cuda_oom", 0.2),
    ("user_nan_exit", 0.12),
    ("user_deadlock", 0.13),
    ("user_stuck_barrier", 0.12),
    ("user_app_xid", 0.18),
];

fn base(name: &'static str, fault: bool) -> Incident {
    Incident {
        name,
        fault,
        subtle: false,
        node: 0,
        onset: 0,
        culprit: After::Same,
        others: After::Same,
        others_at: 0,
        xid: 0,
        xid_at: 0,
        cleanup_xid_at: None,
        factor: 1.0,
        bound: Bound::Compute,
        cycle: None,
        eff: Effect::NONE,
    }
}

/// A crash: the culprit stops, the others block in their next collective a
/// few seconds later and spin there.
fn crash(name: &'static str, fault: bool, culprit: After, rng: &mut Rng) -> Incident {
    Incident {
        culprit,
        others: After::Spin,
        others_at: rng.int(3, 30),
        ..base(name, fault)
    }
}

/// A slowdown of the culprit that the whole synchronous job follows.
fn slow(name: &'static str, factor: f64, bound: Bound, eff: Effect) -> Incident {
    Incident {
        factor,
        bound,
        eff,
        ..base(name, true)
    }
}

fn ecc(rng: &mut Rng) -> Incident {
    let xids = [48, 94, 95, 63, 64];
    let xid = xids[rng.weighted(&[0.25, 0.35, 0.2, 0.1, 0.1])];
    // The CUDA context dies; an uncontained error can leave the kernel stuck.
    let culprit = if rng.chance(0.7) {
        After::Idle
    } else {
        After::Spin
    };
    Incident {
        xid,
        ..crash("ecc_uncorrectable", true, culprit, rng)
    }
}

fn gpu_gone(rng: &mut Rng, name: &'static str) -> Incident {
    let mut inc = crash(name, true, After::Idle, rng);
    if name == "gpu_off_bus" {
        inc.xid = 79;
        // The lost GPU drops out of the node's sums and of util_min.
        inc.eff = Effect {
            power_cap: 7.0 / 8.0,
            min_gpu: 0.0,
            ..Effect::NONE
        };
    } else {
        inc.xid = rng.pick(&[119, 120]);
        inc.culprit = if rng.chance(0.5) {
            After::Blind
        } else {
            After::Spin
        };
    }
    inc
}

fn nvlink(rng: &mut Rng) -> Incident {
    let mut inc = if rng.chance(0.5) {
        Incident {
            eff: Effect {
                nvlink: 0.0,
                ..Effect::NONE
            },
            ..crash("nvlink_error", true, After::Spin, rng)
        }
    } else {
        // NCCL retries, traffic detours over PCIe: slower, sometimes on/off.
        let mut s = slow(
            "nvlink_error",
            rng.range(1.3, 2.0),
            Bound::Comm,
            Effect {
                nvlink: rng.range(0.1, 0.4),
                pcie: 1.8,
                ..Effect::NONE
            },
        );
        if rng.chance(0.5) {
            s.cycle = Some((rng.int(60, 240), rng.int(60, 300)));
        }
        s
    };
    inc.xid = 74;
    inc
}

fn nic(rng: &mut Rng, flap: bool, subtle: bool) -> Incident {
    let errors = Effect {
        ib: 0.05,
        pfc: rng.range(5e3, 5e4),
        cnp: rng.range(500.0, 3e3),
        nic_errors: rng.range(50.0, 500.0),
        ..Effect::NONE
    };
    if !flap {
        if rng.chance(0.5) {
            return Incident {
                eff: errors,
                ..crash("nic_down", true, After::Spin, rng)
            };
        }
        // One rail of eight down; NCCL carries on over the rest, slower.
        let eff = Effect {
            ib: 7.0 / 8.0,
            ..errors
        };
        return slow("nic_down", rng.range(1.2, 1.5), Bound::Comm, eff);
    }
    let (factor, on, off) = if subtle {
        (rng.range(1.05, 1.2), rng.int(10, 20), rng.int(120, 300))
    } else {
        (rng.range(3.0, 8.0), rng.int(20, 90), rng.int(60, 400))
    };
    let mut inc = slow("nic_flap", factor, Bound::Comm, errors);
    inc.cycle = Some((on, off));
    inc
}

fn throttle(rng: &mut Rng, power: bool, subtle: bool) -> Incident {
    if power {
        // Power brake (a PSU or board fault asserts HW slowdown).
        let clock = rng.range(0.35, 0.6);
        let eff = Effect {
            clock,
            power_cap: rng.range(0.4, 0.6),
            temp: -5.0,
            ..Effect::NONE
        };
        return slow("power_throttle", 1.0 / clock, Bound::Compute, eff);
    }
    let clock = if subtle {
        rng.range(0.86, 0.96)
    } else {
        rng.range(0.6, 0.8)
    };
    let eff = Effect {
        clock,
        temp: rng.range(15.0, 25.0),
        ..Effect::NONE
    };
    let mut inc = slow("thermal_throttle", 1.0 / clock, Bound::Compute, eff);
    if rng.chance(0.3) {
        // A failing fan or pump: it throttles, cools down, throttles again.
        inc.cycle = Some((rng.int(120, 600), rng.int(60, 300)));
    }
    inc
}

fn slow_gpu(rng: &mut Rng, subtle: bool) -> Incident {
    let factor = if subtle {
        rng.range(1.04, 1.25)
    } else {
        rng.range(1.3, 1.7)
    };
    // One GPU of eight runs slow (HBM retraining, a bad VRM): the node's mean
    // clock dips by an eighth of its drop; its seven peers wait in NCCL.
    let eff = Effect {
        clock: 1.0 - (1.0 - 1.0 / factor) / 8.0,
        temp: rng.range(0.0, 4.0),
        ..Effect::NONE
    };
    slow("slow_gpu", factor, Bound::Compute, eff)
}

fn pcie(rng: &mut Rng, subtle: bool) -> Incident {
    // x16 -> x8 or Gen5 -> Gen3: host transfers and GPUDirect RDMA through
    // the PCIe switch are capped; no XID.
    let (factor, width) = if subtle {
        (rng.range(1.03, 1.12), rng.range(0.5, 0.7))
    } else {
        (rng.range(1.15, 1.6), rng.range(0.2, 0.5))
    };
    let eff = Effect {
        pcie: width,
        ..Effect::NONE
    };
    slow("pcie_downgrade", factor, Bound::Comm, eff)
}

fn host(rng: &mut Rng, subtle: bool) -> Incident {
    // Machine-check / EDAC storms or a stuck core: the kernel burns CPU, the
    // data loader starves the GPUs; sometimes the host soft-locks.
    if !subtle && rng.chance(0.3) {
        let mut inc = crash("host_cpu_memory", true, After::Idle, rng);
        inc.eff.cpu = 60.0;
        return inc;
    }
    let factor = if subtle {
        rng.range(1.04, 1.15)
    } else {
        rng.range(1.2, 1.7)
    };
    let eff = Effect {
        cpu: rng.range(30.0, 60.0),
        mem: rng.range(-40.0, 40.0),
        ..Effect::NONE
    };
    slow("host_cpu_memory", factor, Bound::Input, eff)
}

/// A hardware fault of `kind`.
pub(crate) fn fault(kind: &'static str, subtle: bool, rng: &mut Rng) -> Incident {
    let mut inc = match kind {
        "ecc_uncorrectable" => ecc(rng),
        "gpu_off_bus" | "gsp_error" => gpu_gone(rng, kind),
        "nvlink_error" => nvlink(rng),
        "pcie_downgrade" => pcie(rng, subtle),
        "nic_down" => nic(rng, false, subtle),
        "nic_flap" => nic(rng, true, subtle),
        "thermal_throttle" => throttle(rng, false, subtle),
        "power_throttle" => throttle(rng, true, subtle),
        "slow_gpu" => slow_gpu(rng, subtle),
        "host_cpu_memory" => host(rng, subtle),
        _ => crash("unreachable", true, After::Gone, rng),
    };
    inc.subtle = subtle;
    inc
}

/// A user error of `kind` on healthy hardware.
pub(crate) fn user(kind: &'static str, rng: &mut Rng) -> Incident {
    match kind {
        "user_nan_exit" => Incident {
            // The script sees a NaN loss and every rank exits together.
            culprit: After::Idle,
            others: After::Idle,
            others_at: rng.int(0, 5),
            ..base(kind, false)
        },
        "user_deadlock" => Incident {
            // Mismatched collectives: every rank waits in NCCL forever.
            culprit: After::Spin,
            others: After::Spin,
            ..base(kind, false)
        },
        "user_stuck_barrier" => {
            // One rank loops in Python before a barrier: its GPU idles, its
            // seven local peers and every other node spin in the collective.
            let mut inc = crash(kind, false, After::Spin, rng);
            inc.eff.min_gpu = 0.0;
            inc.eff.cpu = 5.0;
            inc
        }
        "user_app_xid" => Incident {
            // Out-of-bounds kernel (13), page fault (31), app-triggered reset (43).
            xid: rng.pick(&[13, 31, 43]),
            ..crash(kind, false, After::Idle, rng)
        },
        "user_cuda_oom" => {
            let mut inc = crash(kind, false, After::Idle, rng);
            inc.eff.mem = 30.0;
            inc
        }
        _ => crash(kind, false, After::Idle, rng),
    }
}

/// Seconds from a crash until the job is killed: torchrun's agent tearing
/// the job down, the NCCL watchdog's 10 minutes, or PyTorch's default 30.
pub(crate) fn teardown(rng: &mut Rng) -> i64 {
    match rng.weighted(&[0.35, 0.4, 0.25]) {
        0 => rng.int(90, 180),
        1 => 600,
        _ => 1800,
    }
}
