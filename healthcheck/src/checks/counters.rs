//! Growth of monotonic hardware counters (AER, InfiniBand port errors) between runs.
//!
//! Rates are the growth summed over a recent window rather than extrapolated
//! from the last interval: a single increment seen one second after the
//! previous run (prolog right after the timer) must not read as 3600/h.

use serde::{Deserialize, Serialize};

/// Growth of a counter since its previous reading; 0 on the first reading.
///
/// A counter that went down was reset (driver reload, reboot, `perfquery -R`):
/// what it reads now accumulated since the reset, so that is the growth.
pub fn growth(previous: Option<u64>, current: u64) -> u64 {
    match previous {
        Some(p) if current >= p => current - p,
        Some(_) => current,
        None => 0,
    }
}

/// The runs that saw a counter grow: (unix seconds, growth). Only non-zero
/// growth is kept, so a healthy node's state stays empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Recent(pub Vec<(i64, u64)>);

impl Recent {
    /// Adds this run's growth and forgets what fell out of the window.
    pub fn record(&mut self, now: i64, growth: u64, window_s: u64) {
        if growth > 0 {
            self.0.push((now, growth));
        }
        let horizon = now - window_s as i64;
        self.0.retain(|(at, _)| *at > horizon);
    }

    /// Growth inside the window, scaled to one hour.
    pub fn per_hour(&self, window_s: u64) -> f64 {
        let sum: u64 = self.0.iter().map(|(_, g)| g).sum();
        sum as f64 * 3600.0 / window_s.max(1) as f64
    }

    /// Growth inside the window, per second.
    pub fn per_second(&self, window_s: u64) -> f64 {
        self.per_hour(window_s) / 3600.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_are_not_negative_growth() {
        assert_eq!(growth(None, 50), 0);
        assert_eq!(growth(Some(10), 15), 5);
        assert_eq!(growth(Some(1000), 3), 3);
    }

    #[test]
    fn rate_sums_the_window() {
        let mut r = Recent::default();
        r.record(0, 5, 3600);
        r.record(1800, 0, 3600);
        r.record(3000, 10, 3600);
        assert_eq!(r.per_hour(3600), 15.0);
        r.record(3700, 0, 3600);
        assert_eq!(r.per_hour(3600), 10.0);
        assert_eq!(r.0.len(), 1);
    }
}
