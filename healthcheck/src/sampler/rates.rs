//! Counters to per-second rates, from this round and the one before.
//!
//! A counter that went down was reset (driver reload, HCA reset, wrap of a
//! 32-bit counter): its source adds nothing this round, never a negative or
//! a huge rate; the metric is the other sources' sum, and is left out when
//! every source reset. The first round has no rates, only gauges.

use super::raw::Raw;
use std::collections::HashMap;

/// The previous round's counters.
#[derive(Debug, Default)]
pub struct Rates {
    previous: Option<Previous>,
}

#[derive(Debug)]
struct Previous {
    /// Seconds on a monotonic clock.
    at: f64,
    counters: HashMap<(&'static str, String), u64>,
    cpu: Option<(u64, u64)>,
}

impl Rates {
    /// The round's metrics: its gauges, and the rates of its counters
    /// against the previous round `at` seconds (monotonic) later.
    pub fn metrics(&mut self, at: f64, raw: Raw) -> Vec<(&'static str, f64)> {
        let mut out = raw.gauges;
        if let Some(prev) = self.previous.as_ref().filter(|p| at > p.at) {
            let seconds = at - prev.at;
            out.extend(counter_rates(prev, &raw.counters, seconds));
            if let (Some((busy0, total0)), Some((busy1, total1))) = (prev.cpu, raw.cpu) {
                if busy1 >= busy0 && total1 > total0 {
                    let share = (busy1 - busy0) as f64 / (total1 - total0) as f64;
                    out.push(("cpu_util", 100.0 * share.min(1.0)));
                }
            }
        }
        self.previous = Some(Previous {
            at,
            counters: raw
                .counters
                .into_iter()
                .map(|c| ((c.metric, c.source), c.value))
                .collect(),
            cpu: raw.cpu,
        });
        out
    }
}

/// Per metric, the sum over its sources of the growth since `prev`, per second.
fn counter_rates(
    prev: &Previous,
    counters: &[super::raw::Counter],
    seconds: f64,
) -> Vec<(&'static str, f64)> {
    let mut sums: Vec<(&'static str, Option<f64>)> = Vec::new();
    for c in counters {
        let slot = match sums.iter_mut().find(|(m, _)| *m == c.metric) {
            Some(slot) => slot,
            None => {
                sums.push((c.metric, None));
                sums.last_mut().expect("just pushed")
            }
        };
        let Some(&before) = prev.counters.get(&(c.metric, c.source.clone())) else {
            continue; // a port or disk new this round
        };
        if c.value < before {
            continue; // reset: nothing from this source this round
        }
        let grew = (c.value - before) as f64 * c.scale / seconds;
        slot.1 = Some(slot.1.unwrap_or(0.0) + grew);
    }
    sums.into_iter()
        .filter_map(|(m, v)| Some((m, v?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::raw::Counter;
    use super::*;

    fn raw(ports: &[(&str, u64)], cpu: (u64, u64)) -> Raw {
        let mut raw = Raw::default();
        raw.gauge("gpu_util", 97.0);
        for (port, value) in ports {
            raw.counter(Counter {
                metric: "ib_tx",
                source: port.to_string(),
                value: *value,
                scale: 4.0,
            });
        }
        raw.cpu = Some(cpu);
        raw
    }

    fn get(metrics: &[(&str, f64)], name: &str) -> Option<f64> {
        metrics.iter().find(|(m, _)| *m == name).map(|(_, v)| *v)
    }

    #[test]
    fn the_first_round_has_gauges_and_the_second_rates() {
        let mut rates = Rates::default();
        let first = rates.metrics(0.0, raw(&[("a", 0), ("b", 100)], (0, 0)));
        assert_eq!(first, [("gpu_util", 97.0)]);
        let second = rates.metrics(10.0, raw(&[("a", 250), ("b", 350)], (250, 1000)));
        assert_eq!(get(&second, "ib_tx"), Some((250.0 + 250.0) * 4.0 / 10.0));
        assert_eq!(get(&second, "cpu_util"), Some(25.0));
    }

    #[test]
    fn a_counter_reset_gives_no_negative_rate_and_the_other_ports_still_count() {
        let mut rates = Rates::default();
        rates.metrics(0.0, raw(&[("a", 1_000_000), ("b", 100)], (0, 0)));
        let reset = rates.metrics(10.0, raw(&[("a", 5), ("b", 200)], (10, 20)));
        assert_eq!(get(&reset, "ib_tx"), Some(100.0 * 4.0 / 10.0));
        // The reset value is the new base: the next round is a true rate.
        let after = rates.metrics(20.0, raw(&[("a", 105), ("b", 300)], (20, 40)));
        assert_eq!(get(&after, "ib_tx"), Some(200.0 * 4.0 / 10.0));
        let all_reset = rates.metrics(30.0, raw(&[("a", 0), ("b", 0)], (0, 0)));
        assert_eq!(get(&all_reset, "ib_tx"), None, "no rate, not zero");
        assert_eq!(get(&all_reset, "cpu_util"), None);
    }

    #[test]
    fn a_clock_that_did_not_advance_gives_no_rates() {
        let mut rates = Rates::default();
        rates.metrics(5.0, raw(&[("a", 0)], (0, 0)));
        let same = rates.metrics(5.0, raw(&[("a", 10)], (1, 2)));
        assert_eq!(same, [("gpu_util", 97.0)]);
    }
}
