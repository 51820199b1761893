//! The cluster reliability report over 1,000,000 job runs (limit: 5 s):
//!
//! 1. from the input structs: computation plus rendering in all three formats;
//! 2. from lemon.db: loading the runs (with attribution from the health
//!    history and the lemon list), then the same computation and rendering.
//!
//! Scoring the lemon signals (which `lemon report --reliability` also runs)
//! is measured by the `lemon` benchmark.
//!
//! `cargo run --release -p lemonade-bench --bin reliability [-- JOBS]`

use lemon::attribute::AttributionParams;
use lemon::reliability::load::{current_lemons, fleet_nodes, load_jobs};
use lemon::reliability::render::{render, Format};
use lemon::reliability::{build_report, JobState, ReportInput, ReportParams};
use lemonade_tests::reliability_history::{
    generate, store, SyntheticSpec, SIZES_FOR_STATISTICS, SIZES_REALISTIC,
};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(5);
const RUNS: usize = 3;

fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("JOBS must be a number"))
        .unwrap_or(1_000_000);
    bench(jobs, "realistic sizes", &SIZES_REALISTIC);
    bench(jobs, "large-job heavy", &SIZES_FOR_STATISTICS);
}

fn bench(jobs: usize, mix: &str, sizes: &'static [(u32, f64)]) {
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
    let from_db = measure(|| {
        let loaded =
            load_jobs(&conn, input.range, None, &AttributionParams::default()).expect("load");
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
        let report = build_report(&db_input, &params).expect("report");
        render_all(&report)
    });
    print_figure(
        &format!("reliability, {jobs} runs, {mix}, from lemon.db"),
        &from_db,
    );
}

/// Renders every format; returns the total size so nothing is optimised away.
fn render_all(report: &lemon::reliability::ReliabilityReport) -> usize {
    [Format::Text, Format::Json, Format::Html]
        .into_iter()
        .map(|f| render(report, f).expect("render").len())
        .sum()
}

fn measure(mut f: impl FnMut() -> usize) -> Vec<Duration> {
    let mut walls: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    walls.sort();
    walls
}

fn print_figure(name: &str, walls: &[Duration]) {
    let median = walls[walls.len() / 2];
    println!(
        "{name:<56} median {:>8.1} ms  worst {:>8.1} ms  ({} runs)  (limit {} ms: {})",
        median.as_secs_f64() * 1000.0,
        walls[walls.len() - 1].as_secs_f64() * 1000.0,
        walls.len(),
        LIMIT.as_millis(),
        if median <= LIMIT { "met" } else { "MISSED" }
    );
}
