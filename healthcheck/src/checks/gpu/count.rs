//! How many GPUs the node must have when `[checks.gpu] expected_count` is
//! `auto`: the NVIDIA display and 3D-controller functions on the PCI bus.
//!
//! The PCI bus lists a GPU that the driver lost or never bound, so NVML
//! seeing fewer than sysfs is the fault the `gpu` check reports. A node
//! without any is a CPU node, and the GPU checks are skipped there.

use crate::checks::pcie::sysfs::DEVICES_DIR;
use crate::root::{NodeRoot, ReadError};
use lemonade_config::{Config, GpuCount};

/// NVIDIA's PCI vendor id, as sysfs writes it.
const NVIDIA: &str = "0x10de";

/// Pure: whether a function with this vendor and class (`0x030200`) is an
/// NVIDIA GPU (class 0x03: VGA, XGA, 3D controller, other display). NVSwitches
/// (bridges, 0x0680) and the GPUs' audio functions (0x0403) are not.
pub fn is_nvidia_gpu(vendor: &str, class: &str) -> bool {
    let class = class.trim().to_ascii_lowercase();
    vendor.trim().eq_ignore_ascii_case(NVIDIA)
        && class.strip_prefix("0x").unwrap_or(&class).starts_with("03")
}

/// NVIDIA GPUs on the PCI bus below `root`. Virtual functions (vGPU, SR-IOV)
/// are not GPUs of their own. A function that vanished while being read
/// does not count.
pub fn on_pci_bus(root: &NodeRoot) -> Result<usize, ReadError> {
    let mut count = 0;
    for bdf in root.list_dir(DEVICES_DIR)? {
        let dir = format!("{DEVICES_DIR}/{bdf}");
        if root.exists(format!("{dir}/physfn")) {
            continue;
        }
        let (Some(vendor), Some(class)) = (
            root.read_value_opt(format!("{dir}/vendor"))?,
            root.read_value_opt(format!("{dir}/class"))?,
        ) else {
            continue;
        };
        if is_nvidia_gpu(&vendor, &class) {
            count += 1;
        }
    }
    Ok(count)
}

/// The number of GPUs the config asks for, `auto` counted on the PCI bus.
/// `None` when `auto` cannot be counted (sysfs unreadable): the GPU checks
/// then run and NVML alone says what there is.
pub fn expected(config: &Config, root: &NodeRoot) -> Option<usize> {
    match config.checks.gpu.expected_count {
        GpuCount::Exactly(n) => Some(n),
        GpuCount::Auto => on_pci_bus(root).ok(),
    }
}

/// Replaces `auto` by the count, once per run, so that every GPU check (and
/// `healthcheck list`) sees the same number.
pub fn resolve(config: &mut Config, root: &NodeRoot) {
    if let Some(n) = expected(config, root) {
        config.checks.gpu.expected_count = GpuCount::Exactly(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nvidia_display_and_3d_functions_are_gpus() {
        assert!(is_nvidia_gpu("0x10de", "0x030200"), "3D controller");
        assert!(is_nvidia_gpu("0x10DE", "0x030000"), "VGA");
        assert!(!is_nvidia_gpu("0x10de", "0x068000"), "NVSwitch bridge");
        assert!(!is_nvidia_gpu("0x10de", "0x040300"), "the GPU's audio");
        assert!(!is_nvidia_gpu("0x15b3", "0x020700"), "a Mellanox HCA");
        assert!(!is_nvidia_gpu("0x1002", "0x030200"), "another vendor's GPU");
    }

    fn function(root: &std::path::Path, bdf: &str, vendor: &str, class: &str) {
        let dir = root.join("sys/bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
    }

    #[test]
    fn auto_counts_the_gpus_on_the_bus_and_a_number_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        function(dir.path(), "0000:18:00.0", "0x10de", "0x030200");
        function(dir.path(), "0000:2a:00.0", "0x10de", "0x030200");
        function(dir.path(), "0000:05:00.0", "0x10de", "0x068000");
        function(dir.path(), "0000:19:00.0", "0x15b3", "0x020700");
        function(dir.path(), "0000:18:00.4", "0x10de", "0x030200");
        std::fs::write(
            dir.path().join("sys/bus/pci/devices/0000:18:00.4/physfn"),
            "",
        )
        .unwrap();
        let root = NodeRoot::new(dir.path());
        let mut config = Config::default();
        assert_eq!(expected(&config, &root), Some(2));
        resolve(&mut config, &root);
        assert_eq!(config.checks.gpu.expected_count, GpuCount::Exactly(2));
        config.checks.gpu.expected_count = GpuCount::Exactly(0);
        assert_eq!(expected(&config, &root), Some(0), "an explicit 0 stays");
        let cpu = NodeRoot::new(dir.path().join("nothing-here"));
        assert_eq!(expected(&Config::default(), &cpu), Some(0));
    }
}
