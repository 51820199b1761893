//! The independent generator's histories (issue 47) read by lemon's own
//! ingest: every sacct row and event parses, and the logs the dump names are
//! read, not refused. The generator lives in `lemonade-tests`, which may not
//! depend on lemon; these checks live here.

use lemon::{db, ingest};
use lemonade_tests::independent_history::{generate, IndependentHistorySpec};
use std::time::Duration;

/// The logs are this process's files: lemon reads a log only when its owner
/// is the job's user.
fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

#[test]
fn the_dump_ingests_with_nothing_skipped_and_its_logs_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let h = generate(&IndependentHistorySpec::new(1), &logs, uid()).unwrap();
    let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let stats = ingest::sacct::ingest_reader(&conn, &h.sacct[..], "jobs", h.end).unwrap();
    assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
    assert_eq!(stats.unfinished, 0);
    let rows = h.sacct.iter().filter(|b| **b == b'\n').count() as u64 - 1;
    assert_eq!((stats.rows_read, stats.inserted), (rows, rows));
    let read: u64 = stats.job_logs.verdicts.values().sum();
    assert!(read > 1000, "{:?}", stats.job_logs);
    // Logs that were written are never refused (owner, size, age, links);
    // only the ones Slurm named but the job never wrote may be missing.
    let refused: Vec<_> = stats
        .job_logs
        .skipped
        .iter()
        .filter(|(why, _)| *why != "no_log")
        .collect();
    assert!(refused.is_empty(), "{:?}", stats.job_logs);
}

#[test]
fn every_event_parses_and_checks_take_nodes_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = IndependentHistorySpec::new(2);
    spec.logs = false;
    let h = generate(&spec, dir.path(), uid()).unwrap();
    let mut out = 0;
    for line in h.events.lines() {
        let ev = ingest::events::parse_line(line).unwrap().unwrap();
        assert!(ev.end.is_some_and(|e| e > ev.start), "{line}");
        assert!(ingest::events::is_out_of_service(&ev.state), "{line}");
        out += usize::from(ev.reason.starts_with("hc: ") && ev.user == "root");
    }
    assert!(out >= 20, "{out} check events");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let stats = ingest::events::ingest_text(&mut conn, &h.events, "events").unwrap();
    assert_eq!(stats.skipped, 0);
}

/// One seed of the independent generator ingested and scored by lemon at
/// default settings, as `lemon ingest` and `lemon score` would.
fn scored(seed: u64, logs: bool) -> lemonade_tests::independent_history::HistoryScore {
    use lemonade_tests::independent_history::score;
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("logs");
    std::fs::create_dir(&log_dir).unwrap();
    let mut spec = IndependentHistorySpec::new(seed);
    spec.logs = logs;
    let h = generate(&spec, &log_dir, uid()).unwrap();
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    ingest::sacct::ingest_reader(&conn, &h.sacct[..], "jobs", h.end).unwrap();
    ingest::events::ingest_text(&mut conn, &h.events, "events").unwrap();
    let scores = lemon::app::score(&conn, &lemonade_config::Config::default(), h.end).unwrap();
    let flagged: Vec<String> = scores.flagged().map(|v| v.signals.node.clone()).collect();
    let s = score(&h, &flagged);
    eprintln!("{s}");
    s
}

/// Issue 47's evaluation on the generator lemon was not tuned on: 20 seeds
/// with and without logs, printed as the book's tables. Slow; run it in
/// release mode:
/// `cargo test --release -p lemon --test independent_history issue_47 -- --ignored --nocapture`.
#[test]
#[ignore]
fn issue_47_evaluation_on_the_independent_generator_over_twenty_seeds() {
    use lemonade_tests::independent_history::HistoryScore;
    for logs in [true, false] {
        eprintln!("logs: {logs}\n{}", HistoryScore::HEADER);
        let all: Vec<HistoryScore> = (1..=20).map(|seed| scored(seed, logs)).collect();
        eprintln!("{}", HistoryScore::total(&all));
    }
}

#[test]
fn on_two_independent_seeds_with_logs_nothing_healthy_is_flagged() {
    for seed in [1, 2] {
        let s = scored(seed, true);
        assert!(s.confounders_flagged.is_empty(), "{s}");
        assert!(!s.long_repair_flagged, "{s}");
        assert_eq!(s.true_positives, s.flagged, "{s}");
    }
}
