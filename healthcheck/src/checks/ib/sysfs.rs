//! Reading InfiniBand ports from sysfs, in the formats the kernel writes.

use crate::check::CheckError;
use crate::root::NodeRoot;
use lemonade_config::IbSettings;
use std::collections::BTreeMap;

/// Where the kernel lists the RDMA devices.
pub const CLASS_DIR: &str = "/sys/class/infiniband";

/// What gather found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IbData {
    pub ports: Vec<Port>,
    /// (`device:port`, message naming the file) of ports with a malformed value.
    pub unreadable: Vec<(String, String)>,
}

/// One port of one HCA.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    /// `mlx5_0`.
    pub device: String,
    /// `1`.
    pub port: String,
    /// The HCA's PCI bus id, when sysfs links it.
    pub pci_bus_id: Option<String>,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: String,
    /// `4: ACTIVE`.
    pub state: String,
    /// `5: LinkUp`.
    pub phys_state: String,
    /// Gb/s, from `400 Gb/sec (4X NDR)`.
    pub rate_gbps: Option<f64>,
    /// The configured error counters that exist for this port.
    pub counters: BTreeMap<String, u64>,
}

impl Port {
    /// `mlx5_0:1`: the entity of the port's findings.
    pub fn entity(&self) -> String {
        format!("{}:{}", self.device, self.port)
    }
}

/// Reads every port of every RDMA device, and the counters config names.
pub fn gather(root: &NodeRoot, settings: &IbSettings) -> Result<IbData, CheckError> {
    let mut data = IbData::default();
    for device in root.list_dir(CLASS_DIR)? {
        let pci_bus_id = pci_slot_name(root, &device);
        for port in root.list_dir(format!("{CLASS_DIR}/{device}/ports"))? {
            match read_port(root, &device, &port, pci_bus_id.clone(), settings) {
                Ok(p) => data.ports.push(p),
                Err(e) => data
                    .unreadable
                    .push((format!("{device}:{port}"), e.to_string())),
            }
        }
    }
    Ok(data)
}

fn read_port(
    root: &NodeRoot,
    device: &str,
    port: &str,
    pci_bus_id: Option<String>,
    settings: &IbSettings,
) -> Result<Port, CheckError> {
    let dir = format!("{CLASS_DIR}/{device}/ports/{port}");
    let link_layer = root
        .read_value_opt(format!("{dir}/link_layer"))?
        .unwrap_or_else(|| "InfiniBand".to_string());
    let rate_path = format!("{dir}/rate");
    let mut counters = BTreeMap::new();
    for name in settings.counters.keys() {
        let path = format!("{dir}/counters/{name}");
        if let Some(text) = root.read_value_opt(&path)? {
            let value = text.trim().parse().map_err(|_| {
                CheckError::malformed(&path, format!("{name}: expected a count, found `{text}`"))
            })?;
            counters.insert(name.clone(), value);
        }
    }
    Ok(Port {
        device: device.to_string(),
        port: port.to_string(),
        pci_bus_id,
        link_layer,
        state: root.read_value(format!("{dir}/state"))?,
        phys_state: root.read_value(format!("{dir}/phys_state"))?,
        rate_gbps: match root.read_value_opt(&rate_path)? {
            Some(text) => Some(parse_rate(&text, &rate_path)?),
            None => None,
        },
        counters,
    })
}

/// The HCA's PCI bus id, from its PCI device's `uevent` (a file, unlike the
/// `device` symlink, so snapshots carry it). Only decorates findings: unreadable is `None`.
fn pci_slot_name(root: &NodeRoot, device: &str) -> Option<String> {
    let uevent = root
        .read_value(format!("{CLASS_DIR}/{device}/device/uevent"))
        .ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
        .map(str::to_string)
}

/// Parses `400 Gb/sec (4X NDR)`.
pub fn parse_rate(text: &str, path: &str) -> Result<f64, CheckError> {
    let mut words = text.split_whitespace();
    match (words.next().map(str::parse::<f64>), words.next()) {
        (Some(Ok(v)), Some("Gb/sec")) => Ok(v),
        _ => Err(CheckError::malformed(
            path,
            format!("rate: expected `<n> Gb/sec (...)`, found `{}`", text.trim()),
        )),
    }
}

/// The name part of `4: ACTIVE` or `5: LinkUp`.
pub fn state_name(text: &str) -> &str {
    text.split_once(':').map_or(text, |(_, name)| name).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_formats() {
        assert_eq!(parse_rate("400 Gb/sec (4X NDR)", "f").unwrap(), 400.0);
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)", "f").unwrap(), 2.5);
        assert!(parse_rate("fast", "/sys/r")
            .unwrap_err()
            .to_string()
            .contains("/sys/r"));
        assert_eq!(state_name("4: ACTIVE"), "ACTIVE");
        assert_eq!(state_name("5: LinkUp"), "LinkUp");
    }
}
