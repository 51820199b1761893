//! The fabric manager's log: the `[ERROR]` and `[CRITICAL]` lines written
//! since the previous run, read from a byte offset kept in the check state.

use crate::check::CheckError;
use crate::root::{NodeRoot, ReadError};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};

/// With no previous offset (first run, replay), only this much of the end of
/// the log is read: errors from long ago are history.
pub const FIRST_READ_BYTES: u64 = 1 << 20;
/// An error line is kept to this many characters in findings.
const LINE_CHARS: usize = 240;

/// Where the previous run stopped reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogCursor {
    pub offset: u64,
}

/// The errors logged since the cursor, and where the next run starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogErrors {
    /// False when the log does not exist (a fabric manager logging to syslog).
    pub present: bool,
    pub count: usize,
    /// The last error line, cut to a readable length.
    pub last: Option<String>,
    pub cursor: LogCursor,
}

/// Reads the lines of `path` added since `previous`. A log shorter than the
/// offset was rotated: it is read from its start.
pub fn read_new(
    root: &NodeRoot,
    path: &str,
    previous: Option<LogCursor>,
) -> Result<LogErrors, CheckError> {
    let err = |source| {
        CheckError::Read(ReadError {
            path: path.to_string(),
            source,
        })
    };
    let mut file = match std::fs::File::open(root.path(path)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LogErrors::default()),
        Err(e) => return Err(err(e)),
    };
    root.note(path);
    let len = file.metadata().map_err(err)?.len();
    let start = match previous {
        Some(c) if c.offset <= len => c.offset,
        Some(_) => 0,
        None => len.saturating_sub(FIRST_READ_BYTES),
    };
    file.seek(SeekFrom::Start(start)).map_err(err)?;
    let mut bytes = Vec::new();
    file.take(len - start)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    // A line still being written is read whole by the next run.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut errors = scan(&String::from_utf8_lossy(&bytes[..complete]));
    errors.present = true;
    errors.cursor = LogCursor {
        offset: start + complete as u64,
    };
    Ok(errors)
}

/// Pure: the error lines of `text` (`[Mar 12 2024 08:01:25] [ERROR] [tid 2384] ...`).
pub fn scan(text: &str) -> LogErrors {
    let mut out = LogErrors::default();
    for line in text.lines() {
        if line.contains("] [ERROR] ") || line.contains("] [CRITICAL] ") {
            out.count += 1;
            out.last = Some(line.trim().chars().take(LINE_CHARS).collect());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[Mar 12 2024 08:01:22] [INFO] [tid 2384] Fabric Manager version 535.154.05 is running with the following configuration options
[Mar 12 2024 08:01:22] [INFO] [tid 2384] Logging level = 4
[Mar 12 2024 08:01:25] [ERROR] [tid 2402] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:05:00.0 physical id 0 port 32
[Mar 12 2024 08:01:25] [INFO] [tid 2402] Successfully configured all the available GPUs and NVSwitches to route NVLink traffic.
";

    #[test]
    fn error_lines_are_counted_and_the_last_one_kept() {
        let e = scan(LOG);
        assert_eq!(e.count, 1);
        assert!(e.last.unwrap().contains("NVSwitch fatal error 20034"));
        assert_eq!(scan("[x] [INFO] [tid 1] ERROR in a message\n").count, 0);
    }

    #[test]
    fn each_error_is_read_once_and_a_rotated_log_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("var/log/fabricmanager.log");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, LOG).unwrap();
        let root = NodeRoot::new(dir.path());
        let log = "/var/log/fabricmanager.log";
        let first = read_new(&root, log, None).unwrap();
        assert_eq!((first.present, first.count), (true, 1));
        let again = read_new(&root, log, Some(first.cursor)).unwrap();
        assert_eq!(again.count, 0);
        std::fs::write(
            &path,
            &LOG[LOG.find("[Mar 12 2024 08:01:25] [ERROR]").unwrap()..],
        )
        .unwrap();
        let rotated = read_new(&root, log, Some(first.cursor)).unwrap();
        assert_eq!(rotated.count, 1);
    }

    #[test]
    fn a_half_written_line_waits_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fm.log");
        std::fs::write(&path, "[a] [INFO] [tid 1] ok\n[b] [ERROR] [tid").unwrap();
        let root = NodeRoot::new(dir.path());
        let first = read_new(&root, "/fm.log", Some(LogCursor::default())).unwrap();
        assert_eq!((first.count, first.cursor.offset), (0, 22));
        std::fs::write(&path, "[a] [INFO] [tid 1] ok\n[b] [ERROR] [tid 2] lost\n").unwrap();
        assert_eq!(
            read_new(&root, "/fm.log", Some(first.cursor))
                .unwrap()
                .count,
            1
        );
    }

    #[test]
    fn no_log_is_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_new(
            &NodeRoot::new(dir.path()),
            "/var/log/fabricmanager.log",
            None,
        )
        .unwrap();
        assert!(!e.present);
    }
}
