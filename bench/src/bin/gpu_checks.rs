//! All six GPU checks on the fake 8-GPU H100 node, as a node runs them:
//! process start, config, NVML initialisation (of the fake library, through
//! nvml-wrapper), the checks, the run recorded to the node database with its
//! counters, the node-state policy (which calls no Slurm on a healthy node),
//! the report. The same run with `--no-record` is shown beside it: the
//! difference is the store.
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
    // A healthy run never calls Slurm; if it did, it would find nothing here.
    let config =
        fake_nvml::node_config(dir.path(), 8, "[slurm]\nbin_dir = \"/nonexistent/slurm\"\n");
    let scenario = fake_nvml::scenario(fake_nvml::HEALTHY);
    let command = |record: bool| {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(&config)
            .args(["run", "--format", "json", "--checks", CHECKS])
            .env(fake_nvml::SCENARIO_ENV, &scenario);
        if record {
            cmd.arg("--apply-policy");
        } else {
            cmd.arg("--no-record");
        }
        cmd
    };
    let first = measure(&mut command(true));
    assert_eq!(first.exit_code, 0, "the healthy fake node must be all ok");

    let limit = Duration::from_millis(10);
    report(
        "gpu checks, fake 8-GPU node, recorded + policy",
        &repeat(RUNS, || command(true)),
        Some(limit),
    );
    report(
        "    the same with --no-record (no store)",
        &repeat(RUNS, || command(false)),
        None,
    );
}
