//! The InfiniBand/RoCE ports' counters from sysfs, as raw readings.
//!
//! `counters/port_xmit_data` and `port_rcv_data` count 4-byte words
//! (`ib_tx`, `ib_rx` in bytes per second); `counters/port_xmit_wait` counts
//! ticks a port had data and no credit to send, the link-level back-pressure
//! that PFC pauses cause on RoCE (`pfc_pause`); `hw_counters/np_cnp_sent`
//! counts the congestion notifications this HCA sent as a receiver (`cnp`).

use super::raw::{Counter, Raw};
use crate::root::NodeRoot;

const IB: &str = "/sys/class/infiniband";

/// (metric, file below the port, scale to the metric's unit).
const PORT_COUNTERS: [(&str, &str, f64); 4] = [
    ("ib_tx", "counters/port_xmit_data", 4.0),
    ("ib_rx", "counters/port_rcv_data", 4.0),
    ("pfc_pause", "counters/port_xmit_wait", 1.0),
    ("cnp", "hw_counters/np_cnp_sent", 1.0),
];

/// Every port of every HCA; a counter a port lacks is left out.
pub fn ports(root: &NodeRoot, raw: &mut Raw) {
    for hca in root.list_dir(IB).unwrap_or_default() {
        let ports_dir = format!("{IB}/{hca}/ports");
        for port in root.list_dir(&ports_dir).unwrap_or_default() {
            for (metric, file, scale) in PORT_COUNTERS {
                let path = format!("{ports_dir}/{port}/{file}");
                let Ok(Some(text)) = root.read_value_opt(&path) else {
                    continue;
                };
                if let Ok(value) = text.parse::<u64>() {
                    raw.counter(Counter {
                        metric,
                        source: format!("{hca}/{port}"),
                        value,
                        scale,
                    });
                }
            }
        }
    }
}
