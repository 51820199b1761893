//! `block`: the node's NVMe namespaces: count, size, controller state, writable.
//!
//! [`sysfs::gather`] reads `/sys/block/nvme*n*`; [`evaluate::evaluate`]
//! compares them with the expected count and size, and judges each one's
//! controller state (`live`) and read-only flag.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::evaluate;
pub use sysfs::{gather, BlockData, Namespace};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "block";

/// The `block` check.
pub struct Block;

impl Check for Block {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "NVMe namespaces: expected count and size, controller live, not read-only"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.block;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let data = gather(&ctx.root)?;
        Ok(CheckOutput::findings(evaluate(
            &data,
            &ctx.config.checks.block,
        )))
    }
}
