//! Which jobs get a hardware fault, which a user error, on which node and
//! when; and how the incident cuts the job short.

use super::incident::{fault, teardown, user, FAULT_KINDS, SUBTLE_KINDS, USER_KINDS};
use super::plan::{After, JobKind, JobPlan, Phase};
use super::rng::Rng;
use super::IndependentSpec;

/// When every node has finished its (last) warm-up.
fn steady_from(job: &JobPlan) -> i64 {
    let lag = job.nodes.iter().map(|n| n.warm_lag).max().unwrap_or(0);
    job.spans
        .iter()
        .filter(|s| s.phase == Phase::Warmup)
        .map(|s| s.end + lag)
        .max()
        .unwrap_or(job.start)
}

fn permutation(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i + 1));
    }
    v
}

/// Places an incident on a job: onset, culprit node, the job's new end.
fn place(job: &mut JobPlan, mut inc: super::plan::Incident, node0: bool, rng: &mut Rng) {
    let steady = steady_from(job);
    let (lo, hi) = if inc.fault {
        (steady + 300, job.end - 480)
    } else if inc.name == "user_cuda_oom" && rng.chance(0.5) {
        // Most OOMs come at the first full step or the first eval.
        (steady, steady + 120)
    } else {
        (steady, job.end - 300)
    };
    inc.onset = rng.int(lo.min(hi), hi);
    let present: Vec<usize> = (0..job.nodes.len())
        .filter(|&i| job.nodes[i].from <= inc.onset && inc.onset < job.nodes[i].until)
        .collect();
    inc.node = if node0 && present.contains(&0) {
        0
    } else {
        present[rng.below(present.len())]
    };
    inc.others_at += inc.onset;
    inc.xid_at = inc.onset + rng.int(0, 5);
    if job.kind == JobKind::Inference && inc.others == After::Spin {
        // Independent replicas: the rest of the sweep carries on.
        inc.others = After::Same;
    }
    if inc.others != After::Same {
        let kill = if inc.name == "user_nan_exit" {
            inc.onset + rng.int(30, 120)
        } else {
            inc.onset + teardown(rng)
        };
        if kill < job.end {
            job.end = kill;
            if inc.name == "user_app_xid" || rng.chance(0.3) {
                // The kill raises XID 45 (preemptive cleanup) on every GPU.
                inc.cleanup_xid_at = Some(kill - 25);
            }
        }
    }
    if !inc.fault {
        job.confounders.insert(inc.name);
    }
    job.incident = Some(inc);
}

/// Gives ~`fault_share` of the jobs one faulty node (a fifth of them subtle)
/// and ~`user_share` a user error; a bad user's jobs crash alike.
pub(crate) fn assign(jobs: &mut [JobPlan], spec: &IndependentSpec, rng: &mut Rng) {
    let n = jobs.len();
    let faulty = (n as f64 * spec.fault_share).round() as usize;
    let users = ((n as f64 * spec.user_share).round() as usize).min(n - faulty);
    let subtle = ((faulty as f64) * 0.2).round() as usize;
    let repeat_kind = USER_KINDS[rng.pick(&[1usize, 5])].0;
    let repeaters = if users >= 4 {
        rng.int(2, 3) as usize
    } else {
        0
    };
    // A bad user's kernel raises the same application XID every time.
    let repeat_xid = rng.pick(&[13, 31, 43]);
    let fault_weights: Vec<f64> = FAULT_KINDS.iter().map(|k| k.1).collect();
    let user_weights: Vec<f64> = USER_KINDS.iter().map(|k| k.1).collect();
    for (k, j) in permutation(n, rng).into_iter().enumerate() {
        if k < faulty {
            let soft = k < subtle;
            let kind = if soft {
                SUBTLE_KINDS[rng.below(SUBTLE_KINDS.len())]
            } else {
                FAULT_KINDS[rng.weighted(&fault_weights)].0
            };
            let inc = fault(kind, soft, rng);
            place(&mut jobs[j], inc, false, rng);
        } else if k < faulty + users {
            let repeat = k - faulty < repeaters;
            let kind = if repeat {
                jobs[j].confounders.insert("repeat_offender");
                repeat_kind
            } else {
                USER_KINDS[rng.weighted(&user_weights)].0
            };
            let mut inc = user(kind, rng);
            if repeat && inc.xid != 0 {
                inc.xid = repeat_xid;
            }
            place(&mut jobs[j], inc, repeat, rng);
        }
    }
}
