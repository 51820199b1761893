//! The policy's decisions that need no Slurm, or a Slurm that is not there.
//! Its behaviour against Slurm itself is proven on the real test cluster
//! (`tests/e2e`).

use super::*;
use crate::check::Profile;
use crate::engine::CheckSummary;
use crate::record::Trigger;
use std::time::Duration;

pub(crate) fn report(findings: Vec<Finding>) -> RunReport {
    let checks = findings
        .iter()
        .map(|f| CheckSummary {
            name: f.check.clone(),
            worst: f.severity,
            duration_ms: 1.0,
            timed_out: false,
        })
        .collect();
    RunReport {
        node: "node1".into(),
        started_at: chrono::Utc::now(),
        duration_ms: 1.0,
        profile: Profile::Periodic,
        trigger: Trigger::Periodic,
        job_id: None,
        worst: crate::finding::worst(&findings),
        exit_code: crate::exit_status::ExitStatus::Ok,
        checks,
        findings,
        uptime_s: None,
        new_events: Vec::new(),
        run_id: None,
    }
}

/// A Slurm whose commands do not exist: every call fails at once.
fn absent_slurm() -> SlurmCommands {
    SlurmCommands::new("/nonexistent/slurm/bin", None, Duration::from_secs(1))
}

#[test]
fn clean_and_warning_runs_never_call_slurm() {
    let config = Config::default();
    let mut memory = Memory::default();
    let mut calls = Vec::new();
    let r = report(vec![
        Finding::ok("xid", "gpu0"),
        Finding::new("ib", "mlx5_0:1", "IB_SYMBOL_ERRORS", Severity::Warning),
        Finding::unknown("gpu", "node", "CHECK_FAILED", "no NVML"),
    ]);
    let out = decide(&config, &r, false, &mut memory, &absent_slurm(), &mut |c| {
        calls.push(c.to_string())
    });
    assert!(calls.is_empty(), "{calls:?}");
    assert!(out.changes.is_empty());
}

#[test]
fn unknown_streak_becomes_a_warning_after_n_runs_and_resets() {
    let config = Config::default();
    let mut memory = Memory::default();
    let unknown = report(vec![Finding::unknown("gpu", "node", "CHECK_FAILED", "x")]);
    for run in 1..=3 {
        let out = decide(
            &config,
            &unknown,
            false,
            &mut memory,
            &absent_slurm(),
            &mut |_| {},
        );
        let warned = out.findings.iter().any(|f| f.code == UNKNOWN_STREAK);
        assert_eq!(warned, run == 3, "run {run}");
    }
    decide(
        &config,
        &report(vec![Finding::ok("gpu", "gpu0")]),
        false,
        &mut memory,
        &absent_slurm(),
        &mut |_| {},
    );
    assert!(memory.unknown_streak.is_empty());
}

#[test]
fn unreachable_slurm_is_recorded_once_and_not_retried() {
    let config = Config::default();
    let mut memory = Memory::default();
    let mut calls = 0;
    let r = report(vec![Finding::new("xid", "gpu3", "XID_79", Severity::Down)]);
    let out = decide(
        &config,
        &r,
        false,
        &mut memory,
        &absent_slurm(),
        &mut |_| calls += 1,
    );
    assert_eq!(calls, 1, "one failed call ends the attempt");
    assert_eq!(out.changes.len(), 1);
    assert_eq!(out.changes[0].outcome, ChangeOutcome::Failed);
    assert_eq!(out.changes[0].reason, "hc: XID_79 gpu3");
    assert!(out
        .findings
        .iter()
        .any(|f| f.code == SLURM_UNREACHABLE && f.severity == Severity::Unknown));
    assert!(memory.ours.is_none(), "not ours until Slurm took it");
}

#[test]
fn resume_waits_for_k_clean_runs_and_only_for_auto_resumable_causes() {
    let config = Config::default();
    let clean = report(vec![
        Finding::ok("mounts", "/scratch"),
        Finding::ok("xid", "gpu0"),
    ]);
    let ours = |check: &str| Ours {
        action: "drain".into(),
        reason: "hc: X".into(),
        causes: vec![Cause {
            check: check.into(),
            code: "X".into(),
            entity: "e".into(),
            action: lemonade_config::Action::None,
            pci: None,
        }],
        at: 0,
        clean_runs: 0,
    };
    // mounts: the first clean run only counts, the second tries to resume.
    let mut memory = Memory {
        ours: Some(ours("mounts")),
        ..Default::default()
    };
    let mut calls = 0;
    decide(
        &config,
        &clean,
        false,
        &mut memory,
        &absent_slurm(),
        &mut |_| calls += 1,
    );
    assert_eq!(calls, 0);
    let out = decide(
        &config,
        &clean,
        false,
        &mut memory,
        &absent_slurm(),
        &mut |_| calls += 1,
    );
    assert_eq!(calls, 1);
    assert_eq!(out.changes[0].action, "resume");
    assert_eq!(out.changes[0].outcome, ChangeOutcome::Failed);
    // xid: never resumed by us, however many clean runs.
    let mut memory = Memory {
        ours: Some(ours("xid")),
        ..Default::default()
    };
    for _ in 0..5 {
        decide(
            &config,
            &clean,
            false,
            &mut memory,
            &absent_slurm(),
            &mut |_| calls += 1,
        );
    }
    assert_eq!(calls, 1);
}

#[test]
fn a_state_change_the_database_cannot_keep_is_said_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.db");
    let store = lemonade_sql::node::NodeStore::open(&path, Duration::from_secs(1)).unwrap();
    store
        .connection()
        .execute_batch("DROP TABLE state_changes")
        .unwrap();
    let result = PolicyResult {
        changes: vec![StateChange {
            action: "drain".into(),
            reason: "hc: XID_79 gpu3".into(),
            causes: Vec::new(),
            outcome: ChangeOutcome::Applied,
            detail: String::new(),
        }],
        ..PolicyResult::default()
    };
    let lost = remember(
        store.connection(),
        &path,
        &Memory::default(),
        &result,
        &report(Vec::new()),
    );
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(
        lost[0].contains("state change was not recorded"),
        "{lost:?}"
    );
    assert!(
        lost[0].contains("state_changes"),
        "names what failed: {lost:?}"
    );
}

/// A Slurm of two scripts in `dir`: `sinfo` lists node1 as `state` with
/// `reason`, `scontrol` appends its argv to `dir/scontrol.log`.
fn scripted_slurm(dir: &std::path::Path, state: &str, reason: &str) -> SlurmCommands {
    use std::os::unix::fs::PermissionsExt;
    let log = dir.join("scontrol.log");
    let scripts = [
        (
            "sinfo",
            format!("#!/bin/sh\necho 'node1|{state}|{reason}|root|2026-11-24T18:41:25'\n"),
        ),
        (
            "scontrol",
            format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
        ),
    ];
    for (name, body) in scripts {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    SlurmCommands::new(dir, None, Duration::from_secs(5))
}

#[test]
fn a_node_taken_down_for_the_cause_of_its_repair_keeps_the_repairs_remark() {
    // Slurm gave up on a reboot: the node is drained (the flag `reboot ASAP`
    // set) with the repair's verdict; the fault is still there and wants DOWN.
    let dir = tempfile::tempdir().unwrap();
    let cmds = scripted_slurm(
        dir.path(),
        "drained",
        "hc: PCIE_WIDTH_DEGRADED gpu3 reboot did not help",
    );
    let mut memory = Memory::default();
    let r = report(vec![Finding::new(
        "pcie",
        "gpu3",
        "PCIE_WIDTH_DEGRADED",
        Severity::Down,
    )]);
    let out = decide(
        &Config::default(),
        &r,
        false,
        &mut memory,
        &cmds,
        &mut |_| {},
    );
    let log = std::fs::read_to_string(dir.path().join("scontrol.log")).unwrap();
    let update = log
        .lines()
        .find(|l| l.contains("State=DOWN"))
        .unwrap_or_else(|| {
            panic!(
                "no DOWN written; scontrol saw: {log:?}; changes {:?}",
                out.changes
            )
        });
    assert!(
        update.contains("Reason=hc: PCIE_WIDTH_DEGRADED gpu3 reboot did not help"),
        "{update}"
    );
}

#[test]
fn a_drain_for_the_drivers_p2p_drain_is_resumed_once_clean_runs_read_it_gone() {
    let config = Config::default();
    let clean = report(vec![Finding::ok("gpu", "gpu3")]);
    let ours = |code: &str| Ours {
        action: "drain".into(),
        reason: format!("hc: {code} gpu3"),
        causes: vec![Cause {
            check: "gpu".into(),
            code: code.into(),
            entity: "gpu3".into(),
            action: lemonade_config::Action::None,
            pci: None,
        }],
        at: 0,
        clean_runs: 0,
    };
    let resumes = |code: &str| {
        let mut memory = Memory {
            ours: Some(ours(code)),
            ..Default::default()
        };
        let mut tried = false;
        for _ in 0..3 {
            let out = decide(
                &config,
                &clean,
                false,
                &mut memory,
                &absent_slurm(),
                &mut |_| {},
            );
            tried |= out.changes.iter().any(|c| c.action == "resume");
        }
        tried
    };
    assert!(resumes("RECOVERY_DRAIN_P2P"));
    // Other gpu causes wait for their rung or a human.
    assert!(!resumes("RECOVERY_IMEX_DOMAIN"));
    assert!(!resumes("PERSISTENCE_MODE_OFF"));
}
