//! `lemon trace JOBID [--dump FILE...]`: hangs and stragglers inside one
//! job (issue 32) from its ranks' NCCL flight-recorder dumps, analysed by
//! `lemonade_flight_recorder`: the summaries the nodes' epilogs collected
//! into lemon.db, or dump files given on the command line.
//!
//! The dumps are written by the job's user and lemon may run as root: each
//! is read through the flight-recorder crate's checked read (no symlink on
//! the path, a regular file of `owner`, size and time caps, plain-data
//! pickle only). A dump that breaks a rule is skipped and named on stderr;
//! the others are still analysed (one rank's dump cut short by the kill
//! must not hide the 127 others). Nothing is printed on stdout before every
//! dump has been read.

use crate::error::{LemonError, Result};
use clap::ValueEnum;
use flight_recorder::{analyze, read_dump, Analysis, Params, RankSummary, ReadLimits};
use joblog::JobLayout;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Output formats of `lemon trace`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Default)]
pub enum TraceFormat {
    /// One line per named rank, then notes.
    #[default]
    Text,
    /// One JSON object: the job, the analysis, the dumps not read.
    Json,
}

/// Where the ranks ran, when the caller knows it.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// The job's NodeList (a Slurm hostlist), in order.
    pub nodes: Option<String>,
    /// Tasks per node; by default the ranks seen spread evenly.
    pub tasks_per_node: Option<u32>,
}

/// What `lemon trace` prints: the job, the analysis, the skipped dumps.
#[derive(Debug, Serialize)]
struct TraceOutput<'a> {
    job: &'a str,
    #[serde(flatten)]
    analysis: &'a Analysis,
    unread: Vec<String>,
}

/// The analysis of `dumps` (owned by `owner`) for job `job`, rendered, and
/// the lines for stderr (skipped dumps, a summary).
pub fn trace_dumps(
    job: &str,
    dumps: &[PathBuf],
    placement: &Placement,
    owner: u32,
    format: TraceFormat,
) -> Result<(String, String)> {
    if dumps.is_empty() {
        return Err(LemonError::Usage(format!(
            "lemon trace {job}: no collected summaries yet; give the job's dumps with --dump FILE"
        )));
    }
    let limits = ReadLimits::default();
    let mut ranks: Vec<RankSummary> = Vec::new();
    let mut unread = Vec::new();
    for path in dumps {
        match read_dump(&absolute(path)?, owner, &limits) {
            Ok(r) if ranks.iter().any(|have| have.rank == r.rank) => unread.push(format!(
                "{}: a second dump of rank {}",
                path.display(),
                r.rank
            )),
            Ok(r) => ranks.push(r),
            Err(e) => unread.push(e.to_string()),
        }
    }
    if ranks.is_empty() {
        return Err(LemonError::Usage(format!(
            "lemon trace {job}: no dump could be read:\n  {}",
            unread.join("\n  ")
        )));
    }
    ranks.sort_by_key(|r| r.rank);
    let layout = layout(placement, &ranks)?;
    let analysis = analyze(&ranks, layout.as_ref(), &Params::default());
    render(job, &analysis, unread, format)
}

/// `lemon trace JOBID` without `--dump`: the summaries the nodes' epilogs
/// exported for the job's last run in lemon.db, with its NodeList; a rank
/// maps to the node that held its dump.
pub fn trace_collected(
    conn: &Connection,
    job: &str,
    format: TraceFormat,
) -> Result<(String, String)> {
    let Some(run) = crate::db::traces::last_run(conn, job)? else {
        return Err(LemonError::Usage(format!(
            "lemon trace {job}: no such job in lemon.db (lemon ingest reads it from sacct); give its dumps with --dump FILE"
        )));
    };
    let since = run.start.unwrap_or(run.end);
    let stored = crate::db::traces::of_job(conn, &run.job_id_raw.to_string(), since)?;
    if stored.is_empty() {
        return Err(LemonError::Usage(format!(
            "lemon trace {job}: no flight-recorder summaries collected for this run (the setting was off, or no rank dumped); give dumps with --dump FILE"
        )));
    }
    let traced = crate::attribute::trace::analyze_stored(&run.nodelist, &stored);
    let (mut out, err) = render(&run.job_id, &traced.analysis, traced.unread, format)?;
    if format == TraceFormat::Text {
        if let Some((node, evidence)) = crate::attribute::trace::localized(&traced.analysis) {
            out += &format!("points at {node}: {evidence}\n");
        }
    }
    Ok((out, err))
}

/// The analysis on stdout, the unread dumps and a count on stderr.
fn render(
    job: &str,
    analysis: &Analysis,
    unread: Vec<String>,
    format: TraceFormat,
) -> Result<(String, String)> {
    let mut stderr: String = unread.iter().map(|u| format!("skipped {u}\n")).collect();
    stderr += &format!(
        "lemon trace: {} dumps read, {} skipped, {} ranks named\n",
        analysis.ranks,
        unread.len(),
        analysis.named_ranks().len()
    );
    let out = match format {
        TraceFormat::Text => format!("job {job}: {analysis}"),
        TraceFormat::Json => {
            let o = TraceOutput {
                job,
                analysis,
                unread,
            };
            let text = serde_json::to_string_pretty(&o)
                .map_err(|e| LemonError::Usage(format!("cannot write JSON: {e}")))?;
            text + "\n"
        }
    };
    Ok((out, stderr))
}

/// `path` made absolute against the working directory, without resolving
/// anything (resolving would follow the links the read must refuse).
fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| LemonError::io(".", e))?;
    Ok(cwd.join(path))
}

/// The task layout (issue 36, "Task layout"): block distribution over the
/// NodeList in order.
fn layout(placement: &Placement, ranks: &[RankSummary]) -> Result<Option<JobLayout>> {
    let Some(list) = &placement.nodes else {
        return Ok(None);
    };
    let nodes = lemonade_slurm::hostlist::expand(list)
        .map_err(|e| LemonError::Usage(format!("--nodes {list}: {e}")))?;
    let seen = ranks.iter().map(|r| r.rank + 1).max().unwrap_or(0);
    let per_node = placement
        .tasks_per_node
        .unwrap_or_else(|| seen.div_ceil(nodes.len().max(1) as u32));
    Ok(Some(JobLayout::new(nodes, per_node)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flight_recorder::generate::{job_dumps, JobSpec};

    fn my_uid() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    /// A 16-rank job's dumps in a temp dir, rank 13 hung.
    fn hung_job(dir: &Path) -> Vec<PathBuf> {
        let spec = JobSpec {
            ranks: 16,
            hung_rank: Some(13),
            ..Default::default()
        };
        job_dumps(&spec)
            .into_iter()
            .map(|(rank, bytes)| {
                let p = dir.join(format!("nccl_trace_rank_{rank}"));
                std::fs::write(&p, bytes).unwrap();
                p
            })
            .collect()
    }

    #[test]
    fn trace_names_the_hung_rank_and_its_node_in_json() {
        let dir = tempfile::tempdir().unwrap();
        let dumps = hung_job(dir.path());
        let placement = Placement {
            nodes: Some("gpu[041-042]".into()),
            tasks_per_node: None,
        };
        let (out, err) =
            trace_dumps("4419021", &dumps, &placement, my_uid(), TraceFormat::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["job"], "4419021");
        assert_eq!(v["hangs"][0]["ranks"][0]["rank"], 13);
        assert_eq!(v["hangs"][0]["ranks"][0]["node"], "gpu042");
        assert_eq!(v["hangs"][0]["waiting"], 15);
        assert!(
            err.contains("16 dumps read, 0 skipped, 1 ranks named"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_dump_is_skipped_and_named_while_the_others_are_analysed() {
        let dir = tempfile::tempdir().unwrap();
        let mut dumps = hung_job(dir.path());
        std::fs::write(&dumps[3], b"\x80\x02cos\nsystem\n.").unwrap();
        let link = dir.path().join("nccl_trace_rank_99");
        std::os::unix::fs::symlink(&dumps[0], &link).unwrap();
        dumps.push(link);
        let (out, err) = trace_dumps(
            "7",
            &dumps,
            &Placement::default(),
            my_uid(),
            TraceFormat::Text,
        )
        .unwrap();
        assert!(
            out.contains("hang: rank 13 never entered nccl:all_reduce seq 18231"),
            "{out}"
        );
        assert!(
            err.contains("nccl_trace_rank_3: pickle byte 2: opcode GLOBAL"),
            "{err}"
        );
        assert!(
            err.contains("nccl_trace_rank_99: not read: symlink"),
            "{err}"
        );
        assert!(err.contains("15 dumps read, 2 skipped"), "{err}");
    }

    /// A 16-rank job on gpu[041-042], rank 13 hung, as the two nodes'
    /// epilogs exported it, ingested into a fresh lemon.db.
    fn collected(dir: &Path) -> Connection {
        use lemonade_spool::{Body, Record};
        let mut conn =
            crate::db::open(&dir.join("lemon.db"), std::time::Duration::from_secs(1)).unwrap();
        let nodes = ["gpu041", "gpu042"];
        crate::db::traces::insert_failed_run_for_test(
            &conn,
            "4419021",
            "gpu[041-042]",
            &nodes,
            (1000, 2000),
        )
        .unwrap();
        let spec = JobSpec {
            ranks: 16,
            hung_rank: Some(13),
            ..Default::default()
        };
        let mut ids = crate::db::NodeIds::load(&conn).unwrap();
        for (i, node) in nodes.iter().enumerate() {
            let records: Vec<Record> = job_dumps(&spec)
                .into_iter()
                .filter(|(rank, _)| *rank / 8 == i as u32)
                .map(|(rank, bytes)| {
                    let s = flight_recorder::summarize_bytes(rank, &bytes, &Default::default())
                        .unwrap();
                    Record {
                        seq: u64::from(rank) + 1,
                        epoch: "e".into(),
                        node: node.to_string(),
                        at: 2001,
                        body: Body::FlightRecorder {
                            job_id: "4419021".into(),
                            rank: Some(rank),
                            summary: Some(serde_json::to_value(s).unwrap()),
                            error: None,
                        },
                    }
                })
                .collect();
            crate::ingest::spool::ingest_records(&mut conn, &mut ids, &records).unwrap();
        }
        conn
    }

    #[test]
    fn trace_of_a_job_id_alone_names_the_node_from_the_collected_summaries() {
        let dir = tempfile::tempdir().unwrap();
        let conn = collected(dir.path());
        let (out, err) = trace_collected(&conn, "4419021", TraceFormat::Text).unwrap();
        assert!(
            out.contains("hang: rank 13 on gpu042 never entered nccl:all_reduce seq 18231"),
            "{out}"
        );
        assert!(
            out.contains("points at gpu042: rank 13 on gpu042 stopped at all_reduce seq 18231; 15 ranks waited there"),
            "{out}"
        );
        assert!(
            err.contains("16 dumps read, 0 skipped, 1 ranks named"),
            "{err}"
        );
        let e = trace_collected(&conn, "99", TraceFormat::Text).unwrap_err();
        assert!(e.to_string().contains("no such job in lemon.db"), "{e}");
    }

    #[test]
    fn the_attribution_blames_the_hung_ranks_node_from_the_collected_summaries() {
        let dir = tempfile::tempdir().unwrap();
        let conn = collected(dir.path());
        let w =
            crate::signals::attribute_range(&conn, 0, 3000, &Default::default(), &|t| t).unwrap();
        let names = crate::db::node_names(&conn).unwrap();
        let a = &w.attributions[0];
        assert_eq!(a.rule, crate::attribute::Rule::Trace, "{a:?}");
        assert_eq!(names[&a.node.unwrap()], "gpu042");
        assert_eq!(
            a.detail,
            "flight recorder: rank 13 on gpu042 stopped at all_reduce seq 18231; 15 ranks waited there"
        );
    }

    #[test]
    fn without_dumps_or_with_none_readable_trace_is_a_usage_error() {
        let e =
            trace_dumps("7", &[], &Placement::default(), my_uid(), TraceFormat::Text).unwrap_err();
        assert!(e.to_string().contains("--dump FILE"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nccl_trace_rank_0");
        std::fs::write(&p, b"not a pickle").unwrap();
        let e = trace_dumps(
            "7",
            &[p],
            &Placement::default(),
            my_uid(),
            TraceFormat::Text,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no dump could be read"), "{e}");
    }
}
