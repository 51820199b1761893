//! What a node is doing at one instant: the share of time its GPUs compute,
//! spin inside NCCL or sit idle, and the traffic, CPU and disk that go with
//! it. Synchronous jobs are coupled through [`Pace`]: the slowest coupled
//! node sets the iteration time, and everyone else waits for it.

use super::plan::{Act, CkptMode, Ev, FaultKind, JobPlan, Role, Seg};
use super::rng::{hnorm, hunit};

/// The instantaneous state of one node (shares are 0..1, traffic is a
/// share of the node's peak).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Load {
    pub busy: f64,
    pub spin: f64,
    /// SM activity that draws power (compute and a little for spinning).
    pub act: f64,
    pub membw: f64,
    pub ib_tx: f64,
    pub ib_rx: f64,
    pub nvl: f64,
    /// Host-device traffic besides GPUDirect RDMA, bytes/s.
    pub pcie: f64,
    pub cpu: f64,
    pub disk: f64,
    pub mem: f64,
    pub clock: f64,
    pub temp: f64,
    pub min_gap: f64,
    pub pfc: f64,
    pub cnp: f64,
    pub eth: f64,
    pub nic_err: f64,
    pub xid: f64,
    pub width: f64,
    /// 1 while the job's processes hold the GPUs (clocks stay up).
    pub alive: f64,
}

impl Load {
    fn idle(mem: f64) -> Self {
        Load {
            cpu: 2.0,
            mem,
            clock: 1.0,
            pfc: 1.0,
            cnp: 1.0,
            width: 16.0,
            ..Load::default()
        }
    }

    pub(crate) fn add_scaled(&mut self, o: &Load, w: f64) {
        self.busy += o.busy * w;
        self.spin += o.spin * w;
        self.act += o.act * w;
        self.membw += o.membw * w;
        self.ib_tx += o.ib_tx * w;
        self.ib_rx += o.ib_rx * w;
        self.nvl += o.nvl * w;
        self.pcie += o.pcie * w;
        self.cpu += o.cpu * w;
        self.disk += o.disk * w;
        self.mem += o.mem * w;
        self.clock += o.clock * w;
        self.temp += o.temp * w;
        self.min_gap += o.min_gap * w;
        self.pfc += o.pfc * w;
        self.cnp += o.cnp * w;
        self.eth += o.eth * w;
        self.nic_err += o.nic_err * w;
        self.xid = self.xid.max(o.xid);
        self.width += o.width * w;
        self.alive += o.alive * w;
    }

    /// Blocked in a collective: the NCCL kernel spins, so the GPUs read as
    /// busy, but they draw little power and move no data.
    pub(crate) fn blocked(&mut self) {
        (self.busy, self.spin, self.ib_tx, self.ib_rx, self.nvl) = (0.0, 0.95, 2e-4, 2e-4, 1e-4);
        self.act = 0.1;
    }

    /// The node whose link is flapping: its ranks sit in retries.
    pub(crate) fn off_gpu_flap(&mut self) {
        (self.busy, self.spin, self.ib_tx, self.ib_rx, self.act) = (0.0, 0.6, 0.1, 0.1, 0.06);
        (self.pfc, self.cnp, self.nic_err) =
            (self.pfc * 50.0, self.cnp * 50.0, self.nic_err + 500.0);
    }

    /// Off the GPU: waiting on the CPU, the disk or a remote service.
    pub(crate) fn off_gpu(&mut self) {
        (self.busy, self.spin, self.ib_tx, self.ib_rx, self.nvl) = (0.0, 0.0, 1e-4, 1e-4, 0.0);
        self.act = 0.01;
    }
}

fn coupled(role: Role) -> bool {
    matches!(role, Role::Worker | Role::Trainer)
}

/// The job's iteration pace on a 5 s grid: the slowest coupled node's
/// compute per iteration, and the communication time.
pub(crate) struct Pace {
    grid: Vec<(f64, f64)>,
}

const STEP: i64 = 5;

impl Pace {
    pub(crate) fn new(job: &JobPlan) -> Self {
        let grid = (0..=job.duration / STEP + 1)
            .map(|k| {
                let t = k * STEP;
                let dmax = (0..job.nodes.len())
                    .filter(|i| coupled(job.nodes[*i].role))
                    .map(|i| demand(job, i, t, true))
                    .fold(0.0, f64::max);
                (dmax.max(0.3), comm(job, t))
            })
            .collect();
        Pace { grid }
    }

    fn at(&self, t: i64) -> (f64, f64) {
        self.grid[((t.max(0) / STEP) as usize).min(self.grid.len() - 1)]
    }
}

/// Compute per iteration of node `i` at `t` (1 = a nominal node). With
/// `with_host`, a slow host's CPU time counts (it delays the job but is
/// not GPU work).
fn demand(job: &JobPlan, i: usize, t: i64, with_host: bool) -> f64 {
    let node = &job.nodes[i];
    let mut d = node.level * node.speed;
    if job.skew_sd > 0.0 {
        d *= 1.0 + job.skew_sd * hnorm(job.seed, i as u64, (t / job.skew_block) as u64);
    }
    if job.moe_amp > 0.0 {
        // Hot experts wander: interpolate between 5-minute draws.
        let (k, f) = (t / 300, (t % 300) as f64 / 300.0);
        let a = hnorm(job.seed ^ 0x3e, i as u64, k as u64);
        let b = hnorm(job.seed ^ 0x3e, i as u64, k as u64 + 1);
        d *= (1.0 + job.moe_amp * (a * (1.0 - f) + b * f)).max(0.5);
    }
    for e in job.events.iter().filter(|e| t >= e.a && t < e.b) {
        match e.ev {
            Ev::Batch(f) => d *= f,
            Ev::HotRack { rack, slow } if rack == node.rack => d /= 1.0 - slow * 0.8,
            Ev::Noisy { node: k, slow, .. } if k == i => d *= 1.0 + slow,
            _ => {}
        }
    }
    if let Some(f) = job.fault.as_ref().filter(|f| f.node == i && t >= f.onset) {
        let before_halt = f.halt.is_none_or(|h| t < h);
        match f.kind {
            FaultKind::ThermalThrottle => d /= 1.0 - f.severity,
            FaultKind::SlowHost if with_host => d /= 1.0 - f.severity,
            FaultKind::Ecc if before_halt => d *= 1.0 + f.severity,
            _ => {}
        }
    }
    d
}

fn comm(job: &JobPlan, t: i64) -> f64 {
    let mut c = job.comm;
    for e in job.events.iter().filter(|e| t >= e.a && t < e.b) {
        if let Ev::Leaf { leaf, slow } = e.ev {
            if job.nodes.iter().any(|n| n.leaf == leaf) {
                c *= 1.0 + slow;
            }
        }
    }
    if let Some(f) = job
        .fault
        .as_ref()
        .filter(|f| t >= f.onset && f.halt.is_none_or(|h| t < h))
    {
        c *= match f.kind {
            FaultKind::PcieDowngrade => 1.0 + f.severity * 0.6,
            FaultKind::DegradedLink => 1.0 / (1.0 - f.severity),
            FaultKind::NvlinkError => 1.0 + f.severity * 0.3,
            FaultKind::AocCable => 1.0 + f.severity * 0.5,
            _ => 1.0,
        };
    }
    c
}

pub(crate) fn seg_at(job: &JobPlan, t: i64) -> Option<(i64, i64, Seg)> {
    job.segs.iter().copied().find(|s| t >= s.0 && t < s.1)
}

fn act_at(job: &JobPlan, t: i64) -> (i64, i64, Act) {
    job.acts
        .iter()
        .copied()
        .find(|a| t >= a.0 && t < a.1)
        .unwrap_or((0, job.duration, Act::Train))
}

/// Node `i`'s load at job-relative second `t`.
pub(crate) fn load(job: &JobPlan, pace: &Pace, i: usize, t: i64) -> Load {
    let node = &job.nodes[i];
    let Some((a, b, seg)) = seg_at(job, t) else {
        return Load::idle(node.mem * 0.4);
    };
    let dead = job
        .fault
        .as_ref()
        .is_some_and(|f| f.node == i && f.halt.is_some_and(|h| t >= h));
    let mut l = match seg {
        Seg::Idle => Load::idle(node.mem * 0.4),
        Seg::Hung | Seg::InitHung if dead => Load::idle(node.mem * 0.8),
        Seg::Hung => {
            let mut l = train(job, pace, i, t);
            l.blocked();
            (l.cpu, l.disk) = (job.cpu_base * 0.3 + 3.0, 0.0);
            l
        }
        Seg::InitHung => {
            let mut l = train(job, pace, i, t);
            l.off_gpu();
            (l.cpu, l.disk) = (4.0, 0.0);
            l
        }
        Seg::Init => init(job, pace, i, t, (t - a) as f64 / (b - a).max(1) as f64),
        Seg::Train => {
            let mut l = phase(job, pace, i, t);
            events(job, i, t, &mut l);
            l
        }
    };
    if seg != Seg::Idle {
        super::faults::apply(job, i, t, &mut l);
    }
    l
}

fn init(job: &JobPlan, pace: &Pace, i: usize, t: i64, p: f64) -> Load {
    let node = &job.nodes[i];
    let q = (p - 0.15 * hunit(job.seed, i as u64, 11)).clamp(0.0, 1.0);
    let mut l = train(job, pace, i, t);
    if q < 0.6 {
        // Loading the checkpoint and the data index: CPU and disk, GPUs idle.
        l.off_gpu();
        l.busy = 0.03;
        l.cpu += 25.0;
        l.disk = job.disk_read * 6.0;
        l.mem = node.mem * (0.3 + q);
    } else {
        // First iterations: compilation, autotuning, nodes arriving late.
        let r = (q - 0.6) / 0.4;
        l.busy *= 0.2 + 0.8 * r;
        l.spin = (1.0 - l.busy).min(l.spin + 0.4 * (1.0 - r));
        l.ib_tx *= r;
        l.ib_rx *= r;
        l.nvl *= r;
    }
    l.act = l.busy * job.intensity + l.spin * 0.1;
    l
}

/// Steady synchronous training of a coupled node.
pub(crate) fn train(job: &JobPlan, pace: &Pace, i: usize, t: i64) -> Load {
    let node = &job.nodes[i];
    let (dmax, c) = pace.at(t);
    let own = demand(job, i, t, false);
    let period = dmax + c;
    let busy = (own / period * (1.0 - node.bubble)).clamp(0.0, 1.0);
    let spin = (1.0 - busy - node.bubble * 0.5).max(0.0) * job.kappa;
    let rate = (1.0 + job.comm) / period;
    let ib = (job.ib_frac * node.ib_share * rate).min(0.95);
    Load {
        busy,
        spin,
        act: busy * job.intensity + spin * 0.1,
        membw: job.membw,
        ib_tx: ib,
        ib_rx: ib,
        nvl: (job.nvl_frac * node.nvl_share * rate).min(0.9),
        pcie: 1.5e9 * rate,
        cpu: job.cpu_base + node.cpu,
        disk: job.disk_read * rate,
        mem: node.mem,
        clock: 1.0,
        width: 16.0,
        pfc: 1.0,
        cnp: 1.0,
        alive: 1.0,
        ..Load::default()
    }
}

/// The node's load in the job's current phase (RL, benchmark or training).
fn phase(job: &JobPlan, pace: &Pace, i: usize, t: i64) -> Load {
    let role = job.nodes[i].role;
    let (a, b, act) = act_at(job, t);
    let mut l = train(job, pace, i, t);
    let parked = |l: &mut Load| {
        l.off_gpu();
        l.busy = 0.03;
        l.act = 0.02;
        l.cpu = job.cpu_base * 0.5;
    };
    match (act, role) {
        (Act::Train, Role::Worker | Role::Trainer) => {}
        (Act::Train, Role::Teacher) => {
            (l.busy, l.spin, l.ib_tx, l.ib_rx) = (0.45, 0.2, l.ib_tx * 0.3, l.ib_tx * 0.1);
            l.act = 0.45 * job.intensity * 0.8 + 0.02;
        }
        (Act::Rollout, Role::Worker | Role::Rollout) => {
            // Long generations finish last: each node's tail differs per round.
            let done = b - (90.0 * hunit(job.seed, i as u64, a as u64)) as i64;
            if t < done {
                (l.busy, l.spin, l.ib_tx, l.ib_rx) = (0.85, 0.05, 0.02, 0.02);
                (l.act, l.membw, l.nvl) = (0.85 * 0.55, 0.8, 0.15);
            } else {
                parked(&mut l);
            }
        }
        (Act::Rollout, Role::Reward) | (Act::Reward, Role::Reward) => {
            let busy = if act == Act::Reward { 0.9 } else { 0.3 };
            (l.busy, l.spin, l.ib_tx, l.ib_rx, l.act) = (busy, 0.0, 0.01, 0.02, busy * 0.7);
        }
        (Act::Sync, Role::Worker | Role::Trainer | Role::Rollout) => {
            (l.busy, l.spin, l.ib_tx, l.ib_rx, l.nvl) = (0.05, 0.7, 0.5, 0.5, 0.3);
            l.act = 0.12;
        }
        (Act::Sweep, _) => {
            // nccl-tests: message size doubles every few seconds, then again.
            let f = ((t - a) % 60) as f64 / 60.0;
            (l.busy, l.spin, l.ib_tx, l.ib_rx, l.nvl) =
                (0.05, 0.93, 0.9 * f.sqrt(), 0.9 * f.sqrt(), 0.6 * f.sqrt());
            l.act = 0.15 + 0.2 * f;
        }
        (Act::Gemm, _) => {
            (l.busy, l.spin, l.act, l.ib_tx, l.ib_rx, l.membw) = (0.98, 0.0, 0.98, 0.0, 0.0, 0.6)
        }
        (Act::Infer, Role::Prefill) => {
            (l.busy, l.spin, l.act, l.ib_tx, l.ib_rx, l.membw) = (0.8, 0.0, 0.7, 0.15, 0.01, 0.5)
        }
        (Act::Infer, Role::Decode) => {
            (l.busy, l.spin, l.act, l.ib_tx, l.ib_rx, l.membw) = (0.9, 0.0, 0.42, 0.02, 0.15, 0.85)
        }
        (Act::Infer, Role::Worker) => {
            (l.busy, l.spin, l.act, l.ib_tx, l.ib_rx, l.membw) = (0.65, 0.05, 0.36, 0.03, 0.03, 0.8)
        }
        (_, Role::Client) => {
            parked(&mut l);
            (l.cpu, l.eth) = (45.0, 2e8);
        }
        _ => parked(&mut l),
    }
    l
}

/// The healthy events of a training stretch, as they touch node `i`.
fn events(job: &JobPlan, i: usize, t: i64, l: &mut Load) {
    let node = &job.nodes[i];
    let trains = coupled(node.role) && act_at(job, t).2 == Act::Train;
    for e in job.events.iter().filter(|e| t >= e.a && t < e.b) {
        let p = (t - e.a) as f64 / (e.b - e.a).max(1) as f64;
        match e.ev {
            Ev::Ckpt(mode) if trains => checkpoint(job, i, e.a, p, mode, l),
            Ev::Eval if trains => {
                let done = 1.0 - 0.15 * hunit(job.seed, i as u64, e.a as u64);
                if p > done || (i != 0 && job.has("rank0_extra") && p > 0.9) {
                    l.blocked();
                } else if i == 0 && job.has("rank0_extra") && p > 0.9 {
                    l.off_gpu();
                    l.cpu += 30.0;
                } else {
                    l.busy *= 0.8;
                    (l.ib_tx, l.ib_rx, l.nvl) = (l.ib_tx * 0.1, l.ib_rx * 0.1, l.nvl * 0.5);
                    l.act = l.busy * job.intensity * 0.65 + l.spin * 0.1;
                    l.membw *= 1.1;
                }
            }
            Ev::StallNode(k) if trains && k == i => {
                l.off_gpu();
                (l.cpu, l.disk) = (l.cpu + 40.0, l.disk * 3.0);
            }
            Ev::StallNode(_) if trains => l.blocked(),
            Ev::StallAll if trains && p > 0.1 * hunit(job.seed, i as u64, e.a as u64) => {
                l.off_gpu();
                l.busy = 0.05;
                (l.cpu, l.disk) = (l.cpu + 15.0, l.disk * 0.2);
            }
            Ev::Upload if i == 0 => {
                (l.cpu, l.disk, l.eth) = (l.cpu + 15.0, l.disk + 2e9, l.eth + 2.5e9)
            }
            Ev::Noisy { node: k, cpu, .. } if k == i => {
                (l.cpu, l.mem) = (l.cpu + cpu, l.mem + 30.0)
            }
            Ev::Leaf { leaf, slow } if leaf == node.leaf => {
                (l.pfc, l.cnp) = (l.pfc * (1.0 + 300.0 * slow), l.cnp * (1.0 + 150.0 * slow));
                (l.ib_tx, l.ib_rx) = (l.ib_tx * (1.0 - 0.3 * slow), l.ib_rx * (1.0 - 0.3 * slow));
            }
            Ev::HotRack { rack, slow } if rack == node.rack => {
                (l.clock, l.temp) = (l.clock * (1.0 - slow), l.temp + 10.0);
            }
            _ => {}
        }
        l.act = l.act.max(l.busy * 0.2);
    }
    if i == 0 && job.has("rank0_extra") {
        // Logging and metric writes from rank 0, in bursts about once a minute.
        l.disk += if t % 60 < 5 { 4e8 } else { 2e7 };
    }
}

fn checkpoint(job: &JobPlan, i: usize, a: i64, p: f64, mode: CkptMode, l: &mut Load) {
    match mode {
        CkptMode::Rank0 if p < 0.1 => {
            // Gathering the full state on rank 0.
            l.blocked();
            l.ib_tx = 0.4;
            l.ib_rx = if i == 0 { 0.8 } else { 0.1 };
        }
        CkptMode::Rank0 if i == 0 => {
            l.off_gpu();
            (l.cpu, l.disk, l.pcie) = (l.cpu + 35.0, 3e9, if p < 0.2 { 2e10 } else { 1e9 });
        }
        CkptMode::Rank0 => l.blocked(),
        CkptMode::Sharded => {
            let done = 0.6 + 0.4 * hunit(job.seed, i as u64, a as u64);
            if p < done {
                l.off_gpu();
                (l.cpu, l.disk, l.pcie) = (l.cpu + 20.0, 1.5e9, if p < 0.1 { 1e10 } else { 5e8 });
            } else {
                l.blocked();
            }
        }
        CkptMode::Async if p < 0.08 => {
            (l.busy, l.spin, l.pcie) = (0.1, 0.3, 3e10);
        }
        CkptMode::Async => {
            l.busy *= 0.95;
            (l.cpu, l.disk) = (l.cpu + 10.0, l.disk + 1e9);
        }
    }
    l.act = l.busy * job.intensity + l.spin * 0.1;
}
