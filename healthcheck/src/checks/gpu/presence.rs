//! `gpu`: every expected GPU is there and answers; driver, VBIOS, InfoROM and
//! persistence mode are as they should be, and the driver asks for no
//! recovery action ([`super::recovery`]); a Grace superchip's C2C links are
//! active and their error counters do not grow ([`super::c2c`]).
//!
//! This check owns the verdict on access: a missing driver, a lost GPU or one
//! that needs a reset is `down` here, and only `unknown` in the other GPU checks.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::finding::Finding;
use crate::nvml_handle::InitFailure;
use lemonade_config::{Action, Config, GpuSettings, Severity};
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const GPU_DRIVER_MISSING: &str = "GPU_DRIVER_MISSING";
pub const DRIVER_VERSION_MISMATCH: &str = "DRIVER_VERSION_MISMATCH";
pub const GPU_COUNT_FAILED: &str = "GPU_COUNT_FAILED";
pub const GPU_COUNT_LOW: &str = "GPU_COUNT_LOW";
pub const GPU_COUNT_HIGH: &str = "GPU_COUNT_HIGH";
pub const GPU_MISSING: &str = "GPU_MISSING";
pub const INFOROM_CORRUPTED: &str = "INFOROM_CORRUPTED";
pub const VBIOS_MISMATCH: &str = "VBIOS_MISMATCH";
pub const PERSISTENCE_MODE_OFF: &str = "PERSISTENCE_MODE_OFF";

pub const NAME: &str = "gpu";

/// Where a snapshot keeps the NVML readings, in the fake NVML's scenario format.
pub const SNAPSHOT_PATH: &str = "/.lemonade/nvml.json";

/// The `gpu` check.
pub struct Gpu;

/// What NVML says about the node and each GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Readings {
    pub driver_version: Result<String, Failure>,
    pub gpus: Result<Vec<GpuData<Access>>, Failure>,
}

/// One GPU's identity-level readings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Access {
    pub vbios: Option<String>,
    pub persistence_mode: Option<bool>,
    /// `Some(false)` when NVML reports the InfoROM corrupted.
    pub inforom_valid: Option<bool>,
    /// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`.
    pub recovery: super::recovery::Reading,
    /// The Grace C2C links (`NVML_FI_DEV_C2C_LINK_*`).
    pub c2c: super::c2c::Reading,
}

/// What the check keeps between runs: the C2C error counters, per GPU (UUID).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuState {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub c2c: BTreeMap<String, super::c2c::Counters>,
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml) -> Readings {
    let driver_version = nvml.sys_driver_version().map_err(Failure::from);
    let gpus = session::per_gpu(nvml, |device| {
        let inforom_valid = match device.validate_info_rom().map_err(Failure::from) {
            Ok(()) => Some(true),
            Err(Failure::CorruptedInfoRom) => Some(false),
            Err(Failure::NotSupported) => None,
            Err(e) => return Err(e),
        };
        Ok(Access {
            vbios: session::optional(device.vbios_version())?,
            persistence_mode: session::optional(device.is_in_persistent_mode())?,
            inforom_valid,
            recovery: super::recovery::read(nvml, device)?,
            c2c: super::c2c::read(nvml, device)?,
        })
    });
    Readings {
        driver_version,
        gpus,
    }
}

/// The finding when NVML cannot be initialised on a node that expects GPUs.
pub fn init_finding(failure: &InitFailure) -> Finding {
    if failure.driver_gone {
        Finding::new(NAME, "node", GPU_DRIVER_MISSING, Severity::Down)
            .expected("NVIDIA driver loaded")
            .actual("NVML unavailable")
            .action(Action::Reboot)
            .message(failure.message.clone())
    } else {
        session::init_unknown(NAME, failure)
    }
}

/// Pure: readings, settings and the number of GPUs expected (`None`: `auto`
/// that could not be counted) to findings, as a first run sees them.
pub fn evaluate(
    readings: &Readings,
    settings: &GpuSettings,
    expected_count: Option<usize>,
) -> Vec<Finding> {
    evaluate_since(readings, settings, expected_count, &GpuState::default()).0
}

/// [`evaluate`] against what the previous run kept, and what to keep.
pub fn evaluate_since(
    readings: &Readings,
    settings: &GpuSettings,
    expected_count: Option<usize>,
    previous: &GpuState,
) -> (Vec<Finding>, GpuState) {
    // A run that cannot list the GPUs keeps the counters for the next.
    let mut state = previous.clone();
    let mut findings = Vec::new();
    if let (Some(want), Ok(have)) = (&settings.expected_driver_version, &readings.driver_version) {
        if want != have {
            findings.push(
                Finding::new(NAME, "node", DRIVER_VERSION_MISMATCH, Severity::Warning)
                    .expected(want)
                    .actual(have)
                    .message(format!("driver {have}, config expects {want}")),
            );
        }
    }
    let gpus = match &readings.gpus {
        Ok(gpus) => gpus,
        Err(Failure::Lost) | Err(Failure::ResetRequired) => {
            findings.push(
                Finding::new(NAME, "node", GPU_COUNT_FAILED, Severity::Down)
                    .action(Action::Reboot)
                    .message("NVML cannot count the GPUs: a GPU is lost"),
            );
            return (findings, state);
        }
        Err(e) => {
            findings.push(session::node_unknown(NAME, e));
            return (findings, state);
        }
    };
    findings.extend(count(gpus.len(), expected_count));
    findings.extend(missing_bus_ids(gpus, settings));
    findings.extend(each_gpu(gpus, settings, &mut state));
    (findings, state)
}

/// The number of GPUs NVML lists against the number expected.
fn count(count: usize, expected_count: Option<usize>) -> Option<Finding> {
    let want = expected_count.unwrap_or(count);
    if count < want {
        Some(
            Finding::new(NAME, "node", GPU_COUNT_LOW, Severity::Down)
                .expected(want)
                .actual(count)
                .action(Action::Reboot)
                .message(format!("NVML lists {count} GPUs, {want} expected")),
        )
    } else if count > want {
        Some(
            Finding::new(NAME, "node", GPU_COUNT_HIGH, Severity::Warning)
                .expected(want)
                .actual(count)
                .message(format!("NVML lists {count} GPUs, config expects {want}")),
        )
    } else {
        None
    }
}

/// The bus ids the config expects a GPU at, without one.
fn missing_bus_ids(gpus: &[GpuData<Access>], settings: &GpuSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    for want in &settings.expected_bus_ids {
        let want = session::normalize_bus_id(want);
        if !gpus.iter().any(|g| g.id.bus_id.as_deref() == Some(&want)) {
            findings.push(
                Finding::new(NAME, want.clone(), GPU_MISSING, Severity::Down)
                    .pci(want.clone())
                    .expected("a GPU at this bus id")
                    .actual("none")
                    .action(Action::Reboot)
                    .message(format!("no GPU at {want}")),
            );
        }
    }
    findings
}

/// Each GPU's own findings, ok (with its VBIOS) when it has none; the VBIOS
/// is judged against the config's or, without one, the most common. `state`
/// holds the previous run's C2C counters and gets this run's.
fn each_gpu(
    gpus: &[GpuData<Access>],
    settings: &GpuSettings,
    state: &mut GpuState,
) -> Vec<Finding> {
    let vbios_norm = settings.expected_vbios.clone().or_else(|| {
        most_common(
            gpus.iter()
                .filter_map(|g| g.reading.as_ref().ok()?.vbios.clone()),
        )
    });
    let mut findings = Vec::new();
    for gpu in gpus {
        let access = match &gpu.reading {
            Ok(a) => a,
            Err(failure) => {
                findings.push(session::access_finding(NAME, &gpu.id, failure));
                continue;
            }
        };
        let before = findings.len();
        judge(
            &gpu.id,
            access,
            settings,
            vbios_norm.as_deref(),
            &mut findings,
        );
        let mut extra: Vec<Finding> = super::recovery::evaluate(NAME, &gpu.id, &access.recovery)
            .into_iter()
            .collect();
        let key = gpu.id.state_key();
        let (c2c, kept) = super::c2c::evaluate(NAME, &gpu.id, &access.c2c, state.c2c.get(&key));
        match kept {
            Some(kept) => state.c2c.insert(key, kept),
            None => state.c2c.remove(&key),
        };
        extra.extend(c2c);
        // An unreadable reading is `unknown` beside the ok, which carries the VBIOS.
        let faulty =
            findings.len() > before || extra.iter().any(|f| f.severity != Severity::Unknown);
        if !faulty {
            // The VBIOS version travels with the ok finding: the export
            // sends it to the lemon report when it changes.
            let ok = gpu.id.ok(NAME);
            findings.push(match &access.vbios {
                Some(vbios) => ok.actual(vbios),
                None => ok,
            });
        }
        findings.extend(extra);
    }
    findings
}

fn judge(
    id: &GpuId,
    access: &Access,
    settings: &GpuSettings,
    vbios_norm: Option<&str>,
    findings: &mut Vec<Finding>,
) {
    if access.inforom_valid == Some(false) {
        findings.push(
            id.finding(NAME, INFOROM_CORRUPTED, Severity::Down)
                .expected("valid")
                .actual("corrupted")
                .action(Action::Repair)
                .message(format!("{}: InfoROM validation failed", id.entity())),
        );
    }
    if let (Some(want), Some(have)) = (vbios_norm, &access.vbios) {
        if want != have {
            findings.push(
                id.finding(NAME, VBIOS_MISMATCH, Severity::Warning)
                    .expected(want)
                    .actual(have)
                    .message(format!("{}: VBIOS {have}, expected {want}", id.entity())),
            );
        }
    }
    if settings.require_persistence_mode && access.persistence_mode == Some(false) {
        findings.push(
            id.finding(NAME, PERSISTENCE_MODE_OFF, Severity::Warning)
                .expected("enabled")
                .actual("disabled")
                .message(format!(
                    "{}: persistence mode is off (nvidia-persistenced not running?)",
                    id.entity()
                )),
        );
    }
}

/// The value most GPUs agree on; ties go to the smallest, so the result is stable.
fn most_common(values: impl Iterator<Item = String>) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    let best = counts.values().copied().max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(v, _)| v)
}

impl Check for Gpu {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "GPU count, access (lost, reset required), InfoROM, driver/VBIOS versions, persistence mode (NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.gpu;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        if !session::expects_gpus(ctx) {
            return Ok(CheckOutput::default());
        }
        let nvml = match session::nvml(ctx) {
            Ok(nvml) => nvml,
            Err(e) => return Ok(CheckOutput::findings(vec![init_finding(&e)])),
        };
        let previous: GpuState = previous_state(ctx);
        let (findings, state) = evaluate_since(
            &gather(&nvml),
            &ctx.config.checks.gpu,
            super::count::expected(&ctx.config, &ctx.root),
            &previous,
        );
        Ok(CheckOutput::with_state(findings, &state))
    }
    fn snapshot_files(&self, ctx: &CheckContext) -> Vec<(PathBuf, Vec<u8>)> {
        if !session::expects_gpus(ctx) {
            return Vec::new();
        }
        // The snapshot runs outside the engine: a wedged driver must not hang it.
        let (tx, rx) = std::sync::mpsc::channel();
        let thread_ctx = ctx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(capture(&thread_ctx));
        });
        let wait = ctx
            .config
            .checks
            .gpu
            .deadline_s
            .unwrap_or(ctx.config.engine.check_deadline_s)
            .max(0.001);
        let scenario = rx
            .recv_timeout(std::time::Duration::from_secs_f64(wait))
            .unwrap_or_else(|_| {
                // Replaying this reproduces what the node did: nothing answers.
                serde_json::json!({
                    "comment": format!("NVML did not answer within {wait} s during the snapshot"),
                    "block": "nvmlInit_v2",
                })
            });
        let bytes = serde_json::to_vec_pretty(&scenario).unwrap_or_default();
        vec![(PathBuf::from(SNAPSHOT_PATH), bytes)]
    }
}

/// The node's NVML readings as a scenario; a failed init is kept as the error
/// `nvmlInit_v2` returns, so the replay fails the same way.
fn capture(ctx: &CheckContext) -> serde_json::Value {
    match session::nvml(ctx) {
        Ok(nvml) => super::scenario::capture(&nvml, ctx.config.checks.nvlink.max_links),
        Err(e) => serde_json::json!({
            "comment": e.message,
            "error.nvmlInit_v2": if e.driver_gone { "DRIVER_NOT_LOADED" } else { "UNKNOWN" },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::gpu::recovery::{Reading, RecoveryAction};

    fn gpu(index: u32, vbios: &str) -> GpuData<Access> {
        GpuData {
            id: GpuId {
                index,
                uuid: Some(format!("GPU-{index}")),
                bus_id: Some(format!("0000:{:02x}:00.0", 0x18 + index)),
            },
            reading: Ok(Access {
                vbios: Some(vbios.into()),
                persistence_mode: Some(true),
                inforom_valid: Some(true),
                recovery: Reading::Action(RecoveryAction::None),
                c2c: Default::default(),
            }),
        }
    }

    #[test]
    fn the_odd_vbios_out_is_a_warning_when_config_names_none() {
        let readings = Readings {
            driver_version: Ok("550.90.07".into()),
            gpus: Ok(vec![gpu(0, "A"), gpu(1, "A"), gpu(2, "B")]),
        };
        let findings = evaluate(&readings, &GpuSettings::default(), Some(3));
        let bad: Vec<_> = findings.iter().filter(|f| !f.is_ok()).collect();
        assert_eq!(bad.len(), 1);
        assert_eq!(
            (bad[0].code.as_str(), bad[0].entity.as_str()),
            ("VBIOS_MISMATCH", "gpu2")
        );
    }

    #[test]
    fn a_missing_bus_id_is_named() {
        let readings = Readings {
            driver_version: Ok("550.90.07".into()),
            gpus: Ok(vec![gpu(0, "A")]),
        };
        let settings = GpuSettings {
            expected_bus_ids: vec!["00000000:18:00.0".into(), "0000:2A:00.0".into()],
            ..Default::default()
        };
        let findings = evaluate(&readings, &settings, Some(2));
        let missing: Vec<_> = findings
            .iter()
            .filter(|f| f.code == "GPU_MISSING")
            .collect();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].entity, "0000:2a:00.0");
        assert!(findings.iter().any(|f| f.code == "GPU_COUNT_LOW"));
    }
}
