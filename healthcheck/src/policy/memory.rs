//! What the policy remembers between runs, kept as JSON in the node database:
//! the unknown streak of each check, what we drained the node for, and
//! the recent runs of the findings that wait for confirmation, and the
//! remediations tried.

use crate::state_change::Cause;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// What the remediation tried, and what it waits for.
    pub repairs: Repairs,
}

/// The remediation's memory (see [`crate::repair`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Repairs {
    /// When each automatic remediation was started, for the ladder; those
    /// older than its window are dropped.
    pub started_at: Vec<i64>,
    /// A reboot we asked Slurm for; the first run after it decides.
    pub reboot: Option<PendingReboot>,
    /// The reason (ours, without remarks) a human was called for: nothing
    /// more is tried for it.
    pub handed_over: Option<String>,
}

/// A reboot asked for, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingReboot {
    pub at: i64,
    /// Our reason when the reboot was asked for (without ` reboot`).
    pub reason: String,
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
