//! Writes what NVML says in the fake NVML's scenario format
//! (`tests/fake-nvml/README.md`), so that a snapshot of a real node can be
//! replayed with the fake library.
//!
//! A key NVML does not support is left out (the fake answers "not supported"
//! for absent keys); a call that fails otherwise is kept as `error.<function>`.

use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, MemoryLocation, RetirementCause, TemperatureSensor,
    TemperatureThreshold,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use serde_json::{json, Map, Value};

const MIB: u64 = 1 << 20;

/// All readings of the GPU checks, as a scenario.
pub fn capture(nvml: &Nvml, max_links: u32) -> Value {
    let mut top = Map::new();
    put(
        &mut top,
        "driver_version",
        "nvmlSystemGetDriverVersion",
        nvml.sys_driver_version(),
    );
    put(
        &mut top,
        "cuda_driver_version",
        "nvmlSystemGetCudaDriverVersion_v2",
        nvml.sys_cuda_driver_version(),
    );
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => {
            put::<u32>(&mut top, "gpu_count", "nvmlDeviceGetCount_v2", Err(e));
            return Value::Object(top);
        }
    };
    top.insert("gpu_count".into(), count.into());
    let mut gpus = Map::new();
    for index in 0..count {
        let mut g = Map::new();
        match nvml.device_by_index(index) {
            Ok(d) => device(nvml, &d, max_links, &mut g),
            Err(e) => put::<u32>(&mut g, "handle", "nvmlDeviceGetHandleByIndex_v2", Err(e)),
        }
        gpus.insert(index.to_string(), Value::Object(g));
    }
    top.insert("gpus".into(), Value::Object(gpus));
    Value::Object(top)
}

fn device(nvml: &Nvml, d: &Device<'_>, max_links: u32, g: &mut Map<String, Value>) {
    identity(d, g);
    memory_errors(nvml, d, g);
    nvlink(d, max_links, g);
    pcie(d, g);
    activity(d, g);
    limits(nvml, d, g);
    // Unavailable stays absent: the fake then answers "not supported" too.
    if let Ok(super::recovery::Reading::Action(a)) = super::recovery::read(nvml, d) {
        g.insert("recovery_action".into(), a.raw().into());
    }
}

/// The GPU's own temperature thresholds and its fabric registration.
fn limits(nvml: &Nvml, d: &Device<'_>, g: &mut Map<String, Value>) {
    for (key, threshold) in [
        ("temp_slowdown", TemperatureThreshold::Slowdown),
        ("temp_shutdown", TemperatureThreshold::Shutdown),
    ] {
        put(
            g,
            key,
            "nvmlDeviceGetTemperatureThreshold",
            d.temperature_threshold(threshold),
        );
    }
    match super::fabric::fabric_info(nvml, d) {
        Ok(f) => {
            let state = match f.state {
                super::fabric::FabricState::NotSupported => 0,
                super::fabric::FabricState::NotStarted => 1,
                super::fabric::FabricState::InProgress => 2,
                super::fabric::FabricState::Completed => 3,
                super::fabric::FabricState::Other(n) => n,
            };
            g.insert("fabric_state".into(), state.into());
            g.insert("fabric_clique".into(), f.clique.into());
            g.insert("fabric_status".into(), f.status_name().into());
        }
        Err(e) => put::<u8>(g, "fabric_state", "nvmlDeviceGetGpuFabricInfoV", Err(e)),
    }
}

/// Who the GPU is: UUID, bus id, name, VBIOS and GSP firmware (the
/// `versions` check's too), persistence mode.
fn identity(d: &Device<'_>, g: &mut Map<String, Value>) {
    put(g, "uuid", "nvmlDeviceGetUUID", d.uuid());
    put(g, "name", "nvmlDeviceGetName", d.name());
    put(
        g,
        "gsp_version",
        "nvmlDeviceGetGspFirmwareVersion",
        d.gsp_firmware_version(),
    );
    put(
        g,
        "bus_id",
        "nvmlDeviceGetPciInfo_v3",
        d.pci_info().map(|p| p.bus_id),
    );
    put(g, "vbios", "nvmlDeviceGetVbiosVersion", d.vbios_version());
    put(
        g,
        "persistence_mode",
        "nvmlDeviceGetPersistenceMode",
        d.is_in_persistent_mode().map(u8::from),
    );
}

/// The InfoROM, ECC counters, retired pages and remapped rows.
fn memory_errors(nvml: &Nvml, d: &Device<'_>, g: &mut Map<String, Value>) {
    match d.validate_info_rom() {
        Ok(()) => put(g, "inforom_valid", "", Ok(1)),
        Err(NvmlError::CorruptedInfoROM) => put(g, "inforom_valid", "", Ok(0)),
        Err(e) => put::<u8>(g, "inforom_valid", "nvmlDeviceValidateInforom", Err(e)),
    }
    for (key, location) in [
        ("dram", MemoryLocation::Device),
        ("sram", MemoryLocation::SRAM),
    ] {
        put(
            g,
            &format!("ecc_unc_vol_{key}"),
            "nvmlDeviceGetMemoryErrorCounter",
            d.memory_error_counter(MemoryError::Uncorrected, EccCounter::Volatile, location),
        );
    }
    for (key, error, counter) in [
        (
            "ecc_unc_agg_total",
            MemoryError::Uncorrected,
            EccCounter::Aggregate,
        ),
        (
            "ecc_unc_vol_total",
            MemoryError::Uncorrected,
            EccCounter::Volatile,
        ),
        (
            "ecc_cor_vol_total",
            MemoryError::Corrected,
            EccCounter::Volatile,
        ),
        (
            "ecc_cor_agg_total",
            MemoryError::Corrected,
            EccCounter::Aggregate,
        ),
    ] {
        put(
            g,
            key,
            "nvmlDeviceGetTotalEccErrors",
            d.total_ecc_errors(error, counter),
        );
    }
    for (key, cause) in [
        ("retired_sbe", RetirementCause::MultipleSingleBitEccErrors),
        ("retired_dbe", RetirementCause::DoubleBitEccError),
    ] {
        put(
            g,
            key,
            "nvmlDeviceGetRetiredPages",
            d.retired_pages(cause).map(|p| p.len()),
        );
    }
    put(
        g,
        "retired_pending",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        d.are_pages_pending_retired().map(u8::from),
    );
    match super::ecc::remapped_rows(nvml, d) {
        Ok(r) => {
            g.insert("remap_corr".into(), r.corrected.into());
            g.insert("remap_unc".into(), r.uncorrected.into());
            g.insert("remap_pending".into(), u8::from(r.pending).into());
            g.insert("remap_failure".into(), u8::from(r.failure).into());
        }
        Err(e) => put::<u8>(g, "remap_corr", "nvmlDeviceGetRemappedRows", Err(e)),
    }
}

/// The PCIe link: generation and width against their maximum, replays.
fn pcie(d: &Device<'_>, g: &mut Map<String, Value>) {
    put(
        g,
        "pcie_gen",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        d.current_pcie_link_gen(),
    );
    put(
        g,
        "pcie_gen_max",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        d.max_pcie_link_gen(),
    );
    put(
        g,
        "pcie_width",
        "nvmlDeviceGetCurrPcieLinkWidth",
        d.current_pcie_link_width(),
    );
    put(
        g,
        "pcie_width_max",
        "nvmlDeviceGetMaxPcieLinkWidth",
        d.max_pcie_link_width(),
    );
    put(
        g,
        "pcie_replay",
        "nvmlDeviceGetPcieReplayCounter",
        d.pcie_replay_counter(),
    );
}

/// What the GPU is doing: clock reasons, temperature, processes, memory use.
fn activity(d: &Device<'_>, g: &mut Map<String, Value>) {
    put(
        g,
        "clock_reasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        d.current_throttle_reasons().map(|r| r.bits()),
    );
    put(
        g,
        "temperature",
        "nvmlDeviceGetTemperature",
        d.temperature(TemperatureSensor::Gpu),
    );
    put(
        g,
        "procs",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        d.running_compute_processes().map(|ps| {
            ps.iter()
                .map(|p| {
                    let used = match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => b / MIB,
                        UsedGpuMemory::Unavailable => 0,
                    };
                    json!({"pid": p.pid, "used_mib": used})
                })
                .collect::<Vec<_>>()
        }),
    );
    if let Ok(m) = d.memory_info() {
        g.insert("mem_total_mib".into(), (m.total / MIB).into());
        g.insert("mem_used_mib".into(), (m.used / MIB).into());
        g.insert("mem_reserved_mib".into(), (m.reserved / MIB).into());
    }
}

/// Links: how many the GPU has, which are inactive, and per-link counters.
fn nvlink(d: &Device<'_>, max_links: u32, g: &mut Map<String, Value>) {
    let mut present = 0;
    let mut inactive_mask: u64 = 0;
    for link in 0..max_links {
        let w = d.link_wrapper_for(link);
        match w.is_active() {
            Ok(active) => {
                present = link + 1;
                if !active {
                    inactive_mask |= 1 << link;
                }
            }
            Err(_) => continue,
        }
        for (key, counter) in [
            ("replay", ErrorCounter::DlReplay),
            ("recovery", ErrorCounter::DlRecovery),
            ("crc_flit", ErrorCounter::DlCrcFlit),
            ("crc_data", ErrorCounter::DlCrcData),
        ] {
            if let Ok(n) = w.error_counter(counter) {
                if n > 0 {
                    g.insert(format!("nvlink{link}_{key}"), n.into());
                }
            }
        }
    }
    g.insert("nvlink_count".into(), present.into());
    g.insert("nvlink_inactive_mask".into(), inactive_mask.into());
    for key in ["replay", "recovery", "crc_flit", "crc_data"] {
        g.insert(format!("nvlink_{key}"), 0.into());
    }
}

fn put<T: Into<Value>>(
    map: &mut Map<String, Value>,
    key: &str,
    function: &str,
    value: Result<T, NvmlError>,
) {
    match value {
        Ok(v) => {
            map.insert(key.to_string(), v.into());
        }
        Err(NvmlError::NotSupported) | Err(NvmlError::FailedToLoadSymbol(_)) => {}
        Err(e) => {
            map.insert(format!("error.{function}"), error_name(&e).into());
        }
    }
}

/// NVML's name for an error, as the fake reads it.
fn error_name(e: &NvmlError) -> &'static str {
    match e {
        NvmlError::GpuLost => "GPU_IS_LOST",
        NvmlError::ResetRequired => "RESET_REQUIRED",
        NvmlError::CorruptedInfoROM => "CORRUPTED_INFOROM",
        NvmlError::NoPermission => "NO_PERMISSION",
        NvmlError::InvalidArg => "INVALID_ARGUMENT",
        NvmlError::DriverNotLoaded => "DRIVER_NOT_LOADED",
        NvmlError::Timeout => "TIMEOUT",
        NvmlError::Uninitialized => "UNINITIALIZED",
        _ => "UNKNOWN",
    }
}
