//! Reads the report's inputs from lemon.db: the runs of the range with
//! their attributed check categories, the fleet, the lemon list, the
//! signals of the latest scoring, and the nodes' state changes.
//!
//! A failed run's category comes from the one attribution of lemon
//! ([`crate::attribute`], through [`crate::signals::attribute_range`]):
//! a run blamed on a node is a hardware failure (so is `among_nodes`,
//! category `multi_node`: [`crate::attribute::Attribution::is_hardware`]),
//! its category the check of the finding or the code of the `hc:` event
//! that explains it (`slurm` for Slurm's own events, `node_fail`,
//! `signal`, `task_exit`). Every other
//! check that fired in its window is a co-occurring category. It is
//! recomputed for the report's range rather than read from the
//! `attributions` table, which only covers the last `lemon run`.

use super::remediation::StateChangeRecord;
use super::{
    JobRecord, JobState, LemonEntry, ReliabilityError, ReportRun, SignalValues, TimeRange,
};
use crate::attribute::{AttributionParams, Evidence, FailedRun, AFTER_END_S, BEFORE_END_S};
use crate::db::{self, RunRow, RunVisitor};
use crate::decide::Scores;
use crate::fast_hash::FastMap;
use crate::signals::Signal;
use chrono::DateTime;
use lemonade_sql::rusqlite::Connection;
use std::collections::HashMap;

/// GPUs per node when neither config nor the history tells.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// How far past the range a later run of the same job is looked for, to
/// know that a run was requeued.
const REQUEUE_LOOKAHEAD_S: i64 = 2 * 86_400;

/// The runs of `range` and the GPUs per node used for runs without
/// `gres/gpu` in AllocTRES: [`JobRecord`]s ([`load_jobs`]) or the report's
/// compact [`ReportRun`]s ([`load_runs`]).
#[derive(Debug, Clone)]
pub struct LoadedJobs<J = JobRecord> {
    pub jobs: Vec<J>,
    pub gpus_per_node: u32,
    /// Where `gpus_per_node` came from.
    pub gpus_per_node_source: String,
}

/// What a run's record still needs once every run is read: the GPUs per
/// node (for runs without `gres/gpu`) and whether a later run of the job
/// ends within [`REQUEUE_LOOKAHEAD_S`].
struct Pending {
    row_id: i64,
    raw: i64,
    end: i64,
    /// AllocTRES had `gres/gpu`.
    gpus_known: bool,
}

/// What the pass over the runs gives the report: the records, what each
/// still needs (same order), the runs of the lookahead, and the GPUs per
/// node of the runs that tell.
struct Runs<J> {
    jobs: Vec<J>,
    pending: Vec<Pending>,
    /// (raw job id, end) of the runs read past the range.
    lookahead: Vec<(i64, i64)>,
    /// Runs by their `gres/gpu` ÷ nodes, where that is whole.
    per_node_gpus: FastMap<i64, u64>,
}

impl<J> Default for Runs<J> {
    fn default() -> Self {
        Runs {
            jobs: Vec::new(),
            pending: Vec::new(),
            lookahead: Vec::new(),
            per_node_gpus: FastMap::default(),
        }
    }
}

/// A run of the report as [`load`] builds it from a row, then completes.
trait Record: Sized {
    /// `gpus`: of AllocTRES, `None` where it has no `gres/gpu`.
    fn from_row(r: &RunRow, state: JobState, gpus: Option<i64>, nnodes: i64) -> Self;
    fn set_gpus(&mut self, gpus: u32);
    fn nodes(&self) -> u32;
    fn set_requeued(&mut self);
    fn set_attributed(&mut self, category: String, co_categories: Vec<String>);
}

impl Record for JobRecord {
    fn from_row(r: &RunRow, state: JobState, gpus: Option<i64>, nnodes: i64) -> Self {
        JobRecord {
            id: r.job_id.to_string(),
            state,
            submit: r.submit.map(time),
            start: r.start.map(time),
            end: time(r.end),
            // Runs without `gres/gpu` get theirs once the GPUs per node are known.
            gpus: gpus.map_or(0, |g| g.max(0) as u32),
            nodes: nnodes.max(0) as u32,
            // Failed runs get theirs once the attribution is done.
            category: None,
            co_categories: Vec::new(),
            requeued: state == JobState::Requeued,
            partition: r.partition.unwrap_or_default().to_string(),
        }
    }
    fn set_gpus(&mut self, gpus: u32) {
        self.gpus = gpus;
    }
    fn nodes(&self) -> u32 {
        self.nodes
    }
    fn set_requeued(&mut self) {
        self.requeued = true;
    }
    fn set_attributed(&mut self, category: String, co_categories: Vec<String>) {
        self.category = Some(category);
        self.co_categories = co_categories;
    }
}

impl Record for ReportRun {
    fn from_row(r: &RunRow, state: JobState, gpus: Option<i64>, nnodes: i64) -> Self {
        ReportRun::new(
            r.end,
            r.start,
            r.submit,
            gpus.map_or(0, |g| g.max(0) as u32),
            nnodes.max(0) as u32,
            state,
        )
    }
    fn set_gpus(&mut self, gpus: u32) {
        ReportRun::set_gpus(self, gpus);
    }
    fn nodes(&self) -> u32 {
        super::Run::nodes(self)
    }
    fn set_requeued(&mut self) {
        ReportRun::set_requeued(self);
    }
    fn set_attributed(&mut self, category: String, co_categories: Vec<String>) {
        self.attribute(category, co_categories);
    }
}

fn time(t: i64) -> chrono::DateTime<chrono::Utc> {
    DateTime::from_timestamp(t, 0).unwrap_or_default()
}

/// Loads the runs that ended inside `range` as [`JobRecord`]s. `gpus_per_node`: from config
/// or the command line; `None` infers it from the history (the most common
/// GPUs ÷ nodes of the runs whose AllocTRES has `gres/gpu`).
pub fn load_jobs(
    conn: &Connection,
    range: TimeRange,
    gpus_per_node: Option<u32>,
    attribution: &AttributionParams,
) -> Result<LoadedJobs, ReliabilityError> {
    load(conn, range, gpus_per_node, attribution)
}

/// Loads the runs that ended inside `range` as the report's compact
/// [`ReportRun`]s, which give the same report as [`load_jobs`]'s records
/// for a fraction of the memory and time (`lemon report --reliability`).
pub fn load_runs(
    conn: &Connection,
    range: TimeRange,
    gpus_per_node: Option<u32>,
    attribution: &AttributionParams,
) -> Result<LoadedJobs<ReportRun>, ReliabilityError> {
    load(conn, range, gpus_per_node, attribution)
}

/// The runs are read in the attribution's own pass over them
/// ([`crate::signals::attribute_range_with`]): one read of a million runs
/// instead of two.
fn load<J: Record>(
    conn: &Connection,
    range: TimeRange,
    gpus_per_node: Option<u32>,
    attribution: &AttributionParams,
) -> Result<LoadedJobs<J>, ReliabilityError> {
    let (since, until) = (range.since.timestamp(), range.until.timestamp());
    let mut runs = Runs::<J>::default();
    // The report counts verdicts and never shows why.
    let attribution = &AttributionParams {
        without_texts: true,
        ..attribution.clone()
    };
    // `attribute_range_with` takes `(t0, t1]`; times are whole seconds.
    let window = crate::signals::attribute_range_with(
        conn,
        (since - 1, until - 1),
        until - 1 + REQUEUE_LOOKAHEAD_S,
        attribution,
        &|_| i64::MIN,
        &mut ReportRuns {
            runs: &mut runs,
            until,
        },
    )
    .map_err(lemon_error)?;
    let Runs {
        mut jobs,
        pending,
        lookahead,
        per_node_gpus,
    } = runs;
    // Two independent halves on two threads: the failed runs' categories
    // (from the attribution) and the requeue table (from the runs).
    let (categories, last_end) = std::thread::scope(|s| {
        let categories = s.spawn(|| failure_categories(&window));
        let last_end = LastEnds::new(
            pending
                .iter()
                .map(|p| (p.raw, p.end))
                .chain(lookahead.iter().copied()),
        );
        let categories = categories.join().expect("the categories' thread panicked");
        (categories, last_end)
    });
    let (gpn, source) = match gpus_per_node {
        Some(g) => (g.max(1), "given".to_string()),
        None => infer_gpus_per_node(per_node_gpus),
    };
    complete(&mut jobs, &pending, &last_end, categories, gpn);
    // The attribution's window (a hundred thousand failed runs and their
    // verdicts) is freed on the other thread while the records are put in
    // order, which seldom allocates: freed beside the merge above, which
    // boxes every hardware failure's categories, the two threads took
    // turns at the allocator's lock (57 ms, against 19 ms and 24 ms apart).
    let jobs = std::thread::scope(|s| {
        s.spawn(move || drop(window));
        in_end_order(jobs, &pending)
    });
    Ok(LoadedJobs {
        jobs,
        gpus_per_node: gpn,
        gpus_per_node_source: source,
    })
}

/// Gives each record what the whole pass was needed for: the GPUs of a
/// run without `gres/gpu`, whether a later run requeued it, and a failed
/// run's categories (`categories` and `pending` are both in row id order:
/// a merge, not a lookup per run).
fn complete<J: Record>(
    jobs: &mut [J],
    pending: &[Pending],
    last_end: &LastEnds,
    categories: Categories,
    gpn: u32,
) {
    let mut categories = categories.into_iter().peekable();
    for (job, p) in jobs.iter_mut().zip(pending) {
        if !p.gpus_known {
            job.set_gpus(job.nodes().saturating_mul(gpn));
        }
        if last_end.ends_after(p.raw, p.end) {
            job.set_requeued();
        }
        while categories.next_if(|c| c.0 < p.row_id).is_some() {}
        if let Some((_, category, co)) = categories.next_if(|c| c.0 == p.row_id) {
            job.set_attributed(category, co);
        }
    }
}

/// The records by end time, then raw job id (the order of the `jobs_run`
/// index, which the report's sums follow); the pass reads them by row id,
/// which follows end times but for runs that end in the same second.
/// Where the ends are in order already, only each second's runs are put
/// in order, not a million runs at once.
fn in_end_order<J>(mut jobs: Vec<J>, pending: &[Pending]) -> Vec<J> {
    if !pending.windows(2).all(|w| w[0].end <= w[1].end) {
        reorder(&mut jobs, pending);
        return jobs;
    }
    let mut start = 0;
    while start < pending.len() {
        let end = pending[start].end;
        let len = pending[start..].iter().take_while(|p| p.end == end).count();
        if len > 1 {
            reorder(&mut jobs[start..start + len], &pending[start..start + len]);
        }
        start += len;
    }
    jobs
}

/// Up to this many runs are put in order by insertion.
const FEW: usize = 16;

/// Puts `jobs` (one per `pending`) in the order of (end, raw job id),
/// stably.
fn reorder<J>(jobs: &mut [J], pending: &[Pending]) {
    let key = |p: &Pending| (p.end, p.raw);
    if pending.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        return;
    }
    if jobs.len() <= FEW {
        // One second's runs (2 to 7 in a month of a million): an insertion
        // sort, stable and allocation-free, where a sort and two lists per
        // second cost more than the rest of the ordering.
        let mut keys = [(0, 0); FEW];
        for (k, p) in keys.iter_mut().zip(pending) {
            *k = key(p);
        }
        for i in 1..jobs.len() {
            let mut j = i;
            while j > 0 && keys[j - 1] > keys[j] {
                keys.swap(j - 1, j);
                jobs.swap(j - 1, j);
                j -= 1;
            }
        }
        return;
    }
    let mut order: Vec<((i64, i64), usize)> = pending
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.end, p.raw), i))
        .collect();
    // Stable, so it finds the runs that are in order already.
    order.sort_by_key(|&(key, _)| key);
    // Puts the record from `source[to]` at `to`, one cycle at a time.
    let mut source: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    for start in 0..source.len() {
        let mut to = start;
        while source[to] != usize::MAX {
            let from = source[to];
            source[to] = usize::MAX;
            if from == start {
                break;
            }
            jobs.swap(to, from);
            to = from;
        }
    }
}

/// The last end of each raw job id read more than once: a later run
/// means the job was requeued. Slurm numbers jobs in order, so the ids of
/// a range's runs mostly fill a span not much wider than their count: two
/// bits per id then (seen, seen again), which stay in cache where a
/// million ends looked up in id order did not; a map where a few old ids
/// widen the span.
struct LastEnds {
    first: i64,
    /// Per id from `first`, packed 64 to a word; empty: no table.
    seen: Vec<u64>,
    again: Vec<u64>,
    /// The last end of every id read more than once (of every id
    /// without a table).
    repeated: FastMap<i64, i64>,
}

impl LastEnds {
    fn new(ends: impl Iterator<Item = (i64, i64)> + Clone) -> LastEnds {
        let (mut first, mut last, mut len) = (i64::MAX, i64::MIN, 0usize);
        for (raw, _) in ends.clone() {
            (first, last, len) = (first.min(raw), last.max(raw), len + 1);
        }
        if len == 0 {
            (first, last) = (0, 0);
        }
        let span = usize::try_from(last.saturating_sub(first)).unwrap_or(usize::MAX);
        let mut table = LastEnds {
            first,
            seen: Vec::new(),
            again: Vec::new(),
            repeated: FastMap::default(),
        };
        if span < len.saturating_mul(4).max(1024) {
            table.seen = vec![0; span / 64 + 1];
            table.again = vec![0; span / 64 + 1];
            for (raw, _) in ends.clone() {
                let (word, bit) = table.bit(raw);
                if table.seen[word] & bit != 0 {
                    table.again[word] |= bit;
                }
                table.seen[word] |= bit;
            }
        }
        for (raw, end) in ends {
            if table.read_again(raw) {
                let e = table.repeated.entry(raw).or_insert(end);
                *e = (*e).max(end);
            }
        }
        table
    }

    /// The word and bit of `raw` in the table (which holds it).
    fn bit(&self, raw: i64) -> (usize, u64) {
        let i = (raw - self.first) as usize;
        (i / 64, 1 << (i % 64))
    }

    /// Whether `raw` may have more than one run (always, without a table).
    fn read_again(&self, raw: i64) -> bool {
        if self.again.is_empty() {
            return true;
        }
        let (word, bit) = self.bit(raw);
        self.again.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Whether a run of `raw` (one of those read) ends after `end`.
    fn ends_after(&self, raw: i64, end: i64) -> bool {
        self.read_again(raw) && self.repeated.get(&raw).is_some_and(|&last| last > end)
    }
}

/// The report's side of the pass over the runs: the runs that end
/// before `until` become records.
struct ReportRuns<'a, J> {
    runs: &'a mut Runs<J>,
    until: i64,
}

impl<J: Record> RunVisitor for ReportRuns<'_, J> {
    fn expect(&mut self, runs: usize) {
        self.runs.jobs.reserve(runs);
        self.runs.pending.reserve(runs);
    }

    fn visit(&mut self, run: &RunRow) -> crate::error::Result<()> {
        self.runs.add(run, self.until);
        Ok(())
    }
}

impl<J: Record> Runs<J> {
    /// Takes one run the pass read: its record when it ended before
    /// `until`, and its end for the requeue lookahead either way. Records
    /// are built as the rows come: a million intermediate rows cost a
    /// third of a second.
    fn add(&mut self, r: &RunRow, until: i64) {
        let raw = r.job_id_raw;
        if r.end >= until {
            self.lookahead.push((raw, r.end));
            return;
        }
        let (nnodes, gpus) = (r.nnodes, r.gpus);
        if let Some(g) = gpus {
            if nnodes > 0 && g > 0 && g % nnodes == 0 {
                *self.per_node_gpus.entry(g / nnodes).or_default() += 1;
            }
        }
        let state = JobState::from_sacct(r.state);
        self.jobs.push(J::from_row(r, state, gpus, nnodes));
        self.pending.push(Pending {
            row_id: r.id,
            raw,
            end: r.end,
            gpus_known: gpus.is_some(),
        });
    }
}

/// The nodes' state changes in the range, from their spool exports.
pub fn state_changes(
    conn: &Connection,
    range: TimeRange,
) -> Result<Vec<StateChangeRecord>, ReliabilityError> {
    let rows =
        db::reliability::state_changes(conn, range.since.timestamp(), range.until.timestamp())?;
    Ok(rows
        .into_iter()
        .map(|r| {
            StateChangeRecord::from_spool(
                r.node,
                time(r.at),
                &r.code.unwrap_or_default(),
                r.detail.unwrap_or_default(),
            )
        })
        .collect())
}

/// The most common GPUs per node of `counts` (runs by `gres/gpu` ÷ nodes).
fn infer_gpus_per_node(counts: FastMap<i64, u64>) -> (u32, String) {
    match counts.into_iter().max_by_key(|&(g, n)| (n, g)) {
        Some((g, n)) => (
            g as u32,
            format!("inferred from {n} runs with gres/gpu in AllocTRES"),
        ),
        None => (
            DEFAULT_GPUS_PER_NODE,
            format!("default {DEFAULT_GPUS_PER_NODE}: no gres/gpu in the history"),
        ),
    }
}

/// Category and co-occurring categories of the failed runs attributed to
/// hardware, by `jobs.id`, in its order.
type Categories = Vec<(i64, String, Vec<String>)>;

/// The category of every failed run of the window that the attribution
/// blames on a node, with the other checks of its window.
fn failure_categories(window: &crate::signals::Window) -> Categories {
    let mut co = CoOccurring::new(&window.evidence);
    let mut categories: Categories = window
        .runs
        .iter()
        .zip(&window.attributions)
        .filter(|(_, a)| a.is_hardware())
        .map(|(run, a)| {
            let mut others = co.of(run);
            others.retain(|c| *c != a.category);
            (run.row_id, a.category.to_string(), others)
        })
        .collect();
    categories.sort_unstable_by_key(|c| c.0);
    categories
}

fn lemon_error(e: crate::error::LemonError) -> ReliabilityError {
    match e {
        crate::error::LemonError::Sqlite(e) => ReliabilityError::Sqlite(e),
        other => ReliabilityError::InvalidParameter {
            name: "lemon.db",
            why: other.to_string(),
        },
    }
}

/// The checks that fired on a failed run's nodes in its attribution
/// window, named as the attribution names them (the code's family, else
/// the check), from the evidence the attribution itself loaded.
///
/// A month of large jobs has millions of (run, node) pairs but only a few
/// dozen findings fleet-wide in any one window, so each run marks its
/// nodes and then looks at the findings of its window (not at every
/// node's findings, nor a join in SQL).
struct CoOccurring<'a> {
    /// Every finding, by time: (at, node, category).
    findings: Vec<(i64, usize, &'a str)>,
    /// `marked[node]` is the number of the run that marked it last.
    marked: Vec<usize>,
    runs: usize,
}

impl<'a> CoOccurring<'a> {
    fn new(evidence: &'a Evidence) -> Self {
        let mut findings: Vec<(i64, usize, &str)> = evidence
            .findings
            .iter()
            .filter_map(|(&node, marks)| Some((usize::try_from(node).ok()?, marks)))
            .flat_map(|(node, marks)| marks.iter().map(move |m| (m.at, node, m.category.as_ref())))
            .collect();
        findings.sort_unstable();
        let nodes = findings.iter().map(|f| f.1 + 1).max().unwrap_or(0);
        CoOccurring {
            findings,
            marked: vec![0; nodes],
            runs: 0,
        }
    }

    /// The categories around `run`, sorted and without repeats.
    fn of(&mut self, run: &FailedRun) -> Vec<String> {
        let (lo, hi) = (run.end - BEFORE_END_S, run.end + AFTER_END_S);
        let first = self.findings.partition_point(|f| f.0 < lo);
        let around = &self.findings[first..];
        // Most runs have no finding around them: their nodes (hundreds, for
        // a large job) need no marking.
        if around.first().is_none_or(|f| f.0 > hi) {
            return Vec::new();
        }
        self.runs += 1;
        for &node in &run.nodes {
            if let Some(m) = usize::try_from(node)
                .ok()
                .and_then(|n| self.marked.get_mut(n))
            {
                *m = self.runs;
            }
        }
        // Named first, owned once each: a window holds the same few
        // categories many times over.
        let mut found: Vec<&str> = around
            .iter()
            .take_while(|f| f.0 <= hi)
            .filter(|f| self.marked[f.1] == self.runs)
            .map(|f| f.2)
            .collect();
        found.sort_unstable();
        found.dedup();
        found.into_iter().map(String::from).collect()
    }
}

/// When lemon.db's history begins: the earliest start or end of a run
/// that ends from `since` on, health record or node event, whichever comes
/// first; `None` when it holds none. A report must not claim the weeks
/// before a site installed Lemonade.
pub fn first_record(conn: &Connection, since: i64) -> Result<Option<i64>, ReliabilityError> {
    Ok(db::reliability::first_record(conn, since)?)
}

/// Nodes known to lemon.db (every node seen in any history).
pub fn fleet_nodes(conn: &Connection) -> Result<u32, ReliabilityError> {
    Ok(db::reliability::node_count(conn)? as u32)
}

/// The current lemon list: nodes whose latest real (not dry-run) decision
/// drained them, not followed by a release.
pub fn current_lemons(conn: &Connection) -> Result<Vec<LemonEntry>, ReliabilityError> {
    let mut last: HashMap<String, (i64, String, String)> = HashMap::new();
    for (node, at, action, reason) in db::reliability::drains_and_releases(conn)? {
        last.insert(node, (at, action, reason));
    }
    let mut lemons: Vec<LemonEntry> = last
        .into_iter()
        .filter(|(_, (_, action, _))| action == "drained")
        .map(|(node, (at, _, reason))| LemonEntry {
            node,
            since: Some(time(at)),
            reason,
        })
        .collect();
    lemons.sort_by(|a, b| a.since.cmp(&b.since).then(a.node.cmp(&b.node)));
    Ok(lemons)
}

/// Every signal's values over the fleet and its threshold, from a scoring.
pub fn signals_from_scores(scores: &Scores) -> Vec<SignalValues> {
    Signal::ALL
        .iter()
        .map(|&name| {
            let t = scores.thresholds.get(name);
            SignalValues {
                name: name.to_string(),
                threshold: t.is_finite().then_some(t),
                values: scores
                    .verdicts
                    .iter()
                    .map(|v| v.signals.get(name))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(raw: i64, end: i64) -> Pending {
        Pending {
            row_id: 0,
            raw,
            end,
            gpus_known: true,
        }
    }

    #[test]
    fn a_run_is_requeued_only_when_a_run_of_its_job_ends_later() {
        // Dense ids, then ids too far apart for a table.
        for runs in [
            vec![(5, 100), (6, 100), (5, 300), (7, 200), (7, 200)],
            vec![(5, 100), (6_000_000, 100), (5, 300), (7, 200), (7, 200)],
        ] {
            let ends = LastEnds::new(runs.iter().copied());
            assert!(ends.ends_after(5, 100));
            assert!(!ends.ends_after(5, 300));
            assert!(!ends.ends_after(runs[1].0, 100));
            // Two runs of one job that end in the same second.
            assert!(!ends.ends_after(7, 200));
            assert!(!ends.ends_after(8, 0), "a job never read");
        }
    }

    #[test]
    fn a_second_of_few_runs_and_one_of_many_are_put_in_the_same_stable_order() {
        // FEW or fewer go by insertion, more through the sort: both stable.
        for len in [2, 7, FEW, FEW + 1, 40] {
            let pending: Vec<Pending> = (0..len as i64)
                .map(|i| pending((i * 7) % 5, 100 + (i * 3) % 2))
                .collect();
            let mut jobs: Vec<usize> = (0..len).collect();
            reorder(&mut jobs, &pending);
            let mut expected: Vec<usize> = (0..len).collect();
            expected.sort_by_key(|&i| (pending[i].end, pending[i].raw));
            assert_eq!(jobs, expected, "{len} runs");
        }
    }

    #[test]
    fn records_end_up_by_end_then_job_id_whether_or_not_the_ends_were_in_order() {
        for ends in [[10, 10, 10, 20, 20], [20, 10, 10, 20, 10]] {
            let raws = [3, 1, 2, 9, 4];
            let pending: Vec<Pending> = raws
                .iter()
                .zip(ends)
                .map(|(&raw, end)| pending(raw, end))
                .collect();
            let jobs: Vec<(i64, i64)> = pending.iter().map(|p| (p.end, p.raw)).collect();
            let mut sorted = jobs.clone();
            sorted.sort();
            assert_eq!(in_end_order(jobs, &pending), sorted);
        }
    }
}
