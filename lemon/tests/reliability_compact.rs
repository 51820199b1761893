//! The report from lemon.db is computed from compact runs
//! (`load::load_runs`, what `lemon report --reliability` reads) rather than
//! from `JobRecord`s (`load::load_jobs`): the two must give the same
//! report, byte for byte, in every format.

use lemon::attribute::AttributionParams;
use lemon::reliability::load::{current_lemons, load_jobs, load_runs};
use lemon::reliability::render::{render, Format};
use lemon::reliability::{build_report, ReportInput, ReportParams, Run};
use lemonade_tests::reliability_history::{
    generate, store, SyntheticSpec, SIZES_FOR_STATISTICS, SIZES_REALISTIC,
};
use std::time::Duration;

fn same_report_from_runs_and_records(sizes: &'static [(u32, f64)]) {
    let input = generate(&SyntheticSpec {
        jobs: 20_000,
        days: 28,
        fleet_nodes: 400,
        sizes,
        ..SyntheticSpec::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let mut conn = lemon::db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    store(&mut conn, &input).unwrap();
    let attribution = AttributionParams::default();
    let records = load_jobs(&conn, input.range, None, &attribution).unwrap();
    let runs = load_runs(&conn, input.range, None, &attribution).unwrap();
    assert_eq!(records.jobs.len(), runs.jobs.len());
    assert_eq!(records.gpus_per_node, runs.gpus_per_node);
    assert!(
        runs.jobs.iter().any(|r| r.category().is_some()),
        "the history has attributed failures"
    );
    let lemons = current_lemons(&conn).unwrap();
    let from_records = ReportInput {
        jobs: records.jobs,
        lemons: lemons.clone(),
        ..input.clone()
    };
    let from_runs = ReportInput {
        range: input.range,
        fleet_nodes: input.fleet_nodes,
        gpus_per_node: runs.gpus_per_node,
        jobs: runs.jobs,
        lemons,
        signals: input.signals.clone(),
        state_changes: input.state_changes.clone(),
    };
    let params = ReportParams::default();
    let want = build_report(&from_records, &params).unwrap();
    let got = build_report(&from_runs, &params).unwrap();
    for format in [Format::Text, Format::Json, Format::Html] {
        assert_eq!(
            render(&got, format).unwrap(),
            render(&want, format).unwrap(),
            "{format:?}"
        );
    }
}

#[test]
fn compact_runs_give_the_records_report_byte_for_byte_for_realistic_sizes() {
    same_report_from_runs_and_records(&SIZES_REALISTIC);
}

#[test]
fn compact_runs_give_the_records_report_byte_for_byte_for_large_jobs() {
    same_report_from_runs_and_records(&SIZES_FOR_STATISTICS);
}
