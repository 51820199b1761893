//! Blame from a failed job's NCCL flight-recorder dumps (issue 32): the
//! per-rank summaries the nodes' epilogs exported, analysed per run by
//! `flight_recorder::analyze` (who hangs, who lags).
//!
//! A hang or a straggler localized to one node counts against that node
//! as a hardware suspicion ([`Rule::Trace`]). It is weaker than the job's
//! own log: a log line naming a node's hardware, or showing the user's own
//! failure, decides first; the trace may localize a hardware line that
//! named no node. Among the other rules it comes after node evidence (a
//! finding or node event in the window), before the weighing.

use super::job_log::LogKind;
use super::{Attribution, FailedRun, Rule};
use crate::db::traces::StoredTrace;
use crate::error::Result;
use flight_recorder::{analyze, Analysis, Params, RankSummary};
use joblog::JobLayout;
use lemonade_sql::rusqlite::Connection;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A node the trace points at, and why, in words: "rank 13 on gpu042
/// stopped at all_reduce seq 18231; 127 ranks waited there".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceVerdict {
    /// `nodes.id`.
    pub node: i64,
    pub evidence: String,
}

/// One job's collected dumps, analysed.
#[derive(Debug, Clone)]
pub struct JobTrace {
    pub analysis: Analysis,
    /// Dumps that gave no summary, or whose summary did not parse, in words.
    pub unread: Vec<String>,
}

/// Analyses the stored dumps of one run on `nodelist` (a Slurm hostlist).
/// Ranks map to nodes by the node that held each rank's dump; ranks
/// without one, by the block layout over the NodeList.
pub fn analyze_stored(nodelist: &str, stored: &[StoredTrace]) -> JobTrace {
    let mut ranks: Vec<RankSummary> = Vec::new();
    let mut held_on: BTreeMap<u32, String> = BTreeMap::new();
    let mut unread = Vec::new();
    for s in stored {
        let rank = s.rank.map_or("-".to_string(), |r| r.to_string());
        let Some(json) = &s.summary else {
            let why = s.error.as_deref().unwrap_or("no summary");
            unread.push(format!("{} rank {rank}: {why}", s.node));
            continue;
        };
        match serde_json::from_str::<RankSummary>(json) {
            Ok(r) if held_on.contains_key(&r.rank) => {
                unread.push(format!("{} rank {rank}: a second dump of the rank", s.node))
            }
            Ok(r) => {
                held_on.insert(r.rank, s.node.clone());
                ranks.push(r);
            }
            Err(e) => unread.push(format!("{} rank {rank}: summary unreadable: {e}", s.node)),
        }
    }
    ranks.sort_by_key(|r| r.rank);
    let layout = layout(nodelist, &ranks);
    let mut analysis = analyze(&ranks, layout.as_ref(), &Params::default());
    for h in &mut analysis.hangs {
        for b in &mut h.ranks {
            b.node = held_on.get(&b.rank).cloned().or(b.node.take());
        }
    }
    for s in &mut analysis.stragglers {
        s.node = held_on.get(&s.rank).cloned().or(s.node.take());
    }
    JobTrace { analysis, unread }
}

/// Block layout over the NodeList, the ranks seen spread evenly.
fn layout(nodelist: &str, ranks: &[RankSummary]) -> Option<JobLayout> {
    let nodes = lemonade_slurm::hostlist::expand(nodelist).ok()?;
    let seen = ranks.iter().map(|r| r.rank + 1).max().unwrap_or(0);
    let per_node = seen.div_ceil(nodes.len().max(1) as u32);
    Some(JobLayout::new(nodes, per_node))
}

/// The one node the analysis points at and the evidence in words: a hang
/// whose ranks are all on one node, else a straggler on one node. `None`
/// when nothing is named, or the named ranks are on several nodes.
pub fn localized(a: &Analysis) -> Option<(String, String)> {
    if !a.hangs.is_empty() {
        let nodes: BTreeSet<_> = a
            .hangs
            .iter()
            .flat_map(|h| &h.ranks)
            .map(|b| &b.node)
            .collect();
        let [Some(node)] = nodes.into_iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        let h = &a.hangs[0];
        let ranks: Vec<String> = h.ranks.iter().map(|b| b.rank.to_string()).collect();
        let op = h.op.as_deref().unwrap_or("a collective");
        let op = op.strip_prefix("nccl:").unwrap_or(op);
        let who = match ranks.len() {
            1 => format!("rank {}", ranks[0]),
            _ => format!("ranks {}", ranks.join(", ")),
        };
        let evidence = format!(
            "{who} on {node} stopped at {op} seq {}; {} ranks waited there",
            h.seq, h.waiting
        );
        return Some((node.clone(), evidence));
    }
    let nodes: BTreeSet<_> = a.stragglers.iter().map(|s| &s.node).collect();
    let [Some(node)] = nodes.into_iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    let s = &a.stragglers[0];
    let evidence = format!(
        "rank {} on {node} was the straggler of group {} in {} of {} collectives",
        s.rank, s.group, s.collectives, s.compared
    );
    Some((node.clone(), evidence))
}

/// Sets `trace` on every failed run of `(t0, t1]` whose dumps point at one
/// node of lemon.db.
pub fn attach(conn: &Connection, t0: i64, t1: i64, runs: &mut [FailedRun]) -> Result<()> {
    let rows = crate::db::traces::of_failed_runs(conn, t0, t1)?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut by_run: BTreeMap<i64, (String, Vec<StoredTrace>)> = BTreeMap::new();
    for (run, nodelist, stored) in rows {
        by_run
            .entry(run)
            .or_insert_with(|| (nodelist, Vec::new()))
            .1
            .push(stored);
    }
    let ids: HashMap<String, i64> = crate::db::node_names(conn)?
        .into_iter()
        .map(|(id, name)| (name, id))
        .collect();
    for run in runs.iter_mut() {
        let Some((nodelist, stored)) = by_run.get(&run.row_id) else {
            continue;
        };
        let traced = analyze_stored(nodelist, stored);
        run.trace = localized(&traced.analysis).and_then(|(name, evidence)| {
            Some(TraceVerdict {
                node: *ids.get(&name)?,
                evidence,
            })
        });
    }
    Ok(())
}

/// The attribution the trace decides: its node, when it is one of the
/// run's and the job's log gave no user verdict.
pub fn blame(run: &FailedRun) -> Option<Attribution> {
    let t = run.trace.as_ref()?;
    if run.log.as_ref().is_some_and(|l| l.kind == LogKind::User) || !run.nodes.contains(&t.node) {
        return None;
    }
    Some(Attribution::node(
        t.node,
        Rule::Trace,
        "trace",
        format!("flight recorder: {}", t.evidence),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribute::job_log::LogVerdict;
    use crate::attribute::{attribute_all, AttributionParams, Evidence, UserStats};
    use crate::job_state::JobState;
    use flight_recorder::generate::{job_dumps, JobSpec};

    fn run(nodes: &[i64], log: Option<LogKind>, trace_on: Option<i64>) -> FailedRun {
        FailedRun {
            row_id: 1,
            job_id_raw: 7,
            job_id: "7".into(),
            user: 0,
            state: JobState::from_sacct("FAILED"),
            start: Some(0),
            end: 100,
            exit_code: Some(1),
            exit_signal: Some(0),
            nodes: nodes.to_vec(),
            log: log.map(|kind| LogVerdict {
                kind,
                evidence: "line".into(),
            }),
            trace: trace_on.map(|node| TraceVerdict {
                node,
                evidence: format!(
                    "rank 13 on n{node} stopped at all_reduce seq 18231; 15 ranks waited there"
                ),
            }),
        }
    }

    fn users() -> UserStats {
        let mut u = UserStats::default();
        u.intern(&mut HashMap::new(), "alice");
        u
    }

    fn decide(r: FailedRun) -> Attribution {
        let users = users();
        attribute_all(
            &[r],
            &Evidence::default(),
            &users,
            &HashMap::new(),
            &AttributionParams::default(),
        )
        .remove(0)
    }

    #[test]
    fn a_localized_hang_blames_its_node_when_the_log_says_nothing() {
        for log in [None, Some(LogKind::Unknown)] {
            let a = decide(run(&[1, 2], log, Some(2)));
            assert_eq!((a.node, a.rule), (Some(2), Rule::Trace), "{a:?}");
            assert!(a.is_hardware() && !a.rule.witnessed());
            assert!(
                a.detail.contains("rank 13 on n2 stopped at all_reduce"),
                "{}",
                a.detail
            );
        }
    }

    #[test]
    fn a_hardware_line_naming_a_node_beats_the_trace() {
        let a = decide(run(&[1, 2], Some(LogKind::HardwareOn(1)), Some(2)));
        assert_eq!((a.node, a.rule), (Some(1), Rule::JobLog));
    }

    #[test]
    fn a_user_verdict_beats_the_trace() {
        let a = decide(run(&[1, 2], Some(LogKind::User), Some(2)));
        assert_eq!((a.node, a.rule), (None, Rule::JobLogUser));
    }

    #[test]
    fn the_trace_localizes_a_hardware_line_that_named_no_node() {
        let a = decide(run(&[1, 2], Some(LogKind::HardwareUnlocalized), Some(2)));
        assert_eq!((a.node, a.rule), (Some(2), Rule::Trace));
        let b = decide(run(&[1, 2], Some(LogKind::HardwareUnlocalized), None));
        assert_eq!((b.node, b.rule), (None, Rule::JobLogUnlocalized));
    }

    #[test]
    fn node_evidence_in_the_window_beats_the_trace() {
        let mut ev = Evidence::default();
        ev.findings.insert(
            1,
            vec![crate::attribute::Mark {
                at: 90,
                category: "gpu".into(),
                what: "finding GPU_LOST gpu3".into(),
            }],
        );
        let users = users();
        let a = attribute_all(
            &[run(&[1, 2], None, Some(2))],
            &ev,
            &users,
            &HashMap::new(),
            &AttributionParams::default(),
        )
        .remove(0);
        assert_eq!((a.node, a.rule), (Some(1), Rule::Finding), "{a:?}");
    }

    #[test]
    fn a_trace_naming_a_node_outside_the_run_decides_nothing() {
        let a = decide(run(&[1, 2], None, Some(9)));
        assert_ne!(a.rule, Rule::Trace);
    }

    fn stored(spec: &JobSpec, per_node: u32) -> Vec<StoredTrace> {
        job_dumps(spec)
            .into_iter()
            .map(|(rank, bytes)| {
                let s =
                    flight_recorder::summarize_bytes(rank, &bytes, &Default::default()).unwrap();
                StoredTrace {
                    node: format!("gpu{:03}", 41 + rank / per_node),
                    rank: Some(rank),
                    summary: Some(serde_json::to_string(&s).unwrap()),
                    error: None,
                }
            })
            .collect()
    }

    #[test]
    fn stored_summaries_of_a_hang_name_the_node_that_held_the_hung_rank() {
        let spec = JobSpec {
            ranks: 128,
            hung_rank: Some(13),
            ..Default::default()
        };
        let t = analyze_stored("gpu[041-056]", &stored(&spec, 8));
        let (node, evidence) = localized(&t.analysis).unwrap();
        assert_eq!(node, "gpu042");
        assert_eq!(
            evidence,
            "rank 13 on gpu042 stopped at all_reduce seq 18231; 127 ranks waited there"
        );
    }

    #[test]
    fn a_healthy_jobs_summaries_name_nobody_and_bad_rows_are_listed() {
        let spec = JobSpec {
            ranks: 16,
            ..Default::default()
        };
        let mut rows = stored(&spec, 8);
        rows.push(StoredTrace {
            node: "gpu042".into(),
            rank: Some(16),
            summary: None,
            error: Some("not read: a symlink".into()),
        });
        let t = analyze_stored("gpu[041-042]", &rows);
        assert!(localized(&t.analysis).is_none());
        assert_eq!(t.unread, ["gpu042 rank 16: not read: a symlink"]);
    }
}
