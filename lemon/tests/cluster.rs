//! `lemon run` against a real Slurm cluster with slurmdbd (see
//! `lemonade_tests::cluster`): repeated failing jobs on one node make lemon
//! drain exactly that node with a `lemon:` reason that `sinfo -R` shows,
//! and a node an administrator drained is left alone; and a two-node job
//! whose rank on one node printed a CUDA ECC error is blamed on that node
//! only, from its log (issue 36); and a two-node job with the flight
//! recorder on, whose planted dumps show rank 13 hung, is blamed on the node
//! that ran it, from the summaries the epilogs collected (issue 32).
//!
//! Waits are bounded polls, generous for a loaded CI machine; they are
//! correctness limits, not measurements.

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::time::Duration;

/// Submits `count` jobs running `script` on `node`; returns their ids.
fn jobs_on(c: &Cluster, node: &str, script: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            c.sbatch(&["-w", node, "--wrap", script])
                .unwrap_or_else(|e| panic!("sbatch on {node}: {e}"))
        })
        .collect()
}

/// True when accounting knows every job as finished.
fn all_finished(c: &Cluster, ids: &[String]) -> bool {
    let Ok(out) = c.run(
        "sacct",
        &[
            "-X",
            "-n",
            "-P",
            "-o",
            "JobIDRaw,State",
            "-j",
            &ids.join(","),
        ],
    ) else {
        return false;
    };
    let done = out
        .lines()
        .filter(|l| {
            let state = l.split('|').nth(1).unwrap_or("");
            state.starts_with("FAILED") || state.starts_with("COMPLETED")
        })
        .count();
    done >= ids.len()
}

#[test]
fn lemon_drains_the_failing_node_only() {
    lemonade_tests::skip_without_cluster!();
    let c = Cluster::start(ClusterOptions {
        nodes: 4,
        // One afternoon of failures is all a test has: allow a single day.
        lemonade_toml: "[lemon]\nmin_failing_days = 1\n".into(),
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));

    let mut ids = jobs_on(&c, "node2", "kill -BUS $$", 4);
    // node4 fails them with a plain exit code its user shows nowhere else.
    ids.extend(jobs_on(&c, "node4", "exit 1", 4));
    // The healthy nodes run jobs for a while, as a fleet does: the failing
    // jobs end within a second, so without this the background would be two
    // failing nodes' failures over seconds of exposure, and whether the test
    // passed hung on how many whole seconds sacct gave each job.
    ids.extend(jobs_on(&c, "node1", "sleep 10", 3));
    ids.extend(jobs_on(&c, "node3", "sleep 10", 3));
    assert!(
        c.wait_until(Duration::from_secs(120), || all_finished(&c, &ids)),
        "jobs did not finish in accounting: {:?}",
        c.run(
            "sacct",
            &["-X", "-a", "-n", "-P", "-o", "JobIDRaw,NodeList,State"]
        )
    );

    // An administrator drains node4 for a reason of their own.
    c.run(
        "scontrol",
        &[
            "update",
            "NodeName=node4",
            "State=DRAIN",
            "Reason=bad fan, ticket 42",
        ],
    )
    .unwrap();

    let db = c.dir().join("lemon.db");
    let out = c
        .host_binary(std::path::Path::new(env!("CARGO_BIN_EXE_lemon")))
        .arg("--config")
        .arg(c.config_path())
        .arg("--db")
        .arg(&db)
        .arg("run")
        .env("SLURM_CONF", c.slurm_conf())
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");

    let (state, reason) = c.node_state("node2").unwrap();
    assert!(state.contains("drain"), "node2 {state}: {text}");
    assert!(reason.starts_with("lemon: 4 fails/28d"), "{reason}");
    // `sinfo -R` shows it in its 20 characters.
    let r = c.run("sinfo", &["-R", "-h"]).unwrap();
    assert!(
        r.lines()
            .any(|l| l.contains("lemon: 4 fails/28d") && l.contains("node2")),
        "{r}"
    );
    // The administrator's reason stays, and healthy nodes stay in service.
    assert_eq!(c.node_state("node4").unwrap().1, "bad fan, ticket 42");
    for n in ["node1", "node3"] {
        let (state, reason) = c.node_state(n).unwrap();
        assert!(
            !state.contains("drain") && reason.is_empty(),
            "{n}: {state} {reason}"
        );
    }
    assert!(text.contains("skipped_out_of_service"), "{text}");

    // Re-running finds nothing new and changes nothing.
    let again = c
        .host_binary(std::path::Path::new(env!("CARGO_BIN_EXE_lemon")))
        .arg("--config")
        .arg(c.config_path())
        .arg("--db")
        .arg(&db)
        .arg("run")
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    assert_eq!(c.node_state("node4").unwrap().1, "bad fan, ticket 42");
}

/// What the two ranks of the job print: rank 0 (on node1) the CUDA error,
/// rank 1 (on node2) PyTorch's NCCL watchdog timeout, as a peer of a dead
/// GPU does.
const TWO_RANKS: &str = r#"if [ "$SLURM_PROCID" = 0 ]; then
  echo "[rank0]: RuntimeError: CUDA error: uncorrectable ECC error encountered" >&2
else
  sleep 1
  echo "[rank1]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600003 milliseconds before timing out." >&2
fi
exit 1"#;

/// Runs `lemon ARGS` with the cluster's config and `db`; its exit code and
/// its stdout and stderr together.
fn lemon(c: &Cluster, db: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = c
        .host_binary(std::path::Path::new(env!("CARGO_BIN_EXE_lemon")))
        .arg("--config")
        .arg(c.config_path())
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_two_node_job_whose_log_shows_an_ecc_error_on_one_rank_is_blamed_on_that_node_only() {
    lemonade_tests::skip_without_cluster!();
    let c = Cluster::start(ClusterOptions {
        nodes: 2,
        lemonade_toml: "[lemon]\nmin_failing_days = 1\n".into(),
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // The log's directory: root's, in the cluster's root-owned directory
    // under the sticky /tmp, as the job-log rules want.
    let logs = c.dir().join("joblogs");
    std::fs::create_dir(&logs).unwrap();
    let pattern = format!("{}/two-ranks-%j.out", logs.display());
    let script = format!(
        "srun -N2 -n2 bash -c '{}'",
        TWO_RANKS.replace('\'', "'\\''")
    );
    let id = c
        .sbatch(&["-N2", "-n2", "-o", &pattern, "--wrap", &script])
        .unwrap_or_else(|e| panic!("sbatch: {e}"));
    assert!(
        c.wait_until(Duration::from_secs(120), || all_finished(
            &c,
            std::slice::from_ref(&id)
        )),
        "job {id} did not finish in accounting: {:?}",
        c.run(
            "sacct",
            &["-X", "-a", "-n", "-P", "-o", "JobIDRaw,NodeList,State"]
        )
    );
    let log = logs.join(format!("two-ranks-{id}.out"));
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        printed.contains("uncorrectable ECC"),
        "{}: {printed:?}",
        log.display()
    );

    // Slurm 22.05's sacct has no StdOut: lemon asks scontrol while
    // slurmctld holds the job (MinJobAge); later series' sacct names it.
    let db = c.dir().join("lemon.db");
    let (code, text) = lemon(&c, &db, &["run", "--dry-run"]);
    assert!(code.is_some_and(|c| c <= 1), "{text}");
    assert!(text.contains("job logs of 1 failed runs"), "{text}");
    assert_eq!(
        text.contains("(1 named by scontrol)"),
        c.slurm_series() == "22.05",
        "Slurm {}: {text}",
        c.slurm_series()
    );

    let conn = lemon::db::open(&db, Duration::from_secs(5)).unwrap();
    let (verdict, node, evidence): (String, Option<String>, String) = conn
        .query_row(
            "SELECT e.verdict, e.node, e.evidence1 FROM job_evidence e JOIN jobs j ON j.id = e.job WHERE j.job_id_raw = ?1",
            [id.parse::<i64>().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap_or_else(|e| panic!("no verdict for job {id}: {e}; {text}"));
    assert_eq!(
        (verdict.as_str(), node.as_deref()),
        ("hardware", Some("node1"))
    );
    assert!(evidence.contains("uncorrectable ECC error"), "{evidence}");

    // The text report counts the job against node1 alone; its JSON carries
    // each node's blamed jobs with the evidence line (the text lists them
    // for flagged nodes only, and one failure flags nothing).
    let (code, report) = lemon(&c, &db, &["report"]);
    assert_eq!(code, Some(0), "{report}");
    let fails = |node: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .and_then(|l| l.split_whitespace().nth(2))
            .map(str::to_string)
    };
    assert_eq!(
        (fails("node1").as_deref(), fails("node2").as_deref()),
        (Some("1"), Some("0")),
        "{report}"
    );
    let (code, json) = lemon(&c, &db, &["report", "--format", "json"]);
    assert_eq!(code, Some(0), "{json}");
    let shown: Vec<&str> = json
        .lines()
        .filter(|l| l.contains("\"detail\": \"job log:"))
        .collect();
    // Once among node1's verdicts, and once on the watch list: its one
    // uncaught, log-witnessed hardware failure (issue 47), never drained.
    assert_eq!(shown.len(), 2, "{json}");
    assert_eq!(shown[0], shown[1], "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let watched: Vec<&str> = report["watch_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["signals"]["node"].as_str().or(v["node"].as_str()))
        .collect();
    assert_eq!(watched, ["node1"], "{json}");
    assert!(
        shown[0].contains("job log: hardware on node1") && shown[0].contains("uncorrectable ECC"),
        "{json}"
    );
}

/// A 16-rank job, 8 ranks a node, rank 13 (on the second node) hung: each
/// node's task writes its ranks' dumps where the plugin pointed PyTorch.
const PLANT: &str =
    r#""$PLANT" "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE" 16 13 $((SLURM_NODEID * 8)) 8; exit 1"#;

#[test]
fn a_hang_in_planted_flight_recorder_dumps_is_collected_by_the_epilog_and_blamed_on_its_node() {
    lemonade_tests::skip_without_cluster!();
    let plugin = lemonade_tests::spank::Plugin::built("liblemonade_spank.so");
    let plant = lemonade_tests::target_bin_dir().join("lemonade-plant-dumps");
    assert!(
        plant.exists(),
        "{} missing: cargo build -p lemonade-tests --bins",
        plant.display()
    );
    let c = Cluster::start(ClusterOptions {
        nodes: 2,
        epilog: true,
        plugstack: vec![plugin.line("config={config} flight_recorder=on")],
        lemonade_toml: "[lemon]\nmin_failing_days = 1\n".into(),
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // The batch step runs on node1 and the plugin gave it node1's
    // directory; srun would hand that to node2's task, and the plugin keeps
    // a value already set. A real cluster has one state directory path on
    // every node; this one has one per node, so the step asks afresh.
    let script = format!(
        "export PLANT={}; unset TORCH_NCCL_DEBUG_INFO_TEMP_FILE; srun -N2 -n2 bash -c '{}'",
        plant.display(),
        PLANT.replace('\'', "'\\''")
    );
    let out = c.dir().join("planted-%j.out");
    let id = c
        .sbatch(&[
            "-N2",
            "-n2",
            "-o",
            &out.display().to_string(),
            "--wrap",
            &script,
        ])
        .unwrap_or_else(|e| panic!("sbatch: {e}"));
    assert!(
        c.wait_until(Duration::from_secs(120), || all_finished(
            &c,
            std::slice::from_ref(&id)
        )),
        "job {id} did not finish in accounting"
    );
    // Each node kept its raw dumps; its epilog exported their summaries.
    for (node, ranks) in [("node1", 0..8), ("node2", 8..16)] {
        let dir = c
            .node_db(node)
            .parent()
            .unwrap()
            .join("flight-recorder")
            .join(&id);
        for rank in ranks {
            assert!(
                dir.join(format!("nccl_trace_rank_{rank}")).is_file(),
                "{}: rank {rank}",
                dir.display()
            );
        }
    }
    let exported = |node: &str| {
        std::fs::read_to_string(c.spool_dir().join(format!("{node}.jsonl")))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"kind\":\"flight_recorder\"") && l.contains("\"summary\""))
            .count()
    };
    assert!(
        c.wait_until(Duration::from_secs(60), || exported("node1") == 8
            && exported("node2") == 8),
        "summaries exported: node1 {}, node2 {}",
        exported("node1"),
        exported("node2")
    );

    let db = c.dir().join("lemon.db");
    let (code, text) = lemon(&c, &db, &["run", "--dry-run"]);
    assert!(code.is_some_and(|c| c <= 1), "{text}");
    let (code, trace) = lemon(&c, &db, &["trace", &id]);
    assert_eq!(code, Some(0), "{trace}");
    assert!(
        trace.contains("hang: rank 13 on node2 never entered nccl:all_reduce seq 18231"),
        "{trace}"
    );
    assert!(
        trace.contains("16 dumps read, 0 skipped, 1 ranks named"),
        "{trace}"
    );

    let (code, json) = lemon(&c, &db, &["report", "--format", "json"]);
    assert_eq!(code, Some(0), "{json}");
    let shown: Vec<&str> = json
        .lines()
        .filter(|l| l.contains("\"detail\": \"flight recorder:"))
        .collect();
    assert_eq!(shown.len(), 1, "{json}");
    assert!(
        shown[0]
            .contains("rank 13 on node2 stopped at all_reduce seq 18231; 15 ranks waited there"),
        "{json}"
    );
    let (code, report) = lemon(&c, &db, &["report"]);
    assert_eq!(code, Some(0), "{report}");
    let fails = |node: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .and_then(|l| l.split_whitespace().nth(2))
            .map(str::to_string)
    };
    assert_eq!(
        (fails("node1").as_deref(), fails("node2").as_deref()),
        (Some("0"), Some("1")),
        "{report}"
    );
}
