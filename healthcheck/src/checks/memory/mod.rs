//! `memory`: installed memory (`MemTotal`) and EDAC error counters.
//!
//! [`sysfs::gather`] reads `/proc/meminfo` and `/sys/devices/system/edac/mc/*`;
//! [`evaluate::evaluate`] compares `MemTotal` with the expected size (a DIMM
//! the firmware mapped out shrinks it) and turns the EDAC counters into
//! findings: any uncorrected error since boot, a corrected-error rate.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    BACKGROUND_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::{evaluate, MemoryState};
pub use sysfs::{gather, EdacCounter, MemoryData};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "memory";

/// The `memory` check.
pub struct Memory;

impl Check for Memory {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "MemTotal vs expected size (a DIMM mapped out), EDAC uncorrected errors and corrected-error rate"
    }
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.memory;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.memory;
        let data = gather(&ctx.root, settings.expected_total_gib.is_some())?;
        let previous: MemoryState = previous_state(ctx);
        let (findings, state) = evaluate(&data, settings, &previous, ctx.now.timestamp());
        Ok(CheckOutput::with_state(findings, &state))
    }
}
