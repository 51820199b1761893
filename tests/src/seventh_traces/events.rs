//! The job's healthy events: checkpoints, evaluations, stalls, batch-size
//! steps, congestion, hot aisles, noisy neighbours and exporter trouble.

use super::plan::{CkptMode, Ev, Event, JobPlan, Role, Workload};
use super::rng::Rng;

pub(crate) fn draw(job: &JobPlan, rng: &mut Rng) -> Vec<Event> {
    let mut out = Vec::new();
    let (t0, t1) = (job.init_len, job.duration);
    let n = job.nodes.len();
    let bench = job.workload == Workload::EvalBench;
    if job.has("checkpoint") && !bench {
        checkpoints(job, rng, &mut out);
    }
    if job.has("eval_phase") {
        let every = rng.int(600, 1500);
        let mut t = t0 + first(rng, every, t1 - t0);
        while t < t1 {
            let len = rng.int(60, 240);
            out.push(Event {
                a: t,
                b: t + len,
                ev: Ev::Eval,
            });
            t += every;
        }
    }
    if job.has("dataloader_stall") {
        let per_hour = if job.workload == Workload::Multimodal {
            rng.range(8.0, 16.0)
        } else {
            rng.range(3.0, 12.0)
        };
        let count = (per_hour * (t1 - t0) as f64 / 3600.0).round().max(1.0) as usize;
        let coupled: Vec<usize> = (0..n)
            .filter(|i| matches!(job.nodes[*i].role, Role::Worker | Role::Trainer))
            .collect();
        let coupled = if coupled.is_empty() {
            (0..n).collect()
        } else {
            coupled
        };
        for _ in 0..count {
            let a = rng.int(t0, t1 - 30);
            // Only a node in the synchronous group can hold the others up.
            let k = coupled[rng.below(coupled.len())];
            let ev = if rng.chance(0.7) {
                Ev::StallNode(k)
            } else {
                Ev::StallAll
            };
            out.push(Event {
                a,
                b: a + rng.int(8, 75),
                ev,
            });
        }
    }
    if job.has("lr_batch_change") {
        for _ in 0..rng.int(1, 3) {
            let f = if rng.chance(0.6) {
                rng.range(1.15, 1.6)
            } else {
                rng.range(0.75, 0.92)
            };
            out.push(Event {
                a: rng.int(t0 + 60, t1 - 60),
                b: t1,
                ev: Ev::Batch(f),
            });
        }
    }
    episodes(job, rng, &mut out);
    exporters(job, rng, &mut out);
    out.sort_by_key(|e| (e.a, e.b));
    out
}

fn checkpoints(job: &JobPlan, rng: &mut Rng, out: &mut Vec<Event>) {
    let mode = match rng.weighted(&[0.35, 0.4, 0.25]) {
        0 => CkptMode::Rank0,
        1 => CkptMode::Sharded,
        _ => CkptMode::Async,
    };
    let every = rng.int(480, 1800);
    let len = match mode {
        CkptMode::Rank0 => rng.int(40, 180),
        CkptMode::Sharded => rng.int(30, 120),
        CkptMode::Async => rng.int(60, 240),
    };
    let upload = job.has("rank0_extra") && rng.chance(0.6);
    let mut t = job.init_len + first(rng, every, job.duration - job.init_len);
    while t < job.duration {
        let b = t + (len as f64 * rng.range(0.85, 1.2)) as i64;
        out.push(Event {
            a: t,
            b,
            ev: Ev::Ckpt(mode),
        });
        if upload {
            out.push(Event {
                a: b,
                b: b + rng.int(120, 480),
                ev: Ev::Upload,
            });
        }
        t += every;
    }
}

/// Episodes that touch a group of nodes for minutes: a congested leaf, a
/// hot aisle, a noisy process on one host.
fn episodes(job: &JobPlan, rng: &mut Rng, out: &mut Vec<Event>) {
    let (t0, t1) = (job.init_len, job.duration);
    let n = job.nodes.len();
    let span = |rng: &mut Rng, lo: i64, hi: i64| {
        let len = rng.int(lo, hi);
        let a = rng.int(t0, (t1 - len).max(t0));
        (a, a + len)
    };
    if job.has("leaf_congestion") {
        for _ in 0..rng.int(1, 2) {
            let leaf = job.nodes[rng.below(n)].leaf;
            let (a, b) = span(rng, 300, 1200);
            out.push(Event {
                a,
                b,
                ev: Ev::Leaf {
                    leaf,
                    slow: rng.range(0.1, 0.4),
                },
            });
        }
    }
    if job.has("rack_throttle") {
        for _ in 0..rng.int(1, 2) {
            let rack = job.nodes[rng.below(n)].rack;
            let (a, b) = span(rng, 300, 1500);
            out.push(Event {
                a,
                b,
                ev: Ev::HotRack {
                    rack,
                    slow: rng.range(0.05, 0.2),
                },
            });
        }
    }
    if job.has("noisy_neighbour") {
        for _ in 0..rng.int(1, 3) {
            let node = rng.below(n);
            let (a, b) = span(rng, 180, 900);
            let ev = Ev::Noisy {
                node,
                cpu: rng.range(15.0, 45.0),
                slow: rng.range(0.01, 0.05),
            };
            out.push(Event { a, b, ev });
        }
    }
}

fn exporters(job: &JobPlan, rng: &mut Rng, out: &mut Vec<Event>) {
    let n = job.nodes.len();
    let end = job.duration;
    if job.has("exporter_gap") {
        for _ in 0..rng.int(1, 3) {
            let a = rng.int(60, end - 360);
            out.push(Event {
                a,
                b: a + rng.int(60, 300),
                ev: Ev::Gap(rng.below(n)),
            });
        }
    }
    if job.has("exporter_restart") {
        for _ in 0..rng.int(1, 2) {
            let a = rng.int(60, end - 120);
            out.push(Event {
                a,
                b: a + rng.int(20, 90),
                ev: Ev::ExporterRestart(rng.below(n)),
            });
        }
    }
}

/// The first of a periodic event: within one period, and early enough that
/// a short job sees it at least once.
fn first(rng: &mut Rng, every: i64, span: i64) -> i64 {
    let within = (every as f64 * rng.range(0.3, 1.0)) as i64;
    within.min((span as f64 * rng.range(0.25, 0.6)) as i64)
}
