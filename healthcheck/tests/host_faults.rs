//! The host-fault checks (modules, dstate, pstore) on the fixture node:
//! healthy, then the fault trees of `tests/fixtures/host-faults/` laid over
//! it. They are not in `tests/fixtures/nodes/`, whose overlays the baseline
//! test runs with the older host checks only.

use healthcheck::check::{Check, CheckContext};
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};
use std::path::Path;

const T0: i64 = 1_763_600_000;

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn check(name: &str) -> std::sync::Arc<dyn Check> {
    healthcheck::checks::all()
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no check {name}"))
}

fn run(
    name: &str,
    node: &FixtureNode,
    previous: Option<serde_json::Value>,
) -> (Vec<Finding>, Option<serde_json::Value>) {
    let ctx = CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config(),
            chrono::DateTime::from_timestamp(T0, 0).unwrap(),
        )
    };
    let out = check(name)
        .run(&ctx)
        .unwrap_or_else(|e| panic!("{name} runs: {e}"));
    (out.findings, out.state)
}

fn problems(findings: &[Finding]) -> Vec<(&str, &str, Severity)> {
    findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity))
        .collect()
}

/// The healthy node with `tests/fixtures/host-faults/<tree>` copied over it.
fn node_with(tree: &str) -> FixtureNode {
    let node = fixture::node("healthy");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/host-faults")
        .join(tree);
    copy(&src, node.root());
    node
}

fn copy(src: &Path, dest: &Path) {
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dest.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            copy(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

#[test]
fn the_healthy_node_is_all_ok_for_the_host_fault_checks() {
    let node = fixture::node("healthy");
    for name in ["modules", "dstate", "pstore"] {
        let (findings, _) = run(name, &node, None);
        assert!(!findings.is_empty(), "{name} judged nothing");
        assert!(problems(&findings).is_empty(), "{name}: {findings:#?}");
    }
}

#[test]
fn a_gpu_and_infiniband_node_without_nvidia_peermem_drains() {
    let node = node_with("modules-peermem-missing");
    let (findings, _) = run("modules", &node, None);
    assert_eq!(
        problems(&findings),
        [("nvidia_peermem", "MODULE_MISSING", Severity::Drain)]
    );
}

#[test]
fn a_process_stuck_in_d_is_named() {
    let node = node_with("dstate-stuck");
    let (findings, _) = run("dstate", &node, None);
    assert_eq!(
        problems(&findings),
        [("python3", "PROCESS_STUCK_D_STATE", Severity::Warning)]
    );
    assert!(findings[0].message.contains("pid 48213"), "{findings:#?}");
}

#[test]
fn a_crash_log_in_pstore_is_reported_once_with_its_panic() {
    let node = node_with("pstore-panic");
    let (findings, state) = run("pstore", &node, None);
    assert_eq!(
        problems(&findings),
        [(
            "dmesg-efi-176360000001",
            "PSTORE_CRASH_LOG",
            Severity::Warning
        )]
    );
    assert_eq!(
        findings[0].actual.as_deref(),
        Some("Kernel panic - not syncing: Fatal hardware error!")
    );
    assert!(findings[0].message.contains("DGXH100"), "{findings:#?}");
    let (again, state) = run("pstore", &node, state);
    assert!(problems(&again).is_empty(), "{again:#?}");
    // A second panic's entry is new.
    node.write(
        "/sys/fs/pstore/dmesg-efi-176370000001",
        "Panic#1 Part1\n<0>[ 12.5] Kernel panic - not syncing: Oops: fatal exception\n",
    );
    let (third, _) = run("pstore", &node, state);
    assert_eq!(
        problems(&third),
        [(
            "dmesg-efi-176370000001",
            "PSTORE_CRASH_LOG",
            Severity::Warning
        )]
    );
}

#[test]
fn a_pci_bus_that_cannot_be_read_leaves_the_module_check_unknown_not_passed() {
    let node = fixture::node("healthy");
    let pci = node.root().join("sys/bus/pci/devices");
    std::fs::remove_dir_all(&pci).unwrap();
    std::fs::write(&pci, "not a directory").unwrap();
    let mut config = config();
    config.checks.gpu.expected_count = lemonade_config::GpuCount::Auto;
    let ctx = CheckContext::standalone(
        node.root(),
        config,
        chrono::DateTime::from_timestamp(T0, 0).unwrap(),
    );
    let out = check("modules").run(&ctx);
    assert!(out.is_err(), "{:?}", out.map(|o| o.findings));
}
