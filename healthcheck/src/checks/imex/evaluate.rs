//! Judging IMEX: a pure function of what was gathered and the config.

use super::ctl::{DomainStatus, CONNECTED, READY};
use super::gather::{Channel, ImexData};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, ImexSettings};

pub const IMEX_DOWN: &str = "IMEX_DOWN";
pub const IMEX_PEER_DISCONNECTED: &str = "IMEX_PEER_DISCONNECTED";
pub const IMEX_CHANNEL_MISSING: &str = "IMEX_CHANNEL_MISSING";
/// `nvidia-imex-ctl -N` did not answer in time, failed, or printed what we
/// cannot read, or this node is not in the table it printed.
pub const IMEX_STATUS_UNKNOWN: &str = "IMEX_STATUS_UNKNOWN";

/// The entity of the domain-wide findings.
pub const DOMAIN: &str = "imex-domain";

/// The entity of a peer: `imex-peer3`.
pub fn peer_entity(index: usize) -> String {
    format!("imex-peer{index}")
}

pub fn evaluate(data: &ImexData, settings: &ImexSettings) -> Vec<Finding> {
    let mut findings = vec![channel(data, settings)];
    let Some(pid) = data.daemon else {
        findings.push(
            Finding::new(NAME, &settings.daemon, IMEX_DOWN, settings.severity)
                .expected("running")
                .actual("not running")
                .action(Action::RestartImex)
                .message(format!(
                    "no {} process is running: multi-node NVLink jobs cannot share memory",
                    settings.daemon
                )),
        );
        return findings;
    };
    let status = match &data.ctl {
        Some(Ok(status)) => status,
        Some(Err(why)) => {
            findings.push(Finding::ok(NAME, &settings.daemon).actual(format!("pid {pid}")));
            findings.push(Finding::unknown(NAME, DOMAIN, IMEX_STATUS_UNKNOWN, why));
            return findings;
        }
        None => return findings,
    };
    let Some(me) = status
        .nodes
        .iter()
        .find(|n| data.local.contains(&n.address))
    else {
        findings.push(Finding::ok(NAME, &settings.daemon).actual(format!("pid {pid}")));
        findings.push(Finding::unknown(
            NAME,
            DOMAIN,
            IMEX_STATUS_UNKNOWN,
            format!(
                "none of this node's addresses ({}) is among the domain's nodes; \
                 set `[checks.imex] address`",
                data.local.join(", ")
            ),
        ));
        return findings;
    };
    findings.push(daemon_state(me.state.as_str(), pid, settings));
    findings.extend(peers(status, me.index, settings));
    findings
}

fn channel(data: &ImexData, settings: &ImexSettings) -> Finding {
    let missing = |actual: &str| {
        Finding::new(
            NAME,
            &settings.channel,
            IMEX_CHANNEL_MISSING,
            settings.severity,
        )
        .expected("a character device")
        .actual(actual)
        .action(Action::RestartImex)
        .message(format!(
            "{} is {actual}: jobs cannot use multi-node NVLink (the prolog recreates it)",
            settings.channel
        ))
    };
    match data.channel {
        Channel::Present => Finding::ok(NAME, &settings.channel).actual("character device"),
        Channel::Missing => missing("missing"),
        Channel::NotADevice(what) => missing(what),
    }
}

/// Our own daemon, as the domain sees it: running is not enough, it must be READY.
fn daemon_state(state: &str, pid: u32, settings: &ImexSettings) -> Finding {
    if state == READY {
        return Finding::ok(NAME, &settings.daemon).actual(format!("pid {pid}, {READY}"));
    }
    Finding::new(NAME, &settings.daemon, IMEX_DOWN, settings.severity)
        .expected(READY)
        .actual(state)
        .action(Action::RestartImex)
        .message(format!(
            "{} (pid {pid}) runs but is {state}, not {READY}",
            settings.daemon
        ))
}

/// Each peer whose connection with us is not `C` either way. A peer whose
/// own daemon is not READY is its fault (found there): `peer_down_severity`.
fn peers(status: &DomainStatus, me: usize, settings: &ImexSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    for peer in status.nodes.iter().filter(|n| n.index != me) {
        let out = status.link(me, peer.index);
        let back = status.link(peer.index, me);
        let broken = [out, back]
            .iter()
            .any(|l| l.is_some_and(|c| c != CONNECTED));
        if !broken {
            continue;
        }
        let shown = |l: Option<&str>| l.unwrap_or("-").to_string();
        let actual = format!(
            "{} -> {}: {}, back: {}; {} is {}",
            me,
            peer.index,
            shown(out),
            shown(back),
            peer.address,
            peer.state
        );
        let (severity, action) = if peer.state == READY {
            (settings.severity, Action::RestartImex)
        } else {
            (settings.peer_down_severity, Action::None)
        };
        findings.push(
            Finding::new(
                NAME,
                peer_entity(peer.index),
                IMEX_PEER_DISCONNECTED,
                severity,
            )
            .expected(CONNECTED)
            .actual(actual)
            .action(action)
            .message(format!(
                "IMEX peer {} ({}) is not connected to this node",
                peer.index, peer.address
            )),
        );
    }
    if findings.is_empty() {
        findings.push(Finding::ok(NAME, DOMAIN).actual(format!(
            "{} nodes connected, domain {}",
            status.nodes.len(),
            status.domain_state
        )));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::super::ctl::parse;
    use super::*;
    use lemonade_config::Severity;

    fn data(fixture: &str, local: &str) -> ImexData {
        ImexData {
            daemon: Some(4242),
            channel: Channel::Present,
            ctl: Some(parse(fixture)),
            local: vec![local.to_string()],
        }
    }

    fn codes(findings: &[Finding]) -> Vec<(String, String, Severity)> {
        findings
            .iter()
            .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
            .collect()
    }

    const UP_18: &str = include_str!("fixtures/ctl-n-18-up.txt");
    const DISCONNECTED: &str = include_str!("fixtures/ctl-n-4-peer-disconnected.txt");
    const UNAVAILABLE: &str = include_str!("fixtures/ctl-n-4-peer-unavailable.txt");

    #[test]
    fn a_ready_node_connected_to_all_its_peers_is_ok() {
        let findings = evaluate(&data(UP_18, "172.31.48.98"), &ImexSettings::default());
        assert!(findings.iter().all(Finding::is_ok), "{findings:?}");
        assert!(findings
            .iter()
            .any(|f| f.actual.as_deref() == Some("18 nodes connected, domain UP")));
    }

    #[test]
    fn a_broken_link_to_a_ready_peer_drains_with_the_imex_rung() {
        let findings = evaluate(
            &data(DISCONNECTED, "172.31.48.81"),
            &ImexSettings::default(),
        );
        let bad: Vec<_> = findings.iter().filter(|f| !f.is_ok()).collect();
        assert_eq!(bad.len(), 1, "{findings:?}");
        assert_eq!(bad[0].entity, "imex-peer3");
        assert_eq!(bad[0].code, IMEX_PEER_DISCONNECTED);
        assert_eq!(bad[0].severity, Severity::Drain);
        assert_eq!(bad[0].action, Action::RestartImex);
        let actual = bad[0].actual.as_deref().unwrap();
        assert!(actual.contains("0 -> 3: D, back: D"), "{actual}");
        // Tray 1 is connected to everyone: the same table is ok there.
        let findings = evaluate(
            &data(DISCONNECTED, "172.31.48.98"),
            &ImexSettings::default(),
        );
        assert!(findings.iter().all(Finding::is_ok), "{findings:?}");
    }

    #[test]
    fn a_peer_whose_own_daemon_is_down_only_warns_here() {
        let findings = evaluate(&data(UNAVAILABLE, "172.31.48.81"), &ImexSettings::default());
        let bad: Vec<_> = findings.iter().filter(|f| !f.is_ok()).collect();
        assert_eq!(bad.len(), 1, "{findings:?}");
        assert_eq!(
            (bad[0].entity.as_str(), bad[0].severity, bad[0].action),
            ("imex-peer3", Severity::Warning, Action::None)
        );
        let actual = bad[0].actual.as_deref().unwrap();
        assert!(
            actual.contains("back: -; 172.31.49.228 is UNAVAILABLE"),
            "{actual}"
        );
    }

    #[test]
    fn our_own_daemon_not_ready_in_the_table_is_imex_down() {
        let findings = evaluate(
            &data(UNAVAILABLE, "172.31.49.228"),
            &ImexSettings::default(),
        );
        let found = codes(&findings);
        assert!(found.contains(&("nvidia-imex".into(), IMEX_DOWN.into(), Severity::Drain)));
    }

    #[test]
    fn no_daemon_is_imex_down_and_nothing_is_asked_of_the_domain() {
        let mut d = data(UP_18, "172.31.48.98");
        d.daemon = None;
        d.ctl = None;
        let found = codes(&evaluate(&d, &ImexSettings::default()));
        assert_eq!(
            found,
            [
                (
                    "/dev/nvidia-caps-imex-channels/channel0".into(),
                    "OK".into(),
                    Severity::Ok
                ),
                ("nvidia-imex".into(), IMEX_DOWN.into(), Severity::Drain),
            ]
        );
    }

    #[test]
    fn a_missing_or_fake_channel_is_channel_missing() {
        for channel in [Channel::Missing, Channel::NotADevice("a symlink")] {
            let mut d = data(UP_18, "172.31.48.98");
            d.channel = channel;
            let f = evaluate(&d, &ImexSettings::default()).remove(0);
            assert_eq!(
                (f.code.as_str(), f.severity),
                (IMEX_CHANNEL_MISSING, Severity::Drain)
            );
            assert_eq!(f.action, Action::RestartImex);
        }
    }

    #[test]
    fn a_ctl_that_failed_or_a_node_not_in_the_table_is_unknown_never_ok() {
        let mut d = data(UP_18, "10.9.9.9");
        let found = evaluate(&d, &ImexSettings::default());
        let f = found
            .iter()
            .find(|f| f.code == IMEX_STATUS_UNKNOWN)
            .unwrap();
        assert_eq!(f.severity, Severity::Unknown);
        assert!(f.message.contains("10.9.9.9"));
        d.ctl = Some(Err(
            "`nvidia-imex-ctl -N`: killed at the 3.0 s deadline".into()
        ));
        let found = evaluate(&d, &ImexSettings::default());
        let f = found
            .iter()
            .find(|f| f.code == IMEX_STATUS_UNKNOWN)
            .unwrap();
        assert!(f.message.contains("deadline"));
        assert!(!found.iter().any(|f| f.severity.removes_node()));
    }
}
