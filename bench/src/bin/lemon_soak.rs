//! lemon.db over a year: `lemon run --dry-run` every hour, as cron runs it,
//! each time with the jobs that ended and the node events that started in
//! that hour of a generated history (500 nodes, 365 days, ~180,000 jobs,
//! lemons, bad users, bursts).
//!
//! Limits (issue 29): the write-ahead log after every run at most 8 MB, and
//! the median run of the last 100 hours within 1.2× of the hours 700-800
//! (the first weeks are faster: the 28-day window is still filling).
//!
//! `cargo build --release -p lemon && cargo run --release -p lemonade-bench --bin lemon_soak`
//! (`LEMONADE_SOAK_HOURS=N` stops after N hours; `LEMONADE_BENCH_KEEP=1` keeps lemon.db.)

use lemonade_bench::{measure, release_bin};
use lemonade_sql::wal::log_size;
use lemonade_tests::history::{generate, HistorySpec};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DAYS: u32 = 365;
const NODES: usize = 500;
const WAL_LIMIT: u64 = 8 * 1024 * 1024;
const SLOWDOWN_LIMIT: f64 = 1.2;
/// Hours 700-800: past the first 28-day window, the baseline of the slowdown.
const BASELINE: std::ops::Range<usize> = 700..800;

fn main() {
    let hours: usize = std::env::var("LEMONADE_SOAK_HOURS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DAYS as usize * 24);
    let lemon = release_bin("lemon");
    let dir = tempfile::tempdir().expect("temporary directory");
    let _kept;
    let dir_path = if std::env::var_os("LEMONADE_BENCH_KEEP").is_some() {
        _kept = dir.keep();
        println!("keeping {} (LEMONADE_BENCH_KEEP)", _kept.display());
        _kept.as_path()
    } else {
        dir.path()
    };
    let spec = HistorySpec {
        nodes: NODES,
        jobs: NODES * DAYS as usize,
        days: DAYS,
        lemons: NODES / 100,
        seed: 29,
        ..HistorySpec::default()
    };
    let (mut jobs, mut events) = (Vec::new(), Vec::new());
    let truth = generate(&spec, &mut jobs, &mut events).expect("generate the history");
    let jobs = by_hour(&jobs, 9, spec.start);
    let events = by_hour(&events, 1, spec.start);
    println!(
        "history: {} rows, {NODES} nodes, {DAYS} days, {} lemons; {hours} hourly `lemon run`s",
        truth.rows, spec.lemons
    );
    let config = write_config(dir_path, &truth.node_names);

    let (mut walls, mut wal_peak) = (Vec::with_capacity(hours), 0);
    for hour in 0..hours {
        let slice = |of: &BTreeMap<usize, String>, name: &str| {
            let path = dir_path.join(name);
            std::fs::write(&path, of.get(&hour).map_or("", String::as_str)).expect("slice");
            path
        };
        let (sacct, ev) = (slice(&jobs, "sacct.txt"), slice(&events, "events.txt"));
        let now = spec.start + (hour as i64 + 1) * 3600;
        let mut cmd = Command::new(&lemon);
        cmd.arg("--config").arg(&config);
        cmd.args(["--now", &now.to_string(), "run", "--dry-run", "--no-slurm"]);
        cmd.arg("--sacct-file")
            .arg(&sacct)
            .arg("--events-file")
            .arg(&ev);
        let sample = measure(&mut cmd);
        if sample.exit_code > 1 {
            let out = cmd.output().expect("lemon run again");
            panic!(
                "hour {hour}: exit {}: {}{}",
                sample.exit_code,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        walls.push(sample.wall);
        wal_peak = wal_peak.max(log_size(&dir_path.join("lemon.db")));
        if (hour + 1) % 720 == 0 {
            println!(
                "  day {:>3}: median of the last 30 days {:>7.1} ms, WAL {:.2} MB, database {:.1} MB",
                (hour + 1) / 24,
                median(&walls[hour + 1 - 720..]).as_secs_f64() * 1e3,
                log_size(&dir_path.join("lemon.db")) as f64 / 1e6,
                std::fs::metadata(dir_path.join("lemon.db")).map_or(0, |m| m.len()) as f64 / 1e6
            );
        }
    }
    summarise(&walls, wal_peak);
}

/// lemon.db in `dir`, and Slurm's node list from a stand-in `sinfo` that
/// shows every node idle (the run is a dry run: nothing else is called).
fn write_config(dir: &Path, nodes: &[String]) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin directory");
    let list: String = nodes
        .iter()
        .map(|n| format!("{n}|idle|none|Unknown|Unknown\n"))
        .collect();
    std::fs::write(dir.join("sinfo.txt"), list).expect("sinfo output");
    for (name, body) in [
        ("sinfo", format!("cat {}/sinfo.txt", dir.display())),
        ("squeue", String::new()),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("stand-in");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = dir.join("lemonade.toml");
    let text = format!(
        "[slurm]\nbin_dir = \"{}\"\n\n[lemon]\ndb_path = \"{}\"\n",
        bin.display(),
        dir.join("lemon.db").display()
    );
    std::fs::write(&config, text).expect("write config");
    config
}

/// The lines of a `|`-separated dump by the hour (from `start`) of field `field`.
fn by_hour(text: &[u8], field: usize, start: i64) -> BTreeMap<usize, String> {
    let mut hours: BTreeMap<usize, String> = BTreeMap::new();
    for line in String::from_utf8_lossy(text).lines() {
        let at: i64 = line
            .split('|')
            .nth(field)
            .and_then(|t| t.parse().ok())
            .unwrap_or(start);
        let hour = ((at - start).max(0) / 3600) as usize;
        let bucket = hours.entry(hour).or_default();
        bucket.push_str(line);
        bucket.push('\n');
    }
    hours
}

fn summarise(walls: &[Duration], wal_peak: u64) {
    println!(
        "WAL after a run: peak {:.2} MB (limit {:.0} MB: {})",
        wal_peak as f64 / 1e6,
        WAL_LIMIT as f64 / 1e6,
        if wal_peak <= WAL_LIMIT {
            "met"
        } else {
            "MISSED"
        }
    );
    if walls.len() < BASELINE.end + 100 {
        println!("too few hours for the slowdown figure");
        return;
    }
    let base = median(&walls[BASELINE]);
    let last = median(&walls[walls.len() - 100..]);
    let ratio = last.as_secs_f64() / base.as_secs_f64();
    println!(
        "median run: hours {}-{} {:.1} ms, last 100 {:.1} ms: {ratio:.2}x (limit {SLOWDOWN_LIMIT}x: {})",
        BASELINE.start,
        BASELINE.end,
        base.as_secs_f64() * 1e3,
        last.as_secs_f64() * 1e3,
        if ratio <= SLOWDOWN_LIMIT { "met" } else { "MISSED" }
    );
}

fn median(walls: &[Duration]) -> Duration {
    let mut sorted = walls.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}
