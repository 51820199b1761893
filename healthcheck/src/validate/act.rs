//! What a validation verdict does to the node, through the one node-state
//! writer (`lemonade_slurm::node_state`), or only shown in a dry run:
//!
//! * fail: the node is drained with `hc: VALIDATE <first failure>`, unless
//!   it carries a reason that is not ours, or ours for another fault (that
//!   one says more and the policy owns its resume);
//! * pass: a node out with our `hc: VALIDATE` reason is resumed, never one
//!   with any other reason;
//! * both: the reservation that held the node after a repair
//!   (`lemonade_validate_<node>`) is deleted, after the drain; from inside
//!   it (the validation job) Slurm refuses while the job runs, and the
//!   periodic run deletes it after (`repair::gate`);
//! * unknown: nothing changes; the reservation, if any, runs out by itself.

use super::judge::{Judgement, Verdict};
use crate::state_change::{Cause, ChangeOutcome, StateChange};
use lemonade_config::Action;
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{
    reservation_exists, validation_reservation, NodeWriter, StateCommand, StateWrite,
};
use lemonade_slurm::reason::{self, owner, ReasonOwner};
use lemonade_slurm::sinfo;

/// The changes made or tried, and lines for the output.
#[derive(Debug, Default)]
pub struct Acted {
    pub changes: Vec<StateChange>,
    pub messages: Vec<String>,
}

/// Acts on `judgement` for `node`.
pub fn act(cmds: &SlurmCommands, node: &str, judgement: &Judgement, dry_run: bool) -> Acted {
    let mut acted = Acted::default();
    if judgement.verdict == Verdict::Unknown {
        acted.messages.push(format!(
            "verdict unknown: the node's state is left as it is (a reservation {}, if any, \
             runs out by itself)",
            validation_reservation(node)
        ));
        return acted;
    }
    let writer = NodeWriter::new(cmds, dry_run);
    let current = match sinfo::node(cmds, node) {
        Ok(current) => current,
        Err(e) => {
            let action = if judgement.verdict == Verdict::Fail {
                "drain"
            } else {
                "resume"
            };
            acted.record(action, "", judgement, ChangeOutcome::Failed, e.to_string());
            return acted;
        }
    };
    let out = current.is_drain() || current.is_down();
    match (judgement.verdict, owner(&current.reason)) {
        (Verdict::Fail, ReasonOwner::None) => acted.drain(&writer, node, judgement),
        (Verdict::Fail, ReasonOwner::HealthCheck) if reason::is_validate(&current.reason) => {
            let wanted = reason::validate(&judgement.failing);
            if !(out && current.reason == wanted) {
                acted.drain(&writer, node, judgement);
            }
        }
        (Verdict::Fail, _) => {
            let detail = format!(
                "the node carries `{}`, not a validation reason of ours: left as it is",
                current.reason
            );
            acted.messages.push(format!("healthcheck: {detail}"));
            let failing = reason::validate(&judgement.failing);
            acted.record("drain", &failing, judgement, ChangeOutcome::Skipped, detail);
        }
        (Verdict::Pass, ReasonOwner::HealthCheck)
            if out && reason::is_validate(&current.reason) =>
        {
            let command = StateCommand::resume(node);
            acted.write(&writer, "resume", &current.reason, judgement, &command);
        }
        (Verdict::Pass, _) | (Verdict::Unknown, _) => {}
    }
    acted.unreserve(cmds, &writer, node, judgement);
    acted
}

impl Acted {
    fn drain(&mut self, writer: &NodeWriter, node: &str, judgement: &Judgement) {
        let why = reason::validate(&judgement.failing);
        let command = StateCommand::drain(node, &why);
        self.write(writer, "drain", &why, judgement, &command);
    }

    fn unreserve(&mut self, cmds: &SlurmCommands, writer: &NodeWriter, node: &str, j: &Judgement) {
        let name = validation_reservation(node);
        match reservation_exists(cmds, &name) {
            Ok(false) => {}
            Ok(true) => {
                let command = StateCommand::unreserve(&name);
                self.write(writer, "unreserve", &name, j, &command);
                self.in_use_is_not_a_failure();
            }
            Err(e) => self.record("unreserve", &name, j, ChangeOutcome::Failed, e.to_string()),
        }
    }

    /// Run from the validation job inside the reservation, the delete is
    /// refused while the job lasts; the periodic run deletes it after
    /// (`repair::gate`). Said so, not counted as Slurm failing.
    fn in_use_is_not_a_failure(&mut self) {
        let Some(change) = self.changes.last_mut() else {
            return;
        };
        if change.outcome == ChangeOutcome::Failed && change.detail.contains("in use") {
            change.outcome = ChangeOutcome::Skipped;
            self.messages.pop();
            self.messages.push(format!(
                "{} is in use by this job: the next periodic run after it deletes it",
                change.reason
            ));
        }
    }

    fn write(
        &mut self,
        writer: &NodeWriter,
        action: &str,
        why: &str,
        judgement: &Judgement,
        command: &StateCommand,
    ) {
        let (outcome, detail) = match writer.apply(command) {
            StateWrite::Applied { shown } => (ChangeOutcome::Applied, shown),
            StateWrite::DryRun { shown } => {
                self.messages.push(format!("dry-run: {shown}"));
                (ChangeOutcome::DryRun, shown)
            }
            StateWrite::Failed { shown, error } => {
                let detail = format!("{shown}: {error}");
                self.messages
                    .push(format!("healthcheck: {action}: {detail}"));
                (ChangeOutcome::Failed, detail)
            }
        };
        self.record(action, why, judgement, outcome, detail);
    }

    fn record(
        &mut self,
        action: &str,
        why: &str,
        judgement: &Judgement,
        outcome: ChangeOutcome,
        detail: String,
    ) {
        // The first failing metric is the cause a person looks at first.
        let entity = judgement
            .failing
            .first()
            .and_then(|line| line.split_whitespace().next())
            .unwrap_or("node");
        self.changes.push(StateChange {
            action: action.to_string(),
            reason: why.to_string(),
            causes: vec![Cause {
                check: "validate".into(),
                code: reason::VALIDATE_CODE.into(),
                entity: entity.to_string(),
                action: Action::None,
                pci: None,
            }],
            outcome,
            detail,
        });
    }
}
