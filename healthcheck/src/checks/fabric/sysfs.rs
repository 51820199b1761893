//! Whether the node has an NVSwitch fabric: NVSwitches on the PCI bus.

use crate::check::CheckError;
use crate::root::NodeRoot;

const PCI_DEVICES: &str = "/sys/bus/pci/devices";
const NVIDIA: &str = "0x10de";
/// PCI class "bridge, other": what an NVSwitch reports (`0x068000`).
const NVSWITCH_CLASS: &str = "0x0680";

/// The number of NVSwitches (NVIDIA functions of class `0x0680xx`).
pub fn nvswitch_count(root: &NodeRoot) -> Result<usize, CheckError> {
    let mut count = 0;
    for bdf in root.list_dir(PCI_DEVICES)? {
        let dir = format!("{PCI_DEVICES}/{bdf}");
        let Some(vendor) = root.read_value_opt(format!("{dir}/vendor"))? else {
            continue;
        };
        if !vendor.eq_ignore_ascii_case(NVIDIA) {
            continue;
        }
        let class = root.read_value_opt(format!("{dir}/class"))?;
        if class.is_some_and(|c| c.to_ascii_lowercase().starts_with(NVSWITCH_CLASS)) {
            count += 1;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn function(root: &std::path::Path, bdf: &str, vendor: &str, class: &str) {
        let dir = root.join("sys/bus/pci/devices").join(bdf);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        fs::write(dir.join("class"), format!("{class}\n")).unwrap();
    }

    #[test]
    fn nvswitches_are_nvidia_bridges_and_gpus_are_not() {
        let dir = tempfile::tempdir().unwrap();
        function(dir.path(), "0000:05:00.0", "0x10de", "0x068000");
        function(dir.path(), "0000:06:00.0", "0x10de", "0x068000");
        function(dir.path(), "0000:18:00.0", "0x10de", "0x030200");
        function(dir.path(), "0000:00:01.0", "0x8086", "0x068000");
        let root = NodeRoot::new(dir.path());
        assert_eq!(nvswitch_count(&root).unwrap(), 2);
    }

    #[test]
    fn a_node_without_a_pci_tree_has_no_nvswitch() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(nvswitch_count(&NodeRoot::new(dir.path())).unwrap(), 0);
    }
}
