//! `lemon watch --live --once` with the embedded source: each poll first
//! ingests the nodes' spool exports into lemon.db, so that the service
//! alone keeps its samples fresh, and never asks sacct (stand-in Slurm
//! commands in `[slurm] bin_dir`: squeue lists a 3-node job, sacct and
//! sacctmgr log that they were asked).

use lemonade_spool::{Body, Record};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const NODES: [&str; 3] = ["node1", "node2", "node3"];

fn stand_in_slurm(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let d = dir.display();
    let mut sinfo = String::new();
    for n in NODES {
        sinfo += &format!("{n}|allocated|none|Unknown|Unknown\n");
    }
    std::fs::write(dir.join("sinfo.txt"), sinfo).unwrap();
    for (name, body) in [
        ("squeue", "echo '42|3|node[1-3]'".to_string()),
        ("sinfo", format!("cat {d}/sinfo.txt")),
        ("sacct", format!("echo sacct >> {d}/asked.log; exit 1")),
        (
            "sacctmgr",
            format!("echo sacctmgr >> {d}/asked.log; exit 1"),
        ),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn write_config(dir: &Path) -> PathBuf {
    let d = dir.display();
    let config = dir.join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            "[slurm]\nbin_dir = \"{d}/bin\"\n\n[lemon]\ndb_path = \"{d}/lemon.db\"\n\
             spool_dir = \"{d}/spool\"\n\n[watch]\ninterval_s = 1\n\n\
             [watch.service]\nlookback_s = 120\n"
        ),
    )
    .unwrap();
    config
}

/// Each node's export gains chunk `seq`: 5 seconds of 2 metrics ending at `at`.
fn export(spool: &Path, seq: u64, at: i64) {
    for node in NODES {
        let samples = (at - 4..=at)
            .flat_map(|t| {
                [
                    (t, "gpu_util".to_string(), 97.0),
                    (t, "gpu_sm_clock".to_string(), 1980.0),
                ]
            })
            .collect();
        let rec = Record {
            seq,
            epoch: "e1".into(),
            node: node.into(),
            at,
            body: Body::Samples {
                job_id: "42".into(),
                samples,
            },
        };
        lemonade_spool::write(spool, node, &[rec], 1 << 20).unwrap();
    }
}

/// One poll, in a dry run (which ingests, as `lemon run --dry-run` does).
fn poll(config: &Path) -> String {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(config)
        .args(["watch", "--live", "--once", "--dry-run"])
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap();
    let all = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{all}");
    all
}

fn samples_in_db(dir: &Path) -> u64 {
    let conn = lemon::db::open(&dir.join("lemon.db"), Duration::from_secs(5)).unwrap();
    lemon::db::samples::count(&conn).unwrap()
}

#[test]
fn each_poll_ingests_the_spool_records_that_arrived_since_the_last_and_never_asks_sacct() {
    let dir = tempfile::tempdir().unwrap();
    stand_in_slurm(dir.path());
    let config = write_config(dir.path());
    let spool = dir.path().join("spool");
    let now = chrono::Utc::now().timestamp();

    export(&spool, 1, now - 20);
    let first = poll(&config);
    assert!(first.contains("3 rows read, 30 new"), "{first}");
    assert!(
        first.contains("lemon watch: 1 jobs, 30 samples"),
        "the poll reads what it has just ingested: {first}"
    );
    assert_eq!(samples_in_db(dir.path()), 30);

    export(&spool, 2, now - 10);
    let second = poll(&config);
    // Only the new lines are parsed: the file's first 3 are held already.
    assert!(second.contains("3 rows read, 30 new"), "{second}");
    assert_eq!(samples_in_db(dir.path()), 60);

    let third = poll(&config);
    assert!(third.contains("0 rows read, 0 new"), "{third}");
    assert_eq!(samples_in_db(dir.path()), 60);
    assert!(
        !dir.path().join("asked.log").exists(),
        "{}",
        std::fs::read_to_string(dir.path().join("asked.log")).unwrap_or_default()
    );
}

#[test]
fn a_poll_while_lemon_run_holds_the_lock_reads_what_lemon_db_has_and_ingests_next_time() {
    let dir = tempfile::tempdir().unwrap();
    stand_in_slurm(dir.path());
    let config = write_config(dir.path());
    let spool = dir.path().join("spool");
    let db = dir.path().join("lemon.db");
    let now = chrono::Utc::now().timestamp();
    export(&spool, 1, now - 20);
    poll(&config);

    export(&spool, 2, now - 10);
    let held = lemonade_sql::lock::RunLock::acquire(&db, Duration::ZERO).unwrap();
    let locked = poll(&config);
    assert!(
        locked.contains("another run holds the lock")
            && locked.contains("spool not ingested this poll")
            && locked.contains("lemon watch: 1 jobs, 30 samples"),
        "{locked}"
    );
    assert_eq!(samples_in_db(dir.path()), 30);
    drop(held);
    let next = poll(&config);
    assert!(next.contains("30 new"), "{next}");
    assert_eq!(samples_in_db(dir.path()), 60);
}

/// `lemon ingest --no-slurm`, as a site's cron ran it beside the service.
fn cron_ingest(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(config)
        .args(["ingest", "--no-slurm"])
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn polls_and_a_cron_ingest_at_the_same_time_neither_fail_nor_store_a_sample_twice() {
    let dir = tempfile::tempdir().unwrap();
    stand_in_slurm(dir.path());
    let config = write_config(dir.path());
    let spool = dir.path().join("spool");
    let now = chrono::Utc::now().timestamp();
    export(&spool, 1, now - 110);
    // lemon.db exists, as on a head node (a poll creates it).
    poll(&config);
    // The readers keep going until the writer is done, so that every chunk
    // lands while a poll or an ingest may be reading.
    let written = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for seq in 2..=10 {
                export(&spool, seq, now - 120 + 10 * seq as i64);
                std::thread::sleep(Duration::from_millis(50));
            }
            written.store(true, Ordering::SeqCst);
        });
        s.spawn(|| {
            let mut runs = 0;
            while runs < 8 || !written.load(Ordering::SeqCst) {
                let out = cron_ingest(&config);
                assert!(
                    out.status.success(),
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
        });
        let mut runs = 0;
        while runs < 8 || !written.load(Ordering::SeqCst) {
            poll(&config);
            runs += 1;
        }
    });
    // The last chunk may have landed after both readers' last pass: one
    // more poll takes it, and then there is nothing left to read.
    poll(&config);
    assert_eq!(samples_in_db(dir.path()), 10 * 30);
    let last = poll(&config);
    assert!(last.contains("0 rows read, 0 new"), "{last}");
    assert_eq!(samples_in_db(dir.path()), 10 * 30);
}
