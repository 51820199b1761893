//! `lemon` at scale: a 1,000,000-job history on 4,000 nodes.
//!
//! Measures the release binary (`cargo build --release -p lemon` first):
//! * full ingest of the history with `lemon ingest --sacct-file` (limit 10 s),
//! * scoring with `lemon score` (limit 1 s),
//! * incremental ingest of one more day into the same database (limit 1 s),
//! * full ingest of the same history as a dump with a header (fields by
//!   name, in another order, with Account and JobName, ISO times) into a
//!   database of its own (limit 10 s),
//! * peak RSS of all of them (limit 300 MB).
//!
//! `lemon-bench [JOBS] [NODES]` scales it down for a quick look;
//! `LEMON_BENCH_DIR=DIR` keeps the files there.

use lemonade_bench::{measure, release_bin, repeat, report, Sample, Summary};
use lemonade_tests::history::{generate, HistorySpec};
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DAYS: u32 = 60;

fn main() {
    let mut args = std::env::args().skip(1);
    let jobs: usize = args.next().map_or(1_000_000, |a| a.parse().expect("JOBS"));
    let nodes: usize = args.next().map_or(4_000, |a| a.parse().expect("NODES"));
    let lemon = release_bin("lemon");
    let dir = tempfile::tempdir().expect("temp dir");
    // LEMON_BENCH_DIR keeps the history and database for a closer look.
    let kept = std::env::var_os("LEMON_BENCH_DIR").map(std::path::PathBuf::from);
    if let Some(k) = &kept {
        std::fs::create_dir_all(k).expect("LEMON_BENCH_DIR");
        let _ = std::fs::remove_file(k.join("lemon.db"));
    }
    let p = kept.as_deref().unwrap_or(dir.path());

    let spec = HistorySpec {
        nodes,
        jobs,
        days: DAYS,
        lemons: nodes / 100,
        lemon_factor: 80.0,
        seed: 7,
        ..HistorySpec::default()
    };
    let truth = write_history(&spec, &p.join("sacct.txt"), &p.join("events.txt"));
    let day = HistorySpec {
        jobs: jobs / DAYS as usize,
        days: 1,
        start: truth.end + 1,
        first_job_id: truth.next_job_id,
        seed: 8,
        ..spec.clone()
    };
    let day_truth = write_history(&day, &p.join("day.txt"), &p.join("day-events.txt"));
    let size = std::fs::metadata(p.join("sacct.txt")).map_or(0, |m| m.len());
    println!(
        "history: {} rows, {} nodes, {DAYS} days, {} planted lemons, {:.1} MB of sacct text",
        truth.rows,
        nodes,
        truth.lemons.len(),
        size as f64 / 1e6
    );
    std::fs::write(p.join("lemonade.toml"), "").expect("config");

    let base = |db: &str| {
        let mut c = Command::new(&lemon);
        c.arg("--config")
            .arg(p.join("lemonade.toml"))
            .arg("--db")
            .arg(p.join(db));
        c
    };
    let now = (truth.end + 60).to_string();

    let full = once(base("lemon.db").args([
        "--now",
        &now,
        "ingest",
        "--no-slurm",
        "--sacct-file",
        path(p, "sacct.txt"),
        "--events-file",
        path(p, "events.txt"),
    ]));
    report(
        &format!("lemon ingest, {} jobs", truth.rows),
        &full,
        Some(Duration::from_secs(10)),
    );

    let score = repeat(3, || {
        let mut c = base("lemon.db");
        c.args(["--now", &now, "score"]);
        c
    });
    report(
        "lemon score (28-day window)",
        &score,
        Some(Duration::from_secs(1)),
    );

    let day_now = (day_truth.end + 60).to_string();
    let inc = once(base("lemon.db").args([
        "--now",
        &day_now,
        "ingest",
        "--no-slurm",
        "--sacct-file",
        path(p, "day.txt"),
        "--events-file",
        path(p, "day-events.txt"),
    ]));
    report(
        &format!("lemon ingest, one more day ({} jobs)", day_truth.rows),
        &inc,
        Some(Duration::from_secs(1)),
    );

    let header = header_dump_ingest(p, &base("lemon-header.db"), &now);

    let peak = [full.max_rss, score.max_rss, inc.max_rss, header.max_rss]
        .into_iter()
        .max()
        .unwrap_or(0);
    println!(
        "peak RSS {:.1} MB (limit 300 MB: {})",
        peak as f64 / 1e6,
        if peak <= 300_000_000 { "met" } else { "MISSED" }
    );

    // The planted lemons are what scoring finds.
    let out = base("lemon.db")
        .args(["--now", &day_now, "score", "--format", "json"])
        .output()
        .expect("lemon score");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("score json");
    let flagged: Vec<String> = json["flagged"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v["signals"]["node"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let found = truth.lemons.iter().filter(|l| flagged.contains(l)).count();
    println!(
        "flagged {} nodes: {found} of {} planted lemons, {} others",
        flagged.len(),
        truth.lemons.len(),
        flagged.len() - found
    );
}

/// Ingest of the history as an administrator's dump: a header line, the
/// fields in another order with two more (Account; JobName, free text, last),
/// ISO times. Written from the generator's rows, which have no header.
fn header_dump_ingest(p: &Path, base: &Command, now: &str) -> Summary {
    use std::io::{BufRead, Write};
    let from =
        std::io::BufReader::new(std::fs::File::open(p.join("sacct.txt")).expect("sacct.txt"));
    let mut to = BufWriter::new(std::fs::File::create(p.join("sacct-header.txt")).expect("dump"));
    writeln!(
        to,
        "Account|JobID|JobIDRaw|State|NodeList|NNodes|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|AllocTRES|JobName"
    )
    .expect("write");
    let iso = |t: &str| -> String {
        t.parse::<i64>()
            .ok()
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
            .map_or_else(
                || t.to_string(),
                |d| d.format("%Y-%m-%dT%H:%M:%S").to_string(),
            )
    };
    for line in from.lines() {
        let line = line.expect("read");
        let f: Vec<&str> = line.split('|').collect();
        writeln!(
            to,
            "ml|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|train-{}",
            f[1],
            f[0],
            f[4],
            f[2],
            f[3],
            f[5],
            f[6],
            iso(f[7]),
            iso(f[8]),
            iso(f[9]),
            f[10],
            f[11],
            f[12],
            f[13],
            f[0].len()
        )
        .expect("write");
    }
    to.flush().expect("flush");
    drop(to);
    let mut cmd = Command::new(base.get_program());
    cmd.args(base.get_args()).args([
        "--now",
        now,
        "ingest",
        "--no-slurm",
        "--time-zone",
        "UTC",
        "--sacct-file",
        path(p, "sacct-header.txt"),
    ]);
    let s = once(&mut cmd);
    report(
        "lemon ingest, the same jobs as a dump with a header and ISO times",
        &s,
        Some(Duration::from_secs(10)),
    );
    s
}

fn write_history(
    spec: &HistorySpec,
    jobs: &Path,
    events: &Path,
) -> lemonade_tests::history::HistoryTruth {
    let mut j = BufWriter::new(std::fs::File::create(jobs).expect("jobs file"));
    let mut e = BufWriter::new(std::fs::File::create(events).expect("events file"));
    generate(spec, &mut j, &mut e).expect("write history")
}

fn path<'a>(dir: &Path, name: &str) -> &'a str {
    // Leaked once per file: the benchmark runs a handful of commands.
    Box::leak(dir.join(name).display().to_string().into_boxed_str())
}

/// One run of a command that changes state, checked for success.
fn once(cmd: &mut Command) -> Summary {
    let s: Sample = measure(cmd);
    assert!(
        s.exit_code == 0 || s.exit_code == 1,
        "{cmd:?} exited {}",
        s.exit_code
    );
    Summary {
        runs: 1,
        median: s.wall,
        worst: s.wall,
        max_rss: s.max_rss,
    }
}
