//! The fleet breaker against a real 3-node Slurm cluster (issue 48): it
//! counts a burst of take-outs with one code, not the nodes that wait for
//! repair. node1 and node2 get the same fresh uncorrectable ECC error on
//! gpu5; each is taken out whichever comes first, and a burst over the
//! floor and the fraction still holds the breaker.
//!
//! The checker runs by hand (no periodic check), so the order is the
//! test's, not the scheduler's.

use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::sync::Mutex;
use std::time::Duration;

const FAULT: &str = "ecc-volatile-gpu5";
const REASON: &str = "hc: ECC_VOLATILE_UNCORRECTED gpu5";

fn cluster() -> &'static Cluster {
    Cluster::shared(|| ClusterOptions {
        nodes: 3,
        health_check_interval: None,
        // The shipped breaker, not the other clusters' 50%.
        lemonade_toml: "[policy]\nfleet_breaker_fraction = 0.1\n".into(),
        ..Default::default()
    })
}

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// One checker run on `node` with the fresh gpu5 error, the cluster's
/// config plus `extra` TOML; its stderr.
fn check(c: &Cluster, node: &str, extra: &str) -> String {
    let root = lemonade_tests::fixture::node("healthy");
    let config = root.root().join("lemonade.toml");
    let mut text = std::fs::read_to_string(c.config_path()).unwrap();
    text.push_str(extra);
    std::fs::write(&config, text).unwrap();
    let out = c
        .host_binary(&lemonade_tests::target_bin_dir().join("healthcheck"))
        .arg("--config")
        .arg(&config)
        .arg("--root")
        .arg(root.root())
        .arg("--use-store")
        .args(["--node", node, "run", "--apply-policy", "--checks", "ecc"])
        .env_clear()
        .env(
            lemonade_tests::fake_nvml::SCENARIO_ENV,
            lemonade_tests::fake_nvml::scenario(FAULT),
        )
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn reason(c: &Cluster, node: &str) -> String {
    c.node_state(node).unwrap().1
}

/// The outcome of the node's last take-out attempt (hook runs are rows too).
fn last_outcome(c: &Cluster, node: &str) -> Option<String> {
    let path = c.node_db(node);
    let store = NodeStore::open(&path, Duration::from_secs(2)).unwrap();
    let changes = node_jobs::state_changes_since(store.connection(), &path, 0).unwrap();
    (changes.iter().rev())
        .find(|c| c.action != "hook")
        .map(|c| c.outcome.clone())
}

fn resume_all(c: &Cluster) {
    for n in c.nodes() {
        let _ = c.run(
            "scontrol",
            &["update", &format!("NodeName={n}"), "State=RESUME"],
        );
    }
    for n in c.nodes() {
        let ok = c.wait_until(Duration::from_secs(30), || reason(c, n).is_empty());
        assert!(ok, "{n} still has a reason: {}", reason(c, n));
    }
}

#[test]
fn two_nodes_with_the_same_fresh_ecc_error_are_both_taken_out_whichever_comes_first() {
    lemonade_tests::skip_without_cluster!();
    let _t = turn();
    let c = cluster();
    for (first, second) in [("node2", "node1"), ("node1", "node2")] {
        resume_all(c);
        let err = check(c, first, "");
        assert_eq!(reason(c, first), REASON, "{first} first: {err}");
        let err = check(c, second, "");
        assert!(!err.contains("FLEET BREAKER"), "{second}: {err}");
        assert_eq!(
            reason(c, second),
            REASON,
            "{second} after {first}: {err}\nlogs in {}",
            c.dir().display()
        );
        assert_eq!(last_outcome(c, second).as_deref(), Some("applied"));
    }
    resume_all(c);
}

#[test]
fn a_burst_over_the_floor_and_fraction_holds_the_breaker_and_a_backlog_does_not() {
    lemonade_tests::skip_without_cluster!();
    let _t = turn();
    let c = cluster();
    resume_all(c);
    // A floor of one other node: node2's take-out a moment ago is a burst
    // of 1 of 3 nodes (33% > 10%), and node1 is left alone, loudly.
    let dir = tempfile::tempdir().unwrap();
    let told = dir.path().join("told.jsonl");
    let hook = dir.path().join("hook");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\ncat >> {0}; echo >> {0}\n", told.display()),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let floor_one = format!(
        "\n[hooks]\ncommands = [[\"{}\"]]\n\n[[node]]\nhosts = \"node[1-3]\"\n\
         policy.fleet_breaker_min_nodes = 1\n",
        hook.display()
    );
    check(c, "node2", &floor_one);
    assert_eq!(reason(c, "node2"), REASON);
    std::fs::remove_file(&told).unwrap();
    let err = check(c, "node1", &floor_one);
    assert!(err.contains("FLEET BREAKER"), "{err}");
    assert!(reason(c, "node1").is_empty(), "{}", reason(c, "node1"));
    assert_eq!(last_outcome(c, "node1").as_deref(), Some("breaker"));
    // The hook is told of the refusal with the breaker's count.
    let line = std::fs::read_to_string(&told).unwrap();
    let event: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(event["node"], "node1");
    assert_eq!(event["outcome"], "breaker");
    assert!(
        (event["detail"].as_str().unwrap()).contains("1 of 3 nodes"),
        "{event}"
    );
    // The same reason, older than a 2 s window: a node awaiting repair, not
    // a burst. node1 goes out.
    std::thread::sleep(Duration::from_secs(4));
    let backlog = "\n[[node]]\nhosts = \"node[1-3]\"\npolicy.fleet_breaker_min_nodes = 1\n\
                   policy.fleet_breaker_window_s = 2\n";
    let err = check(c, "node1", backlog);
    assert!(!err.contains("FLEET BREAKER"), "{err}");
    assert_eq!(reason(c, "node1"), REASON, "{err}");
    resume_all(c);
}
