//! What the suite needs to know of this node: its GPU count (`{gpus}`),
//! its RDMA devices (per-HCA benchmarks) and its SKU (which learned bands
//! apply), read from the node's root like the checks read it.

use super::suite::NodeHardware;
use crate::checks::gpu::count::is_nvidia_gpu;
use crate::checks::{firmware, pcie};
use crate::root::NodeRoot;
use lemonade_config::{Config, PcieSettings};

/// The node as validation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub sku: String,
    pub hardware: NodeHardware,
}

/// Reads the node below `root`. The SKU is `[validate] sku` when set, else
/// computed from NVML's GPU names and the HCAs' `hca_type`
/// (`validate::sku::sku`); a node with GPUs whose names NVML cannot give
/// has no SKU, which is an error naming the fix.
pub fn identify(config: &Config, root: &NodeRoot) -> Result<Identity, String> {
    let pci = pcie::sysfs::gather(root, &PcieSettings::default())
        .map_err(|e| format!("cannot list the PCI devices: {e}"))?;
    let gpus = pci
        .functions
        .iter()
        .filter(|f| is_nvidia_gpu(&f.vendor, &f.class))
        .count();
    let rdma =
        firmware::sysfs::gather(root).map_err(|e| format!("cannot list the RDMA devices: {e}"))?;
    let hardware = NodeHardware {
        gpus,
        hcas: rdma.hcas.iter().map(|h| h.device.clone()).collect(),
    };
    if let Some(sku) = &config.validate.sku {
        return Ok(Identity {
            sku: sku.clone(),
            hardware,
        });
    }
    let names = if gpus == 0 {
        Vec::new()
    } else {
        gpu_names(config)?
    };
    let types: Vec<&str> = rdma
        .hcas
        .iter()
        .map(|h| h.hca_type.as_deref().unwrap_or(h.device.as_str()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok(Identity {
        sku: validate::sku::sku(&names, &types),
        hardware,
    })
}

fn gpu_names(config: &Config) -> Result<Vec<String>, String> {
    let fix = "set [validate] sku in the node's config";
    let nvml = crate::nvml_handle::load(&config.checks.gpu.library_path)
        .map_err(|e| format!("cannot tell the SKU: {}; {fix}", e.message))?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("cannot tell the SKU: NVML: {e}; {fix}"))?;
    (0..count)
        .map(|i| {
            nvml.device_by_index(i)
                .and_then(|d| d.name())
                .map_err(|e| format!("cannot tell the SKU: NVML GPU {i}: {e}; {fix}"))
        })
        .collect()
}
