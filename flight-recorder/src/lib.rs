//! Hangs and stragglers inside a job (issue 32, after Ant Group's XPUTimer),
//! from PyTorch's NCCL flight recorder: each rank keeps a ring of its last
//! collectives and dumps it, pickled, on a watchdog timeout.
//!
//! * [`pickle`]: a reader of plain-data pickles (no code, size and depth caps);
//! * [`dump`]: one rank's dump → [`RankSummary`];
//! * [`analysis`]: all ranks' summaries → [`Analysis`] (who hangs, who lags);
//! * [`read`]: dump files, read as root from a directory the job's user writes;
//! * [`generate`]: dumps written as PyTorch writes them, for tests.

pub mod analysis;
pub mod dump;
pub mod generate;
pub mod pickle;
pub mod read;

pub use analysis::{analyze, Analysis, Hang, Params, Straggler, StragglerSign};
pub use dump::{summarize, DumpError, RankSummary};
pub use read::{rank_from_file_name, read_dump, summarize_bytes, ReadError, ReadLimits};

/// The default cap on one dump file: PyTorch's default ring (2000 entries)
/// with stack frames is a few MiB; a ring of 20000 stays well under this.
pub const DEFAULT_MAX_DUMP_BYTES: u64 = 64 << 20;
