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
use lemonade_config::{Action, Config};

pub use evaluate::{evaluate, PcieState};
pub use sysfs::{gather, Aer, Link, PciFunction, PcieData};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "pcie";

/// A PCIe link that trained narrower than it can. One code with one meaning
/// and one action whichever check sees it (`pcie` from sysfs for every
/// watched function, `gpu-pcie` from NVML for the GPUs), so that an operator
/// and the head node read the same fault the same way.
pub const WIDTH_DEGRADED: &str = "PCIE_WIDTH_DEGRADED";

/// What a degraded link (narrower, slower, a lower generation) asks for, in
/// both checks: a reboot retrains the link; a link that trains degraded again
/// keeps the node drained under the same reason, and the repair is the
/// administrator's. A link that is down or a missing device asks for a repair.
pub const DEGRADED_LINK_ACTION: Action = Action::Reboot;

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
