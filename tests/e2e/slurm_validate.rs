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
