//! The embedded source: the node sampler's samples, shipped through the
//! spool export into lemon.db. The sampler and its table come with the
//! node-sampler part of issue 33; until then this source says so, and
//! every poll is skipped rather than run blind.

use super::{OwnedSample, SampleSource, SourceError};
use lemonade_slurm::squeue::RunningJob;

/// Samples from lemon.db (to be connected to `db::samples::recent`).
#[derive(Debug, Default)]
pub struct EmbeddedSource;

impl SampleSource for EmbeddedSource {
    fn recent(&self, _job: &RunningJob, _since: i64) -> Result<Vec<OwnedSample>, SourceError> {
        Err(SourceError::NotConnected(
            "the embedded source (the node sampler's samples in lemon.db) is not connected \
             in this build; set [watch] source = \"prometheus\" and prometheus_url"
                .into(),
        ))
    }
}
