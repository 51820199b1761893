//! `lemon watch`: the in-job faulty-machine detector (`lemonade_watch`,
//! after Minder), over a recorded file ([`replay`]) or live, as a service
//! that polls the running jobs and drains the outlier ([`live`]).
//!
//! Live samples come from a [`SampleSource`]: the node sampler's samples in
//! lemon.db ([`embedded`]) or a site's Prometheus ([`prometheus`]).

pub mod embedded;
pub mod evidence;
pub mod feed;
pub mod hooks;
pub mod live;
pub mod prometheus;
pub mod replay;
pub mod report;
pub mod respond;
pub mod service;

pub use replay::replay_file;

use lemonade_slurm::squeue::RunningJob;
use thiserror::Error;

/// One sample of a running job's node, owned (a source builds it from text).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedSample {
    /// Unix seconds.
    pub time: i64,
    /// The Slurm node name.
    pub node: String,
    /// The vocabulary name (`gpu_util`, ...).
    pub metric: String,
    pub value: f64,
}

/// Why a source gave no samples. Any of them skips the poll: acting on
/// part of a picture, or an old one, could call a healthy node.
#[derive(Debug, Error)]
pub enum SourceError {
    /// The server did not answer (refused, timed out, HTTP error).
    #[error("{what} unreachable: {why}")]
    Unreachable { what: String, why: String },
    /// It answered something we cannot read.
    #[error("{what}: bad answer: {why}")]
    BadAnswer { what: String, why: String },
}

/// Where a live poll reads samples.
pub trait SampleSource {
    /// Called once per poll with every job about to be read, so that a
    /// source can ask for all of them at once; `now` ends the range.
    fn prepare(&self, _jobs: &[RunningJob], _since: i64, _now: i64) -> Result<(), SourceError> {
        Ok(())
    }

    /// The job's nodes' samples later than `since` (unix seconds), any order.
    fn recent(&self, job: &RunningJob, since: i64) -> Result<Vec<OwnedSample>, SourceError>;
}
