//! Which GPU a bus id is: `gpuN`, N being its index in PCI bus order among the
//! NVIDIA display and 3D functions in sysfs (the order `nvidia-smi` numbers
//! them in by default, with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).

use super::parse::normalize_bus;
use crate::root::{NodeRoot, ReadError};

const PCI_DEVICES: &str = "/sys/bus/pci/devices";
const NVIDIA: &str = "0x10de";
/// PCI base class 0x03: display controllers (VGA 0x0300, 3D 0x0302).
const DISPLAY_CLASS: &str = "0x03";

/// NVIDIA display/3D functions in sysfs, by sysfs name (`0000:18:00.0`), in bus order.
pub fn nvidia_gpus(root: &NodeRoot) -> Result<Vec<String>, ReadError> {
    let mut gpus = Vec::new();
    for name in root.list_dir(PCI_DEVICES)? {
        let dir = format!("{PCI_DEVICES}/{name}");
        if root.read_value_opt(format!("{dir}/vendor"))?.as_deref() != Some(NVIDIA) {
            continue;
        }
        let class = root.read_value_opt(format!("{dir}/class"))?;
        if class.is_some_and(|c| c.starts_with(DISPLAY_CLASS)) {
            gpus.push(name);
        }
    }
    // sysfs names are fixed-width lower-case hex, so text order is bus order.
    gpus.sort();
    Ok(gpus)
}

/// A GPU as findings name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gpu {
    /// Index in bus order; `None` for a bus id that sysfs does not show.
    pub index: Option<usize>,
    /// `gpu3`, or `pci:0000:c6:00`.
    pub entity: String,
    /// The sysfs name (`0000:c6:00.0`) when known, else the driver's bus id.
    pub pci: String,
}

/// The GPU of a driver bus id (`0000:c6:00`), given the sysfs GPUs.
pub fn gpu_of(bus: &str, gpus: &[String]) -> Gpu {
    match gpus
        .iter()
        .position(|g| normalize_bus(g).as_deref() == Some(bus))
    {
        Some(index) => Gpu {
            index: Some(index),
            entity: format!("gpu{index}"),
            pci: gpus[index].clone(),
        },
        None => Gpu {
            index: None,
            entity: format!("pci:{bus}"),
            pci: bus.to_string(),
        },
    }
}

/// The GPU at sysfs position `index`.
pub fn gpu_at(index: usize, gpus: &[String]) -> Gpu {
    Gpu {
        index: Some(index),
        entity: format!("gpu{index}"),
        pci: gpus[index].clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_map_to_their_index_or_stay_pci_addresses() {
        let gpus = vec!["0000:18:00.0".to_string(), "0000:2a:00.0".to_string()];
        assert_eq!(gpu_of("0000:2a:00", &gpus).entity, "gpu1");
        assert_eq!(gpu_of("0000:2a:00", &gpus).pci, "0000:2a:00.0");
        let stray = gpu_of("0000:c6:00", &gpus);
        assert_eq!(
            (stray.entity.as_str(), stray.index),
            ("pci:0000:c6:00", None)
        );
    }

    #[test]
    fn only_nvidia_display_functions_count() {
        let dir = tempfile::tempdir().unwrap();
        for (name, vendor, class) in [
            ("0000:2a:00.0", "0x10de", "0x030200"),
            ("0000:18:00.0", "0x10de", "0x030000"),
            ("0000:18:00.1", "0x10de", "0x040300"), // its audio function
            ("0000:05:00.0", "0x10de", "0x068000"), // NVSwitch
            ("0000:3b:00.0", "0x15b3", "0x020700"),
        ] {
            let d = dir.path().join("sys/bus/pci/devices").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
        }
        let gpus = nvidia_gpus(&NodeRoot::new(dir.path())).unwrap();
        assert_eq!(gpus, vec!["0000:18:00.0", "0000:2a:00.0"]);
    }
}
