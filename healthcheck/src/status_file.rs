//! The node's latest health in one line, `<severity> <unix seconds>`, at
//! `StoreSettings::status_path`. The SPANK plugin reads it before every job
//! step to set `LEMONADE_NODE_HEALTH` and `LEMONADE_LAST_CHECK` in the tasks'
//! environment: one small read, where opening the database would be too slow.

use chrono::{DateTime, Utc};
use lemonade_config::Severity;
use lemonade_spool::atomic::{self, Durability};
use std::io::Write;
use std::path::Path;

/// Replaces the status file by a rename: readers never see half a line. No
/// fsync: this runs inside every prolog, and a file lost to a crash only
/// leaves the variables unset until the next run.
pub fn write(path: &Path, worst: Severity, at: DateTime<Utc>) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let line = format!("{} {}\n", worst.as_str(), at.timestamp());
    atomic::replace_with(path, Durability::Unsynced, |f| f.write_all(line.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("status");
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        write(&path, Severity::Warning, at).unwrap();
        write(&path, Severity::Ok, at).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ok 1700000000\n");
    }
}
