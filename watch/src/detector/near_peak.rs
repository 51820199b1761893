//! The warm-up steps a baseline is learned from: the job's first steps at
//! work near the highest level it reached.
//!
//! A baseline learned in the last minutes before it is due can fall in an
//! evaluation phase or a slow-down that follows a checkpoint: every node
//! then looks alike, and a node whose role shows only in training (rank 0
//! of a pipeline, busy elsewhere) would be called once training resumes.
//! Learned from the last minutes before the job is steady again, it can
//! fall after a fault's onset, and teach the faulty node its fault. The
//! first steps at the job's own level of work are neither.

use super::peers::log_ratio;

/// One warm-up step the job spent near its peak.
#[derive(Debug)]
struct Step {
    /// The job's level of each metric of its nodes' own work (NaN: another
    /// metric, or none that step).
    levels: Vec<f64>,
    /// `values[metric * nodes + node]` at that step.
    values: Vec<f64>,
    nodes: usize,
}

/// The first steps (up to `keep`) at which the job's level of every metric
/// of its nodes' own work was within `tolerance` of the highest it reached.
#[derive(Debug, Default)]
pub struct NearPeak {
    steps: Vec<Step>,
}

impl NearPeak {
    /// Takes one step: `levels` and `peaks` per metric (NaN where not
    /// judged), `values[metric * nodes + node]`. Steps left behind by a
    /// higher peak (a ramp's early part) are dropped.
    pub fn observe(&mut self, step: (&[f64], &[f64]), values: &[f64], nodes: usize, cfg: Fit) {
        let (levels, peaks) = step;
        self.steps.retain(|s| cfg.near(&s.levels, peaks));
        let judged = levels.iter().any(|l| !l.is_nan());
        if judged && self.steps.len() < cfg.keep && cfg.near(levels, peaks) {
            self.steps.push(Step {
                levels: levels.to_vec(),
                values: values.to_vec(),
                nodes,
            });
        }
    }

    /// The kept steps of `metric`, each the value per node, if there are
    /// at least `min_steps`.
    pub fn steps_of(&self, metric: usize, min_steps: usize) -> Option<Vec<Vec<f64>>> {
        let steps: Vec<Vec<f64>> = self
            .steps
            .iter()
            .filter_map(|s| {
                let range = metric * s.nodes..(metric + 1) * s.nodes;
                s.values.get(range).map(<[f64]>::to_vec)
            })
            .collect();
        (steps.len() >= min_steps).then_some(steps)
    }
}

/// What "near the peak" means.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    pub keep: usize,
    pub floor_fraction: f64,
    /// A natural log ratio below the peak.
    pub tolerance: f64,
}

impl Fit {
    fn near(&self, levels: &[f64], peaks: &[f64]) -> bool {
        levels.iter().zip(peaks).all(|(&level, &peak)| {
            if level.is_nan() || peak.is_nan() {
                return true;
            }
            let floor = (self.floor_fraction * peak.abs()).max(1e-9);
            log_ratio(level, peak, floor) >= -self.tolerance
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIT: Fit = Fit {
        keep: 3,
        floor_fraction: 0.05,
        tolerance: 0.25,
    };

    fn observe(near: &mut NearPeak, level: f64, peak: f64) {
        near.observe((&[level], &[peak]), &[level, level], 2, FIT);
    }

    #[test]
    fn the_first_steps_near_the_peak_are_kept_and_later_ones_are_not() {
        let mut near = NearPeak::default();
        for level in [80.0, 81.0, 50.0, 79.0, 80.0] {
            observe(&mut near, level, 81.0);
        }
        let steps = near.steps_of(0, 1).expect("steps");
        let firsts: Vec<f64> = steps.iter().map(|s| s[0]).collect();
        assert_eq!(
            firsts,
            [80.0, 81.0, 79.0],
            "the evaluation phase at 50 is left out"
        );
    }

    #[test]
    fn steps_near_an_early_peak_are_dropped_once_the_job_climbs_higher() {
        let mut near = NearPeak::default();
        for (level, peak) in [(30.0, 30.0), (31.0, 31.0), (80.0, 80.0)] {
            observe(&mut near, level, peak);
        }
        let steps = near.steps_of(0, 1).expect("steps");
        assert_eq!(steps, [vec![80.0, 80.0]]);
        assert!(near.steps_of(0, 2).is_none(), "fewer than asked");
        assert!(near.steps_of(1, 1).is_none(), "no such metric");
    }
}
