//! Grace C2C links (NVML fields 170, 171, 231-233) through the real
//! nvml-wrapper and the fake NVML: a healthy Grace tray, a link down, error
//! counters that grow between runs, an H100 without C2C, and a failing read.

use healthcheck::finding::Finding;
use healthcheck::{Action, Severity};
use lemonade_tests::fake_nvml;
use std::path::{Path, PathBuf};
use std::process::Command;

const TRAY: &str = "gb200-c2c-tray";
const T0: i64 = 1_790_000_000;

/// A node whose runs are recorded in its own store, so counters carry over.
struct Node {
    dir: tempfile::TempDir,
    config: PathBuf,
}

struct Run {
    findings: Vec<Finding>,
    exit_code: i32,
}

impl Node {
    fn new(gpus: usize) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let config = fake_nvml::node_config(dir.path(), gpus, "");
        Node { dir, config }
    }

    /// The tray with `fields` laid over it.
    fn tray(&self, name: &str, fields: &str) -> PathBuf {
        fake_nvml::derive(self.dir.path(), name, TRAY, fields)
    }

    /// `healthcheck run --checks gpu` on `scenario` at `now`, recorded.
    fn run(&self, scenario: &Path, now: i64) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
            .arg("--config")
            .arg(&self.config)
            .args([
                "--node", "tray1", "run", "--format", "json", "--checks", "gpu",
            ])
            .arg(format!("--now={now}"))
            .env(fake_nvml::SCENARIO_ENV, scenario)
            .output()
            .expect("run healthcheck");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        Run {
            findings: serde_json::from_value(json["findings"].clone()).unwrap(),
            exit_code: out.status.code().unwrap_or(-1),
        }
    }
}

impl Run {
    fn faults(&self) -> Vec<(&str, Severity, Action, &str)> {
        self.findings
            .iter()
            .filter(|f| !f.is_ok())
            .map(|f| (f.code.as_str(), f.severity, f.action, f.entity.as_str()))
            .collect()
    }

    fn actual_of(&self, code: &str) -> Option<&str> {
        let f = self.findings.iter().find(|f| f.code == code)?;
        f.actual.as_deref()
    }

    fn ok_entities(&self) -> Vec<&str> {
        let ok = self.findings.iter().filter(|f| f.is_ok());
        ok.map(|f| f.entity.as_str()).collect()
    }
}

#[test]
fn a_healthy_grace_tray_with_active_links_and_still_counters_is_ok() {
    let node = Node::new(4);
    let first = node.run(&fake_nvml::scenario(TRAY), T0);
    assert!(first.faults().is_empty(), "{:#?}", first.findings);
    assert_eq!(first.ok_entities(), ["gpu0", "gpu1", "gpu2", "gpu3"]);
    assert_eq!(first.exit_code, 0);
    let again = node.run(&fake_nvml::scenario(TRAY), T0 + 300);
    assert!(again.faults().is_empty(), "{:#?}", again.findings);
}

#[test]
fn an_inactive_c2c_link_drains_its_gpu_and_asks_a_human() {
    let node = Node::new(4);
    let down = node.tray(
        "c2c-down",
        r#""gpus": {"2": {"c2c_link_status": {"1": 0}}}"#,
    );
    let r = node.run(&down, T0);
    assert_eq!(
        r.faults(),
        [(
            "C2C_LINK_DOWN",
            Severity::Drain,
            Action::Investigate,
            "gpu2"
        )]
    );
    assert_eq!(r.actual_of("C2C_LINK_DOWN"), Some("link 1 status 0"));
    assert_eq!(r.ok_entities(), ["gpu0", "gpu1", "gpu3"]);
    assert_ne!(r.exit_code, 0);
}

#[test]
fn c2c_error_counters_that_grow_between_runs_warn_with_the_counter_and_its_growth() {
    let node = Node::new(4);
    let grown = node.tray(
        "c2c-replay",
        r#""gpus": {"1": {"c2c_error_replay": {"0": 12}, "c2c_error_intr": 3}}"#,
    );
    // Counters seen for the first time are only a baseline.
    let fresh = Node::new(4);
    assert!(fresh.run(&grown, T0).faults().is_empty());
    assert!(node.run(&fake_nvml::scenario(TRAY), T0).faults().is_empty());
    let r = node.run(&grown, T0 + 300);
    assert_eq!(
        r.faults(),
        [(
            "C2C_LINK_ERRORS",
            Severity::Warning,
            Action::Investigate,
            "gpu1"
        )]
    );
    assert_eq!(
        r.actual_of("C2C_LINK_ERRORS"),
        Some("link 0 CRC +3, link 0 replay +12, link 1 CRC +3")
    );
    // Counters that stay where they are are not growth.
    let still = node.run(&grown, T0 + 600);
    assert!(still.faults().is_empty(), "{:#?}", still.findings);
}

#[test]
fn an_h100_without_c2c_reports_nothing_about_c2c() {
    let node = Node::new(8);
    let r = node.run(&fake_nvml::scenario(fake_nvml::HEALTHY), T0);
    assert!(r.faults().is_empty(), "{:#?}", r.findings);
    assert_eq!(r.ok_entities().len(), 8);
    // A driver that answers a link count of 0 is the same: no C2C.
    let none = fake_nvml::derive(
        node.dir.path(),
        "h100-zero",
        fake_nvml::HEALTHY,
        r#""defaults": {"c2c_link_count": 0, "c2c_link_status": "UNKNOWN"}"#,
    );
    let r = node.run(&none, T0 + 300);
    assert!(r.faults().is_empty(), "{:#?}", r.findings);
}

#[test]
fn a_failing_c2c_read_is_unknown_for_that_reading_never_a_drain() {
    let node = Node::new(4);
    let failing = node.tray(
        "c2c-failing",
        r#""gpus": {"3": {"c2c_error_intr": {"1": "TIMEOUT"}}, "0": {"c2c_link_count": "UNKNOWN"}}"#,
    );
    let r = node.run(&failing, T0);
    assert_eq!(
        r.faults(),
        [
            (
                "C2C_UNAVAILABLE",
                Severity::Unknown,
                Action::Investigate,
                "gpu0"
            ),
            (
                "C2C_UNAVAILABLE",
                Severity::Unknown,
                Action::Investigate,
                "gpu3"
            ),
        ]
    );
    let actual: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "C2C_UNAVAILABLE")
        .map(|f| f.actual.as_deref().unwrap_or(""))
        .collect();
    assert!(actual[0].starts_with("link count: "), "{actual:?}");
    assert!(actual[1].starts_with("link 1 CRC counter: "), "{actual:?}");
    // The GPUs still carry their ok: nothing else is wrong with them.
    assert_eq!(r.ok_entities(), ["gpu0", "gpu1", "gpu2", "gpu3"]);
}
