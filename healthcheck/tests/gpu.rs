//! The GPU checks through the real nvml-wrapper, against the fake NVML.
//!
//! Each run is a `healthcheck run` process: the fake reads its scenario once
//! per process, and this is the path a node takes (config, loader, engine,
//! store). Counter deltas and throttle streaks are carried between runs by the
//! node database, as in production.

use healthcheck::finding::Finding;
use healthcheck::Action;
use healthcheck::Severity;
use lemonade_tests::fake_nvml;
use std::path::{Path, PathBuf};
use std::process::Command;

const ALL: &str = "gpu,ecc,nvlink,gpu-pcie,clocks,gpu-procs";
/// An arbitrary fixed "now", so runs that compare counters are minutes apart.
const T0: i64 = 1_795_000_000;

/// A fake node: its own config and node database.
struct Node {
    _dir: tempfile::TempDir,
    config: PathBuf,
}

struct Report {
    json: serde_json::Value,
    findings: Vec<Finding>,
    exit_code: i32,
}

impl Node {
    fn new(extra_toml: &str) -> Node {
        Node::with_gpus(8, extra_toml)
    }

    fn with_gpus(expected: usize, extra_toml: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let config = fake_nvml::node_config(dir.path(), expected, extra_toml);
        Node { _dir: dir, config }
    }

    /// Runs `checks` on `scenario` at `now`, recording the run (and its counters).
    fn run_at(&self, scenario: &Path, checks: &str, now: i64) -> Report {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
        cmd.args(["--config"])
            .arg(&self.config)
            .args([
                "--node", "gpu-test", "run", "--format", "json", "--checks", checks,
            ])
            .arg(format!("--now={now}"))
            .env(fake_nvml::SCENARIO_ENV, scenario);
        run(cmd)
    }

    /// As [`Node::run_at`], with the fake's event log (planted errors, resets).
    fn run_with_events(&self, scenario: &Path, events: &Path, checks: &str, now: i64) -> Report {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
        cmd.args(["--config"])
            .arg(&self.config)
            .args([
                "--node", "gpu-test", "run", "--format", "json", "--checks", checks,
            ])
            .arg(format!("--now={now}"))
            .env(fake_nvml::SCENARIO_ENV, scenario)
            .env(fake_nvml::EVENTS_ENV, events);
        run(cmd)
    }

    fn run(&self, scenario: &str, checks: &str) -> Report {
        self.run_at(&fake_nvml::scenario(scenario), checks, T0)
    }
}

fn run(mut cmd: Command) -> Report {
    let out = cmd.output().expect("run healthcheck");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "healthcheck output is not JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings = serde_json::from_value(json["findings"].clone()).expect("findings");
    Report {
        findings,
        exit_code: out.status.code().unwrap_or(-1),
        json,
    }
}

impl Report {
    fn faults(&self) -> Vec<&Finding> {
        self.findings.iter().filter(|f| !f.is_ok()).collect()
    }

    /// The one fault of the run, which must have this code, severity and entity.
    fn assert_fault(&self, code: &str, severity: Severity, entity: &str) -> &Finding {
        let faults = self.faults();
        assert_eq!(
            faults.len(),
            1,
            "expected only {code} on {entity}, got {:#?}",
            faults
        );
        let f = faults[0];
        assert_eq!(
            (f.code.as_str(), f.severity, f.entity.as_str()),
            (code, severity, entity),
            "{f:#?}"
        );
        f
    }

    fn assert_all_ok(&self) {
        assert!(self.faults().is_empty(), "{:#?}", self.faults());
        assert_eq!(self.exit_code, 0);
    }

    fn timed_out(&self, check: &str) -> bool {
        self.json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == check && c["timed_out"] == true)
    }
}

#[test]
fn a_healthy_node_is_ok_on_every_gpu_with_bus_id_and_uuid() {
    let report = Node::new("").run(fake_nvml::HEALTHY, ALL);
    report.assert_all_ok();
    for check in ALL.split(',') {
        let mine: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.check == check)
            .collect();
        assert_eq!(mine.len(), 8, "{check}: {mine:#?}");
        assert_eq!(mine[3].entity, "gpu3");
        assert_eq!(mine[3].pci_bus_id.as_deref(), Some("0000:5d:00.0"));
        assert_eq!(
            mine[3].uuid.as_deref(),
            Some("GPU-3f6e1c2a-8b4d-4e2f-9a1c-0d5e7b8c1a03")
        );
    }
}

#[test]
fn the_fixture_node_config_finds_nvml_through_the_loader_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = std::fs::read_to_string(lemonade_tests::fixture::node_config()).unwrap();
    if !config.contains("\n[store]") {
        config.push_str(&format!(
            "\n[store]\npath = \"{}\"\n",
            dir.path().join("node.db").display()
        ));
    }
    let path = dir.path().join("lemonade.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
    cmd.arg("--config")
        .arg(&path)
        .args(["run", "--no-record", "--format", "json", "--checks", ALL])
        .env("LD_LIBRARY_PATH", fake_nvml::library_dir())
        .env(
            fake_nvml::SCENARIO_ENV,
            fake_nvml::scenario(fake_nvml::HEALTHY),
        );
    let report = run(cmd);
    report.assert_all_ok();
    assert_eq!(report.findings.len(), 48);
}

/// One test per single-run fault scenario: the check, and the one finding it must give.
macro_rules! fault {
    ($test:ident, $scenario:literal, $check:literal, $code:literal, $severity:ident, $entity:literal) => {
        #[test]
        fn $test() {
            let node = Node::new("");
            node.run(fake_nvml::HEALTHY, $check).assert_all_ok();
            let report = node.run($scenario, $check);
            report.assert_fault($code, Severity::$severity, $entity);
            assert_eq!(report.exit_code, Severity::$severity.exit_code());
        }
    };
}

fault!(
    gpu_lost_is_down,
    "gpu-lost",
    "gpu",
    "GPU_LOST",
    Down,
    "gpu3"
);
fault!(
    reset_required_is_down,
    "reset-required",
    "gpu",
    "GPU_RESET_REQUIRED",
    Down,
    "gpu2"
);
fault!(
    a_corrupt_inforom_is_down,
    "inforom-corrupted",
    "gpu",
    "INFOROM_CORRUPTED",
    Down,
    "gpu6"
);
fault!(
    a_vbios_unlike_its_peers_is_a_warning,
    "vbios-mismatch",
    "gpu",
    "VBIOS_MISMATCH",
    Warning,
    "gpu4"
);
fault!(
    a_volatile_sram_error_is_down,
    "ecc-volatile-sram",
    "ecc",
    "ECC_VOLATILE_UNCORRECTED",
    Down,
    "gpu0"
);
fault!(
    many_corrected_errors_warn,
    "ecc-corrected-high",
    "ecc",
    "ECC_VOLATILE_CORRECTED",
    Warning,
    "gpu2"
);
fault!(
    retired_pages_at_the_limit_drain,
    "retired-pages-limit",
    "ecc",
    "RETIRED_PAGES_LIMIT",
    Drain,
    "gpu5"
);
fault!(
    pending_page_retirement_drains,
    "retired-pages-pending",
    "ecc",
    "RETIRED_PAGES_PENDING",
    Drain,
    "gpu3"
);
fault!(
    a_pending_row_remap_drains,
    "remap-pending",
    "ecc",
    "ROW_REMAP_PENDING",
    Drain,
    "gpu1"
);
fault!(
    an_inactive_nvlink_is_down,
    "nvlink-inactive",
    "nvlink",
    "NVLINK_INACTIVE",
    Down,
    "gpu2"
);
fault!(
    a_busy_gpu_at_a_lower_pcie_gen_drains,
    "pcie-gen-degraded",
    "gpu-pcie",
    "PCIE_GEN_DEGRADED",
    Drain,
    "gpu6"
);
fault!(
    a_narrow_pcie_link_drains,
    "pcie-width-degraded",
    "gpu-pcie",
    "PCIE_WIDTH_DEGRADED",
    Drain,
    "gpu7"
);
fault!(
    hw_slowdown_warns,
    "throttle-hw-slowdown",
    "clocks",
    "CLOCKS_THROTTLED",
    Warning,
    "gpu5"
);
fault!(
    power_brake_warns,
    "throttle-power-brake",
    "clocks",
    "CLOCKS_THROTTLED",
    Warning,
    "gpu0"
);
fault!(
    a_hot_gpu_drains,
    "temperature-high",
    "clocks",
    "GPU_TEMPERATURE_HIGH",
    Drain,
    "gpu3"
);
fault!(
    a_gpu_over_its_own_slowdown_threshold_drains_below_the_fixed_limit,
    "temperature-own-slowdown",
    "clocks",
    "GPU_TEMPERATURE_HIGH",
    Drain,
    "gpu5"
);
fault!(
    sw_thermal_slowdown_warns,
    "throttle-sw-thermal",
    "clocks",
    "CLOCKS_THROTTLED",
    Warning,
    "gpu2"
);
fault!(
    stray_processes_drain,
    "stray-processes",
    "gpu-procs",
    "GPU_STRAY_PROCESSES",
    Drain,
    "gpu1"
);
fault!(
    memory_left_in_use_drains,
    "memory-used",
    "gpu-procs",
    "GPU_MEMORY_USED",
    Drain,
    "gpu6"
);

#[test]
fn hw_thermal_slowdown_warns_for_the_throttle_and_the_temperature() {
    let report = Node::new("").run("throttle-hw-thermal", "clocks");
    let codes: Vec<_> = report
        .faults()
        .iter()
        .map(|f| (f.code.as_str(), f.severity, f.entity.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            ("CLOCKS_THROTTLED", Severity::Warning, "gpu4"),
            ("GPU_TEMPERATURE_HIGH", Severity::Warning, "gpu4")
        ]
    );
    assert_eq!(report.faults()[0].actual.as_deref(), Some("hw_thermal"));
}

#[test]
fn a_missing_gpu_is_down_and_named_by_bus_id() {
    let node = Node::new("expected_bus_ids = [\"0000:18:00.0\", \"0000:ab:00.0\"]");
    let report = node.run("gpu-count-low", "gpu");
    let faults: Vec<_> = report
        .faults()
        .iter()
        .map(|f| (f.code.clone(), f.severity, f.entity.clone()))
        .collect();
    assert_eq!(
        faults,
        [
            (
                "GPU_COUNT_LOW".to_string(),
                Severity::Down,
                "node".to_string()
            ),
            (
                "GPU_MISSING".to_string(),
                Severity::Down,
                "0000:ab:00.0".to_string()
            ),
        ]
    );
    assert_eq!(report.faults()[0].actual.as_deref(), Some("7"));
}

#[test]
fn a_driver_other_than_configured_warns() {
    let node = Node::new("expected_driver_version = \"550.90.07\"");
    node.run(fake_nvml::HEALTHY, "gpu").assert_all_ok();
    node.run("driver-mismatch", "gpu").assert_fault(
        "DRIVER_VERSION_MISMATCH",
        Severity::Warning,
        "node",
    );
}

#[test]
fn persistence_mode_off_warns_on_every_gpu() {
    let report = Node::new("").run("persistence-off", "gpu");
    assert_eq!(report.faults().len(), 8);
    assert!(report
        .faults()
        .iter()
        .all(|f| f.code == "PERSISTENCE_MODE_OFF" && f.severity == Severity::Warning));
}

#[test]
fn the_other_checks_call_a_lost_gpu_unknown_and_judge_the_rest() {
    let report = Node::new("").run("gpu-lost", "ecc,nvlink,gpu-pcie,clocks,gpu-procs");
    let faults = report.faults();
    assert_eq!(faults.len(), 5, "{faults:#?}");
    assert!(faults.iter().all(|f| f.code == "GPU_INACCESSIBLE"
        && f.severity == Severity::Unknown
        && f.entity == "gpu3"));
    assert_eq!(report.findings.len(), 40);
}

// ECC as the driver counts it: the fake raises the volatile and the aggregate
// counter for an uncorrectable error, and a reset clears only the volatile one.

/// The codes, severities, actions and entities of a run's faults.
fn faults_of(report: &Report) -> Vec<(&str, Severity, Action, &str)> {
    report
        .faults()
        .iter()
        .map(|f| (f.code.as_str(), f.severity, f.action, f.entity.as_str()))
        .collect()
}

#[test]
fn a_fresh_uncorrectable_error_asks_for_a_reset_of_its_gpu() {
    let node = Node::new("");
    node.run(fake_nvml::HEALTHY, "ecc").assert_all_ok();
    let report = node.run("ecc-volatile-dbe", "ecc");
    let fresh = report.assert_fault("ECC_VOLATILE_UNCORRECTED", Severity::Down, "gpu1");
    assert_eq!(fresh.action, Action::ResetGpu);
    // The row remap the error left pending is the same fault, said in it.
    assert_eq!(
        fresh.actual.as_deref(),
        Some("dram 2, sram 0; row remap pending")
    );
    assert_eq!(report.exit_code, 2);
}

#[test]
fn a_past_remapped_error_is_ok_and_shown_as_history() {
    let node = Node::new("");
    let first = node.run("ecc-past-error", "ecc");
    first.assert_all_ok();
    let gpu5 = first.findings.iter().find(|f| f.entity == "gpu5").unwrap();
    assert_eq!(
        gpu5.actual.as_deref(),
        Some("2 uncorrected ECC errors in its lifetime; rows remapped: 2 for uncorrected, 0 for corrected errors")
    );
    node.run_at(&fake_nvml::scenario("ecc-past-error"), "ecc", T0 + 300)
        .assert_all_ok();
    // `healthcheck history` shows it with the runs it lists.
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&node.config)
        .args([
            "history",
            "--all",
            "--since",
            "2020-01-01",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let history: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown: Vec<&serde_json::Value> = history["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["findings"].as_array().unwrap())
        .collect();
    assert_eq!(shown.len(), 2, "one per run: {history:#}");
    assert_eq!(
        (shown[0]["entity"].as_str(), shown[0]["severity"].as_str()),
        (Some("gpu5"), Some("ok"))
    );
    assert_eq!(shown[0]["actual"], gpu5.actual.as_deref().unwrap());
}

#[test]
fn a_site_limit_on_the_lifetime_count_drains_for_repair() {
    let node = Node::new("[checks.ecc]\naggregate_uncorrected_max = 0\n");
    let report = node.run("ecc-past-error", "ecc");
    assert_eq!(
        faults_of(&report),
        [(
            "ECC_AGGREGATE_UNCORRECTED",
            Severity::Drain,
            Action::Repair,
            "gpu5"
        )]
    );
}

#[test]
fn a_row_remap_failure_is_down_for_repair() {
    let report = Node::new("").run("remap-failure", "ecc");
    assert_eq!(
        faults_of(&report),
        [("ROW_REMAP_FAILURE", Severity::Down, Action::Repair, "gpu4")]
    );
}

#[test]
fn remapped_rows_over_a_site_limit_warn_and_are_history_without_one() {
    Node::new("")
        .run("remapped-rows-high", "ecc")
        .assert_all_ok();
    let report =
        Node::new("[checks.ecc]\nremapped_rows_max = 10\n").run("remapped-rows-high", "ecc");
    report.assert_fault("ROWS_REMAPPED_HIGH", Severity::Warning, "gpu6");
}

#[test]
fn aggregate_growth_after_a_reboot_asks_for_a_reset_then_the_remap_state_decides() {
    let node = Node::new("");
    let past = fake_nvml::scenario("ecc-past-error");
    node.run(fake_nvml::HEALTHY, "ecc").assert_all_ok();
    // The error and the reboot came between two runs: only the aggregate count shows it.
    let report = node.run_at(&past, "ecc", T0 + 300);
    assert_eq!(
        faults_of(&report),
        [(
            "ECC_AGGREGATE_GROWTH",
            Severity::Down,
            Action::ResetGpu,
            "gpu5"
        )]
    );
    // After the reset, the count is steady and the remap applied: history.
    node.run_at(&past, "ecc", T0 + 600).assert_all_ok();
}

#[test]
fn a_reset_clears_the_volatile_count_and_leaves_the_aggregate_as_history() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    std::fs::write(&events, "ecc-unc 1 2\n").unwrap();
    let node = Node::new("");
    let healthy = fake_nvml::scenario(fake_nvml::HEALTHY);
    node.run(fake_nvml::HEALTHY, "ecc").assert_all_ok();
    let fresh = node.run_with_events(&healthy, &events, "ecc", T0 + 300);
    fresh.assert_fault("ECC_VOLATILE_UNCORRECTED", Severity::Down, "gpu1");
    // What a reset command appends; the fake replays the log in each process.
    std::fs::write(&events, "ecc-unc 1 2\nreset 1\n").unwrap();
    let after = node.run_with_events(&healthy, &events, "ecc", T0 + 600);
    after.assert_all_ok();
    let gpu1 = after.findings.iter().find(|f| f.entity == "gpu1").unwrap();
    assert!(
        gpu1.actual
            .as_deref()
            .unwrap()
            .starts_with("2 uncorrected ECC errors in its lifetime"),
        "{gpu1:?}"
    );
    // Memory that keeps failing raises the error again after each reset.
    std::fs::write(&events, "ecc-unc-sticky 1 2\nreset 1\n").unwrap();
    let again = node.run_with_events(&healthy, &events, "ecc", T0 + 900);
    assert_eq!(faults_of(&again)[0].0, "ECC_VOLATILE_UNCORRECTED");
}

/// Runs `base` then `after` five minutes later on one node; returns the second run.
fn counters_between(node: &Node, base: &Path, after: &Path, checks: &str) -> Report {
    node.run_at(base, checks, T0).assert_all_ok();
    node.run_at(after, checks, T0 + 300)
}

#[test]
fn nvlink_replay_and_recovery_growth_drain() {
    let node = Node::new("");
    let healthy = fake_nvml::scenario(fake_nvml::HEALTHY);
    let report = counters_between(
        &node,
        &healthy,
        &fake_nvml::scenario("nvlink-replay"),
        "nvlink",
    );
    let codes: Vec<_> = report
        .faults()
        .iter()
        .map(|f| (f.code.as_str(), f.severity, f.entity.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            ("NVLINK_REPLAY_GROWTH", Severity::Drain, "gpu3"),
            ("NVLINK_RECOVERY_GROWTH", Severity::Drain, "gpu3")
        ]
    );
    assert_eq!(report.faults()[0].actual.as_deref(), Some("link 7 +14"));
    // Counters that stay where they are are not growth.
    node.run_at(&fake_nvml::scenario("nvlink-replay"), "nvlink", T0 + 600)
        .assert_all_ok();
}

#[test]
fn a_counter_seen_for_the_first_time_is_only_a_baseline() {
    Node::new("").run("nvlink-replay", "nvlink").assert_all_ok();
    Node::new("").run("pcie-replay", "gpu-pcie").assert_all_ok();
}

#[test]
fn nvlink_crc_above_the_rate_drains_below_it_warns() {
    let healthy = fake_nvml::scenario(fake_nvml::HEALTHY);
    let fast = counters_between(
        &Node::new(""),
        &healthy,
        &fake_nvml::scenario("nvlink-crc"),
        "nvlink",
    );
    fast.assert_fault("NVLINK_CRC_RATE", Severity::Drain, "gpu0");
    let slow = counters_between(
        &Node::new(""),
        &healthy,
        &fake_nvml::scenario("nvlink-crc-slow"),
        "nvlink",
    );
    slow.assert_fault("NVLINK_CRC_GROWTH", Severity::Warning, "gpu0");
}

#[test]
fn pcie_replays_over_the_lane_budget_warn_and_within_it_do_not() {
    let healthy = fake_nvml::scenario(fake_nvml::HEALTHY);
    // Gen5 x16: ceil(1.92 × 16) = 31 per minute, 155 in five minutes.
    let over = counters_between(
        &Node::new(""),
        &healthy,
        &fake_nvml::scenario("pcie-replay"),
        "gpu-pcie",
    );
    let f = over.assert_fault("PCIE_REPLAY_GROWTH", Severity::Warning, "gpu2");
    assert_eq!(f.actual.as_deref(), Some("900"));
    let dir = tempfile::tempdir().unwrap();
    let within = fake_nvml::derive(
        dir.path(),
        "within",
        fake_nvml::HEALTHY,
        r#""gpus": {"2": {"pcie_replay": 150}}"#,
    );
    counters_between(&Node::new(""), &healthy, &within, "gpu-pcie").assert_all_ok();
}

#[test]
fn throttling_over_three_runs_drains_and_stops_when_the_throttle_does() {
    let node = Node::new("");
    let throttled = fake_nvml::scenario("throttle-hw-slowdown");
    let codes: Vec<String> = (0..3)
        .map(|i| {
            let r = node.run_at(&throttled, "clocks", T0 + i * 300);
            r.faults()[0].code.clone()
        })
        .collect();
    assert_eq!(
        codes,
        [
            "CLOCKS_THROTTLED",
            "CLOCKS_THROTTLED",
            "CLOCKS_THROTTLED_SUSTAINED"
        ]
    );
    let last = node.run_at(&throttled, "clocks", T0 + 900);
    last.assert_fault("CLOCKS_THROTTLED_SUSTAINED", Severity::Drain, "gpu5");
    node.run_at(
        &fake_nvml::scenario(fake_nvml::HEALTHY),
        "clocks",
        T0 + 1200,
    )
    .assert_all_ok();
    node.run_at(&throttled, "clocks", T0 + 1500).assert_fault(
        "CLOCKS_THROTTLED",
        Severity::Warning,
        "gpu5",
    );
}

#[test]
fn a_blocking_nvml_call_becomes_unknown_at_the_deadline_and_spares_the_other_checks() {
    let node = Node::new("[checks.clocks]\ndeadline_s = 0.5");
    let started = std::time::Instant::now();
    let report = node.run("blocking-call", ALL);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    report.assert_fault("CHECK_TIMEOUT", Severity::Unknown, "node");
    assert_eq!(report.faults()[0].check, "clocks");
    assert!(report.timed_out("clocks"));
    assert_eq!(report.exit_code, 3);
    assert_eq!(report.findings.len(), 5 * 8 + 1);
}

#[test]
fn a_blocking_nvml_init_makes_every_gpu_check_unknown_not_down() {
    let deadlines: String = ["gpu", "ecc", "nvlink", "gpu_pcie", "clocks", "gpu_procs"]
        .iter()
        .map(|c| format!("[checks.{c}]\ndeadline_s = 0.5\n"))
        .collect();
    // `[checks.gpu]` is already open in the generated config: set its deadline there.
    let node = Node::new(&deadlines.replacen("[checks.gpu]\n", "", 1));
    let report = node.run("blocking-init", ALL);
    assert_eq!(report.findings.len(), 6);
    assert!(report
        .findings
        .iter()
        .all(|f| f.code == "CHECK_TIMEOUT" && f.severity == Severity::Unknown));
    assert_eq!(report.exit_code, 3);
}

#[test]
fn a_missing_library_on_a_gpu_node_is_down_for_the_gpu_check_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = \"{}\"\n[checks.gpu]\nexpected_count = 8\nlibrary_path = \"{}\"\n",
            dir.path().join("node.db").display(),
            dir.path().join("missing/libnvidia-ml.so.1").display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
    cmd.arg("--config")
        .arg(&config)
        .args(["run", "--format", "json", "--checks", "gpu,ecc"]);
    let report = run(cmd);
    let faults: Vec<_> = report
        .faults()
        .iter()
        .map(|f| (f.check.as_str(), f.code.as_str(), f.severity))
        .collect();
    assert_eq!(
        faults,
        [
            ("gpu", "GPU_DRIVER_MISSING", Severity::Down),
            ("ecc", "NVML_UNAVAILABLE", Severity::Unknown)
        ]
    );
    assert_eq!(report.exit_code, 2);
}

#[test]
fn a_driver_that_is_not_loaded_is_down() {
    Node::new("").run("driver-not-loaded", "gpu").assert_fault(
        "GPU_DRIVER_MISSING",
        Severity::Down,
        "node",
    );
}

#[test]
fn a_node_expecting_no_gpus_skips_quietly_without_loading_nvml() {
    let node = Node::with_gpus(0, "");
    // The scenario would fail every check: it is never read.
    let report = node.run("gpu-lost", ALL);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.exit_code, 0);
}

#[test]
fn a_snapshot_keeps_the_nvml_readings_and_replays_them_with_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let planted = fake_nvml::derive(
        dir.path(),
        "planted",
        "gpu-lost",
        r#""gpus": {"1": {"ecc_unc_vol_dram": 1, "remap_unc": 2, "remap_pending": 1},
                    "2": {"nvlink_inactive_mask": 3, "pcie_width": 4},
                    "4": {"recovery_action": 4},
                    "6": {"clock_reasons": 8, "temperature": 86, "vbios": "96.00.61.00.01"}}"#,
    );
    let node = Node::new(&gpu_checks_only(""));
    let direct = node.run_at(&planted, "gpu,ecc,nvlink,gpu-pcie,clocks", T0);
    assert!(direct.faults().len() >= 9, "{:#?}", direct.faults());
    assert!(direct
        .faults()
        .iter()
        .any(|f| f.code == "RECOVERY_DRAIN_AND_RESET" && f.entity == "gpu4"));

    let captured = snapshot(&node, &planted, dir.path());

    let replay = Node::new("").run_at(&captured, "gpu,ecc,nvlink,gpu-pcie,clocks", T0);
    let key = |r: &Report| -> Vec<(String, String, String, Severity)> {
        r.findings
            .iter()
            .map(|f| {
                (
                    f.check.clone(),
                    f.entity.clone(),
                    f.code.clone(),
                    f.severity,
                )
            })
            .collect()
    };
    assert_eq!(key(&replay), key(&direct));
}

/// `healthcheck snapshot` on `scenario`; returns the unpacked NVML readings.
fn snapshot(node: &Node, scenario: &Path, dir: &Path) -> PathBuf {
    let archive = dir.join("snap.tar.gz");
    let status = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&node.config)
        .arg("snapshot")
        .arg(&archive)
        .env(fake_nvml::SCENARIO_ENV, scenario)
        .status()
        .unwrap();
    assert!(status.success());
    let unpacked = dir.join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(tar.success());
    let captured = unpacked.join(".lemonade/nvml.json");
    assert!(captured.is_file());
    captured
}

/// Config that leaves only the GPU checks enabled (a snapshot runs every enabled check).
fn gpu_checks_only(extra: &str) -> String {
    let others: String = [
        "xid", "pcie", "ib", "mounts", "memory", "cpus", "block", "services", "firmware", "fabric",
    ]
    .iter()
    .map(|c| format!("[checks.{c}]\nenabled = false\n"))
    .collect();
    format!("{extra}\n{others}")
}

#[test]
fn a_snapshot_of_a_wedged_driver_ends_and_replays_as_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::new(&gpu_checks_only(
        "deadline_s = 0.5\n[engine]\ncheck_deadline_s = 0.5",
    ));
    let captured = snapshot(&node, &fake_nvml::scenario("blocking-init"), dir.path());
    let text = std::fs::read_to_string(&captured).unwrap();
    assert!(text.contains("\"block\": \"nvmlInit_v2\""), "{text}");
    let replay = node.run_at(&captured, "gpu", T0);
    replay.assert_fault("CHECK_TIMEOUT", Severity::Unknown, "node");
}

/// A node config that says nothing about the GPU count: the store and the
/// NVML library (`library`) only.
fn config_without_a_count(dir: &Path, library: &Path) -> PathBuf {
    let config = dir.join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = \"{}\"\n[checks.gpu]\nlibrary_path = \"{}\"\n",
            dir.join("node.db").display(),
            library.display()
        ),
    )
    .unwrap();
    config
}

fn run_on_fixture(config: &Path, root: &Path, scenario: &str) -> Report {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
    cmd.arg("--config")
        .arg(config)
        .arg("--root")
        .arg(root)
        .args(["run", "--no-record", "--format", "json", "--checks", "gpu"])
        .env(fake_nvml::SCENARIO_ENV, fake_nvml::scenario(scenario));
    run(cmd)
}

#[test]
fn without_a_count_nvml_must_see_every_gpu_on_the_pci_bus() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_without_a_count(dir.path(), &fake_nvml::library());
    // The fixture's PCI bus has 8 NVIDIA 3D controllers.
    let node = lemonade_tests::fixture::node("healthy");
    let healthy = run_on_fixture(&config, node.root(), "h100-healthy");
    assert!(healthy.faults().is_empty(), "{:?}", healthy.faults());
    assert_eq!(healthy.findings.len(), 8, "one ok finding per GPU");
    let low = run_on_fixture(&config, node.root(), "gpu-count-low");
    let faults: Vec<_> = low
        .faults()
        .iter()
        .map(|f| (f.code.as_str(), f.expected.as_deref(), f.actual.as_deref()))
        .collect();
    assert_eq!(faults, [("GPU_COUNT_LOW", Some("8"), Some("7"))]);
}

#[test]
fn a_gpu_node_without_config_and_without_a_driver_is_not_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_without_a_count(dir.path(), &dir.path().join("missing/libnvidia-ml.so.1"));
    let node = lemonade_tests::fixture::node("healthy");
    let report = run_on_fixture(&config, node.root(), "h100-healthy");
    let faults: Vec<_> = report
        .faults()
        .iter()
        .map(|f| (f.code.as_str(), f.severity))
        .collect();
    assert_eq!(faults, [("GPU_DRIVER_MISSING", Severity::Down)]);
    // A node whose PCI bus has no NVIDIA GPU is a CPU node: nothing to check.
    let cpu = tempfile::tempdir().unwrap();
    let report = run_on_fixture(&config, cpu.path(), "h100-healthy");
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn healthcheck_list_shows_the_resolved_gpu_count() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_without_a_count(dir.path(), &fake_nvml::library());
    let node = lemonade_tests::fixture::node("healthy");
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(node.root())
        .arg("list")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"expected_count\":8"), "{text}");
}

#[test]
fn a_fresh_l2_error_on_a_volta_gpu_without_an_sram_location_is_down_on_the_first_run() {
    // The node's first run: no baseline, so only the volatile total can say
    // the error is fresh (issue 48).
    let node = Node::new("");
    let report = node.run("ecc-volatile-l2-volta", "ecc");
    report.assert_fault("ECC_VOLATILE_UNCORRECTED", Severity::Down, "gpu2");
    assert_eq!(report.exit_code, Severity::Down.exit_code());
}
