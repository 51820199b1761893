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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::gpu::pcie as gpu_pcie;
    use crate::checks::gpu::session::{GpuData, GpuId};
    use lemonade_config::{GpuPcieSettings, PcieSettings};

    #[test]
    fn a_narrow_link_has_one_code_and_one_action_in_both_checks() {
        let sysfs = PcieData {
            functions: vec![PciFunction {
                bdf: "0000:18:00.0".into(),
                vendor: "0x10de".into(),
                device: "0x2330".into(),
                class: "0x030200".into(),
                link: Some(Link {
                    current_speed: Some(32.0),
                    max_speed: Some(32.0),
                    current_width: 8,
                    max_width: 16,
                }),
                aer: None,
            }],
            unreadable: Vec::new(),
        };
        let (seen_by_sysfs, _) =
            evaluate(&sysfs, &PcieSettings::default(), &PcieState::default(), 0);
        let nvml = vec![GpuData {
            id: GpuId::default(),
            reading: Ok(gpu_pcie::LinkReadings {
                generation: Some(5),
                max_generation: Some(5),
                width: Some(8),
                max_width: Some(16),
                replay: None,
                idle: false,
            }),
        }];
        let (seen_by_nvml, _) = gpu_pcie::evaluate(
            &nvml,
            &GpuPcieSettings::default(),
            &gpu_pcie::PcieState::default(),
            0,
        );
        let meaning = |f: &[crate::finding::Finding]| {
            let f = f
                .iter()
                .find(|f| f.code == WIDTH_DEGRADED)
                .expect("the fault");
            (f.severity, f.action)
        };
        assert_eq!(meaning(&seen_by_sysfs), meaning(&seen_by_nvml));
        assert_eq!(meaning(&seen_by_nvml).1, DEGRADED_LINK_ACTION);
    }
}
