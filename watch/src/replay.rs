//! `lemon watch --replay`: a recorded file through the streaming detector.

use crate::detector::{Counts, Detector, OutOfOrder};
use crate::input::{InputError, Rows};
use crate::Detection;
use lemonade_config::WatchSettings;
use std::io::Read;
use thiserror::Error;

/// What a replay found and what it read.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOutcome {
    /// Every call, in the order the stream made them.
    pub detections: Vec<Detection>,
    /// Rows read after the header.
    pub rows: u64,
    /// What the detector took in (NaN and infinities skipped, ...).
    pub counts: Counts,
}

impl ReplayOutcome {
    /// The detections as the JSON array (`[]` when none), one line
    /// per detection in text otherwise.
    pub fn render(&self, json: bool) -> String {
        if json {
            let array = serde_json::to_string_pretty(&self.detections)
                .expect("detections are plain strings and numbers");
            return array + "\n";
        }
        self.detections
            .iter()
            .map(|d| {
                format!(
                    "{} {} {} score {} ({}) {}\n",
                    d.job,
                    d.node,
                    d.detected_at,
                    d.score,
                    d.metrics.join(","),
                    d.tier.as_str()
                )
            })
            .collect()
    }

    /// What was read and skipped, for stderr.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        format!(
            "{} rows, {} jobs, {} detections; skipped: {} NaN or infinite, {} first after an exporter gap",
            self.rows,
            c.jobs,
            self.detections.len(),
            c.non_finite,
            c.after_gap
        )
    }
}

/// Why a replay stopped. Nothing was reported: the caller prints only an outcome.
#[derive(Debug, Error)]
pub enum ReplayError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("line {line}: {source}")]
    TimeBackwards {
        line: u64,
        #[source]
        source: OutOfOrder,
    },
}

/// Replays `input` (a `time,job,node,metric,value` file) through a fresh
/// [`Detector`] with `settings`, exactly as a live stream would go.
pub fn replay(input: impl Read, settings: &WatchSettings) -> Result<ReplayOutcome, ReplayError> {
    let mut rows = Rows::new(input)?;
    let mut detector = Detector::new(settings.clone());
    let mut detections = Vec::new();
    let mut count = 0;
    while let Some((line, sample)) = rows.next_row()? {
        count += 1;
        let made = detector
            .push(sample)
            .map_err(|source| ReplayError::TimeBackwards { line, source })?;
        detections.extend(made);
    }
    Ok(ReplayOutcome {
        detections,
        rows: count,
        counts: detector.counts(),
    })
}
