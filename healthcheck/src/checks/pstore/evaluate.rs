//! Pure: new pstore entries to findings, each said once.

use super::sysfs::Entry;
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, PstoreSettings};

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const PSTORE_CRASH_LOG: &str = "PSTORE_CRASH_LOG";

/// One `PSTORE_CRASH_LOG` per new entry, quoting its panic; ok without one.
pub fn evaluate(new: &[Entry], s: &PstoreSettings) -> Vec<Finding> {
    if new.is_empty() {
        return vec![Finding::ok(NAME, "pstore")];
    }
    new.iter()
        .map(|e| {
            let quote = e.panic.join(" | ");
            Finding::new(NAME, e.name.as_str(), PSTORE_CRASH_LOG, s.severity)
                .expected("no crash log")
                .actual(e.panic.first().cloned().unwrap_or_default())
                .action(Action::Investigate)
                .message(format!(
                    "the kernel left a crash log in /sys/fs/pstore/{}: {quote}",
                    e.name
                ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    #[test]
    fn each_new_entry_is_a_warning_quoting_its_panic() {
        let e = Entry {
            name: "dmesg-efi-173600000001".into(),
            panic: vec!["Kernel panic - not syncing: Fatal hardware error!".into()],
        };
        let f = evaluate(&[e], &PstoreSettings::default());
        assert_eq!(
            (f[0].code.as_str(), f[0].severity),
            ("PSTORE_CRASH_LOG", Severity::Warning)
        );
        assert!(f[0].message.contains("Fatal hardware error"));
    }
}
