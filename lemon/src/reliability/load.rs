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
use crate::attribute::{AttributionParams, AFTER_END_S, BEFORE_END_S};
use crate::decide::Scores;
use crate::signals::Signal;
use chrono::DateTime;
use lemonade_sql::rusqlite::{params, Connection};
use std::collections::HashMap;

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

struct Row {
    id: i64,
    raw: i64,
    job_id: String,
    submit: Option<i64>,
    start: Option<i64>,
    end: i64,
    state: String,
    partition: Option<String>,
    nnodes: i64,
    gpus: Option<i64>,
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
    let mut stmt = conn.prepare(
        "SELECT id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition, nnodes, gpus
         FROM jobs WHERE end_time >= ?1 AND end_time < ?2",
    )?;
    let mut rows = Vec::new();
    let mut last_end: HashMap<i64, i64> = HashMap::new();
    let mut q = stmt.query(params![since, until + REQUEUE_LOOKAHEAD_S])?;
    while let Some(r) = q.next()? {
        let row = Row {
            id: r.get(0)?,
            raw: r.get(1)?,
            job_id: r.get(2)?,
            submit: r.get(3)?,
            start: r.get(4)?,
            end: r.get(5)?,
            state: r.get(6)?,
            partition: r.get(7)?,
            nnodes: r.get(8)?,
            gpus: r.get(9)?,
        };
        let e = last_end.entry(row.raw).or_insert(row.end);
        *e = (*e).max(row.end);
        if row.end < until {
            rows.push(row);
        }
    }
    let (gpn, source) = match gpus_per_node {
        Some(g) => (g.max(1), "given".to_string()),
        None => infer_gpus_per_node(&rows),
    };
    let categories = failure_categories(conn, since, until, attribution)?;
    let jobs = rows
        .into_iter()
        .map(|row| {
            let state = JobState::from_sacct(&row.state);
            let (category, co_categories) = categories.get(&row.id).cloned().unwrap_or_default();
            let nodes = row.nnodes.max(0) as u32;
            JobRecord {
                id: row.job_id,
                state,
                submit: row.submit.map(time),
                start: row.start.map(time),
                end: time(row.end),
                gpus: row
                    .gpus
                    .map_or(nodes.saturating_mul(gpn), |g| g.max(0) as u32),
                nodes,
                category,
                co_categories,
                requeued: state == JobState::Requeued || last_end[&row.raw] > row.end,
                partition: row.partition.unwrap_or_default(),
            }
        })
        .collect();
    Ok(LoadedJobs {
        jobs,
        gpus_per_node: gpn,
        gpus_per_node_source: source,
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

fn infer_gpus_per_node(rows: &[Row]) -> (u32, String) {
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
type Categories = HashMap<i64, (Option<String>, Vec<String>)>;

/// The category of every failed run of `[since, until)` that the
/// attribution blames on a node, with the other checks of its window.
fn failure_categories(
    conn: &Connection,
    since: i64,
    until: i64,
    attribution: &AttributionParams,
) -> Result<Categories, ReliabilityError> {
    // `attribute_range` takes `(t0, t1]`; times are whole seconds.
    let window =
        crate::signals::attribute_range(conn, since - 1, until - 1, attribution, &|_| i64::MIN)
            .map_err(|e| match e {
                crate::error::LemonError::Sqlite(e) => ReliabilityError::Sqlite(e),
                other => ReliabilityError::InvalidParameter {
                    name: "lemon.db",
                    why: other.to_string(),
                },
            })?;
    let mut co = co_occurring(conn, since, until)?;
    Ok(window
        .runs
        .iter()
        .zip(&window.attributions)
        .filter(|(_, a)| a.is_hardware())
        .map(|(run, a)| {
            let mut others = co.remove(&run.row_id).unwrap_or_default();
            others.retain(|c| *c != a.category);
            (run.row_id, (Some(a.category.clone()), others))
        })
        .collect())
}

/// The checks that fired in each failed run's window, by run. Findings are
/// few and a window is short, so each finding asks which failed runs ended
/// near it had its node (one primary-key probe each); `CROSS JOIN` pins
/// that order: without statistics SQLite would start from the runs.
fn co_occurring(
    conn: &Connection,
    since: i64,
    until: i64,
) -> Result<HashMap<i64, Vec<String>>, ReliabilityError> {
    let mut stmt = conn.prepare(
        "SELECT j.id, h.check_name, h.code
         FROM health h CROSS JOIN jobs j
         WHERE h.kind = 'finding' AND h.severity IN ('drain', 'down') AND h.check_name IS NOT NULL
           AND h.at >= ?1 AND h.at <= ?2
           AND j.state IN ('FAILED', 'NODE_FAIL')
           AND j.end_time >= h.at - ?5 AND j.end_time <= h.at + ?6
           AND j.end_time >= ?3 AND j.end_time < ?4
           AND (j.node = h.node
                OR EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job = j.id AND jn.node = h.node))",
    )?;
    let mut hits: HashMap<i64, Vec<String>> = HashMap::new();
    let mut q = stmt.query(params![
        since - BEFORE_END_S,
        until + AFTER_END_S,
        since,
        until,
        AFTER_END_S,
        BEFORE_END_S
    ])?;
    while let Some(r) = q.next()? {
        let (check, code): (String, Option<String>) = (r.get(1)?, r.get(2)?);
        // As the attribution names it: the code's family, else the check.
        let category = code
            .as_deref()
            .and_then(crate::attribute::known_category)
            .map_or(check, String::from);
        hits.entry(r.get(0)?).or_default().push(category);
    }
    for v in hits.values_mut() {
        v.sort();
        v.dedup();
    }
    Ok(hits)
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
