//! The `fabric` check on an HGX node: the fabric manager's process and log
//! from a node tree (`--root`), each GPU's fabric registration from the fake
//! NVML.

use healthcheck::finding::Finding;
use healthcheck::Severity;
use lemonade_tests::fake_nvml;
use std::path::Path;
use std::process::Command;

const FM_LOG: &str = "\
[Mar 12 2024 08:01:22] [INFO] [tid 2384] Fabric Manager version 550.90.07 is running with the following configuration options
[Mar 12 2024 08:01:22] [INFO] [tid 2384] Logging level = 4
[Mar 12 2024 08:01:25] [INFO] [tid 2402] Successfully configured all the available GPUs and NVSwitches to route NVLink traffic.
";
const FM_ERROR: &str = "[Mar 12 2024 09:14:03] [ERROR] [tid 2402] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:05:00.0 physical id 0 port 32\n";

/// A node tree with the fabric manager running (or not) and its log.
fn node_tree(dir: &Path, fm_running: bool, log: &str) {
    let proc = dir.join("proc");
    std::fs::create_dir_all(proc.join("1")).unwrap();
    std::fs::write(proc.join("1/comm"), "systemd\n").unwrap();
    std::fs::write(proc.join("1/stat"), "1 (systemd) S 0 1 1 0 -1\n").unwrap();
    if fm_running {
        std::fs::create_dir_all(proc.join("2384")).unwrap();
        std::fs::write(proc.join("2384/comm"), "nv-fabricmanage\n").unwrap();
        std::fs::write(
            proc.join("2384/stat"),
            "2384 (nv-fabricmanage) S 1 2384 2384 0 -1\n",
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.join("var/log")).unwrap();
    std::fs::write(dir.join("var/log/fabricmanager.log"), log).unwrap();
}

fn run(state: &Path, root: &Path, scenario: &str) -> (Vec<Finding>, i32) {
    run_with(state, root, scenario, "")
}

fn run_with(state: &Path, root: &Path, scenario: &str, extra: &str) -> (Vec<Finding>, i32) {
    run_args(state, root, scenario, extra, &[])
}

/// [`run_with`], with more arguments to `healthcheck run`.
fn run_args(
    state: &Path,
    root: &Path,
    scenario: &str,
    extra: &str,
    args: &[&str],
) -> (Vec<Finding>, i32) {
    let fabric = format!("[checks.fabric]\nnvswitch = true\n{extra}");
    let config = fake_nvml::node_config(state, 8, &fabric);
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(root)
        .args([
            "--node",
            "hgx-test",
            "run",
            "--use-store",
            "--format",
            "json",
        ])
        .args(["--checks", "fabric"])
        .args(args)
        .env(fake_nvml::SCENARIO_ENV, fake_nvml::scenario(scenario))
        .output()
        .expect("run healthcheck");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let findings = serde_json::from_value(json["findings"].clone()).unwrap();
    (findings, out.status.code().unwrap_or(-1))
}

fn faults(findings: &[Finding]) -> Vec<(String, String, Severity)> {
    findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
        .collect()
}

#[test]
fn a_running_fabric_manager_and_registered_gpus_are_ok() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), true, FM_LOG);
    let (findings, code) = run(state.path(), root.path(), fake_nvml::HEALTHY);
    assert_eq!(faults(&findings), []);
    assert_eq!(findings.len(), 9, "the manager and 8 GPUs: {findings:#?}");
    assert_eq!(code, 0);
}

#[test]
fn a_fabric_that_is_not_ready_drains_with_fabric_down() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let (findings, code) = run(state.path(), root.path(), "fabric-not-ready");
    let mut expected = vec![(
        "fabric-manager".to_string(),
        "FABRIC_DOWN".to_string(),
        Severity::Drain,
    )];
    expected.extend((0..8).map(|i| (format!("gpu{i}"), "FABRIC_DOWN".into(), Severity::Drain)));
    assert_eq!(faults(&findings), expected);
    let gpu = findings.iter().find(|f| f.entity == "gpu0").unwrap();
    assert_eq!(gpu.actual.as_deref(), Some("not started, NOT_READY"));
    assert_eq!(code, Severity::Drain.exit_code());
}

#[test]
fn an_error_in_the_fabric_manager_log_is_reported_once() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), true, FM_LOG);
    run(state.path(), root.path(), fake_nvml::HEALTHY);
    let log = root.path().join("var/log/fabricmanager.log");
    std::fs::write(&log, format!("{FM_LOG}{FM_ERROR}")).unwrap();
    let (findings, _) = run(state.path(), root.path(), fake_nvml::HEALTHY);
    assert_eq!(
        faults(&findings),
        [(
            "fabric-manager".to_string(),
            "FABRIC_MANAGER_ERROR".to_string(),
            Severity::Warning
        )]
    );
    let f = findings.iter().find(|f| !f.is_ok()).unwrap();
    assert!(f.message.contains("NVSwitch fatal error 20034"), "{f:#?}");
    let (again, _) = run(state.path(), root.path(), fake_nvml::HEALTHY);
    assert_eq!(faults(&again), []);
}

#[test]
fn a_node_without_nvswitches_skips_the_check() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let config = fake_nvml::node_config(state.path(), 8, "");
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(root.path())
        .args([
            "--node", "gpu-test", "run", "--format", "json", "--checks", "fabric",
        ])
        .env(
            fake_nvml::SCENARIO_ENV,
            fake_nvml::scenario("fabric-not-ready"),
        )
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["findings"], serde_json::json!([]));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn an_r570_tray_is_judged_from_fabric_info_v2_with_a_finding_per_health_field() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), true, FM_LOG);
    let (findings, _) = run(state.path(), root.path(), "gb200-r570-tray");
    assert!(
        findings.iter().all(|f| f.severity != Severity::Unknown),
        "no unknown on R570: {findings:#?}"
    );
    assert_eq!(
        faults(&findings),
        [
            ("gpu1".into(), "FABRIC_UNHEALTHY".into(), Severity::Drain),
            ("gpu2".into(), "FABRIC_RECOVERY".into(), Severity::Warning),
            ("gpu3".into(), "FABRIC_UNHEALTHY".into(), Severity::Drain),
        ]
    );
    let gpu3 = findings.iter().find(|f| f.entity == "gpu3").unwrap();
    assert!(gpu3.message.contains("too few NVLinks") && gpu3.message.contains("v2"));
}

#[test]
fn a_healthy_r580_tray_reads_fabric_info_v3_and_is_ok() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), true, FM_LOG);
    let (findings, code) = run(state.path(), root.path(), "gb200-r580-tray");
    assert_eq!(faults(&findings), []);
    assert_eq!(code, 0);
}

#[test]
fn a_healthy_nvl72_tray_without_a_fabric_manager_is_ok() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let (findings, code) = run(state.path(), root.path(), "gb200-r580-tray");
    assert_eq!(faults(&findings), []);
    assert!(findings.iter().all(|f| f.entity != "fabric-manager"));
    assert_eq!(code, 0);
}

#[test]
fn a_site_can_require_the_fabric_manager_on_a_tray() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let required = "fabric_manager = \"required\"\n";
    let (findings, _) = run_with(state.path(), root.path(), "gb200-r580-tray", required);
    assert_eq!(
        faults(&findings),
        [(
            "fabric-manager".into(),
            "FABRIC_DOWN".into(),
            Severity::Drain
        )]
    );
}

#[test]
fn an_hgx_h100_with_its_fabric_manager_stopped_is_fabric_down() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let (findings, _) = run(state.path(), root.path(), fake_nvml::HEALTHY);
    assert_eq!(
        faults(&findings),
        [(
            "fabric-manager".into(),
            "FABRIC_DOWN".into(),
            Severity::Drain
        )]
    );
}

#[test]
fn a_gb200_name_beside_a_local_nvswitch_still_needs_the_fabric_manager() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    std::fs::create_dir_all(root.path().join("dev")).unwrap();
    std::fs::write(root.path().join("dev/nvidia-nvswitch0"), "").unwrap();
    let (findings, _) = run(state.path(), root.path(), "gb200-r580-tray");
    assert_eq!(
        faults(&findings),
        [(
            "fabric-manager".into(),
            "FABRIC_DOWN".into(),
            Severity::Drain
        )]
    );
}

#[test]
fn an_nvl72_trays_gpus_export_their_nvlink_domain_as_inventory() {
    let (state, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    node_tree(root.path(), false, FM_LOG);
    let spool = state.path().join("spool");
    // A periodic run's export, dry run, with no Slurm command to find.
    let extra = format!(
        "\n[slurm]\nbin_dir = \"{d}/no-slurm\"\n\n[spool]\ndir = \"{d}/spool\"\n",
        d = state.path().display()
    );
    let periodic = ["--apply-policy", "--dry-run"];
    let (findings, code) = run_args(
        state.path(),
        root.path(),
        "gb200-nvl72-tray",
        &extra,
        &periodic,
    );
    assert_eq!((faults(&findings), code), (vec![], 0));
    let domain = |gpu: &str| {
        let f = findings.iter().find(|f| f.entity == gpu).unwrap();
        f.actual.clone().unwrap_or_default()
    };
    let cluster = "cluster 6d0b3f4e-1a2b-4c3d-8e9f-0a1b2c3d4e5f";
    assert_eq!(domain("gpu0"), format!("{cluster} clique 32766"));
    assert_eq!(domain("gpu3"), format!("{cluster} clique 4"));

    let file = lemonade_spool::node_file(&spool, "hgx-test");
    let (records, errors) = lemonade_spool::read(&file).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let sent: Vec<(String, String)> = records
        .into_iter()
        .filter_map(|r| match r.body {
            lemonade_spool::Body::Inventory {
                check,
                entity,
                value,
            } if check == "fabric" => Some((entity, value)),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 8, "{sent:?}");
    assert!(sent.contains(&("gpu3".into(), format!("{cluster} clique 4"))));
}
