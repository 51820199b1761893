//! The cluster reliability report over 1,000,000 job runs (limit: 0.5 s,
//! issue 28's figure for the large-job-heavy history):
//!
//! 1. from the input structs: computation plus rendering in all three formats;
//! 2. from lemon.db: loading the runs (with attribution from the health
//!    history and the lemon list), then the same computation and rendering.
//!
//! Scoring the lemon signals (which `lemon report --reliability` also runs)
//! is measured by the `lemon` benchmark.
//!
//! `cargo run --release -p lemonade-bench --bin reliability [-- JOBS [MIX] [--dump DIR]]`
//!
//! MIX is `realistic` or `large` (default: both). `--dump DIR` writes the
//! report from lemon.db in every format to `DIR/<mix>.{txt,json,html}`, so
//! that a change meant to be faster can be shown to give the same report.

use lemon::attribute::AttributionParams;
use lemon::reliability::load::{current_lemons, fleet_nodes, load_runs};
use lemon::reliability::render::{render, Format};
use lemon::reliability::{build_report, JobState, ReportInput, ReportParams};
use lemonade_tests::reliability_history::{
    generate, store, SyntheticSpec, SIZES_FOR_STATISTICS, SIZES_REALISTIC,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_millis(500);
const RUNS: usize = 3;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dump = args.iter().position(|a| a == "--dump").map(|i| {
        let dir = PathBuf::from(args.get(i + 1).expect("--dump needs a directory"));
        args.drain(i..=i + 1);
        std::fs::create_dir_all(&dir).expect("create the dump directory");
        dir
    });
    let jobs: usize = args
        .first()
        .map(|s| s.parse().expect("JOBS must be a number"))
        .unwrap_or(1_000_000);
    let mix = args.get(1).map(String::as_str);
    if matches!(mix, None | Some("realistic")) {
        bench(jobs, "realistic sizes", &SIZES_REALISTIC, dump.as_deref());
    }
    if matches!(mix, None | Some("large")) {
        bench(
            jobs,
            "large-job heavy",
            &SIZES_FOR_STATISTICS,
            dump.as_deref(),
        );
    }
}

fn bench(jobs: usize, mix: &str, sizes: &'static [(u32, f64)], dump: Option<&Path>) {
    let spec = SyntheticSpec {
        jobs,
        days: 28,
        fleet_nodes: 4000,
        sizes,
        ..SyntheticSpec::default()
    };
    let t = Instant::now();
    let input = generate(&spec);
    let failed_node_rows: u64 = input
        .jobs
        .iter()
        .filter(|j| matches!(j.state, JobState::Failed | JobState::NodeFail))
        .map(|j| u64::from(j.nodes))
        .sum();
    println!(
        "{mix}: generated {} runs on {} nodes ({failed_node_rows} nodes of failed runs) in {:.2} s (setup)",
        input.jobs.len(),
        spec.fleet_nodes,
        t.elapsed().as_secs_f64()
    );
    let params = ReportParams::default();

    let from_structs = measure(|| {
        let report = build_report(&input, &params).expect("report");
        render_all(&report)
    });
    print_figure(
        &format!("reliability, {jobs} runs, {mix}, from structs"),
        &from_structs,
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let db_path = dir.path().join("lemon.db");
    let t = Instant::now();
    let mut conn = lemon::db::open(&db_path, Duration::from_secs(10)).expect("create lemon.db");
    store(&mut conn, &input).expect("write lemon.db");
    println!(
        "{mix}: wrote lemon.db in {:.2} s (setup)",
        t.elapsed().as_secs_f64()
    );
    let from_db_report = || {
        let loaded =
            load_runs(&conn, input.range, None, &AttributionParams::default()).expect("load");
        let db_input = ReportInput {
            range: input.range,
            fleet_nodes: fleet_nodes(&conn).expect("nodes"),
            gpus_per_node: loaded.gpus_per_node,
            jobs: loaded.jobs,
            lemons: current_lemons(&conn).expect("lemons"),
            signals: input.signals.clone(),
            state_changes: Vec::new(),
        };
        assert_eq!(db_input.jobs.len(), input.jobs.len());
        build_report(&db_input, &params).expect("report")
    };
    let from_db = measure(|| render_all(&from_db_report()));
    print_figure(
        &format!("reliability, {jobs} runs, {mix}, from lemon.db"),
        &from_db,
    );
    if let Some(dir) = dump {
        dump_report(&from_db_report(), dir, mix);
    }
}

/// Writes the report in every format, for comparing two versions of the code.
fn dump_report(report: &lemon::reliability::ReliabilityReport, dir: &Path, mix: &str) {
    let name = mix.split_whitespace().next().unwrap_or(mix);
    for (format, ext) in [
        (Format::Text, "txt"),
        (Format::Json, "json"),
        (Format::Html, "html"),
    ] {
        let path = dir.join(format!("{name}.{ext}"));
        std::fs::write(&path, render(report, format).expect("render")).expect("write the dump");
        println!("{mix}: wrote {}", path.display());
    }
}

/// Renders every format; returns the total size so nothing is optimised away.
fn render_all(report: &lemon::reliability::ReliabilityReport) -> usize {
    [Format::Text, Format::Json, Format::Html]
        .into_iter()
        .map(|f| render(report, f).expect("render").len())
        .sum()
}

/// Wall-clock and CPU time of each run, each sorted. The CPU time (the
/// process's, so that the report's own threads count) is the figure to
/// compare on a machine that others share.
fn measure(mut f: impl FnMut() -> usize) -> (Vec<Duration>, Vec<Duration>) {
    let (mut walls, mut cpus): (Vec<Duration>, Vec<Duration>) = (0..RUNS)
        .map(|_| {
            let (t, c) = (Instant::now(), process_cpu());
            std::hint::black_box(f());
            (t.elapsed(), process_cpu().saturating_sub(c))
        })
        .unzip();
    walls.sort();
    cpus.sort();
    (walls, cpus)
}

/// CPU time this process has used, in all its threads.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn print_figure(name: &str, (walls, cpus): &(Vec<Duration>, Vec<Duration>)) {
    let median = walls[walls.len() / 2];
    println!(
        "{name:<56} median {:>8.1} ms  worst {:>8.1} ms  cpu median {:>8.1} ms  ({} runs)  (limit {} ms: {})",
        median.as_secs_f64() * 1000.0,
        walls[walls.len() - 1].as_secs_f64() * 1000.0,
        cpus[cpus.len() / 2].as_secs_f64() * 1000.0,
        walls.len(),
        LIMIT.as_millis(),
        if median <= LIMIT { "met" } else { "MISSED" }
    );
}
