//! Reading firmware versions from DMI and the RDMA devices.

use crate::check::CheckError;
use crate::checks::ib::sysfs::CLASS_DIR;
use crate::root::NodeRoot;

pub const DMI_DIR: &str = "/sys/class/dmi/id";

/// What gather found; a file the node lacks (no DMI in a VM) is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirmwareData {
    pub bios_version: Option<String>,
    pub board_name: Option<String>,
    pub hcas: Vec<Hca>,
}

/// One RDMA device's firmware.
#[derive(Debug, Clone, PartialEq)]
pub struct Hca {
    /// `mlx5_0`.
    pub device: String,
    /// `MT4129`: HCAs are held to the majority of their own type.
    pub hca_type: Option<String>,
    /// `28.39.1002`.
    pub fw_ver: String,
}

/// Reads the DMI versions and every RDMA device's `fw_ver`.
pub fn gather(root: &NodeRoot) -> Result<FirmwareData, CheckError> {
    let dmi = |name: &str| -> Result<Option<String>, CheckError> {
        Ok(root
            .read_value_opt(format!("{DMI_DIR}/{name}"))?
            .map(|v| v.trim().to_string()))
    };
    let mut data = FirmwareData {
        bios_version: dmi("bios_version")?,
        board_name: dmi("board_name")?,
        hcas: Vec::new(),
    };
    for device in root.list_dir(CLASS_DIR)? {
        let Some(fw_ver) = root.read_value_opt(format!("{CLASS_DIR}/{device}/fw_ver"))? else {
            continue;
        };
        let hca_type = root.read_value_opt(format!("{CLASS_DIR}/{device}/hca_type"))?;
        data.hcas.push(Hca {
            device,
            hca_type: hca_type.map(|t| t.trim().to_string()),
            fw_ver: fw_ver.trim().to_string(),
        });
    }
    Ok(data)
}
