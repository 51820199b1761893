//! What the policy remembers between runs, kept as JSON in the node database:
//! the unknown streak of each check, what we drained the node for, and
//! the recent runs of the findings that wait for confirmation.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One finding that caused a state change, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub check: String,
    pub code: String,
    pub entity: String,
}

/// The node is out of service because of us.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ours {
    /// `drain` or `down`.
    pub action: String,
    pub reason: String,
    pub causes: Vec<Cause>,
    pub at: i64,
    /// Clean runs since, for auto-resume.
    pub clean_runs: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Memory {
    /// Consecutive runs in which each check was `unknown`.
    pub unknown_streak: BTreeMap<String, u32>,
    /// Set while the node carries a state change of ours.
    pub ours: Option<Ours>,
    /// Per finding of a check with `confirm_runs` (`check code entity`):
    /// the runs it was seen in, one bit each, the latest in bit 0.
    pub seen: BTreeMap<String, u32>,
}

impl Memory {
    /// A memory that cannot be read (older shape, damage) is a fresh one: the
    /// worst that costs is a missed auto-resume, never a wrong drain.
    pub fn parse(json: Option<&str>) -> Memory {
        json.and_then(|j| serde_json::from_str(j).ok())
            .unwrap_or_default()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}
