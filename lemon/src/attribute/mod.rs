//! Whose fault a failed job is: a node's, or its user's.
//!
//! Most failed jobs on a real cluster are their users' own: exit codes,
//! OOMs, timeouts, bad users, crashing arrays. A job counts against a node
//! only with evidence. This module is the one attribution function: scoring,
//! `lemon run` and the reliability report all call [`attribute_all`].
//!
//! # The attribution rule
//!
//! A run counts as failed when sacct says `FAILED` or `NODE_FAIL`. Its
//! *attribution window* runs from 10 minutes before its end to 5 minutes
//! after it (the paper's window). Node evidence in the window is
//! * a `drain`/`down` finding of our health checks (spool exports; its check
//!   is the category),
//! * a node event (`sacctmgr show event`) of our checks (`hc: CODE ...`; the
//!   category comes from the code: `XID_79` is `xid`, `MOUNT_HUNG` is
//!   `mounts`) or of Slurm itself (`Not responding`, `Kill task failed`, ...;
//!   category `slurm`). Administrators' and lemon's own events do not count.
//!
//! **Multi-node runs** are blamed on one node, first match wins: the node
//! with the earliest finding, else the earliest node event. Else, when the
//! SPANK plugin recorded the task exits (in milliseconds; ties to the lower
//! node id), the node whose task failed first is where the run failed, and
//! the run is weighed as if it had run there alone: a user's bug also fails
//! some task first, so the first failing task says *where*, not *whose*.
//! The user's share is their rate times the chance that their bug would
//! have failed first on just that node: `1/k` of a `k`-node run, more on
//! rank 0's node (the first, by name) by as much as the fleet's failing
//! multi-node runs fail first there more often than by chance.
//! Without task exits, they are weighed on all their nodes (below).
//!
//! **Single-node runs**, first match wins:
//! 1. `NODE_FAIL`: the node's;
//! 2. an exit code in `[lemon] user_error_exit_codes` (126, 127): the user's;
//! 3. node evidence in the window: the node's;
//! 4. a burst, at least 3 tasks of one job array failing on one node
//!    within an hour with no node evidence: the user's (a crashing array
//!    says nothing of the node);
//! 5. a death by a signal or a plain failing exit: weighed, below.
//!
//! **Weighing** is a joint estimate of the nodes' hardware hazards and the
//! users' own failure rates (independent, as in Armada's failure
//! estimator). The user's rate `u` is their failures of the same kind
//! (signal deaths, or plain exits) per run on *other* nodes (for a
//! multi-node run: in their other runs), smoothed `(fails + 0.5) / (runs +
//! 1)`: a user whose jobs fail everywhere says nothing about the node. A
//! node's hazard `h` per node-day is its blamed failures plus
//! [`PRIOR_NODE_DAYS`] node-days at the fleet rate, over its node-days plus
//! those. A run of `d` days fails by hardware of its kind at `π·h·d` per
//! node, `π` the share of evidence-backed failures with that signature, so
//! node `n` caused it with chance `π·h_n·d / (u + Σ π·h·d)`; the hazards are
//! re-estimated from these chances until they settle (EM, starting from
//! every signal death its nodes' and every plain exit its user's; a run's
//! own chance never raises its nodes' hazards). The run is the likeliest node's when that chance is at
//! least one half: a node that already fails jobs makes a clean user's
//! crash its own, a healthy node does not. A multi-node `NODE_FAIL` without
//! evidence has no user share (`u = 0`).
//!
//! A failure that a health check caught (a finding or an `hc:` event
//! explains it) is marked [`Attribution::caught_by_check`]: the lemon test
//! counts the others.
//!
//! A job that is requeued and fails again counts once per node: signals
//! count distinct job ids, not runs.

mod evidence;
mod first_pass;
mod hazards;
pub mod job_log;
pub mod trace;
mod users;

pub use evidence::{category_of_code, known_category, Evidence, Mark};
pub use users::{UserRecord, UserStats, RELATED_WEIGHT};

use crate::job_state::JobState;
use evidence::ByTime;
use first_pass::{bursts, first_pass, FirstPass};
use hazards::Hazards;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;

/// Seconds before a run's end where node evidence still explains its failure.
pub const BEFORE_END_S: i64 = 600;
/// Seconds after a run's end where node evidence still explains its failure.
pub const AFTER_END_S: i64 = 300;
/// Failures of one user on one node within this many seconds are one burst.
pub const BURST_S: i64 = 3600;
/// ... when there are at least this many.
pub const BURST_MIN: usize = 3;
/// The category of Slurm's own node events (`Not responding`, `Kill task failed`).
pub const SLURM_CATEGORY: &str = "slurm";
/// Node-days at the fleet rate that every node's hazard estimate starts from.
pub const PRIOR_NODE_DAYS: f64 = 5.0;

/// A failed run as the attribution sees it.
#[derive(Debug, Clone)]
pub struct FailedRun {
    pub row_id: i64,
    pub job_id_raw: i64,
    /// JobID as users see it.
    pub job_id: String,
    /// Index into [`UserStats::names`].
    pub user: u32,
    pub state: JobState,
    pub start: Option<i64>,
    pub end: i64,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    /// The run's nodes, the one that held rank 0 (the first by name) first.
    pub nodes: Vec<i64>,
    /// What the run's own logs said, when ingest read them (issue 36).
    pub log: Option<job_log::LogVerdict>,
    /// The node its flight-recorder dumps point at (issue 32).
    pub trace: Option<trace::TraceVerdict>,
}

impl FailedRun {
    /// Died of a signal (sacct's `ExitCode` `0:N`), not a plain exit code.
    pub fn signal(&self) -> Option<i64> {
        self.exit_signal.filter(|&s| s != 0)
    }

    /// The run's length in days.
    fn days(&self) -> f64 {
        self.start
            .map_or(0.0, |s| (self.end - s).max(0) as f64 / 86_400.0)
    }
}

/// Which rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// `NODE_FAIL` of a one-node run.
    NodeFail,
    /// A health-check finding in the window.
    Finding,
    /// A node event of our checks or of Slurm in the window.
    NodeEvent,
    /// The first failing task of a multi-node run, on a node whose hardware
    /// explains it better than the user's record (weighed as a one-node run).
    FirstTaskExit,
    /// A one-node signal death that the node's hardware hazard explains
    /// better than the user's crash rate elsewhere.
    SignalDeath,
    /// A one-node plain failing exit that the node's hardware hazard
    /// explains better than the user's failure rate elsewhere.
    NodeExit,
    /// A multi-node failure without evidence that one node's hardware hazard
    /// explains better than the user's record and the other nodes.
    NodeHazard,
    /// An exit code: the user's.
    UserExit,
    /// A signal death the user's own record explains.
    UserCrash,
    /// One of a burst of an array's failures on one node.
    UserBurst,
    /// A multi-node signal death without evidence that the nodes' hardware
    /// together explains better than the user's record, though no one node
    /// does: a hardware failure for the reliability report, blamed on no
    /// node. A plain exit code never is: it is the program's own decision,
    /// and how often hardware ends in one is known only from the failures a
    /// check explained.
    AmongNodes,
    /// A multi-node run with no evidence.
    Unattributed,
    /// The run's log names the node's hardware (issue 36): that node only.
    JobLog,
    /// The run's log shows the user's own failure: no node.
    JobLogUser,
    /// The run's log shows a hardware failure on a node it does not name:
    /// hardware for the reliability report, blamed on no node.
    JobLogUnlocalized,
    /// The run's flight-recorder dumps localize a hang or a straggler to
    /// the node (issue 32): a hardware suspicion, weaker than a log line.
    Trace,
}

impl Rule {
    /// Slurm or a check saw the node fail (`NODE_FAIL`, a node event, a
    /// finding): not an inference from the weighing, which can be wrong and
    /// whose verdicts on one node lean on each other.
    pub fn witnessed(self) -> bool {
        matches!(
            self,
            Rule::NodeFail | Rule::NodeEvent | Rule::Finding | Rule::JobLog
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::NodeFail => "node_fail",
            Rule::Finding => "finding",
            Rule::NodeEvent => "node_event",
            Rule::FirstTaskExit => "first_task_exit",
            Rule::SignalDeath => "signal_death",
            Rule::NodeExit => "node_exit",
            Rule::NodeHazard => "node_hazard",
            Rule::UserExit => "user_exit",
            Rule::UserCrash => "user_crash",
            Rule::UserBurst => "user_burst",
            Rule::AmongNodes => "among_nodes",
            Rule::Unattributed => "unattributed",
            Rule::JobLog => "job_log",
            Rule::JobLogUser => "job_log_user",
            Rule::JobLogUnlocalized => "job_log_unlocalized",
            Rule::Trace => "trace",
        }
    }
}

/// The verdict on one failed run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribution {
    /// The node blamed; `None`: the user's, or nobody's.
    pub node: Option<i64>,
    pub rule: Rule,
    /// Check category of a node-caused failure (`xid`, `slurm`, `node_fail`,
    /// `signal`, `task_exit`); `user` or `unknown` otherwise. Borrowed
    /// where it is one of ours: a hundred thousand failed runs need no
    /// copy of `user`.
    pub category: Cow<'static, str>,
    /// The evidence in words, for reports.
    pub detail: String,
    /// One of our health checks caught the fault (a finding or an `hc:`
    /// event explains it): the node was drained for it and came back only
    /// after a clean check.
    pub caught_by_check: bool,
}

impl Attribution {
    /// A hardware failure for the reliability report: blamed on a node, or
    /// on the hardware of a multi-node run's nodes together.
    pub fn is_hardware(&self) -> bool {
        self.node.is_some() || matches!(self.rule, Rule::AmongNodes | Rule::JobLogUnlocalized)
    }

    fn node(
        node: i64,
        rule: Rule,
        category: impl Into<Cow<'static, str>>,
        detail: String,
    ) -> Attribution {
        Attribution {
            node: Some(node),
            rule,
            category: category.into(),
            detail,
            caught_by_check: false,
        }
    }

    /// Blamed on `node` for the evidence `m`.
    fn evidence(node: i64, rule: Rule, m: &Mark, detail: String) -> Attribution {
        Attribution {
            caught_by_check: m.category != SLURM_CATEGORY,
            ..Attribution::node(node, rule, m.category.clone(), detail)
        }
    }

    fn nobody(rule: Rule, category: &'static str, detail: String) -> Attribution {
        Attribution {
            node: None,
            rule,
            category: category.into(),
            detail,
            caught_by_check: false,
        }
    }
}

/// Settings of the attribution.
#[derive(Debug, Clone, Default)]
pub struct AttributionParams {
    /// Exit codes that are always the user's.
    pub user_error_exit_codes: Vec<i32>,
    /// The job name of our own validation jobs (`[validate] job_name`):
    /// their runs are no one's work and no evidence against a node (a
    /// failed validation already drained it with `hc: VALIDATE`), so the
    /// attribution and the reliability report leave them out.
    pub own_job_name: Option<String>,
    /// Leave every verdict's [`Attribution::detail`] empty: for callers
    /// that count verdicts and never say why (the reliability report). A
    /// month of large jobs has a hundred thousand failed runs, whose texts
    /// cost that report about 20 ms to write and free.
    pub without_texts: bool,
}

impl AttributionParams {
    /// The text `write` makes, or none when the caller asked for none.
    fn text(&self, write: impl FnOnce() -> String) -> String {
        if self.without_texts {
            String::new()
        } else {
            write()
        }
    }
}

/// True for the states that count as failures.
pub fn is_failure(state: &str) -> bool {
    state == "FAILED" || state == "NODE_FAIL"
}

fn exit_text(run: &FailedRun) -> String {
    match run.signal() {
        Some(s) => format!("signal {s} ({})", signal_name(s)),
        None => format!("exit {}", run.exit_code.unwrap_or(0)),
    }
}

/// The usual name of a signal number (Linux).
pub fn signal_name(signal: i64) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

fn evidence_text(m: &Mark, end: i64) -> String {
    format!("{} {:+}s from the end", m.what, m.at - end)
}

/// Attributes every failed run; `node_days` is every node's exposure over
/// the same range (for the hazard estimate), `users` the users' records.
/// The result is in the order of `runs`.
pub fn attribute_all(
    runs: &[FailedRun],
    ev: &Evidence,
    users: &UserStats,
    node_days: &HashMap<i64, f64>,
    p: &AttributionParams,
) -> Vec<Attribution> {
    let (mut out, weigh, localized) = first_passes(runs, ev, p);
    // Localized runs are weighed on their one node; the rest as they are.
    let original = runs;
    let mut view = std::borrow::Cow::Borrowed(runs);
    if !localized.is_empty() {
        let runs = view.to_mut();
        for (i, node, _) in &localized {
            runs[*i].nodes = vec![*node];
        }
    }
    let runs: &[FailedRun] = &view;
    let burst = bursts(runs, &weigh);
    let mut weighed: Vec<usize> = Vec::new();
    for (k, &i) in weigh.iter().enumerate() {
        if burst[k] {
            let user = &users.names[runs[i].user as usize];
            out[i] = Some(Attribution::nobody(
                Rule::UserBurst,
                "user",
                p.text(|| {
                    format!(
                        "{}; one of {user}'s array tasks failing on this node within an hour",
                        exit_text(&runs[i])
                    )
                }),
            ));
        } else {
            weighed.push(i);
        }
    }
    // A user's bug fails its first task on one of the run's nodes too: the
    // user's share of a localized run is their rate times the chance that
    // their bug would have failed first just there.
    let excess = first_node_excess(original, &localized);
    let first_on: HashMap<usize, i64> = localized.iter().map(|(i, node, _)| (*i, *node)).collect();
    let user_share: Vec<f64> = weighed
        .iter()
        .map(|i| {
            first_on.get(i).map_or(1.0, |&node| {
                chance_first_on(&original[*i].nodes, node, excess)
            })
        })
        .collect();
    let hazards = Hazards::estimate(runs, &weighed, &user_share, &out, users, node_days);
    for (k, &i) in weighed.iter().enumerate() {
        out[i] = Some(hazards.verdict(k, &runs[i], users, p));
    }
    for (i, _, first) in localized {
        if let Some(a) = out[i].as_mut() {
            a.detail = p.text(|| format!("{first}; {}", a.detail));
            if a.node.is_some() {
                a.rule = Rule::FirstTaskExit;
                a.category = "task_exit".into();
            }
        }
    }
    out.into_iter()
        .map(|a| a.expect("every run attributed"))
        .collect()
}

/// Rules 1-3 for every run: the verdicts they reach (`None` for the runs
/// to weigh), the runs to weigh, and the localized ones among them.
#[allow(clippy::type_complexity)]
fn first_passes(
    runs: &[FailedRun],
    ev: &Evidence,
    p: &AttributionParams,
) -> (
    Vec<Option<Attribution>>,
    Vec<usize>,
    Vec<(usize, i64, String)>,
) {
    let mut out: Vec<Option<Attribution>> = Vec::with_capacity(runs.len());
    let mut weigh: Vec<usize> = Vec::new();
    let mut localized: Vec<(usize, i64, String)> = Vec::new();
    let mut by_time = ByTime::new(ev);
    for (i, run) in runs.iter().enumerate() {
        match first_pass(run, ev, &mut by_time, p) {
            FirstPass::Done(a) => out.push(Some(a)),
            FirstPass::Weigh => {
                out.push(None);
                weigh.push(i);
            }
            FirstPass::Localized { node, detail } => {
                out.push(None);
                weigh.push(i);
                localized.push((i, node, detail));
            }
        }
    }
    (out, weigh, localized)
}

/// How much more often than by chance a user's failing multi-node run
/// fails first on its first node (rank 0), estimated from the localized
/// runs, most of which are users' bugs: `a` in `P(first on rank 0's node) =
/// a + (1 - a)/k`. A bug that every rank hits fails first anywhere; one in
/// rank 0's own code fails there.
fn first_node_excess(runs: &[FailedRun], localized: &[(usize, i64, String)]) -> f64 {
    let (mut excess, mut room) = (0.0, 0.0);
    for (i, node, _) in localized {
        let nodes = &runs[*i].nodes;
        let k = nodes.len() as f64;
        excess += f64::from(u8::from(nodes.first() == Some(node))) - 1.0 / k;
        room += 1.0 - 1.0 / k;
    }
    if room < 5.0 {
        return 0.0;
    }
    (excess / room).clamp(0.0, 0.95)
}

/// The chance that a user's bug in a run on `nodes` fails first on `node`.
fn chance_first_on(nodes: &[i64], node: i64, excess: f64) -> f64 {
    let k = nodes.len().max(1) as f64;
    if nodes.first() == Some(&node) {
        excess + (1.0 - excess) / k
    } else {
        1.0 / k
    }
}

#[cfg(test)]
mod tests;
