//! Two runs at once (the timer and a prolog) must not both apply a counter
//! delta: runs that update the store take its lock in turn, so growth seen
//! between runs is reported by exactly one of them and saved once.

use lemonade_tests::fixture;
use std::process::Command;

const AER: &str = "/sys/bus/pci/devices/0000:2a:00.0/aer_dev_nonfatal";

fn aer(total: u64) -> String {
    format!("Undefined 0\nDLP {total}\nSDES 0\nTLP 0\nTOTAL_ERR_NONFATAL {total}\n")
}

#[test]
fn concurrent_runs_report_a_counter_delta_once() {
    let node = fixture::node("healthy");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lemonade.toml");
    let fixture_config = std::fs::read_to_string(fixture::node_config()).unwrap();
    let store = dir.path().join("node.db");
    std::fs::write(
        &config,
        format!(
            "{fixture_config}\n[store]\npath = \"{}\"\nlock_wait_ms = 20000\n",
            store.display()
        ),
    )
    .unwrap();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_healthcheck"))
            .arg("--config")
            .arg(&config)
            .arg("--root")
            .arg(node.root())
            .arg("--use-store")
            .args(["run", "--checks", "pcie", "--format", "json"])
            .spawn()
            .unwrap()
    };
    let first = run().wait_with_output().unwrap();
    assert!(first.status.success());

    // The counter grows once; eight runs start at the same moment.
    node.write(AER, aer(1));
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_healthcheck"))
                .arg("--config")
                .arg(&config)
                .arg("--root")
                .arg(node.root())
                .arg("--use-store")
                .args(["run", "--checks", "pcie", "--format", "json"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut reporting = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let findings = report["findings"].as_array().unwrap();
        assert!(
            !findings.iter().any(|f| f["check"] == "store"),
            "every run got the lock in turn: {findings:#?}"
        );
        if findings.iter().any(|f| f["code"] == "PCIE_AER_NONFATAL") {
            reporting += 1;
        }
    }
    assert_eq!(
        reporting, 1,
        "the growth of one error is reported by exactly one run"
    );

    // All nine runs are recorded, and the saved counter is the new value.
    let conn = lemonade_sql::rusqlite::Connection::open(&store).unwrap();
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 9);
    let state: String = conn
        .query_row(
            "SELECT state FROM check_state WHERE check_name = 'pcie'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["devices"]["0000:2a:00.0"]["nonfatal"], 1, "{state}");
}
