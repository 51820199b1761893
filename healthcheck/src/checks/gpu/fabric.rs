//! A GPU's NVSwitch fabric registration, as NVML reports it
//! (`nvmlDeviceGetGpuFabricInfoV`, else `nvmlDeviceGetGpuFabricInfo` on
//! drivers before 550). nvml-wrapper 0.13 has no safe call for either, so this
//! calls the symbol through the library handle it loaded. The `fabric` check
//! judges the result.

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use std::os::raw::{c_uchar, c_uint};

/// `nvmlGpuFabricState_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricState {
    /// The GPU is not on an NVSwitch fabric (PCIe cards, pre-Hopper).
    NotSupported,
    NotStarted,
    InProgress,
    Completed,
    Other(u8),
}

impl FabricState {
    fn from_raw(state: u8) -> FabricState {
        match state {
            0 => FabricState::NotSupported,
            1 => FabricState::NotStarted,
            2 => FabricState::InProgress,
            3 => FabricState::Completed,
            other => FabricState::Other(other),
        }
    }

    /// The name `nvidia-smi -q` prints.
    pub fn as_str(self) -> String {
        match self {
            FabricState::NotSupported => "not supported".into(),
            FabricState::NotStarted => "not started".into(),
            FabricState::InProgress => "in progress".into(),
            FabricState::Completed => "completed".into(),
            FabricState::Other(n) => format!("state {n}"),
        }
    }
}

/// One GPU's fabric registration: its state, and the NVML return code of the
/// registration (`status`: 0 success, 27 `NOT_READY`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricInfo {
    pub state: FabricState,
    pub status: u32,
    pub clique: u32,
}

impl FabricInfo {
    /// Registered with the fabric manager, no error: NVLink can carry traffic.
    pub fn is_up(&self) -> bool {
        self.state == FabricState::Completed && self.status == 0
    }

    /// The status by nvml.h's name (the wrapper knows no name for some of them).
    pub fn status_name(&self) -> String {
        match self.status {
            0 => "SUCCESS".into(),
            3 => "NOT_SUPPORTED".into(),
            10 => "TIMEOUT".into(),
            27 => "NOT_READY".into(),
            999 => "UNKNOWN".into(),
            n => format!("NVML error {n}"),
        }
    }
}

/// nvml.h's `nvmlGpuFabricInfo_t` (v1).
#[repr(C)]
struct InfoV1 {
    cluster_uuid: [c_uchar; 16],
    status: c_uint,
    clique_id: c_uint,
    state: c_uchar,
}

/// nvml.h's `nvmlGpuFabricInfo_v3_t`, what `nvmlGpuFabricInfoV_t` names.
#[repr(C)]
struct InfoV3 {
    version: c_uint,
    cluster_uuid: [c_uchar; 16],
    status: c_uint,
    clique_id: c_uint,
    state: c_uchar,
    health_mask: c_uint,
    health_summary: c_uchar,
}

/// `NVML_STRUCT_VERSION(GpuFabricInfo, 3)`.
const INFO_V3_VERSION: c_uint = std::mem::size_of::<InfoV3>() as c_uint | (3 << 24);

/// The fabric registration of `device`.
pub fn fabric_info(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    match versioned(nvml, device) {
        Err(NvmlError::FailedToLoadSymbol(_)) => legacy(nvml, device),
        other => other,
    }
}

fn versioned(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref())?;
    let mut info = InfoV3 {
        version: INFO_V3_VERSION,
        cluster_uuid: [0; 16],
        status: 0,
        clique_id: 0,
        state: 0,
        health_mask: 0,
        health_summary: 0,
    };
    // SAFETY: the handle comes from this NVML session, and `info` has the
    // layout of nvml.h's v3 struct, with its version set as the driver expects.
    unsafe { nvml_try(sym(device.handle(), (&mut info as *mut InfoV3).cast()))? };
    Ok(info_of(info.state, info.status, info.clique_id))
}

fn legacy(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref())?;
    let mut info = InfoV1 {
        cluster_uuid: [0; 16],
        status: 0,
        clique_id: 0,
        state: 0,
    };
    // SAFETY: as above, with nvml.h's v1 struct.
    unsafe { nvml_try(sym(device.handle(), (&mut info as *mut InfoV1).cast()))? };
    Ok(info_of(info.state, info.status, info.clique_id))
}

fn info_of(state: u8, status: c_uint, clique: u32) -> FabricInfo {
    FabricInfo {
        state: FabricState::from_raw(state),
        status,
        clique,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_completed_registration_without_error_is_up() {
        assert!(info_of(3, 0, 1).is_up());
        assert!(!info_of(1, 27, 0).is_up());
        assert!(!info_of(2, 0, 0).is_up());
        assert!(!info_of(3, 999, 0).is_up());
        assert_eq!(info_of(0, 0, 0).state, FabricState::NotSupported);
    }

    #[test]
    fn the_versioned_struct_has_nvml_h_layout() {
        // clusterUuid[16] at 4, status at 20, cliqueId 24, state 28, healthMask 32, summary 36.
        assert_eq!(std::mem::size_of::<InfoV3>(), 40);
        assert_eq!(std::mem::size_of::<InfoV1>(), 28);
    }
}
