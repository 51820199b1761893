//! The full periodic suite on the DGX-like fixture node (issue 34): every
//! check of the periodic profile, host and GPU (through the fake NVML), the
//! NVSwitch fabric (pinned on, with its manager running and its log read),
//! modules, dstate, pstore and versions, as `healthcheck` runs every five
//! minutes: process start, config, NVML initialisation, the checks, the run
//! recorded with the node-state policy (a healthy run calls no Slurm) and the
//! spool export. The kernel log cursor is current, as after the first run.
//!
//! Then the same suite as a GB200 NVL72 compute tray runs it (issue 50): the
//! fake NVML of an R580 driver (fabric info v3, the recovery action read per
//! GPU), no fabric manager, and the `imex` check against a fake
//! `nvidia-imex-ctl` printing the published 18-tray domain, with the daemon
//! in `/proc` and the channel device made as the prolog makes it (this part
//! needs CAP_MKNOD; without it, it says so and is skipped). The host is the
//! same 8-GPU fixture, so the NVML reads are twice a real tray's 4: an
//! upper bound.
//!
//! Prints the wall time of the process, recorded and with `--no-record`, and
//! the run's own `duration_ms` (the checks, without process start and exit),
//! with the load average before and after: figures from a loaded machine are
//! not comparable with quiet ones.
//!
//! `cargo build --release -p healthcheck -p lemonade-bench && target/release/periodic`
//! (`LEMONADE_BENCH_KEEP=1` keeps the generated node for profiling).

use lemonade_bench::{release_bin, repeat_cpu, report};
use lemonade_tests::{fake_nvml, fixture};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const NODE: &str = "dgx001";
const CHANNEL: &str = "/dev/nvidia-caps-imex-channels/channel0";
const RUNS: usize = 50;
/// Issue 34: the full suite on the DGX-like fixture within 15 ms.
const LIMIT: Duration = Duration::from_millis(15);

const FM_LOG: &str = "\
[Mar 12 2024 08:01:22] [INFO] [tid 2384] Fabric Manager version 550.90.07 is running with the following configuration options
[Mar 12 2024 08:01:25] [INFO] [tid 2402] Successfully configured all the available GPUs and NVSwitches to route NVLink traffic.
";

fn main() {
    let bin = release_bin("healthcheck");
    let dir = tempfile::Builder::new()
        .prefix("lemonade-bench-periodic-")
        .tempdir()
        .expect("temporary directory");
    let root = dir.path().join("node");
    std::fs::create_dir_all(&root).unwrap();
    fixture::compose("healthy", &root).expect("compose the fixture node");
    // Probe every mount in a child as on a node, not the recorded results.
    std::fs::remove_file(root.join(".lemonade/statfs.json")).expect("recorded statfs results");
    let _kept;
    if std::env::var_os("LEMONADE_BENCH_KEEP").is_some() {
        _kept = dir.keep();
        println!("keeping {} (LEMONADE_BENCH_KEEP)", _kept.display());
    }
    let mut dgx = root.clone().into_os_string();
    dgx.push("-dgx");
    let dgx = PathBuf::from(dgx);
    copy_tree(&root, &dgx);
    add_fabric_manager(&dgx);
    let config = write_config(
        dgx.parent().unwrap(),
        "dgx",
        "[checks.fabric]\nnvswitch = true\n",
    );
    let scenario = fake_nvml::scenario(fake_nvml::HEALTHY);
    measure("DGX-like node", &bin, &dgx, &config, &scenario);

    let tray = root;
    match gb200_tray(&tray) {
        Ok(extra) => {
            let config = write_config(tray.parent().unwrap(), "gb200", &extra);
            // The host's 8 GPUs (their bus ids), as an R580 GB200 answers.
            let scenario = fake_nvml::derive(
                tray.parent().unwrap(),
                "gb200-bench",
                fake_nvml::HEALTHY,
                r#""driver_version": "580.82.07", "driver_branch": "R580",
                "defaults": {"name": "NVIDIA GB200", "fabric_health_mask": 426}"#,
            );
            measure("GB200-like tray", &bin, &tray, &config, &scenario);
        }
        Err(e) => println!("GB200-like tray skipped: {e}"),
    }
}

/// The suite on one node: recorded with the policy, then `--no-record`,
/// then the run's own `duration_ms`.
fn measure(label: &str, bin: &Path, root: &Path, config: &Path, scenario: &Path) {
    let run = |record: bool| {
        let mut cmd = Command::new(bin);
        cmd.arg("--config")
            .arg(config)
            .arg("--root")
            .arg(root)
            .args([
                "--use-store",
                "--node",
                NODE,
                "run",
                "--profile",
                "periodic",
            ])
            .env("LD_LIBRARY_PATH", fake_nvml::library_dir())
            .env(fake_nvml::SCENARIO_ENV, scenario);
        if record {
            cmd.arg("--apply-policy");
        } else {
            cmd.arg("--no-record");
        }
        cmd
    };
    let first = run_json(run(true));
    print_checks(label, &first);
    let load_before = load_average();
    let (recorded, recorded_cpu) = repeat_cpu(RUNS, || run(true));
    report(
        &format!("periodic suite, {label}, recorded + policy"),
        &recorded,
        Some(LIMIT),
    );
    let (unrecorded, unrecorded_cpu) = repeat_cpu(RUNS, || run(false));
    report(
        "    the same with --no-record (no store)",
        &unrecorded,
        None,
    );
    println!(
        "{:<48} {:.2} ms recorded, {:.2} ms --no-record",
        "    CPU (user + system) per run, mean",
        recorded_cpu.as_secs_f64() * 1000.0,
        unrecorded_cpu.as_secs_f64() * 1000.0
    );
    let mut own: Vec<f64> = (0..RUNS)
        .map(|_| {
            run_json(run(false))["duration_ms"]
                .as_f64()
                .unwrap_or(f64::NAN)
        })
        .collect();
    own.sort_by(f64::total_cmp);
    println!(
        "{:<48} median {:>8.2} ms  p90 {:>8.2} ms  ({RUNS} runs)",
        "    the run's own duration_ms, --no-record",
        own[RUNS / 2],
        own[RUNS * 9 / 10]
    );
    println!(
        "load average before {load_before}, after {}",
        load_average()
    );
}

/// Prints the checks of a first run, which must find the node all ok.
fn print_checks(label: &str, first: &serde_json::Value) {
    let names: Vec<&str> = first["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let faults: Vec<String> = first["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] != "ok")
        .map(|f| format!("{} {} {}", f["check"], f["entity"], f["code"]))
        .collect();
    assert!(faults.is_empty(), "the {label} must be all ok: {faults:?}");
    println!("{label}: {} checks: {}", names.len(), names.join(","));
}

/// Runs `cmd` with `--format json` and returns its report.
fn run_json(mut cmd: Command) -> serde_json::Value {
    let out = cmd
        .args(["--format", "json"])
        .output()
        .expect("run healthcheck");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// `/proc/loadavg`'s three averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// An HGX node runs the fabric manager; its log says it configured the fabric.
fn add_fabric_manager(root: &Path) {
    let proc = root.join("proc/2384");
    std::fs::create_dir_all(&proc).unwrap();
    std::fs::write(proc.join("comm"), "nv-fabricmanage\n").unwrap();
    std::fs::write(
        proc.join("stat"),
        "2384 (nv-fabricmanage) S 1 2384 2384 0 -1 4194560 2313 0 0 0 12 9 0 0 20 0 1 0 1843 12648448 1093 18446744073709551615 1 1 0 0 0 0 0 4096 16899 0 0 0 17 3 0 0 0 0 0\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("var/log")).unwrap();
    std::fs::write(root.join("var/log/fabricmanager.log"), FM_LOG).unwrap();
}

/// The fixture's config with the store and spool in the temporary
/// directory, no Slurm to call, and `extra` (the node kind's sections).
fn write_config(dir: &Path, kind: &str, extra: &str) -> PathBuf {
    let mut text = std::fs::read_to_string(fixture::node_config()).unwrap();
    if kind == "gb200" {
        text = text.replace("550.90.07", "580.82.07");
    }
    let d = dir.join(kind);
    std::fs::create_dir_all(&d).unwrap();
    text.push_str(&format!(
        "\n[store]\npath = \"{d}/node.db\"\n\n[spool]\ndir = \"{d}/spool\"\n\n\
         [slurm]\nbin_dir = \"/nonexistent/slurm\"\n\n{extra}",
        d = d.display()
    ));
    let path = d.join("lemonade.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// An NVL72 compute tray on the fixture host: the IMEX daemon as pid 3141,
/// the channel driver in `/proc/devices` and its device made, and a fake
/// `nvidia-imex-ctl` printing the published 18-tray domain in which this
/// tray is node #1. Returns the config sections that go with it.
fn gb200_tray(root: &Path) -> Result<String, String> {
    let write = |path: &str, text: &str| {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("proc/3141/comm", "nvidia-imex\n");
    write(
        "proc/3141/stat",
        "3141 (nvidia-imex) S 1 3141 3141 0 -1 4194560 2313 0 0 0 12 9 0 0 20 0 1 0 1843 12648448 1093 18446744073709551615 1 1 0 0 0 0 0 4096 16899 0 0 0 17 3 0 0 0 0 0\n",
    );
    write(
        "proc/devices",
        "Character devices:\n195 nvidia\n234 nvidia-caps-imex-channels\n\nBlock devices:\n",
    );
    let sample = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../healthcheck/src/checks/imex/fixtures/ctl-n-18-up.txt");
    let ctl = root.join("usr/bin/nvidia-imex-ctl");
    write(
        "usr/bin/nvidia-imex-ctl",
        &format!("#!/bin/sh\nexec cat '{}'\n", sample.display()),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = healthcheck::root::NodeRoot::new(root);
    healthcheck::checks::imex::channel::ensure(&node, CHANNEL, false)
        .map_err(|e| format!("cannot make the IMEX channel device here: {e}"))?;
    Ok(format!(
        "[checks.fabric]\nfabric_manager = \"off\"\n\n[checks.imex]\nenabled = true\n\
         ctl = \"{}\"\naddress = \"172.31.48.98\"\n",
        ctl.display()
    ))
}

/// `from`'s tree copied to `to` (the fixture node, for a second kind).
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}
