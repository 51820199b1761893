//! Ingest and scoring against synthetic histories with planted lemons.

use lemon::{app, db, ingest};
use lemonade_config::Config;
use lemonade_sql::rusqlite::Connection;
use lemonade_tests::history::{generate, HistorySpec, HistoryTruth};
use std::time::Duration;

struct Fixture {
    _dir: tempfile::TempDir,
    conn: Connection,
    truth: HistoryTruth,
}

fn load(spec: &HistorySpec) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    let (mut jobs, mut events) = (Vec::new(), Vec::new());
    let truth = generate(spec, &mut jobs, &mut events).unwrap();
    let stats = ingest::sacct::ingest_reader(&conn, &jobs[..], "jobs", truth.end).unwrap();
    assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
    ingest::events::ingest_text(&mut conn, &String::from_utf8(events).unwrap(), "events").unwrap();
    Fixture {
        _dir: dir,
        conn,
        truth,
    }
}

fn flagged(f: &Fixture) -> Vec<String> {
    let scores = app::score(&f.conn, &Config::default(), f.truth.end + 60).unwrap();
    scores.flagged().map(|v| v.signals.node.clone()).collect()
}

#[test]
fn planted_lemons_are_found_and_nothing_else() {
    // 80 times the background: about 12 failures per lemon in 28 days.
    let f = load(&HistorySpec {
        lemon_factor: 80.0,
        ..HistorySpec::default()
    });
    assert!(f.truth.lemon_failures >= 20, "{:?}", f.truth.lemon_failures);
    let mut got = flagged(&f);
    got.sort();
    assert_eq!(got, f.truth.lemons);
}

#[test]
fn a_healthy_fleet_at_the_papers_rate_stays_clean() {
    for seed in [1, 2, 3] {
        let f = load(&HistorySpec {
            nodes: 1000,
            jobs: 60_000,
            lemons: 0,
            seed,
            ..HistorySpec::default()
        });
        assert!(f.truth.background_failures > 50);
        assert_eq!(flagged(&f), Vec::<String>::new(), "seed {seed}");
    }
}

#[test]
fn multi_node_failures_are_attributed_through_node_events() {
    let f = load(&HistorySpec::default());
    flagged(&f); // scoring stores the attributions
    let by_rule: Vec<(String, i64)> = f
        .conn
        .prepare("SELECT rule, count(*) FROM attributions GROUP BY rule ORDER BY rule")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let rules: Vec<&str> = by_rule.iter().map(|(r, _)| r.as_str()).collect();
    // Multi-node NODE_FAILs through the culprit's DOWN event; multi-node
    // user errors (exit 127) stay unattributed.
    assert!(rules.contains(&"node_event"), "{by_rule:?}");
    assert!(rules.contains(&"unattributed"), "{by_rule:?}");
    assert!(rules.contains(&"single_node"), "{by_rule:?}");
    assert!(rules.contains(&"user_error"), "{by_rule:?}");
}

#[test]
fn re_ingest_and_interrupted_ingest_store_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let spec = HistorySpec {
        nodes: 50,
        jobs: 3000,
        ..HistorySpec::default()
    };
    let (mut jobs, mut events) = (Vec::new(), Vec::new());
    let truth = generate(&spec, &mut jobs, &mut events).unwrap();
    let count = |c: &Connection| -> (i64, i64) {
        c.query_row(
            "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM job_nodes)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };

    let whole = db::open(&dir.path().join("a.db"), Duration::from_secs(5)).unwrap();
    let first = ingest::sacct::ingest_reader(&whole, &jobs[..], "f", truth.end).unwrap();
    let again = ingest::sacct::ingest_reader(&whole, &jobs[..], "f", truth.end).unwrap();
    assert_eq!(first.inserted as i64, count(&whole).0);
    assert_eq!(again.inserted, 0);
    assert_eq!(first.rows_read, truth.rows);

    // An ingest cut half-way (a batch committed, the rest lost) then re-run.
    let cut = db::open(&dir.path().join("b.db"), Duration::from_secs(5)).unwrap();
    let half = jobs.len() / 2;
    let half = half + jobs[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    ingest::sacct::ingest_reader(&cut, &jobs[..half], "f", truth.end).unwrap();
    ingest::sacct::ingest_reader(&cut, &jobs[..], "f", truth.end).unwrap();
    assert_eq!(count(&cut), count(&whole));
}

#[test]
fn malformed_rows_are_skipped_counted_and_located() {
    let dir = tempfile::tempdir().unwrap();
    let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let text = "\
1|1|gpu001|1|COMPLETED|0:0|0:0|10|20|30|10|b|u|gres/gpu=8
garbage line
2|2|gpu[001-|2|FAILED|1:0|0:0|10|20|30|10|b|u|
3|3|gpu[001-002]|2|FAILED|1:0|0:0|10|20|30|10|b|u|gres/gpu=16
4|4|gpu003|1|RUNNING|0:0|0:0|10|20|Unknown|10|b|u|
5|5|gpu003|1|COMPLETED|x:y|0:0|10|20|30|10|b|u|
";
    let stats = ingest::sacct::ingest_reader(&conn, text.as_bytes(), "hist.txt", 100).unwrap();
    assert_eq!(stats.inserted, 2);
    assert_eq!(stats.skipped, 3);
    assert_eq!(stats.unfinished, 1);
    let lines: Vec<&str> = stats.errors.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(lines, ["hist.txt:2", "hist.txt:3", "hist.txt:6"]);
}

#[test]
fn requeued_runs_are_rows_of_their_own_and_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let day = 86_400;
    let mut text = String::new();
    // One job failing on gpu001 three times (requeued), then two more jobs on other days.
    for (k, (s, e)) in [(1000, 2000), (3000, 4000), (5000, 6000)]
        .iter()
        .enumerate()
    {
        let state = if k < 2 { "REQUEUED" } else { "FAILED" };
        text.push_str(&format!(
            "7|7|gpu001|1|{state}|1:0|0:0|900|{s}|{e}|1000|b|u|\n"
        ));
    }
    text.push_str(
        "7|7|gpu001|1|FAILED|1:0|0:0|900|7000|8000|1000|b|u|
",
    );
    text.push_str(&format!(
        "8|8|gpu001|1|NODE_FAIL|0:0|0:0|900|{}|{}|1000|b|u|\n",
        day + 100,
        day + 900
    ));
    let stats = ingest::sacct::ingest_reader(&conn, text.as_bytes(), "f", 0).unwrap();
    assert_eq!(stats.inserted, 5);
    let scores = app::score(&conn, &Config::default(), 2 * day).unwrap();
    let v = scores
        .verdicts
        .iter()
        .find(|v| v.signals.node == "gpu001")
        .unwrap();
    assert_eq!(v.signals.failing_jobs, ["7", "8"]);
    assert_eq!(v.signals.single_node_node_fails, 2);
}
