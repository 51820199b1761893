//! Site-wide confounders: a storage outage that stalls every running job,
//! other tenants' bursts congesting a leaf switch, a link flapping elsewhere
//! on the fabric, a hot rack throttled for a while. Each touches the jobs
//! that have nodes under it at the time.

use super::plan::{Env, JobPlan, Phase, Span};
use super::rng::Rng;

fn overlaps(job: &JobPlan, start: i64, end: i64) -> bool {
    job.start < end && start < job.end
}

/// A time when some job runs, and one of its slots: events land where jobs are.
fn somewhere(jobs: &[JobPlan], rng: &mut Rng) -> (i64, usize) {
    let job = &jobs[rng.below(jobs.len())];
    let t = rng.int(job.start + 400, (job.end - 600).max(job.start + 400));
    (t, job.nodes[rng.below(job.nodes.len())].gid)
}

/// The shared file system stops answering: every running job's data loaders
/// and checkpoint writers block, all nodes of all jobs at once.
fn storage_outage(jobs: &mut [JobPlan], rng: &mut Rng) {
    if !rng.chance(0.7) {
        return;
    }
    let (t, _) = somewhere(jobs, rng);
    let end = t + rng.int(120, 360);
    for job in jobs.iter_mut().filter(|j| overlaps(j, t, end)) {
        job.confounders.insert("storage_outage");
        job.spans.push(Span {
            start: t,
            end,
            phase: Phase::StorageOutage,
        });
    }
}

/// Applies an environment effect to the nodes of every job that `hit` selects.
fn touch(jobs: &mut [JobPlan], name: &'static str, env: &Env, hit: impl Fn(usize) -> bool) {
    for job in jobs.iter_mut().filter(|j| overlaps(j, env.start, env.end)) {
        let nodes: Vec<usize> = (0..job.nodes.len())
            .filter(|&i| hit(job.nodes[i].gid))
            .collect();
        if nodes.is_empty() {
            continue;
        }
        job.confounders.insert(name);
        job.envs.push(Env {
            nodes,
            ..env.clone()
        });
    }
}

/// Another tenant's all-to-all under one leaf: PFC pauses and CNPs on the
/// leaf's ports, the job a little slower while the bursts last.
fn leaf_congestion(jobs: &mut [JobPlan], rng: &mut Rng) {
    for _ in 0..rng.int(2, 4) {
        let (t, gid) = somewhere(jobs, rng);
        let env = Env {
            start: t,
            end: t + rng.int(300, 900),
            nodes: Vec::new(),
            factor: rng.range(1.02, 1.10),
            clock: 1.0,
            temp: 0.0,
            pfc: rng.range(2e3, 3e4),
            cnp: rng.range(1e3, 2e4),
            cycle: Some((rng.int(20, 60), rng.int(20, 90))),
        };
        touch(jobs, "leaf_congestion", &env, |g| g / 32 == gid / 32);
    }
}

/// A spine link flapping: flows hashed onto it stall and retransmit; a
/// quarter of every multi-leaf job's nodes see CNP bursts.
fn fabric_flap(jobs: &mut [JobPlan], rng: &mut Rng) {
    if !rng.chance(0.6) {
        return;
    }
    let (t, _) = somewhere(jobs, rng);
    let salt = rng.below(4);
    let env = Env {
        start: t,
        end: t + rng.int(600, 1200),
        nodes: Vec::new(),
        factor: rng.range(1.03, 1.15),
        clock: 1.0,
        temp: 0.0,
        pfc: rng.range(100.0, 2e3),
        cnp: rng.range(1e3, 5e3),
        cycle: Some((rng.int(10, 30), rng.int(60, 180))),
    };
    for job in jobs.iter_mut() {
        let leaves = job.nodes.iter().map(|n| n.gid / 32);
        if leaves.clone().min() != leaves.max() {
            touch(std::slice::from_mut(job), "fabric_flap", &env, |g| {
                (g / 2 + salt).is_multiple_of(4)
            });
        }
    }
}

/// A rack whose cooling fails for a while: its GPUs throttle (clock down,
/// temperature up) and the jobs on it run at the throttled node's pace.
fn hot_rack(jobs: &mut [JobPlan], rng: &mut Rng) {
    for _ in 0..rng.int(1, 3) {
        let (t, gid) = somewhere(jobs, rng);
        let clock = rng.range(0.78, 0.92);
        let env = Env {
            start: t,
            end: t + rng.int(600, 1500),
            nodes: Vec::new(),
            factor: 1.0 / clock,
            clock,
            temp: rng.range(10.0, 16.0),
            pfc: 0.0,
            cnp: 0.0,
            cycle: None,
        };
        touch(jobs, "hot_rack", &env, |g| g / 4 == gid / 4);
    }
}

pub(crate) fn site_events(jobs: &mut [JobPlan], rng: &mut Rng) {
    if jobs.is_empty() {
        return;
    }
    storage_outage(jobs, rng);
    leaf_congestion(jobs, rng);
    fabric_flap(jobs, rng);
    hot_rack(jobs, rng);
}
