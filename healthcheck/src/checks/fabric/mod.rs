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
use crate::checks::gpu::session::{self, GpuData};
use crate::checks::services::procfs;
use crate::finding::Finding;
use crate::root::NodeRoot;
use lemonade_config::{Config, FabricManagerMode};
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
        let (gpu_out, off_tray) = gpu_findings(ctx);
        let previous: FabricState = previous_state(ctx);
        let log = log::read_new(&ctx.root, &s.log_path, previous.log)?;
        let mut findings = Vec::new();
        let needs_manager = match s.fabric_manager {
            FabricManagerMode::Required => true,
            FabricManagerMode::Off => false,
            FabricManagerMode::Auto => !off_tray || local_switches(&ctx.root)?,
        };
        if needs_manager {
            let service = procfs::comm_name(&s.service).to_string();
            let running = procfs::gather(&ctx.root, std::slice::from_ref(&service))?;
            findings = evaluate::manager(running.0.contains_key(&service), &log, s);
        }
        findings.extend(gpu_out);
        let state = FabricState {
            log: log.present.then_some(log.cursor),
        };
        Ok(CheckOutput::with_state(findings, &state))
    }
}

/// Whether NVSwitch devices are on this node: on the PCI bus, or the
/// nvswitch driver's `/proc` directory or `/dev/nvidia-nvswitch*` nodes. An
/// HGX baseboard has them; an NVL72 compute tray does not.
pub fn local_switches(root: &NodeRoot) -> Result<bool, CheckError> {
    if sysfs::nvswitch_count(root)? > 0 || root.exists("/proc/driver/nvidia-nvswitch") {
        return Ok(true);
    }
    // Names only: nothing under /dev is opened or followed.
    let dev = list(root, "/dev")?;
    Ok(dev.iter().any(|n| n.starts_with("nvidia-nvswitch")))
}

fn list(root: &NodeRoot, dir: &str) -> Result<Vec<String>, CheckError> {
    Ok(root.list_dir(dir)?)
}

/// Whether the driver's `/proc` names a Grace Blackwell NVL72 GPU (`Model:`
/// of `/proc/driver/nvidia/gpus/*/information`): what the baseline, which
/// reads files only, has in place of NVML's name.
pub fn grace_blackwell_in_proc(root: &NodeRoot) -> Result<bool, CheckError> {
    for gpu in list(root, "/proc/driver/nvidia/gpus")? {
        let path = format!("/proc/driver/nvidia/gpus/{gpu}/information");
        let Some(info) = root.read_value_opt(&path)? else {
            continue;
        };
        let model = info.lines().find_map(|l| l.strip_prefix("Model:"));
        if model.is_some_and(|m| m.contains("GB200") || m.contains("GB300")) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the GPUs say their fabric is managed off the node: a Grace
/// Blackwell NVL72 GPU by name, or a fabric with a cluster UUID set (a
/// multi-node NVLink domain).
fn managed_off_node(names: &[Option<String>], infos: &[Option<FabricInfo>]) -> bool {
    let grace_blackwell = names
        .iter()
        .flatten()
        .any(|n| n.contains("GB200") || n.contains("GB300"));
    grace_blackwell || infos.iter().flatten().any(|f| f.cluster_uuid != [0; 16])
}

/// Each GPU's registration, through the run's NVML session; nothing on a node
/// that expects no GPUs, `unknown` when NVML does not answer. With it, whether
/// the GPUs' fabric is managed off the node ([`managed_off_node`]).
fn gpu_findings(ctx: &CheckContext) -> (Vec<Finding>, bool) {
    if !session::expects_gpus(ctx) {
        return (Vec::new(), false);
    }
    let nvml = match session::nvml(ctx) {
        Ok(nvml) => nvml,
        Err(e) => return (vec![session::init_unknown(NAME, &e)], false),
    };
    let read = session::per_gpu(&nvml, |d| {
        Ok((session::optional(fabric_info(&nvml, d))?, d.name().ok()))
    });
    let gpus = match read {
        Ok(gpus) => gpus,
        Err(e) => return (vec![session::node_unknown(NAME, &e)], false),
    };
    let mut names = Vec::new();
    let infos: Vec<GpuData<Option<FabricInfo>>> = gpus
        .into_iter()
        .map(|g| GpuData {
            id: g.id,
            reading: g.reading.map(|(info, name)| {
                names.push(name);
                info
            }),
        })
        .collect();
    let read: Vec<Option<FabricInfo>> = infos
        .iter()
        .filter_map(|g| g.reading.as_ref().ok().cloned())
        .collect();
    let off_node = managed_off_node(&names, &read);
    (evaluate::gpus(&infos, &ctx.config.checks.fabric), off_node)
}
