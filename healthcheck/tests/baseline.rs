//! `healthcheck baseline` on the healthy fixture node, fed back as the
//! config: the node is all ok, and every fault overlay is caught.

use lemonade_tests::fixture;
use std::path::Path;
use std::process::{Command, Output};

/// The checks that need no NVML (the GPU checks have their own fake-NVML tests).
const HOST_CHECKS: &str = "xid,pcie,ib,mounts,memory,cpus,block,services,firmware";
/// 2026-11-20T12:00Z: two hours after the fixture logs' XIDs.
const NOW: &str = "1763640000";

fn healthcheck(config: &Path, root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(config)
        .arg("--root")
        .arg(root)
        .args(["--node", "gpu017"])
        .args(args)
        .output()
        .unwrap()
}

/// The baseline of the healthy node as a `[[node]]` block for gpu[001-128],
/// in a config whose store is a temp file.
fn baseline_config(dir: &Path) -> std::path::PathBuf {
    let healthy = fixture::node("healthy");
    let none = dir.join("empty.toml");
    std::fs::write(&none, "").unwrap();
    let out = healthcheck(
        &none,
        healthy.root(),
        &["baseline", "--hosts", "gpu[001-128]"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[[node]]") && text.contains("gpu[001-128]"),
        "{text}"
    );
    let config = dir.join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = \"{}\"\n{text}",
            dir.join("node.db").display()
        ),
    )
    .unwrap();
    config
}

fn run(config: &Path, fault: &str) -> (Option<i32>, String) {
    let node = fixture::node(fault);
    let out = healthcheck(
        config,
        node.root(),
        &[
            "run",
            "--checks",
            HOST_CHECKS,
            "--now",
            NOW,
            "--no-record",
            "--format",
            "json",
        ],
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_baseline_of_the_healthy_node_is_all_ok_and_catches_every_fault_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let config = baseline_config(dir.path());
    let (code, out) = run(&config, "healthy");
    assert_eq!(code, Some(0), "{out}");

    // Faults that are warnings by design: jobs can run.
    let warnings_only = [
        "firmware-bios-old",
        "firmware-hca-odd",
        "kmsg-edac-ce",
        "kmsg-hung-task",
        "kmsg-nfs-not-responding",
        "kmsg-peermem",
        "kmsg-soft-lockup",
        "mount-low-inodes",
        "mount-low-space",
        "xid-malformed",
        "xid-mig",
        "xid-old-driver",
    ];
    let mut missed = Vec::new();
    for fault in fixture::faults() {
        let (code, out) = run(&config, &fault);
        let want = if warnings_only.contains(&fault.as_str()) {
            1
        } else {
            2
        };
        if code != Some(want) {
            missed.push(format!("{fault}: exit {code:?}, expected {want}\n{out}"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn the_baseline_prints_sections_without_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let node = fixture::node("healthy");
    let out = healthcheck(&empty, node.root(), &["baseline"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let config = lemonade_config::load_str(&text, Path::new("baseline.toml"), Some("gpu001"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(config.checks.cpus.expected_online, Some(224));
    assert_eq!(config.checks.block.nvme_count, Some(10));
    assert_eq!(config.checks.ib.expected_hcas, Some(8));
    assert_eq!(config.checks.mounts.expect.len(), 5);
    assert_eq!(
        config.checks.services.expected,
        ["munged", "slurmd", "sssd", "nvidia-persistenced"]
    );
}

#[test]
fn a_node_that_cannot_be_read_gives_no_baseline_and_says_which_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let node = fixture::node("healthy");
    node.write("/proc/meminfo", "MemFree: 1 kB\n");
    let out = healthcheck(&empty, node.root(), &["baseline"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/meminfo"), "{err}");
}
