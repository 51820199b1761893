//! `healthcheck baseline` on the healthy fixture node, fed back as the
//! config: the node is all ok, and every fault overlay is caught.

use lemonade_tests::fixture;
use std::path::Path;
use std::process::{Command, Output};

/// The checks that need no NVML (the GPU checks have their own fake-NVML tests).
/// `versions` reads only its files here: NVML cannot be opened.
const HOST_CHECKS: &str =
    "xid,pcie,ib,mounts,memory,cpus,block,services,firmware,modules,fabric,versions";
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
fn the_baseline_pins_the_versions_modules_and_fabric_of_the_good_node() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let node = fixture::node("healthy");
    node.write("/sys/module/nvidia/version", "550.54.15\n");
    let out = healthcheck(&empty, node.root(), &["baseline"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let config = lemonade_config::load_str(&text, Path::new("baseline.toml"), Some("gpu001"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let e = &config.expect;
    assert_eq!(e.driver.as_deref(), Some("550.54.15"), "{text}");
    assert_eq!(e.kernel.as_deref(), Some("5.15.0-105-generic"));
    assert_eq!(e.cuda_toolkit.as_deref(), Some("12.4.1"));
    assert_eq!(e.nccl.as_deref(), Some("2.21.5"));
    // The GPU and RDMA modules the node has loaded; not nvme or nvidia_drm.
    let required = config.checks.modules.required.clone().unwrap_or_default();
    assert_eq!(
        required,
        [
            "nvidia",
            "nvidia_uvm",
            "nvidia_peermem",
            "mlx5_core",
            "mlx5_ib",
            "ib_core",
            "ib_uverbs",
            "rdma_ucm"
        ]
    );
    assert_eq!(config.checks.fabric.nvswitch, Some(false));

    // Fed back: the node as it is passes; another kernel, or peermem
    // unloaded, is caught.
    let config_path = dir.path().join("lemonade.toml");
    let store = dir.path().join("node.db");
    std::fs::write(
        &config_path,
        format!("[store]\npath = \"{}\"\n{text}", store.display()),
    )
    .unwrap();
    let codes = |node: &fixture::FixtureNode| {
        let out = healthcheck(
            &config_path,
            node.root(),
            &[
                "run",
                "--checks",
                "modules,versions",
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
    };
    let (code, out) = codes(&node);
    assert_eq!(code, Some(0), "{out}");
    node.write("/proc/sys/kernel/osrelease", "6.8.0-45-generic\n");
    let (code, out) = codes(&node);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("VERSION_MISMATCH"), "{out}");
    let modules = std::fs::read_to_string(node.root().join("proc/modules")).unwrap();
    let without: String = modules
        .lines()
        .filter(|l| !l.starts_with("nvidia_peermem "))
        .map(|l| format!("{l}\n"))
        .collect();
    node.write("/proc/modules", &without);
    let (code, out) = codes(&node);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("MODULE_MISSING") && out.contains("nvidia_peermem"),
        "{out}"
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
