//! The node's CPU, memory and disks from `/proc`, as raw readings.

use super::raw::{Counter, Raw};
use crate::root::NodeRoot;

/// `/proc/stat`'s first line: the jiffies spent busy and in all (idle and
/// iowait are the idle part), for `cpu_util` as a share of two deltas.
pub fn cpu(root: &NodeRoot, raw: &mut Raw) {
    let Ok(text) = root.read_to_string("/proc/stat") else {
        return;
    };
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return;
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    if fields.len() < 4 {
        return;
    }
    // user nice system idle iowait irq softirq steal; guest is within user.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    raw.cpu = Some((total - idle, total));
}

/// `mem_used`: the share of `MemTotal` not `MemAvailable`, in percent.
pub fn memory(root: &NodeRoot, raw: &mut Raw) {
    let Ok(text) = root.read_to_string("/proc/meminfo") else {
        return;
    };
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    if let (Some(total), Some(available)) = (kib("MemTotal"), kib("MemAvailable")) {
        if total > 0.0 {
            raw.gauge("mem_used", 100.0 * (total - available) / total);
        }
    }
}

/// `disk_io`: bytes read and written by the whole disks (those in
/// `/sys/block`, less loop and RAM devices; partitions would count twice),
/// from `/proc/diskstats` sectors of 512 bytes.
pub fn disks(root: &NodeRoot, raw: &mut Raw) {
    let Ok(text) = root.read_to_string("/proc/diskstats") else {
        return;
    };
    let disks = root.list_dir("/sys/block").unwrap_or_default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(read), Some(written)) = (f.get(2), f.get(5), f.get(9)) else {
            continue;
        };
        let whole = disks.iter().any(|d| d == name);
        if !whole || name.starts_with("loop") || name.starts_with("ram") {
            continue;
        }
        if let (Ok(r), Ok(w)) = (read.parse::<u64>(), written.parse::<u64>()) {
            raw.counter(Counter {
                metric: "disk_io",
                source: name.to_string(),
                value: r.wrapping_add(w),
                scale: 512.0,
            });
        }
    }
}
