//! The validation gate of the repair loop against a real Slurm cluster
//! (issue 31): the reservation `healthcheck`'s repair loop puts on a node
//! before resuming it (`lemonade_slurm::node_state::StateCommand::reserve`,
//! the exact argv it runs) can be made while the node is DOWN; once the node
//! is resumed, a user's job does not start there, the validation job
//! submitted into the reservation does, and deleting the reservation
//! (`StateCommand::unreserve`) gives the node back.

use lemonade_slurm::node_state::{validation_reservation, StateCommand};
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn scontrol(cluster: &Cluster, command: &StateCommand) -> Result<String, String> {
    let args: Vec<&str> = command.args().iter().map(String::as_str).collect();
    cluster.run("scontrol", &args)
}

#[test]
fn a_down_node_is_reserved_for_validation_then_resumed_and_only_the_validation_job_runs_there() {
    lemonade_tests::skip_without_cluster!();
    let options = ClusterOptions {
        nodes: 2,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).unwrap_or_else(|e| panic!("{e}"));
    let node = "node1";
    let name = validation_reservation(node);
    cluster
        .run(
            "scontrol",
            &[
                "update",
                "NodeName=node1",
                "State=DOWN",
                "Reason=hc: TEST reboot",
            ],
        )
        .unwrap();
    cluster
        .wait_node(node, LIMIT, |state, _| state.starts_with("down"))
        .unwrap_or_else(|s| panic!("node1 not down: {s:?}"));

    // While DOWN: the repair loop reserves before it resumes.
    scontrol(&cluster, &StateCommand::reserve(&name, node, 60, "root"))
        .unwrap_or_else(|e| panic!("a DOWN node cannot be reserved: {e}"));
    let shown = cluster
        .run("scontrol", &["show", "reservation", &name])
        .unwrap();
    assert!(
        shown.contains("Nodes=node1") && shown.contains("MAINT"),
        "{shown}"
    );
    scontrol(&cluster, &StateCommand::resume(node)).unwrap();
    cluster
        .wait_node(node, LIMIT, |state, _| !state.starts_with("down"))
        .unwrap_or_else(|s| panic!("node1 not resumed: {s:?}"));

    let user_job = cluster.sbatch(&["-w", node, "--wrap", "true"]).unwrap();
    let validation = cluster
        .sbatch(&[
            "-w",
            node,
            "--reservation",
            &name,
            "--exclusive",
            "--wrap",
            "true",
        ])
        .unwrap();
    assert!(
        cluster.wait_job_completed(&validation, LIMIT),
        "the validation job ran"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(cluster.job_field(&user_job, "JobState"), "PENDING");

    scontrol(&cluster, &StateCommand::unreserve(&name)).unwrap();
    let gone = cluster.run("scontrol", &["show", "reservation", &name]);
    assert!(gone.is_err() || gone.unwrap().contains("not found"));
    assert!(
        cluster.wait_job_completed(&user_job, LIMIT),
        "the user's job ran after it"
    );
}

/// The fake benchmark every node runs: it prints a real nccl-tests output.
fn benchmark_script() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../validate/tests/fixtures/nccl_tests/all_reduce_h100_16gpus.txt"
        );
        let path = dir.path().join("all_reduce_perf");
        std::fs::write(&path, format!("#!/bin/sh\ncat '{fixture}'\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        dir
    })
    .path()
}

/// node1 and node2 each get a degraded PCIe link that their reboot repairs;
/// the repair loop holds them for validation; node1's validation job passes
/// and frees it, node2's fails a floor (`avg_busbw` of its fake output is
/// 70.742 GB/s) and drains it with `hc: VALIDATE ...`.
#[test]
fn a_repaired_node_waits_in_its_reservation_until_its_validation_job_decides() {
    lemonade_tests::skip_without_cluster!();
    let toml = format!(
        r#"
[remediation]
enabled = true
breaker_fraction = 1.0

[validate]
sku = "H100x8"
after_repair = true
reservation_minutes = 30

[[validate.benchmark]]
name = "all_reduce"
argv = ["{bench}", "-g", "{{gpus}}"]
parser = "nccl-tests"
timeout_s = 30

[[node]]
hosts = "node2"
validate.floor = [{{ metric = "avg_busbw", min = 300.0 }}]
"#,
        bench = benchmark_script().join("all_reduce_perf").display()
    );
    let options = ClusterOptions {
        nodes: 2,
        health_check_interval: Some(5),
        reboot_program: true,
        lemonade_toml: toml,
        ..ClusterOptions::default()
    };
    let c = Cluster::start(options).unwrap_or_else(|e| panic!("{e}"));
    let limit = Duration::from_secs(180);
    for node in ["node1", "node2"] {
        c.set_fixture_after_reboot(node, "healthy").unwrap();
        c.set_fixture(node, "pcie-width-degraded").unwrap();
    }
    for node in ["node1", "node2"] {
        let name = validation_reservation(node);
        let held = c.wait_until(limit, || {
            c.reboots(node) > 0
                && c.run("scontrol", &["show", "reservation", &name]).is_ok()
                && c.node_state(node)
                    .is_ok_and(|(s, _)| !s.starts_with("down") && !s.contains("drain"))
        });
        let state = c.node_state(node);
        assert!(
            held,
            "{node} not held for validation after its reboot: {state:?}; {:#?}; logs in {:?}",
            state_changes(&c, node),
            c.save_logs()
        );
        // A user's job waits; the validation job runs `healthcheck validate`.
        let user = c.sbatch(&["-w", node, "--wrap", "true"]).unwrap();
        let wrapper = c.wrapper("healthcheck").display().to_string();
        let validation = c
            .sbatch(&[
                "-w",
                node,
                "--reservation",
                &name,
                "--exclusive",
                "--wrap",
                &format!("{wrapper} validate"),
            ])
            .unwrap();
        let ended = c.wait_until(limit, || {
            matches!(
                c.job_field(&validation, "JobState").as_str(),
                "COMPLETED" | "FAILED"
            )
        });
        assert!(ended, "the validation job of {node} did not end");
        // The job cannot delete the reservation it runs in; the periodic
        // run after it does.
        let gone = c.wait_until(limit, || {
            c.run("scontrol", &["show", "reservation", &name])
                .map_or(true, |s| s.contains("not found"))
        });
        let out = std::fs::read_to_string(c.dir().join(format!("job-{validation}.out")));
        assert!(gone, "{node}'s reservation stays: {out:?}");
        if node == "node1" {
            assert_eq!(c.job_field(&validation, "JobState"), "COMPLETED");
            assert!(
                c.wait_job_completed(&user, limit),
                "the user's job ran after node1 passed"
            );
        } else {
            assert_eq!(c.job_field(&validation, "ExitCode"), "2:0");
            let (state, reason) = c.node_state(node).unwrap();
            assert!(
                state.contains("drain") && reason.starts_with("hc: VALIDATE avg_busbw 70.742<300"),
                "{state} {reason}"
            );
        }
    }
}

fn state_changes(c: &Cluster, node: &str) -> Vec<lemonade_sql::node_jobs::StateChangeRow> {
    let path = c.node_db(node);
    lemonade_sql::node::NodeStore::open(&path, Duration::from_secs(2))
        .ok()
        .and_then(|s| lemonade_sql::node_jobs::state_changes_since(s.connection(), &path, 0).ok())
        .unwrap_or_default()
}
