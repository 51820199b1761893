//! `clocks`: clock-event (throttle) reasons and GPU temperature. One slow GPU
//! slows a whole job, so throttling that lasts several runs drains the node.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    BACKGROUND_PROFILES,
};
use crate::finding::Finding;
use lemonade_config::{Action, ClocksSettings, Config, Severity};
use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const CLOCKS_THROTTLED_SUSTAINED: &str = "CLOCKS_THROTTLED_SUSTAINED";
pub const CLOCKS_THROTTLED: &str = "CLOCKS_THROTTLED";
pub const GPU_TEMPERATURE_HIGH: &str = "GPU_TEMPERATURE_HIGH";

pub const NAME: &str = "clocks";

/// The clock-event reason bits of nvml.h, by the names config uses. Idle and
/// application-clock reasons are not listed: they are never a fault.
pub const REASONS: &[(&str, u64)] = &[
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal", 0x20),
    ("hw_thermal", 0x40),
    ("hw_power_brake", 0x80),
];

/// The `clocks` check.
pub struct Clocks;

/// One GPU's readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockReadings {
    /// The raw reason bitmask.
    pub reasons: Option<u64>,
    /// Degrees Celsius.
    pub temperature: Option<u32>,
    /// The GPU's own thresholds (°C), where NVML reports them.
    pub thresholds: Thresholds,
}

/// The temperatures at which the GPU slows itself down and shuts itself off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Thresholds {
    pub slowdown: Option<u32>,
    pub shutdown: Option<u32>,
}

/// Consecutive runs each GPU (UUID) was throttled for a warned reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClocksState {
    pub streaks: BTreeMap<String, u32>,
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml) -> Result<Vec<GpuData<ClockReadings>>, Failure> {
    session::per_gpu(nvml, |d| {
        Ok(ClockReadings {
            reasons: session::optional(d.current_throttle_reasons())?.map(|r| r.bits()),
            temperature: session::optional(d.temperature(TemperatureSensor::Gpu))?,
            thresholds: Thresholds {
                slowdown: session::optional(
                    d.temperature_threshold(TemperatureThreshold::Slowdown),
                )?,
                shutdown: session::optional(
                    d.temperature_threshold(TemperatureThreshold::Shutdown),
                )?,
            },
        })
    })
}

/// The names of the warned reasons set in `bits`.
pub fn warned_reasons(bits: u64, warn: &[String]) -> Vec<&'static str> {
    REASONS
        .iter()
        .filter(|(name, bit)| bits & bit != 0 && warn.iter().any(|w| w == name))
        .map(|(name, _)| *name)
        .collect()
}

/// Pure: readings, settings and the previous streaks to findings and new streaks.
pub fn evaluate(
    gpus: &[GpuData<ClockReadings>],
    s: &ClocksSettings,
    previous: &ClocksState,
) -> (Vec<Finding>, ClocksState) {
    let mut findings = Vec::new();
    let mut state = ClocksState::default();
    for (id, r) in session::split(NAME, gpus, &mut findings) {
        let before = findings.len();
        let reasons = warned_reasons(r.reasons.unwrap_or(0), &s.warn_reasons);
        if !reasons.is_empty() {
            let streak = previous.streaks.get(&id.state_key()).copied().unwrap_or(0) + 1;
            state.streaks.insert(id.state_key(), streak);
            findings.push(throttled(id, &reasons, streak, s));
        }
        if let Some(t) = r.temperature {
            temperature(id, t, r.thresholds, s, &mut findings);
        }
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
    }
    (findings, state)
}

fn throttled(id: &GpuId, reasons: &[&str], streak: u32, s: &ClocksSettings) -> Finding {
    let gpu = id.entity();
    let list = reasons.join(", ");
    if s.sustained_runs > 0 && streak >= s.sustained_runs {
        id.finding(NAME, CLOCKS_THROTTLED_SUSTAINED, Severity::Drain)
            .expected("no hardware slowdown")
            .actual(&list)
            .action(Action::Investigate)
            .message(format!(
                "{gpu}: clocks held down ({list}) for {streak} runs in a row"
            ))
    } else {
        id.finding(NAME, CLOCKS_THROTTLED, Severity::Warning)
            .expected("no hardware slowdown")
            .actual(&list)
            .message(format!("{gpu}: clocks held down ({list})"))
    }
}

/// The limits a temperature is judged against: the GPU's own slowdown
/// threshold where NVML reports it (a GPU model's slowdown point can be well
/// below the fixed limits), else the configured ones. Each names what it is.
fn temperature_limits(th: Thresholds, s: &ClocksSettings) -> [(Severity, u32, String); 2] {
    let m = s.temperature_margin_c;
    let shutdown = th
        .shutdown
        .map(|off| format!(", shutdown {off} C"))
        .unwrap_or_default();
    match th.slowdown {
        Some(slow) => [
            (
                Severity::Drain,
                slow,
                format!("its slowdown threshold {slow} C{shutdown}"),
            ),
            (
                Severity::Warning,
                slow.saturating_sub(m),
                format!("{m} C below its slowdown threshold {slow} C{shutdown}"),
            ),
        ],
        None => [
            (
                Severity::Drain,
                s.temperature_drain_c,
                format!("{} C", s.temperature_drain_c),
            ),
            (
                Severity::Warning,
                s.temperature_warning_c,
                format!("{} C", s.temperature_warning_c),
            ),
        ],
    }
}

fn temperature(id: &GpuId, t: u32, th: Thresholds, s: &ClocksSettings, out: &mut Vec<Finding>) {
    let limits = temperature_limits(th, s);
    let Some((severity, limit, what)) = limits.into_iter().find(|(_, limit, _)| t >= *limit) else {
        return;
    };
    out.push(
        id.finding(NAME, GPU_TEMPERATURE_HIGH, severity)
            .expected(format!("< {limit} C"))
            .actual(format!("{t} C"))
            .action(Action::Investigate)
            .message(format!("{}: {t} C, at or above {what}", id.entity())),
    );
}

impl Check for Clocks {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "GPU clock-event (throttle) reasons, sustained throttling, temperature (NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.clocks;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        Ok(session::run(NAME, ctx, gather, |gpus| {
            let previous: ClocksState = previous_state(ctx);
            let (findings, state) = evaluate(&gpus, &ctx.config.checks.clocks, &previous);
            CheckOutput::with_state(findings, &state)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(reasons: u64) -> Vec<GpuData<ClockReadings>> {
        vec![GpuData {
            id: GpuId {
                uuid: Some("GPU-0".into()),
                ..Default::default()
            },
            reading: Ok(ClockReadings {
                reasons: Some(reasons),
                temperature: Some(40),
                thresholds: Thresholds::default(),
            }),
        }]
    }

    #[test]
    fn throttling_escalates_after_the_configured_runs_and_resets_when_it_stops() {
        let s = ClocksSettings::default();
        let mut state = ClocksState::default();
        let mut codes = Vec::new();
        for _ in 0..3 {
            let (f, next) = evaluate(&gpu(0x8), &s, &state);
            codes.push(f[0].code.clone());
            state = next;
        }
        assert_eq!(
            codes,
            [
                "CLOCKS_THROTTLED",
                "CLOCKS_THROTTLED",
                "CLOCKS_THROTTLED_SUSTAINED"
            ]
        );
        let (f, state) = evaluate(&gpu(0x1 | 0x2 | 0x4 | 0x10), &s, &state);
        assert!(
            f[0].is_ok(),
            "idle, application clocks and power cap are not faults"
        );
        assert!(state.streaks.is_empty());
    }

    fn hot(t: u32, slowdown: Option<u32>, shutdown: Option<u32>) -> Option<(String, Severity)> {
        let mut g = gpu(0);
        let r = g[0].reading.as_mut().unwrap();
        r.temperature = Some(t);
        r.thresholds = Thresholds { slowdown, shutdown };
        let (f, _) = evaluate(&g, &ClocksSettings::default(), &ClocksState::default());
        (!f[0].is_ok()).then(|| (f[0].code.clone(), f[0].severity))
    }

    #[test]
    fn temperature_is_judged_against_the_gpus_own_slowdown_threshold() {
        let high = |s| Some(("GPU_TEMPERATURE_HIGH".to_string(), s));
        // A GPU that slows down at 80 C: 82 C is under the fixed 85 C but over its own.
        assert_eq!(hot(82, Some(80), Some(90)), high(Severity::Drain));
        assert_eq!(hot(76, Some(80), Some(90)), high(Severity::Warning));
        assert_eq!(hot(74, Some(80), Some(90)), None);
        // H100 SXM: slowdown 89 C, shutdown 92 C.
        assert_eq!(hot(86, Some(89), Some(92)), high(Severity::Warning));
        assert_eq!(hot(88, Some(89), Some(92)), high(Severity::Warning));
        assert_eq!(hot(89, Some(89), Some(92)), high(Severity::Drain));
    }

    #[test]
    fn a_gpu_without_thresholds_keeps_the_fixed_limits() {
        let high = |s| Some(("GPU_TEMPERATURE_HIGH".to_string(), s));
        assert_eq!(hot(84, None, None), None);
        assert_eq!(hot(85, None, None), high(Severity::Warning));
        assert_eq!(hot(92, None, Some(95)), high(Severity::Drain));
    }

    #[test]
    fn software_thermal_slowdown_warns_by_default() {
        let (f, _) = evaluate(
            &gpu(0x20),
            &ClocksSettings::default(),
            &ClocksState::default(),
        );
        assert_eq!(f[0].code, "CLOCKS_THROTTLED");
        assert_eq!(f[0].actual.as_deref(), Some("sw_thermal"));
    }
}
