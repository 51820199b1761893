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
use super::{JobRecord, JobState, LemonEntry, ReliabilityError, SignalValues, TimeRange};
use crate::attribute::{AttributionParams, Evidence, FailedRun, AFTER_END_S, BEFORE_END_S};
use crate::decide::Scores;
use crate::signals::Signal;
use chrono::DateTime;
use lemonade_sql::rusqlite::{params, Connection};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// GPUs per node when neither config nor the history tells.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// How far past the range a later run of the same job is looked for, to
/// know that a run was requeued.
const REQUEUE_LOOKAHEAD_S: i64 = 2 * 86_400;

/// The runs of `range` and the GPUs per node used for runs without
/// `gres/gpu` in AllocTRES.
#[derive(Debug, Clone)]
pub struct LoadedJobs {
    pub jobs: Vec<JobRecord>,
    pub gpus_per_node: u32,
    /// Where `gpus_per_node` came from.
    pub gpus_per_node_source: String,
}

/// What a run's record still needs once every run is read: the GPUs per
/// node (for runs without `gres/gpu`) and whether a later run of the job
/// ends within [`REQUEUE_LOOKAHEAD_S`].
struct Pending {
    raw: i64,
    end: i64,
    nnodes: i64,
    gpus: Option<i64>,
}

/// What [`runs_of`] reads: the records, what each still needs (same
/// order), and the last end of each raw job id.
struct Runs {
    jobs: Vec<JobRecord>,
    pending: Vec<Pending>,
    last_end: IdMap<i64>,
}

fn time(t: i64) -> chrono::DateTime<chrono::Utc> {
    DateTime::from_timestamp(t, 0).unwrap_or_default()
}

/// Loads the runs that ended inside `range`. `gpus_per_node`: from config
/// or the command line; `None` infers it from the history (the most common
/// GPUs ÷ nodes of the runs whose AllocTRES has `gres/gpu`).
pub fn load_jobs(
    conn: &Connection,
    range: TimeRange,
    gpus_per_node: Option<u32>,
    attribution: &AttributionParams,
) -> Result<LoadedJobs, ReliabilityError> {
    let (since, until) = (range.since.timestamp(), range.until.timestamp());
    let mut categories = failure_categories(conn, since, until, attribution)?;
    let Runs {
        mut jobs,
        pending,
        last_end,
    } = runs_of(conn, since, until, &mut categories)?;
    let (gpn, source) = match gpus_per_node {
        Some(g) => (g.max(1), "given".to_string()),
        None => infer_gpus_per_node(&pending),
    };
    for (job, p) in jobs.iter_mut().zip(&pending) {
        if p.gpus.is_none() {
            job.gpus = job.nodes.saturating_mul(gpn);
        }
        job.requeued |= last_end[&p.raw] > p.end;
    }
    Ok(LoadedJobs {
        jobs,
        gpus_per_node: gpn,
        gpus_per_node_source: source,
    })
}

/// A map keyed by row or job ids: SipHash cost the report a tenth of a
/// second over a million runs, and the keys come from our own database.
type IdMap<V> = HashMap<i64, V, BuildHasherDefault<IdHasher>>;

/// Hashes one integer key by a multiplication (Fibonacci hashing): odd, so
/// that consecutive ids never collide in the low bits.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_i64(&mut self, n: i64) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The records of every run of `[since, until)` in end-time order, with
/// their categories taken from `categories`, what each still needs, and
/// the last end of each raw job id up to [`REQUEUE_LOOKAHEAD_S`] later (a
/// later run means the job was requeued). Records are built as the rows
/// come: a million intermediate rows cost a third of a second.
fn runs_of(
    conn: &Connection,
    since: i64,
    until: i64,
    categories: &mut Categories,
) -> Result<Runs, ReliabilityError> {
    let (mut jobs, mut pending, mut last_end) = (Vec::new(), Vec::new(), IdMap::default());
    let mut stmt = conn.prepare(
        "SELECT id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition, nnodes, gpus
         FROM jobs WHERE end_time >= ?1 AND end_time < ?2",
    )?;
    let mut q = stmt.query(params![since, until + REQUEUE_LOOKAHEAD_S])?;
    while let Some(r) = q.next()? {
        let (raw, end): (i64, i64) = (r.get(1)?, r.get(5)?);
        let e = last_end.entry(raw).or_insert(end);
        *e = (*e).max(end);
        if end >= until {
            continue;
        }
        let p = Pending {
            raw,
            end,
            nnodes: r.get(8)?,
            gpus: r.get(9)?,
        };
        let id: i64 = r.get(0)?;
        let (category, co_categories) = categories.remove(&id).unwrap_or_default();
        let state = JobState::from_sacct(
            r.get_ref(6)?
                .as_str()
                .map_err(lemonade_sql::rusqlite::Error::from)?,
        );
        jobs.push(JobRecord {
            id: r.get(2)?,
            state,
            submit: r.get::<_, Option<i64>>(3)?.map(time),
            start: r.get::<_, Option<i64>>(4)?.map(time),
            end: time(end),
            // Runs without `gres/gpu` get theirs once the GPUs per node are known.
            gpus: p.gpus.map_or(0, |g| g.max(0) as u32),
            nodes: p.nnodes.max(0) as u32,
            category,
            co_categories,
            requeued: state == JobState::Requeued,
            partition: r.get::<_, Option<String>>(7)?.unwrap_or_default(),
        });
        pending.push(p);
    }
    Ok(Runs {
        jobs,
        pending,
        last_end,
    })
}

/// The nodes' state changes in the range, from their spool exports.
pub fn state_changes(
    conn: &Connection,
    range: TimeRange,
) -> Result<Vec<StateChangeRecord>, ReliabilityError> {
    let mut stmt = conn.prepare(
        "SELECT n.name, h.at, h.code, h.detail FROM health h JOIN nodes n ON n.id = h.node
         WHERE h.kind = 'state_change' AND h.at >= ?1 AND h.at < ?2 ORDER BY h.at",
    )?;
    let rows = stmt.query_map(
        params![range.since.timestamp(), range.until.timestamp()],
        |r| {
            let at: i64 = r.get(1)?;
            Ok(StateChangeRecord::from_spool(
                r.get(0)?,
                time(at),
                &r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            ))
        },
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn infer_gpus_per_node(rows: &[Pending]) -> (u32, String) {
    let mut counts: HashMap<i64, u64> = HashMap::new();
    for r in rows {
        if let Some(g) = r.gpus {
            if r.nnodes > 0 && g > 0 && g % r.nnodes == 0 {
                *counts.entry(g / r.nnodes).or_default() += 1;
            }
        }
    }
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

/// Category and co-occurring categories per failed run (by `jobs.id`).
type Categories = IdMap<(Option<String>, Vec<String>)>;

/// The category of every failed run of `[since, until)` that the
/// attribution blames on a node, with the other checks of its window.
fn failure_categories(
    conn: &Connection,
    since: i64,
    until: i64,
    attribution: &AttributionParams,
) -> Result<Categories, ReliabilityError> {
    // `attribute_range` takes `(t0, t1]`; times are whole seconds.
    let (t0, t1) = (since - 1, until - 1);
    let window = crate::signals::attribute_range(conn, t0, t1, attribution, &|_| i64::MIN)
        .map_err(lemon_error)?;
    let mut co = CoOccurring::new(&window.evidence);
    Ok(window
        .runs
        .iter()
        .zip(&window.attributions)
        .filter(|(_, a)| a.is_hardware())
        .map(|(run, a)| {
            let mut others = co.of(run);
            others.retain(|c| *c != a.category);
            (run.row_id, (Some(a.category.clone()), others))
        })
        .collect())
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
            .flat_map(|(node, marks)| marks.iter().map(move |m| (m.at, node, m.category.as_str())))
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
        self.runs += 1;
        for &node in &run.nodes {
            if let Some(m) = usize::try_from(node)
                .ok()
                .and_then(|n| self.marked.get_mut(n))
            {
                *m = self.runs;
            }
        }
        let (lo, hi) = (run.end - BEFORE_END_S, run.end + AFTER_END_S);
        let first = self.findings.partition_point(|f| f.0 < lo);
        let mut found: Vec<String> = self.findings[first..]
            .iter()
            .take_while(|f| f.0 <= hi)
            .filter(|f| self.marked[f.1] == self.runs)
            .map(|f| f.2.to_string())
            .collect();
        found.sort();
        found.dedup();
        found
    }
}

/// When lemon.db's history begins: the earliest start or end of a run
/// that ends from `since` on, health record or node event, whichever comes
/// first; `None` when it holds none. A report must not claim the weeks
/// before a site installed Lemonade.
pub fn first_record(conn: &Connection, since: i64) -> Result<Option<i64>, ReliabilityError> {
    Ok(conn.query_row(
        "SELECT min(t) FROM (
             SELECT min(coalesce(start_time, end_time)) AS t FROM jobs WHERE end_time >= ?1
             UNION ALL SELECT min(at) FROM health
             UNION ALL SELECT min(start_time) FROM node_events)",
        params![since],
        |r| r.get(0),
    )?)
}

/// Nodes known to lemon.db (every node seen in any history).
pub fn fleet_nodes(conn: &Connection) -> Result<u32, ReliabilityError> {
    let n: i64 = conn.query_row("SELECT count(*) FROM nodes", [], |r| r.get(0))?;
    Ok(n as u32)
}

/// The current lemon list: nodes whose latest real (not dry-run) decision
/// drained them, not followed by a release.
pub fn current_lemons(conn: &Connection) -> Result<Vec<LemonEntry>, ReliabilityError> {
    let mut stmt = conn.prepare(
        "SELECT n.name, d.at, d.action, d.reason FROM decisions d JOIN nodes n ON n.id = d.node
         WHERE d.dry_run = 0 AND d.action IN ('drained', 'released')
         ORDER BY d.at, d.id",
    )?;
    let mut last: HashMap<String, (i64, String, String)> = HashMap::new();
    let mut q = stmt.query([])?;
    while let Some(r) = q.next()? {
        last.insert(r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?));
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
