//! The `versions` check on the fixture node with the fake NVML: every
//! version it reads is an ok finding, and the export's inventory carries it.

use healthcheck::export::Inventory;
use healthcheck::finding::Finding;
use lemonade_tests::{fake_nvml, fixture};
use std::process::Command;

fn run_versions(extra: &str) -> (Vec<Finding>, Option<i32>) {
    let state = tempfile::tempdir().unwrap();
    let node = fixture::node("healthy");
    let config = fake_nvml::node_config(state.path(), 8, extra);
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(node.root())
        .args(["--node", "gpu-test", "run", "--format", "json"])
        .args(["--checks", "versions"])
        .env(
            fake_nvml::SCENARIO_ENV,
            fake_nvml::scenario(fake_nvml::HEALTHY),
        )
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = serde_json::from_value(json["findings"].clone()).unwrap();
    (findings, out.status.code())
}

#[test]
fn the_versions_of_the_node_are_read_and_go_into_the_inventory() {
    let (findings, code) = run_versions("");
    assert!(findings.iter().all(Finding::is_ok), "{findings:#?}");
    let inventory = serde_json::to_value(Inventory::of_findings(&findings)).unwrap();
    for (item, version) in [
        ("versions/kernel", "5.15.0-105-generic"),
        ("versions/driver", "550.90.07"),
        ("versions/cuda-driver", "12.4"),
        ("versions/cuda-toolkit", "12.4.1"),
        ("versions/nccl", "2.21.5"),
        ("versions/gpu0/gsp", "550.90.07"),
        ("versions/gpu7/gsp", "550.90.07"),
    ] {
        assert_eq!(inventory[item], version, "{item} in {inventory:#}");
    }
    assert_eq!(code, Some(0));
}

#[test]
fn a_driver_other_than_the_expect_pin_is_a_node_finding() {
    let (findings, code) = run_versions("[expect]\ndriver = \"550.54.15\"\n");
    let bad: Vec<_> = findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.actual.as_deref()))
        .collect();
    assert_eq!(bad, [("driver", "VERSION_MISMATCH", Some("550.90.07"))]);
    assert_eq!(code, Some(1), "a warning by default");
}
