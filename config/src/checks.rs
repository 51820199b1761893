//! Settings of the host-side hardware checks: `[checks.pcie]`, `[checks.ib]`, `[checks.mounts]`.

use crate::Severity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `[checks.pcie]`: link speed and width, AER counters of NVIDIA and Mellanox functions.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PcieSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// PCI vendor ids to watch (hex, as sysfs writes them).
    pub vendors: Vec<String>,
    /// Expected devices per vendor/class; a missing device is `down`.
    pub expect: Vec<PcieExpectation>,
    /// Functions whose link *speed* is not judged, as `vendor` or
    /// `vendor:class-prefix` (`0x10de:0x0302`). GPUs lower their link speed
    /// when idle to save power; where the NVML check watches the GPUs' link
    /// generation under load, list them here to avoid draining idle nodes.
    pub skip_speed: Vec<String>,
    /// Severity when `aer_dev_fatal` grows between runs.
    pub aer_fatal_severity: Severity,
    /// Severity when `aer_dev_nonfatal` grows between runs.
    pub aer_nonfatal_severity: Severity,
    /// `aer_dev_correctable` growth per hour above this is a `warning`; 0 disables.
    pub aer_correctable_per_hour: u64,
    /// Window over which counter growth is summed into a rate, in seconds.
    pub rate_window_s: u64,
}

impl Default for PcieSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            vendors: vec!["0x10de".into(), "0x15b3".into()],
            expect: Vec::new(),
            skip_speed: Vec::new(),
            aer_fatal_severity: Severity::Drain,
            aer_nonfatal_severity: Severity::Warning,
            aer_correctable_per_hour: 0,
            rate_window_s: 3600,
        }
    }
}

/// Devices a node must have, e.g. 8 GPUs at Gen5 x16.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PcieExpectation {
    /// A name for messages and the entity of a missing-device finding: `gpu`, `hca`.
    pub name: String,
    /// Vendor id, e.g. `0x10de`.
    pub vendor: String,
    /// Class prefix, e.g. `0x0302` (3D controller) or `0x0207` (InfiniBand).
    #[serde(default)]
    pub class: Option<String>,
    pub count: usize,
    /// Expected link speed in GT/s (e.g. 32 for Gen5); a lower current speed is `drain`.
    #[serde(default)]
    pub speed_gts: Option<f64>,
    /// Expected link width; a narrower current width is `drain`.
    #[serde(default)]
    pub width: Option<u32>,
}

/// `[checks.ib]`: InfiniBand ports.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct IbSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Expected number of HCAs with InfiniBand ports (ports excluded below do not count).
    pub expected_hcas: Option<usize>,
    /// Expected port rate in Gb/s; a lower rate is `drain`.
    pub expected_rate_gbps: Option<f64>,
    /// Ports to skip, as `device:port` (`mlx5_8:1`) or a device name: management NICs, Ethernet.
    pub exclude: Vec<String>,
    /// Skip ports whose `link_layer` is Ethernet.
    pub skip_ethernet: bool,
    /// Error-counter growth per hour: above `warning` is a `warning`, above `drain` a `drain`.
    pub counters: BTreeMap<String, CounterRate>,
    /// Window over which counter growth is summed into a rate, in seconds.
    pub rate_window_s: u64,
}

impl Default for IbSettings {
    fn default() -> Self {
        let mut counters = BTreeMap::new();
        // A single link flap is worth a warning; symbol errors trickle on healthy
        // NDR links, so only sustained growth counts.
        for (name, warning, drain) in [
            ("symbol_error", 100.0, 10_000.0),
            ("link_downed", 0.0, 3.0),
            ("link_error_recovery", 0.0, 10.0),
            ("port_rcv_errors", 100.0, 10_000.0),
            ("local_link_integrity_errors", 0.0, 100.0),
            ("excessive_buffer_overrun_errors", 0.0, 100.0),
        ] {
            counters.insert(
                name.to_string(),
                CounterRate {
                    warning_per_hour: warning,
                    drain_per_hour: drain,
                },
            );
        }
        Self {
            enabled: true,
            deadline_s: None,
            expected_hcas: None,
            expected_rate_gbps: None,
            exclude: Vec::new(),
            skip_ethernet: true,
            counters,
            rate_window_s: 3600,
        }
    }
}

/// Thresholds on a counter's growth rate: growth strictly above a threshold fires it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CounterRate {
    pub warning_per_hour: f64,
    pub drain_per_hour: f64,
}

/// `[checks.mounts]`: filesystems jobs need.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MountsSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// A mount whose `statfs` takes longer than this is hung (`down`).
    pub statfs_timeout_s: f64,
    pub expect: Vec<MountExpectation>,
}

impl Default for MountsSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            statfs_timeout_s: 2.0,
            expect: Vec::new(),
        }
    }
}

/// One mount point a node must have.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MountExpectation {
    pub path: PathBuf,
    /// Filesystem type as mountinfo shows it (`nfs4`, `lustre`, `xfs`).
    #[serde(default)]
    pub fstype: Option<String>,
    /// Options that must be present (`rw`).
    #[serde(default = "default_mount_options")]
    pub options: Vec<String>,
    /// Below this free-space percentage: `warning`.
    #[serde(default)]
    pub min_free_percent: Option<f64>,
    /// Below this free-inode percentage: `warning`.
    #[serde(default)]
    pub min_free_inodes_percent: Option<f64>,
    /// How the mount is probed. Only tests change it, to simulate a hung mount.
    #[serde(default, skip_serializing_if = "MountProbe::is_statfs")]
    pub probe: MountProbe,
}

fn default_mount_options() -> Vec<String> {
    vec!["rw".to_string()]
}

/// The probe run against a mount point in a child process.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum MountProbe {
    /// `statfs(2)`: what every real run does.
    #[default]
    Statfs,
    /// Never answers, like `statfs` on a dead NFS server: exercises the
    /// deadline and abandon path in tests.
    BlockForever,
}

impl MountProbe {
    pub fn is_statfs(&self) -> bool {
        *self == MountProbe::Statfs
    }
}
