//! Judging gathered InfiniBand ports: a pure function of data, config and state.

use super::sysfs::{state_name, IbData, Port};
use super::NAME;
use crate::checks::counters::{growth, Recent};
use crate::finding::Finding;
use lemonade_config::{Action, CounterRate, IbSettings, Severity};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const IB_UNREADABLE: &str = "IB_UNREADABLE";
pub const IB_HCA_MISSING: &str = "IB_HCA_MISSING";
pub const IB_PORT_DOWN: &str = "IB_PORT_DOWN";
pub const IB_RATE_DEGRADED: &str = "IB_RATE_DEGRADED";
/// A counter's growth rate is `IB_<COUNTER>_RATE`, one code per counter
/// that `[checks.ib.counters]` names.
pub const IB_COUNTER_RATE_PREFIX: &str = "IB_";
pub const IB_COUNTER_RATE_SUFFIX: &str = "_RATE";

/// The code of a counter's growth-rate finding: `symbol_error` is
/// `IB_SYMBOL_ERROR_RATE`.
pub fn rate_code(counter: &str) -> String {
    format!(
        "{IB_COUNTER_RATE_PREFIX}{}{IB_COUNTER_RATE_SUFFIX}",
        counter.to_ascii_uppercase()
    )
}

/// Counter readings of the previous run, per port (`mlx5_0:1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbState {
    /// Unix seconds of the run that wrote it.
    pub at: i64,
    pub ports: BTreeMap<String, PortState>,
}

/// One port's last counter values and their recent growth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortState {
    pub last: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recent: BTreeMap<String, Recent>,
}

/// True when config leaves the port out: excluded by name, or Ethernet.
pub fn excluded(port: &Port, settings: &IbSettings) -> bool {
    excluded_by_name(&port.entity(), settings)
        || (settings.skip_ethernet && port.link_layer.eq_ignore_ascii_case("Ethernet"))
}

/// Findings for every judged port (and the HCA count), and the state for the next run.
pub fn evaluate(
    data: &IbData,
    settings: &IbSettings,
    previous: &IbState,
    now: i64,
) -> (Vec<Finding>, IbState) {
    let mut findings = Vec::new();
    let mut state = IbState {
        at: now,
        ports: BTreeMap::new(),
    };
    let judged: Vec<&Port> = data
        .ports
        .iter()
        .filter(|p| !excluded(p, settings))
        .collect();
    if let Some(expected) = settings.expected_hcas {
        findings.push(hca_count(data, &judged, settings, expected));
    }
    for port in judged {
        let entity = port.entity();
        let (own, port_state) = judge_port(port, settings, previous.ports.get(&entity), now);
        state.ports.insert(entity, port_state);
        findings.extend(own);
    }
    for (entity, message) in &data.unreadable {
        // Keep its counters, so the next readable run still sees the growth.
        if let Some(before) = previous.ports.get(entity) {
            state.ports.insert(entity.clone(), before.clone());
        }
        if !excluded_by_name(entity, settings) {
            findings.push(Finding::unknown(
                NAME,
                entity,
                IB_UNREADABLE,
                message.clone(),
            ));
        }
    }
    (findings, state)
}

/// The HCAs present against `expected_hcas`. A port we could not read is
/// still there: it is judged `unknown`, not missing.
fn hca_count(data: &IbData, judged: &[&Port], settings: &IbSettings, expected: usize) -> Finding {
    let hcas: BTreeSet<&str> = judged
        .iter()
        .map(|p| p.device.as_str())
        .chain(
            data.unreadable
                .iter()
                .filter(|(entity, _)| !excluded_by_name(entity, settings))
                .map(|(entity, _)| entity.split_once(':').map_or(entity.as_str(), |(d, _)| d)),
        )
        .collect();
    if hcas.len() >= expected {
        return Finding::ok(NAME, "hcas");
    }
    Finding::new(NAME, "hcas", IB_HCA_MISSING, Severity::Down)
        .expected(expected)
        .actual(hcas.len())
        .action(Action::Repair)
        .message(format!(
            "{} of {expected} InfiniBand HCAs present",
            hcas.len()
        ))
}

/// One port's findings (its link, then its counters' growth; ok when none),
/// each with the HCA's PCI bus id, and its state for the next run.
fn judge_port(
    port: &Port,
    settings: &IbSettings,
    before: Option<&PortState>,
    now: i64,
) -> (Vec<Finding>, PortState) {
    let entity = port.entity();
    let up = state_name(&port.state) == "ACTIVE" && state_name(&port.phys_state) == "LinkUp";
    let mut own = link(port, &entity, up, settings);
    let mut port_state = PortState {
        last: port.counters.clone(),
        recent: BTreeMap::new(),
    };
    for (name, &value) in &port.counters {
        let Some(limits) = settings.counters.get(name) else {
            continue;
        };
        let mut recent = before
            .and_then(|b| b.recent.get(name).cloned())
            .unwrap_or_default();
        let previous_value = before.and_then(|b| b.last.get(name).copied());
        recent.record(now, growth(previous_value, value), settings.rate_window_s);
        // A down port already says it all; its counters move as it flaps.
        if up {
            own.extend(counter_rate(
                &entity, name, value, &recent, limits, settings,
            ));
        }
        if !recent.is_empty() {
            port_state.recent.insert(name.clone(), recent);
        }
    }
    if own.is_empty() {
        own.push(Finding::ok(NAME, &entity));
    }
    let with_pci = |f: Finding| match &port.pci_bus_id {
        Some(id) => f.pci(id.clone()),
        None => f,
    };
    (own.into_iter().map(with_pci).collect(), port_state)
}

/// The link: down, or up at less than the expected rate.
fn link(port: &Port, entity: &str, up: bool, settings: &IbSettings) -> Vec<Finding> {
    if !up {
        return vec![Finding::new(NAME, entity, IB_PORT_DOWN, Severity::Down)
            .expected("4: ACTIVE, 5: LinkUp")
            .actual(format!("{}, {}", port.state, port.phys_state))
            .action(Action::Repair)
            .message(format!("{entity} is {} / {}", port.state, port.phys_state))];
    }
    match (settings.expected_rate_gbps, port.rate_gbps) {
        (Some(want), Some(rate)) if rate + 1e-6 < want => {
            vec![
                Finding::new(NAME, entity, IB_RATE_DEGRADED, Severity::Drain)
                    .expected(format!("{want} Gb/sec"))
                    .actual(format!("{rate} Gb/sec"))
                    .action(Action::Repair)
                    .message(format!("{entity} runs at {rate} Gb/sec instead of {want}")),
            ]
        }
        _ => Vec::new(),
    }
}

/// An error counter that grows faster than its limits within the window.
fn counter_rate(
    entity: &str,
    name: &str,
    value: u64,
    recent: &Recent,
    limits: &CounterRate,
    settings: &IbSettings,
) -> Option<Finding> {
    let per_hour = recent.per_hour(settings.rate_window_s);
    let (severity, limit) = if per_hour > limits.drain_per_hour {
        (Severity::Drain, limits.drain_per_hour)
    } else if per_hour > limits.warning_per_hour {
        (Severity::Warning, limits.warning_per_hour)
    } else {
        return None;
    };
    Some(
        Finding::new(NAME, entity, rate_code(name), severity)
            .expected(format!("<= {limit}/h"))
            .actual(format!("{per_hour:.0}/h"))
            .message(format!(
                "{entity}: {name} grew by {per_hour:.0}/h (now {value})"
            ))
            .from_counter_growth(),
    )
}

/// True when config excludes `device:port` by its name or its device's.
fn excluded_by_name(entity: &str, settings: &IbSettings) -> bool {
    let device = entity.split_once(':').map_or(entity, |(d, _)| d);
    settings.exclude.iter().any(|x| x == entity || x == device)
}
