//! One node's recent samples of one metric, and its denoised value.

/// The most samples the denoiser looks back over.
pub const MAX_DENOISE: usize = 8;

/// The last few samples of one metric of one node, since its last gap.
#[derive(Debug, Clone, Default)]
pub struct Series {
    times: [i64; MAX_DENOISE],
    values: [f64; MAX_DENOISE],
    /// Samples held (at most the denoise window).
    len: usize,
    /// Next slot to write.
    head: usize,
    /// Time of the last sample received, kept or not.
    last_seen: Option<i64>,
}

impl Series {
    /// Takes a sample. After an exporter gap (no sample for more than
    /// `gap_s`), the window starts over and the first sample is dropped: a
    /// rate computed from a counter over the gap is inflated. Returns whether
    /// the sample was kept.
    pub fn push(&mut self, time: i64, value: f64, gap_s: i64, window: usize) -> bool {
        let after_gap = matches!(self.last_seen, Some(seen) if time - seen > gap_s);
        self.last_seen = Some(time);
        if after_gap {
            self.len = 0;
            self.head = 0;
            return false;
        }
        let window = window.clamp(1, MAX_DENOISE);
        self.times[self.head] = time;
        self.values[self.head] = value;
        self.head = (self.head + 1) % window;
        self.len = (self.len + 1).min(window);
        true
    }

    /// The denoised value at a step ending at `end` (exclusive): the median
    /// of the window, or `None` when the newest sample is older than `stale_s`.
    pub fn denoised(&self, end: i64, stale_s: i64) -> Option<f64> {
        if self.len == 0 {
            return None;
        }
        let newest = self.times[..self.len].iter().copied().max()?;
        if end - newest > stale_s {
            return None;
        }
        let mut v = [0.0; MAX_DENOISE];
        v[..self.len].copy_from_slice(&self.values[..self.len]);
        crate::stats::median(&mut v[..self.len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spike_does_not_move_the_denoised_value() {
        let mut s = Series::default();
        for (t, v) in [(0, 10.0), (10, 1000.0), (20, 11.0)] {
            s.push(t, v, 25, 3);
        }
        assert_eq!(s.denoised(30, 25), Some(11.0));
    }

    #[test]
    fn the_first_sample_after_an_exporter_gap_is_dropped() {
        let mut s = Series::default();
        s.push(0, 10.0, 25, 3);
        assert!(!s.push(300, 5000.0, 25, 3), "the inflated rate is kept");
        assert_eq!(s.denoised(305, 25), None);
        assert!(s.push(310, 10.0, 25, 3));
        assert_eq!(s.denoised(315, 25), Some(10.0));
    }

    #[test]
    fn a_silent_node_is_missing_not_held_forever() {
        let mut s = Series::default();
        s.push(0, 10.0, 25, 3);
        assert_eq!(s.denoised(20, 25), Some(10.0));
        assert_eq!(s.denoised(60, 25), None);
    }
}
