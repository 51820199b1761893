//! What each XID means for the node: severity and recommended action.
//!
//! The built-in table follows NVIDIA's XID catalog (see the digest in
//! `shared/reference`); `[checks.xid.catalog."N"]` overrides an entry. An XID
//! in neither is a `warning` to investigate: a new driver's new XID should be
//! looked at, not ignored, and not drain a node by itself.

use super::parse::Recovery;
use lemonade_config::{Action, Severity, XidSettings};

/// How one XID is classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub severity: Severity,
    pub action: Action,
    pub description: String,
}

/// XID 154: the recovery action in the message decides.
pub const RECOVERY_XID: u32 = 154;

/// The built-in entry for `xid`, if there is one.
pub fn builtin(xid: u32) -> Option<(Severity, Action, &'static str)> {
    use Action::*;
    use Severity::*;
    Some(match xid {
        13 => (Warning, RestartApp, "graphics engine exception"),
        31 => (Warning, RestartApp, "GPU memory page fault"),
        43 => (Ok, None, "channel reset (application fault)"),
        45 => (Ok, None, "preemptive cleanup"),
        48 => (Down, ResetGpu, "double-bit ECC error"),
        61 => (Drain, ResetGpu, "internal micro-controller breakpoint"),
        62 => (Drain, ResetGpu, "internal micro-controller halt"),
        63 => (Drain, ResetGpu, "row remapping or page retirement recorded"),
        64 => (Down, ResetGpu, "row remapping or page retirement failure"),
        74 => (Down, ResetGpu, "NVLink error"),
        79 => (Down, Reboot, "GPU has fallen off the bus"),
        92 => (Warning, None, "excessive single-bit ECC errors"),
        94 => (Warning, RestartApp, "contained ECC error"),
        95 => (Down, ResetGpu, "uncontained ECC error"),
        109 => (Drain, ResetGpu, "context switch timeout"),
        119 => (Down, ResetGpu, "GSP RPC timeout"),
        120 => (Down, ResetGpu, "GSP error"),
        136 => (Down, ResetGpu, "link training failure"),
        140 => (Down, ResetGpu, "unrecoverable ECC error"),
        143 => (Down, ResetGpu, "GPU initialisation error"),
        144..=150 => (Down, ResetGpu, "NVLink error"),
        RECOVERY_XID => (Warning, Investigate, "recovery action changed"),
        _ => return Option::None,
    })
}

/// The rule for `xid`: config override, then the built-in table, then the
/// default for unknown XIDs. For XID 154 without an override, the recovery
/// action of the message decides.
pub fn rule(xid: u32, recovery: Option<Recovery>, settings: &XidSettings) -> Rule {
    if let Some(r) = settings.catalog.get(&xid) {
        let description = r
            .description
            .clone()
            .or_else(|| builtin(xid).map(|b| b.2.to_string()))
            .unwrap_or_else(|| "configured XID".to_string());
        return Rule {
            severity: r.severity,
            action: r.action,
            description,
        };
    }
    if xid == RECOVERY_XID {
        // "Reset required" leaves the GPU unusable until it is reset, like XID 48.
        let (severity, action, words) = match recovery {
            Some(Recovery::None) => (Severity::Ok, Action::None, "no recovery action needed"),
            Some(Recovery::Drain) => (Severity::Drain, Action::ResetGpu, "drain, then reset GPU"),
            Some(Recovery::Reset) => (Severity::Down, Action::ResetGpu, "GPU reset required"),
            Some(Recovery::Reboot) => (Severity::Down, Action::Reboot, "node reboot required"),
            None => (
                Severity::Warning,
                Action::Investigate,
                "unrecognised recovery action",
            ),
        };
        return Rule {
            severity,
            action,
            description: format!("recovery action changed: {words}"),
        };
    }
    match builtin(xid) {
        Some((severity, action, description)) => Rule {
            severity,
            action,
            description: description.to_string(),
        },
        None => Rule {
            severity: Severity::Warning,
            action: Action::Investigate,
            description: "XID not in the catalog".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::XidRule;

    #[test]
    fn the_builtin_table_follows_the_digest() {
        let s = XidSettings::default();
        assert_eq!(rule(79, None, &s).severity, Severity::Down);
        assert_eq!(rule(79, None, &s).action, Action::Reboot);
        assert_eq!(rule(48, None, &s).severity, Severity::Down);
        assert_eq!(rule(13, None, &s).severity, Severity::Warning);
        assert_eq!(rule(43, None, &s).severity, Severity::Ok);
        assert_eq!(rule(63, None, &s).severity, Severity::Drain);
        assert_eq!(rule(147, None, &s).severity, Severity::Down);
        let unknown = rule(999, None, &s);
        assert_eq!(
            (unknown.severity, unknown.action),
            (Severity::Warning, Action::Investigate)
        );
    }

    #[test]
    fn xid_154_follows_its_message_unless_configured() {
        let mut s = XidSettings::default();
        let of = |r, s: &XidSettings| rule(154, r, s).severity;
        assert_eq!(of(Some(Recovery::None), &s), Severity::Ok);
        assert_eq!(of(Some(Recovery::Drain), &s), Severity::Drain);
        assert_eq!(of(Some(Recovery::Reset), &s), Severity::Down);
        assert_eq!(rule(154, Some(Recovery::Reboot), &s).action, Action::Reboot);
        assert_eq!(of(None, &s), Severity::Warning);
        s.catalog.insert(
            154,
            XidRule {
                severity: Severity::Warning,
                action: Action::Investigate,
                description: None,
            },
        );
        assert_eq!(of(Some(Recovery::Reboot), &s), Severity::Warning);
    }

    #[test]
    fn config_overrides_win() {
        let mut s = XidSettings::default();
        s.catalog.insert(
            79,
            XidRule {
                severity: Severity::Drain,
                action: Action::Repair,
                description: None,
            },
        );
        let r = rule(79, None, &s);
        assert_eq!((r.severity, r.action), (Severity::Drain, Action::Repair));
        assert_eq!(r.description, "GPU has fallen off the bus");
    }
}
