//! Blame from what a failed job printed (issue 36): the verdicts that
//! ingest stored in `job_evidence`, loaded onto the failed runs, and the
//! rule that the attribution applies before any other.
//!
//! * `user` never counts against a node, except `NODE_FAIL`: a node that
//!   died prints nothing, so its survivors' lines say nothing about it;
//! * `hardware on NODE` counts against that node only, however many nodes
//!   the run had;
//! * `hardware, not localized` is a hardware failure for the reliability
//!   report, blamed on no node;
//! * `unknown`, or no log: the exit-code model, unchanged.

use super::{Attribution, FailedRun, Rule};
use crate::error::Result;
use crate::job_state::JobState;
use lemonade_sql::rusqlite::Connection;
use std::collections::HashMap;

/// What a run's logs said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogKind {
    User,
    /// On this node (`nodes.id`).
    HardwareOn(i64),
    HardwareUnlocalized,
    Unknown,
}

/// A run's verdict and its first evidence line (may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogVerdict {
    pub kind: LogKind,
    pub evidence: String,
}

impl LogVerdict {
    /// The verdict in words with its line, for an attribution's detail:
    /// `job log: hardware on gpu042: "CUDA error: ..."`.
    fn describe(&self, node_name: &str) -> String {
        let what = match &self.kind {
            LogKind::User => "user".to_string(),
            LogKind::HardwareOn(_) => format!("hardware on {node_name}"),
            LogKind::HardwareUnlocalized => "hardware, not localized".to_string(),
            LogKind::Unknown => "unknown".to_string(),
        };
        if self.evidence.is_empty() {
            format!("job log: {what}")
        } else {
            format!("job log: {what}: \"{}\"", self.evidence)
        }
    }
}

/// Sets `log` on every run of `(t0, t1]` that has a stored verdict.
pub fn attach(conn: &Connection, t0: i64, t1: i64, runs: &mut [FailedRun]) -> Result<()> {
    let mut by_job: HashMap<i64, LogVerdict> = HashMap::new();
    for v in crate::db::job_evidence::load(conn, t0, t1)? {
        let kind = match (v.verdict.as_str(), v.node) {
            ("user", _) => LogKind::User,
            ("hardware", Some(node)) => LogKind::HardwareOn(node),
            // A node name that is no node of lemon.db: it localizes nothing.
            ("hardware", None) | ("hardware_unlocalized", _) => LogKind::HardwareUnlocalized,
            _ => LogKind::Unknown,
        };
        by_job.insert(
            v.job,
            LogVerdict {
                kind,
                evidence: v.evidence,
            },
        );
    }
    if by_job.is_empty() {
        return Ok(());
    }
    for run in runs.iter_mut() {
        run.log = by_job.remove(&run.row_id);
    }
    Ok(())
}

/// The attribution a run's log decides, before any other rule; `None`:
/// the log decides nothing and the exit-code model goes on.
pub fn blame(run: &FailedRun) -> Option<Attribution> {
    let log = run.log.as_ref()?;
    let attribution = |node, rule, category: &'static str| Attribution {
        node,
        rule,
        category: category.into(),
        detail: log.describe(""),
        caught_by_check: false,
    };
    match log.kind {
        LogKind::User if run.state == JobState::NodeFail => None,
        LogKind::User => Some(attribution(None, Rule::JobLogUser, "user")),
        LogKind::HardwareOn(node) if run.nodes.contains(&node) => {
            Some(attribution(Some(node), Rule::JobLog, "job_log"))
        }
        LogKind::HardwareOn(_) | LogKind::HardwareUnlocalized => {
            Some(attribution(None, Rule::JobLogUnlocalized, "job_log"))
        }
        LogKind::Unknown => None,
    }
}

/// Names the blamed node in the details of the log's attributions, and
/// adds the log's verdict to the details of runs it did not decide, so
/// that reports show what every job printed.
pub fn annotate(conn: &Connection, runs: &[FailedRun], out: &mut [Attribution]) -> Result<()> {
    if runs.iter().any(|r| r.log.is_some()) {
        describe_all(runs, out, &crate::db::node_names(conn)?);
    }
    Ok(())
}

fn describe_all(runs: &[FailedRun], out: &mut [Attribution], names: &HashMap<i64, String>) {
    for (run, a) in runs.iter().zip(out.iter_mut()) {
        let Some(log) = &run.log else { continue };
        let node = match log.kind {
            LogKind::HardwareOn(n) => names.get(&n).map_or("", String::as_str),
            _ => "",
        };
        let text = log.describe(node);
        if matches!(
            a.rule,
            Rule::JobLog | Rule::JobLogUser | Rule::JobLogUnlocalized
        ) {
            a.detail = text;
        } else {
            a.detail = format!("{}; {text}", a.detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(state: &str, nodes: &[i64], kind: LogKind) -> FailedRun {
        FailedRun {
            row_id: 1,
            job_id_raw: 7,
            job_id: "7".into(),
            user: 0,
            state: JobState::from_sacct(state),
            start: Some(0),
            end: 100,
            exit_code: Some(1),
            exit_signal: Some(0),
            nodes: nodes.to_vec(),
            log: Some(LogVerdict {
                kind,
                evidence: "line".into(),
            }),
            trace: None,
        }
    }

    #[test]
    fn a_user_verdict_blames_no_node_unless_slurm_saw_the_node_fail() {
        let a = blame(&run("FAILED", &[3], LogKind::User)).unwrap();
        assert_eq!((a.node, a.rule), (None, Rule::JobLogUser));
        assert!(!a.is_hardware());
        assert!(blame(&run("NODE_FAIL", &[3], LogKind::User)).is_none());
    }

    #[test]
    fn a_localized_hardware_verdict_blames_that_node_of_a_large_run_only() {
        let nodes: Vec<i64> = (1..=64).collect();
        let a = blame(&run("FAILED", &nodes, LogKind::HardwareOn(40))).unwrap();
        assert_eq!((a.node, a.rule), (Some(40), Rule::JobLog));
        assert!(a.rule.witnessed());
    }

    #[test]
    fn an_unlocalized_hardware_verdict_is_hardware_on_no_node() {
        let a = blame(&run("FAILED", &[1, 2], LogKind::HardwareUnlocalized)).unwrap();
        assert_eq!(a.node, None);
        assert!(a.is_hardware());
        // A node outside the run localizes nothing.
        let b = blame(&run("FAILED", &[1, 2], LogKind::HardwareOn(9))).unwrap();
        assert_eq!((b.node, b.rule), (None, Rule::JobLogUnlocalized));
    }

    #[test]
    fn an_unknown_verdict_or_no_log_leaves_the_run_to_the_exit_code_model() {
        assert!(blame(&run("FAILED", &[1], LogKind::Unknown)).is_none());
        let mut r = run("FAILED", &[1], LogKind::Unknown);
        r.log = None;
        assert!(blame(&r).is_none());
    }
}
