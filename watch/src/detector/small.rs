//! One step of a job of 2 or 3 nodes: only drastic, sustained drops.
//!
//! With two nodes either one is "the odd one out"; with three, one noisy
//! peer is a third of the sample and no spread can be estimated. So the
//! peer comparison is off, and a node is flagged only when a primary metric
//! whose fall is a fault sign, taken relative to the node's own warm-up level,
//! sits below `small_job_drop` of every peer's (a shared phase moves all of
//! them together). The flag must then hold for `small_job_sustain_s`.

use super::baseline::MetricBaseline;
use super::rules::{Direction, MetricRule};

/// For each node, how many times lower than its closest peer it sits on
/// this metric, when that is a drastic drop while every peer still works
/// at `peers_working` of its own level or more: (node, ratio). `values`
/// holds the denoised values per node, NaN for missing.
pub fn drops(
    rule: &MetricRule,
    baseline: &MetricBaseline,
    values: &[f64],
    (drop, peers_working): (f64, f64),
    out: &mut Vec<(usize, f64)>,
) {
    // Host metrics move with roles (a rank 0 that logs on while the job
    // hangs): with no peers to outvote them, only the primary ones count.
    if rule.direction != Direction::Falls || rule.weight < 1.0 {
        return;
    }
    let relative = |node: usize| -> Option<f64> {
        let v = values[node];
        let own = baseline.own(node)?;
        (!v.is_nan()).then(|| (v + baseline.floor) / (own + baseline.floor))
    };
    for node in 0..values.len() {
        let Some(mine) = relative(node) else { continue };
        let lowest_peer = (0..values.len())
            .filter(|&peer| peer != node)
            .filter_map(relative)
            .fold(f64::INFINITY, f64::min);
        // Peers far below their own level too: the job hung or paused, and
        // with two or three nodes nobody can say whose machine stopped it.
        if lowest_peer.is_finite() && lowest_peer >= peers_working && mine < drop * lowest_peer {
            out.push((node, lowest_peer / mine.max(1e-12)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::WatchSettings;

    fn flagged(values: &[f64]) -> Vec<usize> {
        let cfg = WatchSettings::default();
        let base = MetricBaseline::learn(&vec![vec![100.0; values.len()]; 6], 0.05).unwrap();
        let mut out = Vec::new();
        drops(
            &MetricRule::of("ib_tx", &cfg),
            &base,
            values,
            (cfg.small_job_drop, cfg.shared_phase_fraction),
            &mut out,
        );
        out.into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn a_node_that_lost_most_of_its_traffic_is_flagged_in_a_pair() {
        assert_eq!(flagged(&[100.0, 10.0]), vec![1]);
    }

    #[test]
    fn a_moderate_gap_between_two_nodes_is_not_flagged() {
        assert!(flagged(&[100.0, 70.0]).is_empty());
    }

    #[test]
    fn a_node_that_stopped_beside_a_peer_that_stopped_too_is_not_flagged() {
        // A hung pair: one node idle, the other blocked at a third of its level.
        assert!(flagged(&[2.0, 30.0]).is_empty());
    }

    #[test]
    fn a_drop_all_three_share_is_not_flagged() {
        assert!(flagged(&[5.0, 6.0, 4.0]).is_empty());
    }
}
