//! `validate-criteria.json`: the bands `lemon` learned from the fleet,
//! written by the head node into the shared spool directory and read by
//! every node's `healthcheck validate` to judge its own results.
//!
//! The file crosses a shared directory, so the reader treats it as hostile:
//! no symlink is followed, nothing but a regular file is read, and reading
//! stops past [`MAX_FILE_BYTES`]. The writer replaces it atomically (a
//! temporary file renamed over it), so a node never reads half a file.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The file's name in the spool directory.
pub const FILE_NAME: &str = "validate-criteria.json";

/// A fleet of thousands of nodes, a few SKUs and a few hundred metrics
/// each stays far below this.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// The learned criteria: one band per SKU and metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriteriaFile {
    /// Unix seconds when lemon learned the bands; nodes ignore a file older
    /// than their configured maximum age.
    pub generated_at: i64,
    pub bands: Vec<Band>,
}

/// Which side of a metric is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
    MustBeZero,
}

/// One learned bound: for `sku`'s `metric`, a value on the wrong side of
/// `bound` fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    pub sku: String,
    pub metric: String,
    pub direction: Direction,
    pub bound: f64,
    /// How the bound was learned, for the drain reason and the report
    /// (e.g. `median 371.2 of 57 nodes - 4.0 s`).
    #[serde(default)]
    pub detail: String,
}

impl Band {
    /// Whether `value` fails this band. A value that is not a number fails:
    /// a benchmark that printed `nan` did not show the node is good.
    pub fn fails(&self, value: f64) -> bool {
        if !value.is_finite() {
            return true;
        }
        match self.direction {
            Direction::HigherIsBetter => value < self.bound,
            Direction::LowerIsBetter => value > self.bound,
            Direction::MustBeZero => value != 0.0,
        }
    }
}

impl CriteriaFile {
    /// The bands of one SKU.
    pub fn bands_for<'a>(&'a self, sku: &'a str) -> impl Iterator<Item = &'a Band> + 'a {
        self.bands.iter().filter(move |band| band.sku == sku)
    }
}

#[derive(Debug, Error)]
pub enum CriteriaFileError {
    #[error("{}: is a symlink; the criteria file must be the file itself", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a regular file", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: over the {max}-byte cap of a criteria file", path.display())]
    TooLarge { path: PathBuf, max: usize },
    #[error("{}:{line}: not a criteria file: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Reads the criteria file at `path`, refusing a symlink, anything but a
/// regular file, and a file over [`MAX_FILE_BYTES`].
pub fn read(path: &Path) -> Result<CriteriaFile, CriteriaFileError> {
    let bytes = read_capped(path)?;
    serde_json::from_slice(&bytes).map_err(|e| CriteriaFileError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        message: e.to_string(),
    })
}

/// Writes `criteria` to `path` atomically: readers see the old file or the
/// new one, whole.
pub fn write(path: &Path, criteria: &CriteriaFile) -> Result<(), CriteriaFileError> {
    let io = |error| CriteriaFileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let bytes = serde_json::to_vec_pretty(criteria).map_err(|e| io(std::io::Error::other(e)))?;
    lemonade_spool::atomic::write_atomically(path, &bytes).map_err(io)
}

fn read_capped(path: &Path) -> Result<Vec<u8>, CriteriaFileError> {
    use crate::plain_file::{self, Refusal};
    let path_buf = || path.to_path_buf();
    plain_file::read_capped(path, MAX_FILE_BYTES).map_err(|refusal| match refusal {
        Refusal::Symlink => CriteriaFileError::Symlink { path: path_buf() },
        Refusal::NotRegular => CriteriaFileError::NotRegular { path: path_buf() },
        Refusal::TooLarge => CriteriaFileError::TooLarge {
            path: path_buf(),
            max: MAX_FILE_BYTES,
        },
        Refusal::Io(error) => CriteriaFileError::Io {
            path: path_buf(),
            error,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CriteriaFile {
        CriteriaFile {
            generated_at: 1_700_000_000,
            bands: vec![
                Band {
                    sku: "H100x8".into(),
                    metric: "avg_busbw".into(),
                    direction: Direction::HigherIsBetter,
                    bound: 371.0,
                    detail: "median 380.1 of 57 nodes".into(),
                },
                Band {
                    sku: "A100x8".into(),
                    metric: "wrong_total".into(),
                    direction: Direction::MustBeZero,
                    bound: 0.0,
                    detail: String::new(),
                },
            ],
        }
    }

    #[test]
    fn a_written_file_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        write(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap(), sample());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""direction": "higher_is_better""#),
            "{text}"
        );
    }

    #[test]
    fn a_symlink_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        write(&real, &sample()).unwrap();
        let link = dir.path().join(FILE_NAME);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = read(&link).unwrap_err();
        assert!(matches!(err, CriteriaFileError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains(FILE_NAME), "{err}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, vec![b' '; MAX_FILE_BYTES + 1]).unwrap();
        let err = read(&path).unwrap_err();
        assert!(matches!(err, CriteriaFileError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn garbled_json_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "{\n\"generated_at\": 1,\n\"bands\": [oops]\n}").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains(&format!("{FILE_NAME}:3:")), "{err}");
    }

    #[test]
    fn a_directory_in_its_place_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(matches!(err, CriteriaFileError::NotRegular { .. }), "{err}");
    }

    #[test]
    fn bands_fail_on_their_wrong_side_and_on_nan() {
        let [busbw, wrong] = sample().bands.try_into().unwrap();
        assert!(busbw.fails(312.0) && !busbw.fails(371.0) && busbw.fails(f64::NAN));
        assert!(wrong.fails(1.0) && !wrong.fails(0.0));
        let mut latency = busbw.clone();
        latency.direction = Direction::LowerIsBetter;
        assert!(latency.fails(400.0) && !latency.fails(300.0));
    }
}
