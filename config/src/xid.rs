//! `[checks.xid]`: NVIDIA XID errors in the kernel log.

use crate::{Action, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `[checks.xid]`: NVIDIA XID errors in the kernel log.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct XidSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Kernel log to read: `/dev/kmsg` (under `--root`), or a file in kmsg
    /// record format for replay and tests.
    pub kmsg_file: PathBuf,
    /// How long an XID of each severity keeps the check at that severity, in
    /// seconds. `down` XIDs stay until reboot whatever this says.
    pub window_s: WindowsBySeverity,
    /// XIDs 13 and 31 seen this many times on one GPU inside `repeat_window_s` escalate.
    pub repeat_count: u32,
    pub repeat_window_s: u64,
    /// Severity of a repeated 13/31.
    pub repeat_severity: Severity,
    /// Overrides of the built-in catalog, keyed by XID number.
    pub catalog: BTreeMap<String, XidRule>,
}

impl Default for XidSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            kmsg_file: PathBuf::from("/dev/kmsg"),
            window_s: WindowsBySeverity::default(),
            repeat_count: 3,
            repeat_window_s: 3600,
            repeat_severity: Severity::Drain,
            catalog: BTreeMap::new(),
        }
    }
}

/// Per-severity windows, in seconds.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WindowsBySeverity {
    pub warning: u64,
    pub drain: u64,
}

impl Default for WindowsBySeverity {
    fn default() -> Self {
        Self {
            warning: 3600,
            drain: 7 * 86400,
        }
    }
}

/// One catalog entry: what an XID means for the node.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct XidRule {
    pub severity: Severity,
    #[serde(default = "default_action")]
    pub action: Action,
    #[serde(default)]
    pub description: Option<String>,
}

fn default_action() -> Action {
    Action::Investigate
}
