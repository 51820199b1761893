//! One node's reading at one instant: the job's phase, its step, its
//! events and its fault turned into a `State`, and the state into rows.

use super::design::{EvKind, Event, JobDesign, NodeDesign};
use super::faults;
use super::rng::{unit2, Rng};

const GRID: i64 = 5;

/// What a node is doing at an instant.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Phase {
    Absent,
    Idle,
    Init,
    Train { since: i64 },
    Hung,
    Dead,
}

/// The physical state behind one scrape; `emit` turns it into values.
#[derive(Clone, Debug, Default)]
pub(super) struct State {
    pub gpus: f64,
    pub busy: f64,
    pub sm: f64,
    pub ib: f64,
    pub ib_rx_extra: f64,
    pub ib_tx_extra: f64,
    pub nvl: f64,
    pub pcie: f64,
    pub cpu: f64,
    pub disk: f64,
    pub mem_gib: f64,
    pub pfc: f64,
    pub cnp: f64,
    pub clock_f: f64,
    pub power_mult: f64,
    pub temp_add: f64,
    pub min_gap: f64,
    pub mem_util_mult: f64,
    pub xid: f64,
    pub nic_err: f64,
    pub gpu_gone: bool,
    pub zero: bool,
}

/// The job's pace (1 / the slowest node's work) and step progress on a 5 s grid.
pub(super) struct Ctx {
    start: i64,
    pace: Vec<f64>,
    progress: Vec<f64>,
}

impl Ctx {
    pub(super) fn new(job: &JobDesign) -> Ctx {
        let (start, end) = (job.life.start, job.life.end);
        let len = ((end - start) / GRID + 2) as usize;
        let mut pace = Vec::with_capacity(len);
        let mut progress = Vec::with_capacity(len);
        let mut done = 0.0;
        for g in 0..len {
            let t = start + g as i64 * GRID;
            let slowest = (0..job.nodes.len())
                .filter(|&i| live(job, i, t))
                .map(|i| work(job, i, t))
                .fold(1.0, f64::max);
            let p = 1.0 / slowest;
            progress.push(done);
            done += p * GRID as f64 / (job.step * batch_mult(job, t));
            pace.push(p);
        }
        Ctx {
            start,
            pace,
            progress,
        }
    }

    fn at(&self, t: i64) -> (f64, f64) {
        let x = ((t - self.start).max(0) as f64) / GRID as f64;
        let g = (x as usize).min(self.pace.len() - 2);
        let frac = (x - g as f64).min(1.0);
        let prog = self.progress[g] + (self.progress[g + 1] - self.progress[g]) * frac;
        (self.pace[g], prog)
    }
}

fn live(job: &JobDesign, i: usize, t: i64) -> bool {
    let n = &job.nodes[i];
    let crashed = job
        .fault
        .as_ref()
        .is_some_and(|f| f.node == i && f.crash_at.is_some_and(|c| c <= t));
    n.from <= t && t < n.until && !crashed
}

pub(super) fn active(e: &Event, i: usize, t: i64) -> bool {
    if t < e.start || t >= e.end + e.stagger {
        return false;
    }
    if !e.nodes.is_empty() && !e.nodes.contains(&i) {
        return false;
    }
    let off = (unit2(e.id, i as u64) * e.stagger as f64) as i64;
    e.start + off <= t && t < e.end + off
}

fn batch_mult(job: &JobDesign, t: i64) -> f64 {
    job.events
        .iter()
        .filter(|e| e.kind == EvKind::BatchChange && e.start <= t)
        .map(|e| e.mag)
        .product()
}

/// How much longer than a nominal node this node takes per step at `t`.
pub(super) fn work(job: &JobDesign, i: usize, t: i64) -> f64 {
    let node = &job.nodes[i];
    let mut w = node.work * job.stage_work[node.stage.min(job.stages - 1)];
    w *= 1.0 + 0.04 * (1.0 - node.nic_frac);
    for e in job.events.iter().filter(|e| active(e, i, t)) {
        w *= match e.kind {
            EvKind::RackThrottle => 1.0 / e.mag.powf(0.7),
            EvKind::RackPowerCap => 1.0 / (1.0 - (1.0 - e.mag) * 0.5),
            EvKind::LeafCongestion => 1.0 + e.mag,
            EvKind::FsSlow => 1.0 / (1.0 - e.mag),
            EvKind::RoleSwitch => e.mag,
            EvKind::MoeHot => 1.0 + e.mag,
            _ => 1.0,
        };
    }
    if let Some(f) = job.fault.as_ref().filter(|f| f.node == i) {
        if faults::degraded(f, t) {
            w *= faults::work(f);
        }
    }
    w
}

pub(super) fn phase(job: &JobDesign, i: usize, t: i64) -> Phase {
    let node = &job.nodes[i];
    if t < node.from || t >= node.until || t >= job.life.end {
        return Phase::Absent;
    }
    if let Some(f) = job.fault.as_ref().filter(|f| f.node == i) {
        if f.crash_at.is_some_and(|c| c <= t) {
            return Phase::Dead;
        }
    }
    let inside = |w: &(i64, i64)| w.0 <= t && t < w.1;
    if let Some((at, k)) = job.life.app_exit {
        let hang = job.life.hangs.iter().find(|w| w.0 == at);
        if k == i && hang.is_some_and(inside) {
            return Phase::Dead;
        }
    }
    if job.life.hangs.iter().any(inside) {
        return Phase::Hung;
    }
    if job.life.downs.iter().any(inside) {
        return Phase::Idle;
    }
    let Some(&(s, e)) = job.life.inits.iter().rev().find(|w| w.0 <= t) else {
        return Phase::Idle;
    };
    let joined = s.max(node.from) + node.join;
    if t < joined {
        Phase::Idle
    } else if t < e.max(joined + 20) {
        Phase::Init
    } else {
        Phase::Train {
            since: e.max(joined + 20),
        }
    }
}

fn base(node: &NodeDesign) -> State {
    State {
        gpus: node.gpus,
        cpu: node.cpu_base,
        mem_gib: node.mem_gib,
        pfc: 0.0,
        cnp: 0.0,
        clock_f: 1.0,
        power_mult: 1.0,
        mem_util_mult: 1.0,
        ..State::default()
    }
}

/// The state of node `i` at true time `t`, or `None` when it has no row.
pub(super) fn state(job: &JobDesign, ctx: &Ctx, i: usize, t: i64, rng: &mut Rng) -> Option<State> {
    let node = &job.nodes[i];
    let mut s = base(node);
    let now = phase(job, i, t);
    match now {
        Phase::Absent => return None,
        Phase::Idle => idle(&mut s, rng),
        Phase::Init => {
            s.busy = if rng.chance(0.3) {
                rng.range(0.1, 0.6)
            } else {
                rng.range(0.0, 0.05)
            };
            s.sm = s.busy * 0.3;
            s.cpu += rng.range(40.0, 70.0);
            s.ib = rng.range(0.0, 2e8);
            s.mem_gib *= rng.range(0.3, 0.8);
            s.pcie = rng.range(1e8, 2e9);
        }
        Phase::Hung => {
            s.busy = rng.range(0.97, 1.0);
            s.sm = rng.range(0.02, 0.06);
            s.ib = rng.range(0.0, 2e5);
            s.nvl = rng.range(0.0, 1e6);
            s.pcie = 2e7;
            s.cpu *= 0.6;
        }
        Phase::Dead => {
            idle(&mut s, rng);
            if let Some(f) = job.fault.as_ref().filter(|f| f.node == i) {
                s.gpu_gone = f.vanish;
                s.xid = faults::crash_xid(f);
            }
        }
        Phase::Train { since } => train(job, ctx, i, t, since, &mut s, rng),
    }
    let training = matches!(now, Phase::Train { .. });
    node_events(job, i, t, training, &mut s, rng);
    Some(s)
}

fn idle(s: &mut State, rng: &mut Rng) {
    s.busy = 0.0;
    s.sm = 0.0;
    s.pcie = rng.range(1e6, 2e7);
    s.cpu = rng.range(1.0, 5.0);
    s.mem_gib *= 0.1;
    s.clock_f = 0.0;
}

/// Training: compute and communication phases of the step, waits for the
/// slowest node (NCCL spins: busy stays high, SMs idle), the warm-up ramp,
/// the node's stage and roles, then the job-wide phases.
fn train(job: &JobDesign, ctx: &Ctx, i: usize, t: i64, since: i64, s: &mut State, rng: &mut Rng) {
    let node = &job.nodes[i];
    let stage = node.stage.min(job.stages - 1);
    let (pace, prog) = ctx.at(t);
    let wait = (1.0 - pace * work(job, i, t)).clamp(0.0, 0.95);
    let f = job.compute_frac;
    // Pipeline stages run their steps shifted against each other.
    let pos = (prog + stage as f64 / (2.0 * job.stages as f64)).fract();
    let inst = if pos < f { 1.0 } else { 0.0 };
    let period = job.step * batch_mult(job, t) / pace;
    let alpha = ((period - 3.0) / 12.0).clamp(0.0, 1.0);
    let c = alpha * inst + (1.0 - alpha) * f;
    let (comp, comm, spin) = (c * (1.0 - wait), (1.0 - c) * (1.0 - wait), wait);
    let ramp = 0.55 + 0.45 * ((t - since) as f64 / job.life.ramp as f64).min(1.0);
    let sb = job.stage_busy[stage];
    s.busy = (job.busy * (comp + comm) * (0.5 + 0.5 * sb) + 0.97 * spin) * (0.85 + 0.15 * ramp);
    s.sm = (job.sm * comp + 0.3 * comm) * sb * ramp + 0.05 * spin;
    let (first, last) = (
        job.stages > 1 && stage == 0,
        job.stages > 1 && stage + 1 == job.stages,
    );
    let stage_ib = if first || last { 0.85 } else { 1.0 };
    let g = node.gpus / 8.0;
    let ov = job.overlap;
    // Every node moves the same bytes per step, so traffic follows the
    // job's pace; a waiting node spends the wait inside the collective.
    s.ib = job.ib_avg
        * g
        * node.nic_frac.powf(0.3)
        * node.cp_mult
        * stage_ib
        * ramp
        * pace
        * (ov * c + 1.0 - c)
        / (ov * f + 1.0 - f);
    s.nvl =
        job.nvl_avg * g * ramp * pace * (0.5 * c + 1.5 * (1.0 - c)) / (0.5 * f + 1.5 * (1.0 - f));
    s.pcie = job.pcie_avg * g * (0.4 + 0.6 * pace) * if first { 1.6 } else { 1.0 };
    s.mem_util_mult = if first {
        1.15
    } else if last {
        1.2
    } else {
        1.0
    };
    if last {
        s.sm = (s.sm * 1.04).min(0.97);
    }
    s.cpu += 5.0 * pace;
    s.disk = 3e7 * pace * if node.loader_host { 3.0 } else { 1.0 };
    s.mem_gib += 20.0 * ((t - job.life.start) as f64 / 3600.0);
    if node.loader_host {
        s.ib_tx_extra = rng.range(2e9, 6e9);
    }
    s.pfc = rng.range(0.0, 4.0);
    s.cnp = 150.0 * s.ib / job.ib_avg.max(1.0) + rng.range(0.0, 30.0);
    if node.cap_w < 700.0 && s.sm > 0.6 {
        s.clock_f = 0.95;
    }
    let bm = batch_mult(job, t);
    if bm > 1.0 {
        s.ib /= bm.sqrt();
        s.sm = (s.sm * 1.03).min(0.97);
    }
    job_phases(job, i, t, s, rng);
}

/// Job-wide phases: every node sees them, each at its own offset.
fn job_phases(job: &JobDesign, i: usize, t: i64, s: &mut State, rng: &mut Rng) {
    let node = &job.nodes[i];
    for e in job.events.iter().filter(|e| active(e, i, t)) {
        let off = (unit2(e.id, i as u64) * e.stagger as f64) as i64;
        let into = t - e.start - off;
        match e.kind {
            EvKind::CkptSharded => {
                quiet(s, 0.03);
                s.disk += e.mag * rng.range(0.7, 1.1);
                s.ib_tx_extra += 0.2 * e.mag;
                s.cpu += 15.0;
                if into < 15 {
                    s.pcie += 8e9 * s.gpus / 8.0;
                }
            }
            EvKind::CkptRank0 if node.rank0 => {
                quiet(s, 0.05);
                s.disk += e.mag;
                s.cpu += 20.0;
                if into < 20 {
                    s.pcie += 8e9 * s.gpus / 8.0;
                }
            }
            EvKind::CkptRank0 => spin(s),
            EvKind::CkptAsync => {
                if into < 10 {
                    s.busy *= 0.5;
                    s.sm *= 0.4;
                    s.pcie += 8e9 * s.gpus / 8.0;
                } else {
                    s.disk += 0.4 * e.mag;
                    s.cpu += 8.0;
                    s.busy *= 0.98;
                }
            }
            EvKind::Eval => {
                s.busy *= e.mag;
                s.sm *= 0.6;
                s.ib *= 0.08;
                s.nvl *= 0.5;
                if node.rank0 || node.last {
                    s.cpu += 15.0;
                }
            }
            EvKind::LoaderStall if e.mag < 0.0 || e.mag as usize == i => {
                quiet(s, 0.15);
                s.cpu += 20.0;
                s.disk *= 3.0;
            }
            EvKind::LoaderStall => spin(s),
            _ => {}
        }
    }
}

fn quiet(s: &mut State, busy: f64) {
    s.busy = busy;
    s.sm = busy * 0.3;
    s.ib *= 0.05;
    s.nvl *= 0.05;
}

/// Waiting inside a collective: kernels resident, SMs idle, no traffic.
fn spin(s: &mut State) {
    s.busy = 0.97;
    s.sm = 0.06;
    s.ib *= 0.03;
    s.nvl *= 0.03;
}

/// Events that touch some nodes, and the fault, on top of any phase.
fn node_events(job: &JobDesign, i: usize, t: i64, training: bool, s: &mut State, rng: &mut Rng) {
    for e in job.events.iter().filter(|e| active(e, i, t)) {
        match e.kind {
            EvKind::RackThrottle => {
                s.clock_f *= e.mag;
                s.power_mult *= 0.85 + 0.15 * e.mag;
                s.temp_add += 8.0;
            }
            EvKind::RackPowerCap => {
                s.power_mult *= e.mag;
                s.clock_f *= 1.0 - (1.0 - e.mag) * 0.5;
            }
            EvKind::LeafCongestion => {
                s.pfc += rng.range(2e3, 3e4);
                s.cnp += rng.range(5e3, 5e4);
                s.ib *= rng.range(0.6, 1.15);
            }
            EvKind::FsSlow => {
                s.disk *= 0.5 * (1.0 - e.mag);
                s.cpu += 10.0;
                if training {
                    s.busy *= 1.0 - e.mag;
                }
            }
            EvKind::RoleSwitch => {
                s.cpu += 30.0;
                s.ib_tx_extra += 2.5e9;
                s.disk += 4e8;
            }
            EvKind::MoeHot if training => {
                s.sm = (s.sm * (1.0 + e.mag)).min(0.97);
                s.ib *= 1.0 + 2.0 * e.mag;
            }
            EvKind::PfcBurst if rng.chance(e.mag) => {
                s.pfc += rng.range(1e2, 2e4);
                s.cnp += rng.range(1e2, 3e4);
            }
            _ => {}
        }
    }
    if let Some(f) = job.fault.as_ref().filter(|f| f.node == i) {
        if faults::degraded(f, t) && s.clock_f > 0.0 {
            faults::apply(f, s, rng);
        }
    }
}

/// Whether the node's exporter is down at `t`: a gap, or the seconds after
/// a restart (its first scrape after the restart reads all zeros).
pub(super) fn exporter(job: &JobDesign, i: usize, t: i64) -> Exporter {
    let node = &job.nodes[i];
    for e in job.events.iter().filter(|e| e.nodes.first() == Some(&i)) {
        if !(e.start <= t && t < e.end) {
            continue;
        }
        match e.kind {
            EvKind::ExporterGap => return Exporter::Gap,
            EvKind::ExporterRestart if t - e.start < node.interval => return Exporter::Zero,
            EvKind::ExporterRestart => return Exporter::Gap,
            _ => {}
        }
    }
    Exporter::Up
}

#[derive(PartialEq, Eq, Clone, Copy)]
pub(super) enum Exporter {
    Up,
    Gap,
    Zero,
}
