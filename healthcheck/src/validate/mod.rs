//! `healthcheck validate` (issue 31): proactive validation on the node.
//!
//! * `--parse KIND FILE`: what a benchmark parser (`lemonade-validate`)
//!   reads from a saved output. The file is user-named and may be hostile:
//!   opened without following a symlink, never a FIFO or device, read up to
//!   the parsers' own size cap.
//! * no `--parse`: the suite of `[validate]` runs on this node ([`suite`]),
//!   its metrics are judged ([`judge`]) against the learned bands of the
//!   node's SKU and the static floors, recorded in the node database and
//!   exported, and the verdict drains or resumes the node ([`act`]).

pub mod act;
pub mod hardware;
pub mod judge;
pub mod run;
pub mod suite;

use crate::output::Format;
use std::path::{Path, PathBuf};
use thiserror::Error;
use validate::{Kind, Metrics, ParseError};

/// The parsers refuse more than this; reading stops one byte past it.
pub const MAX_FILE_BYTES: usize = validate::MAX_INPUT_BYTES;

#[derive(Debug, Error)]
pub enum SavedOutputError {
    #[error("{}: is a symlink; give the file itself", path.display())]
    Symlink { path: PathBuf },
    // `error`, not `source`: the message carries it, and anyhow's chain
    // would print it twice.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a regular file", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: over the {max}-byte cap of a benchmark output", path.display())]
    TooLarge { path: PathBuf, max: usize },
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("{}: {kind} output: {error}", path.display())]
    Parse {
        path: PathBuf,
        kind: Kind,
        error: ParseError,
    },
}

/// Reads `path` and parses it as `kind`'s output.
pub fn parse_saved(kind: Kind, path: &Path) -> Result<Metrics, SavedOutputError> {
    let text = read_capped(path)?;
    validate::parse(kind, &text).map_err(|error| SavedOutputError::Parse {
        path: path.to_path_buf(),
        kind,
        error,
    })
}

fn read_capped(path: &Path) -> Result<String, SavedOutputError> {
    use validate::plain_file::{self, Refusal};
    let path_buf = || path.to_path_buf();
    let bytes = plain_file::read_capped(path, MAX_FILE_BYTES).map_err(|refusal| match refusal {
        Refusal::Symlink => SavedOutputError::Symlink { path: path_buf() },
        Refusal::NotRegular => SavedOutputError::NotRegular { path: path_buf() },
        Refusal::TooLarge => SavedOutputError::TooLarge {
            path: path_buf(),
            max: MAX_FILE_BYTES,
        },
        Refusal::Io(error) => SavedOutputError::Io {
            path: path_buf(),
            error,
        },
    })?;
    String::from_utf8(bytes).map_err(|_| SavedOutputError::NotText { path: path_buf() })
}

/// The metrics as a table for people or one JSON object for programs.
pub fn render(kind: Kind, metrics: &Metrics, format: Format) -> String {
    match format {
        Format::Json => {
            let document = serde_json::json!({ "kind": kind.name(), "metrics": metrics.metrics });
            format!("{document:#}\n")
        }
        Format::Human => metrics
            .metrics
            .iter()
            .map(|metric| {
                let detail = metric
                    .detail
                    .as_deref()
                    .map(|d| format!("  {d}"))
                    .unwrap_or_default();
                format!(
                    "{}\t{}\t{}{detail}\n",
                    metric.name, metric.value, metric.unit
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERFTEST: &str =
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8          224958464        0.00               0.48   \t\t   7.498617
---------------------------------------------------------------------------------------
";

    #[test]
    fn a_saved_output_prints_its_metrics_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ib_write_bw.txt");
        std::fs::write(&path, PERFTEST).unwrap();
        let metrics = parse_saved(Kind::Perftest, &path).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&render(Kind::Perftest, &metrics, Format::Json)).unwrap();
        assert_eq!(json["kind"], "perftest");
        assert_eq!(json["metrics"][1]["name"], "bw_average.8");
        assert_eq!(json["metrics"][1]["value"], 0.48);
        assert_eq!(json["metrics"][1]["unit"], "Gb/sec");
    }

    #[test]
    fn a_symlink_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.txt");
        std::fs::write(&target, PERFTEST).unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = parse_saved(Kind::Perftest, &link).unwrap_err();
        assert!(matches!(err, SavedOutputError::Symlink { .. }), "{err}");
    }

    #[test]
    fn a_fifo_or_directory_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(
            &fifo,
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )
        .unwrap();
        for path in [fifo.as_path(), dir.path()] {
            let err = parse_saved(Kind::GpuBurn, path).unwrap_err();
            assert!(matches!(err, SavedOutputError::NotRegular { .. }), "{err}");
        }
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.txt");
        std::fs::write(&path, vec![b'x'; MAX_FILE_BYTES + 1]).unwrap();
        let err = parse_saved(Kind::NcclTests, &path).unwrap_err();
        assert!(matches!(err, SavedOutputError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn a_truncated_output_is_an_error_that_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.txt");
        std::fs::write(&path, &PERFTEST[..PERFTEST.find("---").unwrap()]).unwrap();
        let text = parse_saved(Kind::Perftest, &path).unwrap_err().to_string();
        assert!(text.contains("cut.txt: perftest output: line 3:"), "{text}");
    }
}
