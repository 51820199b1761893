//! One round's readings before rates: gauges are values already, counters
//! only grow (until a reset) and become rates against the previous round.

/// A cumulative counter of one source (a port, a disk) of a metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    pub metric: &'static str,
    /// The port or disk, so that each source's delta is its own.
    pub source: String,
    pub value: u64,
    /// What one count is in the metric's unit (4 bytes for IB data words).
    pub scale: f64,
}

/// Everything one round read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raw {
    pub gauges: Vec<(&'static str, f64)>,
    pub counters: Vec<Counter>,
    /// `/proc/stat`: (busy, total) jiffies of all CPUs.
    pub cpu: Option<(u64, u64)>,
}

impl Raw {
    pub fn gauge(&mut self, metric: &'static str, value: f64) {
        self.gauges.push((metric, value));
    }

    pub fn counter(&mut self, counter: Counter) {
        self.counters.push(counter);
    }
}
