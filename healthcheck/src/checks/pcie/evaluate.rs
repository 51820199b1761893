//! Judging gathered PCI functions: a pure function of data, config and state.

use super::sysfs::{Aer, Link, PciFunction, PcieData};
use super::{DEGRADED_LINK_ACTION, NAME, WIDTH_DEGRADED};
use crate::checks::counters::{growth, Recent};
use crate::finding::Finding;
use lemonade_config::{Action, PcieExpectation, PcieSettings, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const PCIE_DEVICE_MISSING: &str = "PCIE_DEVICE_MISSING";
pub const PCIE_UNREADABLE: &str = "PCIE_UNREADABLE";
pub const PCIE_LINK_DOWN: &str = "PCIE_LINK_DOWN";
pub const PCIE_SPEED_DEGRADED: &str = "PCIE_SPEED_DEGRADED";
pub const PCIE_AER_FATAL: &str = "PCIE_AER_FATAL";
pub const PCIE_AER_NONFATAL: &str = "PCIE_AER_NONFATAL";
pub const PCIE_AER_CORRECTABLE: &str = "PCIE_AER_CORRECTABLE";

/// AER totals of the previous run, per bus id, for deltas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieState {
    /// Unix seconds of the run that wrote it.
    pub at: i64,
    pub devices: BTreeMap<String, AerState>,
}

/// One function's AER totals and its recent correctable-error growth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AerState {
    pub fatal: u64,
    pub nonfatal: u64,
    pub correctable: u64,
    #[serde(default, skip_serializing_if = "Recent::is_empty")]
    pub correctable_recent: Recent,
}

/// Findings for every watched function and expectation, and the state for the next run.
pub fn evaluate(
    data: &PcieData,
    settings: &PcieSettings,
    previous: &PcieState,
    now: i64,
) -> (Vec<Finding>, PcieState) {
    let mut findings = Vec::new();
    let mut state = PcieState {
        at: now,
        devices: previous.devices.clone(),
    };

    for expectation in &settings.expect {
        let found = data
            .functions
            .iter()
            .filter(|f| matches(f, expectation))
            .count();
        findings.push(if found < expectation.count {
            Finding::new(NAME, &expectation.name, PCIE_DEVICE_MISSING, Severity::Down)
                .expected(expectation.count)
                .actual(found)
                .action(Action::Repair)
                .message(format!(
                    "{found} of {} {} devices ({}{}) on the PCI bus",
                    expectation.count,
                    expectation.name,
                    expectation.vendor,
                    expectation
                        .class
                        .as_deref()
                        .map(|c| format!(" class {c}"))
                        .unwrap_or_default()
                ))
        } else {
            Finding::ok(NAME, &expectation.name)
        });
    }

    for function in &data.functions {
        let expectation = settings.expect.iter().find(|e| matches(function, e));
        let skip_speed = settings.skip_speed.iter().any(|s| selects(s, function));
        let mut own = Vec::new();
        if let Some(link) = &function.link {
            own.extend(judge_link(function, link, expectation, skip_speed));
        }
        if let Some(aer) = &function.aer {
            let before = previous.devices.get(&function.bdf);
            let (aer_findings, aer_state) = judge_aer(function, aer, before, settings, now);
            own.extend(aer_findings);
            state.devices.insert(function.bdf.clone(), aer_state);
        }
        if own.is_empty() {
            own.push(Finding::ok(NAME, &function.bdf).pci(&function.bdf));
        }
        findings.extend(own);
    }

    for (bdf, message) in &data.unreadable {
        findings
            .push(Finding::unknown(NAME, bdf, PCIE_UNREADABLE, message.clone()).pci(bdf.clone()));
    }
    (findings, state)
}

/// True when the function is one of the expectation's devices.
fn matches(f: &PciFunction, e: &PcieExpectation) -> bool {
    f.vendor.eq_ignore_ascii_case(&e.vendor)
        && e.class
            .as_deref()
            .is_none_or(|c| f.class.starts_with(&c.to_ascii_lowercase()))
}

/// `vendor` or `vendor:class-prefix`.
fn selects(selector: &str, f: &PciFunction) -> bool {
    let (vendor, class) = selector.split_once(':').unwrap_or((selector, ""));
    f.vendor.eq_ignore_ascii_case(vendor) && f.class.starts_with(&class.to_ascii_lowercase())
}

fn judge_link(
    f: &PciFunction,
    link: &Link,
    expectation: Option<&PcieExpectation>,
    skip_speed: bool,
) -> Vec<Finding> {
    let what = expectation.map(|e| e.name.as_str()).unwrap_or("device");
    if link.current_width == 0 {
        return vec![Finding::new(NAME, &f.bdf, PCIE_LINK_DOWN, Severity::Down)
            .pci(&f.bdf)
            .expected(format!("x{}", link.max_width))
            .actual("x0")
            .action(Action::Repair)
            .message(format!("{what} {}: PCIe link is down", f.bdf))];
    }
    let mut out = Vec::new();
    // A degraded device can train to a lower maximum, so the config's expectation counts too.
    let want_width = link
        .max_width
        .max(expectation.and_then(|e| e.width).unwrap_or(0));
    if link.current_width < want_width {
        out.push(
            Finding::new(NAME, &f.bdf, WIDTH_DEGRADED, Severity::Drain)
                .pci(&f.bdf)
                .expected(format!("x{want_width}"))
                .actual(format!("x{}", link.current_width))
                .action(DEGRADED_LINK_ACTION)
                .message(format!(
                    "{what} {}: PCIe link x{} instead of x{want_width} (max reported x{})",
                    f.bdf, link.current_width, link.max_width
                )),
        );
    }
    if !skip_speed {
        let want_speed = link
            .max_speed
            .unwrap_or(0.0)
            .max(expectation.and_then(|e| e.speed_gts).unwrap_or(0.0));
        let current = link.current_speed.unwrap_or(0.0);
        if want_speed > 0.0 && current + 1e-6 < want_speed {
            out.push(
                Finding::new(NAME, &f.bdf, PCIE_SPEED_DEGRADED, Severity::Drain)
                    .pci(&f.bdf)
                    .expected(format!("{want_speed} GT/s"))
                    .actual(speed_text(link.current_speed))
                    .action(DEGRADED_LINK_ACTION)
                    .message(format!(
                        "{what} {}: PCIe link at {} instead of {want_speed} GT/s (max reported {})",
                        f.bdf,
                        speed_text(link.current_speed),
                        speed_text(link.max_speed)
                    )),
            );
        }
    }
    out
}

fn speed_text(speed: Option<f64>) -> String {
    speed
        .map(|s| format!("{s} GT/s"))
        .unwrap_or_else(|| "Unknown".to_string())
}

fn judge_aer(
    f: &PciFunction,
    aer: &Aer,
    before: Option<&AerState>,
    settings: &PcieSettings,
    now: i64,
) -> (Vec<Finding>, AerState) {
    let mut out = Vec::new();
    let mut recent = before
        .map(|b| b.correctable_recent.clone())
        .unwrap_or_default();
    if let Some(b) = before {
        for (kind, code, was, is, severity) in [
            (
                "fatal",
                PCIE_AER_FATAL,
                b.fatal,
                aer.fatal,
                settings.aer_fatal_severity,
            ),
            (
                "non-fatal",
                PCIE_AER_NONFATAL,
                b.nonfatal,
                aer.nonfatal,
                settings.aer_nonfatal_severity,
            ),
        ] {
            let grew = growth(Some(was), is);
            if grew > 0 && severity != Severity::Ok {
                let finding = Finding::new(NAME, &f.bdf, code, severity)
                    .pci(&f.bdf)
                    .expected("0 new")
                    .actual(format!("{grew} new"))
                    .message(format!(
                        "{}: {grew} new {kind} AER errors since the last run ({is} in total)",
                        f.bdf
                    ));
                // A fatal error is a fault whenever it comes; non-fatal
                // ones also come from a link training after a boot.
                out.push(if code == PCIE_AER_NONFATAL {
                    finding.from_counter_growth()
                } else {
                    finding
                });
            }
        }
        recent.record(
            now,
            growth(Some(b.correctable), aer.correctable),
            settings.rate_window_s,
        );
        let per_hour = recent.per_hour(settings.rate_window_s);
        let limit = settings.aer_correctable_per_hour;
        if limit > 0 && per_hour > limit as f64 {
            out.push(
                Finding::new(NAME, &f.bdf, PCIE_AER_CORRECTABLE, Severity::Warning)
                    .pci(&f.bdf)
                    .expected(format!("<= {limit}/h"))
                    .actual(format!("{per_hour:.0}/h"))
                    .message(format!(
                        "{}: correctable AER errors at {per_hour:.0}/h",
                        f.bdf
                    ))
                    .from_counter_growth(),
            );
        }
    }
    let state = AerState {
        fatal: aer.fatal,
        nonfatal: aer.nonfatal,
        correctable: aer.correctable,
        correctable_recent: recent,
    };
    (out, state)
}
