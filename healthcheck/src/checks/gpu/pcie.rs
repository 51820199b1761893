//! `gpu-pcie`: each GPU's PCIe link as the GPU sees it: generation and width
//! against the maximum, and the replay counter against a per-lane budget.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::checks::pcie::{DEGRADED_LINK_ACTION, WIDTH_DEGRADED};
use crate::finding::Finding;
use lemonade_config::{Config, GpuPcieSettings, Severity};
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const PCIE_GEN_DEGRADED: &str = "PCIE_GEN_DEGRADED";
pub const PCIE_REPLAY_GROWTH: &str = "PCIE_REPLAY_GROWTH";

pub const NAME: &str = "gpu-pcie";

/// `nvmlClocksEventReasonGpuIdle`.
pub const REASON_GPU_IDLE: u64 = 0x1;

/// The `gpu-pcie` check.
pub struct GpuPcie;

/// One GPU's link readings; `None` where NVML does not report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkReadings {
    pub generation: Option<u32>,
    pub max_generation: Option<u32>,
    pub width: Option<u32>,
    pub max_width: Option<u32>,
    pub replay: Option<u64>,
    /// The GPU is idle, and may have lowered its link generation to save power.
    pub idle: bool,
}

/// Replay counters from the previous run, per GPU (UUID).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieState {
    /// Unix seconds of the run that read them.
    pub at: i64,
    pub replay: BTreeMap<String, u64>,
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml) -> Result<Vec<GpuData<LinkReadings>>, Failure> {
    session::per_gpu(nvml, |d| {
        use session::optional as opt;
        Ok(LinkReadings {
            generation: opt(d.current_pcie_link_gen())?,
            max_generation: opt(d.max_pcie_link_gen())?,
            width: opt(d.current_pcie_link_width())?,
            max_width: opt(d.max_pcie_link_width())?,
            replay: opt(d.pcie_replay_counter())?.map(u64::from),
            idle: opt(d.current_throttle_reasons())?
                .is_some_and(|r| r.bits() & REASON_GPU_IDLE != 0),
        })
    })
}

/// Replays a link may see per minute: ceil(rate × lanes), with the rate of its generation.
pub fn replay_budget_per_minute(rates: &[f64], generation: u32, lanes: u32) -> Option<u64> {
    let rate = rates.get(generation.checked_sub(1)? as usize)?;
    Some((rate * f64::from(lanes)).ceil() as u64)
}

/// Pure: readings, settings and the previous replay counters to findings and new counters.
pub fn evaluate(
    gpus: &[GpuData<LinkReadings>],
    s: &GpuPcieSettings,
    previous: &PcieState,
    now: i64,
) -> (Vec<Finding>, PcieState) {
    let mut findings = Vec::new();
    let mut state = PcieState {
        at: now,
        replay: BTreeMap::new(),
    };
    for gpu in gpus.iter().filter(|g| g.reading.is_err()) {
        if let Some(old) = previous.replay.get(&gpu.id.state_key()) {
            state.replay.insert(gpu.id.state_key(), *old);
        }
    }
    // A run less than a minute after the last still gets a whole minute's budget.
    let minutes = ((now - previous.at) as f64 / 60.0).max(1.0);
    for (id, r) in session::split(NAME, gpus, &mut findings) {
        let before = findings.len();
        judge(
            id,
            r,
            s,
            previous.replay.get(&id.state_key()).copied(),
            minutes,
            &mut findings,
        );
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
        if let Some(replay) = r.replay {
            state.replay.insert(id.state_key(), replay);
        }
    }
    (findings, state)
}

fn judge(
    id: &GpuId,
    r: &LinkReadings,
    s: &GpuPcieSettings,
    old_replay: Option<u64>,
    minutes: f64,
    out: &mut Vec<Finding>,
) {
    let gpu = id.entity();
    if let (Some(cur), Some(max)) = (r.generation, r.max_generation) {
        if cur < max && !(r.idle && s.idle_generation_ok) {
            out.push(
                id.finding(NAME, PCIE_GEN_DEGRADED, Severity::Drain)
                    .expected(format!("Gen{max}"))
                    .actual(format!("Gen{cur}"))
                    .action(DEGRADED_LINK_ACTION)
                    .message(format!("{gpu}: PCIe link at Gen{cur}, capable of Gen{max}")),
            );
        }
    }
    if let (Some(cur), Some(max)) = (r.width, r.max_width) {
        if cur < max {
            out.push(
                id.finding(NAME, WIDTH_DEGRADED, Severity::Drain)
                    .expected(format!("x{max}"))
                    .actual(format!("x{cur}"))
                    .action(DEGRADED_LINK_ACTION)
                    .message(format!("{gpu}: PCIe link at x{cur}, capable of x{max}")),
            );
        }
    }
    let (Some(now), Some(old)) = (r.replay, old_replay) else {
        return;
    };
    let grown = if now >= old { now - old } else { now };
    let Some(per_minute) = r
        .generation
        .zip(r.width)
        .and_then(|(g, w)| replay_budget_per_minute(&s.replay_rate_per_lane, g, w))
    else {
        return;
    };
    let budget = (per_minute as f64 * minutes).ceil() as u64;
    if grown > budget {
        out.push(
            id.finding(NAME, PCIE_REPLAY_GROWTH, Severity::Warning)
                .expected(format!("<= {budget} ({per_minute}/min)"))
                .actual(grown)
                .message(format!(
                    "{gpu}: {grown} PCIe replays in {minutes:.1} min, budget {per_minute}/min"
                )),
        );
    }
}

impl Check for GpuPcie {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "GPU PCIe link generation/width vs maximum, replay-counter growth (NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.gpu_pcie;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        Ok(session::run(NAME, ctx, gather, |gpus| {
            let previous: PcieState = previous_state(ctx);
            let settings = &ctx.config.checks.gpu_pcie;
            let (findings, state) = evaluate(&gpus, settings, &previous, ctx.now.timestamp());
            CheckOutput::with_state(findings, &state)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_budget_follows_generation_and_lanes() {
        let rates = GpuPcieSettings::default().replay_rate_per_lane;
        assert_eq!(replay_budget_per_minute(&rates, 5, 16), Some(31));
        assert_eq!(replay_budget_per_minute(&rates, 1, 1), Some(1));
        assert_eq!(replay_budget_per_minute(&rates, 4, 8), Some(8));
        assert_eq!(replay_budget_per_minute(&rates, 0, 16), None);
        assert_eq!(replay_budget_per_minute(&rates, 7, 16), None);
    }

    #[test]
    fn an_idle_gpu_at_a_lower_generation_is_fine_a_narrow_link_is_not() {
        let gpus = |idle, width| {
            vec![GpuData {
                id: GpuId::default(),
                reading: Ok(LinkReadings {
                    generation: Some(1),
                    max_generation: Some(5),
                    width: Some(width),
                    max_width: Some(16),
                    replay: Some(0),
                    idle,
                }),
            }]
        };
        let s = GpuPcieSettings::default();
        let prev = PcieState::default();
        assert!(evaluate(&gpus(true, 16), &s, &prev, 0).0[0].is_ok());
        assert_eq!(
            evaluate(&gpus(false, 16), &s, &prev, 0).0[0].code,
            "PCIE_GEN_DEGRADED"
        );
        assert_eq!(
            evaluate(&gpus(true, 8), &s, &prev, 0).0[0].code,
            "PCIE_WIDTH_DEGRADED"
        );
    }

    #[test]
    fn a_narrow_link_has_one_code_and_one_action_in_both_checks() {
        use crate::checks::pcie::{self as sysfs_pcie, Link, PciFunction, PcieData};
        use lemonade_config::PcieSettings;
        let sysfs = PcieData {
            functions: vec![PciFunction {
                bdf: "0000:18:00.0".into(),
                vendor: "0x10de".into(),
                device: "0x2330".into(),
                class: "0x030200".into(),
                link: Some(Link {
                    current_speed: Some(32.0),
                    max_speed: Some(32.0),
                    current_width: 8,
                    max_width: 16,
                }),
                aer: None,
            }],
            unreadable: Vec::new(),
        };
        let (seen_by_sysfs, _) = sysfs_pcie::evaluate(
            &sysfs,
            &PcieSettings::default(),
            &sysfs_pcie::PcieState::default(),
            0,
        );
        let nvml = vec![GpuData {
            id: GpuId::default(),
            reading: Ok(LinkReadings {
                generation: Some(5),
                max_generation: Some(5),
                width: Some(8),
                max_width: Some(16),
                replay: None,
                idle: false,
            }),
        }];
        let (seen_by_nvml, _) =
            evaluate(&nvml, &GpuPcieSettings::default(), &PcieState::default(), 0);
        let meaning = |f: &[crate::finding::Finding]| {
            let f = f
                .iter()
                .find(|f| f.code == WIDTH_DEGRADED)
                .expect("the fault");
            (f.severity, f.action)
        };
        assert_eq!(meaning(&seen_by_sysfs), meaning(&seen_by_nvml));
        assert_eq!(meaning(&seen_by_nvml).1, DEGRADED_LINK_ACTION);
    }
}
