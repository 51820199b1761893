//! The `versions` check on the fixture node with the fake NVML: every
//! version it reads is an ok finding, and the export's inventory carries it.

use healthcheck::export::Inventory;
use healthcheck::finding::Finding;
use lemonade_tests::{fake_nvml, fixture};
use std::process::Command;

#[test]
fn the_versions_of_the_node_are_read_and_go_into_the_inventory() {
    let state = tempfile::tempdir().unwrap();
    let node = fixture::node("healthy");
    let config = fake_nvml::node_config(state.path(), 8, "");
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
    let findings: Vec<Finding> = serde_json::from_value(json["findings"].clone()).unwrap();
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
    assert_eq!(out.status.code(), Some(0));
}
