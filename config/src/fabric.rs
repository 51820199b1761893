//! `[checks.fabric]`: the NVSwitch fabric of HGX nodes (the fabric manager
//! service, each GPU's fabric registration, the fabric manager's log).

use crate::Severity;
use serde::{Deserialize, Serialize};

/// `[checks.fabric]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FabricSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Whether the node has an NVSwitch fabric. Unset: it has one when an
    /// NVSwitch (vendor `0x10de`, class `0x0680xx`) is on the PCI bus.
    pub nvswitch: Option<bool>,
    /// Where the fabric manager must run: `auto` (the default) requires it
    /// on an HGX node and not on an NVL72 compute tray, whose fabric the
    /// switch trays manage; `required` and `off` decide for the site.
    pub fabric_manager: FabricManagerMode,
    /// The fabric manager's process name (`/proc/<pid>/comm`), which systemd's
    /// `nvidia-fabricmanager` unit runs.
    pub service: String,
    /// The fabric manager's log (`LOG_FILE_NAME` of `fabricmanager.cfg`).
    pub log_path: String,
    /// Severity of `FABRIC_DOWN`: the service is not running, or a GPU's
    /// fabric registration is not complete.
    pub down_severity: Severity,
    /// Severity of `FABRIC_MANAGER_ERROR`: new `[ERROR]` lines in the log.
    pub log_error_severity: Severity,
}

impl Default for FabricSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            nvswitch: None,
            fabric_manager: FabricManagerMode::Auto,
            service: "nv-fabricmanager".into(),
            log_path: "/var/log/fabricmanager.log".into(),
            down_severity: Severity::Drain,
            log_error_severity: Severity::Warning,
        }
    }
}

/// `[checks.fabric] fabric_manager`.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FabricManagerMode {
    /// Required unless the node looks like an NVL72 compute tray.
    #[default]
    Auto,
    Required,
    Off,
}
