//! The node sampler (issue 33) on a fixture node: procfs and sysfs files in
//! a temporary root, 8 GPUs from the fake NVML.

use healthcheck::root::NodeRoot;
use healthcheck::sampler::service::{Service, Settings};
use healthcheck::sampler::Sampler;
use lemonade_spool::{Body, Record};
use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use lemonade_tests::{fake_nvml, sampler_node};
use sampler_node::GPU_FIELDS;
use std::path::Path;
use std::time::Duration;

fn node_at(root: &Path, step: u64) {
    sampler_node::write(root, step);
}

fn get(metrics: &[(&str, f64)], name: &str) -> Option<f64> {
    metrics.iter().find(|(m, _)| *m == name).map(|(_, v)| *v)
}

#[test]
fn a_fixture_node_with_fake_nvml_gives_the_vocabulary_and_rates_and_a_reset_no_negative_rate() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = fake_nvml::derive(dir.path(), "sampling", fake_nvml::HEALTHY, GPU_FIELDS);
    // The only test of this file that loads NVML: the fake reads its
    // scenario once per process.
    std::env::set_var(fake_nvml::SCENARIO_ENV, &scenario);
    let nvml = healthcheck::nvml_handle::load(&fake_nvml::library()).unwrap();
    let root = dir.path().join("root");
    node_at(&root, 1);
    let mut sampler = Sampler::new(NodeRoot::new(&root), Some(nvml));

    let first = sampler.round(0.0);
    assert_eq!(get(&first, "ib_tx"), None, "no rate from one round");
    node_at(&root, 2);
    let second = sampler.round(10.0);
    let mut names: Vec<&str> = second.iter().map(|(m, _)| *m).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cnp",
            "cpu_util",
            "disk_io",
            "gpu_ecc_cor",
            "gpu_ecc_unc",
            "gpu_mem_util",
            "gpu_power",
            "gpu_sm_clock",
            "gpu_util",
            "gpu_util_min",
            "ib_rx",
            "ib_tx",
            "mem_used",
            // The fake's NVLink counters grow with real time, not this
            // test's clock: its rate is checked by the sample command's test.
            "nvlink_tx",
            "pcie_rx",
            "pcie_tx",
            "pfc_pause"
        ]
    );
    let want = [
        ("cpu_util", 25.0),
        ("mem_used", 25.0),
        ("disk_io", 4000.0 * 512.0 / 10.0),
        ("gpu_util", (7.0 * 98.0 + 90.0) / 8.0),
        ("gpu_util_min", 90.0),
        ("gpu_power", 8.0 * 650.0),
        ("gpu_sm_clock", 1980.0),
        ("gpu_mem_util", 40.0),
        ("pcie_tx", 8.0 * 1000.0 * 1024.0),
        ("pcie_rx", 8.0 * 2000.0 * 1024.0),
        ("ib_tx", 8.0 * 1e10 / 10.0),
        ("ib_rx", 8.0 * 1e10 / 10.0),
        ("pfc_pause", 8.0),
        ("cnp", 8.0 * 3.0 / 10.0),
        ("gpu_ecc_unc", 0.0),
    ];
    for (metric, value) in want {
        let got = get(&second, metric).unwrap();
        assert!(
            (got - value).abs() < 1e-6 * value.max(1.0),
            "{metric}: {got} != {value}"
        );
    }

    // mlx5_3's counters reset (an HCA reset): the others still count, nothing negative.
    node_at(&root, 3);
    let port = root.join("sys/class/infiniband/mlx5_3/ports/1/counters/port_xmit_data");
    std::fs::write(port, "7\n").unwrap();
    let third = sampler.round(20.0);
    assert_eq!(get(&third, "ib_tx"), Some(7.0 * 1e10 / 10.0));
    assert!(third.iter().all(|(_, v)| *v >= 0.0), "{third:?}");
}

/// A node config with its store and spool in `dir`, and the node's root.
fn node(dir: &Path) -> lemonade_config::Config {
    let mut config = lemonade_config::Config::default();
    config.store.path = dir.join("state/node.db");
    config.spool.dir = Some(dir.join("spool"));
    std::fs::create_dir_all(dir.join("state")).unwrap();
    node_at(&dir.join("root"), 1);
    config
}

fn store(config: &lemonade_config::Config) -> NodeStore {
    NodeStore::open(&config.store.path, Duration::from_secs(1)).unwrap()
}

fn spool_records(config: &lemonade_config::Config) -> Vec<Record> {
    let file = lemonade_spool::node_file(config.spool.dir.as_ref().unwrap(), "node1");
    if !file.exists() {
        return Vec::new();
    }
    let (records, errors) = lemonade_spool::read(&file).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    records
}

fn service(dir: &Path, config: &lemonade_config::Config) -> Service {
    let settings = Settings {
        flush_every: 2,
        ..Settings::default()
    };
    let sampler = Sampler::new(NodeRoot::new(dir.join("root")), None);
    Service::new(config.clone(), "node1".into(), settings, sampler)
}

#[test]
fn with_no_job_running_nothing_is_read_or_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let config = node(dir.path());
    let mut service = service(dir.path(), &config);
    // No node database yet, then one whose only job has ended.
    assert_eq!(service.step(1000, 0.0).unwrap().metrics, 0);
    let s = store(&config);
    node_jobs::job_started(s.connection(), s.path(), "7", None, 900).unwrap();
    node_jobs::job_ended(s.connection(), s.path(), "7", 950, Some(0), None).unwrap();
    let step = service.step(1010, 10.0).unwrap();
    assert!(step.jobs.is_empty() && step.metrics == 0, "{step:?}");
    assert_eq!(step.exported, None);
    assert!(spool_records(&config).is_empty());
}

#[test]
fn a_running_jobs_samples_reach_the_spool_in_chunks_and_leave_it_after_the_job_ends() {
    let dir = tempfile::tempdir().unwrap();
    let config = node(dir.path());
    let s = store(&config);
    let now = 1_800_000_000;
    node_jobs::job_started(s.connection(), s.path(), "7", Some("alice"), now - 60).unwrap();
    let mut service = service(dir.path(), &config);
    let first = service.step(now, 0.0).unwrap();
    assert_eq!(first.jobs, ["7"]);
    assert_eq!(first.exported, None, "a chunk is two rounds");
    node_at(&dir.path().join("root"), 2);
    assert_eq!(service.step(now + 10, 10.0).unwrap().exported, Some(1));
    let records = spool_records(&config);
    let Body::Samples { job_id, samples } = &records[0].body else {
        panic!("{records:?}");
    };
    assert_eq!(job_id, "7");
    let at = |t: i64| samples.iter().filter(move |(time, _, _)| *time == t);
    let first_round: Vec<&str> = at(now).map(|(_, m, _)| m.as_str()).collect();
    assert_eq!(
        first_round,
        ["mem_used"],
        "no rates from one round, no GPUs here"
    );
    assert!(at(now + 10).any(|(_, m, v)| m == "ib_tx" && *v == 8e9));

    // The job ends; an hour later its chunks leave the node's file.
    node_jobs::job_ended(s.connection(), s.path(), "7", now + 15, Some(0), None).unwrap();
    service.step(now + 20, 20.0).unwrap();
    assert_eq!(service.step(now + 30, 30.0).unwrap().exported, None);
    assert_eq!(
        spool_records(&config).len(),
        1,
        "kept while the head may not have read it"
    );
    service.step(now + 3620, 3620.0).unwrap();
    assert_eq!(service.step(now + 3630, 3630.0).unwrap().exported, Some(0));
    assert!(spool_records(&config).is_empty());
}

#[test]
fn the_sample_command_runs_rounds_and_exports_what_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let config = node(dir.path());
    let s = store(&config);
    let now = chrono::Utc::now().timestamp();
    node_jobs::job_started(s.connection(), s.path(), "42", None, now - 5).unwrap();
    let extra = format!(
        "[spool]\ndir = \"{}\"\n",
        config.spool.dir.as_ref().unwrap().display()
    );
    let toml = fake_nvml::node_config(&dir.path().join("state"), 8, &extra);
    let scenario = fake_nvml::derive(dir.path(), "sampling", fake_nvml::HEALTHY, GPU_FIELDS);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .args([
            "--config",
            toml.to_str().unwrap(),
            "--node",
            "node1",
            "--root",
        ])
        .arg(dir.path().join("root"))
        .args([
            "sample",
            "--interval",
            "1",
            "--rounds",
            "2",
            "--flush-every",
            "5",
        ])
        .env(fake_nvml::SCENARIO_ENV, &scenario)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = spool_records(&config);
    assert_eq!(records.len(), 1, "{records:?}");
    let Body::Samples { job_id, samples } = &records[0].body else {
        panic!("{records:?}");
    };
    assert_eq!(job_id, "42");
    assert!(samples
        .iter()
        .any(|(_, m, v)| m == "gpu_util_min" && *v == 90.0));
    assert!(
        samples.iter().any(|(_, m, _)| m == "ib_tx"),
        "a rate by round two"
    );
    // NVLink: 8 GPUs' counters (the fake's grow with time), as one rate.
    let nvlink: Vec<f64> = samples
        .iter()
        .filter(|(_, m, _)| m == "nvlink_tx")
        .map(|(_, _, v)| *v)
        .collect();
    let expected = 8.0 * sampler_node::NVLINK_TX_KIBPS * 1024.0;
    assert_eq!(nvlink.len(), 1, "{samples:?}");
    assert!(
        (nvlink[0] / expected - 1.0).abs() < 0.2,
        "nvlink_tx {} B/s, expected about {expected}",
        nvlink[0]
    );
}

#[test]
fn a_long_jobs_old_chunks_leave_the_nodes_file_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = node(dir.path());
    let s = store(&config);
    let now = 1_800_000_000;
    node_jobs::job_started(s.connection(), s.path(), "7", None, now - 60).unwrap();
    let settings = Settings {
        flush_every: 1,
        keep_chunks: Duration::from_secs(25),
        ..Settings::default()
    };
    let sampler = Sampler::new(NodeRoot::new(dir.path().join("root")), None);
    let mut service = Service::new(config.clone(), "node1".into(), settings, sampler);
    for round in 0..6 {
        service.step(now + 10 * round, 10.0 * round as f64).unwrap();
    }
    // Chunks of now+30, +40, +50 are within 25 s of the last write; the
    // one of now+25 would be too, and there is none.
    let times: Vec<i64> = spool_records(&config).iter().map(|r| r.at - now).collect();
    assert_eq!(times, [30, 40, 50]);
}
