//! What the detector reports: one faulty machine of one job.

use serde::Serialize;

/// A node that stood apart from its job's peers long enough to be called.
/// At most one per job and node. Serialises with exactly the keys of
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
    /// than its nearest peer it sat (jobs of 2 or 3 nodes).
    pub score: f64,
    /// What the call is acted on with: `drain` above the high-confidence
    /// bar (`[watch] drain_score`, `small_job_drain_ratio`), else `report`.
    pub tier: Tier,
}

/// The two tiers of action of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
