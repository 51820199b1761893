//! The driver's recovery action (NVML field 230) on a GB200-like compute
//! tray of 4 GPUs, through the real nvml-wrapper and the fake NVML: each
//! action's code, severity and repair rung; a driver without the field; the
//! `recovery` event, its XID 154 line, and a reset that clears it.

use healthcheck::codes;
use healthcheck::finding::Finding;
use healthcheck::{Action, Severity};
use lemonade_tests::fake_nvml;
use std::path::Path;
use std::process::Command;

const TRAY: &str = "gb200-4gpu-tray";

struct Run {
    findings: Vec<Finding>,
    exit_code: i32,
}

impl Run {
    fn faults(&self) -> Vec<&Finding> {
        self.findings.iter().filter(|f| !f.is_ok()).collect()
    }
}

/// `healthcheck run --checks <checks>` on `scenario`, a node of 4 GPUs, with
/// the fake's event log and kernel log when given.
fn run(dir: &Path, scenario: &Path, checks: &str, logs: Option<(&Path, &Path)>) -> Run {
    let config = fake_nvml::node_config(dir, 4, "");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--node", "tray1", "run", "--no-record", "--format", "json"])
        .args(["--checks", checks])
        .env(fake_nvml::SCENARIO_ENV, scenario);
    if let Some((events, kmsg)) = logs {
        cmd.arg("--kmsg-file")
            .arg(kmsg)
            .env(fake_nvml::EVENTS_ENV, events)
            .env(KMSG_ENV, kmsg);
    }
    let out = cmd.output().expect("run healthcheck");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    Run {
        findings: serde_json::from_value(json["findings"].clone()).unwrap(),
        exit_code: out.status.code().unwrap_or(-1),
    }
}

/// The findings of the `gpu` check in a run of a whole profile (`quick`,
/// the prolog's; `periodic`) on `scenario`.
fn profile_gpu_findings(dir: &Path, scenario: &Path, profile: &str) -> Vec<Finding> {
    let config = fake_nvml::node_config(dir, 4, "");
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .args(["--node", "tray1", "run", "--no-record", "--format", "json"])
        .args(["--profile", profile])
        .env(fake_nvml::SCENARIO_ENV, scenario)
        .output()
        .expect("run healthcheck");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let all: Vec<Finding> = serde_json::from_value(json["findings"].clone()).unwrap();
    all.into_iter().filter(|f| f.check == "gpu").collect()
}

/// Where the fake writes the driver's XID 154 lines (kmsg record format).
const KMSG_ENV: &str = "LEMONADE_FAKE_NVML_KMSG";

/// The tray with `fields` laid over it.
fn tray(dir: &Path, name: &str, fields: &str) -> std::path::PathBuf {
    fake_nvml::derive(dir, name, TRAY, fields)
}

#[test]
fn a_healthy_tray_reads_none_on_every_gpu_and_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &fake_nvml::scenario(TRAY), "gpu", None);
    assert!(r.faults().is_empty(), "{:#?}", r.faults());
    assert_eq!(r.findings.len(), 4, "{:#?}", r.findings);
    assert_eq!(r.exit_code, 0);
}

#[test]
fn each_recovery_action_gives_its_code_severity_and_rung_on_its_gpu_only() {
    let want = [
        (
            1,
            "RECOVERY_GPU_RESET",
            Severity::Down,
            Action::ResetGpu,
            "reset-gpu",
        ),
        (
            2,
            "RECOVERY_NODE_REBOOT",
            Severity::Down,
            Action::Reboot,
            "reboot",
        ),
        (
            3,
            "RECOVERY_DRAIN_P2P",
            Severity::Drain,
            Action::None,
            "none (resumed",
        ),
        (
            4,
            "RECOVERY_DRAIN_AND_RESET",
            Severity::Drain,
            Action::ResetGpu,
            "reset-gpu",
        ),
        (
            5,
            "RECOVERY_IMEX_DOMAIN",
            Severity::Drain,
            Action::RestartImex,
            "restart-imex",
        ),
        (
            6,
            "RECOVERY_ACTION_UNRECOGNISED",
            Severity::Drain,
            Action::Investigate,
            "none (human)",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (value, code, severity, action, rung) in want {
        let fields = format!(r#""gpus": {{"2": {{"recovery_action": {value}}}}}"#);
        let scenario = tray(dir.path(), &format!("action-{value}"), &fields);
        let r = run(dir.path(), &scenario, "gpu", None);
        let faults = r.faults();
        assert_eq!(faults.len(), 1, "{value}: {faults:#?}");
        let f = faults[0];
        assert_eq!(
            (f.code.as_str(), f.severity, f.action, f.entity.as_str()),
            (code, severity, action, "gpu2"),
            "{value}: {f:#?}"
        );
        assert_eq!(f.pci_bus_id.as_deref(), Some("0018:01:00.0"), "{f:#?}");
        let entry = codes::lookup(code).unwrap_or_else(|| panic!("{code} has no entry"));
        assert!(entry.rung().starts_with(rung), "{code}: {}", entry.rung());
        // The other three GPUs are ok.
        let ok = r.findings.iter().filter(|f| f.is_ok()).count();
        assert_eq!(ok, 3, "{value}: {:#?}", r.findings);
    }
}

#[test]
fn a_driver_without_the_field_is_unknown_on_each_gpu_and_never_drains() {
    let dir = tempfile::tempdir().unwrap();
    // The value's own return code (a driver with the call, not the field),
    // and the whole call failing (a driver without it).
    let per_value = tray(
        dir.path(),
        "no-field",
        r#""defaults": {"recovery_action": "NOT_SUPPORTED"}"#,
    );
    let whole_call = tray(
        dir.path(),
        "no-call",
        r#""error.nvmlDeviceGetFieldValues": "NOT_SUPPORTED""#,
    );
    for scenario in [per_value, whole_call] {
        let r = run(dir.path(), &scenario, "gpu", None);
        let faults = r.faults();
        assert_eq!(faults.len(), 4, "{faults:#?}");
        for f in faults {
            assert_eq!(
                (f.code.as_str(), f.severity, f.action),
                (
                    "RECOVERY_ACTION_UNAVAILABLE",
                    Severity::Unknown,
                    Action::Investigate
                ),
                "{f:#?}"
            );
        }
        // The GPUs' own ok findings stay (they carry the VBIOS to the export).
        assert_eq!(r.findings.iter().filter(|f| f.is_ok()).count(), 4);
        assert!(
            r.findings.iter().all(|f| f.severity <= Severity::Unknown),
            "{:#?}",
            r.findings
        );
    }
}

#[test]
fn a_recovery_event_logs_its_xid_154_once_and_a_reset_clears_the_action() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&events, "recovery 1 1\n").unwrap();
    std::fs::write(&kmsg, "").unwrap();
    let scenario = fake_nvml::scenario(TRAY);
    let logs = Some((events.as_path(), kmsg.as_path()));

    // NVML first (it writes the line), then the kernel log: the checks of
    // one run go in parallel. The second process replays the event, but the
    // driver logged the change once.
    run(dir.path(), &scenario, "gpu", logs);
    let r = run(dir.path(), &scenario, "gpu,xid", logs);
    let gpu = r.faults().into_iter().find(|f| f.check == "gpu").cloned();
    let gpu = gpu.unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(
        (gpu.code.as_str(), gpu.entity.as_str(), gpu.action),
        ("RECOVERY_GPU_RESET", "gpu1", Action::ResetGpu)
    );
    let xid = r
        .faults()
        .into_iter()
        .find(|f| f.code == "XID_154")
        .cloned();
    let xid = xid.unwrap_or_else(|| panic!("no XID 154: {:#?}", r.findings));
    assert_eq!(
        (xid.severity, xid.action),
        (Severity::Down, Action::ResetGpu)
    );
    let lines = std::fs::read_to_string(&kmsg).unwrap();
    assert_eq!(
        lines,
        "3,900001,900001000,-;NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed \
         from 0x0 (None) to 0x1 (GPU Reset Required)\n"
    );

    // The reset command's line: the action is NONE again.
    std::fs::write(&events, "recovery 1 1\nreset 1\n").unwrap();
    let r = run(dir.path(), &scenario, "gpu", logs);
    assert!(r.faults().is_empty(), "{:#?}", r.faults());
}

#[test]
fn a_reset_does_not_clear_a_reboot_and_a_reboot_clears_every_action() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let kmsg = dir.path().join("kmsg");
    let scenario = fake_nvml::scenario(TRAY);
    let logs = Some((events.as_path(), kmsg.as_path()));
    std::fs::write(&events, "recovery 0 2\nrecovery 3 3\nreset 0\nreset 3\n").unwrap();
    let r = run(dir.path(), &scenario, "gpu", logs);
    let mut codes: Vec<_> = r
        .faults()
        .iter()
        .map(|f| (f.entity.clone(), f.code.clone()))
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            ("gpu0".to_string(), "RECOVERY_NODE_REBOOT".to_string()),
            ("gpu3".to_string(), "RECOVERY_DRAIN_P2P".to_string())
        ]
    );
    std::fs::write(&events, "recovery 0 2\nrecovery 3 3\nreboot\n").unwrap();
    let r = run(dir.path(), &scenario, "gpu", logs);
    assert!(r.faults().is_empty(), "{:#?}", r.faults());
    // Two changes, two lines; the reset and the reboot log none.
    let kmsg = std::fs::read_to_string(&kmsg).unwrap();
    assert_eq!(kmsg.lines().count(), 2, "{kmsg}");
}

#[test]
fn the_prolog_and_the_periodic_run_both_read_the_action() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = tray(
        dir.path(),
        "drain-and-reset",
        r#""gpus": {"3": {"recovery_action": 4}}"#,
    );
    for profile in ["quick", "periodic"] {
        let found = profile_gpu_findings(dir.path(), &scenario, profile);
        let faults: Vec<_> = found.iter().filter(|f| !f.is_ok()).collect();
        assert_eq!(faults.len(), 1, "{profile}: {found:#?}");
        assert_eq!(
            (faults[0].code.as_str(), faults[0].entity.as_str()),
            ("RECOVERY_DRAIN_AND_RESET", "gpu3"),
            "{profile}"
        );
    }
}
