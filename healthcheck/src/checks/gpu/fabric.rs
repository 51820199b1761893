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
/// registration (`status`: 0 success, 27 `NOT_READY`, ...), the struct
/// version the driver served (1, 2 or 3) and, from v2 on, its health mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricInfo {
    pub state: FabricState,
    pub status: u32,
    pub clique: u32,
    pub version: u8,
    pub health_mask: Option<u32>,
    pub cluster_uuid: [u8; 16],
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

/// nvml.h's `nvmlGpuFabricInfo_v2_t` (R550 on): v1 behind a version word,
/// plus `healthMask`; no `healthSummary` yet.
#[repr(C)]
struct InfoV2 {
    version: c_uint,
    cluster_uuid: [c_uchar; 16],
    status: c_uint,
    clique_id: c_uint,
    state: c_uchar,
    health_mask: c_uint,
}

/// nvml.h's `nvmlGpuFabricInfo_v3_t` (R580 on), what `nvmlGpuFabricInfoV_t`
/// names in R580's header.
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

/// `NVML_STRUCT_VERSION(GpuFabricInfo, 2)`: the struct's size, version in the top byte.
const INFO_V2_VERSION: c_uint = std::mem::size_of::<InfoV2>() as c_uint | (2 << 24);
/// `NVML_STRUCT_VERSION(GpuFabricInfo, 3)`.
const INFO_V3_VERSION: c_uint = std::mem::size_of::<InfoV3>() as c_uint | (3 << 24);
/// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`: the driver does not know the
/// struct version asked for (an R570 driver asked for v3).
const VERSION_MISMATCH: u32 = 25;

/// The fabric registration of `device`: v3, else v2, else v1 when the driver
/// answers a version mismatch (R570 serves v1 and v2 only); the unversioned
/// call on drivers before 550. Any other error is the caller's `unknown`.
pub fn fabric_info(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    match v3(nvml, device) {
        Err(NvmlError::FailedToLoadSymbol(_)) => return legacy(nvml, device),
        Err(e) if is_mismatch(&e) => {}
        other => return other,
    }
    match v2(nvml, device) {
        Err(e) if is_mismatch(&e) => legacy(nvml, device),
        other => other,
    }
}

/// nvml-wrapper 0.13 has no variant for 25: it comes back as the enum value
/// it could not decode.
fn is_mismatch(e: &NvmlError) -> bool {
    matches!(e, NvmlError::UnexpectedVariant(n) if *n == VERSION_MISMATCH)
}

fn v3(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
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
    let mut out = info_of(info.state, info.status, info.clique_id);
    out.version = 3;
    out.health_mask = Some(info.health_mask);
    out.cluster_uuid = info.cluster_uuid;
    Ok(out)
}

fn v2(nvml: &Nvml, device: &Device<'_>) -> Result<FabricInfo, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref())?;
    let mut info = InfoV2 {
        version: INFO_V2_VERSION,
        cluster_uuid: [0; 16],
        status: 0,
        clique_id: 0,
        state: 0,
        health_mask: 0,
    };
    // SAFETY: as above, with nvml.h's v2 struct and its version.
    unsafe { nvml_try(sym(device.handle(), (&mut info as *mut InfoV2).cast()))? };
    let mut out = info_of(info.state, info.status, info.clique_id);
    out.version = 2;
    out.health_mask = Some(info.health_mask);
    out.cluster_uuid = info.cluster_uuid;
    Ok(out)
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
    let mut out = info_of(info.state, info.status, info.clique_id);
    out.cluster_uuid = info.cluster_uuid;
    Ok(out)
}

fn info_of(state: u8, status: c_uint, clique: u32) -> FabricInfo {
    FabricInfo {
        state: FabricState::from_raw(state),
        status,
        clique,
        version: 1,
        health_mask: None,
        cluster_uuid: [0; 16],
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
        // v2: the same up to healthMask at 32, no summary: 36 bytes.
        assert_eq!(std::mem::size_of::<InfoV2>(), 36);
        assert_eq!(INFO_V2_VERSION, 36 | 2 << 24);
        assert_eq!(INFO_V3_VERSION, 40 | 3 << 24);
    }
}
