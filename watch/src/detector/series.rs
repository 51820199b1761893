//! One node's recent samples of one metric, and its denoised value.

/// The most samples the denoiser looks back over.
pub const MAX_DENOISE: usize = 8;

/// How many of the node's last intervals between samples its cadence is read from.
const CADENCE_INTERVALS: usize = 5;

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
    /// The last intervals between samples received, in seconds (0: none yet).
    intervals: [u32; CADENCE_INTERVALS],
    /// Next slot of `intervals` to write.
    interval_head: usize,
}

impl Series {
    /// Takes a sample. After an exporter gap (no sample for more than
    /// `gap_s`, or two and a half of the node's own intervals where it is
    /// scraped less often), the window starts over and the first sample is
    /// dropped: a rate computed from a counter over the gap is inflated.
    /// Returns whether the sample was kept.
    pub fn push(&mut self, time: i64, value: f64, gap_s: i64, window: usize) -> bool {
        let after_gap = match self.last_seen {
            Some(seen) => {
                let gap = self.outlasts(time - seen, gap_s);
                let interval = u32::try_from((time - seen).max(0)).unwrap_or(u32::MAX);
                self.intervals[self.interval_head] = interval;
                self.interval_head = (self.interval_head + 1) % CADENCE_INTERVALS;
                gap
            }
            None => false,
        };
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
        if self.outlasts(end - newest, stale_s) {
            return None;
        }
        let mut v = [0.0; MAX_DENOISE];
        v[..self.len].copy_from_slice(&self.values[..self.len]);
        crate::stats::median(&mut v[..self.len])
    }

    /// The node's usual interval between samples of this metric: the
    /// median of the last few, `None` before the second sample.
    pub fn usual_interval(&self) -> Option<i64> {
        let mut sorted = self.intervals;
        sorted.sort_unstable();
        let known = &sorted[sorted.iter().take_while(|&&i| i == 0).count()..];
        known.get(known.len() / 2).map(|&i| i64::from(i))
    }

    /// Whether a silence of `elapsed_s` is longer than allowed: `base_s`,
    /// or two and a half of the node's usual intervals between samples if
    /// that is longer. An exporter scraped every 30 or 60 s is not missing
    /// between its scrapes, and its every sample is no gap: with the 10 s
    /// allowances alone, such a node was never seen at all. The usual
    /// interval is the median of the last few, so one real gap does not
    /// stretch it; it is read only past `base_s`, which it never lowers.
    fn outlasts(&self, elapsed_s: i64, base_s: i64) -> bool {
        if elapsed_s <= base_s {
            return false;
        }
        match self.usual_interval() {
            Some(usual) => elapsed_s > usual * 5 / 2,
            None => true,
        }
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
    fn a_node_scraped_every_30_s_is_seen_and_missing_only_after_a_missed_scrape() {
        let mut s = Series::default();
        let kept: Vec<bool> = (0..6).map(|i| s.push(i * 30, 10.0, 25, 3)).collect();
        // The second sample is the first interval seen: a gap by the 25 s allowance.
        assert_eq!(kept, [true, false, true, true, true, true]);
        assert_eq!(s.denoised(150 + 29, 25), Some(10.0), "between two scrapes");
        assert_eq!(
            s.denoised(150 + 76, 25),
            None,
            "two and a half scrapes missed"
        );
        assert!(
            !s.push(150 + 120, 10.0, 25, 3),
            "four scrapes missed: a gap"
        );
    }

    #[test]
    fn one_long_exporter_gap_does_not_stretch_the_usual_interval() {
        let mut s = Series::default();
        for t in [0, 10, 20, 30, 330, 340, 350] {
            s.push(t, 10.0, 25, 3);
        }
        assert_eq!(s.denoised(350 + 25, 25), Some(10.0));
        assert_eq!(s.denoised(350 + 26, 25), None);
    }

    #[test]
    fn a_silent_node_is_missing_not_held_forever() {
        let mut s = Series::default();
        s.push(0, 10.0, 25, 3);
        assert_eq!(s.denoised(20, 25), Some(10.0));
        assert_eq!(s.denoised(60, 25), None);
    }
}
