//! A job that stalls together while one node's driver names its hardware (x).
//!
//! A rank whose GPU hit an uncontained ECC error or a GSP hang may hang
//! rather than exit: its peers then wait in the collective, and every node
//! spins alike. Nothing sets the broken node apart from its peers; only its
//! XID gauge does. No role of a job raises a hardware XID, and a checkpoint
//! that happens to start beside an old one is told apart by time: the XID
//! must come with the stall.

use super::baseline::MetricBaseline;
use super::peers;
use super::rules::MetricRule;
use lemonade_config::WatchSettings;

/// A hardware XID read more than this long before the job stalled is not
/// what stalled it.
pub const XID_BEFORE_STALL_S: i64 = 120;

/// Whether every node but `named` that has a value of this metric at this
/// step (`values`, by node) sits far below the job's learned level of it
/// ([`peers::in_shared_phase`]): the job stalled around `named`. Only a
/// metric of the nodes' own work counts, and at least one other node must
/// have a value.
pub fn others_stalled(
    rule: &MetricRule,
    baseline: &MetricBaseline,
    values: &[f64],
    named: usize,
    cfg: &WatchSettings,
) -> bool {
    if !rule.own_work() {
        return false;
    }
    let mut others = values
        .iter()
        .enumerate()
        .filter(|&(node, v)| node != named && !v.is_nan())
        .map(|(_, &v)| v)
        .peekable();
    others.peek().is_some() && others.all(|v| peers::in_shared_phase(rule, baseline, v, cfg))
}

/// Whether a hardware XID read at `xid_at` came with a stall that began at
/// `stalled_at`: no earlier than [`XID_BEFORE_STALL_S`] before it.
pub fn came_with(xid_at: i64, stalled_at: i64) -> bool {
    xid_at >= stalled_at - XID_BEFORE_STALL_S
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(level: f64) -> (MetricRule, MetricBaseline) {
        let cfg = WatchSettings::default();
        let steps: Vec<Vec<f64>> = (0..30).map(|_| vec![level; 4]).collect();
        let baseline = MetricBaseline::learn(&steps, cfg.floor_fraction).expect("learned");
        (MetricRule::of("gpu_power", &cfg), baseline)
    }

    #[test]
    fn a_job_stalls_around_a_node_when_every_other_node_sits_far_below_its_level() {
        let cfg = WatchSettings::default();
        let (rule, baseline) = learned(4000.0);
        let stalled = [1900.0, 1850.0, 4000.0, f64::NAN];
        assert!(others_stalled(&rule, &baseline, &stalled, 2, &cfg));
        // One other node still works: the job did not stall.
        let working = [1900.0, 3900.0, 1900.0, 1900.0];
        assert!(!others_stalled(&rule, &baseline, &working, 2, &cfg));
        // No other node to judge by.
        let alone = [f64::NAN, f64::NAN, 10.0, f64::NAN];
        assert!(!others_stalled(&rule, &baseline, &alone, 2, &cfg));
    }

    #[test]
    fn a_network_counter_that_falls_is_no_stall_of_the_nodes_work() {
        let cfg = WatchSettings::default();
        let (_, baseline) = learned(4000.0);
        let rule = MetricRule::of("ib_tx", &cfg);
        assert!(!others_stalled(&rule, &baseline, &[1.0, 1.0, 1.0], 2, &cfg));
    }

    #[test]
    fn an_xid_read_long_before_the_stall_did_not_cause_it() {
        assert!(came_with(1000, 1000 + XID_BEFORE_STALL_S));
        assert!(came_with(1200, 1000));
        assert!(!came_with(1000, 1001 + XID_BEFORE_STALL_S));
    }
}
