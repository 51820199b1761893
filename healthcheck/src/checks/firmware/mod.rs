//! `firmware`: BIOS version and board (DMI) and InfiniBand HCA firmware,
//! each against the expected value, or else against the node's own majority.
//! Firmware shows up among the root causes of lemon nodes; a mismatch is a
//! `warning` by default (the node works, but is not like its peers).
//!
//! [`sysfs::gather`] reads `/sys/class/dmi/id/` and `/sys/class/infiniband/*/fw_ver`;
//! [`evaluate::evaluate`] compares. GPU VBIOS is the `gpu` check's.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, BACKGROUND_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::evaluate;
pub use sysfs::{gather, FirmwareData, Hca};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "firmware";

/// The `firmware` check.
pub struct Firmware;

impl Check for Firmware {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "BIOS version, board and HCA firmware vs expected (HCAs: else the node's majority)"
    }
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.firmware;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let data = gather(&ctx.root)?;
        Ok(CheckOutput::findings(evaluate(
            &data,
            &ctx.config.checks.firmware,
            &ctx.config.checks.ib.exclude,
        )))
    }
}
