//! The per-node signals over the scoring window (the paper's seven, plus
//! `early_fails`), computed from lemon.db.
//!
//! A node's history before its last `lemon release` is forgiven: every signal
//! of that node starts at the later of the window start and the release.

use crate::attribute::{
    self, Attribution, AttributionParams, Evidence, FailedRun, Mark, Rule, UserStats,
};
use crate::db;
use crate::error::Result;
use crate::fast_hash::FastMap;
use crate::ingest::events::is_out_of_service;
use crate::job_state::JobState;
use lemonade_slurm::reason::{self, ReasonOwner};
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// One of the per-node signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    ExclJobidCount,
    XidCnt,
    Tickets,
    OutCount,
    MultiNodeNodeFails,
    SingleNodeNodeFails,
    SingleNodeNodeFailureRate,
    EarlyFails,
}

impl Signal {
    /// Every signal, in report order.
    pub const ALL: [Signal; 8] = [
        Signal::ExclJobidCount,
        Signal::XidCnt,
        Signal::Tickets,
        Signal::OutCount,
        Signal::MultiNodeNodeFails,
        Signal::SingleNodeNodeFails,
        Signal::SingleNodeNodeFailureRate,
        Signal::EarlyFails,
    ];

    /// The name in config, JSON and reports (the paper's).
    pub fn name(self) -> &'static str {
        match self {
            Signal::ExclJobidCount => "excl_jobid_count",
            Signal::XidCnt => "xid_cnt",
            Signal::Tickets => "tickets",
            Signal::OutCount => "out_count",
            Signal::MultiNodeNodeFails => "multi_node_node_fails",
            Signal::SingleNodeNodeFails => "single_node_node_fails",
            Signal::SingleNodeNodeFailureRate => "single_node_node_failure_rate",
            Signal::EarlyFails => "early_fails",
        }
    }

    /// The short name of a drain reason.
    pub fn short(self) -> &'static str {
        match self {
            Signal::ExclJobidCount => "excl",
            Signal::XidCnt => "xid",
            Signal::Tickets => "tickets",
            Signal::OutCount => "out",
            Signal::MultiNodeNodeFails => "multi",
            Signal::SingleNodeNodeFails => "single",
            Signal::SingleNodeNodeFailureRate => "rate",
            Signal::EarlyFails => "early",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One job counted against a node, and why.
#[derive(Debug, Clone, Serialize)]
pub struct BlamedJob {
    pub job_id: String,
    pub end: i64,
    pub user: String,
    pub rule: Rule,
    pub category: String,
    pub detail: String,
    /// A health check caught the fault (and the node was drained for it).
    pub caught_by_check: bool,
}

/// One node's signals and the evidence behind them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeSignals {
    pub node: String,
    #[serde(skip)]
    pub node_id: i64,
    /// Distinct jobs that excluded the node.
    pub excl_jobid_count: u32,
    /// Distinct XID codes the node reported.
    pub xid_cnt: u32,
    /// Repair tickets opened.
    pub tickets: u32,
    /// Times the node went DOWN/DRAIN, lemon's own drains excepted.
    pub out_count: u32,
    /// Distinct multi-node jobs whose failure was attributed to the node.
    pub multi_node_node_fails: u32,
    /// Distinct single-node jobs whose failure was attributed to the node.
    pub single_node_node_fails: u32,
    /// `single_node_node_fails` over the single-node jobs the node ran.
    pub single_node_node_failure_rate: f64,
    /// Attributed failures within `early_fail_s` of the job's start.
    pub early_fails: u32,
    /// Runs that ended on the node in the window.
    pub jobs: u32,
    pub single_node_jobs: u32,
    /// Node-days of job runtime in the window.
    pub node_days: f64,
    /// Distinct job ids attributed to the node.
    pub failing_jobs: Vec<String>,
    /// Distinct UTC days with an attributed failure.
    pub failing_days: u32,
    /// Distinct job ids attributed to the node that no health check caught:
    /// what the lemon test counts.
    pub uncaught_fails: u32,
    /// Distinct UTC days with one of those.
    pub uncaught_days: u32,
    /// Those of `uncaught_fails` that Slurm saw the node fail
    /// ([`Rule::witnessed`]: `NODE_FAIL`, `Not responding`, `Kill task failed`).
    pub uncaught_witnessed: u32,
    /// Those of `uncaught_fails` whose own job log named this node's
    /// hardware ([`Rule::JobLog`]): the strongest evidence lemon has.
    pub uncaught_log_fails: u32,
    /// Distinct UTC days with one of those.
    pub uncaught_log_days: u32,
    /// Times a health check took the node out of service and it came back
    /// (the outage ended within the window): a repeat offender's count.
    pub out_returns: u32,
    /// Every run counted against the node with its evidence, by end time.
    pub evidence: Vec<BlamedJob>,
}

impl NodeSignals {
    /// A signal's value.
    pub fn get(&self, signal: Signal) -> f64 {
        match signal {
            Signal::ExclJobidCount => self.excl_jobid_count.into(),
            Signal::XidCnt => self.xid_cnt.into(),
            Signal::Tickets => self.tickets.into(),
            Signal::OutCount => self.out_count.into(),
            Signal::MultiNodeNodeFails => self.multi_node_node_fails.into(),
            Signal::SingleNodeNodeFails => self.single_node_node_fails.into(),
            Signal::SingleNodeNodeFailureRate => self.single_node_node_failure_rate,
            Signal::EarlyFails => self.early_fails.into(),
        }
    }

    /// Distinct failing jobs attributed to the node.
    pub fn fails(&self) -> u32 {
        self.failing_jobs.len() as u32
    }
}

/// The fleet's signals plus the totals the statistical rule needs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FleetSignals {
    pub window_start: i64,
    pub window_end: i64,
    pub nodes: Vec<NodeSignals>,
    /// Attributed failures (distinct job per node) over the whole fleet.
    pub attributed_failures: u64,
    pub unattributed_failures: u64,
    pub user_error_failures: u64,
    pub node_days: f64,
}

/// Scoring inputs from config.
#[derive(Debug, Clone)]
pub struct SignalParams {
    pub window_days: u32,
    pub attribution: AttributionParams,
    pub early_fail_s: i64,
}

/// Computes every node's signals for the window ending at `now`. Reads only.
pub fn compute(conn: &Connection, p: &SignalParams, now: i64) -> Result<FleetSignals> {
    Ok(compute_with_window(conn, p, now)?.0)
}

/// [`compute`], and the attributions it rests on (for `lemon run` to keep).
pub fn compute_with_window(
    conn: &Connection,
    p: &SignalParams,
    now: i64,
) -> Result<(FleetSignals, Window)> {
    let t0 = now - i64::from(p.window_days) * 86_400;
    let names = db::node_names(conn)?;
    let releases = db::releases(conn)?;
    let since = |node: i64| releases.get(&node).map_or(t0, |&r| r.max(t0));

    let mut per: HashMap<i64, NodeSignals> = HashMap::new();
    let window = attribute_range(conn, t0, now, &p.attribution, &since)?;
    for (&node, e) in &window.exposure {
        let s = entry(&mut per, &names, node);
        s.jobs = e.jobs;
        s.single_node_jobs = e.single_node_jobs;
        s.node_days = e.node_days;
    }
    count_node_history(conn, t0, now, &since, &mut per, &names)?;

    let mut fleet = FleetSignals {
        window_start: t0,
        window_end: now,
        ..FleetSignals::default()
    };
    let blamed = blame_per_node(&window, &since, p.early_fail_s, &mut fleet);
    for (node, b) in blamed {
        entry(&mut per, &names, node).take_blame(b);
    }
    for s in per.values_mut() {
        if s.single_node_jobs > 0 {
            s.single_node_node_failure_rate =
                f64::from(s.single_node_node_fails) / f64::from(s.single_node_jobs);
        }
    }

    fleet.nodes = per.into_values().filter(|s| !s.node.is_empty()).collect();
    fleet.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    fleet.node_days = fleet.nodes.iter().map(|s| s.node_days).sum();
    Ok((fleet, window))
}

/// What the window's attributions blame on each node (runs that ended
/// after the node's release), counting the fleet's totals on the way.
fn blame_per_node(
    window: &Window,
    since: &dyn Fn(i64) -> i64,
    early_fail_s: i64,
    fleet: &mut FleetSignals,
) -> HashMap<i64, Blame> {
    let mut blamed: HashMap<i64, Blame> = HashMap::new();
    for (run, a) in window.runs.iter().zip(&window.attributions) {
        match a.node {
            Some(node) if run.end > since(node) => {
                let b = blamed.entry(node).or_default();
                if b.all.insert(run.job_id_raw) {
                    fleet.attributed_failures += 1;
                }
                if run.nodes.len() == 1 {
                    b.single.insert(run.job_id_raw);
                } else {
                    b.multi.insert(run.job_id_raw);
                }
                if run.start.is_some_and(|s| run.end - s < early_fail_s) {
                    b.early.insert(run.job_id_raw);
                }
                b.days.insert(run.end.div_euclid(86_400));
                if !a.caught_by_check {
                    b.uncaught.insert(run.job_id_raw);
                    b.uncaught_days.insert(run.end.div_euclid(86_400));
                    if a.rule.witnessed() {
                        b.witnessed.insert(run.job_id_raw);
                    }
                    if a.rule == Rule::JobLog {
                        b.log.insert(run.job_id_raw);
                        b.log_days.insert(run.end.div_euclid(86_400));
                    }
                }
                b.jobs.push(BlamedJob {
                    job_id: run.job_id.clone(),
                    end: run.end,
                    user: window.users.names[run.user as usize].clone(),
                    rule: a.rule,
                    category: a.category.to_string(),
                    detail: a.detail.clone(),
                    caught_by_check: a.caught_by_check,
                });
            }
            Some(_) => {}
            None if a.category == "user" => fleet.user_error_failures += 1,
            None => fleet.unattributed_failures += 1,
        }
    }
    blamed
}

impl NodeSignals {
    /// Takes the counts of what was blamed on the node.
    fn take_blame(&mut self, b: Blame) {
        let mut seen = BTreeSet::new();
        self.failing_jobs = b
            .jobs
            .iter()
            .filter(|j| seen.insert(j.job_id.clone()))
            .map(|j| j.job_id.clone())
            .collect();
        self.single_node_node_fails = b.single.len() as u32;
        self.multi_node_node_fails = b.multi.len() as u32;
        self.early_fails = b.early.len() as u32;
        self.failing_days = b.days.len() as u32;
        // A job whose run a check caught counts as caught; requeued runs of
        // it that no check caught still count.
        self.uncaught_fails = b.uncaught.len() as u32;
        self.uncaught_days = b.uncaught_days.len() as u32;
        self.uncaught_witnessed = b.witnessed.len() as u32;
        self.uncaught_log_fails = b.log.len() as u32;
        self.uncaught_log_days = b.log_days.len() as u32;
        self.evidence = b.jobs;
    }
}

/// XIDs, out-of-service events, tickets and exclusions per node.
fn count_node_history(
    conn: &Connection,
    t0: i64,
    now: i64,
    since: &dyn Fn(i64) -> i64,
    per: &mut HashMap<i64, NodeSignals>,
    names: &HashMap<i64, String>,
) -> Result<()> {
    // XIDs: distinct codes.
    let mut seen: HashMap<i64, BTreeSet<String>> = HashMap::new();
    for (node, at, code) in db::history::xid_events(conn, t0, now)? {
        if at > since(node) {
            seen.entry(node).or_default().insert(code);
        }
    }
    for (node, codes) in seen {
        entry(per, names, node).xid_cnt = codes.len() as u32;
    }
    for (node, at, state) in db::history::node_events_not_lemons(conn, t0, now)? {
        if at > since(node) && is_out_of_service(&state) {
            entry(per, names, node).out_count += 1;
        }
    }
    // Only outages that ended: a node still out is not back in service,
    // and a node that is out cannot be drained anyway.
    for (node, at, end) in db::history::check_outages(conn, t0, now)? {
        if at > since(node) && end.is_some_and(|e| e <= now) {
            entry(per, names, node).out_returns += 1;
        }
    }
    for (node, at) in db::history::tickets_opened(conn, t0, now)? {
        if at > since(node) {
            entry(per, names, node).tickets += 1;
        }
    }
    for (node, at) in db::history::exclusions_seen(conn, t0, now)? {
        if at > since(node) {
            entry(per, names, node).excl_jobid_count += 1;
        }
    }
    Ok(())
}

/// Runs, single-node runs and node-days per node.
#[derive(Default, Clone, Copy)]
pub struct Exposure {
    pub jobs: u32,
    pub single_node_jobs: u32,
    pub node_days: f64,
}

/// The failed runs of a range, who they are blamed on, and what that took.
#[derive(Debug, Default)]
pub struct Window {
    pub runs: Vec<FailedRun>,
    /// One per run, in the same order.
    pub attributions: Vec<Attribution>,
    pub users: UserStats,
    pub exposure: HashMap<i64, Exposure>,
    /// The node evidence the runs were attributed with.
    pub evidence: Evidence,
}

impl std::fmt::Debug for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} jobs, {:.2} node-days", self.jobs, self.node_days)
    }
}

/// The one pass over the runs of a window: every node's exposure, every
/// user's runs, and the failed runs with their nodes.
///
/// Multi-node runs bring their nodes packed in `jobs.node_ids`: reading
/// `job_nodes` instead (8.5 million rows for a month of large jobs) was
/// most of the cost of scoring and of the reliability report.
struct WindowPass<'a> {
    t0: i64,
    since: &'a (dyn Fn(i64) -> i64 + Sync),
    /// Indexed by node id.
    per_node: Vec<Exposure>,
    users: UserStats,
    user_index: FastMap<String, u32>,
    /// The last user interned: runs of one user come together.
    last_user: Option<(String, u32)>,
    /// The failed runs in scan order, where their users' names are in
    /// `failed_users` beside them (numbered in end-time order once all
    /// are read).
    failed: Vec<(FailedRun, std::ops::Range<usize>)>,
    /// The failed runs' users' names, one after another: one string, not
    /// one per run.
    failed_users: String,
    /// The multi-node runs in scan order, counted once the pass is done.
    multi: Vec<MultiNodeRun>,
    /// The nodes of those that did not fail, packed as `jobs.node_ids`
    /// packs them (a failed run keeps its own, as ids, in `failed`).
    multi_nodes: Vec<u8>,
}

/// A run on several nodes (or none) that [`WindowPass`] counts at its end.
struct MultiNodeRun {
    id: i64,
    start: Option<i64>,
    end: i64,
    nodes: MultiNodes,
    /// Its place in `failed`, for a failed run.
    failed: Option<usize>,
}

/// Where a [`MultiNodeRun`]'s nodes are.
enum MultiNodes {
    /// In `multi_nodes`.
    Packed(std::ops::Range<usize>),
    /// In its failed run's `nodes` already.
    OfFailedRun,
    /// Only in `job_nodes` (rows stored without `jobs.node_ids`).
    InJobNodes,
}

impl<'a> WindowPass<'a> {
    fn new(conn: &Connection, t0: i64, since: &'a (dyn Fn(i64) -> i64 + Sync)) -> Result<Self> {
        let max_node = usize::try_from(db::max_node_id(conn)?).unwrap_or(0);
        Ok(WindowPass {
            t0,
            since,
            per_node: vec![Exposure::default(); max_node + 1],
            users: UserStats::default(),
            user_index: FastMap::default(),
            last_user: None,
            failed: Vec::new(),
            failed_users: String::new(),
            multi: Vec::new(),
            multi_nodes: Vec::new(),
        })
    }

    /// Takes one run that ended in the window.
    fn add(&mut self, row: &db::RunRow) {
        let start = row.start;
        let node = row.node;
        if start.is_some() {
            let user = self.user_of(row.user.unwrap_or(""));
            self.users.add_run(user, node);
        }
        let failed = self.failed_run(row, start);
        match node {
            Some(node) => {
                self.count(node, true, start, row.end);
                if let Some(k) = failed {
                    self.failed[k].0.nodes.push(node);
                }
            }
            None => {
                let ids = row.node_ids;
                // Nothing to count or to give: a run that never got a node.
                if failed.is_none() && ids.is_some_and(<[u8]>::is_empty) {
                    return;
                }
                let nodes = match (ids, failed) {
                    (None, _) => MultiNodes::InJobNodes,
                    (Some(ids), Some(k)) => {
                        self.failed[k].0.nodes = db::unpack_node_ids(ids).collect();
                        MultiNodes::OfFailedRun
                    }
                    (Some(ids), None) => {
                        self.multi_nodes.extend_from_slice(ids);
                        MultiNodes::Packed(
                            self.multi_nodes.len() - ids.len()..self.multi_nodes.len(),
                        )
                    }
                };
                self.multi.push(MultiNodeRun {
                    id: row.id,
                    start,
                    end: row.end,
                    nodes,
                    failed,
                });
            }
        }
    }

    fn user_of(&mut self, name: &str) -> u32 {
        match &self.last_user {
            Some((last, user)) if same_text(last, name) => *user,
            _ => {
                let user = self.users.intern(&mut self.user_index, name);
                self.last_user = Some((name.to_string(), user));
                user
            }
        }
    }

    /// Keeps `row` among the failed runs when it failed; its place there.
    fn failed_run(&mut self, row: &db::RunRow, start: Option<i64>) -> Option<usize> {
        let state = row.state;
        if !attribute::is_failure(state) {
            return None;
        }
        let run = FailedRun {
            row_id: row.id,
            job_id_raw: row.job_id_raw,
            job_id: row.job_id.to_string(),
            user: 0,
            state: JobState::from_sacct(state),
            start,
            end: row.end,
            exit_code: row.exit_code,
            exit_signal: row.exit_signal,
            nodes: Vec::new(),
            log: None,
            trace: None,
        };
        let user = row.user.unwrap_or("");
        self.failed_users.push_str(user);
        let end = self.failed_users.len();
        self.failed.push((run, end - user.len()..end));
        Some(self.failed.len() - 1)
    }

    /// Counts a run that ended at `end` on `node`, unless the node's
    /// history starts later (its release).
    fn count(&mut self, node: i64, single: bool, start: Option<i64>, end: i64) {
        if end <= (self.since)(node) {
            return;
        }
        let Some(e) = usize::try_from(node)
            .ok()
            .and_then(|n| self.per_node.get_mut(n))
        else {
            return;
        };
        e.jobs += 1;
        if single {
            e.single_node_jobs += 1;
        }
        if let Some(start) = start {
            e.node_days += (end - start.max(self.t0)).max(0) as f64 / 86_400.0;
        }
    }

    /// Whether every multi-node run's nodes came with the run (none has
    /// them only in `job_nodes`): then the count needs no database.
    fn counts_without_db(&self) -> bool {
        !self
            .multi
            .iter()
            .any(|r| matches!(r.nodes, MultiNodes::InJobNodes))
    }

    /// Counts the multi-node runs, after all one-node runs as scoring
    /// always has (a node's node-days are a sum of fractions: its order
    /// shows in the last digits), and gives the failed ones whose nodes
    /// are only in `job_nodes` their nodes (`job_nodes_of` reads those of
    /// a run stored without `jobs.node_ids`). Counted once: a second call
    /// finds none left.
    fn count_multi_node_runs(
        &mut self,
        job_nodes_of: &mut dyn FnMut(i64) -> Result<Vec<i64>>,
    ) -> Result<()> {
        let (multi, multi_nodes) = (
            std::mem::take(&mut self.multi),
            std::mem::take(&mut self.multi_nodes),
        );
        for run in &multi {
            let (start, end) = (run.start, run.end);
            match (&run.nodes, run.failed) {
                (MultiNodes::Packed(range), _) => {
                    for node in db::unpack_node_ids(&multi_nodes[range.clone()]) {
                        self.count(node, false, start, end);
                    }
                }
                (MultiNodes::OfFailedRun, Some(f)) => {
                    let nodes = std::mem::take(&mut self.failed[f].0.nodes);
                    for &node in &nodes {
                        self.count(node, false, start, end);
                    }
                    self.failed[f].0.nodes = nodes;
                }
                (MultiNodes::OfFailedRun, None) => {}
                (MultiNodes::InJobNodes, failed) => {
                    let nodes = job_nodes_of(run.id)?;
                    for &node in &nodes {
                        self.count(node, false, start, end);
                    }
                    if let Some(f) = failed {
                        self.failed[f].0.nodes = nodes;
                    }
                }
            }
        }
        Ok(())
    }

    /// The exposure per node, the users, and the failed runs by end time
    /// with rank 0's node first (runs without nodes dropped).
    fn finish(
        mut self,
        conn: &Connection,
    ) -> Result<(HashMap<i64, Exposure>, UserStats, Vec<FailedRun>)> {
        self.count_multi_node_runs(&mut |id| db::job_nodes_of(conn, id))?;
        self.failed.sort_by_key(|(run, _)| (run.end, run.row_id));
        let rank = name_ranks(conn)?;
        let rank_of = |n: i64| {
            usize::try_from(n)
                .ok()
                .and_then(|i| rank.get(i).copied())
                .unwrap_or(u32::MAX)
        };
        let mut runs = Vec::with_capacity(self.failed.len());
        for (mut run, user) in self.failed {
            let user = &self.failed_users[user];
            if run.nodes.is_empty() {
                continue;
            }
            run.user = self.users.intern(&mut self.user_index, user);
            // Rank 0's node first (FailedRun::nodes); a swap, not a sort: a
            // month of large jobs has millions of node slots.
            if let Some(first) = (0..run.nodes.len()).min_by_key(|&i| rank_of(run.nodes[i])) {
                run.nodes.swap(0, first);
            }
            runs.push(run);
        }
        let exposure = self
            .per_node
            .into_iter()
            .enumerate()
            .filter(|(_, e)| e.jobs > 0)
            .map(|(n, e)| (n as i64, e))
            .collect();
        Ok((exposure, self.users, runs))
    }
}

/// `a == b` without a call to the C library's `memcmp`: user names are
/// short, and that call on every one of a million runs showed in profiles.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

fn entry<'a>(
    per: &'a mut HashMap<i64, NodeSignals>,
    names: &HashMap<i64, String>,
    node: i64,
) -> &'a mut NodeSignals {
    per.entry(node).or_insert_with(|| NodeSignals {
        node: names.get(&node).cloned().unwrap_or_default(),
        node_id: node,
        ..NodeSignals::default()
    })
}

/// Distinct job ids blamed on one node, by kind, the days they failed on,
/// and the runs with their evidence.
#[derive(Default)]
struct Blame {
    all: BTreeSet<i64>,
    single: BTreeSet<i64>,
    multi: BTreeSet<i64>,
    early: BTreeSet<i64>,
    days: BTreeSet<i64>,
    uncaught: BTreeSet<i64>,
    uncaught_days: BTreeSet<i64>,
    witnessed: BTreeSet<i64>,
    log: BTreeSet<i64>,
    log_days: BTreeSet<i64>,
    jobs: Vec<BlamedJob>,
}

/// Attributes every failed run that ended in `(t0, t1]` with
/// [`attribute::attribute_all`]: the one attribution of scoring, `lemon run`
/// and the reliability report. Reads only; `since` gives each node's start
/// of history (its last release). [`store_attributions`] keeps the result.
pub fn attribute_range(
    conn: &Connection,
    t0: i64,
    t1: i64,
    p: &AttributionParams,
    since: &(dyn Fn(i64) -> i64 + Sync),
) -> Result<Window> {
    window(conn, (t0, t1), t1, p, since, None)
}

/// The attribution's side of the pass over the runs: those that ended in
/// its window.
struct WindowRuns<'a, 'p> {
    pass: &'a mut WindowPass<'p>,
    t1: i64,
    /// Runs of this job name are left out (our validation jobs).
    skip_name: Option<&'a str>,
}

impl db::RunVisitor for WindowRuns<'_, '_> {
    fn expect(&mut self, runs: usize) {
        // At most this many multi-node runs: room made at once (room never
        // written costs no memory) rather than by doubling, which copies
        // the list each time below glibc's mmap threshold.
        self.pass.multi.reserve(runs);
    }

    fn visit(&mut self, row: &db::RunRow) -> Result<()> {
        let skipped = self.skip_name.is_some() && row.job_name == self.skip_name;
        if !skipped && row.end <= self.t1 {
            self.pass.add(row);
        }
        Ok(())
    }
}

/// Whoever else reads the runs in the attribution's pass, without the
/// runs it leaves out.
struct OtherRuns<'a> {
    each: &'a mut dyn db::RunVisitor,
    skip_name: Option<&'a str>,
}

impl db::RunVisitor for OtherRuns<'_> {
    fn expect(&mut self, runs: usize) {
        self.each.expect(runs);
    }

    fn visit(&mut self, row: &db::RunRow) -> Result<()> {
        if self.skip_name.is_some() && row.job_name == self.skip_name {
            return Ok(());
        }
        self.each.visit(row)
    }
}

/// [`attribute_range`] over `(t0, t1]`, handing every run that ended in
/// `(t0, read_until]` to `each` in the same pass over the runs: the
/// reliability report reads its runs there.
pub fn attribute_range_with(
    conn: &Connection,
    (t0, t1): (i64, i64),
    read_until: i64,
    p: &AttributionParams,
    since: &(dyn Fn(i64) -> i64 + Sync),
    each: &mut dyn db::RunVisitor,
) -> Result<Window> {
    window(conn, (t0, t1), read_until, p, since, Some(each))
}

/// [`attribute_range_with`], where `each` may be none.
fn window(
    conn: &Connection,
    (t0, t1): (i64, i64),
    read_until: i64,
    p: &AttributionParams,
    since: &(dyn Fn(i64) -> i64 + Sync),
    each: Option<&mut dyn db::RunVisitor>,
) -> Result<Window> {
    let mut pass = WindowPass::new(conn, t0, since)?;
    let skip_name = p.own_job_name.as_deref();
    let mut ours = WindowRuns {
        pass: &mut pass,
        t1,
        skip_name,
    };
    match each {
        // The two sides of the pass on two threads (a month of runs is
        // tenths of a second of each), from one read of the runs.
        Some(each) => db::scan_runs_twice(
            conn,
            t0,
            read_until.max(t1),
            &mut OtherRuns { each, skip_name },
            &mut ours,
        )?,
        None => db::scan_runs(conn, t0, t1, &mut ours)?,
    }
    // The evidence does not depend on the runs: it is read while another
    // thread counts the multi-node runs (tens of millions of node slots in
    // a month of large jobs), where none of those needs the database.
    let evidence = if pass.counts_without_db() {
        let (counted, evidence) = std::thread::scope(|s| {
            let counting = s.spawn(move || {
                pass.count_multi_node_runs(&mut |_| unreachable!("counts_without_db"))
                    .map(|()| pass)
            });
            let evidence = load_evidence(conn, t0, t1, !p.without_texts);
            let counted = counting.join().expect("the node-slot count panicked");
            (counted, evidence)
        });
        pass = counted?;
        evidence?
    } else {
        load_evidence(conn, t0, t1, !p.without_texts)?
    };
    let (exposure, mut users, mut runs) = pass.finish(conn)?;
    crate::attribute::job_log::attach(conn, t0, t1, &mut runs)?;
    crate::attribute::trace::attach(conn, t0, t1, &mut runs)?;
    users.add_failures(&runs);
    // Every run counts as at least an hour, as in the attribution's own
    // weighing: seconds-long runs must not make a node's exposure zero.
    let node_days: HashMap<i64, f64> = exposure
        .iter()
        .map(|(&n, e)| (n, e.node_days.max(f64::from(e.jobs) / 24.0)))
        .collect();
    let mut attributions = attribute::attribute_all(&runs, &evidence, &users, &node_days, p);
    crate::attribute::job_log::annotate(conn, &runs, &mut attributions)?;
    Ok(Window {
        runs,
        attributions,
        users,
        exposure,
        evidence,
    })
}

/// The attribution evidence for runs ending in `(t0, t1]`.
pub fn evidence(conn: &Connection, t0: i64, t1: i64) -> Result<Evidence> {
    load_evidence(conn, t0, t1, true)
}

/// Findings, node events of our checks and of Slurm, and failed task exits
/// around the window; `texts`: with each mark's [`Mark::what`] (only the
/// attribution's texts show it).
fn load_evidence(conn: &Connection, t0: i64, now: i64, texts: bool) -> Result<Evidence> {
    let (lo, hi) = (t0 - attribute::BEFORE_END_S, now + attribute::AFTER_END_S);
    let mut ev = Evidence::default();
    db::history::for_each_hard_finding(conn, lo, hi, |f| {
        let what = if texts {
            format!(
                "finding {} {}",
                f.code.unwrap_or("?"),
                f.entity.unwrap_or("")
            )
            .trim_end()
            .to_string()
        } else {
            String::new()
        };
        // The code's family (an MCE is found by the xid check's pass),
        // else the check's name.
        let category = match f.code.and_then(attribute::known_category) {
            Some(family) => Cow::Borrowed(family),
            None => Cow::Owned(f.check.unwrap_or("unknown").to_string()),
        };
        ev.findings.entry(f.node).or_default().push(Mark {
            at: f.at,
            what,
            category,
        });
    })?;
    for (node, at, state, why) in db::history::check_and_slurm_events(conn, lo, hi)? {
        if is_out_of_service(&state) {
            ev.events.entry(node).or_default().push(Mark {
                at,
                category: event_category(&why),
                what: format!("event {state}: {why}"),
            });
        }
    }
    // Milliseconds: tasks of one job often end within the same second.
    for (node, at_ms, job) in db::history::failed_task_exits(conn, lo, hi)? {
        // SPANK reports SLURM_JOB_ID, the raw id; `123_4` forms are not expected.
        if let Ok(raw) = job.trim().parse::<i64>() {
            ev.task_fails_ms.entry(raw).or_default().push((node, at_ms));
        }
    }
    ev.sort();
    Ok(ev)
}

/// The category of a node event's reason: from the code of ours
/// (`hc: XID_79 gpu3` is `xid`), `slurm` for Slurm's own.
fn event_category(why: &str) -> Cow<'static, str> {
    let parsed = reason::parse(why);
    match parsed.owner {
        ReasonOwner::HealthCheck => attribute::category_of_code(parsed.code.unwrap_or("")).into(),
        _ => attribute::SLURM_CATEGORY.into(),
    }
}

/// Each node id's place in the node list as Slurm's block distribution
/// places ranks: by name, `node9` before `node10`. Indexed by id (SQLite
/// row ids, dense from 1).
fn name_ranks(conn: &Connection) -> Result<Vec<u32>> {
    let mut by_name: Vec<(i64, String)> = db::node_names(conn)?.into_iter().collect();
    by_name.sort_by(|a, b| (a.1.len(), &a.1).cmp(&(b.1.len(), &b.1)));
    let top = by_name.iter().map(|(id, _)| *id).max().unwrap_or(0);
    let mut rank = vec![u32::MAX; usize::try_from(top).unwrap_or(0) + 1];
    for (place, (id, _)) in by_name.iter().enumerate() {
        if let Ok(i) = usize::try_from(*id) {
            rank[i] = place as u32;
        }
    }
    Ok(rank)
}

/// Keeps the attributions of a window in `attributions`, for later reports:
/// `lemon run` calls it under its lock; scoring and reports write nothing.
pub fn store_attributions(conn: &Connection, window: &Window, now: i64) -> Result<()> {
    let rows = window
        .runs
        .iter()
        .zip(&window.attributions)
        .map(|(run, a)| db::attributions::StoredAttribution {
            job: run.row_id,
            node: a.node,
            rule: a.rule.as_str(),
            category: &a.category,
            detail: &a.detail,
        });
    db::attributions::store(conn, rows, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest;
    use lemonade_spool::{Body, Record};
    use std::time::Duration;

    #[test]
    fn a_node_event_is_of_the_category_of_the_code_our_reason_names() {
        assert_eq!(event_category("hc: XID_79 gpu3"), "xid");
        assert_eq!(
            event_category("hc: ECC_VOLATILE_UNCORRECTED gpu1 reboot"),
            "ecc"
        );
        assert_eq!(
            event_category("  hc: MOUNT_HUNG /checkpoint; +1: XID_79 gpu0"),
            "mounts"
        );
        assert_eq!(event_category("hc:"), "unknown");
        assert_eq!(event_category("Not responding"), attribute::SLURM_CATEGORY);
        assert_eq!(
            event_category("lemon: 5 fails/28d"),
            attribute::SLURM_CATEGORY
        );
    }

    /// A failed task exit of `job` on `node`, at `at_ms` (None: an older
    /// node that sent only the seconds `at`).
    fn task_exit(node: &str, seq: u64, job: &str, at: i64, at_ms: Option<i64>) -> Record {
        Record {
            seq,
            epoch: "e1".into(),
            node: node.into(),
            at,
            body: Body::TaskExit {
                job_id: job.into(),
                step_id: "0".into(),
                task_id: 0,
                exit_code: None,
                signal: Some(9),
                at_ms,
            },
        }
    }

    #[test]
    fn our_own_validation_jobs_are_left_out_of_the_attribution() {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
        let jobs = "\
JobIDRaw|JobID|JobName|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|AllocTRES
11|11|lemonade-validate|n1|1|FAILED|2:0|0:0|1|15000|20000|5000|b|root|gres/gpu=8
12|12|train|n1|1|NODE_FAIL|0:0|0:0|1|15000|20100|5100|b|u|gres/gpu=8
";
        ingest::sacct::ingest_reader(&conn, jobs.as_bytes(), "jobs", 86_400).unwrap();
        let ids = |p: &AttributionParams| {
            let w = attribute_range(&conn, 10_000, 30_000, p, &|_| 0).unwrap();
            w.runs.iter().map(|r| r.job_id_raw).collect::<Vec<_>>()
        };
        assert_eq!(ids(&AttributionParams::default()), [11, 12]);
        let ours = AttributionParams {
            own_job_name: Some("lemonade-validate".into()),
            ..AttributionParams::default()
        };
        assert_eq!(ids(&ours), [12]);
    }

    #[test]
    fn first_task_exit_is_decided_in_milliseconds_and_old_records_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
        // Jobs 11 and 12 on n[1-2] fail at 20000.
        let jobs = "\
11|11|n[1-2]|2|FAILED|1:0|0:0|1|15000|20000|5000|b|u|gres/gpu=16
12|12|n[1-2]|2|FAILED|1:0|0:0|1|15000|20000|5000|b|u|gres/gpu=16
";
        ingest::sacct::ingest_reader(&conn, jobs.as_bytes(), "jobs", 86_400).unwrap();
        let mut nodes = db::NodeIds::load(&conn).unwrap();
        // Job 11: n2's task failed 300 ms before n1's, in the same second.
        // Job 12: a node without milliseconds; n2 a second earlier than n1.
        ingest::spool::ingest_records(
            &mut conn,
            &mut nodes,
            &[
                task_exit("n1", 1, "11", 19_000, Some(19_000_400)),
                task_exit("n1", 2, "12", 19_501, None),
            ],
        )
        .unwrap();
        ingest::spool::ingest_records(
            &mut conn,
            &mut nodes,
            &[
                task_exit("n2", 1, "11", 19_000, Some(19_000_100)),
                task_exit("n2", 2, "12", 19_500, None),
            ],
        )
        .unwrap();
        let ids: HashMap<String, i64> = db::node_names(&conn)
            .unwrap()
            .into_iter()
            .map(|(id, name)| (name, id))
            .collect();
        let (n1, n2) = (ids["n1"], ids["n2"]);
        assert!(n2 > n1, "n2 has the higher node id");

        let ev = evidence(&conn, 10_000, 30_000).unwrap();
        assert_eq!(ev.task_fails_ms[&11], [(n2, 19_000_100), (n1, 19_000_400)]);
        assert_eq!(ev.task_fails_ms[&12], [(n2, 19_500_000), (n1, 19_501_000)]);

        let w =
            attribute_range(&conn, 10_000, 30_000, &AttributionParams::default(), &|_| 0).unwrap();
        // Both are weighed on n2 alone; with no hardware record there, and
        // nothing known of the user, they are the user's.
        for a in &w.attributions {
            assert_eq!((a.node, a.rule), (None, Rule::UserExit), "{a:?}");
            assert!(
                a.detail
                    .starts_with("first failing task of 2 nodes on this node"),
                "{}",
                a.detail
            );
        }
    }
}
