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

use crate::fast_hash::FastMap;
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
    pub state: String,
    pub start: Option<i64>,
    pub end: i64,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    /// The run's nodes, the one that held rank 0 (the first by name) first.
    pub nodes: Vec<i64>,
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
}

/// The node evidence by time, for the windows of the failed runs: the
/// attribution looks at every node of every failed run (8.5 million node
/// slots in a month of large jobs), but only a few dozen findings or
/// events fall into any one window fleet-wide. So each run marks its
/// nodes, and the marks of its window are checked against them; looking
/// each node up instead cost more than all the rest of the attribution.
struct ByTime<'e> {
    /// Every finding as (at, node, mark), by time then node.
    findings: Vec<(i64, i64, &'e Mark)>,
    events: Vec<(i64, i64, &'e Mark)>,
    /// `marked[node]`: the number of the run that marked it last.
    marked: Vec<u32>,
    runs: u32,
}

impl<'e> ByTime<'e> {
    fn new(ev: &'e Evidence) -> Self {
        let findings = ByTime::by_time(&ev.findings);
        let events = ByTime::by_time(&ev.events);
        let nodes = findings
            .iter()
            .chain(&events)
            .filter_map(|&(_, node, _)| usize::try_from(node).ok())
            .max()
            .map_or(0, |n| n + 1);
        ByTime {
            findings,
            events,
            marked: vec![0; nodes],
            runs: 0,
        }
    }

    /// Stable, so that one node's marks of one second keep their order.
    fn by_time(map: &'e HashMap<i64, Vec<Mark>>) -> Vec<(i64, i64, &'e Mark)> {
        let mut list: Vec<(i64, i64, &Mark)> = map
            .iter()
            .flat_map(|(&node, marks)| marks.iter().map(move |m| (m.at, node, m)))
            .collect();
        list.sort_by_key(|&(at, node, _)| (at, node));
        list
    }

    /// The earliest (then lowest node id) mark of `list` in `[lo, hi]` on a marked node.
    fn earliest_in(
        &self,
        list: &[(i64, i64, &'e Mark)],
        lo: i64,
        hi: i64,
    ) -> Option<(i64, &'e Mark)> {
        let first = list.partition_point(|&(at, _, _)| at < lo);
        list[first..]
            .iter()
            .take_while(|&&(at, _, _)| at <= hi)
            .find(|&&(_, node, _)| {
                usize::try_from(node)
                    .ok()
                    .and_then(|n| self.marked.get(n))
                    .is_some_and(|&run| run == self.runs)
            })
            .map(|&(_, node, m)| (node, m))
    }

    /// The earliest finding, else the earliest event, on `nodes` in the window of `end`.
    fn node_evidence(&mut self, nodes: &[i64], end: i64) -> Option<(i64, &'e Mark, Rule)> {
        let (lo, hi) = (end - BEFORE_END_S, end + AFTER_END_S);
        let in_window = |list: &[(i64, i64, &Mark)]| {
            let first = list.partition_point(|&(at, _, _)| at < lo);
            list.get(first).is_some_and(|&(at, _, _)| at <= hi)
        };
        if !in_window(&self.findings) && !in_window(&self.events) {
            return None;
        }
        self.runs += 1;
        for &node in nodes {
            if let Some(m) = usize::try_from(node)
                .ok()
                .and_then(|n| self.marked.get_mut(n))
            {
                *m = self.runs;
            }
        }
        self.earliest_in(&self.findings, lo, hi)
            .map(|(n, m)| (n, m, Rule::Finding))
            .or_else(|| {
                self.earliest_in(&self.events, lo, hi)
                    .map(|(n, m)| (n, m, Rule::NodeEvent))
            })
    }
}

/// The category of each family of our reason codes, by the code's first
/// word: the check that owns the hardware, so that the reliability report
/// groups `EDAC_UE` (memory check) with `EDAC_CE_LOGGED` (kernel log) and
/// `MCE_*` apart from the GPU's XIDs although one pass finds both.
const CODE_CATEGORIES: &[(&str, &str)] = &[
    ("XID", "xid"),
    ("ECC", "ecc"),
    ("ROW", "ecc"),
    ("ROWS", "ecc"),
    ("RETIRED", "ecc"),
    ("NVLINK", "nvlink"),
    ("PCIE", "pcie"),
    ("IB", "ib"),
    ("MOUNT", "mounts"),
    ("NFS", "mounts"),
    ("GPU", "gpu"),
    ("DRIVER", "gpu"),
    ("VBIOS", "gpu"),
    ("INFOROM", "gpu"),
    ("CLOCKS", "clocks"),
    ("MEM", "memory"),
    ("EDAC", "memory"),
    ("MCE", "mce"),
    ("CPU", "cpus"),
    ("NVME", "block"),
    ("BLOCK", "block"),
    ("FS", "block"),
    ("SERVICE", "services"),
    ("FIRMWARE", "firmware"),
];

/// The category of one of our reason codes, `None` for a code we do not
/// know (a site's own check, a newer node's code).
pub fn known_category(code: &str) -> Option<&'static str> {
    let head = code.split('_').next().unwrap_or(code);
    CODE_CATEGORIES
        .iter()
        .find(|(word, _)| head.eq_ignore_ascii_case(word))
        .map(|&(_, category)| category)
}

/// The category of one of our reason codes: `XID_79` is `xid`,
/// `EDAC_UE` `memory`, `MOUNT_HUNG` `mounts`; an unknown code its first
/// word in lower case.
pub fn category_of_code(code: &str) -> String {
    match known_category(code) {
        Some(category) => category.into(),
        None => match code.split('_').next().unwrap_or("") {
            "" => "unknown".into(),
            head => head.to_ascii_lowercase(),
        },
    }
}

/// Runs, deaths by each signal and plain failing exits of every user:
/// overall and per node (one-node runs), so that a user's record
/// *elsewhere* is known. Signals are kept apart: a user whose code
/// segfaults says nothing about a SIGBUS (the kernel's signal for a memory
/// error it could not correct).
#[derive(Debug, Default)]
pub struct UserStats {
    pub names: Vec<String>,
    pub runs: Vec<u32>,
    /// Per user: deaths by each signal.
    pub crashes: Vec<HashMap<i64, u32>>,
    pub exits: Vec<u32>,
    pub runs_on: FastMap<(u32, i64), u32>,
    /// By (user, node, signal).
    pub crashes_on: FastMap<(u32, i64, i64), u32>,
    pub exits_on: FastMap<(u32, i64), u32>,
}

/// A user's record: runs, failures of one kind among them, and for a
/// signal death the deaths by other signals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    pub runs: u32,
    pub fails: u32,
    /// Deaths by other signals: a program that crashes one way may crash
    /// another, so they count at [`RELATED_WEIGHT`].
    pub related: u32,
}

/// How much a user's deaths by other signals count towards a signal's rate.
/// 1 pools all signals (a segfaulting user's SIGBUS is theirs as much as a
/// segfault); 0 keeps them apart, which over 20 generated histories blamed
/// healthy nodes for rarer signals of crashing users (precision 0.8 at
/// 10x); one half keeps precision and finds a few more lemons.
pub const RELATED_WEIGHT: f64 = 0.5;

impl Record {
    /// Failures of this kind per run, smoothed so that a short record
    /// neither clears nor condemns anyone:
    /// `(fails + RELATED_WEIGHT * related + 0.5) / (runs + 1)`.
    pub fn rate(self) -> f64 {
        (f64::from(self.fails) + RELATED_WEIGHT * f64::from(self.related) + 0.5)
            / (f64::from(self.runs) + 1.0)
    }
}

impl UserStats {
    /// The index of `name`, added when new.
    pub fn intern<S: std::hash::BuildHasher>(
        &mut self,
        index: &mut HashMap<String, u32, S>,
        name: &str,
    ) -> u32 {
        if let Some(&i) = index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.runs.push(0);
        self.crashes.push(HashMap::new());
        self.exits.push(0);
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

    /// Counts the signal deaths and the plain failing exits among the failed runs.
    pub fn add_failures(&mut self, runs: &[FailedRun]) {
        for r in runs.iter().filter(|r| r.state == "FAILED") {
            let one_node = match r.nodes[..] {
                [n] => Some(n),
                _ => None,
            };
            match r.signal() {
                Some(signal) => {
                    *self.crashes[r.user as usize].entry(signal).or_default() += 1;
                    if let Some(n) = one_node {
                        *self.crashes_on.entry((r.user, n, signal)).or_default() += 1;
                    }
                }
                None => {
                    self.exits[r.user as usize] += 1;
                    if let Some(n) = one_node {
                        *self.exits_on.entry((r.user, n)).or_default() += 1;
                    }
                }
            }
        }
    }

    /// `user`'s record of failures like `run`'s (a death by its signal, with
    /// deaths by other signals as `related`, or a plain exit) on nodes other
    /// than a one-node run's node; for a multi-node run, every run of the
    /// user but this one.
    pub fn elsewhere(&self, user: u32, run: &FailedRun) -> Record {
        let u = user as usize;
        let node = match run.nodes[..] {
            [n] => Some(n),
            _ => None,
        };
        let runs = match node {
            Some(n) => self.runs[u] - self.runs_on.get(&(user, n)).copied().unwrap_or(0),
            None => self.runs[u].saturating_sub(1),
        };
        let Some(signal) = run.signal() else {
            let here = node.map_or(1, |n| self.exits_on.get(&(user, n)).copied().unwrap_or(0));
            return Record {
                runs,
                fails: self.exits[u].saturating_sub(here),
                related: 0,
            };
        };
        // Deaths by each signal elsewhere: all of the user's, less those on
        // this run's node (or less this run itself).
        let (mut same, mut other) = (0u32, 0u32);
        for (&s, &count) in &self.crashes[u] {
            let here = match node {
                Some(n) => self.crashes_on.get(&(user, n, s)).copied().unwrap_or(0),
                None => u32::from(s == signal),
            };
            let elsewhere = count.saturating_sub(here);
            if s == signal {
                same += elsewhere;
            } else {
                other += elsewhere;
            }
        }
        Record {
            runs,
            fails: same,
            related: other,
        }
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
}

impl Rule {
    /// Slurm or a check saw the node fail (`NODE_FAIL`, a node event, a
    /// finding): not an inference from the weighing, which can be wrong and
    /// whose verdicts on one node lean on each other.
    pub fn witnessed(self) -> bool {
        matches!(self, Rule::NodeFail | Rule::NodeEvent | Rule::Finding)
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
    /// One of our health checks caught the fault (a finding or an `hc:`
    /// event explains it): the node was drained for it and came back only
    /// after a clean check.
    pub caught_by_check: bool,
}

impl Attribution {
    /// A hardware failure for the reliability report: blamed on a node, or
    /// on the hardware of a multi-node run's nodes together.
    pub fn is_hardware(&self) -> bool {
        self.node.is_some() || self.rule == Rule::AmongNodes
    }

    fn node(node: i64, rule: Rule, category: &str, detail: String) -> Attribution {
        Attribution {
            node: Some(node),
            rule,
            category: category.to_string(),
            detail,
            caught_by_check: false,
        }
    }

    /// Blamed on `node` for the evidence `m`.
    fn evidence(node: i64, rule: Rule, m: &Mark, detail: String) -> Attribution {
        Attribution {
            caught_by_check: m.category != SLURM_CATEGORY,
            ..Attribution::node(node, rule, &m.category, detail)
        }
    }

    fn nobody(rule: Rule, category: &str, detail: String) -> Attribution {
        Attribution {
            node: None,
            rule,
            category: category.to_string(),
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
}

/// What the first pass decided: final, or a signal death to weigh.
enum FirstPass {
    Done(Attribution),
    /// No evidence decides: a plain exit or signal death, or a multi-node run.
    Weigh,
    /// A multi-node run whose first failing task was on `node`: weighed as
    /// if it had run there alone (a user's bug fails some task first too).
    Localized {
        node: i64,
        detail: String,
    },
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
fn first_pass(
    run: &FailedRun,
    ev: &Evidence,
    by_time: &mut ByTime,
    p: &AttributionParams,
) -> FirstPass {
    if let [node] = run.nodes[..] {
        let found = by_time.node_evidence(&run.nodes, run.end);
        if run.state == "NODE_FAIL" {
            return FirstPass::Done(match found {
                Some((_, m, _)) => Attribution::evidence(
                    node,
                    Rule::NodeFail,
                    m,
                    format!("NODE_FAIL; {}", evidence_text(m, run.end)),
                ),
                None => Attribution::node(node, Rule::NodeFail, "node_fail", "NODE_FAIL".into()),
            });
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
            return FirstPass::Done(Attribution::evidence(node, rule, m, detail));
        }
        return FirstPass::Weigh;
    }
    if let Some((node, m, rule)) = by_time.node_evidence(&run.nodes, run.end) {
        let detail = format!("{}; {}", exit_text(run), evidence_text(m, run.end));
        return FirstPass::Done(Attribution::evidence(node, rule, m, detail));
    }
    if run.state == "NODE_FAIL" {
        // The node that died records no task exit: the first one recorded
        // is a survivor's, killed by Slurm.
        return FirstPass::Weigh;
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
            "first failing task of {} nodes on this node, {:+.3}s from the end",
            run.nodes.len(),
            (at_ms - run.end * 1000) as f64 / 1000.0
        );
        return FirstPass::Localized { node, detail };
    }
    FirstPass::Weigh
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
        if let (Some(array), [node]) = (array_of(&runs[i].job_id), &runs[i].nodes[..]) {
            by_pair.entry((array, *node)).or_default().push(k);
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
                format!(
                    "{}; one of {user}'s array tasks failing on this node within an hour",
                    exit_text(&runs[i])
                ),
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
        out[i] = Some(hazards.verdict(k, &runs[i], users));
    }
    for (i, _, first) in localized {
        if let Some(a) = out[i].as_mut() {
            a.detail = format!("{first}; {}", a.detail);
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

/// Rule 5: the joint estimate of the nodes' hardware hazards and the users'
/// own failure rates, for the runs that no evidence decides.
///
/// A run of `d` days on nodes with hazards `h` (hardware failures per
/// node-day) ends in a hardware failure of its kind (signal or plain exit)
/// with rate `π·h·d` per node, `π` the share of hardware failures with that
/// signature; its user fails it with their rate `u` elsewhere. The chance
/// that node `n` caused it is `π·h_n·d / (u + Σ π·h·d)`. The hazards are
/// estimated from the failures evidence blames plus these chances (an EM
/// iteration), each node starting from [`PRIOR_NODE_DAYS`] at the fleet
/// rate, and a run's own chance never raises its nodes' hazards.
struct Hazards {
    /// Per weighed run: the user's rate.
    user_rates: Vec<f64>,
    /// Each node's chance, all weighed runs' in one list (the rounds go
    /// through it 50 times: one allocation per run scattered it over the
    /// heap, and the rounds waited on memory): run `k`'s are
    /// `spans[k]..spans[k + 1]`.
    chances: Vec<f64>,
    spans: Vec<usize>,
    /// Per weighed run: the user's record it was weighed with.
    records: Vec<Record>,
}

impl Hazards {
    fn estimate(
        runs: &[FailedRun],
        weighed: &[usize],
        user_share: &[f64],
        decided: &[Option<Attribution>],
        users: &UserStats,
        node_days: &HashMap<i64, f64>,
    ) -> Hazards {
        let total_days: f64 = node_days.values().sum();
        // Failures evidence blames, per node, and their signatures.
        let mut hard: HashMap<i64, f64> = HashMap::new();
        let (mut signals, mut exits, mut blamed) = (0.0, 0.0, 0.0);
        for (run, a) in runs.iter().zip(decided) {
            if let Some(n) = a.as_ref().and_then(|a| a.node) {
                *hard.entry(n).or_default() += 1.0;
                blamed += 1.0;
                match (run.state.as_str(), run.signal()) {
                    ("FAILED", Some(_)) => signals += 1.0,
                    ("FAILED", None) => exits += 1.0,
                    _ => {}
                }
            }
        }
        let share_signal = (signals + 1.0) / (blamed + 3.0);
        let share_exit = (exits + 1.0) / (blamed + 3.0);
        let records: Vec<Record> = weighed
            .iter()
            .map(|&i| users.elsewhere(runs[i].user, &runs[i]))
            .collect();
        // Per weighed run: user rate, hardware rate per unit hazard.
        let base: Vec<(f64, f64)> = weighed
            .iter()
            .zip(&records)
            .zip(user_share)
            .map(|((&i, rec), &user_share)| {
                let share = if runs[i].signal().is_some() {
                    share_signal
                } else {
                    share_exit
                };
                // Only a node fails a job with NODE_FAIL.
                let u = if runs[i].state == "NODE_FAIL" {
                    0.0
                } else {
                    rec.rate() * user_share
                };
                (u, share * runs[i].days().max(1.0 / 24.0))
            })
            .collect();
        // Start from every signal death its nodes' and every plain exit its
        // user's: a node that kills jobs shows from the first round, and
        // users' everyday bugs do not inflate the hazards they are weighed by.
        // The rounds below touch every node of every weighed run 50 times:
        // dense indices instead of hash lookups (millions of node slots in a
        // fleet's month of large jobs).
        let mut dense: FastMap<i64, usize> = FastMap::default();
        let (mut slots, mut chances, mut spans) = (Vec::new(), Vec::new(), vec![0]);
        for &i in weighed {
            let k = runs[i].nodes.len();
            let start = if runs[i].signal().is_some() {
                1.0 / k as f64
            } else {
                0.0
            };
            for n in &runs[i].nodes {
                let next = dense.len();
                slots.push(*dense.entry(*n).or_insert(next));
                chances.push(start);
            }
            spans.push(slots.len());
        }
        let mut hard_dense = vec![0.0; dense.len()];
        let mut days_dense = vec![0.0; dense.len()];
        for (n, &d) in &dense {
            hard_dense[d] = hard.get(n).copied().unwrap_or(0.0);
            days_dense[d] = node_days.get(n).copied().unwrap_or(0.0);
        }
        let hard_total: f64 = hard.values().sum();
        let mut fails = vec![0.0; dense.len()];
        let mut rates: Vec<f64> = Vec::new();
        for _ in 0..50 {
            fails.copy_from_slice(&hard_dense);
            let mut weighed_total = 0.0;
            for (&d, w) in slots.iter().zip(&chances) {
                fails[d] += w;
                weighed_total += w;
            }
            let fleet_rate = if total_days > 0.0 {
                (hard_total + weighed_total) / total_days
            } else {
                0.0
            };
            let mut change: f64 = 0.0;
            for (k, &(u, per_hazard)) in base.iter().enumerate() {
                let span = spans[k]..spans[k + 1];
                rates.clear();
                for (&d, own) in slots[span.clone()].iter().zip(&chances[span.clone()]) {
                    let f = fails[d] - own;
                    let h = (f.max(0.0) + PRIOR_NODE_DAYS * fleet_rate)
                        / (days_dense[d] + PRIOR_NODE_DAYS);
                    rates.push(h * per_hazard);
                }
                let total = u + rates.iter().sum::<f64>();
                for (w, r) in chances[span].iter_mut().zip(&rates) {
                    let next = if total > 0.0 { r / total } else { 0.0 };
                    change = change.max((next - *w).abs());
                    *w = next;
                }
            }
            if change < 1e-6 {
                break;
            }
        }
        Hazards {
            user_rates: base.iter().map(|&(u, _)| u).collect(),
            chances,
            spans,
            records,
        }
    }

    /// The verdict on the `k`th weighed run: its likeliest node's when that
    /// node's chance is at least one half, else the user's (or nobody's).
    fn verdict(&self, k: usize, run: &FailedRun, users: &UserStats) -> Attribution {
        let (u, chances) = (
            &self.user_rates[k],
            &self.chances[self.spans[k]..self.spans[k + 1]],
        );
        let rec = self.records[k];
        let user = &users.names[run.user as usize];
        let what = if run.state == "NODE_FAIL" {
            "cannot cause NODE_FAIL; they failed"
        } else if run.signal().is_some() {
            "died of this signal"
        } else {
            "failed with an exit code"
        };
        let where_ = if run.nodes.len() == 1 {
            "elsewhere"
        } else {
            "in their other runs"
        };
        let related = if rec.related > 0 {
            format!(", of other signals in {}", rec.related)
        } else {
            String::new()
        };
        let record = format!(
            "{user} {what} in {} of {} runs {where_}{related} ({u:.3} per run)",
            rec.fails, rec.runs
        );
        let best = chances
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)));
        if let Some((j, &w)) = best.filter(|&(_, &w)| w >= 0.5) {
            let rule = match (run.nodes.len(), run.signal()) {
                (1, Some(_)) => Rule::SignalDeath,
                (1, None) => Rule::NodeExit,
                _ => Rule::NodeHazard,
            };
            let category = if run.state == "NODE_FAIL" {
                "node_fail"
            } else if run.signal().is_some() {
                "signal"
            } else {
                "exit"
            };
            let among = if run.nodes.len() > 1 {
                format!(" (of {} nodes)", run.nodes.len())
            } else {
                String::new()
            };
            return Attribution::node(
                run.nodes[j],
                rule,
                category,
                format!(
                    "{}; {record}; the node's hardware{among} explains it with chance {w:.2}",
                    exit_text(run)
                ),
            );
        }
        let together: f64 = chances.iter().sum();
        match (run.nodes.len(), run.signal()) {
            (1, Some(_)) => Attribution::nobody(
                Rule::UserCrash,
                "user",
                format!("{}; {record}", exit_text(run)),
            ),
            (1, None) => Attribution::nobody(
                Rule::UserExit,
                "user",
                format!("{}; {record}", exit_text(run)),
            ),
            (n, Some(_)) if together >= 0.5 => Attribution::nobody(
                Rule::AmongNodes,
                "multi_node",
                format!(
                    "{} on {n} nodes, no node evidence; {record}; the nodes' hardware together explains it with chance {together:.2}, no one node with more than {:.2}",
                    exit_text(run),
                    best.map_or(0.0, |(_, &w)| w),
                ),
            ),
            (n, _) => Attribution::nobody(
                Rule::Unattributed,
                "unknown",
                format!(
                    "{} on {n} nodes, no node evidence; {record}",
                    exit_text(run)
                ),
            ),
        }
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

    /// `r` weighed in a month where alice ran 400 jobs elsewhere without a
    /// failure and nodes 1-3 each went NODE_FAIL twice (`r` runs two days).
    fn among_failing_nodes(r: &FailedRun, ev: &Evidence, u: &UserStats) -> Attribution {
        let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
        let mut r = r.clone();
        r.start = Some(r.end - 2 * 86_400);
        let mut runs = vec![r];
        for n in 1..=3 {
            for end in [100_000, 900_000] {
                let mut nf = run(&[n], "0:0");
                nf.state = "NODE_FAIL".into();
                nf.end = end;
                nf.job_id_raw = 1_000 + n * 10 + end / 100_000;
                runs.push(nf);
            }
        }
        attribute_all(&runs, ev, u, &days, &AttributionParams::default()).remove(0)
    }

    fn clean_alice() -> UserStats {
        let mut u = users(&["alice"]);
        u.runs[0] = 400;
        u
    }

    #[test]
    fn the_first_failing_task_says_where_and_the_weighing_says_whose() {
        let mut ev = Evidence::default();
        ev.task_fails_ms.insert(42, vec![(2, 5_000_000)]);
        // A clean user's job fails first on a node that already fails jobs.
        let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &clean_alice());
        assert_eq!(
            (a.node, a.rule, a.category.as_str()),
            (Some(2), Rule::FirstTaskExit, "task_exit")
        );
        assert!(
            a.detail
                .starts_with("first failing task of 3 nodes on this node"),
            "{}",
            a.detail
        );
        // The same failure by a user whose jobs fail everywhere is theirs.
        let mut sloppy = clean_alice();
        sloppy.exits[0] = 120;
        let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &sloppy);
        assert_eq!((a.node, a.rule), (None, Rule::UserExit));
        assert!(
            a.detail.contains("first failing task of 3 nodes") && a.detail.contains("120 of 400"),
            "{}",
            a.detail
        );
        // So is a clean user's first failure on a node with no record.
        let a = one(
            &run(&[4, 5], "1:0"),
            &{
                let mut e = Evidence::default();
                e.task_fails_ms.insert(42, vec![(5, 5_000_000)]);
                e
            },
            &users(&["alice"]),
        );
        assert_eq!(a.node, None, "{a:?}");
    }

    #[test]
    fn a_bug_is_weighed_by_the_chance_it_would_fail_first_on_that_node() {
        // Alice fails one run in ten elsewhere with an exit code.
        let mut sloppy = clean_alice();
        sloppy.exits[0] = 40;
        let mut ev = Evidence::default();
        ev.task_fails_ms.insert(42, vec![(2, 5_000_000)]);
        // Of 16 nodes, her bug would have failed first on node 2 one time
        // in 16: node 2's hardware, which already fails jobs, explains it.
        let wide: Vec<i64> = (1..=16).collect();
        let a = among_failing_nodes(&run(&wide, "1:0"), &ev, &sloppy);
        assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit), "{a:?}");
        // Of 3 nodes, one time in 3: her record explains it.
        let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &sloppy);
        assert_eq!((a.node, a.rule), (None, Rule::UserExit), "{a:?}");
    }

    #[test]
    fn rank_zeros_node_takes_the_share_of_bugs_that_fail_there_first() {
        let nodes = [10, 11, 12, 13];
        assert!((chance_first_on(&nodes, 12, 0.0) - 0.25).abs() < 1e-12);
        // Half of the bugs fail on rank 0 first, the rest anywhere.
        assert!((chance_first_on(&nodes, 10, 0.5) - 0.625).abs() < 1e-12);
        // The other nodes keep at least the uniform chance (a bug elsewhere
        // is never judged rarer than by chance).
        assert!((chance_first_on(&nodes, 12, 0.5) - 0.25).abs() < 1e-12);

        // Estimated from the localized runs: all on rank 0's node...
        let runs: Vec<FailedRun> = (0..20).map(|_| run(&nodes, "1:0")).collect();
        let on = |node: i64| -> Vec<(usize, i64, String)> {
            (0..20).map(|i| (i, node, String::new())).collect()
        };
        assert!((first_node_excess(&runs, &on(10)) - 0.95).abs() < 1e-12);
        // ... none there ...
        assert_eq!(first_node_excess(&runs, &on(13)), 0.0);
        // ... spread evenly.
        let even: Vec<(usize, i64, String)> =
            (0..20).map(|i| (i, nodes[i % 4], String::new())).collect();
        assert!(first_node_excess(&runs, &even).abs() < 1e-12);
        // Too few multi-node runs to tell: no excess.
        assert_eq!(first_node_excess(&runs[..3], &on(10)[..3]), 0.0);
    }

    #[test]
    fn finding_beats_event_beats_task_exit() {
        let u = clean_alice();
        let mut ev = Evidence::default();
        ev.task_fails_ms.insert(42, vec![(1, 5_000_000)]);
        let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &u);
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
                .contains("alice died of this signal in 0 of 400 runs elsewhere"),
            "{}",
            a[0].detail
        );
    }

    #[test]
    fn a_users_other_signals_count_half_towards_a_signals_rate() {
        let mut u = users(&["bob"]);
        u.add_run(0, Some(7));
        let mut crashes: Vec<FailedRun> = (0..40).map(|_| run(&[3], "0:11")).collect();
        crashes.push(run(&[7], "0:11"));
        for _ in 0..crashes.len() - 1 {
            u.add_run(0, Some(3));
        }
        for _ in 0..59 {
            u.add_run(0, Some(4));
        }
        u.add_failures(&crashes);
        let segv = u.elsewhere(0, &run(&[7], "0:11"));
        let bus = u.elsewhere(0, &run(&[7], "0:7"));
        assert_eq!((segv.runs, segv.fails, segv.related), (99, 40, 0));
        assert_eq!((bus.runs, bus.fails, bus.related), (99, 0, 40));
        assert!((bus.rate() - 20.5 / 100.0).abs() < 1e-12);
        assert!(bus.rate() < segv.rate() / 1.9);
    }

    #[test]
    fn a_user_who_crashes_everywhere_says_nothing_about_the_node() {
        let mut u = users(&["bob"]);
        u.runs[0] = 100;
        u.crashes[0].insert(11, 40);
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

    /// Two `NODE_FAIL`s of node 7 this month, and 100 nodes of 20 node-days.
    fn node_7_failing() -> (Vec<FailedRun>, HashMap<i64, f64>) {
        let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
        let runs = [100_000, 900_000]
            .into_iter()
            .map(|end| {
                let mut nf = run(&[7], "0:0");
                nf.state = "NODE_FAIL".into();
                nf.end = end;
                nf.job_id_raw = end;
                nf
            })
            .collect();
        (runs, days)
    }

    #[test]
    fn a_plain_exit_is_the_nodes_only_when_its_user_rarely_fails_that_way() {
        let mut u = users(&["alice", "bob"]);
        // alice: 400 runs elsewhere, 1 plain failure; bob: 1 in 10 fails.
        u.runs = vec![400, 400];
        u.exits = vec![1, 40];
        let (mut runs, days) = node_7_failing();
        let mut long = run(&[7], "1:0");
        long.start = Some(10_000 - 2 * 86_400);
        runs.push(long.clone());
        long.user = 1;
        runs.push(long);
        let a = attribute_all(
            &runs,
            &Evidence::default(),
            &u,
            &days,
            &AttributionParams::default(),
        );
        assert_eq!((a[2].node, a[2].rule), (Some(7), Rule::NodeExit), "{a:?}");
        assert!(
            a[2].detail
                .contains("alice failed with an exit code in 1 of 400 runs elsewhere"),
            "{}",
            a[2].detail
        );
        assert_eq!((a[3].node, a[3].rule), (None, Rule::UserExit));
        // On a node with no other failure, alice's exit is hers.
        let mut quiet = run(&[8], "1:0");
        quiet.start = Some(10_000 - 2 * 86_400);
        let a = attribute_all(
            &[quiet],
            &Evidence::default(),
            &u,
            &days,
            &AttributionParams::default(),
        );
        assert_eq!((a[0].node, a[0].rule), (None, Rule::UserExit));
    }

    #[test]
    fn a_multi_node_failure_without_evidence_goes_to_a_node_that_already_fails_jobs() {
        let mut u = users(&["alice"]);
        u.runs[0] = 400;
        let (mut runs, days) = node_7_failing();
        let mut multi = run(&[5, 6, 7, 8], "0:7");
        multi.start = Some(10_000 - 86_400);
        runs.push(multi.clone());
        let a = attribute_all(
            &runs,
            &Evidence::default(),
            &u,
            &days,
            &AttributionParams::default(),
        );
        assert_eq!((a[2].node, a[2].rule), (Some(7), Rule::NodeHazard), "{a:?}");
        // Among healthy nodes it is nobody's.
        multi.nodes = vec![1, 2, 3, 4];
        runs[2] = multi;
        let a = attribute_all(
            &runs,
            &Evidence::default(),
            &u,
            &days,
            &AttributionParams::default(),
        );
        assert_eq!((a[2].node, a[2].rule), (None, Rule::Unattributed));
    }

    #[test]
    fn a_crash_that_only_the_nodes_together_explain_is_hardware_of_no_one_node() {
        // Sixteen quiet nodes for two days: together more likely to have
        // killed the job than a user who never crashes in 400 runs, though
        // no one of them is.
        let u = clean_alice();
        let wide: Vec<i64> = (10..26).collect();
        let a = among_failing_nodes(&run(&wide, "0:7"), &Evidence::default(), &u);
        assert_eq!((a.node, a.rule), (None, Rule::AmongNodes), "{a:?}");
        assert_eq!(a.category, "multi_node");
        assert!(a.detail.contains("together explains it"), "{}", a.detail);
        // A plain exit code is the program's own decision: no one's.
        let a = among_failing_nodes(&run(&wide, "1:0"), &Evidence::default(), &u);
        assert_eq!((a.node, a.rule), (None, Rule::Unattributed), "{a:?}");
        // Two nodes do not outweigh alice's record.
        let a = among_failing_nodes(&run(&[10, 11], "0:7"), &Evidence::default(), &u);
        assert_eq!((a.node, a.rule), (None, Rule::Unattributed), "{a:?}");
    }

    #[test]
    fn what_a_check_caught_is_marked_and_slurms_own_events_are_not() {
        let u = users(&["alice"]);
        let mut ev = Evidence::default();
        ev.events.insert(7, vec![mark(9_900, "xid")]);
        ev.events.insert(8, vec![mark(9_900, SLURM_CATEGORY)]);
        assert!(one(&run(&[7], "0:7"), &ev, &u).caught_by_check);
        let a = one(&run(&[8], "0:7"), &ev, &u);
        assert_eq!((a.node, a.caught_by_check), (Some(8), false));
    }

    #[test]
    fn reason_codes_give_categories() {
        assert_eq!(category_of_code("XID_79"), "xid");
        assert_eq!(category_of_code("MOUNT_HUNG"), "mounts");
        assert_eq!(category_of_code("ECC_VOLATILE_UNCORRECTED"), "ecc");
        assert_eq!(category_of_code("IB_PORT_DOWN"), "ib");
        assert_eq!(category_of_code("SITE_CHECK_FAILED"), "site");
        assert_eq!(category_of_code(""), "unknown");
    }

    #[test]
    fn the_host_checks_codes_are_categories_of_their_own() {
        for (code, category) in [
            ("MEM_TOTAL_LOW", "memory"),
            ("EDAC_UE", "memory"),
            ("EDAC_CE_RATE", "memory"),
            ("EDAC_CE_LOGGED", "memory"),
            ("EDAC_UE_LOGGED", "memory"),
            ("MCE_HARDWARE_ERROR", "mce"),
            ("MCE_EVENTS_LOGGED", "mce"),
            ("CPU_OFFLINE", "cpus"),
            ("NVME_MISSING", "block"),
            ("NVME_SIZE_LOW", "block"),
            ("NVME_NOT_LIVE", "block"),
            ("BLOCK_READ_ONLY", "block"),
            ("BLOCK_IO_ERROR", "block"),
            ("FS_ERROR", "block"),
            ("NFS_NOT_RESPONDING", "mounts"),
            ("SERVICE_MISSING", "services"),
            ("FIRMWARE_MISMATCH", "firmware"),
            ("ROW_REMAP_FAILURE", "ecc"),
            ("GPU_LOST", "gpu"),
        ] {
            assert_eq!(category_of_code(code), category, "{code}");
        }
    }

    #[test]
    fn the_first_failing_task_is_told_apart_within_a_second() {
        // Node 2's task failed at 5000.120 s, node 1's (killed by Slurm) at 5000.480 s.
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 5_000_480), (2, 5_000_120), (3, 5_000_999)]);
        ev.sort();
        let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &clean_alice());
        assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit));
    }

    #[test]
    fn task_exits_in_whole_seconds_still_count() {
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(3, 5_001_000), (2, 5_000_000), (1, 5_000_000)]);
        ev.sort();
        let u = clean_alice();
        assert_eq!(
            among_failing_nodes(&run(&[2, 3], "1:0"), &ev, &u).node,
            Some(2)
        );
        assert_eq!(
            among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &u).node,
            Some(1)
        );
    }

    #[test]
    fn task_exit_window_covers_whole_seconds() {
        // The run starts at 4000 s here (among_failing_nodes moves it back).
        let u = clean_alice();
        let r = run(&[1, 2], "1:0");
        let within = |ev: &Evidence| {
            let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
            let mut r = r.clone();
            r.start = Some(4_000);
            attribute_all(
                std::slice::from_ref(&r),
                ev,
                &u,
                &days,
                &AttributionParams::default(),
            )
            .remove(0)
            .detail
            .contains("first failing task")
        };
        let mut ev = Evidence::default();
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_301_000)]);
        ev.sort();
        assert!(!within(&ev));
        ev.task_fails_ms
            .insert(42, vec![(1, 3_999_999), (2, 10_300_999)]);
        assert!(within(&ev));
    }
}
