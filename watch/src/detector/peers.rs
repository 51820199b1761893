//! One step of a job of 4 or more nodes: how far each node is from its
//! peers (Minder's similarity), metric by metric, then combined.
//!
//! Per metric, each node's denoised value is divided by the job's level at
//! this step (the median node, both plus a floor) on a log scale, so phases
//! that every node shares (a checkpoint, an evaluation, a data-loader stall) cancel. The
//! node's learned offset is subtracted, so designed differences cancel too.
//! What is left is centred on the median node and divided by a robust
//! spread: a distance in deviations. The distances that point the faulty
//! way are weighed by metric priority and combined.

use super::baseline::MetricBaseline;
use super::rules::{Direction, MetricRule};
use crate::stats::{median, scaled_mad};
use lemonade_config::WatchSettings;

/// The fewest nodes present for a metric to be compared at a step.
pub const MIN_PEERS: usize = 4;
/// The fewest others a reported node is judged against: in a job of four,
/// the three left once it is set aside.
pub const MIN_REFERENCE_PEERS: usize = MIN_PEERS - 1;

/// One metric's inputs at one step.
pub struct MetricStep<'a> {
    pub rule: &'a MetricRule,
    pub baseline: &'a MetricBaseline,
    /// Denoised value per node; NaN for a node missing (or already called).
    pub values: &'a [f64],
}

/// Reusable buffers, so a step allocates nothing once warm.
#[derive(Debug, Default)]
pub struct Scratch {
    residual: Vec<f64>,
    sorted: Vec<f64>,
    /// Combined squared evidence per node.
    pub combined: Vec<f64>,
    /// Whether a primary metric gives evidence against the node.
    primary: Vec<bool>,
    /// Evidence per metric and node (`metric * nodes + node`), 0 when below `evidence_z`.
    pub evidence: Vec<f64>,
    /// The job's level (median node) per metric; NaN with too few nodes.
    pub levels: Vec<f64>,
    /// The spread per metric (NaN with too few nodes).
    pub spreads: Vec<f64>,
    /// The median residual per metric (NaN with too few nodes).
    pub centres: Vec<f64>,
    /// Some primary metric was compared at this step: enough nodes had it,
    /// and the job was not in a shared phase of it.
    pub judged: bool,
}

/// The outcome of a step: the farthest node, if it stands alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub node: usize,
    pub score: f64,
}

/// Scores every node against its peers; fills `scratch.evidence` and returns
/// the candidate that stands alone above the threshold, if any.
pub fn step(
    metrics: &[MetricStep<'_>],
    nodes: usize,
    cfg: &WatchSettings,
    scratch: &mut Scratch,
) -> Option<Candidate> {
    scratch.combined.clear();
    scratch.combined.resize(nodes, 0.0);
    scratch.primary.clear();
    scratch.primary.resize(nodes, false);
    scratch.evidence.clear();
    scratch.evidence.resize(metrics.len() * nodes, 0.0);
    scratch.levels.clear();
    scratch.spreads.clear();
    scratch.centres.clear();
    scratch.judged = false;
    for (m, metric) in metrics.iter().enumerate() {
        let Some((level, centre, spread)) = residuals(metric, cfg, scratch, MIN_PEERS) else {
            scratch.levels.push(f64::NAN);
            scratch.spreads.push(f64::NAN);
            scratch.centres.push(f64::NAN);
            continue;
        };
        scratch.levels.push(level);
        scratch.spreads.push(spread);
        scratch.centres.push(centre);
        if in_shared_phase(metric.rule, metric.baseline, level, cfg) {
            continue;
        }
        scratch.judged |= metric.rule.weight >= 1.0;
        for (node, r) in scratch.residual.iter().enumerate() {
            if r.is_nan() {
                continue;
            }
            let rule = (metric.rule, metric.baseline);
            let value = metric.values[node];
            let weighed = weigh(rule, node, value, *r, (level, centre, spread), cfg);
            if weighed > 0.0 {
                scratch.evidence[m * nodes + node] = weighed;
                scratch.combined[node] += weighed * weighed;
                scratch.primary[node] |= metric.rule.weight >= 1.0;
            }
        }
    }
    // Host and unknown metrics only add to a node that a primary metric
    // already sets apart: alone, a rank 0 that logs would outrank, and so
    // hide, the node that failed.
    for (c, &primary) in scratch.combined.iter_mut().zip(&scratch.primary) {
        if !primary {
            *c = 0.0;
        }
    }
    pick(&scratch.combined, cfg)
}

/// The weighed evidence against `node` on one metric, from its `residual`
/// (its log ratio to the job's `level` less its learned offset) and the
/// others' `centre` and `spread`. The node must be off the faulty way both
/// from its own place among its peers and from the typical node's: one that
/// sat above the rest in the warm-up (the host of the hot experts then, a
/// rank 0 with extra work) and is back among them now has left its offset,
/// but it does less than none of its peers.
pub fn weigh(
    (rule, baseline): (&MetricRule, &MetricBaseline),
    node: usize,
    value: f64,
    residual: f64,
    (level, centre, spread): (f64, f64, f64),
    cfg: &WatchSettings,
) -> f64 {
    let own = rule.evidence((residual - centre) / spread, cfg.evidence_z);
    if own == 0.0 || !baseline.placed(node) {
        return own;
    }
    let raw = log_ratio(value, level, baseline.floor) - baseline.typical(level);
    own.min(rule.evidence((raw - centre) / spread, cfg.evidence_z))
}

/// How far (a natural log ratio, about 10%) a group of nodes must sit from
/// the typical node to be apart by design, as a pipeline stage is: nodes a
/// few percent slower for life are no group, and a node that falls below
/// them has still lost work.
const GROUP_APART: f64 = 0.1;

/// The weighed evidence against `node` on one metric, judged against
/// where `group` of its peers were learned to sit on the faulty side
/// ([`MetricBaseline::group_place`]), when they sit apart from the typical
/// node by design: none while it does no less than they do. A node that
/// ran above its pipeline stage in the warm-up and now runs at its stage's
/// level has left its own place, but a whole stage was learned to work
/// there. Unlimited (infinite) when no such group is apart.
pub fn weigh_against_group(
    (rule, baseline): (&MetricRule, &MetricBaseline),
    node: usize,
    value: f64,
    (level, centre, spread): (f64, f64, f64),
    cfg: &WatchSettings,
    group: usize,
) -> f64 {
    let at = log_ratio(value, level, baseline.floor);
    let typical = baseline.typical(level);
    let low = baseline
        .group_place(node, level, group, true)
        .filter(|low| *low <= typical - GROUP_APART);
    let high = baseline
        .group_place(node, level, group, false)
        .filter(|high| *high >= typical + GROUP_APART);
    let beyond = match rule.direction {
        Direction::Falls => low.map(|low| at - low),
        Direction::Rises => high.map(|high| at - high),
        Direction::Either if low.is_none() && high.is_none() => None,
        Direction::Either => {
            let (low, high) = (low.unwrap_or(typical), high.unwrap_or(typical));
            Some((at - low).min(0.0) + (at - high).max(0.0))
        }
    };
    beyond.map_or(f64::INFINITY, |beyond| {
        rule.evidence((beyond - centre) / spread, cfg.evidence_z)
    })
}

/// The weighed evidence against a node whose value is `value`, on a
/// metric that falls with a fault, judged against where the job's typical
/// node sat in the warm-up:
/// none while it does as much as that node did then. Its peers doing more
/// than they were learned to do is no fault of this node: an RL job whose
/// learner and rollout groups swap lifts the many as it lowers the few,
/// while a broken node slows a synchronous job's peers, or leaves them
/// alone. Unlimited (infinite) for other metrics.
pub fn weigh_against_warmup(
    (rule, baseline): (&MetricRule, &MetricBaseline),
    value: f64,
    spread: f64,
    cfg: &WatchSettings,
) -> f64 {
    if rule.direction != Direction::Falls {
        return f64::INFINITY;
    }
    let at = log_ratio(value, baseline.level, baseline.floor) - baseline.typical(baseline.level);
    rule.evidence(at / spread, cfg.evidence_z)
}

/// The job's level, the median residual and the spread of one metric among
/// the nodes present (at least [`MIN_REFERENCE_PEERS`]): what a node set
/// aside is judged against.
pub fn reference(
    metric: &MetricStep<'_>,
    cfg: &WatchSettings,
    scratch: &mut Scratch,
) -> Option<(f64, f64, f64)> {
    residuals(metric, cfg, scratch, MIN_REFERENCE_PEERS)
}

/// Fills `scratch.residual` (NaN for missing nodes) and returns the job's
/// level, the median residual and the spread, or `None` with fewer than
/// `min_peers` nodes present.
fn residuals(
    metric: &MetricStep<'_>,
    cfg: &WatchSettings,
    scratch: &mut Scratch,
    min_peers: usize,
) -> Option<(f64, f64, f64)> {
    scratch.sorted.clear();
    scratch
        .sorted
        .extend(metric.values.iter().copied().filter(|v| !v.is_nan()));
    if scratch.sorted.len() < min_peers {
        return None;
    }
    let level = median(&mut scratch.sorted)?;
    let floor = metric.baseline.floor;
    scratch.residual.clear();
    scratch.residual.extend(
        metric
            .values
            .iter()
            .enumerate()
            .map(|(node, &v)| log_ratio(v, level, floor) - metric.baseline.expected(node, level)),
    );
    scratch.sorted.clear();
    scratch
        .sorted
        .extend(scratch.residual.iter().copied().filter(|v| !v.is_nan()));
    let centre = median(&mut scratch.sorted)?;
    let spread = scaled_mad(&mut scratch.sorted, centre)
        .max(metric.baseline.noise)
        .max(cfg.min_spread);
    Some((level, centre, spread))
}

/// Whether the whole job sits far below its learned level of a metric that
/// falls with a fault (a checkpoint, an evaluation, a stall, the network of a
/// hung job): then every node is near the floor, and which one is lowest
/// says nothing about its machine. The metric gives no evidence meanwhile.
pub fn in_shared_phase(
    rule: &MetricRule,
    baseline: &MetricBaseline,
    level: f64,
    cfg: &WatchSettings,
) -> bool {
    rule.direction == Direction::Falls && level < cfg.shared_phase_fraction * baseline.level
}

/// How many times the job's level `value` is, on a log scale, with `floor`
/// added to both (a metric at 0 compares as equal, not as infinitely apart).
/// Phases that scale every node alike cancel; per-node noise that is
/// multiplicative (counters, bursts) becomes additive. NaN stays NaN.
pub fn log_ratio(value: f64, level: f64, floor: f64) -> f64 {
    if value.is_nan() {
        return f64::NAN;
    }
    let tiny = floor * 1e-3;
    ((value + floor).max(tiny) / (level + floor).max(tiny)).ln()
}

/// The farthest node, if it reaches the threshold and no other node comes
/// within `uniqueness` of it (a group or a shared shift is not one machine).
fn pick(combined: &[f64], cfg: &WatchSettings) -> Option<Candidate> {
    let (mut top, mut first, mut second) = (0, 0.0f64, 0.0f64);
    for (node, &c) in combined.iter().enumerate() {
        if c > first {
            second = first;
            first = c;
            top = node;
        } else if c > second {
            second = c;
        }
    }
    let (first, second) = (first.sqrt(), second.sqrt());
    (first >= cfg.threshold && second < cfg.uniqueness * first).then_some(Candidate {
        node: top,
        score: first,
    })
}

#[cfg(test)]
mod tests {
    use super::super::rules::MetricRule;
    use super::*;

    fn baseline(nodes: usize) -> MetricBaseline {
        MetricBaseline::learn(&vec![vec![100.0; nodes]; 6], 0.05).unwrap()
    }

    fn run(values: &[f64]) -> Option<Candidate> {
        let cfg = WatchSettings::default();
        let rule = MetricRule::of("gpu_util", &cfg);
        let base = baseline(values.len());
        let metric = MetricStep {
            rule: &rule,
            baseline: &base,
            values,
        };
        step(&[metric], values.len(), &cfg, &mut Scratch::default())
    }

    #[test]
    fn one_node_far_below_its_peers_is_the_candidate() {
        let mut v = vec![100.0; 16];
        v[5] = 40.0;
        assert_eq!(run(&v).map(|c| c.node), Some(5));
    }

    #[test]
    fn a_shared_drop_makes_no_candidate() {
        assert_eq!(run(&[20.0; 16]), None);
    }

    #[test]
    fn two_nodes_far_out_together_make_no_candidate() {
        let mut v = vec![100.0; 16];
        v[5] = 40.0;
        v[6] = 42.0;
        assert_eq!(run(&v), None);
    }

    #[test]
    fn a_node_at_its_pipeline_stages_level_has_nothing_against_it_and_nodes_slow_for_life_make_no_stage(
    ) {
        let cfg = WatchSettings::default();
        let rule = MetricRule::of("gpu_util", &cfg);
        let judge = |warm_up: Vec<f64>, now: f64| {
            let b = MetricBaseline::learn(&vec![warm_up; 6], 0.05).unwrap();
            weigh_against_group((&rule, &b), 3, now, (100.0, 0.0, 0.02), &cfg, 2)
        };
        // Nodes 0-2 are a stage at 60; node 3 ran at 80 and now runs at 60.
        let stage = vec![60.0, 60.0, 60.0, 80.0, 100.0, 100.0, 100.0, 100.0, 100.0];
        assert_eq!(judge(stage.clone(), 60.0), 0.0);
        assert!(judge(stage, 45.0) > 10.0, "below its stage");
        // Nodes 0-2 are 5% slow for life: no stage, no limit.
        let slow = vec![95.0, 95.0, 95.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0];
        assert_eq!(judge(slow, 90.0), f64::INFINITY);
    }

    #[test]
    fn a_node_that_works_as_the_typical_node_did_in_the_warm_up_has_nothing_against_it_whatever_its_peers_do(
    ) {
        let cfg = WatchSettings::default();
        let rule = MetricRule::of("gpu_util", &cfg);
        // One learner at 97, eight rollout workers at 80.
        let mut warm_up = vec![80.0; 9];
        warm_up[0] = 97.0;
        let b = MetricBaseline::learn(&vec![warm_up; 6], 0.05).unwrap();
        let judge = |now: f64| weigh_against_warmup((&rule, &b), now, 0.02, &cfg);
        assert_eq!(judge(80.0), 0.0, "where the typical node worked");
        assert!(judge(60.0) > 10.0, "below it");
        // A metric that rises with a fault is not limited.
        let pauses = MetricRule::of("pfc_pause", &cfg);
        assert_eq!(
            weigh_against_warmup((&pauses, &b), 80.0, 0.02, &cfg),
            f64::INFINITY
        );
    }

    #[test]
    fn a_node_above_its_peers_on_a_falling_metric_is_no_candidate() {
        let mut v = vec![100.0; 16];
        v[5] = 160.0;
        assert_eq!(run(&v), None);
    }
}
