//! The `xid` check's codes: XIDs, and the host and fabric faults matched in
//! the same pass over the kernel log.
//!
//! XIDs are one family entry: each XID's severity and action live in the
//! XID catalog (`checks/xid/catalog.rs`, overridden by
//! `[checks.xid.catalog]`), which this table must not copy.

use super::{Code, CodeEntry, Repair};
use crate::checks::xid::{evaluate as xid, faults, kernel_log as klog};
use lemonade_config::Action;
use lemonade_config::Severity::{Down, Drain, Unknown, Warning};

const CHECK: &str = "xid";

pub(super) static ENTRIES: &[CodeEntry] = &[
    CodeEntry {
        // `code_of` in checks/xid/evaluate.rs makes `XID_<n>`.
        code: Code::Family {
            prefix: xid::XID_PREFIX,
            member: "<n>",
            suffix: "",
        },
        check: CHECK,
        severities: &[Warning, Drain, Down],
        repair: Repair::Varies(
            "as the XID catalog gives the XID: reset-gpu, reboot, or none (human)",
        ),
        meaning: "NVIDIA XID <n> in the kernel log for a GPU; severity, action and how long it \
                  counts come from the XID catalog (`healthcheck/src/checks/xid/catalog.rs`), \
                  repeated XIDs and site rules (`[[checks.xid.rule]]`) can raise it",
        silence: "`[checks.xid.catalog] \"<n>\" = { severity = \"ok\" }` for one XID; \
                  `repeat_xids`, `[[checks.xid.rule]]`; `[checks.xid] enabled = false` for all",
    },
    CodeEntry {
        code: Code::Exact(xid::XID_PARSE_ERROR),
        check: CHECK,
        severities: &[Unknown],
        repair: Repair::Fixed(Action::Investigate),
        meaning: "an NVRM Xid line whose form the parser does not know",
        silence: "`[checks.xid] enabled = false`",
    },
    CodeEntry {
        code: Code::Exact(xid::KMSG_MALFORMED),
        check: CHECK,
        severities: &[Unknown],
        repair: Repair::Fixed(Action::Investigate),
        meaning: "the kernel log source holds lines in none of the known forms",
        silence: "`[checks.xid] kmsg_file` pointing at a readable log; `enabled = false`",
    },
    CodeEntry {
        code: Code::Exact(xid::KMSG_RECORDS_LOST),
        check: CHECK,
        severities: &[Unknown],
        repair: Repair::Fixed(Action::Investigate),
        meaning: "kernel log records were overwritten before the check read them; XIDs among \
                  them are missed",
        silence: "a larger kernel log buffer (`log_buf_len`); `[checks.xid] enabled = false`",
    },
    CodeEntry {
        code: Code::Family {
            prefix: faults::SXID_PREFIX,
            member: "<n>",
            suffix: "",
        },
        check: CHECK,
        severities: &[Warning, Drain, Down],
        repair: Repair::Varies(
            "reboot for fatal SXids (as the SXid catalog gives them), none (human) otherwise",
        ),
        meaning: "NVSwitch SXid <n> (entity: the switch); the driver's Fatal is drain, \
                  Non-fatal warning, except where the built-in SXid catalog says otherwise",
        silence: "`[checks.xid.kernel_faults.sxid_catalog] \"<n>\" = { severity = \"ok\" }`; \
                  `sxid_fatal_severity`, `sxid_non_fatal_severity`; \
                  `[checks.xid.kernel_faults] enabled = false`",
    },
    fault(
        faults::CPER_FATAL,
        Drain,
        Action::Repair,
        "a fatal `[Hardware Error]` CPER record (platform firmware)",
        "`[checks.xid.kernel_faults] cper_fatal_severity`",
    ),
    fault(
        faults::CPER_RECOVERABLE,
        Drain,
        Action::Repair,
        "a recoverable `[Hardware Error]` CPER record",
        "`[checks.xid.kernel_faults] cper_recoverable_severity`",
    ),
    fault(
        faults::CPER_CORRECTED,
        Warning,
        Action::Investigate,
        "corrected CPER records, `cper_corrected_count` of them inside `cper_corrected_window_s`",
        "`[checks.xid.kernel_faults] cper_corrected_severity`, `cper_corrected_count`",
    ),
    fault(
        faults::HUNG_TASK,
        Warning,
        Action::Investigate,
        "the kernel's `task X blocked for more than N seconds` (entity: the command)",
        "`[checks.xid.kernel_faults] hung_task_severity`",
    ),
    fault(
        faults::SOFT_LOCKUP,
        Warning,
        Action::Investigate,
        "a watchdog soft lockup (entity: the CPU)",
        "`[checks.xid.kernel_faults] soft_lockup_severity`",
    ),
    fault(
        faults::PEERMEM_ERROR,
        Warning,
        Action::Investigate,
        "errors of `nvidia-peermem` / `nv_peer_mem` (GPUDirect RDMA)",
        "`[checks.xid.kernel_faults] peermem_severity`",
    ),
    fault(
        faults::GPU_FELL_OFF_BUS,
        Down,
        Action::Reboot,
        "the driver says a GPU has fallen off the bus, without an XID 79",
        "`[checks.xid.kernel_faults] fell_off_bus_severity`",
    ),
    fault(
        faults::GSP_TIMEOUT,
        Drain,
        Action::ResetGpu,
        "timeouts waiting for the GPU's GSP firmware (RPC or heartbeat)",
        "`[checks.xid.kernel_faults] gsp_timeout_severity`",
    ),
    host(
        klog::MCE_HARDWARE_ERROR,
        Drain,
        "`mce: [Hardware Error]`: a machine check in the kernel log",
        "`[checks.xid.kernel_log] mce_severity`",
    ),
    host(
        klog::MCE_EVENTS_LOGGED,
        Warning,
        "`Machine check events logged`",
        "`[checks.xid.kernel_log] mce_logged_severity`",
    ),
    host(
        klog::EDAC_CE_LOGGED,
        Warning,
        "EDAC corrected memory errors in the kernel log",
        "`[checks.xid.kernel_log] edac_ce_severity`",
    ),
    host(
        klog::EDAC_UE_LOGGED,
        Down,
        "EDAC uncorrected memory errors in the kernel log",
        "`[checks.xid.kernel_log] edac_ue_severity`",
    ),
    host(
        klog::BLOCK_IO_ERROR,
        Drain,
        "`I/O error, dev ...` on a block device (entity: the device)",
        "`[checks.xid.kernel_log] io_error_severity`",
    ),
    host(
        klog::FS_ERROR,
        Drain,
        "an EXT4 or BTRFS error, an XFS corruption or shutdown",
        "`[checks.xid.kernel_log] fs_error_severity`",
    ),
    CodeEntry {
        code: Code::Exact(klog::NFS_NOT_RESPONDING),
        check: CHECK,
        severities: &[Warning],
        repair: Repair::Fixed(Action::Investigate),
        meaning: "`nfs: server X not responding`, until the server's `OK` line",
        silence: "`[checks.xid.kernel_log] nfs_severity`; `enabled = false` for the section",
    },
];

/// A kernel or fabric fault of `[checks.xid.kernel_faults]`.
const fn fault(
    code: &'static str,
    severity: lemonade_config::Severity,
    action: Action,
    meaning: &'static str,
    silence: &'static str,
) -> CodeEntry {
    let severities: &'static [lemonade_config::Severity] = match severity {
        Warning => &[Warning],
        Drain => &[Drain],
        _ => &[Down],
    };
    super::exact(CHECK, code, severities, action, meaning, silence)
}

/// A host error of `[checks.xid.kernel_log]`: a repair for a human.
const fn host(
    code: &'static str,
    severity: lemonade_config::Severity,
    meaning: &'static str,
    silence: &'static str,
) -> CodeEntry {
    fault(code, severity, Action::Repair, meaning, silence)
}
