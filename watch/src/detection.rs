//! What the detector reports: one faulty machine of one job.

use serde::Serialize;

/// A node that stood apart from its job's peers long enough to be called.
/// At most one per job, node and tier: a node is reported first and, if it
/// stays at the drain bar for `[watch] drain_after_s`, called again with
/// the drain tier. Serialises with exactly the keys of
/// `lemon watch --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detection {
    /// The Slurm job id, unchanged.
    pub job: String,
    /// The Slurm node name.
    pub node: String,
    /// The time of the sample whose arrival closed the step that made the
    /// call, exactly as the input gave it.
    pub detected_at: i64,
    /// The metrics that made the call, most sensitive first (metric priority).
    pub metrics: Vec<String>,
    /// How far out the node was at the call: its combined distance from its
    /// peers in robust deviations (jobs of 4+ nodes), or how many times lower
    /// than its nearest peer it sat (jobs of 2 or 3 nodes); 0 where the
    /// whole job stalled and the node's XID gauge named it, which sets no
    /// node apart by its metrics.
    pub score: f64,
    /// What the call is acted on with: `drain` once the node held the
    /// high-confidence bar (`[watch] drain_score` for `drain_after_s`,
    /// `small_job_drain_ratio`), else `report`.
    pub tier: Tier,
}

/// The two tiers of action of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// High confidence: the node is drained.
    Drain,
    /// Below the drain bar: recorded and told to the hooks, never drained.
    Report,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Drain => "drain",
            Tier::Report => "report",
        }
    }
}

/// One call per job and node, as an administrator reads them: the node's
/// first call (the time it was first named), marked `true` when any call of
/// it was of the drain tier.
pub fn first_calls(detections: &[Detection]) -> Vec<(&Detection, bool)> {
    let mut out: Vec<(&Detection, bool)> = Vec::new();
    for d in detections {
        let drain = d.tier == Tier::Drain;
        match out
            .iter_mut()
            .find(|(f, _)| f.job == d.job && f.node == d.node)
        {
            Some((_, drained)) => *drained |= drain,
            None => out.push((d, drain)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(node: &str, at: i64, tier: Tier) -> Detection {
        Detection {
            job: "7".into(),
            node: node.into(),
            detected_at: at,
            metrics: vec!["gpu_util".into()],
            score: 9.0,
            tier,
        }
    }

    #[test]
    fn a_report_then_a_drain_of_one_node_read_as_one_drained_call_at_the_report() {
        let calls = [
            call("a", 100, Tier::Report),
            call("b", 120, Tier::Report),
            call("a", 160, Tier::Drain),
        ];
        let first = first_calls(&calls);
        assert_eq!(first.len(), 2);
        assert_eq!(
            (first[0].0.node.as_str(), first[0].0.detected_at, first[0].1),
            ("a", 100, true)
        );
        assert_eq!((first[1].0.node.as_str(), first[1].1), ("b", false));
    }
}
