//! Proactive validation end to end on a real Slurm cluster (issue 31): both
//! halves at once. The node half (`healthcheck`'s repair loop, its
//! validation gate and `healthcheck validate`) runs on the cluster's nodes;
//! the head half (`lemon run` with `[validate] enabled`) runs against the
//! same cluster and picks, submits and reads back the validation jobs.
//!
//! The benchmark is a fake `all_reduce_perf` printing a real nccl-tests
//! output (the H100 fixture of `validate/tests/fixtures`), with node2's
//! `# Avg bus bandwidth` 10% low. It waits for the test's go-ahead, so
//! that `lemon` runs once more while the validation jobs are in Slurm.
//!
//! Waits are bounded polls; they are correctness limits, not measurements.

use lemonade_slurm::node_state::validation_reservation;
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);
/// The fixture's `# Avg bus bandwidth`, and node2's, 10% below it.
const HEALTHY_BUSBW: &str = "70.742";
const DEGRADED_BUSBW: &str = "63.668";

/// The fake benchmark and its outputs, in a directory of the test's own.
fn fake_benchmark(dir: &Path) -> PathBuf {
    let fixture = std::fs::read_to_string(
        lemonade_tests::repo_root()
            .join("validate/tests/fixtures/nccl_tests/all_reduce_h100_16gpus.txt"),
    )
    .unwrap();
    let avg = format!("# Avg bus bandwidth    : {HEALTHY_BUSBW}");
    assert!(fixture.contains(&avg), "the fixture changed");
    let degraded = fixture.replace(&avg, &format!("# Avg bus bandwidth    : {DEGRADED_BUSBW}"));
    std::fs::write(dir.join("healthy.txt"), &fixture).unwrap();
    std::fs::write(dir.join("degraded.txt"), degraded).unwrap();
    let d = dir.display();
    let script = format!(
        "#!/bin/sh\n\
         # Waits (50 s at most) for the test's go-ahead, then prints this node's output.\n\
         i=0\n\
         while [ ! -e '{d}/go' ] && [ $i -lt 500 ]; do sleep 0.1; i=$((i + 1)); done\n\
         case \"$SLURMD_NODENAME\" in\n\
         node2) cat '{d}/degraded.txt' ;;\n\
         *) cat '{d}/healthy.txt' ;;\n\
         esac\n"
    );
    let path = dir.join("all_reduce_perf");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// The cluster's `lemonade.toml`: the repair loop holds rebooted nodes for
/// validation; the suite is the fake; the site's floor fails node2's
/// bandwidth; lemon's budget (3 nodes x 24 h x 0.1% = 0.07 node-hours) is
/// less than one 10-minute validation, so only the required nodes go.
fn config(bench: &Path) -> String {
    format!(
        r#"
[remediation]
enabled = true
breaker_fraction = 1.0

[validate]
enabled = true
sku = "H100x8"
after_repair = true
reservation_minutes = 30
budget_fraction = 0.001
time_limit_minutes = 10
floor = [{{ metric = "avg_busbw", min = 65.0 }}]

[[validate.benchmark]]
name = "all_reduce"
argv = ["{bench}", "-g", "{{gpus}}"]
parser = "nccl-tests"
timeout_s = 60
"#,
        bench = bench.display()
    )
}

/// The head node's config: the cluster's, with the validation job running
/// the cluster's `healthcheck` wrapper (known once the cluster is up).
fn lemon_config(c: &Cluster) -> PathBuf {
    let text = std::fs::read_to_string(c.config_path()).unwrap();
    let header = "\n[validate]\n";
    assert!(text.contains(header), "{text}");
    let line = format!(
        "healthcheck_path = \"{}\"\n",
        c.wrapper("healthcheck").display()
    );
    let path = c.dir().join("etc/lemon.toml");
    std::fs::write(&path, text.replacen(header, &format!("{header}{line}"), 1)).unwrap();
    path
}

/// `lemon ARGS` against the cluster; its exit code and stdout + stderr.
fn lemon(c: &Cluster, config: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = c
        .host_binary(Path::new(env!("CARGO_BIN_EXE_lemon")))
        .arg("--config")
        .arg(config)
        .arg("--db")
        .arg(c.dir().join("lemon.db"))
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

/// Whether `name` is among the cluster's reservations.
fn reserved(c: &Cluster, name: &str) -> bool {
    c.run("scontrol", &["-o", "show", "reservation"])
        .is_ok_and(|s| s.contains(&format!("ReservationName={name} ")))
}

/// Waits until the repair loop rebooted `node` and resumed it into its
/// validation reservation.
fn wait_held(c: &Cluster, node: &str) {
    let name = validation_reservation(node);
    let held = c.wait_until(LIMIT, || {
        c.reboots(node) > 0
            && reserved(c, &name)
            && c.node_state(node).is_ok_and(|(s, _)| {
                // `idle*`: slurmctld has not heard from the rebooted slurmd
                // yet (24.11 shows it for a while), and lemon rightly
                // leaves a node not responding alone.
                !s.starts_with("down") && !s.contains("drain") && !s.ends_with('*')
            })
    });
    assert!(
        held,
        "{node} not held for validation after its reboot: {:?}; logs in {:?}",
        c.node_state(node),
        c.save_logs()
    );
}

/// What Slurm says of the nodes and reservations, for a failure.
fn view(c: &Cluster) -> String {
    format!(
        "\nsinfo: {:?}\nreservations: {:?}",
        c.run("sinfo", &["-h", "-N", "-o", "%N|%T|%E"]),
        c.run("scontrol", &["-o", "show", "reservation"])
    )
}

/// The job id `lemon run` printed for `node`'s submission, if any.
fn submitted(out: &str, node: &str) -> Option<(usize, String)> {
    let key = format!("{node}: submitted job ");
    let at = out.find(&key)?;
    let id: String = out[at + key.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((at, id))
}

/// `JobID|JobName|NodeList|State` of the validation jobs in accounting.
fn accounted(c: &Cluster) -> Vec<Vec<String>> {
    let out = c
        .run(
            "sacct",
            &[
                "-X",
                "-a",
                "-n",
                "-P",
                "-o",
                "JobID,JobName,NodeList,State",
                "--name",
                "lemonade-validate",
            ],
        )
        .unwrap_or_default();
    out.lines()
        .map(|l| l.split('|').map(String::from).collect())
        .collect()
}

/// node2 then node3 come back from a reboot repair and wait in their
/// reservations; `lemon run` sends node2 (the longest waiting) to
/// validation first, then node3, and leaves the healthy node1 to the
/// budget; a second run submits nothing while those jobs are in Slurm;
/// node2's degraded bandwidth keeps it out with `hc: VALIDATE ...`, node3
/// passes and takes a user's job; accounting shows both jobs by the site's
/// job name; a third run reads the verdicts and `lemon report` shows them.
#[test]
fn lemon_validates_the_repaired_nodes_in_order_and_their_verdicts_keep_node2_out_and_free_node3() {
    lemonade_tests::skip_without_cluster!();
    let started = std::time::Instant::now();
    let bench_dir = tempfile::tempdir().unwrap();
    let bench = fake_benchmark(bench_dir.path());
    let c = Cluster::start(ClusterOptions {
        nodes: 3,
        health_check_interval: Some(5),
        reboot_program: true,
        lemonade_toml: config(&bench),
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let lemon_toml = lemon_config(&c);
    // A user's job on node1: lemon acts only on a job history.
    let first = c.sbatch(&["-w", "node1", "--wrap", "true"]).unwrap();

    // node2 first, then node3 (once node2 waits): a degraded PCIe link
    // that their reboot repairs.
    for node in ["node2", "node3"] {
        c.set_fixture_after_reboot(node, "healthy").unwrap();
        c.set_fixture(node, "pcie-width-degraded").unwrap();
        wait_held(&c, node);
    }
    // Both still held and answering when lemon looks.
    wait_held(&c, "node2");
    wait_held(&c, "node3");
    assert!(c.wait_job_completed(&first, LIMIT), "node1's job");
    let held_at = started.elapsed();

    // The first run: both required, node2 first, node1 left to the budget.
    let (code, out) = lemon(&c, &lemon_toml, &["run"]);
    assert_eq!(code, Some(0), "{out}");
    let (at2, job2) = submitted(&out, "node2").unwrap_or_else(|| panic!("{out}{}", view(&c)));
    let (at3, job3) = submitted(&out, "node3").unwrap_or_else(|| panic!("{out}{}", view(&c)));
    assert!(at2 < at3, "node2 is not sent first: {out}");
    assert!(job2.parse::<u64>().unwrap() < job3.parse::<u64>().unwrap());
    for (node, job) in [("node2", &job2), ("node3", &job3)] {
        let line = format!("{node}: submitted job {job} (returned_from_repair,");
        assert!(out.contains(&line), "{out}");
    }
    assert!(submitted(&out, "node1").is_none(), "{out}");
    assert!(
        out.contains("Deferred for lack of budget, most urgent first: node1."),
        "{out}"
    );
    assert!(c.spool_dir().join("validate-criteria.json").is_file());
    for (job, node) in [(&job2, "node2"), (&job3, "node3")] {
        assert_eq!(
            c.job_field(job, "Reservation"),
            validation_reservation(node)
        );
        assert_eq!(c.job_field(job, "JobName"), "lemonade-validate");
    }

    // While they are in Slurm: a user's job on node3 waits, and lemon
    // submits nothing new.
    let user = c.sbatch(&["-w", "node3", "--wrap", "true"]).unwrap();
    let (code, again) = lemon(&c, &lemon_toml, &["run"]);
    assert_eq!(code, Some(0), "{again}");
    assert!(!again.contains("submitted job"), "{again}");
    assert!(again.contains("Already queued: node2 node3."), "{again}");
    assert_eq!(c.job_field(&user, "JobState"), "PENDING");

    // The benchmarks print; the verdicts come.
    std::fs::write(bench_dir.path().join("go"), "").unwrap();
    let ended = |job: &str| {
        matches!(
            c.job_field(job, "JobState").as_str(),
            "COMPLETED" | "FAILED"
        )
    };
    assert!(
        c.wait_until(LIMIT, || ended(&job2) && ended(&job3)),
        "validation jobs did not end: {:?}",
        job_outputs(&[&job2, &job3])
    );
    assert_eq!(c.job_field(&job2, "ExitCode"), "2:0");
    assert_eq!(c.job_field(&job3, "JobState"), "COMPLETED");
    // The periodic runs after the verdicts delete the reservations.
    let gone = c.wait_until(LIMIT, || {
        !reserved(&c, &validation_reservation("node2"))
            && !reserved(&c, &validation_reservation("node3"))
    });
    assert!(
        gone,
        "reservations stay: {:?}",
        job_outputs(&[&job2, &job3])
    );

    // node3 passed: it takes the user's job.
    assert!(
        c.wait_job_completed(&user, LIMIT),
        "the user's job on node3"
    );
    let (state, reason) = c.node_state("node3").unwrap();
    assert!(
        !state.contains("drain") && reason.is_empty(),
        "{state} {reason}"
    );
    // node2 failed: out, with the metric in its reason.
    let expected = format!("hc: VALIDATE avg_busbw {DEGRADED_BUSBW}<65");
    let (state, reason) = c.node_state("node2").unwrap();
    assert!(
        state.contains("drain") && reason.starts_with(&expected),
        "{state} {reason}"
    );
    let sinfo_r = c.run("sinfo", &["-R", "-h", "-o", "%N|%E"]).unwrap();
    assert!(
        sinfo_r.lines().any(|l| l.starts_with("node2|hc: VALIDATE")),
        "{sinfo_r}"
    );

    // Accounting: the site's validation jobs, by name, node2's first.
    let mut rows = Vec::new();
    let both = c.wait_until(LIMIT, || {
        rows = accounted(&c);
        rows.len() == 2 && rows.iter().all(|r| r.len() == 4 && r[3] != "RUNNING")
    });
    assert!(both, "{rows:?}");
    assert_eq!(rows[0], [&job2, "lemonade-validate", "node2", "FAILED"]);
    assert_eq!(rows[1], [&job3, "lemonade-validate", "node3", "COMPLETED"]);

    // The third run reads the verdicts and submits nothing for them.
    let (code, third) = lemon(&c, &lemon_toml, &["run"]);
    assert!(matches!(code, Some(0 | 1)), "{third}");
    assert!(!third.contains("submitted job"), "{third}");
    let (code, report) = lemon(&c, &lemon_toml, &["report"]);
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report.contains("2 nodes validated, 1 failing their last validation."),
        "{report}"
    );
    let line = |node: &str| {
        (report.lines())
            .find(|l| l.contains(node) && l.contains("H100x8"))
            .unwrap_or_else(|| panic!("no {node} in {report}"))
            .to_string()
    };
    let node2 = line("node2");
    assert!(
        node2.contains("FAIL") && node2.contains(&format!("avg_busbw {DEGRADED_BUSBW}<65")),
        "{node2}"
    );
    assert!(line("node3").contains("pass"), "{}", line("node3"));
    // One note for the 64 per-size bandwidths without a floor, not 64.
    assert!(
        report.contains("note: H100x8 avg_busbw: static floor: 1 results of 8 needed")
            && report.matches("no floor configured").count() == 1,
        "{report}"
    );
    // Later periodic runs leave node2 out.
    let (state, reason) = c.node_state("node2").unwrap();
    assert!(
        state.contains("drain") && reason.starts_with(&expected),
        "{state} {reason}"
    );
    for job in [&job2, &job3] {
        let _ = std::fs::remove_file(format!("/tmp/lemonade-validate-{job}.out"));
    }
    eprintln!(
        "validate_cluster: nodes held after {:.0} s, whole test {:.0} s",
        held_at.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The validation jobs' outputs (`--output=/tmp/%x-%j.out`), for a failure.
fn job_outputs(jobs: &[&str]) -> Vec<String> {
    jobs.iter()
        .map(|j| {
            std::fs::read_to_string(format!("/tmp/lemonade-validate-{j}.out")).unwrap_or_default()
        })
        .collect()
}
