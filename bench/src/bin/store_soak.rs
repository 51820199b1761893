//! The node database over five weeks: 10,000 recorded periodic runs, five
//! minutes apart (`--now`), as a node's timer writes them, on the healthy
//! fixture node with 8 GPUs through the fake NVML.
//!
//! Limits (issue 29): at the end the write-ahead log is at most 8 MB, the
//! database holds only the retention window (30 days by default), and the
//! median run of the last 100 is within 1.2× of the first 100.
//!
//! `cargo build --release -p healthcheck -p lemonade-tests && cargo run --release -p lemonade-bench --bin store_soak`
//! (`LEMONADE_SOAK_RUNS=N` writes N runs instead; `LEMONADE_BENCH_KEEP=1` keeps the node.)

use lemonade_bench::{measure, release_bin, Sample};
use lemonade_sql::rusqlite::{Connection, OpenFlags};
use lemonade_tests::{fake_nvml, fixture};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const NODE: &str = "bench001";
const INTERVAL_S: i64 = 300;
const WAL_LIMIT: u64 = 8 * 1024 * 1024;
const SLOWDOWN_LIMIT: f64 = 1.2;
/// The default `[store] retention_days`.
const RETENTION_DAYS: i64 = 30;

fn main() {
    let runs: usize = std::env::var("LEMONADE_SOAK_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let bin = release_bin("healthcheck");
    let state = tempfile::Builder::new()
        .prefix("lemonade-bench-soak-")
        .tempdir()
        .expect("temporary directory");
    let root = state.path().join("node");
    std::fs::create_dir_all(&root).expect("node directory");
    fixture::compose("healthy", &root).expect("compose the fixture node");
    let store = state.path().join("node.db");
    let config = write_config(state.path(), &store);
    let _kept;
    if std::env::var_os("LEMONADE_BENCH_KEEP").is_some() {
        _kept = state.keep();
        println!("keeping {} (LEMONADE_BENCH_KEEP)", _kept.display());
    }

    let start = chrono::Utc::now().timestamp() - runs as i64 * INTERVAL_S;
    let mut walls = Vec::with_capacity(runs);
    let (mut wal_peak, mut wal_before, mut emptying) = (0, 0, Vec::new());
    for i in 0..runs {
        let now = start + i as i64 * INTERVAL_S;
        let sample = run_once(&bin, &config, &root, now);
        assert!(
            sample.exit_code <= 1,
            "run {i}: exit {} (a healthy node)",
            sample.exit_code
        );
        walls.push(sample.wall);
        let wal = file_size(&wal_of(&store));
        // The log shrank: this run checkpointed it.
        if wal < wal_before {
            emptying.push(sample.wall);
        }
        wal_before = wal;
        wal_peak = wal_peak.max(wal);
        if (i + 1) % 1000 == 0 {
            println!(
                "  {:>6} runs: median of the last 1000 {:>6.2} ms, WAL {:>6.2} MB, database {:>6.2} MB",
                i + 1,
                median(&walls[i + 1 - 1000..]).as_secs_f64() * 1e3,
                file_size(&wal_of(&store)) as f64 / 1e6,
                file_size(&store) as f64 / 1e6
            );
        }
    }
    let last_now = start + (runs as i64 - 1) * INTERVAL_S;
    summarise(&walls, wal_peak, &store, last_now, runs);
    if !emptying.is_empty() {
        println!(
            "{} runs emptied the log (one in {}): their median {:.2} ms, against {:.2} ms for all",
            emptying.len(),
            runs / emptying.len(),
            median(&emptying).as_secs_f64() * 1e3,
            median(&walls).as_secs_f64() * 1e3
        );
    }
    side_by_side(&bin, state_dir(&store), &root, &config, last_now);
}

/// The slowdown again, immune to the machine's load changing over the
/// soak: 100 runs on the soaked database alternate with 100 on a young one
/// (100 runs old), at the same moments.
fn side_by_side(bin: &Path, dir: &Path, root: &Path, soaked: &Path, last_now: i64) {
    let young_store = dir.join("young.db");
    let young = write_config(dir, &young_store);
    let young_start = last_now - 200 * INTERVAL_S;
    for i in 0..100 {
        run_once(bin, &young, root, young_start + i * INTERVAL_S);
    }
    let (mut old_walls, mut young_walls) = (Vec::new(), Vec::new());
    for i in 1..=100 {
        old_walls.push(run_once(bin, soaked, root, last_now + i * INTERVAL_S).wall);
        young_walls.push(run_once(bin, &young, root, young_start + (100 + i) * INTERVAL_S).wall);
    }
    let (old, young) = (median(&old_walls), median(&young_walls));
    let ratio = old.as_secs_f64() / young.as_secs_f64();
    println!(
        "side by side, 100 runs each: soaked database {:.2} ms, a young one {:.2} ms: {ratio:.2}x (limit {SLOWDOWN_LIMIT}x: {})",
        old.as_secs_f64() * 1e3,
        young.as_secs_f64() * 1e3,
        verdict(ratio <= SLOWDOWN_LIMIT)
    );
}

fn state_dir(store: &Path) -> &Path {
    store
        .parent()
        .expect("the store is in the bench's directory")
}

fn run_once(bin: &Path, config: &Path, root: &Path, now: i64) -> Sample {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env(
            fake_nvml::SCENARIO_ENV,
            fake_nvml::scenario(fake_nvml::HEALTHY),
        )
        .arg("--config")
        .arg(config)
        .arg("--root")
        .arg(root)
        .args(["--use-store", "--node", NODE, "--dry-run", "run"])
        .args(["--profile", "periodic", "--apply-policy"])
        .arg("--now")
        .arg(now.to_string());
    measure(&mut cmd)
}

fn summarise(walls: &[Duration], wal_peak: u64, store: &Path, last_now: i64, runs: usize) {
    let window = 100.min(walls.len() / 2).max(1);
    let first = median(&walls[..window]);
    let last = median(&walls[walls.len() - window..]);
    let ratio = last.as_secs_f64() / first.as_secs_f64();
    let wal = file_size(&wal_of(store));
    let (kept, oldest) = kept_runs(store);
    let horizon = last_now - RETENTION_DAYS * 86_400;
    println!(
        "{runs} periodic runs, {INTERVAL_S} s apart ({:.1} days)",
        runs as f64 * INTERVAL_S as f64 / 86_400.0
    );
    println!(
        "median run: first {window} {:.2} ms, last {window} {:.2} ms: {ratio:.2}x (limit {SLOWDOWN_LIMIT}x: {})",
        first.as_secs_f64() * 1e3,
        last.as_secs_f64() * 1e3,
        verdict(ratio <= SLOWDOWN_LIMIT)
    );
    println!(
        "WAL at the end {:.2} MB, peak {:.2} MB (limit {:.0} MB: {})",
        wal as f64 / 1e6,
        wal_peak as f64 / 1e6,
        WAL_LIMIT as f64 / 1e6,
        verdict(wal <= WAL_LIMIT)
    );
    println!(
        "database {:.2} MB holding {kept} runs, the oldest {:.1} days before the last (retention {RETENTION_DAYS} days: {})",
        file_size(store) as f64 / 1e6,
        (last_now - oldest) as f64 / 86_400.0,
        verdict(oldest >= horizon)
    );
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

fn median(walls: &[Duration]) -> Duration {
    let mut sorted = walls.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// How many runs the database keeps, and when the oldest started.
fn kept_runs(store: &Path) -> (i64, i64) {
    let conn = Connection::open_with_flags(store, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the soaked database");
    conn.query_row("SELECT count(*), min(started_at) FROM runs", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .expect("count the runs")
}

fn wal_of(store: &Path) -> std::path::PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push("-wal");
    p.into()
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The fixture's config with the store, its own spool and the fake NVML in
/// this run's directory, named after the store (`node.toml`, `young.toml`).
fn write_config(dir: &Path, store: &Path) -> std::path::PathBuf {
    let name = store.file_stem().and_then(|s| s.to_str()).unwrap_or("node");
    let mut config = std::fs::read_to_string(fixture::node_config()).expect("fixture config");
    config.push_str(&format!(
        "\n[[node]]\nhosts = \"{NODE}\"\nstore.path = \"{}\"\nspool.dir = \"{}\"\nchecks.gpu.library_path = \"{}\"\n",
        store.display(),
        dir.join(format!("spool-{name}")).display(),
        fake_nvml::library().display()
    ));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).expect("write config");
    path
}
