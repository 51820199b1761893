//! Settings of the checks of the host itself: `[checks.memory]`,
//! `[checks.cpus]`, `[checks.block]`, `[checks.services]`, `[checks.firmware]`.
//!
//! Each expectation is optional: a check without one judges only what needs
//! none (EDAC counters, HCA firmware against the node's own majority).
//! `healthcheck baseline` writes them from a node known to be good.

use crate::Severity;
use serde::{Deserialize, Serialize};

/// `[checks.memory]`: installed memory and EDAC error counters.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// `MemTotal` of `/proc/meminfo` a healthy node shows, in GiB.
    pub expected_total_gib: Option<f64>,
    /// How far below the expected size `MemTotal` may be, in percent (the
    /// kernel's own reservations move it a little between kernels).
    pub total_tolerance_percent: f64,
    /// Severity of `MEM_TOTAL_LOW` (a DIMM mapped out).
    pub total_low_severity: Severity,
    /// Severity of `EDAC_UE` (an uncorrected memory error).
    pub uncorrected_severity: Severity,
    /// Corrected errors per hour (summed over `rate_window_s`) above this:
    /// `warning`; 0 disables.
    pub corrected_warning_per_hour: f64,
    /// Corrected errors per hour above this: `drain`; 0 disables.
    pub corrected_drain_per_hour: f64,
    /// Window over which counter growth is summed into a rate, in seconds.
    pub rate_window_s: u64,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            expected_total_gib: None,
            total_tolerance_percent: 2.0,
            total_low_severity: Severity::Drain,
            uncorrected_severity: Severity::Down,
            corrected_warning_per_hour: 10.0,
            corrected_drain_per_hour: 1000.0,
            rate_window_s: 86_400,
        }
    }
}

/// `[checks.cpus]`: online CPUs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CpusSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Logical CPUs `/sys/devices/system/cpu/online` lists on a healthy node.
    pub expected_online: Option<usize>,
    /// Severity of `CPU_OFFLINE`.
    pub offline_severity: Severity,
}

impl Default for CpusSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            expected_online: None,
            offline_severity: Severity::Drain,
        }
    }
}

/// `[checks.block]`: local NVMe namespaces.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BlockSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// NVMe namespaces (`/sys/block/nvme*n*`) a healthy node has.
    pub nvme_count: Option<usize>,
    /// Smallest size each of them must have, in GB (10^9 bytes, as vendors count).
    pub nvme_min_size_gb: Option<f64>,
    /// Devices must be writable: a read-only one is `BLOCK_READ_ONLY`.
    pub writable: bool,
    /// Severity of `NVME_MISSING`, `NVME_SIZE_LOW`, `NVME_NOT_LIVE` and `BLOCK_READ_ONLY`.
    pub severity: Severity,
}

impl Default for BlockSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            nvme_count: None,
            nvme_min_size_gb: None,
            writable: true,
            severity: Severity::Drain,
        }
    }
}

/// `[checks.services]`: daemons that must run.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServicesSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Process names (`/proc/<pid>/comm`, at most 15 characters), e.g. `munged`.
    pub expected: Vec<String>,
    /// Severity of `SERVICE_MISSING`.
    pub missing_severity: Severity,
}

impl Default for ServicesSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            expected: Vec::new(),
            missing_severity: Severity::Drain,
        }
    }
}

/// `[checks.firmware]`: BIOS, board and HCA firmware versions.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FirmwareSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// `/sys/class/dmi/id/bios_version` of a good node.
    pub bios_version: Option<String>,
    /// `/sys/class/dmi/id/board_name` of a good node.
    pub board_name: Option<String>,
    /// `fw_ver` every InfiniBand HCA must run; without it, HCAs of one type
    /// are held to their majority on the node.
    pub hca_fw_ver: Option<String>,
    /// Severity of `FIRMWARE_MISMATCH`.
    pub mismatch_severity: Severity,
}

impl Default for FirmwareSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            bios_version: None,
            board_name: None,
            hca_fw_ver: None,
            mismatch_severity: Severity::Warning,
        }
    }
}

/// `[checks.xid.kernel_log]`: host hardware errors read from the kernel log
/// in the same pass as the XIDs, with the XIDs' windows (`window_s`): a
/// `down` match counts until reboot, the others for their severity's window.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct KernelLogSettings {
    pub enabled: bool,
    /// `mce: [Hardware Error]` lines: `MCE_HARDWARE_ERROR`.
    pub mce_severity: Severity,
    /// `Machine check events logged` (corrected, by mcelog/rasdaemon): `MCE_EVENTS_LOGGED`.
    pub mce_logged_severity: Severity,
    /// `EDAC MCn: k CE ...`: `EDAC_CE_LOGGED`.
    pub edac_ce_severity: Severity,
    /// `EDAC MCn: k UE ...`: `EDAC_UE_LOGGED`.
    pub edac_ue_severity: Severity,
    /// `I/O error, dev nvme0n1, sector ...` (not CD-ROM, loop or RAM disks): `BLOCK_IO_ERROR`.
    pub io_error_severity: Severity,
    /// `EXT4-fs error`, XFS corruption or shutdown, `BTRFS error`: `FS_ERROR`.
    pub fs_error_severity: Severity,
    /// `nfs: server X not responding` until `nfs: server X OK`: `NFS_NOT_RESPONDING`.
    pub nfs_severity: Severity,
}

impl Default for KernelLogSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            mce_severity: Severity::Drain,
            mce_logged_severity: Severity::Warning,
            edac_ce_severity: Severity::Warning,
            edac_ue_severity: Severity::Down,
            io_error_severity: Severity::Drain,
            fs_error_severity: Severity::Drain,
            nfs_severity: Severity::Warning,
        }
    }
}
