//! `lemon watch --replay`: the detector of `lemonade_watch` behind lemon's
//! command line, as an administrator runs it on a recorded job.

use lemonade_tests::metric_traces::{generate, write_csv, FaultKind, TraceSpec};
use std::process::{Command, Output};

fn lemon_watch(dir: &std::path::Path, args: &[&str]) -> Output {
    let config = dir.join("lemonade.toml");
    std::fs::write(
        &config,
        format!("[lemon]\ndb_path = \"{}/lemon.db\"\n", dir.display()),
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(&config)
        .arg("watch")
        .args(args)
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn a_replayed_job_with_a_planted_ecc_fault_names_that_node_and_only_it_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let trace = generate(&TraceSpec {
        seed: 2_000_001,
        job: "4419021_7".into(),
        nodes: 16,
        start: 1_760_000_000,
        duration_s: 2400,
        fault: Some(FaultKind::Ecc),
    });
    let planted = trace.fault.clone().unwrap();
    let csv = dir.path().join("metrics.csv");
    write_csv(&[trace], &mut std::fs::File::create(&csv).unwrap()).unwrap();
    let out = lemon_watch(
        dir.path(),
        &["--replay", csv.to_str().unwrap(), "--format", "json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = calls.as_array().unwrap();
    // Reported, then drained once it held the drain bar (`drain_after_s`).
    let tiers: Vec<&str> = calls.iter().map(|c| c["tier"].as_str().unwrap()).collect();
    assert_eq!(tiers, ["report", "drain"], "{calls:?}");
    for call in calls {
        assert_eq!(call["job"], "4419021_7");
        assert_eq!(call["node"], planted.node.as_str());
        assert!(call["detected_at"].as_i64().unwrap() >= planted.onset);
    }
    assert!(
        !dir.path().join("lemon.db").exists(),
        "a replay needs no database"
    );
}

#[test]
fn a_bad_row_exits_non_zero_with_its_line_and_prints_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("metrics.csv");
    std::fs::write(
        &csv,
        "time,job,node,metric,value\n10,7,a,gpu_util,95\n5,7,a,gpu_util,95\n",
    )
    .unwrap();
    let out = lemon_watch(
        dir.path(),
        &["--replay", csv.to_str().unwrap(), "--format", "json"],
    );
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metrics.csv") && err.contains("line 3"),
        "{err}"
    );
}
