//! What the kernel-log matchers of the XID check share about a since-boot
//! tally of one (code, entity): the line text it keeps, and when it still
//! counts as a finding.

use crate::finding::Finding;
use lemonade_config::{Action, Severity, WindowsBySeverity};

/// Longest line text kept.
pub const MAX_TEXT: usize = 240;

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Whether a tally of `severity` last seen at `since` still counts at
/// `now`: `down` until reboot, the others for their severity's window.
pub fn still_counts(severity: Severity, since: i64, windows: &WindowsBySeverity, now: i64) -> bool {
    match severity {
        Severity::Ok => false,
        Severity::Down => true,
        Severity::Drain => now - since <= windows.drain as i64,
        Severity::Warning | Severity::Unknown => now - since <= windows.warning as i64,
    }
}

/// The finding of a tally that counts: `entity xN: `line``.
pub fn finding(
    entity: &str,
    code: &str,
    severity: Severity,
    action: Action,
    count: u64,
    text: &str,
) -> Finding {
    Finding::new("xid", entity, code, severity)
        .actual(format!("{count} since boot"))
        .action(action)
        .message(format!("{entity} x{count}: `{text}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary_with_an_ellipsis() {
        assert_eq!(clip("ééé", 2), "éé…");
        assert_eq!(clip("abc", 3), "abc");
    }

    #[test]
    fn down_counts_until_reboot_and_the_others_for_their_window() {
        let w = WindowsBySeverity {
            drain: 100,
            warning: 10,
        };
        assert!(still_counts(Severity::Down, 0, &w, 1_000_000));
        assert!(still_counts(Severity::Drain, 0, &w, 100));
        assert!(!still_counts(Severity::Drain, 0, &w, 101));
        assert!(!still_counts(Severity::Warning, 0, &w, 11));
        assert!(!still_counts(Severity::Ok, 0, &w, 0));
    }
}
