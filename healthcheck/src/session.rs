//! The node database for the length of one run: opened once, with the run
//! lock when the run records, and how this run may use it.
//!
//! The store never stops the checks: a locked, corrupt or unwritable database
//! becomes an `unknown` finding for `store`, and the run reports as usual.

use crate::finding::Finding;
use lemonade_config::Config;
use lemonade_sql::lock::RunLock;
use lemonade_sql::node::NodeStore;
use lemonade_sql::wal;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Code of the store's finding when the node database cannot be used.
pub const STORE_UNAVAILABLE: &str = "STORE_UNAVAILABLE";

/// How a run uses the node database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreUse {
    /// Read the previous state, record the run: a node's own runs.
    Record,
    /// Read the previous state, write nothing, create nothing (`--no-record`).
    ReadOnly,
    /// Neither: a replay of another root (`--root`) starts from no state,
    /// so the live node's cursors and counters do not mix into its findings.
    Ignore,
}

impl StoreUse {
    /// `record`: the run is to be recorded; `live_root`: it reads the node
    /// itself (`--root /`); `use_store`: a replay asked for the store anyway.
    pub fn for_run(record: bool, live_root: bool, use_store: bool) -> StoreUse {
        match (live_root || use_store, record) {
            (false, _) => StoreUse::Ignore,
            (true, true) => StoreUse::Record,
            (true, false) => StoreUse::ReadOnly,
        }
    }
}

/// The node database as one run holds it.
pub struct NodeSession {
    path: PathBuf,
    status_path: PathBuf,
    use_: StoreUse,
    store: Option<NodeStore>,
    /// Held for the whole run: two runs at once must not both apply counter deltas.
    lock: Option<RunLock>,
    /// Why the store could not be used, as `unknown` findings of `store`.
    problems: Vec<Finding>,
    /// `[store] lock_wait_ms`, the database's busy timeout too.
    wait: Duration,
    /// `[store] max_log_kib`, in bytes.
    max_log_bytes: u64,
}

impl NodeSession {
    /// Takes the lock (when recording) and opens the store as `use_` says.
    pub fn open(config: &Config, use_: StoreUse) -> NodeSession {
        let path = config.store.path.clone();
        let wait = Duration::from_millis(config.store.lock_wait_ms);
        let mut session = NodeSession {
            path,
            status_path: config.store.status_path(),
            use_,
            store: None,
            lock: None,
            problems: Vec::new(),
            wait,
            max_log_bytes: config.store.max_log_kib.saturating_mul(1024),
        };
        match use_ {
            StoreUse::Record => session.open_for_recording(wait),
            StoreUse::ReadOnly => {
                // Reading is a courtesy here: trouble only means no previous state.
                session.store = NodeStore::open_read_only(&session.path, wait)
                    .ok()
                    .flatten();
            }
            StoreUse::Ignore => {}
        }
        session
    }

    fn open_for_recording(&mut self, wait: Duration) {
        match RunLock::acquire(&self.path, wait) {
            Ok(lock) => self.lock = Some(lock),
            Err(e) => self.problem(format!("{e}; this run's counters are not saved")),
        }
        match NodeStore::open(&self.path, wait) {
            Ok(store) => self.store = Some(store),
            Err(e) => self.problem(e.to_string()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The node's one-line status file, beside the database.
    pub fn status_path(&self) -> &Path {
        &self.status_path
    }

    /// Adds an `unknown` finding of `store` naming the database.
    pub fn problem(&mut self, message: String) {
        self.problems.push(store_unknown(&self.path, message));
    }

    /// The findings about the store so far, taken out.
    pub fn take_problems(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.problems)
    }

    /// Every check's state from the previous run. A store that cannot be
    /// read is reported and dropped: this run then neither reads nor records.
    pub fn previous_states(&mut self) -> HashMap<String, String> {
        let Some(store) = &self.store else {
            return HashMap::new();
        };
        match store.check_states() {
            Ok(states) => states,
            Err(e) => {
                if self.use_ == StoreUse::Record {
                    self.problem(e.to_string());
                }
                self.store = None;
                HashMap::new()
            }
        }
    }

    /// The store to read from, if any.
    pub fn readable(&self) -> Option<&NodeStore> {
        self.store.as_ref()
    }

    /// The store to write job records, policy memory and export state to:
    /// only when this run records.
    pub fn writable(&mut self) -> Option<&mut NodeStore> {
        match self.use_ {
            StoreUse::Record => self.store.as_mut(),
            _ => None,
        }
    }

    /// The store to write the run's counters to: recording, and holding the lock.
    pub fn for_counters(&mut self) -> Option<&mut NodeStore> {
        match (self.use_, &self.lock) {
            (StoreUse::Record, Some(_)) => self.store.as_mut(),
            _ => None,
        }
    }

    pub fn records(&self) -> bool {
        self.use_ == StoreUse::Record
    }

    /// Empties the write-ahead log when it has grown past `[store]
    /// max_log_kib`: the last thing a recording run does with the store,
    /// every entry point alike (see `lemonade_sql::wal` for why SQLite does
    /// not). A reader in the way costs at most `wal::DEFAULT_WAIT` and is no
    /// problem; a failure is an `unknown` finding of `store`.
    pub fn keep_log_short(&mut self) -> Option<Finding> {
        let (limit, wait) = (self.max_log_bytes, self.wait);
        let store = self.for_counters()?;
        let upkeep = wal::truncate_if_over(
            store.connection(),
            store.path(),
            limit,
            wal::DEFAULT_WAIT,
            wait,
        );
        match upkeep {
            Ok(_) => None,
            Err(e) => Some(store_unknown(
                &self.path,
                format!("checkpointing the write-ahead log: {e}"),
            )),
        }
    }
}

/// An `unknown` finding of `store` about `path`.
pub fn store_unknown(path: &Path, message: String) -> Finding {
    Finding::unknown(
        "store",
        path.display().to_string(),
        STORE_UNAVAILABLE,
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_ignores_the_store_unless_asked_and_no_record_only_reads() {
        assert_eq!(StoreUse::for_run(true, true, false), StoreUse::Record);
        assert_eq!(StoreUse::for_run(false, true, false), StoreUse::ReadOnly);
        assert_eq!(StoreUse::for_run(true, false, false), StoreUse::Ignore);
        assert_eq!(StoreUse::for_run(false, false, false), StoreUse::Ignore);
        assert_eq!(StoreUse::for_run(true, false, true), StoreUse::Record);
        assert_eq!(StoreUse::for_run(false, false, true), StoreUse::ReadOnly);
    }

    #[test]
    fn a_read_only_session_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.path = dir.path().join("state/node.db");
        let mut session = NodeSession::open(&config, StoreUse::ReadOnly);
        assert!(session.previous_states().is_empty());
        assert!(session.writable().is_none());
        assert!(session.take_problems().is_empty());
        assert!(!dir.path().join("state").exists());
    }
}
