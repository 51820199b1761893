//! Settings of the GPU checks (NVML): `[checks.gpu]`, `[checks.ecc]`, `[checks.nvlink]`,
//! `[checks.gpu_pcie]`, `[checks.clocks]`, `[checks.gpu_procs]`.
//!
//! Every GPU check is skipped quietly when `[checks.gpu] expected_count` is 0
//! (or `auto`, the default, and the PCI bus has no NVIDIA GPU), so a CPU-only
//! node needs no GPU setting at all.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The loader's name of the NVML library, searched on the normal library path.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// `[checks.gpu]`: presence and access; also where NVML is loaded from.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GpuSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// GPUs the node must have: a number (0: the node has none, GPU checks
    /// are skipped), or `auto`: as many as the PCI bus has NVIDIA display
    /// and 3D-controller functions, which NVML must then all see.
    pub expected_count: GpuCount,
    /// The NVML library every GPU check loads: a bare name is searched by the
    /// loader (`LD_LIBRARY_PATH`, ld.so.cache), a path is loaded as is.
    pub library_path: PathBuf,
    /// PCI bus ids (`0000:18:00.0`) the node's GPUs sit at; a missing one is
    /// named in the finding. Empty: only the count is checked.
    pub expected_bus_ids: Vec<String>,
    /// Driver version every node should run (`550.90.07`); a mismatch is `warning`.
    pub expected_driver_version: Option<String>,
    /// VBIOS version every GPU should have; unset: GPUs are compared with the
    /// node's most common VBIOS, and the odd ones out are `warning`.
    pub expected_vbios: Option<String>,
    /// Persistence mode off is `warning`.
    pub require_persistence_mode: bool,
}

impl Default for GpuSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            expected_count: GpuCount::Auto,
            library_path: PathBuf::from(DEFAULT_NVML_LIBRARY),
            expected_bus_ids: Vec::new(),
            expected_driver_version: None,
            expected_vbios: None,
            require_persistence_mode: true,
        }
    }
}

/// `[checks.gpu] expected_count`: a number, or `auto`.
///
/// `auto` is the default so that a GPU node without a config is checked as
/// one: a default of 0 would skip every GPU check and read as healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuCount {
    /// Count the NVIDIA GPUs on the PCI bus (sysfs) at each run.
    #[default]
    Auto,
    Exactly(usize),
}

impl GpuCount {
    /// The number, when it is one.
    pub fn exactly(self) -> Option<usize> {
        match self {
            GpuCount::Auto => None,
            GpuCount::Exactly(n) => Some(n),
        }
    }
}

impl std::fmt::Display for GpuCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuCount::Auto => f.write_str("auto"),
            GpuCount::Exactly(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for GpuCount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            GpuCount::Auto => s.serialize_str("auto"),
            GpuCount::Exactly(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for GpuCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(usize),
            Word(String),
        }
        match Written::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a number of GPUs or \"auto\""))?
        {
            Written::Number(n) => Ok(GpuCount::Exactly(n)),
            Written::Word(w) if w == "auto" => Ok(GpuCount::Auto),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "expected a number of GPUs or \"auto\", not \"{w}\""
            ))),
        }
    }
}

/// `[checks.ecc]`: ECC counters, retired pages, remapped rows.
///
/// The verdict comes from the counters that mean "now" (volatile errors, a
/// pending remap or retirement, aggregate growth since the last run); the
/// aggregate (InfoROM, lifetime) counts are history, judged only against a
/// limit the site sets. A remapped row keeps the aggregate count non-zero
/// for the GPU's whole life on a healthy GPU.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct EccSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Site limit on the aggregate (lifetime) uncorrected count: above it a
    /// GPU is `drain` for repair. Unset (the default): history only.
    pub aggregate_uncorrected_max: Option<u64>,
    /// Volatile (since driver load) corrected errors above this are `warning`.
    pub volatile_corrected_max: u64,
    /// Site limit on aggregate corrected errors (`warning` above). Unset: history only.
    pub aggregate_corrected_max: Option<u64>,
    /// Retired pages (both causes, pre-A100 GPUs) at or above this are
    /// `drain` for repair: the retirement table is nearly full (NVIDIA's RMA
    /// limit is 64 pages).
    pub retired_pages_max: u64,
    /// Site limit on remapped rows (corrected + uncorrected, lifetime):
    /// `warning` above. Unset: history only; a failed remap is the fault.
    pub remapped_rows_max: Option<u64>,
}

impl Default for EccSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            aggregate_uncorrected_max: None,
            volatile_corrected_max: 1000,
            aggregate_corrected_max: None,
            retired_pages_max: 63,
            remapped_rows_max: None,
        }
    }
}

/// `[checks.nvlink]`: link state and error-counter growth between runs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NvlinkSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Links probed per GPU (NVML's maximum is 18); links the GPU does not
    /// have answer "not supported" and are skipped.
    pub max_links: u32,
    /// Links inactive by design, per GPU (`gpu3 = [16, 17]`) or for all (`all = [17]`).
    pub inactive_links: BTreeMap<String, Vec<u32>>,
    /// Fewer active links than this on a GPU is `down`, even if NVML no longer
    /// lists the missing links. Unset: not checked.
    pub expected_active_links: Option<u32>,
    /// Replay-counter growth per link between runs at or above this is `drain`; 0 disables.
    pub replay_growth_drain: u64,
    /// Recovery-counter growth per link between runs at or above this is `drain`; 0 disables.
    pub recovery_growth_drain: u64,
    /// CRC errors (flit + data) per second per link, averaged over
    /// `rate_window_s`, above this are `drain`.
    pub crc_rate_drain_per_s: f64,
    /// The window the CRC rate is summed over, as for PCIe AER and InfiniBand:
    /// a burst seen one second after the previous run (a prolog right after the
    /// timer) is spread over the window, not over that one second. Five
    /// minutes, the timer's period, so that the per-second limit keeps its meaning.
    pub rate_window_s: u64,
    /// CRC growth per link between runs at or above this (and under the rate) is `warning`; 0 disables.
    pub crc_growth_warning: u64,
}

impl Default for NvlinkSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            max_links: 18,
            inactive_links: BTreeMap::new(),
            expected_active_links: None,
            replay_growth_drain: 1,
            recovery_growth_drain: 1,
            crc_rate_drain_per_s: 100.0,
            rate_window_s: 300,
            crc_growth_warning: 1,
        }
    }
}

/// `[checks.gpu_pcie]`: the GPUs' own view of their PCIe link.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GpuPcieSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Replay budget per lane per minute for Gen1..Gen6; the budget of a link is
    /// ceil(rate × lanes) per minute, and growth above it is `warning`.
    pub replay_rate_per_lane: Vec<f64>,
    /// An idle GPU lowers its link generation to save power: do not judge the
    /// generation while NVML reports the GPU idle.
    pub idle_generation_ok: bool,
}

impl Default for GpuPcieSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            replay_rate_per_lane: vec![0.15, 0.3, 0.48, 0.96, 1.92, 3.84],
            idle_generation_ok: true,
        }
    }
}

/// `[checks.clocks]`: clock-event (throttle) reasons and temperature.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClocksSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Reasons that are `warning`: `hw_slowdown`, `hw_thermal`, `hw_power_brake`,
    /// `sw_thermal`, `sw_power_cap`, `sync_boost`.
    pub warn_reasons: Vec<String>,
    /// Consecutive runs with a warned reason that make it `drain`; 0 disables.
    pub sustained_runs: u32,
    /// GPU temperature (°C) at or above this is `warning`, on a GPU whose
    /// NVML reports no slowdown threshold.
    pub temperature_warning_c: u32,
    /// GPU temperature (°C) at or above this is `drain`, on a GPU whose NVML
    /// reports no slowdown threshold.
    pub temperature_drain_c: u32,
    /// Where NVML reports the GPU's own slowdown threshold: this many degrees
    /// below it is `warning`, at it `drain`.
    pub temperature_margin_c: u32,
}

impl Default for ClocksSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            warn_reasons: vec![
                "hw_slowdown".into(),
                "hw_thermal".into(),
                "hw_power_brake".into(),
                "sw_thermal".into(),
            ],
            sustained_runs: 3,
            temperature_warning_c: 85,
            temperature_drain_c: 92,
            temperature_margin_c: 5,
        }
    }
}

/// `[checks.gpu_procs]`: what a job left behind on its GPUs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GpuProcsSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Memory used on a job's GPU above this (MiB) is `drain`: leaked
    /// allocations or a zombie context.
    pub memory_used_max_mib: u64,
}

impl Default for GpuProcsSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            memory_used_max_mib: 1024,
        }
    }
}
