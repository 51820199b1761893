//! `modules`: kernel modules a job needs and nothing else checks, above all
//! `nvidia_peermem`, without which GPUDirect RDMA silently falls back to
//! copies through host memory.
//!
//! [`procfs::loaded`] reads `/proc/modules`; [`evaluate::required`] says what
//! the node needs (configured, or by what is on it); [`evaluate::evaluate`]
//! names each one missing.

pub mod evaluate;
pub mod procfs;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use crate::checks::gpu::count;
use lemonade_config::Config;

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "modules";

const INFINIBAND: &str = "/sys/class/infiniband";

/// The `modules` check.
pub struct Modules;

impl Check for Modules {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "required kernel modules loaded (nvidia_peermem on GPU + InfiniBand nodes)"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.modules;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let s = &ctx.config.checks.modules;
        let required = match &s.required {
            Some(_) => evaluate::required(s, false, false),
            None => {
                // A PCI bus that cannot be read is no GPU-less node: the
                // check is unknown rather than passing a node that lacks
                // its nvidia module (issue 48).
                let has_gpus = match count::expected(&ctx.config, &ctx.root) {
                    Some(n) => n > 0,
                    None => count::on_pci_bus(&ctx.root)? > 0,
                };
                let has_hcas = !ctx.root.list_dir(INFINIBAND)?.is_empty();
                evaluate::required(s, has_gpus, has_hcas)
            }
        };
        if required.is_empty() {
            return Ok(CheckOutput::default());
        }
        let loaded = procfs::loaded(&ctx.root)?;
        Ok(CheckOutput::findings(evaluate::evaluate(
            &required, &loaded, s,
        )))
    }
}
