//! A change of the node's Slurm state that a run made or tried, as the
//! policy and the remediation produce it, and as the hooks, the export and
//! the `state_changes` table of the node database receive it.

use crate::finding::Finding;
use lemonade_config::Action;
use lemonade_sql::node_jobs::StateChangeRow;
use serde::{Deserialize, Serialize};

/// One finding that caused a state change, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub check: String,
    pub code: String,
    pub entity: String,
    /// What the finding asks for (`reset-gpu`, `reboot`, ...): the
    /// remediation acts on it. Older memories have none.
    #[serde(default = "no_action", skip_serializing_if = "is_no_action")]
    pub action: Action,
    /// The GPU's PCI bus id, for a reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
}

impl Cause {
    /// The cause a finding makes.
    pub fn of(finding: &Finding) -> Cause {
        Cause {
            check: finding.check.clone(),
            code: finding.code.clone(),
            entity: finding.entity.clone(),
            action: finding.action,
            pci: finding.pci_bus_id.clone(),
        }
    }
}

fn no_action() -> Action {
    Action::None
}

fn is_no_action(a: &Action) -> bool {
    *a == Action::None
}

/// How a state change went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOutcome {
    Applied,
    /// `--dry-run`: printed, not run.
    DryRun,
    /// Slurm did not answer or refused.
    Failed,
    /// The fleet breaker stood down.
    Breaker,
    /// A reason that is not ours is on the node: left alone.
    Skipped,
}

impl ChangeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOutcome::Applied => "applied",
            ChangeOutcome::DryRun => "dry-run",
            ChangeOutcome::Failed => "failed",
            ChangeOutcome::Breaker => "breaker",
            ChangeOutcome::Skipped => "skipped",
        }
    }
}

/// A state change the policy or the remediation made or tried.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    /// `drain`, `down` or `resume`.
    pub action: String,
    pub reason: String,
    pub causes: Vec<Cause>,
    pub outcome: ChangeOutcome,
    pub detail: String,
}

impl StateChange {
    /// Its `state_changes` row, for a run that started at `at`.
    pub fn row(&self, at: i64, run_id: Option<i64>) -> StateChangeRow {
        StateChangeRow {
            at,
            run_id,
            action: self.action.clone(),
            reason: self.reason.clone(),
            causes: serde_json::to_string(&self.causes).unwrap_or_else(|_| "[]".into()),
            outcome: self.outcome.as_str().to_string(),
            detail: self.detail.clone(),
        }
    }
}
