//! Nodes that jobs excluded (`--exclude`): users' own suspicion of a node.
//!
//! Accounting does not keep the exclude list, so it is captured from
//! `squeue -h -t PD,R -o '%i|%x'` on every run while the jobs are still known.

use super::IngestStats;
use crate::db::{self, NodeIds};
use crate::error::{LemonError, Result};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::hostlist;
use lemonade_sql::rusqlite::Connection;

/// Stores `%i|%x` lines, each (job, node) once with the time first seen.
pub fn ingest_text(conn: &mut Connection, text: &str, name: &str, now: i64) -> Result<IngestStats> {
    let mut stats = IngestStats::default();
    let mut ids = NodeIds::load(conn)?;
    let tx = conn.transaction()?;
    {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            stats.rows_read += 1;
            let Some((job, excl)) = line.split_once('|') else {
                stats.malformed(
                    format!("{name}:{}", i + 1),
                    "expected JOBID|EXCLUDED".into(),
                );
                continue;
            };
            let nodes = match hostlist::expand(excl) {
                Ok(n) => n,
                Err(e) => {
                    stats.malformed(format!("{name}:{}", i + 1), e.to_string());
                    continue;
                }
            };
            for n in nodes {
                let node = ids.get_or_insert(&tx, &n)?;
                stats.inserted +=
                    db::node_events::insert_exclusion(&tx, job.trim(), node, now)? as u64;
            }
        }
    }
    tx.commit()?;
    Ok(stats)
}

/// Asks squeue for the pending and running jobs' exclusions.
pub fn ingest_from_slurm(
    conn: &mut Connection,
    slurm: &SlurmCommands,
    now: i64,
) -> Result<IngestStats> {
    let out = slurm
        .run("squeue", &["-h", "-t", "PD,R", "-o", "%i|%x"])
        .map_err(|source| LemonError::Slurm {
            what: "squeue".into(),
            source,
        })?;
    ingest_text(conn, &out.stdout, "squeue", now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_each_excluded_node_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn =
            crate::db::open(&dir.path().join("l.db"), std::time::Duration::from_secs(1)).unwrap();
        let text = "10|gpu[001-002]\n11|\n12_3|(null)\n";
        assert_eq!(ingest_text(&mut conn, text, "q", 5).unwrap().inserted, 2);
        assert_eq!(ingest_text(&mut conn, text, "q", 9).unwrap().inserted, 0);
    }
}
