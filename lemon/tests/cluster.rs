//! `lemon run` against a real Slurm cluster with slurmdbd (see
//! `lemonade_tests::cluster`): repeated failing jobs on one node make lemon
//! drain exactly that node with a `lemon:` reason that `sinfo -R` shows,
//! and a node an administrator drained is left alone.
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
