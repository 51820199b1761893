//! The prolog figure of the README: `lemonade-prolog` on the healthy fixture
//! node (8 GPUs through the fake NVML, 8 HCAs, the fixture mounts), as Slurm
//! runs it before every job: quick profile, job recorded, policy, export.
//! Every job waits for it, so the limit is 50 ms wall.
//!
//! `cargo build --release -p prolog-epilog -p lemonade-tests && cargo run --release -p lemonade-bench --bin prolog`

use lemonade_bench::{release_bin, repeat, report};
use lemonade_tests::{fake_nvml, fixture};
use std::cell::Cell;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_millis(50);

fn main() {
    let prolog = release_bin("lemonade-prolog");
    let node = fixture::node("healthy");
    // Probe the mounts in a child as on a node, not the fixture's recorded results.
    std::fs::remove_file(node.path("/.lemonade/statfs.json")).expect("recorded statfs results");
    let state = tempfile::tempdir().expect("temporary directory");
    let mut config = std::fs::read_to_string(fixture::node_config()).expect("fixture config");
    config.push_str(&format!(
        "\n[store]\npath = \"{}\"\n\n[spool]\ndir = \"{}\"\n",
        state.path().join("node.db").display(),
        state.path().join("spool").display()
    ));
    // The fixture config may already have a [checks.gpu] table: set the key with a [[node]] block.
    config.push_str(&format!(
        "\n[[node]]\nhosts = \"bench001\"\nchecks.gpu.library_path = \"{}\"\n",
        fake_nvml::library().display()
    ));
    let config_path = state.path().join("lemonade.toml");
    std::fs::write(&config_path, config).expect("write config");

    let job = Cell::new(1000u32);
    let summary = repeat(30, || {
        job.set(job.get() + 1);
        let mut cmd = Command::new(&prolog);
        cmd.env_clear()
            .env("SLURMD_NODENAME", "bench001")
            .env("SLURM_JOB_ID", job.get().to_string())
            .env("SLURM_JOB_USER", "bench")
            .env(
                fake_nvml::SCENARIO_ENV,
                fake_nvml::scenario(fake_nvml::HEALTHY),
            )
            .arg("--config")
            .arg(&config_path)
            .arg("--root")
            .arg(node.root())
            .arg("--use-store");
        cmd
    });
    let check = Command::new(&prolog)
        .env_clear()
        .env("SLURMD_NODENAME", "bench001")
        .env("SLURM_JOB_ID", "999")
        .env(
            fake_nvml::SCENARIO_ENV,
            fake_nvml::scenario(fake_nvml::HEALTHY),
        )
        .arg("--config")
        .arg(&config_path)
        .arg("--root")
        .arg(node.root())
        .arg("--use-store")
        .output()
        .expect("run the prolog");
    println!(
        "one run: exit {:?}: {}",
        check.status.code(),
        String::from_utf8_lossy(&check.stdout).trim()
    );
    report(
        "lemonade-prolog, quick profile, fixture node",
        &summary,
        Some(LIMIT),
    );
}
