//! Which nodes are lemons: threshold rules per signal, a Poisson tail test
//! against the fleet's failure rate, and a gate on distinct failing jobs.
//!
//! A node is flagged when either
//! * it has at least `min_failing_jobs` distinct failing jobs attributed to
//!   it that no health check caught (or `min_witnessed_jobs` of them that
//!   Slurm saw the node cause), on at least `min_failing_days` distinct
//!   days (one bad day is not a lemon), and that count is improbable given
//!   the fleet's rate of such failures per node-day and the node's own
//!   node-days; or
//! * it has that many failing jobs on that many days, caught or not, and at
//!   least two signals reach their thresholds.
//!
//! The test counts what no check caught because a caught fault is already
//! handled: the check drained the node and it came back only after a clean
//! check. The nodes the lemon job exists for are the ones that keep failing
//! jobs while the checks see nothing; repeated caught faults show in
//! `xid_cnt`, `out_count` and `tickets`.
//!
//! *Improbable* is a Poisson tail below the false-discovery cut: with the
//! fleet's `m` tails sorted, the largest `p_(i) <= q·i/m` (Benjamini and
//! Hochberg, `q` = `false_discovery_rate`). When no node is a lemon, it is
//! as strict as `q/m` (2e-4 on 512 nodes); when several are, each admits
//! the next, and the expected share of healthy nodes among the improbable
//! ones stays below `q`. A tail below `p_value` is improbable in any case.
//!
//! A threshold is the configured value, else the fleet's `fleet_quantile`
//! of that signal, but never below the configured floor.

use crate::signals::{FleetSignals, NodeSignals, Signal};
use crate::stats::{poisson_tail, quantile};
use lemonade_config::LemonSettings;
use serde::Serialize;

/// One tripped threshold rule.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Trip {
    pub signal: Signal,
    pub value: f64,
    pub threshold: f64,
    /// The administrator set this threshold (`[lemon.thresholds]`); a
    /// threshold derived from the fleet's quantile only informs.
    pub configured: bool,
}

/// The decision on one node.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub signals: NodeSignals,
    pub tripped: Vec<Trip>,
    /// P(X >= uncaught failures) under the fleet's rate of them.
    pub p_value: f64,
    /// Uncaught failures expected from the fleet's rate and the node's node-days.
    pub expected_fails: f64,
    /// The tail below which a count was improbable in this scoring.
    pub p_cutoff: f64,
    pub poisson_tripped: bool,
    /// P(X >= log-witnessed failures) under the fleet's rate of them.
    pub log_p_value: f64,
    /// The log tier flagged the node: enough failures its own job logs
    /// pinned on its hardware, on enough days, at a tail below `log_p_value`.
    pub log_tripped: bool,
    /// The checks took the node out `repeat_out_count` times or more and it
    /// came back each time.
    pub repeat_offender: bool,
    pub flagged: bool,
    /// Not flagged, but one uncaught failure its own log pinned on its
    /// hardware: what counting cannot see yet, shown and never drained.
    pub watch: bool,
}

/// The thresholds in force for one scoring.
#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// One per signal, in [`Signal::ALL`]'s order.
    pub values: Vec<(Signal, f64)>,
    /// The signals whose threshold the administrator set.
    pub configured: Vec<Signal>,
}

impl Thresholds {
    pub fn get(&self, signal: Signal) -> f64 {
        self.values
            .iter()
            .find(|(s, _)| *s == signal)
            .map(|(_, v)| *v)
            .expect("every signal has a threshold")
    }
}

/// Everything scoring decided.
#[derive(Debug, Clone, Serialize)]
pub struct Scores {
    pub window_start: i64,
    pub window_end: i64,
    pub fleet_nodes: usize,
    /// Hardware failures (attributed to nodes) per 1000 node-days, lemons
    /// excepted: the paper's r_f, what a healthy node is expected to fail.
    pub fleet_rate_per_1000_node_days: f64,
    /// The same for the failures no health check caught: what a node's
    /// count is tested against.
    pub uncaught_rate_per_1000_node_days: f64,
    /// The same for the uncaught failures a job's log pinned on the node's
    /// own hardware: what the log tier tests against.
    pub log_rate_per_1000_node_days: f64,
    /// The fleet's exposure: node-days of runtime in the window.
    pub fleet_node_days: f64,
    /// `[lemon] min_report_node_days`: below it reports withhold the rates.
    pub min_report_node_days: f64,
    pub attributed_failures: u64,
    pub unattributed_failures: u64,
    pub user_error_failures: u64,
    /// The tail below which a node's count was improbable.
    pub p_cutoff: f64,
    /// The false-discovery rate that cut was set for (0: `p_value` alone).
    pub false_discovery_rate: f64,
    /// The log tier's cut (`[lemon] log_p_value`).
    pub log_p_cutoff: f64,
    pub thresholds: Thresholds,
    /// All nodes, worst first.
    pub verdicts: Vec<Verdict>,
}

impl Scores {
    /// The flagged nodes, worst first.
    pub fn flagged(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(|v| v.flagged)
    }

    /// The watch list: nodes with one uncaught failure their own log pinned
    /// on their hardware, not flagged.
    pub fn watch_list(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(|v| v.watch)
    }
}

fn configured(cfg: &LemonSettings, signal: Signal) -> (Option<f64>, f64) {
    let t = &cfg.thresholds;
    let f = &cfg.threshold_floors;
    match signal {
        Signal::ExclJobidCount => (t.excl_jobid_count, f.excl_jobid_count),
        Signal::XidCnt => (t.xid_cnt, f.xid_cnt),
        Signal::Tickets => (t.tickets, f.tickets),
        Signal::OutCount => (t.out_count, f.out_count),
        Signal::MultiNodeNodeFails => (t.multi_node_node_fails, f.multi_node_node_fails),
        Signal::SingleNodeNodeFails => (t.single_node_node_fails, f.single_node_node_fails),
        Signal::SingleNodeNodeFailureRate => (
            t.single_node_node_failure_rate,
            f.single_node_node_failure_rate,
        ),
        Signal::EarlyFails => (t.early_fails, f.early_fails),
    }
}

/// The thresholds of every signal: configured, else the fleet's quantile
/// but at least the floor.
fn thresholds(fleet: &FleetSignals, cfg: &LemonSettings) -> Thresholds {
    Thresholds {
        configured: Signal::ALL
            .iter()
            .copied()
            .filter(|&signal| configured(cfg, signal).0.is_some())
            .collect(),
        values: Signal::ALL
            .iter()
            .map(|&signal| {
                let (set, floor) = configured(cfg, signal);
                let t = set.unwrap_or_else(|| {
                    let mut v: Vec<f64> = fleet.nodes.iter().map(|n| n.get(signal)).collect();
                    quantile(&mut v, cfg.fleet_quantile).max(floor)
                });
                (signal, t)
            })
            .collect(),
    }
}

/// The fleet's rates per node-day that a node's counts are tested against,
/// and the tail below which the weighed count is improbable.
#[derive(Debug, Clone, Copy)]
struct Background {
    /// Uncaught failures of any evidence.
    rate: f64,
    p_cutoff: f64,
    /// Uncaught failures the job's log pinned on the node's own hardware.
    log_rate: f64,
    /// Times the checks took a node out and it came back, per node.
    return_rate: f64,
}

/// The repeat offenders' test: the checks took the node out
/// `repeat_out_count` times or more and it came back each time, and either
/// so many returns are improbable against the fleet's (`repeat_p_value`),
/// or a failure no check caught, that Slurm or the job's log saw, stands
/// beside them. Returns the tail and the verdict.
fn repeat_tier(s: &NodeSignals, return_rate: f64, cfg: &LemonSettings) -> (f64, bool) {
    let p = poisson_tail(s.out_returns, return_rate);
    let tripped = cfg.repeat_out_count > 0
        && s.out_returns >= cfg.repeat_out_count
        && (s.uncaught_witnessed >= 1 || p <= cfg.repeat_p_value);
    (p, tripped)
}

/// Mean times a node the checks took out came back, over the kept nodes.
fn return_rate(nodes: &[NodeSignals], keep: &dyn Fn(&NodeSignals) -> bool) -> f64 {
    let (returns, count) = nodes
        .iter()
        .filter(|s| keep(s))
        .fold((0u64, 0u64), |(r, c), s| {
            (r + u64::from(s.out_returns), c + 1)
        });
    if count > 0 {
        returns as f64 / count as f64
    } else {
        0.0
    }
}

/// The log tier: failures witnessed by the node's own lines in the jobs'
/// logs, tested on their own against the fleet's rate of such failures.
fn log_tier(s: &NodeSignals, log_rate: f64, cfg: &LemonSettings) -> (f64, bool) {
    let p = poisson_tail(s.uncaught_log_fails, log_rate * s.node_days);
    let tripped = cfg.log_min_jobs > 0
        && s.uncaught_log_fails >= cfg.log_min_jobs
        && s.uncaught_log_days >= cfg.min_failing_days
        && p <= cfg.log_p_value;
    (p, tripped)
}

/// The verdict on one node given the fleet's background.
fn judge(s: NodeSignals, thresholds: &Thresholds, bg: Background, cfg: &LemonSettings) -> Verdict {
    let (rate, p_cutoff) = (bg.rate, bg.p_cutoff);
    let tripped: Vec<Trip> = thresholds
        .values
        .iter()
        .filter_map(|&(signal, t)| {
            let value = s.get(signal);
            (value > 0.0 && value >= t).then_some(Trip {
                signal,
                value,
                threshold: t,
                configured: thresholds.configured.contains(&signal),
            })
        })
        .collect();
    let expected = rate * s.node_days;
    let p_value = poisson_tail(s.uncaught_fails, expected);
    let poisson_tripped = s.uncaught_fails > 0 && p_value <= p_cutoff;
    let gate = |fails: u32, witnessed: u32, days: u32| {
        (fails >= cfg.min_failing_jobs
            || (cfg.min_witnessed_jobs > 0 && witnessed >= cfg.min_witnessed_jobs))
            && days >= cfg.min_failing_days
    };
    // The fleet's quantiles always have someone above them, and the signals
    // move together (a node's failures raise its count, its rate and its
    // drains at once): derived thresholds alone flagged healthy nodes the
    // checks had already drained. Only thresholds an administrator set
    // may flag a node without the Poisson test.
    let configured_trips = tripped.iter().filter(|t| t.configured).count();
    let witnessed = s.uncaught_witnessed;
    let (log_p_value, log_tripped) = log_tier(&s, bg.log_rate, cfg);
    // Three returns alone flagged about one healthy node in five runs of
    // 512 where caught faults are common, so the count is weighed against
    // the fleet's own rate of returns; a node that also failed a job no
    // check caught, which Slurm or the job's log saw it fail, is the repeat
    // offender the paper's out_count is for whatever the fleet's rate.
    let (_, repeat_offender) = repeat_tier(&s, bg.return_rate, cfg);
    let flagged = (gate(s.uncaught_fails, witnessed, s.uncaught_days) && poisson_tripped)
        || (gate(s.fails(), 0, s.failing_days) && configured_trips >= 2)
        || log_tripped
        || repeat_offender;
    let watch = !flagged && s.uncaught_log_fails == 1;
    Verdict {
        signals: s,
        tripped,
        p_value,
        expected_fails: expected,
        p_cutoff,
        poisson_tripped,
        log_p_value,
        log_tripped,
        repeat_offender,
        flagged,
        watch,
    }
}

/// The Benjamini-Hochberg cut at rate `q` over `tails`: the largest tail
/// `p_(i)` with `p_(i) <= q·i/m`, or 0 when there is none. Never below
/// `floor` (a tail that small is improbable however few nodes there are).
pub fn false_discovery_cut(tails: &[f64], q: f64, floor: f64) -> f64 {
    let mut sorted: Vec<f64> = tails.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let m = sorted.len() as f64;
    let cut = sorted
        .iter()
        .enumerate()
        .filter(|&(i, &p)| p <= q * (i + 1) as f64 / m)
        .map(|(_, &p)| p)
        .next_back()
        .unwrap_or(0.0);
    // `floor` is a strict bound, as it always was.
    cut.max(floor * (1.0 - f64::EPSILON))
}

/// The tail below which counts are improbable at `rate`, over the nodes
/// that pass the gate (the others cannot be flagged; they keep their place
/// in `m`).
fn improbable_below(nodes: &[NodeSignals], rate: f64, cfg: &LemonSettings) -> f64 {
    if cfg.false_discovery_rate <= 0.0 {
        return cfg.p_value * (1.0 - f64::EPSILON);
    }
    let tails: Vec<f64> = nodes
        .iter()
        .map(|s| poisson_tail(s.uncaught_fails, rate * s.node_days))
        .collect();
    false_discovery_cut(&tails, cfg.false_discovery_rate, cfg.p_value)
}

/// The fleet's hardware failure rate per node-day (the paper's r_f), over
/// the nodes `keep` says are not lemons: lemons would raise the background
/// they are judged against. `count` picks the failures: all, or those no
/// check caught.
fn hardware_rate(
    nodes: &[NodeSignals],
    keep: &dyn Fn(&NodeSignals) -> bool,
    count: fn(&NodeSignals) -> u32,
) -> f64 {
    let (fails, days) = nodes
        .iter()
        .filter(|s| keep(s))
        .fold((0u64, 0.0), |(f, d), s| {
            (f + u64::from(count(s)), d + s.node_days)
        });
    if days > 0.0 {
        fails as f64 / days
    } else {
        0.0
    }
}

/// Applies the rules to the fleet's signals. The rate and the cut are
/// estimated twice: over all nodes, then over the nodes the first pass did
/// not flag.
pub fn decide(fleet: FleetSignals, cfg: &LemonSettings) -> Scores {
    let thresholds = thresholds(&fleet, cfg);
    let uncaught = |s: &NodeSignals| s.uncaught_fails;
    let logged = |s: &NodeSignals| s.uncaught_log_fails;
    let first = hardware_rate(&fleet.nodes, &|_| true, uncaught);
    let first_bg = Background {
        rate: first,
        p_cutoff: improbable_below(&fleet.nodes, first, cfg),
        log_rate: hardware_rate(&fleet.nodes, &|_| true, logged),
        return_rate: return_rate(&fleet.nodes, &|_| true),
    };
    let lemons: std::collections::HashSet<i64> = fleet
        .nodes
        .iter()
        .filter(|s| judge((*s).clone(), &thresholds, first_bg, cfg).flagged)
        .map(|s| s.node_id)
        .collect();
    let not_lemon = |s: &NodeSignals| !lemons.contains(&s.node_id);
    let rate = hardware_rate(&fleet.nodes, &not_lemon, uncaught);
    let all_rate = hardware_rate(&fleet.nodes, &not_lemon, NodeSignals::fails);
    let bg = Background {
        rate,
        p_cutoff: improbable_below(&fleet.nodes, rate, cfg),
        log_rate: hardware_rate(&fleet.nodes, &not_lemon, logged),
        return_rate: return_rate(&fleet.nodes, &not_lemon),
    };
    let p_cutoff = bg.p_cutoff;
    let fleet_node_days = fleet.nodes.iter().map(|s| s.node_days).sum();
    let mut verdicts: Vec<Verdict> = fleet
        .nodes
        .into_iter()
        .map(|s| judge(s, &thresholds, bg, cfg))
        .collect();
    verdicts.sort_by(|a, b| {
        b.flagged
            .cmp(&a.flagged)
            .then(a.p_value.total_cmp(&b.p_value))
            .then(b.signals.fails().cmp(&a.signals.fails()))
            .then(b.tripped.len().cmp(&a.tripped.len()))
            .then(a.signals.node.cmp(&b.signals.node))
    });
    Scores {
        window_start: fleet.window_start,
        window_end: fleet.window_end,
        fleet_nodes: verdicts.len(),
        fleet_rate_per_1000_node_days: all_rate * 1000.0,
        uncaught_rate_per_1000_node_days: rate * 1000.0,
        log_rate_per_1000_node_days: bg.log_rate * 1000.0,
        fleet_node_days,
        min_report_node_days: cfg.min_report_node_days,
        attributed_failures: fleet.attributed_failures,
        unattributed_failures: fleet.unattributed_failures,
        user_error_failures: fleet.user_error_failures,
        p_cutoff,
        false_discovery_rate: cfg.false_discovery_rate.max(0.0),
        log_p_cutoff: cfg.log_p_value,
        thresholds,
        verdicts,
    }
}

/// Below this a probability is shown as a bound (`< 1e-12`): double
/// precision holds nothing meaningful that small, and `0e0` reads as
/// "impossible".
pub const P_FLOOR: f64 = 1e-12;

/// The Slurm reason of a lemon drain: the failure count and window first, so
/// that `sinfo -R`'s 20 characters show it (`lemon: 6 fails/28d`), then the rules.
///
/// A repeat offender flagged by nothing else says so first instead
/// (`lemon: out 3x/28d 1 fails`), and a node flagged by its logs alone
/// shows the log tier's tail (`log p=2e-3`).
pub fn reason(v: &Verdict, window_days: u32) -> String {
    let counted = v.poisson_tripped || v.log_tripped;
    let mut r = if v.repeat_offender && !counted {
        format!(
            "out {}x/{}d {} fails",
            v.signals.out_returns,
            window_days,
            v.signals.fails()
        )
    } else {
        format!("{} fails/{}d", v.signals.fails(), window_days)
    };
    if v.poisson_tripped && v.p_value < P_FLOOR {
        r.push_str(" p<1e-12");
    } else if v.poisson_tripped {
        r.push_str(&format!(" p={:.0e}", v.p_value));
    } else if v.log_tripped {
        r.push_str(&format!(" log p={:.0e}", v.log_p_value.max(P_FLOOR)));
    }
    for t in &v.tripped {
        r.push_str(&format!(" {}={}", t.signal.short(), fmt_value(t.value)));
    }
    lemonade_slurm::reason::lemon(&r)
}

/// A signal value as reports print it: integers without decimals.
pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, fails: u32, days: u32, node_days: f64) -> NodeSignals {
        NodeSignals {
            node: name.into(),
            single_node_node_fails: fails,
            failing_jobs: (0..fails).map(|i| format!("{name}-{i}")).collect(),
            failing_days: days,
            uncaught_fails: fails,
            uncaught_days: days,
            node_days,
            single_node_jobs: 100,
            single_node_node_failure_rate: f64::from(fails) / 100.0,
            ..NodeSignals::default()
        }
    }

    fn fleet(mut nodes: Vec<NodeSignals>) -> FleetSignals {
        // Distinct ids: the second pass leaves the first pass's lemons out by id.
        for (i, n) in nodes.iter_mut().enumerate() {
            n.node_id = i as i64 + 1;
        }
        FleetSignals {
            attributed_failures: nodes.iter().map(|n| u64::from(n.fails())).sum(),
            node_days: nodes.iter().map(|n| n.node_days).sum(),
            nodes,
            ..FleetSignals::default()
        }
    }

    #[test]
    fn a_repeat_offender_is_flagged_and_background_is_not() {
        let mut nodes: Vec<NodeSignals> = (0..1000)
            .map(|i| node(&format!("n{i:04}"), u32::from(i % 200 == 0), 1, 28.0))
            .collect();
        nodes.push(node("lemon1", 6, 5, 28.0));
        let scores = decide(fleet(nodes), &LemonSettings::default());
        let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
        assert_eq!(flagged, ["lemon1"]);
        let v = &scores.verdicts[0];
        assert!(v.poisson_tripped);
        assert!(reason(v, 28).starts_with("lemon: 6 fails/28d"));
    }

    #[test]
    fn a_drain_reason_never_says_p_is_zero() {
        let mut nodes: Vec<NodeSignals> = (0..1000)
            .map(|i| node(&format!("n{i:04}"), u32::from(i % 200 == 0), 1, 28.0))
            .collect();
        nodes.push(node("lemon1", 6, 5, 28.0));
        let scores = decide(fleet(nodes), &LemonSettings::default());
        let mut v = scores.verdicts[0].clone();
        assert!(v.poisson_tripped);
        v.p_value = 0.0;
        let r = reason(&v, 28);
        assert!(r.contains(" p<1e-12"), "{r}");
        v.p_value = 3.2e-5;
        assert!(reason(&v, 28).contains(" p=3e-5"), "{}", reason(&v, 28));
    }

    #[test]
    fn failures_the_checks_caught_are_not_what_the_test_counts() {
        let mut nodes: Vec<NodeSignals> = (0..1000)
            .map(|i| node(&format!("n{i:04}"), u32::from(i % 200 == 0), 1, 28.0))
            .collect();
        let mut caught = node("caught", 6, 5, 28.0);
        caught.uncaught_fails = 1;
        caught.uncaught_days = 1;
        nodes.push(caught);
        let scores = decide(fleet(nodes), &LemonSettings::default());
        assert_eq!(scores.flagged().count(), 0);
    }

    #[test]
    fn one_bad_day_or_too_few_jobs_is_not_a_lemon() {
        let mut nodes: Vec<NodeSignals> = (0..1000)
            .map(|i| node(&format!("n{i:04}"), 0, 0, 28.0))
            .collect();
        nodes.push(node("burst", 8, 1, 28.0));
        nodes.push(node("few", 2, 2, 28.0));
        let scores = decide(fleet(nodes), &LemonSettings::default());
        assert_eq!(scores.flagged().count(), 0);
    }

    #[test]
    fn two_failures_slurm_saw_are_enough_and_two_weighed_ones_are_not() {
        let mut nodes: Vec<NodeSignals> = (0..1000)
            .map(|i| node(&format!("n{i:04}"), 0, 0, 28.0))
            .collect();
        // The same count, improbable either way; only the evidence differs.
        let mut seen = node("seen", 2, 2, 28.0);
        seen.uncaught_witnessed = 2;
        let mut weighed = node("weighed", 2, 2, 28.0);
        weighed.uncaught_witnessed = 1;
        let mut one_day = node("one_day", 2, 1, 28.0);
        one_day.uncaught_witnessed = 2;
        nodes.extend([seen, weighed, one_day]);
        nodes.push(node("background", 1, 1, 28.0));
        let scores = decide(fleet(nodes.clone()), &LemonSettings::default());
        let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
        assert_eq!(flagged, ["seen"]);
        let v = scores
            .verdicts
            .iter()
            .find(|v| v.signals.node == "weighed")
            .unwrap();
        assert!(v.poisson_tripped && !v.flagged);
        // 0 turns the exception off.
        let cfg = LemonSettings {
            min_witnessed_jobs: 0,
            ..LemonSettings::default()
        };
        assert_eq!(decide(fleet(nodes), &cfg).flagged().count(), 0);
    }

    #[test]
    fn the_false_discovery_cut_admits_the_next_lemon_only_beside_others() {
        // 500 healthy tails spread evenly over (0, 1].
        let healthy: Vec<f64> = (1..=500).map(|i| f64::from(i) / 500.0).collect();
        let alone = [healthy.clone(), vec![5e-4]].concat();
        // One node at 5e-4 among 501: above q/m = 2e-4, not improbable.
        assert_eq!(
            false_discovery_cut(&alone, 0.1, 1e-6),
            1e-6 * (1.0 - f64::EPSILON)
        );
        // Beside two clear lemons it is the third of 503: 3·q/m = 6e-4.
        let beside = [healthy, vec![5e-4, 1e-7, 1e-8]].concat();
        assert_eq!(false_discovery_cut(&beside, 0.1, 1e-6), 5e-4);
    }

    #[test]
    fn a_fleet_without_lemons_flags_nothing_at_any_false_discovery_rate() {
        // Every node's count is what the fleet's rate predicts: one failure
        // on a few nodes, none elsewhere.
        let nodes: Vec<NodeSignals> = (0..512)
            .map(|i| node(&format!("n{i:04}"), u32::from(i % 7 == 0), 1, 20.0))
            .collect();
        let mut cfg = LemonSettings::default();
        for q in [0.05, 0.1, 0.3] {
            cfg.false_discovery_rate = q;
            assert_eq!(decide(fleet(nodes.clone()), &cfg).flagged().count(), 0);
        }
    }

    #[test]
    fn a_node_above_the_fleets_quantiles_but_with_checks_catching_its_faults_is_not_a_lemon() {
        // A few nodes with one failure, one with three the checks caught and
        // two drains: above the derived thresholds of two signals at once.
        let mut nodes: Vec<NodeSignals> = (0..512)
            .map(|i| node(&format!("n{i:04}"), u32::from(i % 50 == 0), 1, 20.0))
            .collect();
        let mut caught = node("caught", 3, 3, 20.0);
        (
            caught.uncaught_fails,
            caught.uncaught_days,
            caught.out_count,
        ) = (0, 0, 3);
        nodes.push(caught);
        let scores = decide(fleet(nodes.clone()), &LemonSettings::default());
        let v = scores
            .verdicts
            .iter()
            .find(|v| v.signals.node == "caught")
            .unwrap();
        assert!(v.tripped.len() >= 2, "{:?}", v.tripped);
        assert!(!v.flagged);
        // The same thresholds set by the administrator do flag it.
        let mut cfg = LemonSettings::default();
        cfg.thresholds.out_count = Some(3.0);
        cfg.thresholds.single_node_node_fails = Some(3.0);
        let scores = decide(fleet(nodes), &cfg);
        let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
        assert_eq!(flagged, ["caught"]);
    }

    /// 512 nodes as the issue's fleet: one uncaught failure on every 12th
    /// node (0.08 expected per node in the window), one in every 128
    /// named by its own log.
    fn issue_fleet() -> Vec<NodeSignals> {
        (0..512)
            .map(|i| {
                let mut n = node(&format!("n{i:04}"), u32::from(i % 12 == 0), 1, 28.0);
                n.uncaught_log_fails = u32::from(i % 128 == 0);
                n.uncaught_log_days = n.uncaught_log_fails;
                n
            })
            .collect()
    }

    fn logged(name: &str, fails: u32, days: u32) -> NodeSignals {
        let mut n = node(name, fails, days, 28.0);
        (
            n.uncaught_witnessed,
            n.uncaught_log_fails,
            n.uncaught_log_days,
        ) = (fails, fails, days);
        n
    }

    #[test]
    fn two_failures_pinned_on_a_node_by_its_own_logs_flag_it_and_two_exit_codes_do_not() {
        let mut nodes = issue_fleet();
        // Against all uncaught failures its tail is about 3e-3, above the
        // strict cut; against the rarer log-witnessed ones it is improbable.
        nodes.push(logged("logged", 2, 2));
        nodes.push(node("exit_codes", 2, 2, 28.0));
        nodes.push(logged("one_day", 2, 1));
        let scores = decide(fleet(nodes), &LemonSettings::default());
        let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
        assert_eq!(flagged, ["logged"]);
        let v = &scores.verdicts[0];
        assert!(v.log_tripped && !v.poisson_tripped, "{v:?}");
        assert!(v.p_value > 1e-3 && v.log_p_value < 1e-3, "{v:?}");
        assert!(reason(v, 28).contains(" log p="), "{}", reason(v, 28));
        assert!(scores.log_rate_per_1000_node_days < scores.uncaught_rate_per_1000_node_days);
    }

    #[test]
    fn with_the_log_tier_off_log_witnessed_failures_weigh_like_any_other() {
        let mut nodes = issue_fleet();
        nodes.push(logged("logged", 2, 2));
        let cfg = LemonSettings {
            log_min_jobs: 0,
            ..LemonSettings::default()
        };
        assert_eq!(decide(fleet(nodes), &cfg).flagged().count(), 0);
    }

    #[test]
    fn a_node_the_checks_took_out_three_times_and_back_is_a_repeat_offender() {
        let mut nodes = issue_fleet();
        let mut flapper = node("flapper", 1, 1, 28.0);
        (flapper.out_count, flapper.out_returns) = (3, 3);
        flapper.uncaught_witnessed = 1;
        let mut repaired = node("repaired", 1, 1, 28.0);
        (repaired.out_count, repaired.out_returns) = (1, 1);
        repaired.uncaught_witnessed = 1;
        let mut still_out = node("still_out", 1, 1, 28.0);
        (still_out.out_count, still_out.out_returns) = (3, 2);
        still_out.uncaught_witnessed = 1;
        nodes.extend([flapper, repaired, still_out]);
        let scores = decide(fleet(nodes.clone()), &LemonSettings::default());
        let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
        assert_eq!(flagged, ["flapper"]);
        assert!(scores.verdicts[0].repeat_offender);
        // Outages the checks caught, and nothing else, in a fleet where half
        // the nodes came back once: not a repeat offender.
        let mut caught_only = nodes.clone();
        let last = caught_only.len() - 3;
        caught_only[last].uncaught_witnessed = 0;
        for n in caught_only[..last].iter_mut().step_by(2) {
            (n.out_count, n.out_returns) = (1, 1);
        }
        assert_eq!(
            decide(fleet(caught_only), &LemonSettings::default())
                .flagged()
                .count(),
            0
        );
        let r = reason(&scores.verdicts[0], 28);
        assert!(r.starts_with("lemon: out 3x/28d 1 fails"), "{r}");
        let off = LemonSettings {
            repeat_out_count: 0,
            ..LemonSettings::default()
        };
        assert_eq!(decide(fleet(nodes), &off).flagged().count(), 0);
    }

    /// A 512-node fleet in which one node in `every` came back once from
    /// the checks, plus the nodes given.
    fn returns_fleet(every: usize, extra: Vec<NodeSignals>) -> Vec<String> {
        let mut nodes: Vec<NodeSignals> = (0..512)
            .map(|i| {
                let mut n = node(&format!("n{i:04}"), 0, 0, 28.0);
                (n.out_count, n.out_returns) =
                    (u32::from(i % every == 0), u32::from(i % every == 0));
                n
            })
            .collect();
        nodes.extend(extra);
        let scores = decide(fleet(nodes), &LemonSettings::default());
        scores.flagged().map(|v| v.signals.node.clone()).collect()
    }

    #[test]
    fn returns_alone_flag_a_node_only_where_the_fleets_returns_make_them_improbable() {
        let flapper = |returns: u32| {
            let mut n = node("flapper", 0, 0, 28.0);
            (n.out_count, n.out_returns) = (returns, returns);
            n
        };
        // Returns rare (0.02 a node): four of them have a tail near 4e-9.
        assert_eq!(returns_fleet(50, vec![flapper(4)]), ["flapper"]);
        // Returns common (0.5 a node): four of them happen to healthy nodes.
        assert!(returns_fleet(2, vec![flapper(4)]).is_empty());
        // Rare returns, but fewer than `repeat_out_count`.
        assert!(returns_fleet(50, vec![flapper(2)]).is_empty());
    }

    #[test]
    fn one_log_witnessed_failure_puts_a_node_on_the_watch_list_and_never_flags_it() {
        let mut nodes = issue_fleet();
        nodes.push(logged("lemon", 3, 3));
        let scores = decide(fleet(nodes), &LemonSettings::default());
        let watched: Vec<_> = scores
            .watch_list()
            .map(|v| v.signals.node.as_str())
            .collect();
        // n0000, n0128, n0256, n0384 carry one each; the flagged lemon is not listed.
        assert_eq!(watched.len(), 4, "{watched:?}");
        assert!(watched.iter().all(|n| n.starts_with("n0")));
        assert!(scores.watch_list().all(|v| !v.flagged));
        assert_eq!(
            scores
                .flagged()
                .map(|v| v.signals.node.as_str())
                .collect::<Vec<_>>(),
            ["lemon"]
        );
    }

    #[test]
    fn configured_thresholds_win_over_the_fleet() {
        let mut cfg = LemonSettings::default();
        cfg.thresholds.tickets = Some(1.0);
        let scores = decide(fleet(vec![node("a", 0, 0, 1.0)]), &cfg);
        assert_eq!(scores.thresholds.get(Signal::Tickets), 1.0);
        assert_eq!(scores.thresholds.get(Signal::XidCnt), 3.0);
    }
}
