//! The GPU checks on what a real H200 and its driver (580.159.04) answered,
//! replayed through the fake NVML: the verdicts must be those the checks gave
//! on the real node (`tests/fixtures/nvml/real-h200/SOURCE.md`).

use healthcheck::finding::Finding;
use healthcheck::Severity;
use lemonade_tests::fake_nvml;
use std::path::PathBuf;
use std::process::Command;

const GPU_CHECKS: &str = "gpu,ecc,nvlink,gpu-pcie,clocks,gpu-procs";

fn real_dir() -> PathBuf {
    fake_nvml::scenarios_dir().join("real-h200")
}

/// The findings of the real node's run, saved beside the scenario.
fn on_the_node(file: &str) -> Vec<Finding> {
    let text = std::fs::read_to_string(real_dir().join(file)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(json["findings"].clone()).unwrap()
}

/// `healthcheck run` of the GPU checks on `scenario` with the fake NVML,
/// on a node expecting one GPU.
fn replayed(scenario: &str) -> (Vec<Finding>, i32) {
    replayed_checks(scenario, GPU_CHECKS)
}

fn replayed_checks(scenario: &str, checks: &str) -> (Vec<Finding>, i32) {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_nvml::node_config(dir.path(), 1, "");
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .args(["--node", "h200", "run", "--no-record", "--format", "json"])
        .args(["--checks", checks])
        .env(fake_nvml::SCENARIO_ENV, fake_nvml::scenario(scenario))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let findings = serde_json::from_value(json["findings"].clone()).unwrap();
    (findings, out.status.code().unwrap_or(-1))
}

/// What a verdict is, without the texts that carry timings or paths.
fn verdicts<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
) -> Vec<(String, String, String, Severity)> {
    let mut v: Vec<_> = findings
        .into_iter()
        .filter(|f| GPU_CHECKS.split(',').any(|c| c == f.check))
        .map(|f| {
            (
                f.check.clone(),
                f.entity.clone(),
                f.code.clone(),
                f.severity,
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_idle_h200_replays_to_the_verdicts_the_real_node_gave() {
    let (findings, exit_code) = replayed("h200-real-idle");
    assert_eq!(exit_code, 0, "{findings:#?}");
    assert!(findings.iter().all(Finding::is_ok), "{findings:#?}");
    // The real run had the full profile, which has no gpu-procs.
    let replay: Vec<_> = findings.iter().filter(|f| f.check != "gpu-procs").collect();
    assert_eq!(verdicts(replay), verdicts(&on_the_node("run-idle.json")));
    let gpu = findings.iter().find(|f| f.check == "gpu").unwrap();
    let node_gpu = on_the_node("run-idle.json")
        .into_iter()
        .find(|f| f.check == "gpu")
        .unwrap();
    assert_eq!(gpu.pci_bus_id.as_deref(), Some("0000:00:06.0"));
    assert_eq!(gpu.uuid, node_gpu.uuid);
    assert!(gpu.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")));
}

#[test]
fn the_h200_under_load_outside_a_job_drains_for_its_process_and_nothing_else() {
    let (findings, exit_code) = replayed("h200-real-load");
    assert_eq!(verdicts(&findings), verdicts(&on_the_node("run-load.json")));
    let faults: Vec<_> = findings.iter().filter(|f| !f.is_ok()).collect();
    assert_eq!(faults.len(), 1, "{faults:#?}");
    assert_eq!(
        (faults[0].code.as_str(), faults[0].severity),
        ("GPU_STRAY_PROCESSES", Severity::Drain)
    );
    let pid = scenario_json("h200-real-load")["gpus"]["0"]["procs"][0]["pid"].to_string();
    assert!(faults[0].message.contains(&pid), "{:?}", faults[0].message);
    // SW power cap (0x4) under a matrix-product loop is not a throttle fault.
    assert_eq!(exit_code, 2);
}

/// The value nvidia-smi -q prints for the first line named `key`.
fn smi_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(key) && l[key.len()..].trim_start().starts_with(':'))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
}

fn scenario_json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fake_nvml::scenario(name)).unwrap()).unwrap()
}

#[test]
fn the_scenarios_agree_with_what_nvidia_smi_printed_at_the_same_moments() {
    let read = |name: &str| std::fs::read_to_string(real_dir().join(name)).unwrap();
    let idle = scenario_json("h200-real-idle");
    let gpu = &idle["gpus"]["0"];
    let smi = read("nvidia-smi-q.txt");
    assert_eq!(smi_field(&smi, "VBIOS Version"), gpu["vbios"].as_str());
    assert_eq!(smi_field(&smi, "Bus Id"), gpu["bus_id"].as_str());
    assert_eq!(
        smi_field(&smi, "Driver Version"),
        idle["driver_version"].as_str()
    );
    let load = scenario_json("h200-real-load");
    let proc = &load["gpus"]["0"]["procs"][0];
    let apps = read("compute-apps-load.csv");
    let row = format!("{}, {} MiB", proc["pid"], proc["used_mib"]);
    assert!(apps.contains(&row), "{apps} lacks {row}");
    let under_load = read("nvidia-smi-q-load.txt");
    assert_eq!(smi_field(&under_load, "SW Power Cap"), Some("Active"));
    assert_eq!(load["gpus"]["0"]["clock_reasons"], 4);
    // Added by hand after the capture (SOURCE.md): what nvidia-smi printed.
    assert_eq!(smi_field(&smi, "GPU Recovery Action"), Some("None"));
    assert_eq!(gpu["recovery_action"], 0);
}

#[test]
fn the_versions_the_driver_gave_replay_from_the_snapshot() {
    let (findings, _) = replayed_checks("h200-real-idle", "versions");
    // kernel and nccl come from files, which the replay reads on this host.
    let from_nvml =
        |f: &&Finding| f.check == "versions" && !["kernel", "nccl"].contains(&f.entity.as_str());
    let actual = |fs: &[Finding]| -> Vec<(String, Option<String>)> {
        let mut v: Vec<_> = fs
            .iter()
            .filter(from_nvml)
            .map(|f| (f.entity.clone(), f.actual.clone()))
            .collect();
        v.sort();
        v
    };
    let node = actual(&on_the_node("run-idle.json"));
    assert_eq!(
        node.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(),
        ["cuda-driver", "driver", "gpu0/gsp", "sku"]
    );
    assert_eq!(actual(&findings), node);
}
