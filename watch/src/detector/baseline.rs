//! What the detector learns from the end of a job's warm-up: each metric's
//! level and noise, and each node's own place among its peers.
//!
//! This is the "denoising model learned online from the job's own first
//! minutes": nodes that differ by design (a rank 0 that also logs, pipeline
//! stages, a slightly hotter GPU) keep their learned offset, and only a
//! change from it counts.

use super::peers::log_ratio;
use crate::stats::{median, scaled_mad};

/// The fewest warm-up values a node needs for a baseline of its own.
const MIN_VALUES: usize = 3;
/// A node's ratio to its peers that wobbles more than this over the window
/// (natural log: a factor of 2) is no offset by design.
const UNSTEADY_LOG_RATIO: f64 = std::f64::consts::LN_2;

/// Whether the job's level (its median node) moved by at most `tolerance`
/// (a natural log ratio, highest to lowest) over `steps` (`steps[t][node]`,
/// NaN: missing): a window half in training and half in an evaluation is
/// not. Steps without a value, and windows without any, count as steady.
pub fn is_steady(steps: &[Vec<f64>], floor_fraction: f64, tolerance: f64) -> bool {
    let mut scratch = Vec::new();
    let levels: Vec<f64> = steps
        .iter()
        .filter_map(|step| {
            scratch.clear();
            scratch.extend(step.iter().copied().filter(|v| !v.is_nan()));
            median(&mut scratch)
        })
        .collect();
    let Some(centre) = median(&mut levels.clone()) else {
        return true;
    };
    let floor = (floor_fraction * centre.abs()).max(1e-9);
    let (low, high) = levels
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &l| {
            (lo.min(l), hi.max(l))
        });
    log_ratio(high, low, floor) <= tolerance
}

/// The learned baseline of one metric in one job.
#[derive(Debug, Clone)]
pub struct MetricBaseline {
    /// Added to the job's level before dividing by it (metrics at 0).
    pub floor: f64,
    /// The job's typical level over the window (its median node, median step).
    pub level: f64,
    /// The typical wobble of one node's denoised value over time, relative
    /// to the job's level: the least spread a step is given.
    pub noise: f64,
    /// Each node's warm-up level as a multiple of the job's (`None`: too
    /// few warm-up values; [`MetricBaseline::expected`] then assumes the
    /// typical node).
    ratio: Vec<Option<f64>>,
    /// Nodes whose place was first learned after a restart: expected at
    /// it, but not [`MetricBaseline::placed`] (a drain needs a place known
    /// from the job's first warm-up).
    provisional: Vec<bool>,
    typical_ratio: f64,
    /// Each node's own denoised level (the small-job rule compares drops).
    own: Vec<Option<f64>>,
}

impl MetricBaseline {
    /// Learns from the baseline window: `steps[t][node]` is a node's
    /// denoised value at a step (NaN: missing; a step may list fewer nodes
    /// than later ones). `None` when no step has a value.
    pub fn learn(steps: &[Vec<f64>], floor_fraction: f64) -> Option<Self> {
        let nodes = steps.iter().map(Vec::len).max().unwrap_or(0);
        let at = |t: usize, node: usize| steps[t].get(node).copied().unwrap_or(f64::NAN);
        let mut scratch = Vec::new();
        let levels: Vec<f64> = steps
            .iter()
            .map(|step| {
                scratch.clear();
                scratch.extend(step.iter().copied().filter(|v| !v.is_nan()));
                median(&mut scratch).unwrap_or(f64::NAN)
            })
            .collect();
        scratch.clear();
        scratch.extend(levels.iter().copied().filter(|v| !v.is_nan()));
        let level = median(&mut scratch)?;
        let all = steps.iter().flatten().filter(|v| !v.is_nan());
        let (sum, count) = all.fold((0.0, 0usize), |(s, c), v| (s + v.abs(), c + 1));
        // A metric that is 0 on most nodes still needs a scale: its mean.
        let floor = (floor_fraction * level.abs().max(sum / count.max(1) as f64)).max(1e-9);
        let per_node =
            |f: &dyn Fn(usize, usize) -> Option<f64>, scratch: &mut Vec<f64>| -> Vec<Option<f64>> {
                (0..nodes)
                    .map(|node| {
                        scratch.clear();
                        scratch.extend((0..steps.len()).filter_map(|t| f(t, node)));
                        (scratch.len() >= MIN_VALUES).then(|| median(scratch).unwrap_or(0.0))
                    })
                    .collect()
            };
        let value = |t: usize, node: usize| Some(at(t, node)).filter(|v| !v.is_nan());
        let own = per_node(&value, &mut scratch);
        // Ratios to the same step's level: phases the whole job went
        // through during the window cancel. Steps when the job was far from
        // its usual level (a stall that nodes leave at different times) teach
        // no offset: a node back at work while the rest still wait would
        // learn to be ten times its peers.
        let usual = |t: usize| log_ratio(levels[t], level, floor).abs() <= UNSTEADY_LOG_RATIO;
        let ratio_at = |t: usize, node: usize| {
            value(t, node)
                .filter(|_| levels[t] > 0.0 && usual(t))
                .map(|v| v / levels[t])
        };
        let mut ratio = per_node(&ratio_at, &mut scratch);
        // An offset is learned only if it held over the window: a node that
        // differs from its peers only in some phase (rank 0 writing a
        // checkpoint) is taken as typical.
        for (node, r) in ratio.iter_mut().enumerate() {
            scratch.clear();
            scratch
                .extend((0..steps.len()).filter_map(|t| Some(ratio_at(t, node)?.max(1e-12).ln())));
            let centre = median(&mut scratch.clone()).unwrap_or(0.0);
            if scaled_mad(&mut scratch, centre) > UNSTEADY_LOG_RATIO {
                *r = None;
            }
        }
        let mut ratios: Vec<f64> = ratio.iter().flatten().copied().collect();
        let typical_ratio = median(&mut ratios).unwrap_or(1.0);
        let mut wobble: Vec<f64> = (0..nodes)
            .filter_map(|node| {
                scratch.clear();
                scratch.extend(
                    (0..steps.len())
                        .filter_map(|t| Some(log_ratio(value(t, node)?, levels[t], floor))),
                );
                if scratch.len() < MIN_VALUES {
                    return None;
                }
                let centre = median(&mut scratch.clone())?;
                Some(scaled_mad(&mut scratch, centre))
            })
            .collect();
        let noise = median(&mut wobble).unwrap_or(0.0);
        Some(Self {
            floor,
            level,
            noise,
            ratio,
            provisional: Vec::new(),
            typical_ratio,
            own,
        })
    }

    /// Keeps the places learned in an earlier warm-up of the job (`before`)
    /// for the nodes that had one: learned again after a restart, a node
    /// that was slow before it would be learned as it is now, its fault
    /// taken for its place. Only the nodes new since keep what was learned
    /// now. Places are multiples of the job's level, and a replacement can
    /// move that level (its exporter sums GPUs another way): the kept
    /// places are rescaled by the median change of the nodes placed both
    /// times, which a faulty one among them does not move.
    pub fn keep_places(&mut self, before: &MetricBaseline) {
        let mut changes: Vec<f64> = self
            .ratio
            .iter()
            .zip(&before.ratio)
            .filter_map(|(now, then)| Some(now.as_ref()? / then.as_ref()?))
            .filter(|change| change.is_finite())
            .collect();
        let scale = median(&mut changes);
        self.provisional = vec![true; self.ratio.len()];
        let kept = self.ratio.iter_mut().zip(&before.ratio);
        for ((slot, place), provisional) in kept.zip(&mut self.provisional) {
            if let (Some(place), Some(scale)) = (place, scale) {
                *slot = Some(place * scale);
                *provisional = false;
            }
        }
    }

    /// Where node `node` is expected at a step whose job level is `level`,
    /// as a log ratio (see [`log_ratio`]): its learned multiple of the level,
    /// which fades as the level sinks to the floor (an offset of 10% in
    /// traffic is not 10% of a hung job's trickle).
    pub fn expected(&self, node: usize, level: f64) -> f64 {
        let ratio = self
            .ratio
            .get(node)
            .copied()
            .flatten()
            .unwrap_or(self.typical_ratio);
        log_ratio(level * ratio, level, self.floor)
    }

    /// Where the typical node is expected at a step whose job level is
    /// `level`: [`MetricBaseline::expected`] without a node's own offset.
    pub fn typical(&self, level: f64) -> f64 {
        log_ratio(level * self.typical_ratio, level, self.floor)
    }

    /// Whether node `node`'s own place among its peers was learned, in
    /// the job's first warm-up.
    pub fn placed(&self, node: usize) -> bool {
        self.ratio.get(node).copied().flatten().is_some()
            && !self.provisional.get(node).copied().unwrap_or(false)
    }

    /// Where the `group`th of the other placed nodes is expected at a step
    /// whose job level is `level`, counted from the low end (`low`) or the
    /// high end, as a log ratio (see [`MetricBaseline::expected`]); `None`
    /// with fewer such nodes. A pipeline stage is such a group: its nodes
    /// sit apart from the rest by design, together.
    pub fn group_place(&self, node: usize, level: f64, group: usize, low: bool) -> Option<f64> {
        let mut others: Vec<f64> = (0..self.ratio.len())
            .filter(|&other| other != node && self.placed(other))
            .filter_map(|other| self.ratio[other])
            .collect();
        if group == 0 || others.len() < group {
            return None;
        }
        let k = if low { group - 1 } else { others.len() - group };
        let (_, ratio, _) = others.select_nth_unstable_by(k, f64::total_cmp);
        Some(log_ratio(level * *ratio, level, self.floor))
    }

    /// Node `node`'s own learned level, if it had one.
    pub fn own(&self, node: usize) -> Option<f64> {
        self.own.get(node).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_differs_by_design_keeps_its_offset_while_the_level_is_high() {
        let steps = vec![vec![100.0, 100.0, 100.0, 150.0]; 6];
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert!((b.expected(3, 1e6) - 1.5f64.ln()).abs() < 1e-3);
        assert!(b.expected(3, 0.0).abs() < 1e-9, "no offset at level 0");
        assert_eq!(b.own(3), Some(150.0));
    }

    #[test]
    fn a_checkpoint_during_the_window_does_not_skew_a_node_that_lags_it() {
        // Most of the window in a checkpoint (level 3); node 3 leaves it a step late.
        let mut steps = vec![vec![3.0, 3.0, 3.0, 3.0]; 5];
        steps.push(vec![95.0, 95.0, 95.0, 3.0]);
        steps.push(vec![95.0, 95.0, 95.0, 95.0]);
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert!(b.expected(3, 95.0).abs() < 0.01, "{}", b.expected(3, 95.0));
    }

    #[test]
    fn a_node_seen_only_while_it_worked_and_the_job_still_stalled_learns_no_offset() {
        // The job stalls (level 10) at the window's start; node 3 is back at
        // work first, then its exporter falls silent for the rest.
        let mut steps = vec![vec![10.0, 10.0, 10.0, 100.0]; 3];
        steps.extend(vec![vec![100.0, 100.0, 100.0, f64::NAN]; 9]);
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert!(!b.placed(3));
        assert_eq!(b.expected(3, 100.0), b.expected(0, 100.0));
    }

    #[test]
    fn a_node_apart_only_during_part_of_the_window_gets_no_offset() {
        let mut steps = vec![vec![100.0, 100.0, 100.0, 300.0]; 6];
        steps.extend(vec![vec![100.0, 100.0, 100.0, 30_000.0]; 6]);
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert_eq!(b.expected(3, 100.0), b.expected(0, 100.0));
    }

    #[test]
    fn a_window_in_which_the_job_ramps_up_is_not_steady_and_one_at_its_level_is() {
        let ramp: Vec<Vec<f64>> = (0..12).map(|t| vec![40.0 + 5.0 * t as f64; 4]).collect();
        assert!(!is_steady(&ramp, 0.05, 0.25));
        let mut level = vec![vec![95.0, 96.0, 94.0, 60.0]; 12];
        level[4] = vec![f64::NAN; 4];
        assert!(is_steady(&level, 0.05, 0.25));
        assert!(is_steady(&[], 0.05, 0.25));
        let two_phases: Vec<Vec<f64>> = (0..12)
            .map(|t| vec![if t < 6 { 80.0 } else { 55.0 }; 4])
            .collect();
        assert!(
            !is_steady(&two_phases, 0.05, 0.25),
            "each phase is within the tolerance of the window's median, not of each other"
        );
    }

    #[test]
    fn a_group_place_counts_the_other_placed_nodes_from_the_faulty_side() {
        // Two stages (60 and 100), and node 4 above its stage at 72.
        let steps = vec![vec![60.0, 60.0, 60.0, 100.0, 72.0, 100.0, 100.0, 100.0]; 6];
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        let place = |node: usize| b.expected(node, 90.0);
        assert_eq!(b.group_place(4, 90.0, 2, true), Some(place(0)));
        // A node is not its own peer: the third lowest beside node 0 is node 4.
        assert_eq!(b.group_place(0, 90.0, 3, true), Some(place(4)));
        assert_eq!(b.group_place(4, 90.0, 1, false), Some(place(3)));
        assert_eq!(b.group_place(4, 90.0, 8, true), None, "only 7 others");
        assert!(place(0) < place(4) && place(4) < place(3));
    }

    #[test]
    fn a_metric_at_zero_everywhere_still_gets_a_positive_floor() {
        let steps = vec![vec![0.0; 4]; 6];
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert!(b.floor > 0.0);
    }

    #[test]
    fn a_node_without_warm_up_values_is_taken_as_typical() {
        let steps = vec![vec![100.0, 100.0, 100.0, f64::NAN]; 6];
        let b = MetricBaseline::learn(&steps, 0.05).unwrap();
        assert_eq!(b.expected(3, 100.0), b.expected(0, 100.0));
        assert_eq!(b.own(3), None);
        assert_eq!(b.expected(9, 100.0), b.expected(0, 100.0));
    }

    #[test]
    fn after_a_restart_the_kept_places_follow_the_jobs_new_level_and_replacements_cannot_drain() {
        // Before: two nodes at 10 and two at 20 (level 15). After a requeue
        // three replacements report a tenth as much, and the job's median
        // node is now at 10; node 3 has slowed to 10.
        let before = MetricBaseline::learn(&vec![vec![10.0, 10.0, 20.0, 20.0]; 6], 0.05).unwrap();
        let now_steps = vec![vec![10.0, 10.0, 20.0, 10.0, 1.0, 1.0, 1.0]; 6];
        let mut now = MetricBaseline::learn(&now_steps, 0.05).unwrap();
        now.keep_places(&before);
        // Nodes 0 and 2 are where they were, at the new level.
        assert!(
            now.expected(0, 10.0).abs() < 0.01,
            "{}",
            now.expected(0, 10.0)
        );
        assert!((now.expected(2, 10.0) - now.expected(3, 10.0)).abs() < 0.01);
        // Node 3 is expected where it was, not where it fell.
        assert!(now.expected(3, 10.0) > now.expected(1, 10.0) + 0.5);
        // A replacement is expected at its own level, and has no place for a drain.
        assert!(now.expected(4, 10.0) < now.expected(0, 10.0) - 1.0);
        assert!(now.placed(3) && !now.placed(4));
    }
}
