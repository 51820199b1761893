//! In-job faulty-machine detection from monitoring metrics, after ByteDance's
//! Minder (issue 37).
//!
//! In a data-parallel training job every machine should look like its peers.
//! The [`Detector`] takes metric samples of running jobs one by one, in time
//! order, and calls the machine that stands apart from its job's peers:
//!
//! * **similarity**: per metric, each node's value is normalised within the
//!   job at each step and compared with the median node;
//! * **denoising**: a node's value is the median of its last few samples, and
//!   each node's own offset and each metric's noise are learned online from
//!   the end of the job's warm-up (no outside training data);
//! * **metric priority**: metrics weigh by how sensitive they are, and each
//!   counts only in the direction a fault moves it;
//! * **continuity**: a node must stay the lone candidate for several steps.
//!
//! [`replay`] runs a recorded `time,job,node,metric,value` file through it.
//! The thresholds are `[watch]` in the config ([`Config`]).

mod detection;
pub mod detector;
pub mod input;
mod replay;
mod sample;
mod stats;

pub use detection::{first_calls, Detection, Tier};
pub use detector::{Counts, Detector, OutOfOrder};
pub use input::InputError;
pub use replay::{replay, ReplayError, ReplayOutcome};
pub use sample::Sample;

/// The `[watch]` settings the detector runs with.
pub use lemonade_config::WatchSettings as Config;
