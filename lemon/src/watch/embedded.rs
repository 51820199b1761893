//! The embedded source: the node sampler's samples, shipped through the
//! spool export into lemon.db. The sampler and its table come with the
//! node-sampler part of issue 33; until they are connected this source says
//! so, and every poll is skipped rather than run blind.

use super::{OwnedSample, SampleSource, SourceError};
use lemonade_slurm::squeue::RunningJob;
use lemonade_sql::rusqlite::Connection;

/// Samples from lemon.db.
pub struct EmbeddedSource<'a> {
    /// lemon.db, opened by the service. Connecting the sampler is one call
    /// in [`SampleSource::recent`]: `db::samples::recent(self.conn, &job.id,
    /// &job.nodes, since)`, its rows mapped to [`OwnedSample`].
    #[allow(dead_code)]
    conn: &'a Connection,
}

impl<'a> EmbeddedSource<'a> {
    pub fn new(conn: &'a Connection) -> Self {
        Self { conn }
    }
}

impl SampleSource for EmbeddedSource<'_> {
    fn recent(&self, _job: &RunningJob, _since: i64) -> Result<Vec<OwnedSample>, SourceError> {
        Err(SourceError::NotConnected(
            "the embedded source (the node sampler's samples in lemon.db) is not connected \
             in this build; set [watch] source = \"prometheus\" and prometheus_url"
                .into(),
        ))
    }
}
