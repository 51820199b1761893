//! What the report's sections read of a run ([`Run`]), and the compact
//! run that the report from lemon.db is computed from ([`ReportRun`]).
//!
//! A month of a large cluster is a million runs: as [`JobRecord`]s (two
//! strings and a vector each, 150 bytes) building, sorting and freeing
//! them cost more than the whole computation. The report shows neither a
//! run's id nor its partition, so the runs read from lemon.db leave them
//! out; the sections take either kind, and give the same figures for the
//! same runs (the same sums in the same order).

use super::{JobRecord, JobState, TimeRange, UNATTRIBUTED};
use chrono::DateTime;

/// A run as the report's sections read it.
pub trait Run {
    fn state(&self) -> JobState;
    /// GPUs of the whole allocation.
    fn gpus(&self) -> u32;
    fn nodes(&self) -> u32;
    /// The end, in whole seconds since the epoch (`DateTime::timestamp`).
    fn end_s(&self) -> i64;
    /// The start in whole seconds; `None`: the run never started.
    fn start_s(&self) -> Option<i64>;
    /// Wall-clock runtime in seconds (0 for runs that never started).
    fn runtime_s(&self) -> f64;
    /// Whole seconds from submission to start, when both are known.
    fn wait_s(&self) -> Option<i64>;
    /// Whether the run ended inside `range`.
    fn ended_in(&self, range: &TimeRange) -> bool;
    /// The attributed health-check category ([`JobRecord::category`]).
    fn category(&self) -> Option<&str>;
    /// Other categories of the same attribution window.
    fn co_categories(&self) -> &[String];
    /// Slurm started the job again after this run.
    fn requeued(&self) -> bool;

    /// Counts toward r_f by the paper's rule: `NODE_FAIL`, or `FAILED`
    /// with a health check in the attribution window.
    fn is_hardware_failure(&self) -> bool {
        match self.state() {
            JobState::NodeFail => true,
            JobState::Failed => self.category().is_some(),
            _ => false,
        }
    }

    /// The category a hardware failure is counted under.
    fn failure_category(&self) -> &str {
        self.category().unwrap_or(UNATTRIBUTED)
    }
}

impl Run for JobRecord {
    fn state(&self) -> JobState {
        self.state
    }
    fn gpus(&self) -> u32 {
        self.gpus
    }
    fn nodes(&self) -> u32 {
        self.nodes
    }
    fn end_s(&self) -> i64 {
        self.end.timestamp()
    }
    fn start_s(&self) -> Option<i64> {
        self.start.map(|s| s.timestamp())
    }
    fn runtime_s(&self) -> f64 {
        JobRecord::runtime_s(self)
    }
    fn wait_s(&self) -> Option<i64> {
        Some((self.start? - self.submit?).num_seconds())
    }
    fn ended_in(&self, range: &TimeRange) -> bool {
        range.contains(self.end)
    }
    fn category(&self) -> Option<&str> {
        self.category.as_deref()
    }
    fn co_categories(&self) -> &[String] {
        &self.co_categories
    }
    fn requeued(&self) -> bool {
        self.requeued
    }
}

/// A run read from lemon.db, in whole seconds: 48 bytes, a hardware
/// failure's categories boxed beside it. Read it through [`Run`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRun {
    /// Seconds since the epoch; a time no `DateTime` can hold reads as 0,
    /// as [`JobRecord`]'s would.
    end: i64,
    /// [`UNKNOWN`] where the run has none: an `Option<i64>` would take 16
    /// bytes, and a million runs' first touch of their memory shows.
    start: i64,
    submit: i64,
    gpus: u32,
    nodes: u32,
    state: JobState,
    requeued: bool,
    attributed: Option<Box<Attributed>>,
}

/// A start or submission a run does not have (no time reads as this:
/// [`seconds`] makes times no `DateTime` holds 0).
const UNKNOWN: i64 = i64::MIN;

impl ReportRun {
    /// A run that is not (yet) attributed, requeued only when its state
    /// says so.
    pub fn new(
        end: i64,
        start: Option<i64>,
        submit: Option<i64>,
        gpus: u32,
        nodes: u32,
        state: JobState,
    ) -> ReportRun {
        ReportRun {
            end: seconds(end),
            start: start.map_or(UNKNOWN, seconds),
            submit: submit.map_or(UNKNOWN, seconds),
            gpus,
            nodes,
            state,
            requeued: state == JobState::Requeued,
            attributed: None,
        }
    }

    pub(crate) fn set_gpus(&mut self, gpus: u32) {
        self.gpus = gpus;
    }

    pub(crate) fn set_requeued(&mut self) {
        self.requeued = true;
    }

    /// Attributes the run to hardware: `category`, with the other
    /// categories of its window.
    pub fn attribute(&mut self, category: String, co_categories: Vec<String>) {
        self.attributed = Some(Box::new(Attributed {
            category,
            co_categories,
        }));
    }
}

/// Why a run counts as a hardware failure: the category it is attributed
/// to and the other categories of its window.
#[derive(Debug, Clone, PartialEq)]
pub struct Attributed {
    pub category: String,
    pub co_categories: Vec<String>,
}

/// `t` where a `DateTime` holds it, else 0 (`DateTime`'s default).
fn seconds(t: i64) -> i64 {
    // 2^40 s is 34,000 years: any `DateTime` holds that, without the
    // calendar arithmetic of asking.
    if t.unsigned_abs() < 1 << 40 {
        return t;
    }
    DateTime::from_timestamp(t, 0).map_or(0, |_| t)
}

impl Run for ReportRun {
    fn state(&self) -> JobState {
        self.state
    }
    fn gpus(&self) -> u32 {
        self.gpus
    }
    fn nodes(&self) -> u32 {
        self.nodes
    }
    fn end_s(&self) -> i64 {
        self.end
    }
    fn start_s(&self) -> Option<i64> {
        (self.start != UNKNOWN).then_some(self.start)
    }
    fn runtime_s(&self) -> f64 {
        // As `JobRecord::runtime_s`: milliseconds, then seconds.
        match self.start_s() {
            Some(start) => ((self.end - start) * 1000).max(0) as f64 / 1000.0,
            None => 0.0,
        }
    }
    fn wait_s(&self) -> Option<i64> {
        let submit = (self.submit != UNKNOWN).then_some(self.submit)?;
        Some(self.start_s()? - submit)
    }
    fn ended_in(&self, range: &TimeRange) -> bool {
        // `end` holds 0 for a time no `DateTime` can hold, as JobRecord's would.
        range.contains_seconds(self.end)
    }
    fn category(&self) -> Option<&str> {
        self.attributed.as_deref().map(|a| a.category.as_str())
    }
    fn co_categories(&self) -> &[String] {
        self.attributed
            .as_deref()
            .map_or(&[], |a| a.co_categories.as_slice())
    }
    fn requeued(&self) -> bool {
        self.requeued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn record(start: Option<i64>, end: i64) -> JobRecord {
        let t = |s| chrono::Utc.timestamp_opt(s, 0).unwrap();
        JobRecord {
            id: "7".into(),
            state: JobState::Failed,
            submit: Some(t(1_000)),
            start: start.map(t),
            end: t(end),
            gpus: 16,
            nodes: 2,
            category: Some("xid".into()),
            co_categories: vec!["ecc".into()],
            requeued: true,
            partition: "gpu".into(),
        }
    }

    #[test]
    fn a_run_ends_inside_a_range_by_its_seconds_as_by_its_time() {
        let at = |s: i64, nanos: u32| chrono::Utc.timestamp_opt(s, nanos).unwrap();
        for range in [
            TimeRange {
                since: at(100, 0),
                until: at(200, 0),
            },
            TimeRange {
                since: at(100, 500),
                until: at(200, 500),
            },
            TimeRange {
                since: at(-50, 1),
                until: at(0, 0),
            },
        ] {
            for end in [-51, -50, -49, -1, 0, 1, 99, 100, 101, 199, 200, 201] {
                let run = ReportRun::new(end, None, None, 8, 1, JobState::Failed);
                assert_eq!(
                    run.ended_in(&range),
                    range.contains(at(end, 0)),
                    "{end} in {range:?}"
                );
            }
        }
    }

    fn compact(r: &JobRecord) -> ReportRun {
        let mut c = ReportRun::new(
            r.end.timestamp(),
            r.start.map(|s| s.timestamp()),
            r.submit.map(|s| s.timestamp()),
            r.gpus,
            r.nodes,
            r.state,
        );
        if r.requeued {
            c.set_requeued();
        }
        if let Some(category) = r.category.clone() {
            c.attribute(category, r.co_categories.clone());
        }
        c
    }

    #[test]
    fn a_compact_run_reads_as_the_record_it_was_made_from() {
        let range = TimeRange {
            since: chrono::Utc.timestamp_opt(2_000, 0).unwrap(),
            until: chrono::Utc.timestamp_opt(9_000, 0).unwrap(),
        };
        for (start, end) in [(Some(1_500), 5_000), (None, 2_000), (Some(9_500), 9_000)] {
            let r = record(start, end);
            let c = compact(&r);
            assert_eq!(Run::runtime_s(&c), Run::runtime_s(&r));
            assert_eq!(c.wait_s(), r.wait_s());
            assert_eq!(c.ended_in(&range), r.ended_in(&range));
            assert_eq!(c.start_s(), r.start_s());
            assert_eq!(c.category(), r.category());
            assert_eq!(c.co_categories(), r.co_categories());
            assert_eq!(Run::failure_category(&c), r.failure_category());
            assert_eq!(Run::is_hardware_failure(&c), r.is_hardware_failure());
        }
    }

    #[test]
    fn a_time_no_date_can_hold_reads_as_the_epoch() {
        assert_eq!(seconds(i64::MAX), 0);
        assert_eq!(seconds(i64::MIN + 1), 0);
        assert_eq!(seconds(1_700_000_000), 1_700_000_000);
        assert_eq!(seconds(-(1 << 41)), -(1 << 41));
        let r = ReportRun::new(i64::MAX, Some(i64::MIN), None, 8, 1, JobState::Completed);
        assert_eq!((r.end_s(), r.start_s(), r.wait_s()), (0, Some(0), None));
    }

    #[test]
    fn a_compact_run_takes_48_bytes() {
        assert_eq!(std::mem::size_of::<ReportRun>(), 48);
    }
}
