//! Reading a dump file. The dump directory is written by the job's user, so
//! the file is hostile: it is opened through `joblog`'s checked walk (no
//! symlink on the path, `O_NOFOLLOW`, a regular file of the job's user, no
//! directory another user could change), read whole up to a size cap within
//! a time cap, then parsed as plain data only.

use crate::dump::{summarize, DumpError, RankSummary};
use crate::pickle::{parse, Limits, PickleError};
use joblog::Skip;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Caps on reading one dump.
#[derive(Debug, Clone)]
pub struct ReadLimits {
    pub pickle: Limits,
    /// Opening and reading; a dump on a hung mount is abandoned.
    pub timeout: Duration,
}

impl Default for ReadLimits {
    fn default() -> ReadLimits {
        ReadLimits {
            pickle: Limits::default(),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why a dump file gave no summary, with its path.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{path}: not read: {skip}")]
    Skipped { path: PathBuf, skip: Skip },
    #[error("{path}: over the cap of {cap} bytes")]
    TooLarge { path: PathBuf, cap: usize },
    #[error("{path}: the name does not end in the rank (PyTorch writes <prefix><rank>)")]
    NoRank { path: PathBuf },
    #[error("{path}: {source}")]
    Pickle { path: PathBuf, source: PickleError },
    #[error("{path}: {source}")]
    Dump { path: PathBuf, source: DumpError },
}

/// The rank in a dump's file name: PyTorch's writer names it
/// `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`, e.g. `nccl_trace_rank_13`.
pub fn rank_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return None;
    }
    name[name.len() - digits..].parse().ok()
}

/// Reads, parses and summarizes the dump at `path` (absolute), which must
/// belong to `owner_uid`.
pub fn read_dump(
    path: &Path,
    owner_uid: u32,
    limits: &ReadLimits,
) -> Result<RankSummary, ReadError> {
    let rank = rank_from_file_name(path).ok_or_else(|| ReadError::NoRank { path: path.into() })?;
    let cap = limits.pickle.max_bytes;
    let bytes = joblog::read_head(path, owner_uid, cap as u64, limits.timeout).map_err(|skip| {
        ReadError::Skipped {
            path: path.into(),
            skip,
        }
    })?;
    if bytes.len() > cap {
        return Err(ReadError::TooLarge {
            path: path.into(),
            cap,
        });
    }
    summarize_bytes(rank, &bytes, &limits.pickle).map_err(|e| e.at(path))
}

/// What went wrong with bytes not yet tied to a path.
#[derive(Debug)]
pub enum BytesError {
    Pickle(PickleError),
    Dump(DumpError),
}

impl BytesError {
    fn at(self, path: &Path) -> ReadError {
        match self {
            BytesError::Pickle(source) => ReadError::Pickle {
                path: path.into(),
                source,
            },
            BytesError::Dump(source) => ReadError::Dump {
                path: path.into(),
                source,
            },
        }
    }
}

impl std::fmt::Display for BytesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BytesError::Pickle(e) => e.fmt(f),
            BytesError::Dump(e) => e.fmt(f),
        }
    }
}

/// Parses and summarizes dump bytes of rank `rank`.
pub fn summarize_bytes(
    rank: u32,
    bytes: &[u8],
    limits: &Limits,
) -> Result<RankSummary, BytesError> {
    let value = parse(bytes, limits).map_err(BytesError::Pickle)?;
    summarize(rank, &value).map_err(BytesError::Dump)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn my_uid() -> u32 {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }

    fn healthy_dump() -> Vec<u8> {
        let spec = crate::generate::JobSpec {
            ranks: 1,
            ..Default::default()
        };
        crate::generate::job_dumps(&spec).remove(0).1
    }

    #[test]
    fn the_rank_is_the_number_ending_the_file_name() {
        assert_eq!(
            rank_from_file_name(Path::new("/d/nccl_trace_rank_13")),
            Some(13)
        );
        assert_eq!(rank_from_file_name(Path::new("/d/nccl_trace_rank_")), None);
        assert_eq!(rank_from_file_name(Path::new("/d/x99999999999")), None);
    }

    #[test]
    fn a_dump_is_read_and_summarized_with_its_rank() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nccl_trace_rank_5");
        std::fs::write(&path, healthy_dump()).unwrap();
        let r = read_dump(&path, my_uid(), &ReadLimits::default()).unwrap();
        assert_eq!(r.rank, 5);
        assert_eq!(r.groups["0"].last_completed, Some(18231));
    }

    #[test]
    fn a_symlink_a_fifo_and_an_oversized_dump_are_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("nccl_trace_rank_0");
        std::fs::write(&real, healthy_dump()).unwrap();
        let link = dir.path().join("nccl_trace_rank_1");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = read_dump(&link, my_uid(), &ReadLimits::default()).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::Skipped {
                    skip: Skip::Symlink,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("nccl_trace_rank_1"), "{err}");

        let fifo = dir.path().join("nccl_trace_rank_2");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_dump(&fifo, my_uid(), &ReadLimits::default()).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::Skipped {
                    skip: Skip::NotRegular,
                    ..
                }
            ),
            "{err}"
        );

        let mut small = ReadLimits::default();
        small.pickle.max_bytes = 100;
        let err = read_dump(&real, my_uid(), &small).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { cap: 100, .. }), "{err}");
    }
}
