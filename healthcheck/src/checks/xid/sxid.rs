//! NVSwitch SXid lines and what each SXid means for the node.
//!
//! `nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)`
//!
//! The driver says itself whether an SXid is `Fatal` or `Non-fatal`; that
//! word decides unless the built-in table (from the Fabric Manager user
//! guide's SXid appendix) or `[checks.xid.kernel_faults.sxid_catalog."N"]`
//! knows better.

use lemonade_config::{Action, KernelFaultSettings, Severity};

/// One SXid report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SxidLine {
    /// `nvswitch3` from the `nvidia-nvswitch3:` prefix, else the switch's bus id.
    pub switch: String,
    pub sxid: u32,
    /// `Some(true)` for `Fatal`, `Some(false)` for `Non-fatal`, `None` if the line says neither.
    pub fatal: Option<bool>,
}

/// Reads an SXid line; `None` for any other line.
pub fn parse(message: &str) -> Option<SxidLine> {
    let at = message.find("SXid (")?;
    let before = message[..at].trim_end().trim_end_matches(':');
    let rest = &message[at + "SXid (".len()..];
    let (location, after) = rest.split_once(')')?;
    let mut fields = after.strip_prefix(':')?.split(',');
    let number = fields.next()?.trim();
    let sxid = number
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| number.parse().ok())??;
    let fatal = match fields.next().map(str::trim) {
        Some(w) if w.eq_ignore_ascii_case("fatal") => Some(true),
        Some(w) if w.eq_ignore_ascii_case("non-fatal") => Some(false),
        _ => None,
    };
    let switch = match before.rsplit_once("nvidia-") {
        Some((_, name)) if name.starts_with("nvswitch") => name.to_string(),
        _ => format!(
            "nvswitch@{}",
            location
                .trim()
                .trim_start_matches("PCI:")
                .to_ascii_lowercase()
        ),
    };
    Some(SxidLine {
        switch,
        sxid,
        fatal,
    })
}

/// The built-in entry for `sxid`, if there is one.
pub fn builtin(sxid: u32) -> Option<(Severity, Action, &'static str)> {
    use Action::*;
    use Severity::*;
    Some(match sxid {
        // Always fatal: only a restart of the host resets the fabric.
        10003 => (Down, Reboot, "host unhandled interrupt"),
        // Corrected single-bit ECC: recorded, nothing to do.
        11012
        | 11021
        | 11022
        | 11023
        | 12021
        | 12023
        | 15008
        | 15011
        | 19049
        | 19055
        | 19057
        | 19059
        | 19062
        | 19065
        | 19068
        | 19071
        | 24001..=24003 => (Ok, Action::None, "single-bit ECC error (corrected)"),
        11004 => (Drain, Reboot, "ingress invalid ACL"),
        12028 => (Drain, Reboot, "egress non-posted PRIV error"),
        19084 => (Drain, Reboot, "AN1 heartbeat timeout"),
        20001 => (Warning, Investigate, "TX replay error"),
        20012 => (Warning, Investigate, "broken or inconsistent connection"),
        22013 => (Warning, Investigate, "minion link DLREQ interrupt"),
        _ => return Option::None,
    })
}

/// Severity and action of `sxid`: config override, built-in table, then the
/// driver's own `Fatal`/`Non-fatal`.
pub fn rule(sxid: u32, fatal: Option<bool>, s: &KernelFaultSettings) -> (Severity, Action) {
    if let Some(r) = s.sxid_catalog.get(&sxid) {
        return (r.severity, r.action);
    }
    if let Some((severity, action, _)) = builtin(sxid) {
        return (severity, action);
    }
    match fatal {
        Some(true) => (s.sxid_fatal_severity, Action::Reboot),
        _ => (s.sxid_non_fatal_severity, Action::Investigate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sxid_lines_give_switch_number_and_fatality() {
        assert_eq!(
            parse("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"),
            Some(SxidLine { switch: "nvswitch3".into(), sxid: 12028, fatal: Some(false) })
        );
        assert_eq!(
            parse(
                "nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"
            ),
            Some(SxidLine {
                switch: "nvswitch0".into(),
                sxid: 20034,
                fatal: Some(true)
            })
        );
        assert_eq!(
            parse("SXid (PCI:0000:C6:00.0): 11004, Severity 1 Engine instance 04"),
            Some(SxidLine {
                switch: "nvswitch@0000:c6:00.0".into(),
                sxid: 11004,
                fatal: None
            })
        );
        assert_eq!(
            parse("nvidia-nvswitch0: SXid (PCI:0000:00:00.0): xyz, Fatal error"),
            None
        );
        assert_eq!(
            parse("NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus."),
            None
        );
    }

    #[test]
    fn the_catalog_and_config_beat_the_drivers_word() {
        let mut s = KernelFaultSettings::default();
        assert_eq!(
            rule(20034, Some(true), &s),
            (Severity::Drain, Action::Reboot)
        );
        assert_eq!(rule(99999, Some(false), &s).0, Severity::Warning);
        assert_eq!(rule(99999, None, &s).0, Severity::Warning);
        assert_eq!(rule(12028, Some(false), &s).0, Severity::Drain);
        assert_eq!(rule(11012, Some(false), &s).0, Severity::Ok);
        assert_eq!(rule(10003, Some(true), &s).0, Severity::Down);
        s.sxid_catalog.insert(
            12028,
            lemonade_config::XidRule {
                severity: Severity::Ok,
                action: Action::None,
                description: None,
            },
        );
        assert_eq!(rule(12028, Some(false), &s), (Severity::Ok, Action::None));
    }
}
