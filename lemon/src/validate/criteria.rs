//! Pass/fail criteria for benchmark metrics, learned from the fleet (issue
//! 31, after Anubis). Pure: a SKU's results for one metric in, the failing
//! nodes and the band they missed out.
//!
//! # The rule
//!
//! Anubis compares a node's results with the fleet's as distributions. A
//! validation gives one value per node and metric, so the comparison is of
//! that value with the distribution of its peers' values: every node of the
//! SKU with the metric, except the judged node itself (leave-one-out). For a
//! higher-is-better metric (bandwidth, Gflop/s) the node fails when
//!
//! ```text
//! value < median(peers) - max(spread_k * s_low, min_gap * |median(peers)|)
//! ```
//!
//! where `s_low` is 1.4826 x the median of `median - p` over the peers `p`
//! below the median: the robust standard deviation of the failing side
//! only. Lower-is-better metrics (latency, time) mirror it with the peers
//! above the median. Why this and not a percentile band such as "p5 minus a
//! gap":
//! * the degraded nodes are in the sample. A low percentile is where they
//!   sit: with 3 bad nodes of 64, p5 is the 4th lowest value, one good node
//!   away from the bad ones, and 4 bad nodes would pull it into them. The
//!   median and the median deviation move by one rank per bad node, so the
//!   band holds until half the fleet is bad;
//! * noise is skewed (a few nodes run fast: better cooling, a newer BIOS).
//!   The spread of the good side says nothing about how far a healthy node
//!   falls, so only the failing side's spread widens the band;
//! * `min_gap` keeps a fleet that agrees to 0.1% from calling a 1% dip a
//!   fault: a gray failure worth a drain costs several percent.
//!
//! Metrics that must be 0 (`wrong_total`, `gpus_faulty`) fail on any other
//! value, whatever the fleet does. The site's static floors
//! (`[[validate.floor]]`) apply to every node, and they are the only rule
//! while a SKU has fewer than `min_results` results for the metric: a fleet
//! that learned a regression as normal still meets the floor.
//!
//! `lemon validate judge` judges each node against the others
//! ([`judge_group`]); `lemon run` publishes, for the nodes validated next,
//! the band of all the fleet's results ([`fleet_band`]: the same rule, the
//! judged node not among the peers).

use lemonade_config::{FloorRule, ValidateSettings};
use serde::Serialize;

/// 1/Φ⁻¹(3/4): the median absolute deviation of a normal sample times this
/// is its standard deviation.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Which way a metric gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
    MustBeZero,
}

/// The direction of `metric` from the config's patterns: must-be-zero
/// first, then lower-is-better (`*latency*` before a bandwidth pattern
/// that would also match), then higher-is-better; failing those, the
/// built-in words of [`words_direction`]. `None`: no direction known, and
/// [`judge_group`] judges the metric on both sides.
///
/// A SuperBench name is `benchmark/metric`; its metric part (after the last
/// `/`) is read first, by the patterns then by its words, and only then the
/// whole name: the benchmark `cpu-memory-bw-latency` would otherwise make
/// its bandwidths lower-is-better by `*latency*`.
pub fn direction(settings: &ValidateSettings, metric: &str) -> Option<Direction> {
    let tail = metric.rsplit('/').next().unwrap_or(metric);
    configured_direction(settings, tail)
        .or_else(|| words_direction(&tail.to_ascii_lowercase()))
        .or_else(|| configured_direction(settings, metric))
        .or_else(|| words_direction(&metric.to_ascii_lowercase()))
}

fn configured_direction(settings: &ValidateSettings, metric: &str) -> Option<Direction> {
    let any = |patterns: &[String]| patterns.iter().any(|p| glob_match(p, metric));
    if any(&settings.must_be_zero) {
        Some(Direction::MustBeZero)
    } else if any(&settings.lower_is_better) {
        Some(Direction::LowerIsBetter)
    } else if any(&settings.higher_is_better) {
        Some(Direction::HigherIsBetter)
    } else {
        None
    }
}

/// Words that name a higher-is-better quantity wherever they stand in a
/// metric's name.
const HIGHER_WORDS: &[&str] = &[
    "bandwidth",
    "bw",
    "busbw",
    "algbw",
    "flops",
    "gflops",
    "tflops",
    "pflops",
    "throughput",
    "ops",
    "iops",
    "tops",
];

/// Words that name a lower-is-better quantity.
const LOWER_WORDS: &[&str] = &["latency", "lat", "time", "duration"];

/// The direction the words of a lowercase name give: the name is split at
/// every character that is not a letter or digit (`_ - . : /`), so
/// `gemm_tflops`, `h2d_bandwidth` and SuperBench's
/// `allreduce_8589934592_busbw` read as their words. The last word with a
/// direction wins (`mem_bw_latency` is a latency).
fn words_direction(name: &str) -> Option<Direction> {
    let words = name.split(|c: char| !c.is_ascii_alphanumeric());
    words.rev().find_map(|w| {
        if HIGHER_WORDS.contains(&w) {
            Some(Direction::HigherIsBetter)
        } else if LOWER_WORDS.contains(&w) {
            Some(Direction::LowerIsBetter)
        } else {
            None
        }
    })
}

// The node judges must-be-zero counts by the same patterns: one matcher, in config.
pub use lemonade_config::glob_match;

/// Which rule a band comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Learned from the node's peers of the same SKU.
    Learned,
    /// The site's `[[validate.floor]]`.
    StaticFloor,
    /// A count that must be 0.
    MustBeZero,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Learned => "learned",
            Rule::StaticFloor => "static floor",
            Rule::MustBeZero => "must be 0",
        }
    }
}

/// The values a node must stay within, and how they were found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Band {
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub rule: Rule,
    /// How the bounds were computed, for the operator.
    pub detail: String,
}

impl Band {
    fn holds(&self, value: f64) -> bool {
        self.min.is_none_or(|m| value >= m) && self.max.is_none_or(|m| value <= m)
    }
}

/// One node's value outside one band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub node: String,
    pub metric: String,
    pub value: f64,
    pub band: Band,
}

/// What judging one SKU's metric found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupOutcome {
    pub failures: Vec<Failure>,
    /// Fewer results than `min_results`: `(results, floor applied)`.
    pub below_min: Option<(usize, bool)>,
}

/// Judges every node's latest `value` of `metric` on SKU `sku` against the
/// others. `results` holds one entry per node.
pub fn judge_group(
    settings: &ValidateSettings,
    sku: &str,
    metric: &str,
    results: &[(String, f64)],
) -> GroupOutcome {
    let mut outcome = GroupOutcome::default();
    let floor = floor_band(settings, sku, metric);
    let dir = direction(settings, metric);
    for (node, value) in results {
        if let Some(band) = floor.as_ref().filter(|b| !b.holds(*value)) {
            outcome
                .failures
                .push(failure(node, metric, *value, band.clone()));
        }
        if dir == Some(Direction::MustBeZero) && *value != 0.0 {
            let band = Band {
                min: Some(0.0),
                max: Some(0.0),
                rule: Rule::MustBeZero,
                detail: "a count that must be 0 on every node".into(),
            };
            outcome.failures.push(failure(node, metric, *value, band));
        }
    }
    let side = match dir {
        Some(Direction::HigherIsBetter) => Side::Low,
        Some(Direction::LowerIsBetter) => Side::High,
        // No direction known: too far from the peers either way is a
        // fault, so an unknown name never passes a slow node.
        None => Side::Both,
        Some(Direction::MustBeZero) => return outcome,
    };
    if results.len() < settings.min_results {
        outcome.below_min = Some((results.len(), floor.is_some()));
        return outcome;
    }
    learned_failures(settings, metric, results, side, &mut outcome.failures);
    outcome
}

/// The side of the peers' median on which a value fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Below: a higher-is-better metric.
    Low,
    /// Above: a lower-is-better metric.
    High,
    /// Either: a metric of unknown direction.
    Both,
}

/// What the fleet's results of one SKU's metric set for a node that is not
/// among them (a node validated next, judged on the node by the published
/// criteria file): the same rule with every result as a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetBand {
    Learned(Band),
    /// Fewer results than `min_results`: `(results, a floor applies)`.
    TooFew(usize, bool),
    /// The metric has no direction, or must be 0: nothing to learn.
    NotLearned,
}

/// The band `values` (one per node, the fleet's latest passed results) set
/// for another node of the SKU. The static floors are not folded in: the
/// node applies its own, and so does [`judge_group`].
pub fn fleet_band(
    settings: &ValidateSettings,
    sku: &str,
    metric: &str,
    values: &[f64],
) -> FleetBand {
    let higher = match direction(settings, metric) {
        Some(Direction::HigherIsBetter) => true,
        Some(Direction::LowerIsBetter) => false,
        _ => return FleetBand::NotLearned,
    };
    if values.len() < settings.min_results {
        let floor = floor_band(settings, sku, metric).is_some();
        return FleetBand::TooFew(values.len(), floor);
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let peers = Peers {
        skip: sorted.len(),
        sorted: &sorted,
    };
    FleetBand::Learned(learned_band(settings, &peers, higher))
}

fn failure(node: &str, metric: &str, value: f64, band: Band) -> Failure {
    Failure {
        node: node.to_string(),
        metric: metric.to_string(),
        value,
        band,
    }
}

/// The SKU's own floor for the metric, else one for every SKU.
fn floor_band(settings: &ValidateSettings, sku: &str, metric: &str) -> Option<Band> {
    let for_metric = |f: &&FloorRule| f.metric == metric;
    let rule = (settings.floor.iter().filter(for_metric))
        .find(|f| f.sku.as_deref() == Some(sku))
        .or_else(|| (settings.floor.iter().filter(for_metric)).find(|f| f.sku.is_none()))?;
    Some(Band {
        min: rule.min,
        max: rule.max,
        rule: Rule::StaticFloor,
        detail: match &rule.sku {
            Some(s) => format!("[[validate.floor]] for {metric} on {s}"),
            None => format!("[[validate.floor]] for {metric} on every SKU"),
        },
    })
}

/// The learned band's failures, each node against the others.
fn learned_failures(
    settings: &ValidateSettings,
    metric: &str,
    results: &[(String, f64)],
    side: Side,
    out: &mut Vec<Failure>,
) {
    let mut order: Vec<usize> = (0..results.len()).collect();
    order.sort_by(|&a, &b| results[a].1.total_cmp(&results[b].1));
    let sorted: Vec<f64> = order.iter().map(|&i| results[i].1).collect();
    for (rank, &i) in order.iter().enumerate() {
        let peers = Peers {
            sorted: &sorted,
            skip: rank,
        };
        let band = match side {
            Side::Low => learned_band(settings, &peers, true),
            Side::High => learned_band(settings, &peers, false),
            Side::Both => two_sided_band(settings, &peers),
        };
        let (node, value) = &results[i];
        if !band.holds(*value) {
            out.push(failure(node, metric, *value, band));
        }
    }
}

/// The band that `peers` set for a node of the SKU.
fn learned_band(settings: &ValidateSettings, peers: &Peers, higher: bool) -> Band {
    let center = median(peers.len(), |k| peers.get(k));
    let spread = MAD_TO_SIGMA * peers.side_deviation(center, higher);
    let from_spread = settings.spread_k * spread;
    let from_gap = settings.min_gap * center.abs();
    let margin = from_spread.max(from_gap);
    let why = if from_spread >= from_gap {
        format!("{} x robust sd {}", settings.spread_k, short(spread))
    } else {
        format!("min_gap {}% of the median", short(settings.min_gap * 100.0))
    };
    let (min, max, sign) = if higher {
        (Some(center - margin), None, '-')
    } else {
        (None, Some(center + margin), '+')
    };
    Band {
        min,
        max,
        rule: Rule::Learned,
        detail: format!(
            "median {} of {} peers {sign} {} ({why})",
            short(center),
            peers.len(),
            short(margin)
        ),
    }
}

/// The band of a metric of unknown direction: each side's bound from that
/// side's own spread, as a directed metric's one bound is.
fn two_sided_band(settings: &ValidateSettings, peers: &Peers) -> Band {
    let low = learned_band(settings, peers, true);
    let high = learned_band(settings, peers, false);
    let center = median(peers.len(), |k| peers.get(k));
    let (lo, hi) = (low.min.unwrap_or(center), high.max.unwrap_or(center));
    Band {
        min: low.min,
        max: high.max,
        rule: Rule::Learned,
        detail: format!(
            "no direction known, both sides: median {} of {} peers - {} + {}",
            short(center),
            peers.len(),
            short(center - lo),
            short(hi - center)
        ),
    }
}

/// A number as the operator reads it: 4 significant digits at most.
pub fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{x:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// The sorted values of a SKU's metric without the judged node's own
/// (`skip`, its rank; `sorted.len()` when the node is not among them).
struct Peers<'a> {
    sorted: &'a [f64],
    skip: usize,
}

impl Peers<'_> {
    fn len(&self) -> usize {
        self.sorted.len() - usize::from(self.skip < self.sorted.len())
    }

    fn get(&self, k: usize) -> f64 {
        self.sorted[if k < self.skip { k } else { k + 1 }]
    }

    /// Index of the first peer for which `below` is false (`below` holds
    /// for a prefix of the sorted peers).
    fn partition_point(&self, below: impl Fn(f64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if below(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The median distance from `center` of the peers strictly on the
    /// failing side of it (below for higher-is-better); 0 when none is.
    fn side_deviation(&self, center: f64, higher: bool) -> f64 {
        if higher {
            let count = self.partition_point(|v| v < center);
            median(count, |k| center - self.get(k))
        } else {
            let start = self.partition_point(|v| v <= center);
            median(self.len() - start, |k| self.get(start + k) - center)
        }
    }
}

/// The median of a monotone sequence of `len` values given by index.
fn median(len: usize, at: impl Fn(usize) -> f64) -> f64 {
    match len {
        0 => 0.0,
        n if n % 2 == 1 => at(n / 2),
        n => (at(n / 2 - 1) + at(n / 2)) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(values: &[f64]) -> Vec<(String, f64)> {
        (values.iter().enumerate())
            .map(|(i, v)| (format!("n{i:02}"), *v))
            .collect()
    }

    fn flagged(outcome: &GroupOutcome) -> Vec<&str> {
        outcome.failures.iter().map(|f| f.node.as_str()).collect()
    }

    #[test]
    fn patterns_match_exact_names_prefixes_and_inner_runs() {
        assert!(glob_match("avg_busbw", "avg_busbw"));
        assert!(!glob_match("avg_busbw", "avg_busbw2"));
        assert!(glob_match("busbw.*", "busbw.out_of_place.1024"));
        assert!(!glob_match("busbw.*", "avg_busbw"));
        assert!(glob_match("*memcpy*", "host_to_device_memcpy_ce.sum"));
        assert!(glob_match("a*b*b", "abb"));
        assert!(!glob_match("a*bb*b", "abb"));
    }

    #[test]
    fn default_directions_follow_the_parsers_metric_names() {
        let s = ValidateSettings::default();
        let d = |m| direction(&s, m);
        assert_eq!(d("avg_busbw"), Some(Direction::HigherIsBetter));
        assert_eq!(
            d("busbw.out_of_place.1073741824"),
            Some(Direction::HigherIsBetter)
        );
        assert_eq!(d("gflops.gpu3"), Some(Direction::HigherIsBetter));
        assert_eq!(d("bw_average.65536"), Some(Direction::HigherIsBetter));
        assert_eq!(
            d("host_device_latency_sm.sum"),
            Some(Direction::LowerIsBetter)
        );
        assert_eq!(d("wrong_total"), Some(Direction::MustBeZero));
        assert_eq!(d("gpus_faulty"), Some(Direction::MustBeZero));
        assert_eq!(d("error.in_place.32"), None);
    }

    #[test]
    fn common_and_superbench_names_get_their_direction_from_their_words() {
        let s = ValidateSettings::default();
        let d = |m| direction(&s, m);
        let higher = Some(Direction::HigherIsBetter);
        let lower = Some(Direction::LowerIsBetter);
        for m in [
            "nccl_allreduce_busbw",
            "h2d_bandwidth",
            "gemm_tflops",
            "ib_write_bw",
            "nccl-bw:default/allreduce_8589934592_busbw",
            "mem-bw/h2d_bw",
            "gemm-flops/fp16_tc_flops",
            "model-benchmarks:gpt/pytorch-gpt2-large/fp16_train_throughput",
            "disk-benchmark/nvme0n1_rand_read_iops",
            "cpu-memory-bw-latency/mem_max_bandwidth",
        ] {
            assert_eq!(d(m), higher, "{m}");
        }
        for m in [
            "kernel-launch/event_time",
            "cpu-memory-bw-latency/mem_read_latency",
            "model-benchmarks:gpt/pytorch-gpt2-large/fp16_train_step_time",
        ] {
            assert_eq!(d(m), lower, "{m}");
        }
        assert_eq!(
            d("nccl-bw:default/return_code"),
            Some(Direction::MustBeZero)
        );
        assert_eq!(d("loops_dropped"), None);
    }

    #[test]
    fn a_metric_of_unknown_direction_fails_a_node_far_from_its_peers_on_either_side() {
        let mut values: Vec<f64> = (0..20).map(|i| 100.0 + (i % 5) as f64 * 0.2).collect();
        values[3] = 92.0;
        values[11] = 108.0;
        let out = judge_group(
            &ValidateSettings::default(),
            "h100",
            "overlap_score",
            &fleet(&values),
        );
        assert_eq!(flagged(&out), ["n03", "n11"]);
        let band = &out.failures[0].band;
        assert!(band.min.is_some() && band.max.is_some(), "{band:?}");
        assert!(band.detail.starts_with("no direction known, both sides"));
    }

    #[test]
    fn a_node_far_below_its_peers_fails_and_the_band_names_the_median() {
        let mut values: Vec<f64> = (0..20).map(|i| 400.0 + (i % 5) as f64 * 0.5).collect();
        values[7] = 360.0;
        let out = judge_group(
            &ValidateSettings::default(),
            "h100",
            "avg_busbw",
            &fleet(&values),
        );
        assert_eq!(flagged(&out), ["n07"]);
        let band = &out.failures[0].band;
        assert_eq!(band.rule, Rule::Learned);
        // median 401 of 19 peers; the 2% gap (8.02) beats 4 x sd (4.4).
        assert!(
            (band.min.unwrap() - (401.0 - 8.02)).abs() < 1e-9,
            "{band:?}"
        );
        assert_eq!(
            band.detail,
            "median 401 of 19 peers - 8.02 (min_gap 2% of the median)"
        );
    }

    #[test]
    fn fast_outliers_widen_nothing_and_a_slow_latency_fails_upward() {
        let mut values = vec![10.0; 30];
        values[0] = 30.0; // a slow node on a lower-is-better metric
        values[1] = 2.0; // a fast one passes
        let out = judge_group(
            &ValidateSettings::default(),
            "h100",
            "p2p_latency",
            &fleet(&values),
        );
        assert_eq!(flagged(&out), ["n00"]);
        assert_eq!(out.failures[0].band.max, Some(10.2));
    }

    #[test]
    fn three_bad_nodes_of_64_do_not_widen_the_band_enough_to_hide_them() {
        let mut values: Vec<f64> = (0..64).map(|i| 100.0 + (i % 7) as f64 * 0.3).collect();
        for (i, v) in [(3, 94.0), (30, 91.0), (60, 95.0)] {
            values[i] = v;
        }
        let out = judge_group(
            &ValidateSettings::default(),
            "s",
            "avg_busbw",
            &fleet(&values),
        );
        assert_eq!(flagged(&out), ["n30", "n03", "n60"]);
    }

    #[test]
    fn too_few_results_use_the_static_floor_and_say_how_many() {
        let mut s = ValidateSettings::default();
        s.floor.push(FloorRule {
            metric: "avg_busbw".into(),
            sku: Some("a100".into()),
            min: Some(200.0),
            max: None,
        });
        let values = [230.0, 231.0, 150.0, 229.0, 232.0];
        let out = judge_group(&s, "a100", "avg_busbw", &fleet(&values));
        assert_eq!(flagged(&out), ["n02"]);
        assert_eq!(out.failures[0].band.rule, Rule::StaticFloor);
        assert_eq!(out.below_min, Some((5, true)));
        let other = judge_group(&s, "h100", "avg_busbw", &fleet(&values));
        assert!(other.failures.is_empty());
        assert_eq!(other.below_min, Some((5, false)));
    }

    #[test]
    fn a_floor_binds_even_when_the_whole_fleet_learned_a_regression() {
        let mut s = ValidateSettings::default();
        s.floor.push(FloorRule {
            metric: "avg_busbw".into(),
            min: Some(350.0),
            ..FloorRule::default()
        });
        let out = judge_group(&s, "any", "avg_busbw", &fleet(&[300.0; 10]));
        assert_eq!(out.failures.len(), 10);
        assert!(out
            .failures
            .iter()
            .all(|f| f.band.rule == Rule::StaticFloor));
    }

    #[test]
    fn a_wrong_count_fails_on_any_node_whatever_the_fleet_does() {
        let out = judge_group(
            &ValidateSettings::default(),
            "s",
            "wrong_total",
            &fleet(&[0.0, 0.0, 2.0]),
        );
        assert_eq!(flagged(&out), ["n02"]);
        assert_eq!(out.failures[0].band.rule, Rule::MustBeZero);
        assert_eq!(out.below_min, None);
    }

    #[test]
    fn a_metric_with_no_direction_and_too_few_results_is_reported_as_below_min() {
        let out = judge_group(
            &ValidateSettings::default(),
            "s",
            "error.in_place.32",
            &fleet(&[0.0, 1.0, 1e9]),
        );
        assert!(out.failures.is_empty());
        assert_eq!(out.below_min, Some((3, false)));
    }

    #[test]
    fn leave_one_out_medians_skip_the_judged_value() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 100.0];
        let peers = Peers {
            sorted: &sorted,
            skip: 4,
        };
        assert_eq!(median(peers.len(), |k| peers.get(k)), 2.5);
        let peers = Peers {
            sorted: &sorted,
            skip: 0,
        };
        assert_eq!(median(peers.len(), |k| peers.get(k)), 3.5);
        assert_eq!(peers.side_deviation(3.5, true), 1.0);
        assert_eq!(peers.side_deviation(3.5, false), 48.5);
    }

    #[test]
    fn a_node_outside_the_fleet_is_judged_against_all_of_it() {
        let s = ValidateSettings::default();
        let mut values: Vec<f64> = (0..20).map(|i| 400.0 + (i % 5) as f64 * 0.5).collect();
        values[7] = 360.0;
        let FleetBand::Learned(band) = fleet_band(&s, "h100", "avg_busbw", &values) else {
            panic!("20 results learn a band");
        };
        // Median 401 of all 20; the 2% gap (8.02) beats 4 x sd.
        assert!(
            (band.min.unwrap() - (401.0 - 8.02)).abs() < 1e-9,
            "{band:?}"
        );
        assert_eq!(
            band.detail,
            "median 401 of 20 peers - 8.02 (min_gap 2% of the median)"
        );
        assert_eq!(
            fleet_band(&s, "h100", "avg_busbw", &values[..5]),
            FleetBand::TooFew(5, false)
        );
        assert_eq!(
            fleet_band(&s, "h100", "wrong_total", &values),
            FleetBand::NotLearned
        );
        let FleetBand::Learned(up) = fleet_band(&s, "h100", "p2p_latency", &[10.0; 9]) else {
            panic!("a latency band");
        };
        assert_eq!((up.min, up.max), (None, Some(10.2)));
    }

    proptest::proptest! {
        #[test]
        fn a_node_at_its_peers_median_never_fails(
            values in proptest::collection::vec(1.0f64..1000.0, 8..80),
        ) {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let peers_median = median(sorted.len(), |k| sorted[k]);
            let mut with_node = fleet(&values);
            with_node.push(("judged".into(), peers_median));
            let out = judge_group(&ValidateSettings::default(), "s", "avg_busbw", &with_node);
            proptest::prop_assert!(!flagged(&out).contains(&"judged"));
        }

        #[test]
        fn the_verdicts_do_not_depend_on_the_unit(
            values in proptest::collection::vec(1.0f64..1000.0, 8..60),
            scale in 0.001f64..1000.0,
        ) {
            let s = ValidateSettings::default();
            let scaled: Vec<f64> = values.iter().map(|v| v * scale).collect();
            let a = judge_group(&s, "s", "avg_busbw", &fleet(&values));
            let b = judge_group(&s, "s", "avg_busbw", &fleet(&scaled));
            // Up to rounding at the band's edge.
            let edge = |o: &GroupOutcome, scale: f64| o.failures.iter()
                .all(|f| (f.band.min.unwrap() - f.value).abs() > 1e-9 * scale);
            if edge(&a, 1.0) && edge(&b, scale) {
                proptest::prop_assert_eq!(flagged(&a), flagged(&b));
            }
        }
    }
}
