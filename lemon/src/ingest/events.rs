//! Node events from `sacctmgr show event`: when nodes went DOWN/DRAIN, why, and who said so.
//!
//! An event is keyed by (node, start); its end is filled in when a later
//! ingest sees it closed, so the whole window is simply re-read each run.

use super::IngestStats;
use crate::db::{self, NodeIds};
use crate::error::{LemonError, Result};
use crate::time_zone::{self, Instant, Zone};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::reason::{self, ReasonOwner};
use lemonade_sql::rusqlite::Connection;

/// The fields asked of sacctmgr, in this order.
pub const EVENT_FIELDS: &str = "NodeName,Start,End,State,Reason,User";

/// One node event.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEvent {
    pub node: String,
    pub start: i64,
    pub end: Option<i64>,
    pub state: String,
    pub reason: String,
    pub user: String,
}

/// The owner's name as stored.
pub fn owner_name(owner: ReasonOwner) -> &'static str {
    match owner {
        ReasonOwner::HealthCheck => "health_check",
        ReasonOwner::Lemon => "lemon",
        ReasonOwner::Slurm => "slurm",
        ReasonOwner::Administrator => "administrator",
        ReasonOwner::None => "none",
    }
}

/// Parses one line, ISO times read in the local zone; `Ok(None)` for blank
/// lines and cluster events (no node).
pub fn parse_line(line: &str) -> Result<Option<NodeEvent>, String> {
    parse_line_in(line, &Zone::Local)
}

/// Parses one line, ISO times read in `zone` (the earlier reading of a
/// wall-clock time that a daylight-saving change repeats).
pub fn parse_line_in(line: &str, zone: &Zone) -> Result<Option<NodeEvent>, String> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() || line.starts_with("NodeName|") {
        return Ok(None);
    }
    let f: Vec<&str> = line.split('|').collect();
    if f.len() < 6 {
        return Err(format!("{} fields, expected 6 ({EVENT_FIELDS})", f.len()));
    }
    let node = f[0].trim();
    if node.is_empty() {
        return Ok(None);
    }
    // A reason may itself contain `|`: it is everything between State and User.
    let user = f[f.len() - 1].trim();
    let reason = f[4..f.len() - 1].join("|");
    let start = time_zone::parse_time(f[1], zone)
        .map_err(|e| format!("Start: {e}"))?
        .ok_or("Start is unknown")?
        .earliest();
    let end = time_zone::parse_time(f[2], zone)
        .map_err(|e| format!("End: {e}"))?
        .map(Instant::earliest);
    Ok(Some(NodeEvent {
        node: node.to_string(),
        start,
        end,
        state: f[3].trim().to_string(),
        reason: reason.trim().to_string(),
        user: user.to_string(),
    }))
}

/// True for states that took the node out of service.
pub fn is_out_of_service(state: &str) -> bool {
    let s = state.to_ascii_uppercase();
    ["DOWN", "DRAIN", "FAIL", "MAINT", "REBOOT"]
        .iter()
        .any(|w| s.contains(w))
}

/// Stores the events of `text`, ISO times read in the local zone; `name` labels errors.
pub fn ingest_text(conn: &mut Connection, text: &str, name: &str) -> Result<IngestStats> {
    ingest_text_in(conn, text, name, &Zone::Local)
}

/// Stores the events of a file's bytes: invalid UTF-8 is replaced and counted, never fatal.
pub fn ingest_bytes(
    conn: &mut Connection,
    bytes: &[u8],
    name: &str,
    zone: &Zone,
) -> Result<IngestStats> {
    let mut invalid = 0;
    let text: String = bytes
        .split_inclusive(|&b| b == b'\n')
        .map(|line| {
            let text = String::from_utf8_lossy(line);
            invalid += u64::from(matches!(text, std::borrow::Cow::Owned(_)));
            text
        })
        .collect();
    let mut stats = ingest_text_in(conn, &text, name, zone)?;
    stats.invalid_utf8 = invalid;
    Ok(stats)
}

/// Stores the events of `text`, ISO times read in `zone`; `name` labels errors.
pub fn ingest_text_in(
    conn: &mut Connection,
    text: &str,
    name: &str,
    zone: &Zone,
) -> Result<IngestStats> {
    let mut stats = IngestStats::default();
    let mut nodes = NodeIds::load(conn)?;
    let tx = conn.transaction()?;
    {
        for (i, line) in text.lines().enumerate() {
            match parse_line_in(line, zone) {
                Ok(None) => {}
                Ok(Some(ev)) => {
                    stats.rows_read += 1;
                    let node = nodes.get_or_insert(&tx, &ev.node)?;
                    let owner = owner_name(reason::owner(&ev.reason));
                    let event = db::node_events::NodeEvent {
                        node,
                        start: ev.start,
                        end: ev.end,
                        state: &ev.state,
                        reason: &ev.reason,
                        user: &ev.user,
                        owner,
                    };
                    stats.inserted += db::node_events::upsert(&tx, &event)? as u64;
                }
                Err(m) => {
                    stats.rows_read += 1;
                    stats.malformed_line(i + 1, format!("{name}:{}", i + 1), m);
                }
            }
        }
    }
    tx.commit()?;
    Ok(stats)
}

/// Reads the events of the scoring window from sacctmgr.
pub fn ingest_from_slurm(
    conn: &mut Connection,
    slurm: &SlurmCommands,
    now: i64,
    window_days: u32,
) -> Result<IngestStats> {
    let s = db::slurm_time_arg(now - i64::from(window_days) * 86_400);
    let e = db::slurm_time_arg(now);
    let start = format!("Start={s}");
    let end = format!("End={e}");
    let format = format!("format={EVENT_FIELDS}");
    let args = [
        "-n",
        "-P",
        "show",
        "event",
        "Event=Node",
        &start,
        &end,
        &format,
    ];
    let out = slurm
        .run_with_env("sacctmgr", &args, &[("SLURM_TIME_FORMAT", "%s")])
        .map_err(|source| LemonError::Slurm {
            what: "sacctmgr show event".into(),
            source,
        })?;
    ingest_text(conn, &out.stdout, "sacctmgr show event")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_with_open_ends_and_pipes_in_reasons() {
        let ev = parse_line("gpu001|100|Unknown|DRAIN|bad|fan|root")
            .unwrap()
            .unwrap();
        assert_eq!(ev.end, None);
        assert_eq!(ev.reason, "bad|fan");
        assert_eq!(ev.user, "root");
        assert_eq!(parse_line("|100|200|DOWN|cluster|root").unwrap(), None);
        assert!(parse_line("gpu1|x|200|DOWN|r|root").is_err());
        assert!(is_out_of_service("IDLE+DRAIN"));
        assert!(!is_out_of_service("IDLE"));
    }

    #[test]
    fn re_ingest_updates_the_end_without_duplicating() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn =
            db::open(&dir.path().join("l.db"), std::time::Duration::from_secs(1)).unwrap();
        ingest_text(
            &mut conn,
            "gpu001|100|Unknown|DOWN*|Not responding|slurm\n",
            "f",
        )
        .unwrap();
        ingest_text(
            &mut conn,
            "gpu001|100|300|DOWN*|Not responding|slurm\n",
            "f",
        )
        .unwrap();
        let (n, end, owner) = db::node_events::summary(&conn).unwrap();
        assert_eq!((n, end, owner.as_str()), (1, Some(300), "slurm"));
    }
}
