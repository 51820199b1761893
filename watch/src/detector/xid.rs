//! Each node's XID gauge (`[watch] xid_metric`): what tells a stopped node's
//! dead GPU from its job's own crash.
//!
//! A node whose ranks exited looks the same in utilisation, power and
//! traffic whether a GPU failed or the user's code raised; the driver
//! tells them apart. DCGM's gauge holds each GPU's last XID, so a value
//! read before the job may be an old one: only a change to a hardware XID
//! during the job counts, and it stays counted (the gauge may go silent
//! with the GPU, or be reset).

/// What a node's XID gauge says at a step. A gauge that ever read
/// something that is no XID (a fraction: an average over GPUs; a negative
/// number) says nothing from then on, beyond a hardware XID it showed
/// before: a silent miss of a dead GPU would cost more than a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XidReading {
    /// No fresh reading: the gauge is not exported, went silent, or reads
    /// something that is no XID.
    #[default]
    Unknown,
    /// Read fresh, and no hardware XID appeared during the job.
    NoHardware,
    /// This hardware XID appeared during the job.
    Hardware(u32),
}

/// The XID gauges of one job's nodes.
#[derive(Debug, Default)]
pub struct XidGauges {
    nodes: Vec<Option<Gauge>>,
}

#[derive(Debug, Clone, Copy)]
struct Gauge {
    last: f64,
    /// The hardware XID that appeared during the job, and when it was read.
    hardware: Option<(u32, i64)>,
    garbled: bool,
}

impl XidGauges {
    /// Takes one reading of `node`'s gauge at `time`; `hardware` lists the
    /// XIDs that say the GPU failed (`[watch] hardware_xids`).
    pub fn observe(&mut self, (node, time): (usize, i64), value: f64, hardware: &[u32]) {
        if self.nodes.len() <= node {
            self.nodes.resize(node + 1, None);
        }
        let changed_to = |last: f64| (value != last).then(|| as_xid(value)).flatten();
        let gauge = self.nodes[node].get_or_insert(Gauge {
            last: value,
            hardware: None,
            garbled: false,
        });
        gauge.garbled |= value != 0.0 && as_xid(value).is_none();
        if gauge.hardware.is_none() {
            gauge.hardware = changed_to(gauge.last)
                .filter(|xid| hardware.contains(xid))
                .map(|xid| (xid, time));
        }
        gauge.last = value;
    }

    /// What `node`'s gauge says at a step; `fresh`: it was read recently
    /// enough to count at this step (the metric's own staleness rule).
    pub fn reading(&self, node: usize, fresh: bool) -> XidReading {
        match self.nodes.get(node).copied().flatten() {
            Some(Gauge {
                hardware: Some((xid, _)),
                ..
            }) => XidReading::Hardware(xid),
            Some(gauge) if fresh && !gauge.garbled => XidReading::NoHardware,
            _ => XidReading::Unknown,
        }
    }
}

impl XidGauges {
    /// The one node whose gauge named a hardware XID during the job, with
    /// the XID and when it was first read; `None` when none did, or more
    /// than one (then the driver does not say which broke the job).
    pub fn named_alone(&self) -> Option<(usize, u32, i64)> {
        let mut named = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(node, g)| g.and_then(|g| g.hardware).map(|(xid, t)| (node, xid, t)));
        let first = named.next()?;
        named.next().is_none().then_some(first)
    }
}

/// The XID a gauge value names, if it is one (a whole number from 1).
fn as_xid(value: f64) -> Option<u32> {
    (value >= 1.0 && value.fract() == 0.0 && value <= f64::from(u32::MAX)).then_some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HARDWARE: &[u32] = &[48, 79];

    fn gauges(readings: &[f64]) -> XidGauges {
        let mut g = XidGauges::default();
        for (t, &v) in readings.iter().enumerate() {
            g.observe((0, t as i64 * 10), v, HARDWARE);
        }
        g
    }

    #[test]
    fn a_hardware_xid_that_appears_during_the_job_is_read_and_kept() {
        let g = gauges(&[0.0, 0.0, 79.0, 0.0]);
        assert_eq!(g.reading(0, true), XidReading::Hardware(79));
        // Kept after the gauge goes silent with the GPU.
        assert_eq!(g.reading(0, false), XidReading::Hardware(79));
    }

    #[test]
    fn the_driver_names_a_node_alone_only_when_no_other_gauge_names_hardware_too() {
        let mut g = gauges(&[0.0, 0.0, 79.0]);
        g.observe((1, 0), 0.0, HARDWARE);
        g.observe((1, 30), 13.0, HARDWARE);
        assert_eq!(g.named_alone(), Some((0, 79, 20)));
        g.observe((1, 40), 48.0, HARDWARE);
        assert_eq!(g.named_alone(), None);
        assert_eq!(XidGauges::default().named_alone(), None);
    }

    #[test]
    fn an_xid_already_on_the_gauge_when_the_job_began_is_old_news() {
        let g = gauges(&[48.0, 48.0, 48.0]);
        assert_eq!(g.reading(0, true), XidReading::NoHardware);
    }

    #[test]
    fn an_applications_xid_is_no_hardware_xid() {
        let g = gauges(&[0.0, 13.0, 43.0, 45.0]);
        assert_eq!(g.reading(0, true), XidReading::NoHardware);
    }

    #[test]
    fn a_gauge_that_reads_no_xid_says_nothing_from_then_on() {
        for garbage in [9.875, -79.0, f64::MAX] {
            let g = gauges(&[0.0, garbage, 0.0]);
            assert_eq!(g.reading(0, true), XidReading::Unknown, "{garbage}");
        }
    }

    #[test]
    fn a_gauge_never_read_or_gone_silent_says_nothing() {
        let g = gauges(&[0.0]);
        assert_eq!(g.reading(0, false), XidReading::Unknown);
        assert_eq!(g.reading(1, true), XidReading::Unknown);
        assert_eq!(XidGauges::default().reading(0, true), XidReading::Unknown);
    }
}
