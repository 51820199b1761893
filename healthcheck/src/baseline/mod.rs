//! `healthcheck baseline`: the expectations of a node known to be good,
//! written as a config the checks accept as it is (what NHC's `nhc-genconf` does).
//!
//! [`read`] gathers through the checks' own sysfs/procfs readers (so the
//! baseline sees what the checks will see); [`Baseline::to_toml`] renders it,
//! as top-level sections or, with a hostlist, as one `[[node]]` block.
//! [`pins`] adds the versions (`[expect]`), the required kernel modules and
//! the NVSwitch fabric; VBIOS, GSP and the CUDA version the driver supports
//! need NVML and stay unpinned (the head node's drift report compares them).

pub mod pins;

use crate::check::CheckError;
use crate::checks::{block, cpus, firmware, gpu, ib, memory, mounts, pcie, services};
use crate::root::NodeRoot;
use lemonade_config::{IbSettings, PcieSettings};
use std::collections::BTreeMap;
use toml::{Table, Value};

/// Filesystem types that are network or parallel filesystems: the mounts a
/// job needs from elsewhere. Local filesystems are the `block` check's.
pub const SHARED_FSTYPES: &[&str] = &[
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "cifs",
    "smb3",
    "ceph",
    "glusterfs",
    "fuse.glusterfs",
    "wekafs",
    "fuse.weka",
    "panfs",
    "fuse.sshfs",
    "9p",
    "virtiofs",
];

/// Local filesystem types whose mounts outside the system's own paths
/// ([`SYSTEM_PATHS`]) hold job data (`/scratch`, `/raid`).
pub const LOCAL_DATA_FSTYPES: &[&str] = &["xfs", "ext4", "btrfs", "zfs"];

/// The operating system's own mount points, not a job's concern.
pub const SYSTEM_PATHS: &[&str] = &["/", "/boot", "/boot/efi", "/efi", "/usr", "/var", "/tmp"];

/// Free space and inodes below this percentage of a writable mount: a `warning`.
pub const MIN_FREE_PERCENT: f64 = 5.0;

/// Daemons a Slurm GPU node usually runs; those running now are expected.
pub const KNOWN_SERVICES: &[&str] = &[
    "munged",
    "slurmd",
    "sssd",
    "nvidia-persistenced",
    "nv-fabricmanager",
    "nvidia-dcgm",
    "nv-hostengine",
    "chronyd",
    "ntpd",
];

/// What a good node looks like, in the terms of the checks' config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baseline {
    pub gpu_bus_ids: Vec<String>,
    pub pcie: Vec<PcieGroup>,
    pub ib_hcas: usize,
    pub ib_rate_gbps: Option<f64>,
    pub mounts: Vec<SharedMount>,
    pub mem_total_kib: u64,
    pub cpus_online: usize,
    pub nvme_count: usize,
    pub nvme_min_bytes: Option<u64>,
    pub services: Vec<String>,
    pub bios_version: Option<String>,
    pub board_name: Option<String>,
    pub hca_fw_ver: Option<String>,
    pub pins: pins::Pins,
}

/// The functions of one vendor and class, with the slowest and narrowest link among them.
#[derive(Debug, Clone, PartialEq)]
pub struct PcieGroup {
    pub name: String,
    pub vendor: String,
    pub class: String,
    pub count: usize,
    pub speed_gts: Option<f64>,
    pub width: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SharedMount {
    pub path: String,
    pub fstype: String,
    /// `rw` or `ro`, as mounted now.
    pub access: &'static str,
}

/// Whether a job needs this mount: a network or parallel filesystem, or a
/// local data filesystem outside the system's paths.
pub fn is_job_mount(fstype: &str, mount_point: &str) -> bool {
    SHARED_FSTYPES.contains(&fstype)
        || (LOCAL_DATA_FSTYPES.contains(&fstype) && !SYSTEM_PATHS.contains(&mount_point))
}

/// Reads the node below `root`.
pub fn read(root: &NodeRoot) -> Result<Baseline, CheckError> {
    let pcie_data = pcie::gather(root, &PcieSettings::default())?;
    let mut baseline = Baseline {
        gpu_bus_ids: pcie_data
            .functions
            .iter()
            .filter(|f| gpu::count::is_nvidia_gpu(&f.vendor, &f.class))
            .map(|f| f.bdf.clone())
            .collect(),
        pcie: pcie_groups(&pcie_data),
        ..Baseline::default()
    };

    let ib_data = ib::gather(root, &IbSettings::default())?;
    let ib_ports: Vec<&ib::Port> = ib_data
        .ports
        .iter()
        .filter(|p| !p.link_layer.eq_ignore_ascii_case("Ethernet"))
        .collect();
    let mut hcas: Vec<&str> = ib_ports.iter().map(|p| p.device.as_str()).collect();
    hcas.dedup();
    baseline.ib_hcas = hcas.len();
    baseline.ib_rate_gbps = ib_ports
        .iter()
        .filter_map(|p| p.rate_gbps)
        .min_by(f64::total_cmp);

    let mountinfo = root.read_to_string(mounts::mountinfo::MOUNTINFO)?;
    let mut seen = BTreeMap::new();
    for m in mounts::mountinfo::parse(&mountinfo)? {
        if is_job_mount(&m.fstype, &m.mount_point.display().to_string()) {
            // The last mount on a path is the one a job sees.
            seen.insert(
                m.mount_point.display().to_string(),
                SharedMount {
                    path: m.mount_point.display().to_string(),
                    fstype: m.fstype.clone(),
                    access: if m.read_only() { "ro" } else { "rw" },
                },
            );
        }
    }
    baseline.mounts = seen.into_values().collect();

    let meminfo = root.read_to_string(memory::sysfs::MEMINFO)?;
    baseline.mem_total_kib = memory::sysfs::parse_mem_total(&meminfo)
        .map_err(|e| CheckError::malformed(memory::sysfs::MEMINFO, e.to_string()))?;
    baseline.cpus_online = cpus::gather(root)?.online;

    let block_data = block::gather(root)?;
    if let Some((name, message)) = block_data.unreadable.first() {
        return Err(CheckError::malformed(name, message));
    }
    baseline.nvme_count = block_data.namespaces.len();
    baseline.nvme_min_bytes = block_data.namespaces.iter().map(|n| n.size_bytes).min();

    let known: Vec<String> = KNOWN_SERVICES.iter().map(|s| s.to_string()).collect();
    let running = services::gather(root, &known)?;
    baseline.services = known
        .into_iter()
        .filter(|s| running.0.contains_key(services::procfs::comm_name(s)))
        .collect();

    let fw = firmware::gather(root)?;
    baseline.bios_version = fw.bios_version;
    baseline.board_name = fw.board_name;
    // One version on every RDMA device: expect it. Mixed (a management NIC of
    // another type): leave it to the check's majority rule, per HCA type.
    if let Some(first) = fw.hcas.first() {
        if fw.hcas.iter().all(|h| h.fw_ver == first.fw_ver) {
            baseline.hca_fw_ver = Some(first.fw_ver.clone());
        }
    }
    baseline.pins = pins::read(root)?;
    Ok(baseline)
}

/// Groups the watched functions by vendor and class (`0x0302`).
fn pcie_groups(data: &pcie::PcieData) -> Vec<PcieGroup> {
    let mut groups: BTreeMap<(String, String), PcieGroup> = BTreeMap::new();
    for f in &data.functions {
        let class: String = f.class.chars().take(6).collect();
        let group = groups
            .entry((f.vendor.clone(), class.clone()))
            .or_insert_with(|| PcieGroup {
                name: group_name(&f.vendor, &class),
                vendor: f.vendor.clone(),
                class,
                count: 0,
                speed_gts: None,
                width: None,
            });
        group.count += 1;
        if let Some(link) = &f.link {
            if let Some(speed) = link.current_speed {
                group.speed_gts = Some(group.speed_gts.map_or(speed, |s| s.min(speed)));
            }
            group.width = Some(
                group
                    .width
                    .map_or(link.current_width, |w| w.min(link.current_width)),
            );
        }
    }
    groups.into_values().collect()
}

fn group_name(vendor: &str, class: &str) -> String {
    match (vendor, class) {
        ("0x10de", "0x0302" | "0x0300") => "gpu".into(),
        ("0x10de", "0x0680") => "nvswitch".into(),
        ("0x15b3", "0x0207") => "hca".into(),
        ("0x15b3", "0x0200") => "nic".into(),
        _ => format!("{vendor}-{class}"),
    }
}

const KIB_PER_GIB: f64 = 1024.0 * 1024.0;

impl Baseline {
    /// The `checks` table of a config.
    pub fn checks(&self) -> Table {
        // Rounded down to a tenth of a GiB: the node itself stays within it.
        let gib = (self.mem_total_kib as f64 / KIB_PER_GIB * 10.0).floor() / 10.0;
        let sections: Vec<(&str, Vec<(&str, Value)>)> = vec![
            (
                "gpu",
                vec![
                    (
                        "expected_count",
                        Value::Integer(self.gpu_bus_ids.len() as i64),
                    ),
                    ("expected_bus_ids", strings(&self.gpu_bus_ids)),
                ],
            ),
            ("pcie", vec![("expect", self.pcie_expect())]),
            ("ib", self.ib_entries()),
            ("mounts", vec![("expect", self.mounts_expect())]),
            ("memory", vec![("expected_total_gib", Value::Float(gib))]),
            (
                "cpus",
                vec![("expected_online", Value::Integer(self.cpus_online as i64))],
            ),
            ("block", self.block_entries()),
            ("services", vec![("expected", strings(&self.services))]),
            ("firmware", self.firmware_entries()),
            ("modules", self.pins.modules_entries()),
            ("fabric", self.pins.fabric_entries()),
        ];
        sections
            .into_iter()
            .map(|(name, entries)| {
                let table = entries
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                (name.to_string(), Value::Table(table))
            })
            .collect()
    }

    /// `[[checks.pcie.expect]]`: each group of PCIe functions seen.
    fn pcie_expect(&self) -> Value {
        let expect = self
            .pcie
            .iter()
            .map(|g| {
                let mut t = Table::new();
                t.insert("name".into(), Value::String(g.name.clone()));
                t.insert("vendor".into(), Value::String(g.vendor.clone()));
                t.insert("class".into(), Value::String(g.class.clone()));
                t.insert("count".into(), Value::Integer(g.count as i64));
                if let Some(s) = g.speed_gts {
                    t.insert("speed_gts".into(), Value::Float(s));
                }
                if let Some(w) = g.width {
                    t.insert("width".into(), Value::Integer(w.into()));
                }
                Value::Table(t)
            })
            .collect();
        Value::Array(expect)
    }

    fn ib_entries(&self) -> Vec<(&'static str, Value)> {
        let mut entries = vec![("expected_hcas", Value::Integer(self.ib_hcas as i64))];
        if let Some(rate) = self.ib_rate_gbps {
            entries.push(("expected_rate_gbps", Value::Float(rate)));
        }
        entries
    }

    /// `[[checks.mounts.expect]]`: each mount seen, with a free-space floor
    /// for those mounted read-write.
    fn mounts_expect(&self) -> Value {
        let mounts = self
            .mounts
            .iter()
            .map(|m| {
                let mut t = Table::new();
                t.insert("path".into(), Value::String(m.path.clone()));
                t.insert("fstype".into(), Value::String(m.fstype.clone()));
                t.insert("options".into(), strings(&[m.access.to_string()]));
                if m.access == "rw" {
                    for key in ["min_free_percent", "min_free_inodes_percent"] {
                        t.insert(key.into(), Value::Float(MIN_FREE_PERCENT));
                    }
                }
                Value::Table(t)
            })
            .collect();
        Value::Array(mounts)
    }

    fn block_entries(&self) -> Vec<(&'static str, Value)> {
        let mut entries = vec![("nvme_count", Value::Integer(self.nvme_count as i64))];
        if let Some(bytes) = self.nvme_min_bytes {
            entries.push((
                "nvme_min_size_gb",
                Value::Float((bytes as f64 / 1e9).floor()),
            ));
        }
        entries
    }

    fn firmware_entries(&self) -> Vec<(&'static str, Value)> {
        [
            ("bios_version", &self.bios_version),
            ("board_name", &self.board_name),
            ("hca_fw_ver", &self.hca_fw_ver),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, Value::String(v))))
        .collect()
    }

    /// The config text: `[checks.*]` sections and `[expect]`, or with `hosts`
    /// one `[[node]]` block that applies them to those nodes only.
    pub fn to_toml(&self, hosts: Option<&str>) -> String {
        let mut sections = Table::new();
        sections.insert("checks".into(), Value::Table(self.checks()));
        let expect = self.pins.expect();
        if !expect.is_empty() {
            sections.insert("expect".into(), Value::Table(expect));
        }
        let mut top = Table::new();
        match hosts {
            None => top = sections,
            Some(hosts) => {
                let mut node = Table::new();
                node.insert("hosts".into(), Value::String(hosts.to_string()));
                node.extend(sections);
                top.insert("node".into(), Value::Array(vec![Value::Table(node)]));
            }
        }
        let header = "# Written by `healthcheck baseline` from a node known to be good.\n";
        format!("{header}{}", toml::to_string(&top).unwrap_or_default())
    }
}

/// A TOML array of strings.
fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().cloned().map(Value::String).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Baseline {
        Baseline {
            gpu_bus_ids: vec!["0000:18:00.0".into()],
            pcie: vec![PcieGroup {
                name: "gpu".into(),
                vendor: "0x10de".into(),
                class: "0x0302".into(),
                count: 1,
                speed_gts: Some(32.0),
                width: Some(16),
            }],
            ib_hcas: 1,
            ib_rate_gbps: Some(400.0),
            mounts: vec![SharedMount {
                path: "/home".into(),
                fstype: "nfs4".into(),
                access: "rw",
            }],
            mem_total_kib: 2_113_225_816,
            cpus_online: 224,
            nvme_count: 2,
            nvme_min_bytes: Some(3_840_755_982_336),
            services: vec!["munged".into()],
            bios_version: Some("1.6.7".into()),
            board_name: None,
            hca_fw_ver: Some("28.39.1002".into()),
            pins: pins::Pins {
                driver: Some("550.54.15".into()),
                kernel: Some("5.15.0-105-generic".into()),
                cuda_toolkit: None,
                nccl: Some("2.21.5".into()),
                modules: vec!["nvidia".into(), "nvidia_peermem".into()],
                nvswitch: true,
                fabric_manager: "required",
            },
        }
    }

    #[test]
    fn job_mounts_are_shared_or_local_data_filesystems_outside_the_system_paths() {
        assert!(is_job_mount("nfs4", "/home"));
        assert!(is_job_mount("lustre", "/datasets"));
        assert!(is_job_mount("xfs", "/scratch"));
        assert!(!is_job_mount("ext4", "/"));
        assert!(!is_job_mount("vfat", "/boot/efi"));
        assert!(!is_job_mount("tmpfs", "/dev/shm"));
    }

    #[test]
    fn the_baseline_loads_as_a_config_with_the_values_it_read() {
        let text = sample().to_toml(None);
        let config = lemonade_config::load_str(&text, "baseline.toml".as_ref(), Some("gpu001"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let c = &config.checks;
        assert_eq!(c.gpu.expected_bus_ids, ["0000:18:00.0"]);
        assert_eq!(c.pcie.expect[0].width, Some(16));
        assert_eq!(c.ib.expected_rate_gbps, Some(400.0));
        assert_eq!(c.mounts.expect[0].options, ["rw"]);
        assert_eq!(c.memory.expected_total_gib, Some(2015.3));
        assert_eq!(c.cpus.expected_online, Some(224));
        assert_eq!(c.block.nvme_min_size_gb, Some(3840.0));
        assert_eq!(c.services.expected, ["munged"]);
        assert_eq!(c.firmware.board_name, None);
        assert_eq!(
            c.modules.required.as_deref(),
            Some(&["nvidia".to_string(), "nvidia_peermem".to_string()][..])
        );
        assert_eq!(c.fabric.nvswitch, Some(true));
        assert_eq!(
            c.fabric.fabric_manager,
            lemonade_config::FabricManagerMode::Required
        );
        let e = &config.expect;
        assert_eq!(e.driver.as_deref(), Some("550.54.15"));
        assert_eq!(e.kernel.as_deref(), Some("5.15.0-105-generic"));
        assert_eq!(
            (e.cuda_toolkit.as_deref(), e.nccl.as_deref()),
            (None, Some("2.21.5"))
        );
    }

    #[test]
    fn with_hosts_the_baseline_applies_to_those_nodes_only() {
        let text = sample().to_toml(Some("gpu[001-128]"));
        let load = |node| lemonade_config::load_str(&text, "b.toml".as_ref(), Some(node)).unwrap();
        assert_eq!(load("gpu017").checks.cpus.expected_online, Some(224));
        assert_eq!(load("gpu017").expect.driver.as_deref(), Some("550.54.15"));
        assert_eq!(load("cpu001").checks.cpus.expected_online, None);
        assert_eq!(load("cpu001").expect.driver, None);
    }
}
