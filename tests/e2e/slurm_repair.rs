//! The remediation against a real Slurm cluster: GPU resets through the
//! configured command and the fake NVML, reboots through Slurm's own
//! `scontrol reboot` and the cluster's RebootProgram (which restarts the
//! node's slurmd with `-b` and, where the test prepared one, puts a repaired
//! root in place), the ladder, the breaker and the hooks.
//!
//! The fake NVML counts ECC errors as the driver does: an uncorrectable
//! error raises the volatile and the aggregate counter and leaves a row
//! remap pending; the reset command appends `reset <gpu>` to the node's
//! event log, and the fake then clears the volatile counter, keeps the
//! aggregate one and applies the remap.
//!
//! node1: a fresh uncorrectable error that a reset clears, leaving only the
//! aggregate count as history. node2: a degraded PCIe link, under a running
//! job, that a reboot repairs once the job ends. node3: the same fault,
//! which survives its reboot and waits for node2's first (the breaker).
//! node4: a reset that fails, with `max_remediations = 1`: a human is
//! needed. node5: memory that raises the error again after every reset, so
//! a reboot, which does not help either. node6: the driver's recovery
//! action (NVML field 230) says "GPU reset required" for GPU 2, which a
//! reset clears. node7: it says "node reboot required" for GPU 0: the
//! reboot rung (the fake's driver keeps saying so after the test cluster's
//! reboot, which restarts only slurmd, so a human is called after it).
//!
//! Waits are bounded polls, generous for a loaded CI machine.

use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs::{self, StateChangeRow};
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use lemonade_tests::fake_nvml;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const INTERVAL: u32 = 5;
const LIMIT: Duration = Duration::from_secs(120);

/// The nodes that read their GPUs from the fake NVML, each with its own event log.
const FAKE_GPU_NODES: [&str; 5] = ["node1", "node4", "node5", "node6", "node7"];

/// The healthy scenario every GPU node starts from, and their event logs:
/// node1 and node4 start with a fresh uncorrectable error on GPU 1; node5's
/// test plants its fault itself.
fn scenarios() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            fake_nvml::scenario(fake_nvml::HEALTHY),
            dir.path().join("h100-healthy.json"),
        )
        .unwrap();
        for node in FAKE_GPU_NODES {
            let planted = match node {
                "node5" => "",
                "node6" => "recovery 2 1\n",
                "node7" => "recovery 0 2\n",
                _ => "ecc-unc 1 2\n",
            };
            std::fs::write(dir.path().join(format!("{node}.events")), planted).unwrap();
        }
        dir
    })
    .path()
}

fn events(node: &str) -> PathBuf {
    scenarios().join(format!("{node}.events"))
}

fn hook_log() -> PathBuf {
    scenarios().join("hooks.jsonl")
}

fn cluster() -> &'static Cluster {
    Cluster::shared(|| {
        let env = |node: &str| {
            (
                node.to_string(),
                vec![
                    (
                        fake_nvml::SCENARIO_ENV.to_string(),
                        scenarios().join("h100-healthy.json").display().to_string(),
                    ),
                    (
                        fake_nvml::EVENTS_ENV.to_string(),
                        events(node).display().to_string(),
                    ),
                ],
            )
        };
        // The reset command resets the fake's GPU as nvidia-smi would the real one.
        let toml = format!(
            r#"
[remediation]
enabled = true
reset_command = ["/bin/sh", "-c", 'echo "reset $0" >> "${events}"', "{{gpu}}"]
reset_timeout_s = 30
# 7 nodes: one remediation at a time.
breaker_fraction = 0.1

[hooks]
commands = [["/bin/sh", "-c", "cat >> '{hooks}'; echo >> '{hooks}'"]]
timeout_s = 5

[[node]]
hosts = "node4"
remediation.reset_command = ["/bin/false", "{{gpu}}"]
remediation.max_remediations = 1
"#,
            events = fake_nvml::EVENTS_ENV,
            hooks = hook_log().display(),
        );
        ClusterOptions {
            nodes: 7,
            health_check_interval: Some(INTERVAL),
            reboot_program: true,
            node_env: FAKE_GPU_NODES.into_iter().map(env).collect(),
            lemonade_toml: toml,
            ..Default::default()
        }
    })
}

fn state_changes(c: &Cluster, node: &str) -> Vec<StateChangeRow> {
    let path = c.node_db(node);
    NodeStore::open(&path, Duration::from_secs(2))
        .ok()
        .and_then(|s| node_jobs::state_changes_since(s.connection(), &path, 0).ok())
        .unwrap_or_default()
}

fn has_change(c: &Cluster, node: &str, action: &str, outcome: &str) -> bool {
    state_changes(c, node)
        .iter()
        .any(|r| r.action == action && r.outcome == outcome)
}

/// Waits for `pred` over the node's state and reason; panics with both.
fn wait_node(
    c: &Cluster,
    node: &str,
    what: &str,
    pred: impl Fn(&str, &str) -> bool,
) -> (String, String) {
    c.wait_node(node, LIMIT, pred).unwrap_or_else(|last| {
        panic!(
            "{node}: no {what} within {LIMIT:?}; last {last:?}; changes {:#?}; {}",
            state_changes(c, node),
            saved_logs(c)
        )
    })
}

/// Where the daemons' logs were saved for a failure (the cluster's own
/// directory goes when the test binary exits).
fn saved_logs(c: &Cluster) -> String {
    match c.save_logs() {
        Ok(dir) => format!("logs saved in {}", dir.display()),
        Err(e) => format!("logs not saved ({e}), were in {}", c.dir().display()),
    }
}

fn in_service(state: &str, reason: &str) -> bool {
    reason.is_empty() && (state.starts_with("idle") || state.starts_with("mixed"))
}

#[test]
fn a_fresh_ecc_error_is_reset_and_the_node_resumes_with_only_the_aggregate_history() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    // The first run takes node1 out for the fresh error; a later one resets GPU 1.
    let ok = c.wait_until(LIMIT, || has_change(c, "node1", "down", "applied"));
    assert!(
        ok,
        "node1 never went down: {:#?}",
        state_changes(c, "node1")
    );
    wait_node(c, "node1", "resume after the reset", in_service);
    let rows = state_changes(c, "node1");
    let down = rows
        .iter()
        .find(|r| r.action == "down" && r.outcome == "applied")
        .unwrap();
    assert!(
        down.reason.starts_with("hc: ECC_VOLATILE_UNCORRECTED gpu1"),
        "{down:?}"
    );
    // The reset's own row (the one before it marks the reason `... reset`).
    let reset = rows
        .iter()
        .find(|r| {
            r.action == "reset-gpu" && r.outcome == "applied" && r.detail.contains("gpu1 reset in")
        })
        .unwrap_or_else(|| panic!("no applied reset: {rows:#?}"));
    assert!(
        reset.detail.ends_with("; the checks are clean"),
        "{reset:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.action == "resume" && r.outcome == "applied"),
        "{rows:#?}"
    );
    assert_eq!(c.reboots("node1"), 0, "a reset that helped needs no reboot");
    // The reset command reset the fake's GPU, once.
    let log = std::fs::read_to_string(events("node1")).unwrap();
    assert_eq!(log, "ecc-unc 1 2\nreset 1\n");
    // It stays in service: the checks after the reset and every run since are clean.
    std::thread::sleep(Duration::from_secs(2 * u64::from(INTERVAL)));
    let (state, reason) = c.node_state("node1").unwrap();
    assert!(in_service(&state, &reason), "{state} {reason}");
    // What is left is history: the latest run's ok finding shows the
    // lifetime count, and the spool export carried it to the head node.
    let history = "2 uncorrected ECC errors in its lifetime";
    let latest = latest_finding(c, "node1", "ecc", "gpu1");
    assert_eq!(latest.severity.as_str(), "ok", "{latest:?}");
    assert!(
        latest.actual.as_deref().unwrap_or("").starts_with(history),
        "{latest:?}"
    );
    let spool = std::fs::read_to_string(c.spool_dir().join("node1.jsonl")).unwrap();
    assert!(
        spool.lines().any(|l| l.contains("\"inventory\"")
            && l.contains("\"ecc\"")
            && l.contains("\"gpu1\"")
            && l.contains(history)),
        "{spool}"
    );
}

/// The newest recorded finding of `check` about `entity` on `node`.
fn latest_finding(
    c: &Cluster,
    node: &str,
    check: &str,
    entity: &str,
) -> lemonade_sql::node::FindingRow {
    let store = NodeStore::open(&c.node_db(node), Duration::from_secs(5)).unwrap();
    store
        .runs_since(0, 50)
        .unwrap()
        .iter()
        .flat_map(|run| store.findings_of(run.id).unwrap())
        .find(|f| f.check_name == check && f.entity == entity)
        .unwrap_or_else(|| panic!("{node}: no {check} finding about {entity}"))
}

#[test]
fn a_reset_that_fails_at_the_top_of_the_ladder_hands_the_node_to_a_human() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    let (state, reason) = wait_node(c, "node4", "hand-over", |_, r| r.ends_with(" human needed"));
    assert!(state.starts_with("down"), "{state}");
    assert!(
        reason.starts_with("hc: ECC_VOLATILE_UNCORRECTED gpu1"),
        "{reason}"
    );
    let rows = state_changes(c, "node4");
    let failed = rows
        .iter()
        .find(|r| r.action == "reset-gpu" && r.outcome == "failed")
        .unwrap_or_else(|| panic!("no failed reset: {rows:#?}"));
    assert!(failed.detail.contains("/bin/false 1"), "{failed:?}");
    assert!(!has_change(c, "node4", "reboot", "applied"), "{rows:#?}");
    assert_eq!(c.reboots("node4"), 0);
    // The hooks heard of the hand-over, and nothing more is tried.
    let ok = c.wait_until(LIMIT, || {
        std::fs::read_to_string(hook_log())
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("\"event\":\"hand-over\"") && l.contains("node4"))
    });
    assert!(ok, "hooks: {:?}", std::fs::read_to_string(hook_log()));
    std::thread::sleep(Duration::from_secs(2 * u64::from(INTERVAL)));
    let after = state_changes(c, "node4");
    let tries = |rows: &[StateChangeRow]| {
        rows.iter()
            .filter(|r| r.action == "reset-gpu" || r.action == "reboot")
            .count()
    };
    assert_eq!(tries(&after), tries(&rows), "{after:#?}");
}

#[test]
fn a_reboot_returns_its_node_after_a_clean_check_and_a_surviving_fault_stays_down() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    // node2's reboot repairs it; node3's does not. A job runs on node2 when
    // its link degrades: the node drains, and reboots only after the job.
    c.set_fixture_after_reboot("node2", "healthy").unwrap();
    let job = c.sbatch(&["-w", "node2", "--wrap", "sleep 25"]).unwrap();
    assert!(
        c.wait_until(LIMIT, || c.job_field(&job, "JobState") == "RUNNING"),
        "job {job} never ran on node2: {}",
        c.job_field(&job, "JobState")
    );
    c.set_fixture("node2", "pcie-width-degraded").unwrap();
    wait_node(c, "node2", "drain", |s, r| {
        s.starts_with("drain") || r.starts_with("hc: PCIE_")
    });
    let deadline = std::time::Instant::now() + LIMIT;
    while c.job_field(&job, "JobState") == "RUNNING" {
        assert!(
            std::time::Instant::now() < deadline,
            "job {job} never ended"
        );
        assert_eq!(c.reboots("node2"), 0, "rebooted under job {job}");
        assert!(
            !has_change(c, "node2", "reboot", "applied"),
            "a reboot asked for while job {job} runs: {:#?}",
            state_changes(c, "node2")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(c.job_field(&job, "JobState"), "COMPLETED", "job {job}");
    // Not the `... reboot` reason in sinfo: Slurm 26.05 reboots a test node
    // in under a second, between two polls; the policy's record stays.
    let ok = c.wait_until(LIMIT, || has_change(c, "node2", "reboot", "applied"));
    assert!(
        ok,
        "node2 never asked for its reboot: {:#?}; {}",
        state_changes(c, "node2"),
        saved_logs(c)
    );
    // While node2 reboots, node3 needs one too: the breaker makes it wait.
    c.set_fixture("node3", "pcie-width-degraded").unwrap();
    let ok = c.wait_until(LIMIT, || has_change(c, "node3", "remediation", "breaker"));
    assert!(
        ok || c.reboots("node2") > 0 && has_change(c, "node2", "resume", "applied"),
        "node3 neither waited nor found node2 done: {:#?}",
        state_changes(c, "node3")
    );

    wait_node(c, "node2", "return to service", in_service);
    assert_eq!(c.reboots("node2"), 1);
    let rows = state_changes(c, "node2");
    let resume = rows
        .iter()
        .find(|r| r.action == "resume" && r.outcome == "applied")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert!(
        resume.detail.contains("clean check after the reboot"),
        "{resume:?}"
    );

    let (state, reason) = wait_node(c, "node3", "reboot that did not help", |_, r| {
        r.ends_with(" reboot did not help")
    });
    assert!(state.starts_with("down"), "{state}");
    assert!(reason.starts_with("hc: PCIE_"), "{reason}");
    assert_eq!(c.reboots("node3"), 1);
    // The node never took a job in between: it stays down on later runs.
    std::thread::sleep(Duration::from_secs(2 * u64::from(INTERVAL)));
    let (state, reason) = c.node_state("node3").unwrap();
    assert!(state.starts_with("down"), "{state} {reason}");
    assert!(reason.ends_with(" reboot did not help"), "{reason}");
    assert_eq!(c.reboots("node3"), 1, "a human has it now");
}

#[test]
fn lemon_opens_a_ticket_for_the_handed_over_node_and_reports_the_repairs() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    // node1's reset resumed it; node4 was handed over (their own tests wait
    // for each; this one only reads what their periodic runs exported).
    let ok = c.wait_until(LIMIT, || {
        has_change(c, "node1", "resume", "applied")
            && has_change(c, "node4", "hand-over", "applied")
    });
    assert!(
        ok,
        "node1 {:#?}\nnode4 {:#?}",
        state_changes(c, "node1"),
        state_changes(c, "node4")
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lemon.db");
    let lemon = |args: &[&str]| {
        let out = c
            .host_binary(&lemonade_tests::target_bin_dir().join("lemon"))
            .arg("--config")
            .arg(c.config_path())
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "lemon {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let spool = c.spool_dir().display().to_string();
    lemon(&["ingest", "--no-slurm", "--spool-dir", &spool]);
    let tickets = lemon(&["ticket", "list"]);
    let node4: Vec<&str> = tickets
        .lines()
        .filter(|l| l.starts_with("node4\t"))
        .collect();
    assert_eq!(node4.len(), 1, "{tickets}");
    assert!(
        node4[0].contains("\thand-over\thc: ECC_VOLATILE_UNCORRECTED gpu1 human needed"),
        "{tickets}"
    );
    assert!(
        !tickets.contains("node1\t"),
        "node1 came back by itself: {tickets}"
    );
    // Read again: the same records open nothing twice.
    lemon(&["ingest", "--no-slurm", "--spool-dir", &spool]);
    assert_eq!(lemon(&["ticket", "list"]), tickets);

    let report = lemon(&["report", "--reliability"]);
    let ecc = report
        .lines()
        .find(|l| l.trim_start().starts_with("ecc "))
        .unwrap_or_else(|| panic!("no ecc row: {report}"));
    // node1 and node4 at least (node1 may have been taken out again since).
    let cells: Vec<&str> = ecc.split_whitespace().collect();
    let incidents: u64 = cells[1].parse().unwrap();
    // category, incidents, resets, restarts, reboots, hand-overs, ...
    let resets: u64 = cells[2].parse().unwrap();
    let hand_overs: u64 = cells[5].parse().unwrap();
    assert!(incidents >= 2 && resets >= 2 && hand_overs >= 1, "{report}");
    assert!(
        report.contains("mean time between incidents per node"),
        "{report}"
    );
}

#[test]
fn an_error_that_a_reset_does_not_clear_escalates_to_a_reboot_and_then_a_human() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    // Memory that fails again after every reset: the reset command runs and
    // the fake resets the GPU, but the checks after it find a fresh error.
    std::fs::write(events("node5"), "ecc-unc-sticky 1 2\n").unwrap();
    let (state, reason) = wait_node(c, "node5", "reboot that did not help", |_, r| {
        r.ends_with(" reboot did not help")
    });
    assert!(state.starts_with("down"), "{state}");
    assert!(
        reason.starts_with("hc: ECC_VOLATILE_UNCORRECTED gpu1"),
        "{reason}"
    );
    let rows = state_changes(c, "node5");
    let reset = rows
        .iter()
        .position(|r| r.action == "reset-gpu" && r.outcome == "failed")
        .unwrap_or_else(|| panic!("no reset that failed: {rows:#?}"));
    assert!(
        rows[reset]
            .detail
            .contains("still find ECC_VOLATILE_UNCORRECTED"),
        "{:?}",
        rows[reset]
    );
    let reboot = rows
        .iter()
        .position(|r| r.action == "reboot" && r.outcome == "applied")
        .unwrap_or_else(|| panic!("no reboot: {rows:#?}"));
    assert!(reset < reboot, "the reset came first: {rows:#?}");
    assert_eq!(c.reboots("node5"), 1);
    let log = std::fs::read_to_string(events("node5")).unwrap();
    assert_eq!(
        log, "ecc-unc-sticky 1 2\nreset 1\n",
        "one reset, then the ladder"
    );
}

#[test]
fn the_drivers_gpu_reset_required_is_reset_and_the_node_resumes() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    let ok = c.wait_until(LIMIT, || has_change(c, "node6", "down", "applied"));
    assert!(
        ok,
        "node6 never went down: {:#?}",
        state_changes(c, "node6")
    );
    wait_node(c, "node6", "resume after the reset", in_service);
    let rows = state_changes(c, "node6");
    let down = rows
        .iter()
        .find(|r| r.action == "down" && r.outcome == "applied")
        .unwrap();
    assert!(
        down.reason.starts_with("hc: RECOVERY_GPU_RESET gpu2"),
        "{down:?}"
    );
    let reset = rows
        .iter()
        .find(|r| {
            r.action == "reset-gpu" && r.outcome == "applied" && r.detail.contains("gpu2 reset in")
        })
        .unwrap_or_else(|| panic!("no applied reset: {rows:#?}"));
    assert!(
        reset.detail.ends_with("; the checks are clean"),
        "{reset:?}"
    );
    assert_eq!(c.reboots("node6"), 0, "a reset that helped needs no reboot");
    // The reset command reset the fake's GPU 2 once, which cleared the action.
    let log = std::fs::read_to_string(events("node6")).unwrap();
    assert_eq!(log, "recovery 2 1\nreset 2\n");
}

#[test]
fn the_drivers_node_reboot_required_goes_to_the_reboot_rung() {
    lemonade_tests::skip_without_cluster!();
    let c = cluster();
    let ok = c.wait_until(LIMIT, || has_change(c, "node7", "reboot", "applied"));
    assert!(
        ok,
        "node7 never asked for its reboot: {:#?}; {}",
        state_changes(c, "node7"),
        saved_logs(c)
    );
    let rows = state_changes(c, "node7");
    let down = rows
        .iter()
        .find(|r| r.action == "down" && r.outcome == "applied")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert!(
        down.reason.starts_with("hc: RECOVERY_NODE_REBOOT gpu0"),
        "{down:?}"
    );
    assert!(
        !rows.iter().any(|r| r.action == "reset-gpu"),
        "a reboot is not preceded by a reset: {rows:#?}"
    );
    // The driver still asks after the test cluster's reboot (only slurmd
    // restarts): the ladder calls a human, and nothing is reset.
    let (state, reason) = wait_node(c, "node7", "reboot that did not help", |_, r| {
        r.ends_with(" reboot did not help")
    });
    assert!(state.starts_with("down"), "{state}");
    assert!(
        reason.starts_with("hc: RECOVERY_NODE_REBOOT gpu0"),
        "{reason}"
    );
    assert_eq!(c.reboots("node7"), 1);
    let log = std::fs::read_to_string(events("node7")).unwrap();
    assert_eq!(log, "recovery 0 2\n", "no reset was tried");
}
