//! Every finding code a run can produce, in one typed table: which check
//! emits it, its default severity, the repair it leads to, what it means and
//! how a site silences it.
//!
//! The code strings themselves stay with the check that emits them (a
//! `pub const` next to its evaluation); the table refers to those constants,
//! so each string has one owner. The book's checks reference and the
//! `lemonade-checks(7)` man page are generated from this table
//! (`lemonade-docgen`), and a test scans the crate's sources so that a code
//! emitted without an entry here fails the build's tests.
//!
//! * [`gpu`]: the NVML checks (`gpu`, `ecc`, `nvlink`, `gpu-pcie`, `clocks`,
//!   `gpu-procs`) and the NVSwitch `fabric` check.
//! * [`host`]: the host checks read from sysfs and procfs.
//! * [`imex`]: the `imex` check (multi-node NVLink domains).
//! * [`kernel`]: the `xid` check's pass over the kernel log.
//! * [`run`]: what the run itself reports (timeouts, config, store, Slurm).

mod gpu;
mod host;
mod imex;
mod kernel;
mod run;

#[cfg(test)]
mod coverage_tests;

use lemonade_config::{Action, Severity};
use std::borrow::Cow;

/// The code a finding carries: one fixed string, or a family whose members
/// are made from a number or a name (`XID_79`, `IB_SYMBOL_ERROR_RATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Exact(&'static str),
    /// `prefix` + a member part + `suffix`; `member` names the part for
    /// readers (`<n>`, `<COUNTER>`).
    Family {
        prefix: &'static str,
        member: &'static str,
        suffix: &'static str,
    },
}

impl Code {
    /// The code as the reference shows it: `FABRIC_DOWN`, `XID_<n>`.
    pub fn display(&self) -> Cow<'static, str> {
        match *self {
            Code::Exact(code) => Cow::Borrowed(code),
            Code::Family {
                prefix,
                member,
                suffix,
            } => Cow::Owned(format!("{prefix}{member}{suffix}")),
        }
    }

    /// Whether a finding's code is this one (or a member of this family).
    pub fn matches(&self, code: &str) -> bool {
        match *self {
            Code::Exact(exact) => exact == code,
            Code::Family { prefix, suffix, .. } => code
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(|member| !member.is_empty()),
        }
    }
}

/// What the remediation does with a node a finding took out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// The finding always carries this action.
    Fixed(Action),
    /// The action depends on the event or on config; the text says how.
    Varies(&'static str),
}

/// One finding code and everything an operator needs to know about it.
#[derive(Debug, Clone, Copy)]
pub struct CodeEntry {
    pub code: Code,
    /// The check whose findings carry it (the `check` field of a finding).
    pub check: &'static str,
    /// The severities it takes with the default config, mildest first.
    pub severities: &'static [Severity],
    pub repair: Repair,
    /// One line: what happened on the node.
    pub meaning: &'static str,
    /// The config keys that turn it off or change its severity.
    pub silence: &'static str,
}

impl CodeEntry {
    /// The rung of the repair ladder (see `crate::repair`) this code leads
    /// to when it takes a node out.
    pub fn rung(&self) -> Cow<'static, str> {
        let takes_out = self
            .severities
            .iter()
            .any(|s| matches!(s, Severity::Drain | Severity::Down));
        match self.repair {
            _ if !takes_out => Cow::Borrowed("none (recorded only)"),
            Repair::Fixed(action) => Cow::Borrowed(rung_of(action)),
            Repair::Varies(how) => Cow::Borrowed(how),
        }
    }
}

/// An entry with one fixed code and one action: most of the table.
pub(crate) const fn exact(
    check: &'static str,
    code: &'static str,
    severities: &'static [Severity],
    action: Action,
    meaning: &'static str,
    silence: &'static str,
) -> CodeEntry {
    CodeEntry {
        code: Code::Exact(code),
        check,
        severities,
        repair: Repair::Fixed(action),
        meaning,
        silence,
    }
}

/// The remediation's rung for a finding's action.
pub fn rung_of(action: Action) -> &'static str {
    match action {
        Action::ResetGpu => "reset-gpu (then reboot if the check still fails)",
        Action::RestartImex => {
            "restart-imex (recreate the channel, restart the daemon, check again; then reboot)"
        }
        Action::Reboot => "reboot (`scontrol reboot ASAP`, checked after)",
        Action::None | Action::RestartApp => "none (resumed once clean)",
        Action::Repair | Action::Investigate => "none (human)",
    }
}

/// Every entry, grouped by check family in the order the reference shows.
pub fn all() -> impl Iterator<Item = &'static CodeEntry> {
    kernel::ENTRIES
        .iter()
        .chain(gpu::ENTRIES)
        .chain(host::ENTRIES)
        .chain(imex::ENTRIES)
        .chain(run::ENTRIES)
}

/// The entry for a finding's code: an exact entry first, then a family.
pub fn lookup(code: &str) -> Option<&'static CodeEntry> {
    all()
        .find(|e| matches!(e.code, Code::Exact(c) if c == code))
        .or_else(|| all().find(|e| e.code.matches(code)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xid_code_finds_the_xid_family_entry() {
        let entry = lookup("XID_79").expect("the XID family");
        assert_eq!(entry.code.display(), "XID_<n>");
        assert!(lookup("XID_").is_none());
    }

    #[test]
    fn every_default_ib_counter_has_its_rate_code_in_the_table() {
        let settings = lemonade_config::Config::default().checks.ib;
        for counter in settings.counters.keys() {
            let code = crate::checks::ib::evaluate::rate_code(counter);
            assert!(lookup(&code).is_some(), "{code}");
        }
    }

    #[test]
    fn an_exact_code_wins_over_a_family_it_also_matches() {
        let entry = lookup(crate::checks::xid::evaluate::XID_PARSE_ERROR).unwrap();
        assert!(matches!(entry.code, Code::Exact(_)));
    }

    #[test]
    fn no_code_has_two_entries() {
        let mut seen = std::collections::BTreeSet::new();
        for e in all() {
            assert!(seen.insert(e.code.display()), "{}", e.code.display());
        }
    }

    #[test]
    fn a_warning_only_code_leads_to_no_repair() {
        let entry = lookup(crate::checks::gpu::clocks::CLOCKS_THROTTLED).unwrap();
        assert_eq!(entry.rung(), "none (recorded only)");
    }
}
