//! The per-node signals over the scoring window (the paper's seven, plus
//! `early_fails`), computed from lemon.db.
//!
//! A node's history before its last `lemon release` is forgiven: every signal
//! of that node starts at the later of the window start and the release.

use crate::attribute::{self, Attribution, Evidence, FailedRun, Mark, Rule};
use crate::db;
use crate::error::Result;
use crate::ingest::events::is_out_of_service;
use lemonade_sql::rusqlite::{params, Connection};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// The signal names, in report order.
pub const SIGNALS: [&str; 8] = [
    "excl_jobid_count",
    "xid_cnt",
    "tickets",
    "out_count",
    "multi_node_node_fails",
    "single_node_node_fails",
    "single_node_node_failure_rate",
    "early_fails",
];

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
    /// Distinct single-node jobs that failed on the node (user errors excepted).
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
}

impl NodeSignals {
    /// A signal's value by name.
    pub fn get(&self, name: &str) -> f64 {
        match name {
            "excl_jobid_count" => self.excl_jobid_count.into(),
            "xid_cnt" => self.xid_cnt.into(),
            "tickets" => self.tickets.into(),
            "out_count" => self.out_count.into(),
            "multi_node_node_fails" => self.multi_node_node_fails.into(),
            "single_node_node_fails" => self.single_node_node_fails.into(),
            "single_node_node_failure_rate" => self.single_node_node_failure_rate,
            "early_fails" => self.early_fails.into(),
            _ => 0.0,
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
    pub user_error_exit_codes: Vec<i32>,
    pub early_fail_s: i64,
}

/// Computes every node's signals for the window ending at `now`, and stores
/// the attribution of each failed run (for the report and the reliability report).
pub fn compute(conn: &Connection, p: &SignalParams, now: i64) -> Result<FleetSignals> {
    let t0 = now - i64::from(p.window_days) * 86_400;
    let names = db::node_names(conn)?;
    let releases = db::releases(conn)?;
    let since = |node: i64| releases.get(&node).map_or(t0, |&r| r.max(t0));

    let mut per: HashMap<i64, NodeSignals> = HashMap::new();

    // Exposure: runs per node.
    for (node, e) in exposure(conn, t0, now, &since)? {
        let s = entry(&mut per, &names, node);
        s.jobs = e.jobs;
        s.single_node_jobs = e.single_node_jobs;
        s.node_days = e.node_days;
    }

    let ev = load_evidence(conn, t0, now)?;

    // XIDs: distinct codes.
    {
        let mut stmt = conn.prepare_cached(
            "SELECT node, at, code FROM health
             WHERE kind = 'event' AND code LIKE 'XID%' AND at > ?1 AND at <= ?2",
        )?;
        let mut seen: HashMap<i64, BTreeSet<String>> = HashMap::new();
        let mut rows = stmt.query(params![t0, now])?;
        while let Some(r) = rows.next()? {
            let node: i64 = r.get(0)?;
            if r.get::<_, i64>(1)? > since(node) {
                seen.entry(node).or_default().insert(r.get(2)?);
            }
        }
        for (node, codes) in seen {
            entry(&mut per, &names, node).xid_cnt = codes.len() as u32;
        }
    }
    // Out of service, lemon's own drains excepted (they would feed back).
    {
        let mut stmt = conn.prepare_cached(
            "SELECT node, start_time, state FROM node_events
             WHERE start_time > ?1 AND start_time <= ?2 AND owner != 'lemon'",
        )?;
        let mut rows = stmt.query(params![t0, now])?;
        while let Some(r) = rows.next()? {
            let node: i64 = r.get(0)?;
            let state: String = r.get(2)?;
            if r.get::<_, i64>(1)? > since(node) && is_out_of_service(&state) {
                entry(&mut per, &names, node).out_count += 1;
            }
        }
    }
    for (sql, which) in [
        (
            "SELECT node, opened_at FROM tickets WHERE opened_at > ?1 AND opened_at <= ?2",
            0,
        ),
        (
            "SELECT node, first_seen FROM exclusions WHERE first_seen > ?1 AND first_seen <= ?2",
            1,
        ),
    ] {
        let mut stmt = conn.prepare_cached(sql)?;
        let mut rows = stmt.query(params![t0, now])?;
        while let Some(r) = rows.next()? {
            let node: i64 = r.get(0)?;
            if r.get::<_, i64>(1)? > since(node) {
                let s = entry(&mut per, &names, node);
                if which == 0 {
                    s.tickets += 1;
                } else {
                    s.excl_jobid_count += 1;
                }
            }
        }
    }

    // Failures and their attribution.
    let attributed = attribute_range(conn, t0, now, &p.user_error_exit_codes, &ev)?;
    let mut fleet = FleetSignals {
        window_start: t0,
        window_end: now,
        ..FleetSignals::default()
    };
    let mut blamed: HashMap<i64, Blame> = HashMap::new();
    let mut job_names: HashMap<i64, String> = HashMap::new();
    for (run, job_id, a) in &attributed {
        match (a.node, a.rule) {
            (Some(node), rule) if run.end > since(node) => {
                let b = blamed.entry(node).or_default();
                let new_job = b.all.insert(run.job_id_raw);
                if rule == Rule::SingleNode {
                    b.single.insert(run.job_id_raw);
                } else {
                    b.multi.insert(run.job_id_raw);
                }
                if run.start.is_some_and(|s| run.end - s < p.early_fail_s) {
                    b.early.insert(run.job_id_raw);
                }
                b.days.insert(run.end.div_euclid(86_400));
                job_names.insert(run.job_id_raw, job_id.clone());
                if new_job {
                    fleet.attributed_failures += 1;
                }
                entry(&mut per, &names, node);
            }
            (Some(_), _) => {}
            (None, Rule::UserError) => fleet.user_error_failures += 1,
            (None, _) => fleet.unattributed_failures += 1,
        }
    }
    for (node, b) in blamed {
        let s = entry(&mut per, &names, node);
        s.failing_jobs = b
            .all
            .iter()
            .map(|j| job_names.get(j).cloned().unwrap_or_else(|| j.to_string()))
            .collect();
        s.single_node_node_fails = b.single.len() as u32;
        s.multi_node_node_fails = b.multi.len() as u32;
        s.early_fails = b.early.len() as u32;
        s.failing_days = b.days.len() as u32;
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
    Ok(fleet)
}

/// Runs, single-node runs and node-days per node.
#[derive(Default, Clone, Copy)]
struct Exposure {
    jobs: u32,
    single_node_jobs: u32,
    node_days: f64,
}

/// Exposure of every node over the window.
///
/// Two sequential scans merged by job id (the window's jobs from the first
/// id that ends in it, and `job_nodes` from the same id) instead of a join
/// through the end-time index: random lookups per row made scoring a million
/// jobs several times slower.
fn exposure(
    conn: &Connection,
    t0: i64,
    now: i64,
    since: &dyn Fn(i64) -> i64,
) -> Result<Vec<(i64, Exposure)>> {
    let first: Option<i64> = conn.query_row(
        "SELECT min(id) FROM jobs WHERE end_time > ?1 AND end_time <= ?2",
        params![t0, now],
        |r| r.get(0),
    )?;
    let Some(first) = first else {
        return Ok(Vec::new());
    };
    let max_node: i64 = conn.query_row("SELECT ifnull(max(id), 0) FROM nodes", [], |r| r.get(0))?;
    let mut per = vec![Exposure::default(); max_node as usize + 1];
    let mut add = |node: i64, single: bool, start: Option<i64>, end: i64| {
        if end <= since(node) {
            return;
        }
        let Some(e) = per.get_mut(node as usize) else {
            return;
        };
        e.jobs += 1;
        if single {
            e.single_node_jobs += 1;
        }
        if let Some(start) = start {
            e.node_days += (end - start.max(t0)).max(0) as f64 / 86_400.0;
        }
    };
    // One-node runs carry their node; the others are merged with job_nodes.
    let mut multi: Vec<(i64, Option<i64>, i64)> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT id, node, start_time, end_time FROM jobs WHERE id >= ?1 ORDER BY id",
        )?;
        let mut rows = stmt.query([first])?;
        while let Some(r) = rows.next()? {
            let end: i64 = r.get(3)?;
            if end <= t0 || end > now {
                continue;
            }
            match r.get::<_, Option<i64>>(1)? {
                Some(node) => add(node, true, r.get(2)?, end),
                None => multi.push((r.get(0)?, r.get(2)?, end)),
            }
        }
    }
    let mut stmt =
        conn.prepare_cached("SELECT job, node FROM job_nodes WHERE job >= ?1 ORDER BY job")?;
    let mut rows = stmt.query([first])?;
    let mut i = 0;
    while let Some(r) = rows.next()? {
        let job: i64 = r.get(0)?;
        while i < multi.len() && multi[i].0 < job {
            i += 1;
        }
        if i == multi.len() {
            break;
        }
        let (id, start, end) = multi[i];
        if id == job {
            add(r.get(1)?, false, start, end);
        }
    }
    Ok(per
        .into_iter()
        .enumerate()
        .filter(|(_, e)| e.jobs > 0)
        .map(|(n, e)| (n as i64, e))
        .collect())
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

/// Distinct job ids blamed on one node, by kind, and the days they failed on.
#[derive(Default)]
struct Blame {
    all: BTreeSet<i64>,
    single: BTreeSet<i64>,
    multi: BTreeSet<i64>,
    early: BTreeSet<i64>,
    days: BTreeSet<i64>,
}

/// Attributes every failed run that ended in `(t0, t1]` (see [`attribute`])
/// and stores the result in `attributions`, for the reports. `ev` must cover
/// the range; [`evidence`] loads it.
pub fn attribute_range(
    conn: &Connection,
    t0: i64,
    t1: i64,
    user_error_exit_codes: &[i32],
    ev: &Evidence,
) -> Result<Vec<(FailedRun, String, Attribution)>> {
    let failed = load_failed(conn, t0, t1)?;
    let out: Vec<(FailedRun, String, Attribution)> = failed
        .into_iter()
        .map(|(run, job_id)| {
            let a = attribute::attribute(&run, ev, user_error_exit_codes);
            (run, job_id, a)
        })
        .collect();
    let list: Vec<(i64, &Attribution)> = out.iter().map(|(r, _, a)| (r.row_id, a)).collect();
    store_attributions(conn, &list, t1)?;
    Ok(out)
}

/// The attribution evidence for runs ending in `(t0, t1]`.
pub fn evidence(conn: &Connection, t0: i64, t1: i64) -> Result<Evidence> {
    load_evidence(conn, t0, t1)
}

/// Findings, out-of-service events and failed task exits around the window.
fn load_evidence(conn: &Connection, t0: i64, now: i64) -> Result<Evidence> {
    let (lo, hi) = (t0 - attribute::BEFORE_END_S, now + attribute::AFTER_END_S);
    let mut ev = Evidence::default();
    let mut stmt = conn.prepare_cached(
        "SELECT node, at, check_name FROM health
         WHERE kind = 'finding' AND severity IN ('drain', 'down') AND at >= ?1 AND at <= ?2",
    )?;
    let mut rows = stmt.query(params![lo, hi])?;
    while let Some(r) = rows.next()? {
        ev.findings.entry(r.get(0)?).or_default().push(Mark {
            at: r.get(1)?,
            category: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
        });
    }
    let mut stmt = conn.prepare_cached(
        "SELECT node, start_time, state, reason FROM node_events
         WHERE start_time >= ?1 AND start_time <= ?2 AND owner != 'lemon'",
    )?;
    let mut rows = stmt.query(params![lo, hi])?;
    while let Some(r) = rows.next()? {
        let state: String = r.get(2)?;
        if is_out_of_service(&state) {
            ev.out_events.entry(r.get(0)?).or_default().push(Mark {
                at: r.get(1)?,
                category: r.get(3)?,
            });
        }
    }
    // Milliseconds: tasks of one job often end within the same second.
    // Records of nodes that sent only seconds (`at_ms` NULL) count as `at * 1000`.
    let mut stmt = conn.prepare_cached(
        "SELECT node, coalesce(at_ms, at * 1000), job_id FROM health
         WHERE kind = 'task_exit' AND at >= ?1 AND at <= ?2
           AND (ifnull(exit_code, 0) != 0 OR ifnull(signal, 0) != 0)",
    )?;
    let mut rows = stmt.query(params![lo, hi])?;
    while let Some(r) = rows.next()? {
        let job: String = r.get(2)?;
        // SPANK reports SLURM_JOB_ID, the raw id; `123_4` forms are not expected.
        if let Ok(raw) = job.trim().parse::<i64>() {
            ev.task_fails_ms
                .entry(raw)
                .or_default()
                .push((r.get(0)?, r.get(1)?));
        }
    }
    ev.sort();
    Ok(ev)
}

/// Failed runs that ended in the window, with their nodes and display job id.
fn load_failed(conn: &Connection, t0: i64, now: i64) -> Result<Vec<(FailedRun, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, job_id_raw, job_id, state, start_time, end_time, exit_code, node
         FROM jobs WHERE end_time > ?1 AND end_time <= ?2 AND state IN ('FAILED', 'NODE_FAIL')
         ORDER BY end_time",
    )?;
    let mut nodes_of = conn.prepare_cached("SELECT node FROM job_nodes WHERE job = ?1")?;
    let mut out = Vec::new();
    let mut rows = stmt.query(params![t0, now])?;
    while let Some(r) = rows.next()? {
        let row_id: i64 = r.get(0)?;
        let nodes = match r.get::<_, Option<i64>>(7)? {
            Some(node) => vec![node],
            None => nodes_of
                .query_map([row_id], |n| n.get(0))?
                .collect::<Result<Vec<i64>, _>>()?,
        };
        out.push((
            FailedRun {
                row_id,
                job_id_raw: r.get(1)?,
                state: r.get(3)?,
                start: r.get(4)?,
                end: r.get(5)?,
                exit_code: r.get(6)?,
                nodes,
            },
            r.get(2)?,
        ));
    }
    Ok(out)
}

fn store_attributions(conn: &Connection, list: &[(i64, &Attribution)], now: i64) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    let result = (|| -> Result<()> {
        let mut up = conn.prepare_cached(
            "INSERT INTO attributions(job, node, rule, category, computed_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(job) DO UPDATE SET node = excluded.node, rule = excluded.rule,
                 category = excluded.category, computed_at = excluded.computed_at",
        )?;
        for (job, a) in list {
            up.execute(params![job, a.node, a.rule.as_str(), a.category, now])?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            conn.execute_batch("COMMIT")?;
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest;
    use lemonade_spool::{Body, Record};
    use std::time::Duration;

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

        let out = attribute_range(&conn, 10_000, 30_000, &[], &ev).unwrap();
        let blamed: Vec<(String, Option<i64>, Rule)> = out
            .into_iter()
            .map(|(_, job, a)| (job, a.node, a.rule))
            .collect();
        assert_eq!(
            blamed,
            [
                ("11".to_string(), Some(n2), Rule::FirstTaskExit),
                ("12".to_string(), Some(n2), Rule::FirstTaskExit),
            ]
        );
    }
}
