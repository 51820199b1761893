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
//! with the earliest finding, else the earliest node event, else the node
//! whose task failed first (the SPANK plugin's task exits, in milliseconds;
//! ties to the lower node id), else nobody (unattributed).
//!
//! **Single-node runs**, first match wins:
//! 1. `NODE_FAIL`: the node's;
//! 2. an exit code in `[lemon] user_error_exit_codes` (126, 127): the user's;
//! 3. node evidence in the window: the node's;
//! 4. a burst, at least 3 tasks of one job array failing on one node
//!    within an hour with no node evidence: the user's (a crashing array
//!    says nothing of the node);
//! 5. a death by a signal: weighed, below;
//! 6. any other exit code: the user's.
//!
//! **Signal deaths** are weighed by a joint estimate of the node's hardware
//! hazard and the user's own crash rate (independent, as in Armada's
//! failure estimator). The user's crash rate `c` is their signal deaths over
//! their runs on *other* nodes, smoothed `(crashes + 0.5) / (runs + 1)`: a
//! user whose jobs crash everywhere says nothing about this node. The
//! node's hazard `h` per node-day is its blamed failures plus
//! [`PRIOR_NODE_DAYS`] node-days at the fleet rate, over its node-days plus
//! those; it is re-estimated three times, each time from the previous
//! blames. The job is the node's when `h·d / (h·d + c) >= 0.5`, `d` the
//! job's node-days: a node that already kills jobs makes a clean user's
//! crash its own, a healthy node does not.
//!
//! A job that is requeued and fails again counts once per node: signals
//! count distinct job ids, not runs.

use serde::Serialize;
use std::collections::HashMap;

/// Seconds before a run's end where node evidence still explains its failure.
pub const BEFORE_END_S: i64 = 600;
/// Seconds after a run's end where node evidence still explains its failure.
pub const AFTER_END_S: i64 = 300;
/// Failures of one user on one node within this many seconds are one burst.
pub const BURST_S: i64 = 3600;
/// ... when there are at least this many.
pub const BURST_MIN: usize = 3;
/// Node-days at the fleet rate that every node's hazard estimate starts from.
pub const PRIOR_NODE_DAYS: f64 = 20.0;

/// A failed run as the attribution sees it.
#[derive(Debug, Clone)]
pub struct FailedRun {
    pub row_id: i64,
    pub job_id_raw: i64,
    /// JobID as users see it.
    pub job_id: String,
    /// Index into [`UserStats::names`].
    pub user: u32,
    pub state: String,
    pub start: Option<i64>,
    pub end: i64,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    pub nodes: Vec<i64>,
}

impl FailedRun {
    /// Died of a signal (sacct's `ExitCode` `0:N`), not a plain exit code.
    pub fn signal(&self) -> Option<i64> {
        self.exit_signal.filter(|&s| s != 0)
    }

    fn node_days(&self) -> f64 {
        self.start
            .map_or(0.0, |s| (self.end - s).max(0) as f64 / 86_400.0)
            * self.nodes.len() as f64
    }
}

/// Something seen on a node at a time.
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: i64,
    /// `xid`, `ecc`, `pcie`, `ib`, `mounts`, ..., `slurm`.
    pub category: String,
    /// What was seen: `finding XID_79 gpu3`, `event DOWN: Not responding`.
    pub what: String,
}

/// The node evidence of a time range, per node, sorted by time.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Drain/down findings of the health checks, per node.
    pub findings: HashMap<i64, Vec<Mark>>,
    /// Node events of our checks and of Slurm, per node.
    pub events: HashMap<i64, Vec<Mark>>,
    /// Failed task exits per job id: (node, Unix **milliseconds**), so that
    /// tasks ending within one second are still ordered. Records without
    /// milliseconds are given as their second times 1000.
    pub task_fails_ms: HashMap<i64, Vec<(i64, i64)>>,
}

impl Evidence {
    /// Sorts the per-node lists; call once after filling.
    pub fn sort(&mut self) {
        for v in self.findings.values_mut().chain(self.events.values_mut()) {
            v.sort_by_key(|m| m.at);
        }
        for v in self.task_fails_ms.values_mut() {
            v.sort_by_key(|&(node, at_ms)| (at_ms, node));
        }
    }

    fn earliest_in<'m>(
        map: &'m HashMap<i64, Vec<Mark>>,
        nodes: &[i64],
        lo: i64,
        hi: i64,
    ) -> Option<(i64, &'m Mark)> {
        nodes
            .iter()
            .filter_map(|n| {
                map.get(n).and_then(|marks| {
                    let i = marks.partition_point(|m| m.at < lo);
                    marks.get(i).filter(|m| m.at <= hi).map(|m| (*n, m))
                })
            })
            .min_by_key(|(n, m)| (m.at, *n))
    }

    /// The earliest finding, else the earliest event, on `nodes` in the window of `end`.
    fn node_evidence(&self, nodes: &[i64], end: i64) -> Option<(i64, &Mark, Rule)> {
        let (lo, hi) = (end - BEFORE_END_S, end + AFTER_END_S);
        Evidence::earliest_in(&self.findings, nodes, lo, hi)
            .map(|(n, m)| (n, m, Rule::Finding))
            .or_else(|| {
                Evidence::earliest_in(&self.events, nodes, lo, hi)
                    .map(|(n, m)| (n, m, Rule::NodeEvent))
            })
    }
}

/// The category of one of our reason codes: `XID_79` is `xid`,
/// `ECC_VOLATILE_UNCORRECTED` `ecc`, `MOUNT_HUNG` `mounts`, `IB_PORT_DOWN` `ib`.
pub fn category_of_code(code: &str) -> String {
    let head = code.split('_').next().unwrap_or(code).to_ascii_lowercase();
    match head.as_str() {
        "mount" => "mounts".into(),
        "" => "unknown".into(),
        _ => head,
    }
}

/// Runs, and deaths by a signal, of every user: overall and per node
/// (one-node runs), so that a user's record *elsewhere* is known.
#[derive(Debug, Default)]
pub struct UserStats {
    pub names: Vec<String>,
    pub runs: Vec<u32>,
    pub crashes: Vec<u32>,
    pub runs_on: HashMap<(u32, i64), u32>,
    pub crashes_on: HashMap<(u32, i64), u32>,
}

impl UserStats {
    /// The index of `name`, added when new.
    pub fn intern(&mut self, index: &mut HashMap<String, u32>, name: &str) -> u32 {
        if let Some(&i) = index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.runs.push(0);
        self.crashes.push(0);
        index.insert(name.to_string(), i);
        i
    }

    /// Counts one run of `user` (on `node` when it had one node).
    pub fn add_run(&mut self, user: u32, node: Option<i64>) {
        self.runs[user as usize] += 1;
        if let Some(n) = node {
            *self.runs_on.entry((user, n)).or_default() += 1;
        }
    }

    /// Counts the signal deaths among the failed runs.
    pub fn add_crashes(&mut self, runs: &[FailedRun]) {
        for r in runs.iter().filter(|r| r.signal().is_some()) {
            self.crashes[r.user as usize] += 1;
            if let [n] = r.nodes[..] {
                *self.crashes_on.entry((r.user, n)).or_default() += 1;
            }
        }
    }

    /// `(runs, crashes)` of `user` on nodes other than `node`.
    pub fn elsewhere(&self, user: u32, node: i64) -> (u32, u32) {
        let u = user as usize;
        let runs = self.runs[u] - self.runs_on.get(&(user, node)).copied().unwrap_or(0);
        let crashes = self.crashes[u] - self.crashes_on.get(&(user, node)).copied().unwrap_or(0);
        (runs, crashes)
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
    /// The first failing task of a multi-node run.
    FirstTaskExit,
    /// A signal death weighed against the user's crash rate elsewhere.
    SignalDeath,
    /// An exit code: the user's.
    UserExit,
    /// A signal death the user's own record explains.
    UserCrash,
    /// One of a burst of an array's failures on one node.
    UserBurst,
    /// A multi-node run with no evidence.
    Unattributed,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::NodeFail => "node_fail",
            Rule::Finding => "finding",
            Rule::NodeEvent => "node_event",
            Rule::FirstTaskExit => "first_task_exit",
            Rule::SignalDeath => "signal_death",
            Rule::UserExit => "user_exit",
            Rule::UserCrash => "user_crash",
            Rule::UserBurst => "user_burst",
            Rule::Unattributed => "unattributed",
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
    /// `signal`, `task_exit`); `user` or `unknown` otherwise.
    pub category: String,
    /// The evidence in words, for reports.
    pub detail: String,
}

impl Attribution {
    fn node(node: i64, rule: Rule, category: &str, detail: String) -> Attribution {
        Attribution {
            node: Some(node),
            rule,
            category: category.to_string(),
            detail,
        }
    }

    fn nobody(rule: Rule, category: &str, detail: String) -> Attribution {
        Attribution {
            node: None,
            rule,
            category: category.to_string(),
            detail,
        }
    }
}

/// Settings of the attribution.
#[derive(Debug, Clone, Default)]
pub struct AttributionParams {
    /// Exit codes that are always the user's.
    pub user_error_exit_codes: Vec<i32>,
}

/// What the first pass decided: final, or a signal death to weigh.
enum FirstPass {
    Done(Attribution),
    Weigh,
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

/// Rules 1-3 and the multi-node rule: what needs no weighing.
fn first_pass(run: &FailedRun, ev: &Evidence, p: &AttributionParams) -> FirstPass {
    if let [node] = run.nodes[..] {
        let found = ev.node_evidence(&run.nodes, run.end);
        if run.state == "NODE_FAIL" {
            let detail = found.map_or("NODE_FAIL".into(), |(_, m, _)| {
                format!("NODE_FAIL; {}", evidence_text(m, run.end))
            });
            let cat = found.map_or("node_fail", |(_, m, _)| m.category.as_str());
            return FirstPass::Done(Attribution::node(node, Rule::NodeFail, cat, detail));
        }
        let code = run.exit_code.unwrap_or(0);
        if run.signal().is_none()
            && p.user_error_exit_codes
                .iter()
                .any(|&c| i64::from(c) == code)
        {
            return FirstPass::Done(Attribution::nobody(
                Rule::UserExit,
                "user",
                format!("exit {code}: a user error"),
            ));
        }
        if let Some((_, m, rule)) = found {
            let detail = format!("{}; {}", exit_text(run), evidence_text(m, run.end));
            return FirstPass::Done(Attribution::node(node, rule, &m.category, detail));
        }
        return FirstPass::Weigh;
    }
    if let Some((node, m, rule)) = ev.node_evidence(&run.nodes, run.end) {
        let detail = format!("{}; {}", exit_text(run), evidence_text(m, run.end));
        return FirstPass::Done(Attribution::node(node, rule, &m.category, detail));
    }
    // The window is in seconds, the task exits in milliseconds: every
    // millisecond of the seconds `from..=hi` is inside.
    let hi = run.end + AFTER_END_S;
    let from_ms = run
        .start
        .unwrap_or(run.end - BEFORE_END_S)
        .saturating_mul(1000);
    let hi_ms = hi.saturating_mul(1000).saturating_add(999);
    if let Some(&(node, at_ms)) = ev.task_fails_ms.get(&run.job_id_raw).and_then(|v| {
        v.iter()
            .find(|&&(n, at_ms)| at_ms >= from_ms && at_ms <= hi_ms && run.nodes.contains(&n))
    }) {
        let detail = format!(
            "{}; first failing task, {:+.3}s from the end",
            exit_text(run),
            (at_ms - run.end * 1000) as f64 / 1000.0
        );
        return FirstPass::Done(Attribution::node(
            node,
            Rule::FirstTaskExit,
            "task_exit",
            detail,
        ));
    }
    FirstPass::Done(Attribution::nobody(
        Rule::Unattributed,
        "unknown",
        format!(
            "{} on {} nodes, no node evidence",
            exit_text(run),
            run.nodes.len()
        ),
    ))
}

/// The array a run belongs to: `123` of `123_4`; `None` outside arrays.
fn array_of(job_id: &str) -> Option<&str> {
    job_id.split_once('_').map(|(array, _)| array)
}

/// Which of the weighed runs are part of a burst (rule 4): at least
/// [`BURST_MIN`] tasks of one job array failing on one node within [`BURST_S`].
fn bursts(runs: &[FailedRun], weigh: &[usize]) -> Vec<bool> {
    let mut by_pair: HashMap<(&str, i64), Vec<usize>> = HashMap::new();
    for (k, &i) in weigh.iter().enumerate() {
        if let Some(array) = array_of(&runs[i].job_id) {
            by_pair
                .entry((array, runs[i].nodes[0]))
                .or_default()
                .push(k);
        }
    }
    let mut burst = vec![false; weigh.len()];
    for ks in by_pair.values_mut().filter(|ks| ks.len() >= BURST_MIN) {
        ks.sort_by_key(|&k| runs[weigh[k]].end);
        let ends: Vec<i64> = ks.iter().map(|&k| runs[weigh[k]].end).collect();
        for (a, &end) in ends.iter().enumerate() {
            // Enough failures within an hour either side of this one.
            let lo = ends.partition_point(|&e| e < end - BURST_S);
            let hi = ends.partition_point(|&e| e <= end + BURST_S);
            if hi - lo >= BURST_MIN {
                burst[ks[a]] = true;
            }
        }
    }
    burst
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
    let mut out: Vec<Option<Attribution>> = Vec::with_capacity(runs.len());
    let mut weigh: Vec<usize> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        match first_pass(run, ev, p) {
            FirstPass::Done(a) => out.push(Some(a)),
            FirstPass::Weigh => {
                out.push(None);
                weigh.push(i);
            }
        }
    }
    let burst = bursts(runs, &weigh);
    let mut crashes: Vec<usize> = Vec::new();
    for (k, &i) in weigh.iter().enumerate() {
        let run = &runs[i];
        let user = &users.names[run.user as usize];
        if burst[k] {
            out[i] = Some(Attribution::nobody(
                Rule::UserBurst,
                "user",
                format!(
                    "{}; one of {user}'s array tasks failing on this node within an hour",
                    exit_text(run)
                ),
            ));
        } else if run.signal().is_none() {
            out[i] = Some(Attribution::nobody(
                Rule::UserExit,
                "user",
                format!("{}: the program's own exit", exit_text(run)),
            ));
        } else {
            crashes.push(i);
        }
    }
    weigh_signal_deaths(runs, &crashes, &mut out, users, node_days);
    out.into_iter()
        .map(|a| a.expect("every run attributed"))
        .collect()
}

/// Rule 5: the joint estimate of node hazards and users' crash rates.
fn weigh_signal_deaths(
    runs: &[FailedRun],
    crashes: &[usize],
    out: &mut [Option<Attribution>],
    users: &UserStats,
    node_days: &HashMap<i64, f64>,
) {
    let total_days: f64 = node_days.values().sum();
    // Failures the other rules blamed, per node.
    let mut strong: HashMap<i64, f64> = HashMap::new();
    for n in out.iter().flatten().filter_map(|a| a.node) {
        *strong.entry(n).or_default() += 1.0;
    }
    // The user's crash rate elsewhere, fixed.
    let user_rate: Vec<(f64, u32, u32)> = crashes
        .iter()
        .map(|&i| {
            let (r, c) = users.elsewhere(runs[i].user, runs[i].nodes[0]);
            ((f64::from(c) + 0.5) / (f64::from(r) + 1.0), r, c)
        })
        .collect();
    // Start from every signal death blamed on its node and let the estimate
    // take back what the users' records explain.
    let mut blame = vec![true; crashes.len()];
    for _ in 0..10 {
        let mut fails = strong.clone();
        for (k, &i) in crashes.iter().enumerate() {
            if blame[k] {
                *fails.entry(runs[i].nodes[0]).or_default() += 1.0;
            }
        }
        let fleet_rate = if total_days > 0.0 {
            fails.values().sum::<f64>() / total_days
        } else {
            0.0
        };
        let next: Vec<bool> = crashes
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let node = runs[i].nodes[0];
                // This job's own failure does not raise its node's hazard.
                let own = if blame[k] { 1.0 } else { 0.0 };
                let h = (fails.get(&node).copied().unwrap_or(0.0) - own
                    + PRIOR_NODE_DAYS * fleet_rate)
                    / (node_days.get(&node).copied().unwrap_or(0.0) + PRIOR_NODE_DAYS);
                let hd = h * runs[i].node_days().max(1.0 / 24.0);
                hd / (hd + user_rate[k].0) >= 0.5
            })
            .collect();
        if next == blame {
            break;
        }
        blame = next;
    }
    for (k, &i) in crashes.iter().enumerate() {
        let run = &runs[i];
        let (_, r, c) = user_rate[k];
        let user = &users.names[run.user as usize];
        let record = format!("{user} died of a signal in {c} of {r} runs elsewhere");
        out[i] = Some(if blame[k] {
            Attribution::node(
                run.nodes[0],
                Rule::SignalDeath,
                "signal",
                format!(
                    "{}; {record}; this node fails jobs more often than that",
                    exit_text(run)
                ),
            )
        } else {
            Attribution::nobody(
                Rule::UserCrash,
                "user",
                format!("{}; {record}", exit_text(run)),
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(names: &[&str]) -> UserStats {
        let mut u = UserStats::default();
        let mut idx = HashMap::new();
        for n in names {
            u.intern(&mut idx, n);
        }
        u
    }

    fn run(nodes: &[i64], exit: &str) -> FailedRun {
        let (code, signal) = exit.split_once(':').unwrap();
        FailedRun {
            row_id: 1,
            job_id_raw: 42,
            job_id: "42".into(),
            user: 0,
            state: "FAILED".into(),
            start: Some(0),
            end: 10_000,
            exit_code: code.parse().ok(),
            exit_signal: signal.parse().ok(),
            nodes: nodes.to_vec(),
        }
    }

    fn mark(at: i64, c: &str) -> Mark {
        Mark {
            at,
            category: c.into(),
            what: format!("finding {c}"),
        }
    }

    fn one(r: &FailedRun, ev: &Evidence, u: &UserStats) -> Attribution {
        let p = AttributionParams {
            user_error_exit_codes: vec![126, 127],
        };
        attribute_all(std::slice::from_ref(r), ev, u, &HashMap::new(), &p).remove(0)
    }

    #[test]
    fn finding_beats_event_beats_task_exit() {
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        ev.task_fails_ms.insert(42, vec![(1, 5_000_000)]);
        let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
        assert_eq!((a.node, a.rule), (Some(1), Rule::FirstTaskExit));
        ev.events.insert(2, vec![mark(10_100, "slurm")]);
        let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
        assert_eq!((a.node, a.rule), (Some(2), Rule::NodeEvent));
        ev.findings.insert(3, vec![mark(9_500, "pcie")]);
        let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
        assert_eq!(
            (a.node, a.rule, a.category.as_str()),
            (Some(3), Rule::Finding, "pcie")
        );
    }

    #[test]
    fn window_is_ten_minutes_before_to_five_after() {
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        ev.findings.insert(1, vec![mark(10_000 - 601, "xid")]);
        ev.findings.insert(2, vec![mark(10_000 + 301, "xid")]);
        assert_eq!(one(&run(&[1, 2], "1:0"), &ev, &u).rule, Rule::Unattributed);
        ev.findings.insert(2, vec![mark(10_000 + 300, "ib")]);
        ev.sort();
        assert_eq!(one(&run(&[1, 2], "1:0"), &ev, &u).node, Some(2));
    }

    #[test]
    fn an_exit_code_is_the_users_unless_the_node_shows_evidence() {
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        let a = one(&run(&[7], "1:0"), &ev, &u);
        assert_eq!((a.node, a.rule), (None, Rule::UserExit));
        ev.events.insert(7, vec![mark(9_900, "xid")]);
        let a = one(&run(&[7], "1:0"), &ev, &u);
        assert_eq!(
            (a.node, a.rule, a.category.as_str()),
            (Some(7), Rule::NodeEvent, "xid")
        );
        // 127 (command not found) stays the user's even then.
        let a = one(&run(&[7], "127:0"), &ev, &u);
        assert_eq!((a.node, a.rule), (None, Rule::UserExit));
        let mut nf = run(&[7], "0:0");
        nf.state = "NODE_FAIL".into();
        assert_eq!(one(&nf, &Evidence::default(), &u).rule, Rule::NodeFail);
    }

    #[test]
    fn a_signal_death_is_the_nodes_only_where_the_node_already_fails_jobs() {
        // alice ran 400 jobs elsewhere without a crash.
        let mut u = users(&["alice"]);
        u.runs[0] = 400;
        let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
        let p = AttributionParams::default();
        let crash = run(&[7], "0:7");
        // On a healthy node: one crash is no evidence.
        let a = attribute_all(
            std::slice::from_ref(&crash),
            &Evidence::default(),
            &u,
            &days,
            &p,
        );
        assert_eq!(a[0].rule, Rule::UserCrash);
        // On a node that went NODE_FAIL twice this month, it is the node's.
        let mut runs = vec![crash.clone()];
        for end in [100_000, 900_000] {
            let mut nf = run(&[7], "0:0");
            nf.state = "NODE_FAIL".into();
            nf.end = end;
            runs.push(nf);
        }
        let a = attribute_all(&runs, &Evidence::default(), &u, &days, &p);
        assert_eq!((a[0].node, a[0].rule), (Some(7), Rule::SignalDeath));
        assert!(
            a[0].detail
                .contains("alice died of a signal in 0 of 400 runs elsewhere"),
            "{}",
            a[0].detail
        );
    }

    #[test]
    fn a_user_who_crashes_everywhere_says_nothing_about_the_node() {
        let mut u = users(&["bob"]);
        u.runs[0] = 100;
        u.crashes[0] = 40;
        let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
        let mut runs = vec![run(&[7], "0:11")];
        for end in [100_000, 900_000] {
            let mut nf = run(&[7], "0:0");
            nf.state = "NODE_FAIL".into();
            nf.end = end;
            runs.push(nf);
        }
        let a = attribute_all(
            &runs,
            &Evidence::default(),
            &u,
            &days,
            &AttributionParams::default(),
        );
        assert_eq!((a[0].node, a[0].rule), (None, Rule::UserCrash));
    }

    #[test]
    fn a_burst_of_one_arrays_failures_on_one_node_is_the_users() {
        let mut u = users(&["carol"]);
        u.runs[0] = 1000;
        let runs: Vec<FailedRun> = (0..5)
            .map(|k| {
                let mut r = run(&[3], "0:11");
                r.end = 50_000 + k * 300;
                r.job_id = format!("77_{k}");
                r
            })
            .collect();
        let a = attribute_all(
            &runs,
            &Evidence::default(),
            &u,
            &HashMap::new(),
            &AttributionParams::default(),
        );
        assert!(a.iter().all(|a| a.rule == Rule::UserBurst), "{a:?}");
    }

    #[test]
    fn reason_codes_give_categories() {
        assert_eq!(category_of_code("XID_79"), "xid");
        assert_eq!(category_of_code("MOUNT_HUNG"), "mounts");
        assert_eq!(category_of_code("ECC_VOLATILE_UNCORRECTED"), "ecc");
        assert_eq!(category_of_code("IB_PORT_DOWN"), "ib");
    }

    #[test]
    fn the_first_failing_task_is_told_apart_within_a_second() {
        // Node 2's task failed at 5000.120 s, node 1's (killed by Slurm) at 5000.480 s.
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 5_000_480), (2, 5_000_120), (3, 5_000_999)]);
        ev.sort();
        let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
        assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit));
    }

    #[test]
    fn task_exits_in_whole_seconds_still_count() {
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(3, 5_001_000), (2, 5_000_000), (1, 5_000_000)]);
        ev.sort();
        assert_eq!(one(&run(&[2, 3], "1:0"), &ev, &u).node, Some(2));
        assert_eq!(one(&run(&[1, 2, 3], "1:0"), &ev, &u).node, Some(1));
    }

    #[test]
    fn task_exit_window_covers_whole_seconds() {
        let u = users(&["alice"]);
        let mut r = run(&[1, 2], "1:0");
        r.start = Some(4_000);
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_301_000)]);
        ev.sort();
        assert_eq!(one(&r, &ev, &u).rule, Rule::Unattributed);
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_300_999)]);
        assert_eq!(one(&r, &ev, &u).node, Some(2));
    }
}
