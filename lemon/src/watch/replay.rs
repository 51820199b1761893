//! `lemon watch --replay FILE`: the detector over recorded metric samples.
//!
//! The file may come from users (a job's exporter dump), and lemon runs as
//! root: it is opened without following a symlink and must be a regular
//! file. The replay streams it with a cap on each line, so its size costs
//! time, not memory. Nothing is printed before the whole file has been read:
//! a bad row leaves stdout empty.

use crate::error::{LemonError, Result};
use crate::input_file::open_plain;
use lemonade_config::WatchSettings;
use std::io::BufReader;
use std::path::Path;

/// The detections of a replay of `path`, rendered (JSON: only the array),
/// and the summary of what was read and skipped, for stderr.
pub fn replay_file(path: &Path, settings: &WatchSettings, json: bool) -> Result<(String, String)> {
    let file = open_plain(path, "a CSV file of metric samples")?;
    let outcome = lemonade_watch::replay(BufReader::with_capacity(1 << 20, file), settings)
        .map_err(|e| LemonError::Usage(format!("{}: {e}", path.display())))?;
    // A file with no usable sample judged nothing: "0 detections" would
    // read as a healthy fleet (issue 48).
    if outcome.rows <= outcome.counts.non_finite {
        return Err(LemonError::Usage(format!(
            "{}: no finite sample after the header ({}): nothing to judge",
            path.display(),
            outcome.summary()
        )));
    }
    Ok((outcome.render(json), outcome.summary()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "time,job,node,metric,value\n";

    #[test]
    fn a_replay_with_nothing_to_find_prints_an_empty_json_array() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        let mut text = HEADER.to_string();
        for t in 0..30 {
            for n in ["a", "b", "c", "d"] {
                text += &format!("{},4419021_7,{n},gpu_util,{}\n", 1_700_000_000 + t * 10, 95);
            }
        }
        std::fs::write(&path, text).unwrap();
        let (out, summary) = replay_file(&path, &WatchSettings::default(), true).unwrap();
        assert_eq!(out.trim(), "[]");
        assert!(summary.starts_with("120 rows, 1 jobs"), "{summary}");
    }

    #[test]
    fn a_replay_without_a_finite_sample_is_an_error_not_an_empty_result() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        for text in [
            HEADER.to_string(),
            format!("{HEADER}1700000000,7,a,gpu_util,NaN\n"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = replay_file(&path, &WatchSettings::default(), true).unwrap_err();
            assert!(err.to_string().contains("nothing to judge"), "{err}");
        }
    }

    #[test]
    fn a_symlink_a_fifo_and_a_bad_row_are_refused_with_the_path_named() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.csv");
        std::fs::write(&real, format!("{HEADER}1,7,a,gpu_util,oops\n")).unwrap();
        let err = replay_file(&real, &WatchSettings::default(), true).unwrap_err();
        assert!(err.to_string().contains("real.csv"), "{err}");
        assert!(err.to_string().contains("line 2"), "{err}");

        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = replay_file(&link, &WatchSettings::default(), true).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = replay_file(&fifo, &WatchSettings::default(), true).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
