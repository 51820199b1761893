//! The node sampler's overhead (issue 33): 8 GPUs of the fake NVML and 8
//! HCAs of a fixture sysfs, with a job running, as `healthcheck sample`
//! runs on a node.
//!
//! * Per round, in steady state: CPU (user + system) of `Service::step`,
//!   counters growing every round, the chunk exported every third round to
//!   a spool file already at its 8 MiB bound (the worst case: every export
//!   rewrites the whole file).
//! * The real binary for 20 rounds at 1 s: CPU per round with its start-up
//!   (NVML, config, database) spread over them, and its peak RSS.
//!
//! The budget at 10 s sampling: 0.5 % of one core is 50 ms of CPU a round,
//! and 20 MB of RSS.
//!
//! `cargo build --release -p healthcheck -p lemonade-bench && target/release/sampler`

use healthcheck::root::NodeRoot;
use healthcheck::sampler::service::{Service, Settings};
use healthcheck::sampler::Sampler;
use lemonade_bench::release_bin;
use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use lemonade_tests::{fake_nvml, sampler_node};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ROUNDS: u64 = 150;
const CPU_LIMIT_MS: f64 = 50.0;
const RSS_LIMIT_MB: f64 = 20.0;

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let scenario = fake_nvml::derive(
        dir.path(),
        "sampling",
        fake_nvml::HEALTHY,
        sampler_node::GPU_FIELDS,
    );
    let root = dir.path().join("root");
    sampler_node::write(&root, 0);
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("state directory");
    let spool = dir.path().join("spool");
    let extra = format!("[spool]\ndir = \"{}\"\n", spool.display());
    let toml = fake_nvml::node_config(&state, 8, &extra);
    let config = lemonade_config::load(&toml, Some("node1")).expect("the node config");
    let now = chrono::Utc::now().timestamp();
    let store = NodeStore::open(&config.store.path, Duration::from_secs(1)).expect("node db");
    node_jobs::job_started(store.connection(), store.path(), "42", None, now - 60).expect("job");
    fill_spool(&spool, config.spool.max_bytes, now);

    std::env::set_var(fake_nvml::SCENARIO_ENV, &scenario);
    in_process(&config, &root, now);
    binary(&toml, &root, &scenario, "the spool file at its 8 MiB bound");
    std::fs::remove_file(lemonade_spool::node_file(&spool, "node1")).expect("empty the spool");
    binary(&toml, &root, &scenario, "a fresh spool file");
}

/// A spool file at its bound, of recent sample chunks of another job
/// still running (none is pruned: the worst case; the sampler keeps a
/// job's chunks 2 h, about 300 KB, in steady state).
fn fill_spool(dir: &Path, max_bytes: u64, now: i64) {
    let chunk = |seq: u64| lemonade_spool::Record {
        seq,
        epoch: "bench".into(),
        node: "node1".into(),
        at: now - 3600,
        body: lemonade_spool::Body::Samples {
            job_id: "41".into(),
            samples: (0..48)
                .map(|i| (seq as i64, format!("m{i}"), 1.5e9))
                .collect(),
        },
    };
    let records: Vec<_> = (1..=8000).map(chunk).collect();
    lemonade_spool::write(dir, "node1", &records, max_bytes).expect("fill the spool");
}

fn in_process(config: &lemonade_config::Config, root: &Path, now: i64) {
    let nvml = healthcheck::nvml_handle::load(&fake_nvml::library()).expect("the fake NVML");
    let sampler = Sampler::new(NodeRoot::new(root), Some(nvml));
    let mut service = Service::new(config.clone(), "node1".into(), Settings::default(), sampler);
    let mut cpu = Duration::ZERO;
    let mut metrics = 0;
    for round in 1..=ROUNDS {
        sampler_node::write(root, round);
        let before = cpu_time();
        let step = service
            .step(now + 10 * round as i64, 10.0 * round as f64)
            .expect("a round");
        cpu += cpu_time() - before;
        metrics = step.metrics;
    }
    let per_round = cpu.as_secs_f64() * 1000.0 / ROUNDS as f64;
    println!(
        "sampler round, 8 GPUs + 8 HCAs, {metrics} metrics, export every 3rd round to an 8 MiB spool file: {per_round:.2} ms CPU/round ({:.3}% of a core at 10 s){}",
        per_round / 100.0,
        verdict(per_round <= CPU_LIMIT_MS, &format!("limit {CPU_LIMIT_MS} ms"))
    );
}

fn binary(toml: &Path, root: &Path, scenario: &Path, spool: &str) {
    let rounds = 20;
    let mut cmd = Command::new(release_bin("healthcheck"));
    cmd.arg("--config")
        .arg(toml)
        .args(["--node", "node1", "--root"])
        .arg(root)
        .args(["sample", "--interval", "1", "--rounds", &rounds.to_string()])
        .env(fake_nvml::SCENARIO_ENV, scenario);
    let (code, cpu, max_rss) = run_measured(&mut cmd);
    assert_eq!(code, 0, "healthcheck sample failed");
    let per_round = cpu.as_secs_f64() * 1000.0 / rounds as f64;
    let rss_mb = max_rss as f64 / 1e6;
    println!(
        "healthcheck sample, {rounds} rounds at 1 s, start-up included, {spool}: {per_round:.2} ms CPU/round, peak RSS {rss_mb:.1} MB{}",
        verdict(
            per_round <= CPU_LIMIT_MS && rss_mb <= RSS_LIMIT_MB,
            &format!("limits {CPU_LIMIT_MS} ms, {RSS_LIMIT_MB} MB")
        )
    );
}

fn verdict(ok: bool, limit: &str) -> String {
    if ok {
        format!("  ({limit}: ok)")
    } else {
        format!("  MISSED ({limit})")
    }
}

/// This process's user + system CPU time.
fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// Runs `cmd` to its end: exit code, CPU (user + system), peak RSS in
/// bytes. The peak is the child's own `VmHWM`, read while it runs: the
/// `ru_maxrss` of a spawned child starts from its parent's resident size
/// (the mappings it had before `exec`), and this benchmark's own is larger
/// than the sampler's.
fn run_measured(cmd: &mut Command) -> (i32, Duration, u64) {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn healthcheck sample");
    let pid = child.id() as libc::pid_t;
    let status_file = format!("/proc/{pid}/status");
    let mut peak_kib = 0u64;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let Some(kib) = vm_hwm_kib(&status_file) {
            peak_kib = peak_kib.max(kib);
        }
        // SAFETY: wait4 on our own child with valid out-pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if rc == pid {
            break;
        }
        assert_eq!(rc, 0, "wait4 failed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    (code, cpu, peak_kib * 1024)
}

/// `VmHWM` of a process, in KiB (none once it has exited).
fn vm_hwm_kib(status_file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(status_file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
