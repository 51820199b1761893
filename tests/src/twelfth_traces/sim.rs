//! What each node of a job is doing at a moment: the coupling of a
//! synchronous job (everyone waits for the slowest at each collective),
//! its phases, and the factors confounders and faults put on each node.

use super::faults;
use super::plan::{Ev, Kind, Mode, Plan};
use super::rng::h01;
use super::site::{Site, SiteKind};
use super::users::UserKind;

/// Multiplicative and additive factors on one node at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Fx {
    /// Compute time per step relative to a healthy node (>1 = slower).
    pub slow: f64,
    /// Host-side wait per step (data loader starved), in step units.
    pub starve: f64,
    /// Communication time factor (a slow link slows everyone alike).
    pub comm: f64,
    pub ibf: f64,
    pub nvlf: f64,
    pub pcief: f64,
    pub clock: f64,
    pub pcap: f64,
    pub heat: f64,
    pub cpu: f64,
    pub disk: f64,
    pub pfc: f64,
    pub cnp: f64,
    pub lost: u32,
    pub xid: u32,
}

impl Default for Fx {
    fn default() -> Self {
        Fx {
            slow: 1.0,
            starve: 0.0,
            comm: 1.0,
            ibf: 1.0,
            nvlf: 1.0,
            pcief: 1.0,
            clock: 1.0,
            pcap: 1.0,
            heat: 0.0,
            cpu: 0.0,
            disk: 0.0,
            pfc: 0.0,
            cnp: 0.0,
            lost: 0,
            xid: 0,
        }
    }
}

/// A node's activity at a moment, before it is turned into metrics.
#[derive(Debug, Clone, Copy)]
pub struct Snap {
    /// Fraction of time the GPUs compute.
    pub busy: f64,
    /// Fraction of time spinning in NCCL (busy for util, light on power).
    pub spin: f64,
    /// Power intensity of the compute (decode is memory-bound, lighter).
    pub intensity: f64,
    /// Memory-copy utilisation while computing.
    pub memf: f64,
    /// Network and bus rates as fractions of the node's nominal.
    pub ib: f64,
    pub nvl: f64,
    pub pcie: f64,
    pub disk: f64,
    pub cpu: f64,
    /// GPU memory in use, as a fraction of capacity.
    pub mem: f64,
    pub mode: Mode,
    pub fx: Fx,
}

/// One job being simulated, with its step-time cache on a 5 s grid.
pub struct Sim<'a> {
    pub p: &'a Plan,
    pub site: &'a Site,
    pub key: u64,
    /// Per grid tick: (step time, colocated gen length, slowest rollout).
    ticks: Vec<(f64, f64, f64)>,
}

pub const TICK: i64 = 5;

impl<'a> Sim<'a> {
    pub fn new(p: &'a Plan, site: &'a Site, key: u64) -> Self {
        let mut s = Sim {
            p,
            site,
            key,
            ticks: Vec::new(),
        };
        let n = ((p.end - p.start) / TICK + 2) as usize;
        s.ticks = (0..n)
            .map(|k| s.job_tick(p.start + k as i64 * TICK))
            .collect();
        s
    }

    pub(super) fn tick_at(&self, t: i64) -> (f64, f64, f64) {
        let k = ((t - self.p.start).max(0) / TICK) as usize;
        self.ticks[k.min(self.ticks.len() - 1)]
    }

    /// Whether node `i` belongs to the running job at `t` (rows exist).
    pub fn present(&self, i: usize, t: i64) -> bool {
        let (a, b) = self.p.present[i];
        let requeued = self
            .p
            .events
            .iter()
            .any(|e| e.ev == Ev::Requeue && e.active(i, t));
        t >= a && t < b.min(self.p.end) && !requeued
    }

    /// The node's mode after a halt (crash, hang, loss), else Run.
    pub fn mode(&self, i: usize, t: i64) -> Mode {
        match self.p.halt {
            // A lost machine stays lost after the job is killed.
            Some(h) if t >= h.kill && h.culprit == Some(i) && h.mode == Mode::Gone => Mode::Gone,
            Some(h) if t >= h.kill && self.p.kind.synchronous() => Mode::Dead,
            Some(h) if t >= h.t => match h.culprit {
                Some(c) if c == i => h.mode,
                Some(_) => h.peers,
                None => h.mode,
            },
            _ => Mode::Run,
        }
    }

    /// The job-wide step time and friends at `t` (synchronous coupling).
    fn job_tick(&self, t: i64) -> (f64, f64, f64) {
        let (.., comm_base) = self.p.kind.profile();
        let (mut step, mut comm, mut gen_len, mut roll) = (0.0f64, 1.0f64, 0.0f64, 1.0f64);
        for i in 0..self.p.n() {
            if !self.present(i, t) || self.mode(i, t) != Mode::Run {
                continue;
            }
            let fx = self.fx(i, t);
            if self.p.rollout[i] {
                roll = roll.max(fx.slow);
                continue;
            }
            step = step.max(self.load_pub(i, t) * fx.slow + fx.starve);
            comm = comm.max(fx.comm);
            gen_len = gen_len.max(self.gen_time_pub(i, t) * fx.slow);
        }
        (step.max(0.5) + comm_base * comm, gen_len, roll)
    }

    /// The node's share of the work per step (stages, hot experts, rank 0).
    pub(super) fn load_pub(&self, i: usize, t: i64) -> f64 {
        let mut w = self.p.weight[i];
        if self.p.kind == Kind::Moe {
            // Hot experts move every few minutes: a node's load drifts.
            w *= 0.9 + 0.25 * h01(self.key, i as u64, (t / 180) as u64);
        }
        if self.p.rank0_extra && i == 0 && (t / 60) % 10 == 0 {
            w *= 1.25;
        }
        for e in &self.p.events {
            if e.ev == Ev::BatchChange && e.active(i, t) {
                w *= e.x;
            }
        }
        w
    }

    /// A colocated RL node's generation time this cycle (long-tail responses).
    pub(super) fn gen_time_pub(&self, i: usize, t: i64) -> f64 {
        if self.p.kind != Kind::RlColo {
            return 0.0;
        }
        let cyc = (t - self.p.steady).div_euclid(self.cycle());
        0.45 + 0.25 * h01(self.key ^ 0x6e, i as u64, cyc as u64)
    }

    /// The RL cycle length in seconds.
    pub(super) fn cycle(&self) -> i64 {
        240 + (self.key % 300) as i64
    }

    /// All factors on node `i` at `t`: lottery, confounders, site, fault.
    pub fn fx(&self, i: usize, t: i64) -> Fx {
        let mut fx = Fx {
            slow: self.p.lottery[i],
            ..Fx::default()
        };
        for e in &self.p.events {
            if !e.active(i, t) {
                continue;
            }
            match e.ev {
                Ev::AsyncCkpt => {
                    fx.slow *= 1.03 + 0.07 * e.x;
                    fx.disk += 1.5e9 + 2e9 * e.x;
                    fx.cpu += 12.0;
                }
                Ev::LongSeq => fx.slow *= e.x,
                Ev::StallNode => {
                    fx.starve += 3.0 * e.x;
                    fx.cpu -= 5.0;
                }
                _ => {}
            }
        }
        self.site_fx(i, t, &mut fx);
        if let Some((n, x)) = self.p.stale_xid {
            if n == i {
                fx.xid = x;
            }
        }
        if let Some(u) = self.p.user {
            if u.kind == UserKind::AppXid && u.node == i && t >= u.t {
                fx.xid = u.xid;
            }
        }
        if let Some(f) = &self.p.fault {
            let rack = |k: usize| self.site.hosts[self.p.hosts[k]].rack;
            faults::apply(f, self.p, &rack, i, t, &mut fx);
        }
        fx
    }

    fn site_fx(&self, i: usize, t: i64, fx: &mut Fx) {
        let host = &self.site.hosts[self.p.hosts[i]];
        for e in &self.site.events {
            if t < e.t0
                || t >= e.t1
                || !e.touches(host)
                || e.owner.as_deref() == Some(self.p.id.as_str())
            {
                continue;
            }
            match e.kind {
                SiteKind::PowerCap => {
                    fx.pcap *= 1.0 - e.x;
                    fx.clock *= 1.0 - 0.6 * e.x;
                    fx.slow *= 1.0 + 0.6 * e.x;
                }
                SiteKind::Cooling => {
                    fx.heat += 12.0 + 20.0 * e.x;
                    fx.clock *= 1.0 - e.x;
                    fx.slow *= 1.0 / (1.0 - e.x);
                }
                SiteKind::Congestion => {
                    fx.comm *= 1.0 + e.x;
                    fx.pfc += 2000.0 * e.x * (1.0 + h01(self.key, i as u64, (t / 20) as u64));
                    fx.cnp += 800.0 * e.x;
                }
                SiteKind::SpineFlap if (t - e.t0) % 90 < 20 => {
                    fx.comm *= 1.0 + 3.0 * e.x;
                    fx.pfc += 1500.0 * e.x;
                    fx.cnp += 300.0 * e.x;
                }
                SiteKind::SpineFlap => {}
                SiteKind::NvlDomain => {
                    fx.nvlf *= 1.0 - e.x;
                    fx.comm *= 1.0 + 0.5 * e.x;
                }
            }
        }
    }
}

impl Sim<'_> {
    /// The node's activity at `t`, or None when it writes no rows.
    pub fn snap(&self, i: usize, t: i64) -> Option<Snap> {
        if !self.present(i, t) {
            return None;
        }
        let mode = self.mode(i, t);
        if mode == Mode::Gone {
            return None;
        }
        let fx = self.fx(i, t);
        let (intensity, memf, ..) = self.p.kind.profile();
        let mut s = Snap {
            busy: 0.0,
            spin: 0.0,
            intensity,
            memf,
            ib: 0.0,
            nvl: 0.0,
            pcie: 0.01,
            disk: 5e6,
            cpu: 6.0,
            mem: self.mem_frac(i, t),
            mode,
            fx,
        };
        if mode != Mode::Run {
            self.halted(&mut s);
        } else if !self.phase(i, t, &mut s) {
            self.running(i, t, &mut s);
        }
        s.cpu += fx.cpu;
        s.disk += fx.disk;
        Some(s)
    }

    fn mem_frac(&self, i: usize, t: i64) -> f64 {
        let base = 0.55 + 0.35 * h01(self.key, 91, 0) + 0.03 * h01(self.key, i as u64, 92);
        let warm = self.p.warmups[0];
        let ramp = ((t - warm.0) as f64 / (warm.1 - warm.0).max(1) as f64).clamp(0.05, 1.0);
        match self.p.user {
            // CUDA OOM: the rank's memory climbs to the top before it dies.
            Some(u)
                if matches!(u.kind, UserKind::Oom | UserKind::BadUser)
                    && u.node == i
                    && t >= u.t - 60
                    && t < u.t =>
            {
                0.995
            }
            _ => base * ramp,
        }
    }

    fn halted(&self, s: &mut Snap) {
        s.ib = 0.0005;
        match s.mode {
            Mode::Dead => {
                s.mem = 0.003;
                s.cpu = 1.5;
            }
            Mode::Hung => s.spin = 1.0,
            Mode::Stuck => s.cpu = 9.0,
            Mode::Spin => {
                s.spin = 1.0;
                s.cpu = 7.5;
            }
            _ => {}
        }
    }
}
