//! How a run uses the node database: `--no-record` creates and changes
//! nothing, and a replay of another root (`--root`) neither reads the node's
//! state nor records into it unless asked with `--use-store`.

use lemonade_tests::fixture;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Boot of every fixture node plus a day: the fixture's "now".
const NOW: i64 = 1_795_132_800 + 86_400;

/// The fixture config with the store at `db`.
fn config(dir: &Path, db: &Path) -> PathBuf {
    let mut text = std::fs::read_to_string(fixture::node_config()).unwrap();
    text.push_str(&format!(
        "\n[[node]]\nhosts = \"storetest\"\nstore.path = \"{}\"\n",
        db.display()
    ));
    let config = dir.join("lemonade.toml");
    std::fs::write(&config, text).unwrap();
    config
}

/// `healthcheck xid` on `root` with `flags`: the XID codes it reports.
fn xids(config: &Path, root: &Path, flags: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(config)
        .args(["--node", "storetest", "xid", "--format", "json"])
        .arg(format!("--now={NOW}"))
        .arg("--root")
        .arg(root)
        .args(flags)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .filter(|c| c.starts_with("XID_"))
        .collect()
}

#[test]
fn no_record_creates_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/node.db");
    let config = config(dir.path(), &db);
    let node = fixture::node("xid-79");
    let kmsg = node.path("/dev/kmsg");
    let kmsg = kmsg.to_str().unwrap();
    // On the live root, as `healthcheck xid --kmsg-file F --no-record` runs on a node.
    assert_eq!(
        xids(
            &config,
            Path::new("/"),
            &["--kmsg-file", kmsg, "--no-record"]
        ),
        ["XID_79"]
    );
    assert!(
        !dir.path().join("state").exists(),
        "no directory, database, WAL or lock file"
    );
}

/// `healthcheck history` with `flags`: its exit code and stdout.
fn history(config: &Path, flags: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(config)
        .args(["--node", "storetest", "history", "--all"])
        .args(flags)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn history_without_a_database_says_so_and_creates_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/node.db");
    let config = config(dir.path(), &db);
    let (code, text) = history(&config, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no run has been recorded"), "{text}");
    let (code, json) = history(&config, &["--format", "json"]);
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(0));
    assert!(
        !dir.path().join("state").exists(),
        "no directory, database, WAL or lock file"
    );
}

#[test]
fn history_reads_the_runs_and_leaves_the_database_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let config = config(dir.path(), &db);
    let node = fixture::node("healthy");
    aer_grew(&config, node.root(), &["--use-store"]);
    let before = files(dir.path());
    // The run is at the fixture's time: ask from before it.
    let (code, json) = history(&config, &["--format", "json", "--since", "2026-01-01"]);
    assert_eq!(code, 0, "{json}");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(files(dir.path()), before, "nothing is written");
}

const AER: &str = "/sys/bus/pci/devices/0000:2a:00.0/aer_dev_nonfatal";

fn aer(total: u64) -> String {
    format!("Undefined 0\nDLP {total}\nSDES 0\nTLP 0\nTOTAL_ERR_NONFATAL {total}\n")
}

/// `healthcheck pcie` on `root` with `flags`: true when it reports AER growth.
fn aer_grew(config: &Path, root: &Path, flags: &[&str]) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(config)
        .args(["--node", "storetest", "pcie", "--format", "json"])
        .arg(format!("--now={NOW}"))
        .arg("--root")
        .arg(root)
        .args(flags)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["code"] == "PCIE_AER_NONFATAL")
}

/// Every plain file of `dir`, with its length and a hash of its bytes. The
/// WAL index (`-shm`) is left out: every SQLite reader writes its read marks
/// there, and it holds no data.
fn files(dir: &Path) -> Vec<(String, usize, u64)> {
    use std::hash::{Hash, Hasher};
    let mut listing: Vec<(String, usize, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .filter(|e| !e.file_name().to_string_lossy().ends_with("-shm"))
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap();
            let mut hash = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hash);
            let name = e.file_name().to_string_lossy().into_owned();
            (name, bytes.len(), hash.finish())
        })
        .collect();
    listing.sort();
    listing
}

#[test]
fn no_record_reads_the_state_and_leaves_the_database_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let config = config(dir.path(), &db);
    let node = fixture::node("healthy");
    assert!(
        !aer_grew(&config, node.root(), &["--use-store"]),
        "a baseline"
    );
    let before = files(dir.path());
    node.write(AER, aer(1));
    assert!(
        aer_grew(&config, node.root(), &["--use-store", "--no-record"]),
        "the saved counter is read"
    );
    assert_eq!(files(dir.path()), before, "and nothing is written");
}

#[test]
fn a_replay_neither_reads_nor_records_the_node_state_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let config = config(dir.path(), &db);
    let node = fixture::node("healthy");
    // The node's own counter, saved.
    assert!(!aer_grew(&config, node.root(), &["--use-store"]));
    let runs = || {
        lemonade_sql::rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .unwrap()
    };
    let recorded = runs();
    // A snapshot whose counter is higher: replayed, its first reading is a
    // baseline, not growth against the live node's counter; no run is added.
    let snapshot = fixture::node("healthy");
    snapshot.write(AER, aer(1));
    assert!(!aer_grew(&config, snapshot.root(), &[]));
    assert_eq!(runs(), recorded);
    // Asked to, the replay carries the node's state and records.
    assert!(aer_grew(&config, snapshot.root(), &["--use-store"]));
    assert_eq!(runs(), recorded + 1);
}
