//! The final state of a run as sacct reports it: what the attribution and
//! the reliability report both branch on.

use serde::Serialize;

/// Final state of one run of a job, as `sacct` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Completed,
    Failed,
    NodeFail,
    Preempted,
    Requeued,
    Timeout,
    Cancelled,
    OutOfMemory,
    BootFail,
    Deadline,
    Other,
}

impl JobState {
    /// Every state, in the order the report lists them.
    pub const ALL: [JobState; 11] = [
        JobState::Completed,
        JobState::Failed,
        JobState::NodeFail,
        JobState::Preempted,
        JobState::Requeued,
        JobState::Timeout,
        JobState::Cancelled,
        JobState::OutOfMemory,
        JobState::BootFail,
        JobState::Deadline,
        JobState::Other,
    ];

    /// Parses sacct's `State` column; `CANCELLED by 1234` is `Cancelled`.
    pub fn from_sacct(s: &str) -> JobState {
        // A state alone (most of a million runs) needs no split.
        match JobState::from_word(s) {
            JobState::Other => JobState::from_word(s.split_whitespace().next().unwrap_or("")),
            state => state,
        }
    }

    /// The state named by one word of sacct's State.
    fn from_word(word: &str) -> JobState {
        match word {
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed,
            "NODE_FAIL" => JobState::NodeFail,
            "PREEMPTED" => JobState::Preempted,
            "REQUEUED" | "REQUEUE_FED" | "REQUEUE_HOLD" => JobState::Requeued,
            "TIMEOUT" => JobState::Timeout,
            "CANCELLED" => JobState::Cancelled,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            "BOOT_FAIL" => JobState::BootFail,
            "DEADLINE" => JobState::Deadline,
            _ => JobState::Other,
        }
    }

    /// The name sacct uses.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::Requeued => "REQUEUED",
            JobState::Timeout => "TIMEOUT",
            JobState::Cancelled => "CANCELLED",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::Other => "OTHER",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl JobState {
    /// The states that count as failed runs (`FAILED`, `NODE_FAIL`).
    pub fn is_failure(self) -> bool {
        matches!(self, JobState::Failed | JobState::NodeFail)
    }
}
