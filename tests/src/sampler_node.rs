//! A node as the node sampler reads it (issue 33): `/proc/stat`,
//! `/proc/meminfo`, `/proc/diskstats`, one NVMe disk and 8 HCAs of one
//! port, with counters that grow by a known amount a round, and the fake
//! NVML fields of 8 busy GPUs.

use std::path::Path;

/// Fake NVML fields (for [`crate::fake_nvml::derive`]): every GPU busy,
/// GPU 5 lagging at 90 %; each GPU sends [`NVLINK_TX_KIBPS`] over NVLink.
pub const GPU_FIELDS: &str = r#""defaults": {"util_gpu": 98, "util_mem": 40, "power_mw": 650000,
    "sm_clock_mhz": 1980, "pcie_tx_kbps": 1000, "pcie_rx_kbps": 2000,
    "nvlink_tx_kib": 5000, "nvlink_tx_kibps": 1000000},
    "gpus": {"5": {"util_gpu": 90}}"#;

/// KiB per second each GPU of [`GPU_FIELDS`] sends over NVLink.
pub const NVLINK_TX_KIBPS: f64 = 1_000_000.0;

/// HCAs of the node.
pub const HCAS: u64 = 8;

/// Writes the node under `root` with its counters at round `step`. A round
/// adds 1000 CPU jiffies (250 busy), 2000 disk sectors read and 2000
/// written, and per HCA 2.5e9 data words each way, 10 wait ticks, 3 CNPs.
/// Memory is 25 % used.
pub fn write(root: &Path, step: u64) {
    let put = |path: &str, text: String| {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("a file has a directory"))
            .expect("create the fixture directory");
        std::fs::write(p, text).expect("write the fixture file");
    };
    put(
        "/proc/stat",
        format!(
            "cpu  {} 0 0 {} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n",
            250 * step,
            750 * step
        ),
    );
    put(
        "/proc/meminfo",
        "MemTotal:       1000000 kB\nMemFree:  100000 kB\nMemAvailable:    750000 kB\n".into(),
    );
    // The partition and the loop device must not count.
    let s = 2000 * step;
    put(
        "/proc/diskstats",
        format!(
            " 259 0 nvme0n1 1 0 {s} 0 1 0 {s} 0 0 0 0\n 259 1 nvme0n1p1 1 0 {s} 0 1 0 {s} 0 0 0 0\n   7 0 loop0 1 0 {s} 0 1 0 {s} 0 0 0 0\n"
        ),
    );
    for disk in ["nvme0n1", "loop0"] {
        std::fs::create_dir_all(root.join("sys/block").join(disk)).expect("create /sys/block");
    }
    for hca in 0..HCAS {
        let port = format!("/sys/class/infiniband/mlx5_{hca}/ports/1");
        let words = format!("{}\n", 2_500_000_000 * step);
        put(&format!("{port}/counters/port_xmit_data"), words.clone());
        put(&format!("{port}/counters/port_rcv_data"), words);
        put(
            &format!("{port}/counters/port_xmit_wait"),
            format!("{}\n", 10 * step),
        );
        put(
            &format!("{port}/hw_counters/np_cnp_sent"),
            format!("{}\n", 3 * step),
        );
    }
}
