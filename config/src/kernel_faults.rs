//! `[checks.xid.kernel_faults]`: kernel and fabric faults matched in the XID
//! check's pass over the kernel log (NVSwitch SXids, CPER records, hung
//! tasks, soft lockups, GPUDirect RDMA peer-memory errors, NVRM lines with no
//! XID of their own).

use crate::{Severity, XidRule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[checks.xid.kernel_faults]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct KernelFaultSettings {
    pub enabled: bool,
    /// An SXid the driver calls `Fatal` and the catalog does not know.
    pub sxid_fatal_severity: Severity,
    /// An SXid the driver calls `Non-fatal` and the catalog does not know.
    pub sxid_non_fatal_severity: Severity,
    /// Overrides of the built-in SXid catalog: `[checks.xid.kernel_faults.sxid_catalog."12028"]`.
    #[serde(deserialize_with = "crate::xid::catalog_by_number")]
    pub sxid_catalog: BTreeMap<u32, XidRule>,
    /// `[Hardware Error]: event severity: fatal`: `CPER_FATAL`.
    pub cper_fatal_severity: Severity,
    /// `... event severity: recoverable`: `CPER_RECOVERABLE`.
    pub cper_recoverable_severity: Severity,
    /// `... event severity: corrected`, `cper_corrected_count` times inside
    /// `cper_corrected_window_s`: `CPER_CORRECTED`. Fewer are recorded, not reported.
    pub cper_corrected_severity: Severity,
    pub cper_corrected_count: u32,
    pub cper_corrected_window_s: u64,
    /// `INFO: task X:PID blocked for more than N seconds.`: `HUNG_TASK`.
    pub hung_task_severity: Severity,
    /// `watchdog: BUG: soft lockup - CPU#N stuck for Ns!`: `SOFT_LOCKUP`.
    pub soft_lockup_severity: Severity,
    /// `nvidia-peermem` / `nv_peer_mem` errors: `PEERMEM_ERROR`.
    pub peermem_severity: Severity,
    /// `NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.`: `GPU_FELL_OFF_BUS`.
    pub fell_off_bus_severity: Severity,
    /// `NVRM: Timeout waiting for RPC from GSP`, `GSP RM heartbeat timed out`: `GSP_TIMEOUT`.
    pub gsp_timeout_severity: Severity,
}

impl Default for KernelFaultSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            sxid_fatal_severity: Severity::Drain,
            sxid_non_fatal_severity: Severity::Warning,
            sxid_catalog: BTreeMap::new(),
            cper_fatal_severity: Severity::Drain,
            cper_recoverable_severity: Severity::Drain,
            cper_corrected_severity: Severity::Warning,
            cper_corrected_count: 10,
            cper_corrected_window_s: 3600,
            hung_task_severity: Severity::Warning,
            soft_lockup_severity: Severity::Warning,
            peermem_severity: Severity::Warning,
            fell_off_bus_severity: Severity::Down,
            gsp_timeout_severity: Severity::Drain,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{load_str, Severity};
    use std::path::Path;

    #[test]
    fn sxid_overrides_are_keyed_by_number_and_severities_can_be_changed() {
        let config = load_str(
            "[checks.xid.kernel_faults]\nhung_task_severity = \"drain\"\n\
             [checks.xid.kernel_faults.sxid_catalog.\"12028\"]\nseverity = \"ok\"\n",
            Path::new("lemonade.toml"),
            None,
        )
        .unwrap();
        let s = &config.checks.xid.kernel_faults;
        assert_eq!(s.hung_task_severity, Severity::Drain);
        assert_eq!(s.sxid_catalog[&12028].severity, Severity::Ok);
        assert_eq!(s.cper_recoverable_severity, Severity::Drain);
    }
}
