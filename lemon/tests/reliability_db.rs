//! The reliability report read from a real lemon.db: attribution from the
//! health history, requeues, GPUs per node, the lemon list, and the
//! `lemon report --reliability` / `lemon ettr` command lines.

use chrono::DateTime;
use lemon::attribute::AttributionParams;
use lemon::reliability::load::{current_lemons, load_jobs};
use lemon::reliability::{JobState, TimeRange};
use lemonade_sql::rusqlite::{params, Connection};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// 2026-01-10 00:00 UTC.
const T: i64 = 1_768_003_200;

fn db(dir: &Path) -> (Connection, std::path::PathBuf) {
    let path = dir.join("lemon.db");
    let conn = lemon::db::open(&path, Duration::from_secs(5)).unwrap();
    for (id, name) in [(1, "gpu001"), (2, "gpu002"), (3, "gpu003"), (4, "gpu004")] {
        conn.execute(
            "INSERT INTO nodes(id, name) VALUES (?1, ?2)",
            params![id, name],
        )
        .unwrap();
    }
    #[allow(clippy::type_complexity)]
    let jobs: [(i64, i64, &str, i64, i64, &str, i64, Option<i64>, &[i64]); 5] = [
        // id, raw, job id, start, end, state, nnodes, gpus, nodes
        (
            1,
            100,
            "100",
            T,
            T + 7200,
            "NODE_FAIL",
            4,
            Some(32),
            &[1, 2, 3, 4],
        ),
        (
            2,
            100,
            "100",
            T + 7800,
            T + 18_000,
            "COMPLETED",
            4,
            Some(32),
            &[1, 2, 3, 4],
        ),
        (3, 101, "101", T, T + 3600, "FAILED", 1, None, &[1]),
        (4, 102, "102", T, T + 3600, "FAILED", 2, Some(16), &[1, 2]),
        (
            5,
            103,
            "103",
            T,
            T + 600,
            "CANCELLED by 1000",
            1,
            Some(8),
            &[4],
        ),
    ];
    for (id, raw, job_id, start, end, state, nnodes, gpus, nodes) in jobs {
        conn.execute(
            "INSERT INTO jobs(id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition, nnodes, nodelist, gpus)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'gpu', ?8, 'x', ?9)",
            params![id, raw, job_id, start - 300, start, end, state, nnodes, gpus],
        )
        .unwrap();
        for n in nodes {
            conn.execute(
                "INSERT INTO job_nodes(job, node) VALUES (?1, ?2)",
                params![id, n],
            )
            .unwrap();
        }
    }
    let findings = [
        // node, at, check, severity
        (2, T + 7200 - 300, "pcie", "down"), // job 1: first in the window
        (3, T + 7200 - 120, "xid", "down"),  // job 1: co-occurring
        (1, T + 3600 + 900, "ecc", "down"),  // job 4: 15 min after, outside
        (2, T + 3600 - 60, "ib", "warning"), // job 4: warnings do not attribute
    ];
    for (seq, (node, at, check, severity)) in findings.into_iter().enumerate() {
        conn.execute(
            "INSERT INTO health(node, epoch, seq, at, kind, check_name, severity) VALUES (?1, 'e', ?2, ?3, 'finding', ?4, ?5)",
            params![node, seq as i64, at, check, severity],
        )
        .unwrap();
    }
    let decisions = [
        (4, T - 86_400, "drained", 0),
        (3, T - 86_400, "drained", 0),
        (3, T - 3600, "released", 0),
        (2, T - 3600, "would_drain", 1),
    ];
    for (node, at, action, dry) in decisions {
        conn.execute(
            "INSERT INTO decisions(at, node, action, reason, dry_run) VALUES (?1, ?2, ?3, 'lemon: 5 fails/28d', ?4)",
            params![at, node, action, dry],
        )
        .unwrap();
    }
    (conn, path)
}

fn range() -> TimeRange {
    TimeRange {
        since: DateTime::from_timestamp(T - 86_400, 0).unwrap(),
        until: DateTime::from_timestamp(T + 86_400, 0).unwrap(),
    }
}

#[test]
fn loads_runs_with_categories_requeues_and_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _) = db(dir.path());
    let loaded = load_jobs(&conn, range(), None, &AttributionParams::default()).unwrap();
    assert_eq!(loaded.gpus_per_node, 8, "{}", loaded.gpus_per_node_source);
    assert_eq!(loaded.jobs.len(), 5);
    let by = |i: usize| &loaded.jobs[i];
    let first = loaded
        .jobs
        .iter()
        .find(|j| j.state == JobState::NodeFail)
        .unwrap();
    assert_eq!(first.category.as_deref(), Some("pcie"));
    assert_eq!(first.co_categories, vec!["xid".to_string()]);
    assert!(first.requeued, "a later run of job 100 exists");
    let rerun = loaded
        .jobs
        .iter()
        .find(|j| j.state == JobState::Completed)
        .unwrap();
    assert!(!rerun.requeued);
    let no_tres = loaded.jobs.iter().find(|j| j.id == "101").unwrap();
    assert_eq!(no_tres.gpus, 8, "1 node × 8 GPUs per node");
    assert_eq!(no_tres.category, None);
    let late = loaded.jobs.iter().find(|j| j.id == "102").unwrap();
    assert_eq!(
        late.category, None,
        "finding 15 min after the end, and a warning"
    );
    let cancelled = loaded.jobs.iter().find(|j| j.id == "103").unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert!(by(0).partition == "gpu");

    let given = load_jobs(&conn, range(), Some(4), &AttributionParams::default()).unwrap();
    assert_eq!(given.jobs.iter().find(|j| j.id == "101").unwrap().gpus, 4);

    let lemons = current_lemons(&conn).unwrap();
    assert_eq!(
        lemons.iter().map(|l| l.node.as_str()).collect::<Vec<_>>(),
        vec!["gpu004"],
        "released and dry-run nodes are not lemons"
    );
}

fn lemon(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lemon"))
        .args(args)
        .output()
        .expect("run lemon")
}

#[test]
fn report_reliability_command_writes_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, path) = db(dir.path());
    drop(conn);
    let config = dir.path().join("lemonade.toml");
    std::fs::write(&config, "").unwrap();
    let out_json = dir.path().join("reliability.json");
    let common = [
        "--config",
        config.to_str().unwrap(),
        "--db",
        path.to_str().unwrap(),
        "--now",
        &(T + 86_400).to_string(),
    ];
    let since = (T - 86_400).to_string();
    let mut args: Vec<&str> = common.to_vec();
    args.extend([
        "report",
        "--reliability",
        "--since",
        &since,
        "--until",
        "2026-01-11",
        "--format",
        "json",
        "--output",
        out_json.to_str().unwrap(),
    ]);
    let out = lemon(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "--output writes the file, not stdout"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(json["totals"]["jobs"], 5);
    assert_eq!(json["attribution"]["co_occurrence"][0]["with"], "xid");
    assert_eq!(json["lemons"]["lemons"][0]["node"], "gpu004");
    assert_eq!(json["failure_rate"]["all_jobs"]["failures"], 1);
    let signals = json["lemons"]["signals"].as_array().unwrap();
    assert!(signals.len() >= 7, "every lemon signal has a distribution");

    let mut args: Vec<&str> = common.to_vec();
    args.extend(["report", "--reliability", "--format", "html"]);
    let out = lemon(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("not enough history") && !html.contains("data-chart=\"mttf\""),
        "a day of a few runs is below the default minimum exposure"
    );

    // The minimum comes from [lemon] min_report_node_days.
    std::fs::write(&config, "[lemon]\nmin_report_node_days = 0.0\n").unwrap();
    let out = lemon(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.contains("data-chart=\"mttf\"") && !html.contains("not enough history"));

    let mut args: Vec<&str> = common.to_vec();
    args.extend(["report", "--reliability", "--format", "markdown"]);
    let out = lemon(&args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "markdown is not a reliability format"
    );
}

#[test]
fn ettr_command_answers_one_case() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lemonade.toml");
    std::fs::write(&config, "").unwrap();
    let db = dir.path().join("none.db");
    let base = [
        "--config",
        config.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "ettr",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--gpus",
        "16000",
        "--checkpoint-min",
        "5",
        "--failure-rate",
        "6.5",
    ]);
    let out = lemon(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("expected ETTR:         0.932"), "{text}");
    assert!(text.contains("2000 nodes"), "{text}");
    // Without a rate and without history, it says what to pass.
    let mut args = base.to_vec();
    args.extend(["--gpus", "16000"]);
    let out = lemon(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--failure-rate"));
}

#[test]
fn report_from_lemon_db_matches_the_history_it_was_written_from() {
    use lemon::reliability::{build_report, ReportInput, ReportParams};
    use lemonade_tests::reliability_history::{generate, store, SyntheticSpec};
    let input = generate(&SyntheticSpec {
        jobs: 5_000,
        ..SyntheticSpec::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let mut conn = lemon::db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    store(&mut conn, &input).unwrap();
    let loaded = load_jobs(&conn, input.range, None, &AttributionParams::default()).unwrap();
    assert_eq!(loaded.gpus_per_node, 8);
    let from_db = ReportInput {
        jobs: loaded.jobs,
        lemons: current_lemons(&conn).unwrap(),
        ..input.clone()
    };
    let p = ReportParams::default();
    let want = build_report(&input, &p).unwrap();
    let got = build_report(&from_db, &p).unwrap();
    assert_eq!(got.totals.jobs, want.totals.jobs);
    assert_eq!(got.outcomes.len(), want.outcomes.len());
    for (g, w) in got.outcomes.iter().zip(&want.outcomes) {
        assert_eq!((g.state, g.jobs), (w.state, w.jobs));
    }
    assert_eq!(
        got.failure_rate.paper.failures,
        want.failure_rate.paper.failures
    );
    // Times are whole seconds in lemon.db.
    let rel = (got.failure_rate.paper.node_days / want.failure_rate.paper.node_days - 1.0).abs();
    assert!(rel < 1e-4, "{rel}");
    // Run by run: every attribution of the history comes back with its
    // category. The synthetic history does not keep allocations apart, so
    // a finding can also explain another failed run that shares its node
    // in the window (the rule at work), and the weighing can blame a user's
    // failure on a node that already fails jobs; those extras stay rare.
    let by_id: std::collections::HashMap<&str, &lemon::reliability::JobRecord> =
        from_db.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let mut extra = 0;
    for j in &input.jobs {
        let db_job = by_id[j.id.as_str()];
        match &j.category {
            Some(c) => assert_eq!(db_job.category.as_ref(), Some(c), "run {}", j.id),
            // A NODE_FAIL the history leaves unexplained is a node's all the
            // same; the weighing may name the node.
            None if db_job.category.is_some() && j.state != JobState::NodeFail => extra += 1,
            None => {}
        }
    }
    assert!(
        extra * 50 <= want.attribution.failed_jobs,
        "{extra} extra attributions of {} failed runs",
        want.attribution.failed_jobs
    );
    assert!(!want.attribution.co_occurrence.is_empty());
    let co = |r: &lemon::reliability::ReliabilityReport| {
        let c = &r.attribution.co_occurrence[0];
        (c.category.clone(), c.with.clone())
    };
    assert_eq!(co(&got), co(&want));
    assert_eq!(got.lemons.lemons.len(), 3);
}

#[test]
fn host_hardware_codes_are_categories_of_their_own_in_the_report() {
    // Two one-node failures: one with an MCE the xid check's kernel-log pass
    // found on its node, one with our `hc: EDAC_UE` drain event. The report
    // files them under `mce` and `memory`, not under the check that ran.
    let dir = tempfile::tempdir().unwrap();
    let mut conn = lemon::db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    for (id, name) in [(1, "gpu001"), (2, "gpu002")] {
        conn.execute(
            "INSERT INTO nodes(id, name) VALUES (?1, ?2)",
            params![id, name],
        )
        .unwrap();
    }
    for (id, node) in [(1i64, 1i64), (2, 2)] {
        conn.execute(
            "INSERT INTO jobs(id, job_id_raw, job_id, submit_time, start_time, end_time, state, exit_code, exit_signal, partition, nnodes, nodelist, gpus)
             VALUES (?1, ?1, ?1, ?2, ?2, ?3, 'FAILED', 0, 7, 'gpu', 1, 'x', 8)",
            params![id, T - 300, T + 3600],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO job_nodes(job, node) VALUES (?1, ?2)",
            params![id, node],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO health(node, epoch, seq, at, kind, check_name, code, entity, severity)
         VALUES (1, 'e', 1, ?1, 'finding', 'xid', 'MCE_HARDWARE_ERROR', 'cpu3', 'down')",
        params![T + 3600 - 30],
    )
    .unwrap();
    lemon::ingest::events::ingest_text(
        &mut conn,
        &format!(
            "gpu002|{}|{}|DRAIN|hc: EDAC_UE mc0|root\n",
            T + 3600 + 20,
            T + 7200
        ),
        "events",
    )
    .unwrap();
    let loaded = load_jobs(&conn, range(), None, &AttributionParams::default()).unwrap();
    let category = |id: &str| {
        loaded
            .jobs
            .iter()
            .find(|j| j.id == id)
            .and_then(|j| j.category.clone())
    };
    assert_eq!(category("1").as_deref(), Some("mce"));
    assert_eq!(category("2").as_deref(), Some("memory"));
}
