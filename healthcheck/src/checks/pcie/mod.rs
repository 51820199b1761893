//! `pcie`: link speed and width and AER error counters of the GPUs and NICs.
//!
//! [`sysfs::gather`] reads `/sys/bus/pci/devices/*` for the configured vendors;
//! [`evaluate::evaluate`] compares each link with its maximum and with the
//! config's expectations, counts devices, and turns AER counter growth since
//! the previous run into findings.

pub mod evaluate;
pub mod sysfs;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::{evaluate, PcieState};
pub use sysfs::{gather, Aer, Link, PciFunction, PcieData};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "pcie";

/// The `pcie` check.
pub struct Pcie;

impl Check for Pcie {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "PCIe link speed/width of GPUs and HCAs vs max and config, device counts, AER error growth"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.pcie;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.pcie;
        let data = gather(&ctx.root, settings)?;
        let previous: PcieState = previous_state(ctx);
        let (findings, state) = evaluate(&data, settings, &previous, ctx.now.timestamp());
        Ok(CheckOutput::with_state(findings, &state))
    }
}
