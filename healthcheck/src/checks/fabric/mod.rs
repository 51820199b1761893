//! `fabric`: the NVSwitch fabric of an HGX node. Without it the GPUs cannot
//! talk over NVLink, and every multi-GPU job fails or crawls.
//!
//! Runs where the config says the node has NVSwitches, or (unset) where
//! [`sysfs::nvswitch_count`] finds them on the PCI bus. It looks for the
//! fabric manager's process (the `services` scan of `/proc`), reads the new
//! error lines of its log ([`log`]), and asks NVML for each GPU's fabric
//! registration ([`crate::checks::gpu::fabric`]); [`evaluate`] judges.

pub mod evaluate;
pub mod log;
pub mod sysfs;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    BACKGROUND_PROFILES,
};
use crate::checks::gpu::fabric::{fabric_info, FabricInfo};
use crate::checks::gpu::session::{self, Failure, GpuData};
use crate::checks::services::procfs;
use crate::finding::Finding;
use lemonade_config::Config;
use serde::{Deserialize, Serialize};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "fabric";

/// The `fabric` check.
pub struct Fabric;

/// Kept between runs: where the log was read up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FabricState {
    pub log: Option<log::LogCursor>,
}

impl Check for Fabric {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "NVSwitch fabric: fabric manager running, its log's errors, each GPU's fabric state (NVML)"
    }
    /// Not in the prolog, as `services`: the /proc scan grows with the tasks.
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.fabric;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let s = &ctx.config.checks.fabric;
        let has_fabric = match s.nvswitch {
            Some(configured) => configured,
            None => sysfs::nvswitch_count(&ctx.root)? > 0,
        };
        if !has_fabric {
            return Ok(CheckOutput::default());
        }
        let service = procfs::comm_name(&s.service).to_string();
        let running = procfs::gather(&ctx.root, std::slice::from_ref(&service))?;
        let previous: FabricState = previous_state(ctx);
        let log = log::read_new(&ctx.root, &s.log_path, previous.log)?;
        let mut findings = evaluate::manager(running.0.contains_key(&service), &log, s);
        findings.extend(gpu_findings(ctx));
        let state = FabricState {
            log: log.present.then_some(log.cursor),
        };
        Ok(CheckOutput::with_state(findings, &state))
    }
}

/// Each GPU's registration, through the run's NVML session; nothing on a node
/// that expects no GPUs, `unknown` when NVML does not answer.
fn gpu_findings(ctx: &CheckContext) -> Vec<Finding> {
    if !session::expects_gpus(ctx) {
        return Vec::new();
    }
    let nvml = match session::nvml(ctx) {
        Ok(nvml) => nvml,
        Err(e) => return vec![session::init_unknown(NAME, &e)],
    };
    let gpus: Result<Vec<GpuData<Option<FabricInfo>>>, Failure> =
        session::per_gpu(&nvml, |d| session::optional(fabric_info(&nvml, d)));
    match gpus {
        Ok(gpus) => evaluate::gpus(&gpus, &ctx.config.checks.fabric),
        Err(e) => vec![session::node_unknown(NAME, &e)],
    }
}
