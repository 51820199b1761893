//! What one node of a job is doing at one moment: the job's pace, its
//! phase, the incident and the environment, folded into a `State` that the
//! exporter turns into metrics.

use super::plan::{After, Bound, Incident, JobKind, JobPlan, Phase};

/// A node's activity at one time; rates are fractions of the job's profile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct State {
    /// GPU metrics can be read (DCGM is not hung).
    pub gpu: bool,
    /// Fraction of time doing real math: drives power, clocks, memory traffic.
    pub compute: f64,
    /// Fraction of time any kernel runs (NCCL spin counts): `gpu_util`.
    pub busy: f64,
    pub min_busy: f64,
    pub clock: f64,
    pub power_cap: f64,
    pub power_gain: f64,
    pub temp: f64,
    pub nvlink: f64,
    pub ib: f64,
    pub pcie: f64,
    pub pfc: f64,
    pub cnp: f64,
    pub cpu: f64,
    pub disk: f64,
    pub mem_gb: f64,
    pub xid: u32,
    pub nic_errors: f64,
}

impl State {
    /// Blocked in a collective (NCCL spins): util ~100%, little power, no traffic.
    fn spin(&mut self) {
        self.compute = 0.0;
        self.busy = 1.0;
        self.min_busy = 1.0;
        self.nvlink = 0.0;
        self.ib = 0.002;
        self.pcie = 0.02;
        self.disk *= 0.05;
    }

    /// No process on the GPUs.
    fn idle(&mut self, cpu: f64) {
        self.spin();
        self.busy = 0.0;
        self.min_busy = 0.0;
        self.ib = 0.0005;
        self.cpu = cpu;
    }

    /// The node's processes are gone: GPUs idle, their host memory freed.
    fn dead(&mut self, cpu: f64) {
        self.idle(cpu);
        self.mem_gb = 30.0;
        self.disk = 0.0;
    }
}

/// MoE: the node hosting the hot experts at `t` (it moves every period).
fn hot_node(job: &JobPlan, t: i64) -> Option<usize> {
    let period = job.hot_expert?;
    Some(((t - job.start) / period) as usize * 7919 % job.nodes.len())
}

/// The job's slowest factor at `t` and this node's own (1 = full pace).
fn pace(job: &JobPlan, i: usize, t: i64) -> (f64, f64) {
    let mut job_max = job.life_max;
    let mut own = job.nodes[i].speed;
    for env in &job.envs {
        let on = t >= env.start
            && t < env.end
            && env.cycle.is_none_or(|(a, b)| (t - env.start) % (a + b) < a);
        if on {
            job_max = job_max.max(env.factor);
            // A throttled node computes slower; congestion slows everyone's
            // transfers alike.
            if env.clock < 1.0 && env.nodes.contains(&i) {
                own = own.max(env.factor);
            }
        }
    }
    if let Some(inc) = &job.incident {
        if inc.culprit == After::Same && inc.active(t) {
            job_max = job_max.max(inc.factor);
            if inc.node == i && inc.bound == Bound::Compute {
                own = own.max(inc.factor);
            }
        }
    }
    if let Some(hot) = hot_node(job, t) {
        // The hot expert's node gets ~12% more tokens; all-to-all waits on it.
        job_max = job_max.max(1.12);
        if hot == i {
            own = own.max(1.12);
        }
    }
    if job.kind == JobKind::Inference {
        // Independent replicas: nobody waits for anybody.
        job_max = own;
    }
    (job_max, own)
}

/// Training at the job's pace, before phases and incidents.
fn running(job: &JobPlan, i: usize, t: i64) -> State {
    let node = &job.nodes[i];
    let p = &job.profile;
    let (job_max, own) = pace(job, i, t);
    let mut level = node.level;
    let mut comm = 1.0;
    if let Some(period) = job.role_switch {
        // Rollout workers decode (memory-bound, little fabric traffic),
        // learners train; the roles swap as the hybrid engine re-shards.
        let rollout = (((t - job.start) / period) % 2 == 0) == (node.group == 0);
        if rollout {
            level *= 0.75;
            comm = 0.25;
        }
    }
    if let Some((at, l)) = job.batch_change {
        if t >= at {
            level *= l;
            comm *= l;
        }
    }
    if hot_node(job, t) == Some(i) {
        // Its experts receive more tokens in the all-to-all.
        comm *= 1.2;
    }
    let compute = (p.compute * level * own / job_max).min(0.97);
    State {
        gpu: true,
        compute,
        busy: (0.62 + 0.36 * level).min(0.995),
        min_busy: (0.58 + 0.36 * level).min(0.99),
        clock: 1.0,
        power_cap: 1.0,
        power_gain: node.power_gain,
        temp: node.temp_off,
        nvlink: comm / job_max,
        ib: comm / job_max,
        pcie: 1.0 / job_max,
        pfc: 0.0,
        cnp: 0.0,
        cpu: p.cpu * (0.7 + 0.3 * level),
        disk: p.disk / job_max,
        mem_gb: p.mem_gb,
        xid: 0,
        nic_errors: 0.0,
    }
}

/// The phase this node is in: its own warm-up lag and checkpoint stagger
/// shift the job-wide spans.
pub(crate) fn phase_for(job: &JobPlan, i: usize, t: i64) -> Option<(Phase, f64)> {
    let node = &job.nodes[i];
    job.spans.iter().find_map(|s| {
        let (a, b) = match s.phase {
            Phase::Warmup => (s.start, s.end + node.warm_lag),
            Phase::Checkpoint => (s.start + node.ckpt_lag, s.end + node.ckpt_lag),
            _ => (s.start, s.end),
        };
        (t >= a && t < b).then(|| (s.phase, (t - a) as f64 / (b - a).max(1) as f64))
    })
}

/// Applies a phase to a running node.
fn apply_phase(s: &mut State, phase: Phase, progress: f64, i: usize, profile_disk: f64) {
    match phase {
        Phase::Warmup if progress < 0.4 => {
            // Loading shards, compiling, NCCL init: the CPUs work, GPUs wait.
            s.idle(55.0);
            s.disk = 2.0e9;
        }
        Phase::Warmup => {
            let r = (progress - 0.4) / 0.6;
            s.compute *= r;
            s.busy *= 0.3 + 0.7 * r;
            s.min_busy = s.min_busy.min(s.busy);
            s.nvlink *= r;
            s.ib *= r;
        }
        Phase::Checkpoint => {
            s.idle(45.0);
            s.busy = 0.08;
            s.disk = 3.0e9;
            s.mem_gb += 100.0;
        }
        Phase::Rank0Ckpt | Phase::NodeStall(_) => {
            let own = match phase {
                Phase::NodeStall(k) => k == i,
                _ => i == 0,
            };
            if own {
                s.idle(if phase == Phase::Rank0Ckpt {
                    50.0
                } else {
                    95.0
                });
                s.disk = if phase == Phase::Rank0Ckpt {
                    4.0e9
                } else {
                    0.1 * profile_disk
                };
            } else {
                s.spin();
            }
        }
        Phase::Eval => {
            s.compute *= 0.6;
            s.busy *= 0.88;
            s.ib *= 0.3;
            s.nvlink *= 0.5;
        }
        Phase::Stall => {
            s.idle(s.cpu + 20.0);
            s.busy = 0.05;
        }
        Phase::StorageOutage => {
            s.idle(5.0);
            s.disk = 0.0;
        }
        Phase::Gap => {}
    }
}

/// The incident's effect on node `i` at `t`; true when it halts the node's
/// normal work (phases no longer apply).
fn apply_incident(s: &mut State, inc: &Incident, i: usize, t: i64) -> bool {
    if t < inc.onset {
        return false;
    }
    if i != inc.node {
        match inc.others {
            After::Spin if t >= inc.others_at => s.spin(),
            After::Idle if t >= inc.others_at => s.dead(3.0),
            _ => return false,
        }
        return true;
    }
    if !inc.active(t) {
        return false;
    }
    let e = &inc.eff;
    match inc.culprit {
        After::Same if inc.bound == Bound::Input => {
            // Waiting for input, not in a collective: the kernels stop.
            s.busy = s.busy.min(s.compute + 0.06);
            s.min_busy = s.min_busy.min(s.busy);
        }
        After::Same | After::Gone => {}
        After::Idle => s.dead(3.0),
        After::Spin => s.spin(),
        After::Blind => {
            s.spin();
            // DCGM's queries hang a minute after the GSP stops answering.
            s.gpu = t < inc.onset + 60;
        }
    }
    s.clock *= e.clock;
    s.power_cap = s.power_cap.min(e.power_cap);
    s.temp += e.temp;
    s.nvlink *= e.nvlink;
    s.pcie *= e.pcie;
    s.ib *= e.ib;
    s.pfc += e.pfc;
    s.cnp += e.cnp;
    s.cpu += e.cpu;
    s.min_busy *= e.min_gpu;
    s.mem_gb += e.mem;
    s.nic_errors += e.nic_errors;
    inc.culprit != After::Same
}

/// The environment's marks on the node: pauses and CNPs, throttled clocks.
fn apply_envs(s: &mut State, job: &JobPlan, i: usize, t: i64) {
    for env in job.envs.iter().filter(|e| e.nodes.contains(&i)) {
        if t < env.start || t >= env.end {
            continue;
        }
        let on = env.cycle.is_none_or(|(a, b)| (t - env.start) % (a + b) < a);
        if on {
            s.pfc += env.pfc;
            s.cnp += env.cnp;
        }
        s.clock *= env.clock;
        s.temp += env.temp;
    }
}

/// DCGM's XID field: the node's value is the max over its GPUs of each
/// GPU's last XID, held until the exporter restarts. The stale XID, the
/// fault's and the kill's XID 45 land on different GPUs.
fn xid(job: &JobPlan, i: usize, t: i64) -> u32 {
    let node = &job.nodes[i];
    let restart = node
        .gaps
        .iter()
        .map(|g| g.1)
        .filter(|&end| end <= t)
        .max()
        .unwrap_or(i64::MIN);
    let never = (i64::MAX, 0);
    let mut events = [(i64::MIN + 1, node.stale_xid), never, never];
    if let Some(inc) = &job.incident {
        if inc.node == i && inc.xid != 0 {
            events[1] = (inc.xid_at, inc.xid);
        }
        if let Some(at) = inc.cleanup_xid_at {
            events[2] = (at, 45);
        }
    }
    events
        .iter()
        .filter(|(at, _)| *at <= t && *at >= restart)
        .map(|e| e.1)
        .max()
        .unwrap_or(0)
}

/// Node `i` of `job` at true time `t`, or None when it reports nothing
/// (not in the job, requeued, exporter down, unreachable).
pub(crate) fn sample(job: &JobPlan, i: usize, t: i64) -> Option<State> {
    let node = &job.nodes[i];
    if t < node.from || t >= node.until || t < job.start || t >= job.end {
        return None;
    }
    if node.gaps.iter().any(|g| t >= g.0 && t < g.1) {
        return None;
    }
    let phase = phase_for(job, i, t);
    if matches!(phase, Some((Phase::Gap, _))) {
        return None;
    }
    if let Some(inc) = &job.incident {
        if inc.node == i && inc.culprit == After::Gone && t >= inc.onset {
            return None;
        }
    }
    let mut s = running(job, i, t);
    let halted = job
        .incident
        .as_ref()
        .is_some_and(|inc| apply_incident(&mut s, inc, i, t));
    if !halted {
        if let Some((p, progress)) = phase {
            apply_phase(&mut s, p, progress, i, job.profile.disk);
        }
    }
    apply_envs(&mut s, job, i, t);
    s.xid = xid(job, i, t);
    Some(s)
}
