//! All six GPU checks on the fake 8-GPU H100 node, as `healthcheck run` does
//! them on a node: process start, config, NVML initialisation (of the fake
//! library, through nvml-wrapper), the checks, the report.
//!
//! `cargo build --release -p healthcheck -p lemonade-bench && target/release/gpu_checks`

use lemonade_bench::{measure, release_bin, repeat, report};
use lemonade_tests::fake_nvml;
use std::process::Command;
use std::time::Duration;

const CHECKS: &str = "gpu,ecc,nvlink,gpu-pcie,clocks,gpu-procs";
const RUNS: usize = 50;

fn main() {
    let bin = release_bin("healthcheck");
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = fake_nvml::node_config(dir.path(), 8, "");
    let scenario = fake_nvml::scenario(fake_nvml::HEALTHY);
    let command = |record: bool| {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(&config)
            .args(["run", "--format", "json", "--checks", CHECKS])
            .env(fake_nvml::SCENARIO_ENV, &scenario);
        if !record {
            cmd.arg("--no-record");
        }
        cmd
    };
    let first = measure(&mut command(false));
    assert_eq!(first.exit_code, 0, "the healthy fake node must be all ok");

    let limit = Duration::from_millis(10);
    report(
        "gpu checks, fake 8-GPU node",
        &repeat(RUNS, || command(false)),
        Some(limit),
    );
    report(
        "gpu checks, fake 8-GPU node, recorded to SQLite",
        &repeat(RUNS, || command(true)),
        None,
    );
}
