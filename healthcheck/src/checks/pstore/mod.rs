//! `pstore`: the crash logs a panic left in `/sys/fs/pstore`, said once each.
//!
//! A node that panicked and rebooted looks healthy; its pstore entries are
//! the only trace. [`sysfs::gather`] lists them and reads the new ones; the
//! names seen are kept in the check state, so each is reported by one run
//! only (until `systemd-pstore` or an operator removes it, and a new panic
//! writes another).

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    BACKGROUND_PROFILES,
};
use lemonade_config::Config;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "pstore";

/// The `pstore` check.
pub struct Pstore;

/// The entries already reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PstoreState {
    pub seen: BTreeSet<String>,
}

impl Check for Pstore {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "crash logs of the last panic in /sys/fs/pstore, each reported once"
    }
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.pstore;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let s = &ctx.config.checks.pstore;
        let previous: PstoreState = previous_state(ctx);
        let (names, new) = sysfs::gather(&ctx.root, &|n| previous.seen.contains(n), s.quote_lines)?;
        let state = PstoreState {
            seen: names.into_iter().collect(),
        };
        Ok(CheckOutput::with_state(evaluate::evaluate(&new, s), &state))
    }
}
