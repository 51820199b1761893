//! `nvlink`: every expected link is active; replay, recovery and CRC counters
//! do not grow between runs.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::checks::counters::{self, Recent};
use crate::finding::Finding;
use lemonade_config::{Action, Config, NvlinkSettings, Severity};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const NVLINK_INACTIVE: &str = "NVLINK_INACTIVE";
pub const NVLINK_LINKS_MISSING: &str = "NVLINK_LINKS_MISSING";
pub const NVLINK_REPLAY_GROWTH: &str = "NVLINK_REPLAY_GROWTH";
pub const NVLINK_RECOVERY_GROWTH: &str = "NVLINK_RECOVERY_GROWTH";
pub const NVLINK_CRC_RATE: &str = "NVLINK_CRC_RATE";
pub const NVLINK_CRC_GROWTH: &str = "NVLINK_CRC_GROWTH";

pub const NAME: &str = "nvlink";

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

/// Counters from the previous run, per GPU (UUID) and link, and the CRC
/// growth of the recent runs (for the windowed rate).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvlinkState {
    pub gpus: BTreeMap<String, BTreeMap<u32, Counters>>,
    /// Runs that saw a link's CRC counter grow, per GPU (UUID) and link.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub crc_recent: BTreeMap<String, BTreeMap<u32, Recent>>,
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

/// Pure: readings, settings and the previous counters to findings and new counters.
pub fn evaluate(
    gpus: &[GpuData<Vec<LinkReading>>],
    s: &NvlinkSettings,
    previous: &NvlinkState,
    now: i64,
) -> (Vec<Finding>, NvlinkState) {
    let mut findings = Vec::new();
    let mut state = NvlinkState::default();
    // State of a GPU that did not answer is kept, so its next answer is compared with it.
    for gpu in gpus.iter().filter(|g| g.reading.is_err()) {
        let key = gpu.id.state_key();
        if let Some(old) = previous.gpus.get(&key) {
            state.gpus.insert(key.clone(), old.clone());
        }
        if let Some(recent) = previous.crc_recent.get(&key) {
            state.crc_recent.insert(key, recent.clone());
        }
    }
    for (id, links) in session::split(NAME, gpus, &mut findings) {
        let before = findings.len();
        let key = id.state_key();
        judge_links(id, links, s, &mut findings);
        if let Some(old) = previous.gpus.get(&key) {
            let mut recent = previous.crc_recent.get(&key).cloned().unwrap_or_default();
            judge_growth(id, links, s, old, &mut recent, now, &mut findings);
            recent.retain(|_, r| !r.is_empty());
            if !recent.is_empty() {
                state.crc_recent.insert(key.clone(), recent);
            }
        }
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
        state
            .gpus
            .insert(key, links.iter().map(|l| (l.link, l.counters)).collect());
    }
    (findings, state)
}

/// Link state: inactive links and missing links.
fn judge_links(id: &GpuId, links: &[LinkReading], s: &NvlinkSettings, out: &mut Vec<Finding>) {
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
            id.finding(NAME, NVLINK_INACTIVE, Severity::Down)
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
                id.finding(NAME, NVLINK_LINKS_MISSING, Severity::Down)
                    .expected(want)
                    .actual(active)
                    .action(Action::ResetGpu)
                    .message(format!("{gpu}: {active} active NVLinks, {want} expected")),
            );
        }
    }
}

/// Counter growth since the previous run; the CRC rate over the window in `recent`.
fn judge_growth(
    id: &GpuId,
    links: &[LinkReading],
    s: &NvlinkSettings,
    old: &BTreeMap<u32, Counters>,
    recent: &mut BTreeMap<u32, Recent>,
    now: i64,
    out: &mut Vec<Finding>,
) {
    let replay = at_least(grown(links, old, |c| c.replay), s.replay_growth_drain);
    if !replay.is_empty() {
        out.push(growth_finding(
            id,
            NVLINK_REPLAY_GROWTH,
            Severity::Drain,
            "replay",
            &replay,
        ));
    }
    let recovery = at_least(grown(links, old, |c| c.recovery), s.recovery_growth_drain);
    if !recovery.is_empty() {
        out.push(growth_finding(
            id,
            NVLINK_RECOVERY_GROWTH,
            Severity::Drain,
            "recovery",
            &recovery,
        ));
    }
    out.extend(crc(id, grown(links, old, |c| c.crc), s, recent, now));
}

/// Each link's growth of the counter `pick` since `old`. Links new since
/// the previous run only set their baseline.
fn grown(
    links: &[LinkReading],
    old: &BTreeMap<u32, Counters>,
    pick: fn(&Counters) -> u64,
) -> Vec<(u32, u64)> {
    links
        .iter()
        .filter_map(|l| {
            let was = old.get(&l.link).map(pick)?;
            Some((l.link, counters::growth(Some(was), pick(&l.counters))))
        })
        .collect()
}

/// The links that grew by `min` or more; none where `min` is 0 (off).
fn at_least(grown: Vec<(u32, u64)>, min: u64) -> Vec<(u32, u64)> {
    grown
        .into_iter()
        .filter(|(_, d)| min > 0 && *d >= min)
        .collect()
}

fn growth_finding(
    id: &GpuId,
    code: &str,
    severity: Severity,
    what: &str,
    grown: &[(u32, u64)],
) -> Finding {
    let detail = grown
        .iter()
        .map(|(l, d)| format!("link {l} +{d}"))
        .collect::<Vec<_>>()
        .join(", ");
    id.finding(NAME, code, severity)
        .expected("no growth")
        .actual(&detail)
        .action(Action::ResetGpu)
        .message(format!(
            "{}: NVLink {what} counters grew: {detail}",
            id.entity()
        ))
        .from_counter_growth()
}

/// CRC errors: a drain when a link's rate over the window is too high,
/// otherwise a warning for growth past `crc_growth_warning`.
fn crc(
    id: &GpuId,
    crc: Vec<(u32, u64)>,
    s: &NvlinkSettings,
    recent: &mut BTreeMap<u32, Recent>,
    now: i64,
) -> Option<Finding> {
    let mut fastest = 0.0_f64;
    let mut fast = Vec::new();
    for (link, d) in &crc {
        let window = recent.entry(*link).or_default();
        window.record(now, *d, s.rate_window_s);
        let rate = window.per_second(s.rate_window_s);
        if rate > s.crc_rate_drain_per_s {
            fast.push((*link, *d));
            fastest = fastest.max(rate);
        }
    }
    if !fast.is_empty() {
        return Some(
            growth_finding(id, NVLINK_CRC_RATE, Severity::Drain, "CRC", &fast)
                .expected(format!("<= {}/s", s.crc_rate_drain_per_s))
                .actual(format!("{fastest:.0}/s over {} s", s.rate_window_s))
                .message(format!(
                    "{}: NVLink CRC errors at {fastest:.0}/s over the last {} s",
                    id.entity(),
                    s.rate_window_s
                )),
        );
    }
    let slow = at_least(crc, s.crc_growth_warning);
    (!slow.is_empty()).then(|| {
        growth_finding(id, NVLINK_CRC_GROWTH, Severity::Warning, "CRC", &slow)
            .action(Action::Investigate)
    })
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
            gpus: [("GPU-0".to_string(), [(0, Counters::default())].into())].into(),
            ..Default::default()
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

    fn crc(n: u64) -> Vec<GpuData<Vec<LinkReading>>> {
        gpu(
            Counters {
                crc: n,
                ..Default::default()
            },
            true,
        )
    }

    #[test]
    fn a_small_crc_burst_one_second_after_the_previous_run_is_not_a_huge_rate() {
        let s = NvlinkSettings::default();
        let (_, timer) = evaluate(&crc(0), &s, &NvlinkState::default(), 1000);
        // The prolog, one second after the timer: 200 errors are not 200/s.
        let (prolog, _) = evaluate(&crc(200), &s, &timer, 1001);
        assert_eq!(
            (prolog[0].code.as_str(), prolog[0].severity),
            ("NVLINK_CRC_GROWTH", Severity::Warning)
        );
    }

    #[test]
    fn the_crc_rate_sums_the_growth_of_the_runs_in_the_window() {
        let s = NvlinkSettings {
            rate_window_s: 300,
            crc_rate_drain_per_s: 100.0,
            ..Default::default()
        };
        let (_, state) = evaluate(&crc(0), &s, &NvlinkState::default(), 0);
        // 20 000 and 20 000 within five minutes: 40 000 / 300 s > 100/s.
        let (first, state) = evaluate(&crc(20_000), &s, &state, 100);
        assert_eq!(first[0].code, "NVLINK_CRC_GROWTH");
        let (second, state) = evaluate(&crc(40_000), &s, &state, 200);
        assert_eq!(
            (second[0].code.as_str(), second[0].severity),
            ("NVLINK_CRC_RATE", Severity::Drain)
        );
        // Once the bursts fall out of the window, quiet links are healthy
        // and the state forgets them.
        let (later, state) = evaluate(&crc(40_000), &s, &state, 600);
        assert!(later[0].is_ok(), "{later:?}");
        assert!(state.crc_recent.is_empty());
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
