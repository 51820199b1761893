//! `nvlink`: every expected link is active; replay, recovery and CRC counters
//! do not grow between runs.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::finding::Finding;
use lemonade_config::{Action, Config, NvlinkSettings, Severity};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const NAME: &str = "nvlink";

/// The `nvlink` check.
pub struct Nvlink;

/// One link of one GPU. Links the GPU does not have are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkReading {
    pub link: u32,
    pub active: bool,
    pub counters: Counters,
}

/// The error counters of a link; a counter the link does not report is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    pub replay: u64,
    pub recovery: u64,
    /// CRC errors, flit and data together.
    pub crc: u64,
}

/// Counters from the previous run, per GPU (UUID) and link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvlinkState {
    /// Unix seconds of the run that read them.
    pub at: i64,
    pub gpus: BTreeMap<String, BTreeMap<u32, Counters>>,
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml, max_links: u32) -> Result<Vec<GpuData<Vec<LinkReading>>>, Failure> {
    session::per_gpu(nvml, |device| {
        let mut links = Vec::new();
        for link in 0..max_links {
            let wrapper = device.link_wrapper_for(link);
            let active = match wrapper.is_active() {
                Ok(a) => a,
                // NVML's answer for a link number this GPU does not have.
                Err(NvmlError::NotSupported) | Err(NvmlError::InvalidArg) => continue,
                Err(e) => return Err(e.into()),
            };
            let read = |counter| match wrapper.error_counter(counter) {
                Ok(n) => Ok(n),
                Err(NvmlError::NotSupported) | Err(NvmlError::InvalidArg) => Ok(0),
                Err(e) => Err(Failure::from(e)),
            };
            let counters = Counters {
                replay: read(ErrorCounter::DlReplay)?,
                recovery: read(ErrorCounter::DlRecovery)?,
                crc: read(ErrorCounter::DlCrcFlit)? + read(ErrorCounter::DlCrcData)?,
            };
            links.push(LinkReading {
                link,
                active,
                counters,
            });
        }
        Ok(links)
    })
}

/// Growth of a counter since the previous run; a counter that went down was
/// reset (driver reload, GPU reset), so all of it is new.
pub fn growth(previous: Option<u64>, now: u64) -> Option<u64> {
    previous.map(|p| if now >= p { now - p } else { now })
}

/// Pure: readings, settings and the previous counters to findings and new counters.
pub fn evaluate(
    gpus: &[GpuData<Vec<LinkReading>>],
    s: &NvlinkSettings,
    previous: &NvlinkState,
    now: i64,
) -> (Vec<Finding>, NvlinkState) {
    let mut findings = Vec::new();
    let mut state = NvlinkState {
        at: now,
        gpus: BTreeMap::new(),
    };
    // Counters of a GPU that did not answer are kept, so its next answer is compared with them.
    for gpu in gpus.iter().filter(|g| g.reading.is_err()) {
        if let Some(old) = previous.gpus.get(&gpu.id.state_key()) {
            state.gpus.insert(gpu.id.state_key(), old.clone());
        }
    }
    let elapsed_s = (now - previous.at).max(1) as f64;
    for (id, links) in session::split(NAME, gpus, &mut findings) {
        let before = findings.len();
        let old = previous.gpus.get(&id.state_key());
        judge(id, links, s, old, elapsed_s, &mut findings);
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
        state.gpus.insert(
            id.state_key(),
            links.iter().map(|l| (l.link, l.counters)).collect(),
        );
    }
    (findings, state)
}

fn judge(
    id: &GpuId,
    links: &[LinkReading],
    s: &NvlinkSettings,
    old: Option<&BTreeMap<u32, Counters>>,
    elapsed_s: f64,
    out: &mut Vec<Finding>,
) {
    let gpu = id.entity();
    let masked: Vec<u32> = ["all", gpu.as_str()]
        .iter()
        .filter_map(|k| s.inactive_links.get(*k))
        .flatten()
        .copied()
        .collect();
    let inactive: Vec<u32> = links
        .iter()
        .filter(|l| !l.active && !masked.contains(&l.link))
        .map(|l| l.link)
        .collect();
    if !inactive.is_empty() {
        out.push(
            id.finding(NAME, "NVLINK_INACTIVE", Severity::Down)
                .expected("active")
                .actual(format!("inactive: links {}", list(&inactive)))
                .action(Action::ResetGpu)
                .message(format!("{gpu}: NVLink {} inactive", list(&inactive))),
        );
    }
    if let Some(want) = s.expected_active_links {
        let active = links.iter().filter(|l| l.active).count() as u32;
        if active < want {
            out.push(
                id.finding(NAME, "NVLINK_LINKS_MISSING", Severity::Down)
                    .expected(want)
                    .actual(active)
                    .action(Action::ResetGpu)
                    .message(format!("{gpu}: {active} active NVLinks, {want} expected")),
            );
        }
    }
    let Some(old) = old else { return };
    let grown = |pick: fn(&Counters) -> u64, min: u64| -> Vec<(u32, u64)> {
        links
            .iter()
            .filter_map(|l| {
                let d = growth(old.get(&l.link).map(pick), pick(&l.counters))?;
                (min > 0 && d >= min).then_some((l.link, d))
            })
            .collect()
    };
    let growth_finding = |code: &str, severity, what: &str, grown: &[(u32, u64)]| {
        let detail = grown
            .iter()
            .map(|(l, d)| format!("link {l} +{d}"))
            .collect::<Vec<_>>()
            .join(", ");
        id.finding(NAME, code, severity)
            .expected("no growth")
            .actual(&detail)
            .action(Action::ResetGpu)
            .message(format!("{gpu}: NVLink {what} counters grew: {detail}"))
    };
    let replay = grown(|c| c.replay, s.replay_growth_drain);
    if !replay.is_empty() {
        out.push(growth_finding(
            "NVLINK_REPLAY_GROWTH",
            Severity::Drain,
            "replay",
            &replay,
        ));
    }
    let recovery = grown(|c| c.recovery, s.recovery_growth_drain);
    if !recovery.is_empty() {
        out.push(growth_finding(
            "NVLINK_RECOVERY_GROWTH",
            Severity::Drain,
            "recovery",
            &recovery,
        ));
    }
    let crc = grown(|c| c.crc, 1);
    let fast: Vec<(u32, u64)> = crc
        .iter()
        .copied()
        .filter(|(_, d)| *d as f64 / elapsed_s > s.crc_rate_drain_per_s)
        .collect();
    if !fast.is_empty() {
        let rate = fast.iter().map(|(_, d)| *d).max().unwrap_or(0) as f64 / elapsed_s;
        out.push(
            growth_finding("NVLINK_CRC_RATE", Severity::Drain, "CRC", &fast)
                .expected(format!("<= {}/s", s.crc_rate_drain_per_s))
                .message(format!("{gpu}: NVLink CRC errors at {rate:.0}/s")),
        );
    } else {
        let slow: Vec<(u32, u64)> = crc
            .into_iter()
            .filter(|(_, d)| s.crc_growth_warning > 0 && *d >= s.crc_growth_warning)
            .collect();
        if !slow.is_empty() {
            out.push(
                growth_finding("NVLINK_CRC_GROWTH", Severity::Warning, "CRC", &slow)
                    .action(Action::Investigate),
            );
        }
    }
}

fn list(links: &[u32]) -> String {
    links
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Check for Nvlink {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "NVLink state, replay/recovery/CRC counter growth between runs (NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.nvlink;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let s = &ctx.config.checks.nvlink;
        let gather = |nvml: &Nvml| gather(nvml, s.max_links);
        Ok(session::run(NAME, ctx, gather, |gpus| {
            let previous: NvlinkState = previous_state(ctx);
            let (findings, state) = evaluate(&gpus, s, &previous, ctx.now.timestamp());
            CheckOutput::with_state(findings, &state)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(counters: Counters, active: bool) -> Vec<GpuData<Vec<LinkReading>>> {
        vec![GpuData {
            id: GpuId {
                index: 0,
                uuid: Some("GPU-0".into()),
                bus_id: None,
            },
            reading: Ok(vec![LinkReading {
                link: 0,
                active,
                counters,
            }]),
        }]
    }

    #[test]
    fn counters_are_judged_as_growth_since_the_previous_run() {
        let s = NvlinkSettings::default();
        let (first, state) = evaluate(
            &gpu(
                Counters {
                    replay: 5,
                    ..Default::default()
                },
                true,
            ),
            &s,
            &NvlinkState::default(),
            1000,
        );
        assert!(first[0].is_ok(), "the first run only sets the baseline");
        let (same, state) = evaluate(
            &gpu(
                Counters {
                    replay: 5,
                    ..Default::default()
                },
                true,
            ),
            &s,
            &state,
            1300,
        );
        assert!(same[0].is_ok());
        let (grew, _) = evaluate(
            &gpu(
                Counters {
                    replay: 7,
                    ..Default::default()
                },
                true,
            ),
            &s,
            &state,
            1600,
        );
        assert_eq!(grew[0].code, "NVLINK_REPLAY_GROWTH");
        assert_eq!(grew[0].severity, Severity::Drain);
    }

    #[test]
    fn crc_growth_is_a_warning_below_the_rate_and_a_drain_above() {
        let s = NvlinkSettings::default();
        let base = NvlinkState {
            at: 1000,
            gpus: [("GPU-0".to_string(), [(0, Counters::default())].into())].into(),
        };
        let slow = evaluate(
            &gpu(
                Counters {
                    crc: 50,
                    ..Default::default()
                },
                true,
            ),
            &s,
            &base,
            1300,
        )
        .0;
        assert_eq!(
            (slow[0].code.as_str(), slow[0].severity),
            ("NVLINK_CRC_GROWTH", Severity::Warning)
        );
        let fast = evaluate(
            &gpu(
                Counters {
                    crc: 40_000,
                    ..Default::default()
                },
                true,
            ),
            &s,
            &base,
            1300,
        )
        .0;
        assert_eq!(
            (fast[0].code.as_str(), fast[0].severity),
            ("NVLINK_CRC_RATE", Severity::Drain)
        );
    }

    #[test]
    fn a_link_inactive_by_design_is_not_a_fault() {
        let mut s = NvlinkSettings::default();
        assert_eq!(
            evaluate(
                &gpu(Counters::default(), false),
                &s,
                &NvlinkState::default(),
                1
            )
            .0[0]
                .code,
            "NVLINK_INACTIVE"
        );
        s.inactive_links.insert("gpu0".into(), vec![0]);
        assert!(evaluate(
            &gpu(Counters::default(), false),
            &s,
            &NvlinkState::default(),
            1
        )
        .0[0]
            .is_ok());
    }
}
