//! `cpus`: the logical CPUs online against the number a healthy node has.
//!
//! [`sysfs::gather`] reads `/sys/devices/system/cpu/online`; [`evaluate::evaluate`]
//! compares its count with `expected_online`. A CPU the kernel took offline
//! after a machine check, or a socket missing after a reboot, shows here.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::evaluate;
pub use sysfs::{gather, CpuData};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "cpus";

/// The `cpus` check.
pub struct Cpus;

impl Check for Cpus {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "online CPUs vs the expected count"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.cpus;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.cpus;
        if settings.expected_online.is_none() {
            return Ok(CheckOutput::default());
        }
        let data = gather(&ctx.root)?;
        Ok(CheckOutput::findings(evaluate(&data, settings)))
    }
}
