//! Ingest and scoring against synthetic histories with planted lemons.

use lemon::{app, db, ingest};
use lemonade_config::Config;
use lemonade_sql::rusqlite::Connection;
use lemonade_tests::history::{generate, spool_records, Detection, HistorySpec, HistoryTruth};
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
    let mut nodes = db::NodeIds::load(&conn).unwrap();
    for records in spool_records(&truth).values() {
        ingest::spool::ingest_records(&mut conn, &mut nodes, records).unwrap();
    }
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

/// Seeds of the realistic histories; every multiplier runs over all of them.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// Flagged lemons, flagged nodes, planted lemons, and flagged confounders
/// over [`SEEDS`] at `factor` times the background.
fn detection(factor: f64) -> (usize, usize, usize, Vec<String>) {
    detection_of(factor, false)
}

/// [`detection`], on a cluster whose SPANK plugin records task exits when
/// `task_exits`.
fn detection_of(factor: f64, task_exits: bool) -> (usize, usize, usize, Vec<String>) {
    let mut d = Detection::default();
    for seed in SEEDS {
        let f = load(&HistorySpec {
            task_exits,
            ..HistorySpec::realistic(seed, factor)
        });
        let got = flagged(&f);
        d.add(seed, &f.truth, &got);
        eprintln!(
            "{factor}x seed {seed}: flagged {got:?}, lemons {:?}",
            f.truth.lemons
        );
    }
    let Detection {
        hits,
        flagged: flagged_all,
        planted,
        confounded,
    } = d;
    eprintln!("{factor}x: {hits} of {planted} lemons found, {flagged_all} flagged");
    (hits, flagged_all, planted, confounded)
}

fn precision(hits: usize, flagged: usize) -> f64 {
    if flagged == 0 {
        1.0
    } else {
        hits as f64 / flagged as f64
    }
}

#[test]
fn at_ten_times_the_background_what_is_flagged_is_a_lemon() {
    let (hits, flagged, planted, confounded) = detection(10.0);
    assert!(
        precision(hits, flagged) >= 0.9,
        "{hits} of {flagged} flagged are lemons"
    );
    assert!(confounded.is_empty(), "confounders flagged: {confounded:?}");
    assert!(hits <= planted);
}

#[test]
fn at_thirty_times_the_background_what_is_flagged_is_a_lemon() {
    // 30 times 6.5 per 1000 node-days is about 3.6 hardware failures in a
    // lemon's 28 days of exposure; a third are multi-node runs without an
    // event, a quarter plain exit codes no one can tell from a user's bug.
    // Only lemons with 3 failures no check caught, or 2 that Slurm saw, on
    // 2 days, can be flagged (README: 14 of 34 over these seeds, 51 of 121
    // over seeds 1-20, where an oracle finds 82). Precision holds.
    let (hits, flagged, planted, confounded) = detection(30.0);
    assert!(
        precision(hits, flagged) >= 0.9,
        "{hits} of {flagged} flagged are lemons"
    );
    assert!(confounded.is_empty(), "confounders flagged: {confounded:?}");
    // Without the witnessed failures' exception: 8 of 34.
    assert!(hits * 10 >= planted * 3, "{hits} of {planted} found at 30x");
}

#[test]
fn at_eighty_times_the_background_most_lemons_are_found() {
    let (hits, flagged, planted, confounded) = detection(80.0);
    assert!(
        precision(hits, flagged) >= 0.9,
        "{hits} of {flagged} flagged are lemons"
    );
    assert!(confounded.is_empty(), "confounders flagged: {confounded:?}");
    let recall = hits as f64 / planted as f64;
    assert!(recall >= 0.6, "recall {recall}: {hits} of {planted}");
}

#[test]
fn at_three_times_the_background_lemons_stay_hidden_and_nothing_else_is_flagged() {
    // Three times 6.5 per 1000 node-days is about 0.5 hardware failures in
    // a node's 28 days: no count can tell such a node from a healthy one.
    // What is honest to assert: no healthy node is flagged, and at most a
    // few lemons are found.
    let (hits, flagged, planted, confounded) = detection(3.0);
    assert_eq!(hits, flagged, "only lemons may be flagged");
    assert!(confounded.is_empty(), "confounders flagged: {confounded:?}");
    assert!(hits * 5 <= planted, "{hits} of {planted} found at 3x");
}

#[test]
fn with_the_spank_plugins_task_exits_multi_node_user_errors_blame_no_healthy_node() {
    // Every failed multi-node run has a first failing task; most are a
    // user's bug. Blaming that task's node made 12 healthy nodes lemons
    // over seeds 1-20 at 30x (precision 0.70); weighing the run on that
    // node keeps precision at 1.00 (bench/src/bin/blame.rs).
    for factor in [3.0, 10.0, 30.0] {
        let (hits, flagged, planted, confounded) = detection_of(factor, true);
        assert!(
            precision(hits, flagged) >= 0.9,
            "{factor}x: {hits} of {flagged} flagged are lemons"
        );
        assert!(
            confounded.is_empty(),
            "{factor}x: confounders flagged: {confounded:?}"
        );
        if factor == 30.0 {
            // Where the task exits say where a multi-node run failed, a
            // user's bug is weighed by the chance it would have failed
            // first on that node: 16 of 34 found (14 when the user's whole
            // rate was weighed against the one node).
            assert!(
                hits * 100 >= planted * 45,
                "{hits} of {planted} found at 30x"
            );
        }
    }
}

#[test]
fn a_user_whose_jobs_always_fail_never_makes_a_node_a_lemon() {
    // One user fails every job, a third of them on one node, half by a
    // signal, over weeks; the rest of the cluster is healthy.
    let mut text = String::new();
    let day = 86_400;
    for k in 0..600i64 {
        let node = if k % 3 == 0 { 7 } else { 1 + k % 40 };
        let (state, exit) = if k % 2 == 0 {
            ("FAILED", "0:11")
        } else {
            ("FAILED", "1:0")
        };
        let end = 1_000_000 + k * day / 20;
        text.push_str(&format!(
            "{id}|{id}|gpu{node:04}|1|{state}|{exit}|0:0|{}|{}|{end}|3600|b|bad|gres/gpu=8\n",
            end - 7200,
            end - 3600,
            id = 10_000 + k
        ));
        // Another user's jobs succeed everywhere.
        text.push_str(&format!(
            "{id}|{id}|gpu{n:04}|1|COMPLETED|0:0|0:0|{}|{}|{end}|3600|b|good|gres/gpu=8\n",
            end - 7200,
            end - 3600,
            id = 20_000 + k,
            n = 1 + (k * 7) % 40
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    ingest::sacct::ingest_reader(&conn, text.as_bytes(), "f", 0).unwrap();
    let now = 1_000_000 + 600 * day / 20 + 60;
    let scores = app::score(&conn, &Config::default(), now).unwrap();
    assert_eq!(scores.flagged().count(), 0);
    assert_eq!(
        scores.attributed_failures, 0,
        "no failure of `bad` is a node's"
    );
    assert!(
        scores.user_error_failures >= 500,
        "{}",
        scores.user_error_failures
    );
}

#[test]
fn the_reliability_report_counts_the_planted_hardware_failures() {
    use lemon::reliability::{load::load_jobs, TimeRange};
    for (seed, task_exits) in SEEDS.into_iter().flat_map(|s| [(s, false), (s, true)]) {
        let f = load(&HistorySpec {
            task_exits,
            ..HistorySpec::realistic(seed, 10.0)
        });
        let until = chrono::DateTime::from_timestamp(f.truth.end + 1, 0).unwrap();
        let range = TimeRange::last_days(until, 28);
        let params = app::attribution_params(&Config::default());
        let loaded = load_jobs(&f.conn, range, None, &params).unwrap();
        let found = loaded
            .jobs
            .iter()
            .filter(|j| j.is_hardware_failure())
            .count();
        let planted = f
            .truth
            .hardware_between(range.since.timestamp(), range.until.timestamp());
        eprintln!(
            "seed {seed}, task exits {task_exits}: {found} hardware failures reported, {planted} planted"
        );
        // Within 20 %. What no evidence shows is missed: plain exit codes of
        // hardware failures, and multi-node exits without an event. Measured
        // over these seeds: 3 to 16 % under the planted count (6 to 22 %
        // before multi-node signal deaths the nodes together explain counted).
        assert!(
            found * 10 <= planted * 12,
            "seed {seed}, task exits {task_exits}: {found} reported, {planted} planted"
        );
        assert!(
            found * 10 >= planted * 8,
            "seed {seed}, task exits {task_exits}: {found} reported, {planted} planted"
        );
    }
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

/// Every run a scan of the whole history hands over, as text.
fn scanned(conn: &Connection) -> Vec<String> {
    struct Collect(Vec<String>);
    impl db::RunVisitor for Collect {
        fn visit(&mut self, run: &db::RunRow) -> lemon::error::Result<()> {
            self.0.push(format!("{run:?}"));
            Ok(())
        }
    }
    let mut all = Collect(Vec::new());
    db::scan_runs(conn, i64::MIN, i64::MAX, &mut all).unwrap();
    all.0
}

#[test]
fn the_ingest_leaves_every_run_packed_and_the_packed_runs_read_as_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let spec = HistorySpec {
        nodes: 60,
        jobs: 5000,
        ..HistorySpec::default()
    };
    let (mut jobs, mut events) = (Vec::new(), Vec::new());
    let truth = generate(&spec, &mut jobs, &mut events).unwrap();
    let conn = db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    // Two ingests: the second appends to the block the first left half full.
    let half = jobs.len() / 2;
    let half = half + jobs[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    ingest::sacct::ingest_reader(&conn, &jobs[..half], "f", truth.end).unwrap();
    ingest::sacct::ingest_reader(&conn, &jobs[half..], "f", truth.end).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM run_blocks_stale"), 0);
    assert_eq!(
        count("SELECT count(*) FROM run_blocks"),
        count("SELECT count(DISTINCT id >> 10) FROM jobs")
    );
    let packed = scanned(&conn);
    assert_eq!(packed.len() as i64, count("SELECT count(*) FROM jobs"));
    // The same runs read from their rows: every block stale.
    conn.execute_batch(
        "DELETE FROM run_blocks;
         INSERT INTO run_blocks_stale(block) SELECT DISTINCT id >> 10 FROM jobs;",
    )
    .unwrap();
    assert_eq!(scanned(&conn), packed);
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
    // One job killed on gpu001 three times (requeued), then another job on another day.
    for (k, (s, e)) in [(1000, 2000), (3000, 4000), (5000, 6000)]
        .iter()
        .enumerate()
    {
        let state = if k < 2 { "REQUEUED" } else { "NODE_FAIL" };
        text.push_str(&format!(
            "7|7|gpu001|1|{state}|1:0|0:0|900|{s}|{e}|1000|b|u|\n"
        ));
    }
    text.push_str(
        "7|7|gpu001|1|NODE_FAIL|0:0|0:0|900|7000|8000|1000|b|u|
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

#[test]
fn a_node_the_checks_took_out_three_times_is_flagged_and_one_long_repair_is_not() {
    let spec = HistorySpec {
        lemons: 0,
        ..HistorySpec::default()
    };
    let mut f = load(&spec);
    let (flapper, repaired) = ("gpu0005", "gpu0006");
    let day = 86_400;
    let t = spec.start + 2 * day;
    // Back in service after two hours each time, three times in the window.
    let mut events: String = (0..3)
        .map(|k| {
            let at = t + k * 5 * day;
            format!("{flapper}|{at}|{}|DRAIN|hc: XID_79 gpu3|root\n", at + 7_200)
        })
        .collect();
    // One outage of twelve days, repaired once.
    events.push_str(&format!(
        "{repaired}|{t}|{}|DRAIN|hc: XID_48 gpu5|root\n",
        t + 12 * day
    ));
    ingest::events::ingest_text(&mut f.conn, &events, "events").unwrap();
    // Each also lost one job that no check caught, days after its outages.
    let at = t + 14 * day;
    let jobs: String = [flapper, repaired]
        .iter()
        .enumerate()
        .map(|(k, node)| {
            let id = f.truth.next_job_id + k as i64;
            format!("{id}|{id}|{node}|1|NODE_FAIL|0:0|0:0|{}|{}|{at}|3600|batch|alice|billing=8,cpu=64,gres/gpu=8,mem=512G,node=1\n", at - 4000, at - 3600)
        })
        .collect();
    ingest::sacct::ingest_reader(&f.conn, jobs.as_bytes(), "jobs", f.truth.end).unwrap();
    let scores = app::score(&f.conn, &Config::default(), f.truth.end + 60).unwrap();
    let flagged: Vec<_> = scores.flagged().map(|v| v.signals.node.as_str()).collect();
    assert!(flagged.contains(&flapper), "{flagged:?}");
    assert!(!flagged.contains(&repaired), "{flagged:?}");
    let v = scores
        .flagged()
        .find(|v| v.signals.node == flapper)
        .unwrap();
    let reason = lemon::decide::reason(v, 28);
    assert!(reason.starts_with("lemon: out 3x/28d"), "{reason}");
}
