//! Attribution through the compute nodes' spool exports: findings, XIDs and task exits.

use lemon::{app, db, ingest};
use lemonade_config::Config;
use lemonade_spool::{Body, Record};
use std::time::Duration;

fn rec(node: &str, seq: u64, at: i64, body: Body) -> Record {
    Record {
        seq,
        epoch: "e1".into(),
        node: node.into(),
        at,
        body,
    }
}

fn finding(check: &str, severity: &str) -> Body {
    Body::Finding {
        check: check.into(),
        entity: "gpu0".into(),
        code: "X".into(),
        severity: severity.parse().unwrap(),
        message: "m".into(),
        job_id: None,
    }
}

/// A task exit as older nodes sent it: seconds only.
fn task_exit(job: &str, exit_code: i32) -> Body {
    Body::TaskExit {
        job_id: job.into(),
        step_id: "0".into(),
        task_id: 0,
        exit_code: Some(exit_code),
        signal: None,
        at_ms: None,
    }
}

/// A task exit with its milliseconds, as the SPANK plugin writes it now.
fn task_exit_ms(job: &str, at_ms: i64) -> Body {
    Body::TaskExit {
        job_id: job.into(),
        step_id: "0".into(),
        task_id: 0,
        exit_code: Some(1),
        signal: None,
        at_ms: Some(at_ms),
    }
}

fn xid(code: &str) -> Body {
    Body::Event {
        check: "xid".into(),
        entity: "gpu1".into(),
        code: code.into(),
        severity: lemonade_spool::Severity::Down,
        detail: String::new(),
    }
}

#[test]
fn multi_node_failures_follow_findings_then_first_failing_task() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let day = 86_400;
    // Job 10 on n[1-3] fails at 10000: n3 had a `down` PCIe finding 2 min before.
    // Job 11 on n[1-3] fails at 20000: n2's task failed first, n1's later;
    // weighed on n2 alone, with nothing against n2, it is the user's.
    // Job 12 on n[1-3] fails at 30000: a `warning` only, and no task exits: unattributed.
    // Job 13 on n[1-3] fails at 40000: n1's `drain` finding 6 min after the end: too late.
    let jobs = "\
10|10|n[1-3]|3|FAILED|1:0|0:0|1|5000|10000|5000|b|u|gres/gpu=24
11|11|n[1-3]|3|FAILED|1:0|0:0|1|15000|20000|5000|b|u|gres/gpu=24
12|12|n[1-3]|3|FAILED|1:0|0:0|1|25000|30000|5000|b|u|gres/gpu=24
13|13|n[1-3]|3|FAILED|1:0|0:0|1|35000|40000|5000|b|u|gres/gpu=24
";
    ingest::sacct::ingest_reader(&conn, jobs.as_bytes(), "jobs", day).unwrap();
    lemonade_spool::write(
        &spool,
        "n3",
        &[
            rec("n3", 1, 10_000 - 120, finding("pcie", "down")),
            rec("n3", 2, 100, xid("XID_79")),
            rec("n3", 3, 200, xid("XID_79")),
            rec("n3", 4, 300, xid("XID_48")),
        ],
        1 << 20,
    )
    .unwrap();
    lemonade_spool::write(
        &spool,
        "n2",
        &[
            rec("n2", 1, 19_000, task_exit("11", 1)),
            rec("n2", 2, 29_000, finding("ib", "warning")),
        ],
        1 << 20,
    )
    .unwrap();
    lemonade_spool::write(
        &spool,
        "n1",
        &[
            rec("n1", 1, 19_500, task_exit("11", 1)),
            rec("n1", 2, 40_000 + 360, finding("mounts", "drain")),
        ],
        1 << 20,
    )
    .unwrap();
    let stats = ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    assert_eq!(stats.inserted, 8);

    // What `lemon run` keeps: the window's attributions.
    let window = lemon::signals::attribute_range(
        &conn,
        0,
        day,
        &app::attribution_params(&Config::default()),
        &|_| 0,
    )
    .unwrap();
    lemon::signals::store_attributions(&conn, &window, day).unwrap();
    let scores = app::score(&conn, &Config::default(), day).unwrap();
    let rows: Vec<(String, Option<String>, String, String)> = conn
        .prepare(
            "SELECT j.job_id, n.name, a.rule, a.category FROM attributions a
             JOIN jobs j ON j.id = a.job LEFT JOIN nodes n ON n.id = a.node ORDER BY j.job_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let s = |a: &str, b: Option<&str>, c: &str, d: &str| {
        (
            a.to_string(),
            b.map(String::from),
            c.to_string(),
            d.to_string(),
        )
    };
    assert_eq!(
        rows,
        [
            s("10", Some("n3"), "finding", "pcie"),
            s("11", None, "user_exit", "user"),
            s("12", None, "unattributed", "unknown"),
            s("13", None, "unattributed", "unknown"),
        ]
    );
    let detail: String = conn
        .query_row(
            "SELECT a.detail FROM attributions a JOIN jobs j ON j.id = a.job WHERE j.job_id = '11'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        detail.starts_with("first failing task of 3 nodes on this node"),
        "{detail}"
    );
    let n3 = scores
        .verdicts
        .iter()
        .find(|v| v.signals.node == "n3")
        .unwrap();
    assert_eq!(n3.signals.xid_cnt, 2, "distinct XID codes");
    assert_eq!(n3.signals.multi_node_node_fails, 1);
    assert_eq!(scores.unattributed_failures, 2);
}

#[test]
fn the_first_failing_task_is_found_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let day = 86_400;
    // Job 21 on n[1-3] fails at 20000. n3's task failed at 19000.050 s; Slurm
    // then killed n1's and n2's tasks in the same second. Job 22 on n[1-2]
    // fails at 30000, from a node of an older release (seconds only): n2's
    // task failed a second before n1's. Their user ran 300 jobs on n9
    // without a failure; n2 and n3 each went NODE_FAIL twice that day.
    let mut jobs = String::from(
        "\
21|21|n[1-3]|3|FAILED|1:0|0:0|1|1000|20000|19000|b|u|gres/gpu=24
22|22|n[1-2]|2|FAILED|1:0|0:0|1|11000|30000|19000|b|u|gres/gpu=16
31|31|n2|1|NODE_FAIL|0:0|0:0|1|100|2000|1900|b|v|gres/gpu=8
32|32|n2|1|NODE_FAIL|0:0|0:0|1|3000|5000|2000|b|v|gres/gpu=8
33|33|n3|1|NODE_FAIL|0:0|0:0|1|100|2000|1900|b|v|gres/gpu=8
34|34|n3|1|NODE_FAIL|0:0|0:0|1|3000|5000|2000|b|v|gres/gpu=8
",
    );
    for k in 0..300 {
        let end = 200 + k * 200;
        jobs.push_str(&format!(
            "{id}|{id}|n9|1|COMPLETED|0:0|0:0|1|{}|{end}|100|b|u|gres/gpu=8\n",
            end - 100,
            id = 100 + k
        ));
    }
    ingest::sacct::ingest_reader(&conn, jobs.as_bytes(), "jobs", day).unwrap();
    for (node, records) in [
        (
            "n1",
            vec![
                rec("n1", 1, 19_000, task_exit_ms("21", 19_000_400)),
                rec("n1", 2, 29_001, task_exit("22", 1)),
            ],
        ),
        (
            "n2",
            vec![
                rec("n2", 1, 19_000, task_exit_ms("21", 19_000_390)),
                rec("n2", 2, 29_000, task_exit("22", 1)),
            ],
        ),
        (
            "n3",
            vec![rec("n3", 1, 19_000, task_exit_ms("21", 19_000_050))],
        ),
    ] {
        lemonade_spool::write(&spool, node, &records, 1 << 20).unwrap();
    }
    let stats = ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    assert_eq!(stats.inserted, 5);
    let window = lemon::signals::attribute_range(
        &conn,
        0,
        day,
        &app::attribution_params(&Config::default()),
        &|_| 0,
    )
    .unwrap();
    lemon::signals::store_attributions(&conn, &window, day).unwrap();
    let rows: Vec<(String, Option<String>, String)> = conn
        .prepare(
            "SELECT j.job_id, n.name, a.rule FROM attributions a
             JOIN jobs j ON j.id = a.job LEFT JOIN nodes n ON n.id = a.node ORDER BY j.job_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let s = |a: &str, b: &str| {
        (
            a.to_string(),
            Some(b.to_string()),
            "first_task_exit".to_string(),
        )
    };
    assert_eq!(rows[..2], [s("21", "n3"), s("22", "n2")]);
}

fn state_change(action: &str, reason: &str) -> Body {
    Body::StateChange {
        action: action.into(),
        reason: reason.into(),
    }
}

/// (source, opened_at, closed, note) of the node's tickets.
fn tickets(
    conn: &lemonade_sql::rusqlite::Connection,
    node: &str,
) -> Vec<(String, i64, bool, String)> {
    ingest::tickets::list(conn, true)
        .unwrap()
        .into_iter()
        .filter(|t| t.node == node)
        .map(|t| (t.source, t.opened_at, t.closed_at.is_some(), t.note))
        .collect()
}

#[test]
fn a_node_handed_over_to_a_human_gets_one_open_ticket() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
    let human = "hc: XID_79 gpu3 human needed";
    let mut records = vec![
        rec(
            "n1",
            1,
            1_000,
            state_change("drain (applied)", "hc: XID_79 gpu3"),
        ),
        rec(
            "n1",
            2,
            1_300,
            state_change("reset-gpu (failed)", "hc: XID_79 gpu3 reset"),
        ),
        // A dry run hands nothing over.
        rec("n1", 3, 1_400, state_change("hand-over (dry-run)", human)),
        rec("n1", 4, 1_500, state_change("hand-over (applied)", human)),
        // Handed over again while the ticket is open: still one repair.
        rec("n1", 5, 9_000, state_change("hand-over (applied)", human)),
    ];
    lemonade_spool::write(&spool, "n1", &records, 1 << 20).unwrap();
    ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    // Read twice: nothing is stored or opened twice.
    ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    assert_eq!(
        tickets(&conn, "n1"),
        [("hand-over".to_string(), 1_500, false, human.to_string())]
    );

    // Once a human closes it, the next hand-over opens a new one.
    ingest::tickets::close(&conn, "n1", "replaced GPU", 20_000).unwrap();
    records.push(rec(
        "n1",
        6,
        30_000,
        state_change("hand-over (applied)", human),
    ));
    lemonade_spool::write(&spool, "n1", &records, 1 << 20).unwrap();
    ingest::spool::ingest_dir(&mut conn, &spool).unwrap();
    let all = tickets(&conn, "n1");
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[0].2 && !all[1].2 && all[1].1 == 30_000, "{all:?}");
}
