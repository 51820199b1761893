//! A running node's activity: job-wide phases (warm-up, checkpoints,
//! evaluation, stalls) and each job kind's way of sharing the work.

use super::plan::{Ev, Kind};
use super::rng::{h01, hn};
use super::sim::{Sim, Snap};

impl Sim<'_> {
    /// Job-wide phases; true when one holds the node at `t`.
    pub(super) fn phase(&self, i: usize, t: i64, s: &mut Snap) -> bool {
        for &(from, steady) in &self.p.warmups {
            if t >= from && t < steady {
                if t < steady - self.p.warm_off[i] {
                    // Compiling / loading weights: erratic and mostly light.
                    let r = h01(self.key, i as u64, (t / 10) as u64);
                    (s.busy, s.cpu, s.ib, s.nvl, s.pcie) =
                        (0.05 + 0.45 * r, 30.0 + 40.0 * r, 0.01 * r, 0.02 * r, 0.05);
                } else {
                    // Done compiling: waits in the first collective for the rest.
                    (s.busy, s.spin) = (0.02, 0.96);
                }
                return true;
            }
        }
        for e in self.p.events.iter().filter(|e| e.node.is_none()) {
            // Ranks enter a job-wide phase a few seconds apart.
            let lag = (h01(self.key, i as u64, e.t0 as u64) * 8.0) as i64;
            if t < e.t0 + lag || t >= e.t1 + lag {
                continue;
            }
            match e.ev {
                Ev::SyncCkpt => {
                    (s.busy, s.disk, s.cpu, s.pcie) = (0.03, 2.5e9 + 1.5e9 * e.x, 35.0, 0.3)
                }
                Ev::Eval => {
                    (s.busy, s.spin, s.ib, s.nvl, s.intensity) =
                        (0.5 + 0.2 * e.x, 0.1, 0.02, 0.1, 0.7)
                }
                Ev::StallJob | Ev::Rendezvous => (s.busy, s.cpu) = (0.01, 25.0),
                _ => continue,
            }
            return true;
        }
        false
    }

    /// Steady running, by job kind.
    pub(super) fn running(&self, i: usize, t: i64, s: &mut Snap) {
        let (step, gen_len, roll) = self.tick_at(t);
        let cycle = self.cycle() as f64;
        let tau = (t - self.p.steady).rem_euclid(self.cycle()) as f64;
        match self.p.kind {
            Kind::Inference => self.replica(i, t, s),
            Kind::RlDisagg if self.p.rollout[i] => {
                self.decode(i, t, s);
                if tau < 20.0 {
                    // Weights broadcast from the learners at each cycle's start.
                    s.ib = 0.5;
                }
            }
            Kind::RlDisagg => {
                // Learners train, then wait for the slowest rollout node.
                let active = 0.5 * cycle;
                let period = cycle * (0.5 + 0.5 * roll);
                if (tau * cycle / period) % cycle < active {
                    self.train(i, t, s, step);
                } else {
                    (s.busy, s.spin, s.cpu) = (0.01, 0.02, 10.0);
                }
            }
            Kind::RlColo => {
                let mine = self.gen_time_pub(i, t) * s.fx.slow * cycle;
                if tau < mine {
                    self.decode(i, t, s);
                } else if tau < gen_len * cycle {
                    (s.busy, s.spin) = (0.02, 0.03);
                } else {
                    self.train(i, t, s, step);
                }
            }
            _ => self.train(i, t, s, step),
        }
        if self.p.gc_pauses && h01(self.key ^ 0x9c, i as u64, (t / 15) as u64) < 0.15 {
            // A 1-3 s Python GC pause inside this scrape window.
            s.busy *= 0.85;
        }
    }

    /// A synchronous training step: compute, wait for data, wait for peers.
    fn train(&self, i: usize, t: i64, s: &mut Snap, step: f64) {
        let (_, _, ibs, nvls, comm_base) = self.p.kind.profile();
        let fx = s.fx;
        let c = self.load_pub(i, t) * fx.slow;
        s.busy = (c / step).min(1.0);
        let idle = (fx.starve / step).min(1.0 - s.busy);
        s.spin = (1.0 - s.busy - idle).max(0.0);
        let th = (1.0 + comm_base) / step;
        s.ib = ibs * th * fx.ibf;
        s.nvl = nvls * th * fx.nvlf;
        s.pcie = 0.06 * th * fx.pcief;
        s.cpu = 10.0
            + 8.0 * th
            + if i == 0 && self.p.rank0_extra {
                9.0
            } else {
                0.0
            };
        s.disk = 2e7 + 8e7 * th;
    }

    /// Autoregressive generation: memory-bound, light on power and network.
    fn decode(&self, i: usize, t: i64, s: &mut Snap) {
        s.busy = 0.86 + 0.06 * hn(self.key, i as u64, (t / 30) as u64);
        s.busy /= 1.0 + s.fx.starve;
        (s.intensity, s.memf, s.ib, s.nvl, s.pcie, s.cpu) =
            (0.5, 0.82, 0.01, 0.08 * s.fx.nvlf, 0.02 * s.fx.pcief, 14.0);
    }

    /// An independent inference replica: its own request mix, nobody waits.
    fn replica(&self, i: usize, t: i64, s: &mut Snap) {
        let lvl = 0.62
            + 0.3 * h01(self.key, i as u64, 0)
            + 0.05 * hn(self.key, i as u64, (t / 60) as u64);
        s.busy = lvl.clamp(0.2, 0.99) / (1.0 + s.fx.starve);
        s.ib = 0.02 * (0.5 + lvl) * s.fx.ibf;
        s.nvl = 0.1 * lvl * s.fx.nvlf;
        s.pcie = 0.03 * s.fx.pcief;
        s.cpu = 18.0 + 10.0 * lvl;
    }
}
