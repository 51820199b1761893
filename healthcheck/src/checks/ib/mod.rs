//! `ib`: InfiniBand ports: state, rate, HCA count and error-counter growth.
//!
//! [`sysfs::gather`] reads `/sys/class/infiniband/*/ports/*`;
//! [`evaluate::evaluate`] judges each port that config does not exclude.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::{evaluate, IbState};
pub use sysfs::{gather, IbData, Port};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "ib";

/// The `ib` check.
pub struct Ib;

impl Check for Ib {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "InfiniBand ports ACTIVE/LinkUp at the expected rate, HCA count, error-counter rates"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.ib;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.ib;
        let data = gather(&ctx.root, settings)?;
        let previous: IbState = previous_state(ctx);
        let (findings, state) = evaluate(&data, settings, &previous, ctx.now.timestamp());
        Ok(CheckOutput::with_state(findings, &state))
    }
}
