//! The remediation against a real Slurm cluster: GPU resets through the
//! configured command and the fake NVML, reboots through Slurm's own
//! `scontrol reboot` and the cluster's RebootProgram (which restarts the
//! node's slurmd with `-b` and, where the test prepared one, puts a repaired
//! root in place), the ladder, the breaker and the hooks.
//!
//! node1: a reset that clears an uncorrected ECC error. node2: a degraded
//! PCIe link, under a running job, that a reboot repairs once the job ends.
//! node3: the same fault, which survives its reboot and waits for node2's
//! first (the breaker). node4: a reset that
//! fails, with `max_remediations = 1`: a human is needed. node5: a reset
//! that runs but does not clear the fault, so a reboot, which does not
//! either.
//!
//! Waits are bounded polls, generous for a loaded CI machine.

use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs::{self, StateChangeRow};
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const INTERVAL: u32 = 5;
const LIMIT: Duration = Duration::from_secs(120);

/// The fake NVML scenarios of node1, node4 and node5 (node1's reset rewrites its own).
fn scenarios() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let nvml = lemonade_tests::fake_nvml::scenarios_dir();
        std::fs::copy(
            nvml.join("h100-healthy.json"),
            dir.path().join("h100-healthy.json"),
        )
        .unwrap();
        for node in ["node1", "node4"] {
            std::fs::copy(
                nvml.join("ecc-volatile-dbe.json"),
                dir.path().join(format!("{node}.json")),
            )
            .unwrap();
        }
        // node5's test plants its fault itself.
        std::fs::copy(
            nvml.join("h100-healthy.json"),
            dir.path().join("node5.json"),
        )
        .unwrap();
        dir
    })
    .path()
}

fn scenario(node: &str) -> PathBuf {
    scenarios().join(format!("{node}.json"))
}

fn hook_log() -> PathBuf {
    scenarios().join("hooks.jsonl")
}

fn cluster() -> &'static Cluster {
    Cluster::shared(|| {
        let env = |node: &str| {
            (
                node.to_string(),
                vec![(
                    lemonade_tests::fake_nvml::SCENARIO_ENV.to_string(),
                    scenario(node).display().to_string(),
                )],
            )
        };
        let toml = format!(
            r#"
[remediation]
enabled = true
reset_command = ["/bin/cp", "{healthy}", "{node1}"]
reset_timeout_s = 30
# 5 nodes: one remediation at a time.
breaker_fraction = 0.1

[hooks]
commands = [["/bin/sh", "-c", "cat >> '{hooks}'; echo >> '{hooks}'"]]
timeout_s = 5

[[node]]
hosts = "node4"
remediation.reset_command = ["/bin/false", "{{gpu}}"]
remediation.max_remediations = 1

[[node]]
hosts = "node5"
remediation.reset_command = ["/bin/true", "{{gpu}}"]
"#,
            healthy = scenarios().join("h100-healthy.json").display(),
            node1 = scenario("node1").display(),
            hooks = hook_log().display(),
        );
        ClusterOptions {
            nodes: 5,
            health_check_interval: Some(INTERVAL),
            reboot_program: true,
            node_env: [env("node1"), env("node4"), env("node5")]
                .into_iter()
                .collect(),
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
            "{node}: no {what} within {LIMIT:?}; last {last:?}; changes {:#?}; logs in {}",
            state_changes(c, node),
            c.dir().display()
        )
    })
}

fn in_service(state: &str, reason: &str) -> bool {
    reason.is_empty() && (state.starts_with("idle") || state.starts_with("mixed"))
}

#[test]
fn a_reset_that_clears_the_fault_resumes_the_node_without_a_reboot() {
    let c = cluster();
    // The first run takes node1 out for the ECC error; a later one resets GPU 1.
    let ok = c.wait_until(LIMIT, || has_change(c, "node1", "down", "applied"));
    assert!(
        ok,
        "node1 never went down: {:#?}",
        state_changes(c, "node1")
    );
    wait_node(c, "node1", "resume after the reset", in_service);
    let rows = state_changes(c, "node1");
    let reset = rows
        .iter()
        .find(|r| r.action == "reset-gpu" && r.outcome == "applied")
        .unwrap_or_else(|| panic!("no applied reset: {rows:#?}"));
    assert!(reset.detail.contains("gpu1 reset"), "{reset:?}");
    assert!(
        rows.iter()
            .any(|r| r.action == "resume" && r.outcome == "applied"),
        "{rows:#?}"
    );
    assert_eq!(c.reboots("node1"), 0, "a reset that helped needs no reboot");
    // It stays in service: the checks after the reset and every run since are clean.
    std::thread::sleep(Duration::from_secs(2 * u64::from(INTERVAL)));
    let (state, reason) = c.node_state("node1").unwrap();
    assert!(in_service(&state, &reason), "{state} {reason}");
}

#[test]
fn a_reset_that_fails_at_the_top_of_the_ladder_hands_the_node_to_a_human() {
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
    wait_node(c, "node2", "reboot", |_, r| r.ends_with(" reboot"));
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
    let resets: u64 = cells[2].parse().unwrap();
    let hand_overs: u64 = cells[4].parse().unwrap();
    assert!(incidents >= 2 && resets >= 2 && hand_overs >= 1, "{report}");
    assert!(
        report.contains("mean time between incidents per node"),
        "{report}"
    );
}

#[test]
fn a_reset_that_does_not_clear_the_fault_escalates_to_a_reboot() {
    let c = cluster();
    std::fs::copy(
        lemonade_tests::fake_nvml::scenario("ecc-volatile-dbe"),
        scenario("node5"),
    )
    .unwrap();
    // The reset command succeeds, the checks after it still find the error,
    // so a reboot; the fake NVML keeps the fault across it.
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
}
