//! The node database's write-ahead log stays short over many runs, and a
//! reader that holds it open (a slow `healthcheck history`, an
//! administrator's `sqlite3`) neither blocks the runs nor keeps the log
//! long once it goes.

use lemonade_sql::rusqlite::{Connection, OpenFlags};
use lemonade_sql::wal::log_size;
use lemonade_tests::fixture::{self, FixtureNode};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT_KIB: u64 = 64;
const LIMIT: u64 = LIMIT_KIB * 1024;
/// Far above a run's time, far below a hang.
const DEADLINE: Duration = Duration::from_secs(20);

struct Node {
    node: FixtureNode,
    config: PathBuf,
    store: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = fixture::node("healthy");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("lemonade.toml");
        let store = dir.path().join("node.db");
        let fixture_config = std::fs::read_to_string(fixture::node_config()).unwrap();
        std::fs::write(
            &config,
            format!(
                "{fixture_config}\n[store]\npath = \"{}\"\nmax_log_kib = {LIMIT_KIB}\n",
                store.display()
            ),
        )
        .unwrap();
        Node {
            node,
            config,
            store,
            _dir: dir,
        }
    }

    fn healthcheck(&self, args: &[&str]) -> Output {
        let child = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
            .arg("--config")
            .arg(&self.config)
            .arg("--root")
            .arg(self.node.root())
            .arg("--use-store")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_within(child, DEADLINE)
    }

    /// A recorded run of the host checks; returns its report.
    fn run(&self) -> serde_json::Value {
        let out = self.healthcheck(&["run", "--checks", "xid,pcie,ib,mounts", "--format", "json"]);
        assert!(out.status.code().unwrap_or(9) <= 1, "{out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let store_findings: Vec<_> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"] == "store")
            .collect();
        assert!(store_findings.is_empty(), "{store_findings:#?}");
        report
    }
}

fn wait_within(mut child: std::process::Child, deadline: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("a run took longer than {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn database_size(store: &Path) -> u64 {
    std::fs::metadata(store).map_or(0, |m| m.len())
}

#[test]
fn the_log_stays_under_its_limit_and_a_reader_only_delays_its_emptying() {
    let n = Node::new();
    // Enough runs that the writes pass the limit several times.
    while database_size(&n.store) < 3 * LIMIT {
        n.run();
        let log = log_size(&n.store);
        assert!(log <= LIMIT, "a {log}-byte log after a run (limit {LIMIT})");
    }

    // A reader holds a snapshot while runs go on.
    let reader = Connection::open_with_flags(&n.store, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let seen: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    let grown_past = |n: &Node| log_size(&n.store) > 2 * LIMIT;
    for _ in 0..200 {
        if grown_past(&n) {
            break;
        }
        n.run();
        let history = n.healthcheck(&["history", "--since", "1000d", "--format", "json"]);
        assert!(history.status.success(), "{history:?}");
    }
    assert!(
        grown_past(&n),
        "the reader's snapshot keeps the log ({} bytes)",
        log_size(&n.store)
    );
    let still: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(still, seen, "the reader's snapshot stayed whole");

    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    n.run();
    assert_eq!(
        log_size(&n.store),
        0,
        "the first run after the reader empties the log"
    );
}
