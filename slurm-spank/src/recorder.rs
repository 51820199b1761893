//! The flight recorder for a job's tasks (issue 32): the environment that
//! turns on PyTorch's NCCL flight recorder, and the per-job directory its
//! dumps go to. Plain functions; the callbacks only call them.
//!
//! The variables, as PyTorch reads them (`ProcessGroupNCCL.hpp`,
//! `FlightRecorder.hpp`): `TORCH_NCCL_TRACE_BUFFER_SIZE` (ring entries per
//! rank; 0 is off), `TORCH_NCCL_DUMP_ON_TIMEOUT=1` (dump when the watchdog
//! sees a timeout), `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` (the dump's path
//! prefix; the rank is appended), and with timing `TORCH_NCCL_ENABLE_TIMING=1`
//! (CUDA events around every collective, for `duration_ms`).

use lemonade_config::spank::Recorder;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The file-name prefix of a rank's dump; PyTorch appends the rank.
pub const DUMP_PREFIX: &str = "nccl_trace_rank_";

/// The variables for a job's tasks; none when the recorder is off.
pub fn environment(recorder: Recorder, buffer: u32, dir: &Path) -> Vec<(&'static str, String)> {
    if recorder == Recorder::Off {
        return Vec::new();
    }
    let mut vars = vec![
        ("TORCH_NCCL_TRACE_BUFFER_SIZE", buffer.to_string()),
        ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1".to_string()),
        (
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
            dir.join(DUMP_PREFIX).display().to_string(),
        ),
    ];
    if recorder == Recorder::Timing {
        vars.push(("TORCH_NCCL_ENABLE_TIMING", "1".to_string()));
    }
    vars
}

/// Makes `dir` (a job's dump directory, `<state>/flight-recorder/<job>`)
/// for the job's user: its parent root's and searchable by all, the job's
/// own mode 0700 and owned by `uid`:`gid`. Each step of the job calls it;
/// an existing directory is kept if it is a real directory of that user,
/// never followed if it is a link.
pub fn prepare_dir(dir: &Path, uid: u32, gid: u32) -> Result<PathBuf, String> {
    let parent = dir
        .parent()
        .ok_or_else(|| format!("{}: no parent directory", dir.display()))?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => std::os::unix::fs::lchown(dir, Some(uid), Some(gid))
            .map_err(|e| format!("{}: chown: {e}", dir.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.file_type().is_dir() || meta.uid() != uid {
        return Err(format!(
            "{}: exists but is not a directory of uid {uid}; the flight recorder stays off",
            dir.display()
        ));
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> (u32, u32) {
        // SAFETY: no preconditions, cannot fail.
        unsafe { (libc::geteuid(), libc::getegid()) }
    }

    #[test]
    fn off_sets_nothing_and_timing_adds_the_timing_variable() {
        let dir = Path::new("/var/lib/lemonade/flight-recorder/77");
        assert!(environment(Recorder::Off, 2000, dir).is_empty());
        let on = environment(Recorder::On, 2000, dir);
        assert_eq!(
            on,
            vec![
                ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000".to_string()),
                ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1".to_string()),
                (
                    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                    "/var/lib/lemonade/flight-recorder/77/nccl_trace_rank_".to_string()
                ),
            ]
        );
        let timing = environment(Recorder::Timing, 500, dir);
        assert_eq!(timing.len(), 4);
        assert_eq!(timing[3], ("TORCH_NCCL_ENABLE_TIMING", "1".to_string()));
    }

    #[test]
    fn the_job_directory_is_made_once_private_and_a_planted_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let (uid, gid) = me();
        let dir = root.path().join("flight-recorder").join("77");
        prepare_dir(&dir, uid, gid).unwrap();
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), uid);
        // A second step of the same job.
        prepare_dir(&dir, uid, gid).unwrap();

        let link = root.path().join("flight-recorder").join("78");
        std::os::unix::fs::symlink(root.path(), &link).unwrap();
        let e = prepare_dir(&link, uid, gid).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
    }
}
