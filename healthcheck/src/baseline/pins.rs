//! The baseline's pins beyond the host checks' expectations (issue 34): the
//! versions the node runs (`[expect]`, judged by the `versions` check), the
//! kernel modules jobs need (`[checks.modules] required`) and whether the
//! node has an NVSwitch fabric (`[checks.fabric] nvswitch`, so that an
//! NVSwitch falling off the bus cannot turn the fabric check off).
//!
//! Read from files only, as the rest of the baseline: the driver version is
//! the loaded `nvidia` module's; the CUDA version the driver supports and the
//! GSP firmware need NVML and are left unpinned.

use crate::check::CheckError;
use crate::checks::{fabric, modules, versions};
use crate::root::NodeRoot;
use toml::{Table, Value};

/// Modules a GPU job needs when the good node has them loaded: the driver
/// and its unified memory, GPUDirect RDMA (`nvidia_peermem`, the older
/// `nv_peer_mem`, `gdrdrv`), GPUDirect Storage (`nvidia_fs`), the RDMA stack
/// and the Lustre client. Other loaded modules are the distribution's.
pub const KNOWN_MODULES: &[&str] = &[
    "nvidia",
    "nvidia_uvm",
    "nvidia_peermem",
    "nv_peer_mem",
    "gdrdrv",
    "nvidia_fs",
    "mlx5_core",
    "mlx5_ib",
    "ib_core",
    "ib_uverbs",
    "rdma_ucm",
    "lustre",
];

/// The loaded NVIDIA kernel module's version: the driver version NVML reports.
pub const NVIDIA_MODULE_VERSION: &str = "/sys/module/nvidia/version";

/// What the good node pins beyond the checks' expectations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pins {
    pub driver: Option<String>,
    pub kernel: Option<String>,
    pub cuda_toolkit: Option<String>,
    pub nccl: Option<String>,
    /// The [`KNOWN_MODULES`] loaded now, in that order.
    pub modules: Vec<String>,
    pub nvswitch: bool,
    /// `[checks.fabric] fabric_manager` as detected: `required` with local
    /// NVSwitches (HGX), `off` on an NVL72 compute tray (Grace Blackwell GPU,
    /// no local NVSwitch), `auto` otherwise.
    pub fabric_manager: &'static str,
}

/// Reads the pins of the node below `root`.
pub fn read(root: &NodeRoot) -> Result<Pins, CheckError> {
    let loaded = modules::procfs::loaded(root)?;
    Pins {
        driver: root.read_value_opt(NVIDIA_MODULE_VERSION)?,
        kernel: versions::files::kernel(root)?,
        cuda_toolkit: versions::files::cuda_toolkit(root)?,
        nccl: versions::files::nccl(root)?,
        modules: KNOWN_MODULES
            .iter()
            .filter(|m| loaded.contains(**m))
            .map(|m| m.to_string())
            .collect(),
        nvswitch: fabric::sysfs::nvswitch_count(root)? > 0,
        fabric_manager: "auto",
    }
    .with_fabric(root)
}

impl Pins {
    /// A tray's fabric check runs on NVML's fabric state (nvswitch = true)
    /// without a fabric manager; an HGX node's needs its manager.
    fn with_fabric(mut self, root: &NodeRoot) -> Result<Pins, CheckError> {
        if fabric::local_switches(root)? {
            self.fabric_manager = "required";
        } else if fabric::grace_blackwell_in_proc(root)? {
            self.nvswitch = true;
            self.fabric_manager = "off";
        }
        Ok(self)
    }
}

impl Pins {
    /// `[expect]`: each version read; empty when none was.
    pub fn expect(&self) -> Table {
        [
            ("driver", &self.driver),
            ("kernel", &self.kernel),
            ("cuda_toolkit", &self.cuda_toolkit),
            ("nccl", &self.nccl),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.to_string(), Value::String(v))))
        .collect()
    }

    /// `[checks.modules]`: the modules loaded now are required. Written even
    /// when empty: it replaces the default (`nvidia_peermem` on a node with
    /// GPUs and HCAs), which the good node would otherwise fail.
    pub fn modules_entries(&self) -> Vec<(&'static str, Value)> {
        let names = self.modules.iter().cloned().map(Value::String).collect();
        vec![("required", Value::Array(names))]
    }

    /// `[checks.fabric]`: the fabric check runs exactly when the good node
    /// has NVSwitches.
    pub fn fabric_entries(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("nvswitch", Value::Boolean(self.nvswitch)),
            ("fabric_manager", Value::String(self.fabric_manager.into())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins_of(dir: &std::path::Path) -> Pins {
        read(&NodeRoot::new(dir)).unwrap()
    }

    #[test]
    fn a_grace_blackwell_tray_runs_the_fabric_check_without_a_fabric_manager() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = dir.path().join("proc/driver/nvidia/gpus/0008:06:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        std::fs::write(
            gpu.join("information"),
            "Model: \t\t NVIDIA GB200\nIRQ: 1\n",
        )
        .unwrap();
        let p = pins_of(dir.path());
        assert_eq!((p.nvswitch, p.fabric_manager), (true, "off"));
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev/nvidia-nvswitch0"), "").unwrap();
        assert_eq!(pins_of(dir.path()).fabric_manager, "required");
    }

    #[test]
    fn a_node_without_switches_or_trays_leaves_the_fabric_manager_to_auto() {
        let dir = tempfile::tempdir().unwrap();
        let p = pins_of(dir.path());
        assert_eq!((p.nvswitch, p.fabric_manager), (false, "auto"));
    }
}
