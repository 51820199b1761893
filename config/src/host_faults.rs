//! Settings of the host-fault checks: `[checks.modules]` (kernel modules a
//! job needs), `[checks.dstate]` (processes stuck in uninterruptible sleep)
//! and `[checks.pstore]` (crash logs the last panic left).

use crate::Severity;
use serde::{Deserialize, Serialize};

/// `[checks.modules]`: kernel modules that must be loaded.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ModulesSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Module names as `/proc/modules` shows them (`nvidia_peermem`). Unset:
    /// `nvidia_peermem` (GPUDirect RDMA) on a node with both GPUs and
    /// InfiniBand HCAs, nothing elsewhere. `[]` requires none.
    pub required: Option<Vec<String>>,
    /// Severity of `MODULE_MISSING`.
    pub missing_severity: Severity,
}

impl Default for ModulesSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            required: None,
            missing_severity: Severity::Drain,
        }
    }
}

/// `[checks.dstate]`: processes in uninterruptible sleep (`D`) that do not
/// wake up.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DstateSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// A process in `D` at the first look is looked at again this long
    /// after; still in `D` and not scheduled once in between, it is stuck.
    /// The run waits this long only when some process is in `D`.
    pub threshold_s: f64,
    /// Severity of `PROCESS_STUCK_D_STATE`.
    pub severity: Severity,
}

impl Default for DstateSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            threshold_s: 5.0,
            severity: Severity::Warning,
        }
    }
}

/// `[checks.pstore]`: crash logs in `/sys/fs/pstore`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PstoreSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Severity of `PSTORE_CRASH_LOG`, said once per new entry.
    pub severity: Severity,
    /// How many lines of the panic the finding quotes.
    pub quote_lines: usize,
}

impl Default for PstoreSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            severity: Severity::Warning,
            quote_lines: 4,
        }
    }
}

/// `[checks.versions]`: kernel, driver, CUDA, NCCL and GSP versions, exported.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct VersionsSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
}

impl Default for VersionsSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
        }
    }
}
