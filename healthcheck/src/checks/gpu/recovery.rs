//! The driver's own recovery action for a GPU: NVML field
//! `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (230, R570 on), read by the `gpu`
//! check for every GPU on every run (periodic and prolog), one field-values
//! call per GPU inside that check's deadline.
//!
//! XID 154 in the kernel log says when the action *changes*; after a reboot
//! or a rotated log only NVML still knows it, so the reading here, not the
//! log line, is what keeps a node out until the action is done.
//!
//! [`read`] is the NVML half; [`evaluate`] the pure judgement.

use super::field_values::{self, FieldValue};
use super::session::{Failure, GpuId};
use crate::finding::Finding;
use lemonade_config::{Action, Severity};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;

// Finding codes; `crate::codes` gives each its meaning, severity, repair and
// how to silence it.
pub const RECOVERY_GPU_RESET: &str = "RECOVERY_GPU_RESET";
pub const RECOVERY_NODE_REBOOT: &str = "RECOVERY_NODE_REBOOT";
pub const RECOVERY_DRAIN_P2P: &str = "RECOVERY_DRAIN_P2P";
pub const RECOVERY_DRAIN_AND_RESET: &str = "RECOVERY_DRAIN_AND_RESET";
/// The IMEX rung (`restart-imex`) repairs it, then reads the action again.
pub const RECOVERY_IMEX_DOMAIN: &str = "RECOVERY_IMEX_DOMAIN";
pub const RECOVERY_ACTION_UNRECOGNISED: &str = "RECOVERY_ACTION_UNRECOGNISED";
pub const RECOVERY_ACTION_UNAVAILABLE: &str = "RECOVERY_ACTION_UNAVAILABLE";

/// nvml.h's `nvmlDeviceGpuRecoveryAction_t`, as far as its values are sure.
///
/// 0-4 are in every header since R570 (DRAIN_AND_RESET came with R570 and
/// replaced the fields `NVML_FI_DEV_RESET_STATUS` and `_DRAIN_AND_RESET_STATUS`).
/// NVML's change log adds `RECOVER_IMEX_DOMAIN` in v595, the enum member after
/// DRAIN_AND_RESET in the header's order (cuda-python's nvml bindings list it
/// there): 5. Beware: one pynvml release named 5 `GPU_RESET_BUS`; either way 5
/// asks for the node out of service, which the IMEX code does. v615 adds
/// `BUS_RESET` and `SYSTEM_REBOOT` without numbers we could confirm (6 and 7
/// in one third-party table): they fall to [`RecoveryAction::Other`], which
/// drains and asks a human, never a guess at a rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryAction {
    None,
    GpuReset,
    NodeReboot,
    DrainP2p,
    DrainAndReset,
    RecoverImexDomain,
    Other(u64),
}

impl RecoveryAction {
    pub fn from_raw(value: u64) -> RecoveryAction {
        match value {
            0 => RecoveryAction::None,
            1 => RecoveryAction::GpuReset,
            2 => RecoveryAction::NodeReboot,
            3 => RecoveryAction::DrainP2p,
            4 => RecoveryAction::DrainAndReset,
            5 => RecoveryAction::RecoverImexDomain,
            other => RecoveryAction::Other(other),
        }
    }

    /// The value NVML gives.
    pub fn raw(self) -> u64 {
        match self {
            RecoveryAction::None => 0,
            RecoveryAction::GpuReset => 1,
            RecoveryAction::NodeReboot => 2,
            RecoveryAction::DrainP2p => 3,
            RecoveryAction::DrainAndReset => 4,
            RecoveryAction::RecoverImexDomain => 5,
            RecoveryAction::Other(n) => n,
        }
    }

    /// The value and the driver's words for it, as XID 154 prints them
    /// (`0x1 (GPU Reset Required)`).
    pub fn name(self) -> String {
        let words = match self {
            RecoveryAction::None => "None",
            RecoveryAction::GpuReset => "GPU Reset Required",
            RecoveryAction::NodeReboot => "Node Reboot Required",
            RecoveryAction::DrainP2p => "Drain P2P",
            RecoveryAction::DrainAndReset => "Drain and Reset",
            RecoveryAction::RecoverImexDomain => "Recover IMEX Domain",
            RecoveryAction::Other(_) => "unknown to this version",
        };
        format!("{:#x} ({words})", self.raw())
    }
}

/// What the driver answered for one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Action(RecoveryAction),
    /// The driver has no such field (before R570, or the GPU lacks it), or
    /// the value's own return code was not success: why, as NVML words it.
    Unavailable(String),
}

impl Default for Reading {
    fn default() -> Self {
        Reading::Unavailable("not read".into())
    }
}

/// The recovery action of `device`. `Err` only for a GPU that is lost or
/// needs a reset (the `gpu` check's own verdict); every other failure is a
/// [`Reading::Unavailable`].
pub fn read(nvml: &Nvml, device: &Device<'_>) -> Result<Reading, Failure> {
    let field = (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, 0);
    Ok(match field_values::read(nvml, device, &[field])? {
        Ok(values) => match &values[0] {
            FieldValue::Read(raw) => Reading::Action(RecoveryAction::from_raw(*raw)),
            FieldValue::NotSupported => Reading::Unavailable(Failure::NotSupported.to_string()),
            FieldValue::Failed(why) => Reading::Unavailable(why.clone()),
        },
        Err(why) => Reading::Unavailable(why.to_string()),
    })
}

/// Whether a node taken out only for `code` is resumed by the policy once
/// clean runs read the action gone: DRAIN_P2P asks to be asked again, not
/// for a repair, so no rung will ever resume it. (The IMEX rung resumes a
/// node out for RECOVERY_IMEX_DOMAIN.)
pub fn resumes_once_clear(code: &str) -> bool {
    code == RECOVERY_DRAIN_P2P
}

/// What one action asks of the node: code, severity, repair action, and the
/// words of the message.
fn verdict(action: RecoveryAction) -> Option<(&'static str, Severity, Action, String)> {
    Some(match action {
        RecoveryAction::None => return None,
        RecoveryAction::GpuReset => (
            RECOVERY_GPU_RESET,
            Severity::Down,
            Action::ResetGpu,
            "the driver asks for a GPU reset".into(),
        ),
        RecoveryAction::NodeReboot => (
            RECOVERY_NODE_REBOOT,
            Severity::Down,
            Action::Reboot,
            "the driver asks for a node reboot".into(),
        ),
        // Running work is safe: drain, and the reset rung waits for the jobs.
        RecoveryAction::DrainAndReset => (
            RECOVERY_DRAIN_AND_RESET,
            Severity::Drain,
            Action::ResetGpu,
            "the driver asks to drain and reset: reduced capacity, running work is safe".into(),
        ),
        // Not a repair: once peer-to-peer traffic stops, the driver answers
        // with the real action, which the next run reads.
        RecoveryAction::DrainP2p => (
            RECOVERY_DRAIN_P2P,
            Severity::Drain,
            Action::None,
            "the driver asks to drain peer-to-peer traffic, then to be asked again".into(),
        ),
        // The IMEX rung: restart the daemon, then read the action again.
        RecoveryAction::RecoverImexDomain => (
            RECOVERY_IMEX_DOMAIN,
            Severity::Drain,
            Action::RestartImex,
            "the driver asks to recover the IMEX domain".into(),
        ),
        RecoveryAction::Other(n) => (
            RECOVERY_ACTION_UNRECOGNISED,
            Severity::Drain,
            Action::Investigate,
            format!("the driver asks for recovery action {n}, which this version does not know"),
        ),
    })
}

/// Pure: the finding for one GPU's reading; `None` when the driver asks for
/// nothing. A missing field is `unknown`: never ok, never a drain.
pub fn evaluate(check: &str, id: &GpuId, reading: &Reading) -> Option<Finding> {
    let action = match reading {
        Reading::Action(action) => *action,
        Reading::Unavailable(why) => {
            return Some(
                id.finding(check, RECOVERY_ACTION_UNAVAILABLE, Severity::Unknown)
                    .expected("a recovery action (R570 or later)")
                    .actual(why)
                    .message(format!(
                        "{}: the driver's recovery action cannot be read: {why}",
                        id.entity()
                    )),
            );
        }
    };
    let (code, severity, repair, words) = verdict(action)?;
    Some(
        id.finding(check, code, severity)
            .expected(RecoveryAction::None.name())
            .actual(action.name())
            .action(repair)
            .message(format!("{}: {words}", id.entity())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32) -> GpuId {
        GpuId {
            index,
            uuid: Some(format!("GPU-{index}")),
            bus_id: Some(format!("0000:{:02x}:00.0", 0x18 + index)),
        }
    }

    fn judged(raw: u64) -> Option<(String, Severity, Action)> {
        let r = Reading::Action(RecoveryAction::from_raw(raw));
        evaluate("gpu", &gpu(2), &r).map(|f| (f.code, f.severity, f.action))
    }

    #[test]
    fn each_action_of_nvml_h_gives_its_code_severity_and_rung() {
        assert_eq!(judged(0), None);
        let want = [
            (1, RECOVERY_GPU_RESET, Severity::Down, Action::ResetGpu),
            (2, RECOVERY_NODE_REBOOT, Severity::Down, Action::Reboot),
            (3, RECOVERY_DRAIN_P2P, Severity::Drain, Action::None),
            (
                4,
                RECOVERY_DRAIN_AND_RESET,
                Severity::Drain,
                Action::ResetGpu,
            ),
            (
                5,
                RECOVERY_IMEX_DOMAIN,
                Severity::Drain,
                Action::RestartImex,
            ),
        ];
        for (raw, code, severity, action) in want {
            assert_eq!(
                judged(raw),
                Some((code.to_string(), severity, action)),
                "{raw}"
            );
        }
    }

    #[test]
    fn an_action_this_version_does_not_know_drains_and_asks_a_human() {
        for raw in [6, 7, 0xffff_ffff] {
            assert_eq!(
                judged(raw),
                Some((
                    RECOVERY_ACTION_UNRECOGNISED.to_string(),
                    Severity::Drain,
                    Action::Investigate
                )),
                "{raw}"
            );
        }
    }

    #[test]
    fn a_driver_without_the_field_is_unknown_never_ok_and_never_a_drain() {
        let f = evaluate(
            "gpu",
            &gpu(1),
            &Reading::Unavailable("not supported".into()),
        )
        .expect("a finding");
        assert_eq!(
            (f.code.as_str(), f.severity, f.action),
            (
                RECOVERY_ACTION_UNAVAILABLE,
                Severity::Unknown,
                Action::Investigate
            )
        );
        assert_eq!(f.entity, "gpu1");
        assert_eq!(f.actual.as_deref(), Some("not supported"));
    }

    #[test]
    fn the_finding_names_the_gpu_by_bus_id_and_uuid_for_the_reset() {
        let f = evaluate("gpu", &gpu(3), &Reading::Action(RecoveryAction::GpuReset)).unwrap();
        assert_eq!(f.entity, "gpu3");
        assert_eq!(f.pci_bus_id.as_deref(), Some("0000:1b:00.0"));
        assert_eq!(f.actual.as_deref(), Some("0x1 (GPU Reset Required)"));
    }
}
