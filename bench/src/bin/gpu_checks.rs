//! All six GPU checks on the fake 8-GPU H100 node, as a node runs them:
//! process start, config, NVML initialisation (of the fake library, through
//! nvml-wrapper), the checks, the run recorded to the node database with its
//! counters, the node-state policy (which calls no Slurm on a healthy node),
//! the report. The same run with `--no-record` is shown beside it: the
//! difference is the store.
//!
//! `cargo build --release -p healthcheck -p lemonade-bench && target/release/gpu_checks`

use lemonade_bench::{measure, release_bin, repeat_cpu, report};
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
    let (recorded, recorded_cpu) = repeat_cpu(RUNS, || command(true));
    report(
        "gpu checks, fake 8-GPU node, recorded + policy",
        &recorded,
        Some(limit),
    );
    let (unrecorded, unrecorded_cpu) = repeat_cpu(RUNS, || command(false));
    report(
        "    the same with --no-record (no store)",
        &unrecorded,
        None,
    );
    // The wall time on a loaded machine is mostly waiting for a CPU: the
    // CPU time and the load average tell a slow run from a busy machine.
    println!(
        "{:<48} {:.2} ms recorded, {:.2} ms --no-record; load average {}",
        "    CPU (user + system) per run, mean",
        recorded_cpu.as_secs_f64() * 1000.0,
        unrecorded_cpu.as_secs_f64() * 1000.0,
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
}
