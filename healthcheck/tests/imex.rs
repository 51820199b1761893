//! The `imex` check on a GB200-like tray: four GPUs, one of the 18 trays of
//! an NVL72 domain, the IMEX daemon in `/proc`, the channel device in
//! `/dev`, and a fake `nvidia-imex-ctl` printing the published samples of
//! `src/checks/imex/fixtures/` (or hanging). Each fault gives its finding
//! and the `restart-imex` rung; a hung ctl is `unknown`.

use healthcheck::check::{Check, CheckContext};
use healthcheck::checks::imex::{self, evaluate as ie};
use healthcheck::finding::Finding;
use healthcheck::policy::memory::{Ours, Repairs};
use healthcheck::repair::plan::{self, Step};
use healthcheck::state_change::Cause;
use healthcheck::{Config, Severity};
use lemonade_config::Action;
use std::path::{Path, PathBuf};

const CHANNEL: &str = "/dev/nvidia-caps-imex-channels/channel0";
/// This tray's address: node #1 of the published 18-tray sample.
const TRAY_1: &str = "172.31.48.98";
/// Node #0 of the derived 4-tray samples, whose link to tray 3 is down.
const TRAY_0: &str = "172.31.48.81";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/checks/imex/fixtures")
        .join(name)
}

/// A GB200 compute tray: 4 GPUs, IMEX running as pid 3141, its address in
/// `/proc/net/fib_trie`, the channel driver in `/proc/devices`.
struct Tray {
    dir: tempfile::TempDir,
}

impl Tray {
    fn new(address: &str) -> Tray {
        let dir = tempfile::tempdir().unwrap();
        let tray = Tray { dir };
        for gpu in 0..4 {
            tray.write(&format!("/dev/nvidia{gpu}"), "");
        }
        tray.write("/proc/3141/comm", "nvidia-imex\n");
        tray.write(
            "/proc/3141/stat",
            "3141 (nvidia-imex) S 1 3141 3141 0 -1 4194560\n",
        );
        tray.write("/proc/1/comm", "systemd\n");
        tray.write("/proc/1/stat", "1 (systemd) S 0 1 1 0 -1 4194560\n");
        tray.write("/proc/sys/kernel/hostname", "gb200-r01-t02\n");
        tray.write(
            "/proc/net/fib_trie",
            &format!(
                "Main:\n  +-- 0.0.0.0/0 3 0 5\n     +-- 172.31.48.0/20 2 0 2\n        |-- {address}\n           /32 host LOCAL\n"
            ),
        );
        tray.write(
            "/proc/devices",
            "Character devices:\n195 nvidia\n234 nvidia-caps-imex-channels\n\nBlock devices:\n",
        );
        tray
    }

    fn path(&self, node_path: &str) -> PathBuf {
        self.dir.path().join(node_path.trim_start_matches('/'))
    }

    fn write(&self, node_path: &str, text: &str) {
        let p = self.path(node_path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// The channel device, as the prolog makes it; false where this test
    /// run may not make devices (no CAP_MKNOD).
    fn with_channel(&self) -> bool {
        let root = healthcheck::root::NodeRoot::new(self.dir.path());
        match imex::channel::ensure(&root, CHANNEL, false) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("cannot make a device node here ({e}): the device part is skipped");
                false
            }
        }
    }

    fn stop_daemon(&self) {
        std::fs::remove_dir_all(self.path("/proc/3141")).unwrap();
    }

    /// A fake `nvidia-imex-ctl` that prints `fixture` (or runs `body`).
    fn ctl(&self, body: &str) -> String {
        let p = self.path("/usr/bin/nvidia-imex-ctl");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }

    fn ctl_printing(&self, fixture_name: &str) -> String {
        self.ctl(&format!("cat '{}'", fixture(fixture_name).display()))
    }

    fn run(&self, ctl: String) -> Vec<Finding> {
        let mut config = Config::default();
        config.checks.imex.enabled = true;
        config.checks.imex.ctl = ctl;
        config.checks.imex.ctl_timeout_s = 0.5;
        let ctx = CheckContext::standalone(self.dir.path(), config, chrono::Utc::now());
        imex::Imex.run(&ctx).expect("the imex check runs").findings
    }
}

fn problems(findings: &[Finding]) -> Vec<(&str, &str, Severity, Action)> {
    findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity, f.action))
        .collect()
}

/// The step the remediation takes for a node these findings took out.
fn rung(findings: &[Finding]) -> Step {
    let causes = findings
        .iter()
        .filter(|f| f.severity.removes_node())
        .map(|f| Cause {
            check: f.check.clone(),
            code: f.code.clone(),
            entity: f.entity.clone(),
            action: f.action,
            pci: None,
        })
        .collect();
    let ours = Ours {
        action: "drain".into(),
        reason: "hc: IMEX".into(),
        causes,
        at: 0,
        clean_runs: 0,
    };
    plan::next_step(
        &ours,
        &Repairs::default(),
        &Config::default().remediation,
        false,
    )
}

#[test]
fn a_healthy_tray_of_an_up_domain_is_all_ok() {
    let tray = Tray::new(TRAY_1);
    if !tray.with_channel() {
        return;
    }
    let findings = tray.run(tray.ctl_printing("ctl-n-18-up.txt"));
    assert_eq!(problems(&findings), []);
    let entities: Vec<&str> = findings.iter().map(|f| f.entity.as_str()).collect();
    assert_eq!(entities, [CHANNEL, "nvidia-imex", ie::DOMAIN]);
}

#[test]
fn imex_down_drains_and_restarts_imex_without_asking_the_domain() {
    let tray = Tray::new(TRAY_1);
    tray.with_channel();
    tray.stop_daemon();
    // Were it asked, a hanging ctl would add an unknown finding.
    let findings = tray.run(tray.ctl("exec sleep 30"));
    assert!(problems(&findings).contains(&(
        "nvidia-imex",
        ie::IMEX_DOWN,
        Severity::Drain,
        Action::RestartImex
    )));
    assert!(!findings.iter().any(|f| f.code == ie::IMEX_STATUS_UNKNOWN));
    assert_eq!(rung(&findings), Step::RestartImex);
}

#[test]
fn a_disconnected_peer_drains_and_restarts_imex() {
    let tray = Tray::new(TRAY_0);
    tray.with_channel();
    let findings = tray.run(tray.ctl_printing("ctl-n-4-peer-disconnected.txt"));
    let bad: Vec<_> = problems(&findings)
        .into_iter()
        .filter(|p| p.0 != CHANNEL)
        .collect();
    assert_eq!(
        bad,
        [(
            "imex-peer3",
            ie::IMEX_PEER_DISCONNECTED,
            Severity::Drain,
            Action::RestartImex
        )]
    );
    assert_eq!(rung(&findings), Step::RestartImex);
}

#[test]
fn a_missing_channel_drains_and_restarts_imex_which_recreates_it() {
    let tray = Tray::new(TRAY_1);
    let findings = tray.run(tray.ctl_printing("ctl-n-18-up.txt"));
    assert_eq!(
        problems(&findings),
        [(
            CHANNEL,
            ie::IMEX_CHANNEL_MISSING,
            Severity::Drain,
            Action::RestartImex
        )]
    );
    assert_eq!(rung(&findings), Step::RestartImex);
    let entry = healthcheck::codes::lookup(ie::IMEX_CHANNEL_MISSING).unwrap();
    assert!(entry.rung().starts_with("restart-imex"), "{}", entry.rung());
}

#[test]
fn a_hung_ctl_is_unknown_naming_the_deadline_never_ok_never_a_drain() {
    let tray = Tray::new(TRAY_1);
    tray.with_channel();
    let started = std::time::Instant::now();
    let findings = tray.run(tray.ctl("exec sleep 30"));
    assert!(
        started.elapsed().as_secs_f64() < 5.0,
        "the ctl was not bounded"
    );
    let unknown = findings
        .iter()
        .find(|f| f.entity == ie::DOMAIN)
        .expect("a finding for the domain");
    assert_eq!(
        (unknown.code.as_str(), unknown.severity),
        (ie::IMEX_STATUS_UNKNOWN, Severity::Unknown)
    );
    assert!(
        unknown.message.contains("nvidia-imex-ctl -N"),
        "{}",
        unknown.message
    );
    assert!(unknown.message.contains("deadline"), "{}", unknown.message);
    assert!(
        !findings.iter().any(|f| f.code == ie::IMEX_PEER_DISCONNECTED
            || f.severity.removes_node() && f.entity != CHANNEL)
    );
}

#[test]
fn garbled_ctl_output_is_unknown_naming_what_is_missing() {
    let tray = Tray::new(TRAY_1);
    tray.with_channel();
    let findings = tray.run(tray.ctl("echo 'Failed to connect to IMEX daemon'; exit 1"));
    let unknown = findings
        .iter()
        .find(|f| f.code == ie::IMEX_STATUS_UNKNOWN)
        .expect("unknown");
    assert!(
        unknown.message.contains("exited with 1"),
        "{}",
        unknown.message
    );
    assert!(unknown.message.contains("Nodes:"), "{}", unknown.message);
}

#[test]
fn the_check_is_off_unless_the_node_is_in_an_nvlink_domain() {
    let config = Config::default();
    assert!(!imex::Imex.settings(&config).enabled);
    let registered = healthcheck::checks::all()
        .iter()
        .any(|c| c.name() == imex::NAME);
    assert!(registered);
}

#[test]
fn a_replayed_snapshot_reads_the_captured_ctl_output_instead_of_asking() {
    let tray = Tray::new(TRAY_0);
    tray.with_channel();
    let captured = std::fs::read_to_string(fixture("ctl-n-4-peer-disconnected.txt")).unwrap();
    tray.write(imex::gather::CTL_FILE, &captured);
    // This machine's ctl would say all is well: the capture wins.
    let findings = tray.run(tray.ctl_printing("ctl-n-18-up.txt"));
    assert!(
        findings
            .iter()
            .any(|f| f.code == ie::IMEX_PEER_DISCONNECTED && f.entity == "imex-peer3"),
        "{findings:#?}"
    );
    let ctx = CheckContext::standalone(tray.dir.path(), Config::default(), chrono::Utc::now());
    let mut config = Config::default();
    config.checks.imex.ctl = tray.ctl_printing("ctl-n-18-up.txt");
    let ctx = CheckContext {
        config: std::sync::Arc::new(config),
        ..ctx
    };
    let files = imex::Imex.snapshot_files(&ctx);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].0, Path::new(imex::gather::CTL_FILE));
    assert!(String::from_utf8_lossy(&files[0].1).contains("Domain State: UP"));
}
