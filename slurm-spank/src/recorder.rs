//! The flight recorder for a job's tasks (issue 32): the environment that
//! turns on PyTorch's flight recorder, and the per-job directory its dumps
//! go to. Plain functions; the callbacks only call them.
//!
//! The variables, as PyTorch reads them. Since 2.x (`FlightRecorder.hpp`,
//! `ProcessGroupNCCL.hpp`) the recorder's own names come first:
//! `TORCH_FR_BUFFER_SIZE` (ring entries per rank; 0 is off),
//! `TORCH_FR_DUMP_ON_TIMEOUT=1` (dump when the watchdog sees a timeout),
//! `TORCH_FR_DUMP_TEMP_FILE` (the dump's path prefix; the rank is
//! appended). The older `TORCH_NCCL_TRACE_BUFFER_SIZE`,
//! `TORCH_NCCL_DUMP_ON_TIMEOUT` and `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` are
//! deprecated aliases that a newer torch still reads (with a warning when
//! only they are set) and an older torch reads alone: we set both, so both
//! record. Timing keeps its one name, `TORCH_NCCL_ENABLE_TIMING=1`.
//! A value the job set itself is kept (see [`defeated_by`]).

use lemonade_config::spank::Recorder;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The file-name prefix of a rank's dump; PyTorch appends the rank.
pub const DUMP_PREFIX: &str = "nccl_trace_rank_";

/// The variables for a job's tasks; none when the recorder is off. Each
/// setting under both its names, the current one first.
pub fn environment(recorder: Recorder, buffer: u32, dir: &Path) -> Vec<(&'static str, String)> {
    if recorder == Recorder::Off {
        return Vec::new();
    }
    let prefix = dir.join(DUMP_PREFIX).display().to_string();
    let mut vars = vec![
        ("TORCH_FR_BUFFER_SIZE", buffer.to_string()),
        ("TORCH_NCCL_TRACE_BUFFER_SIZE", buffer.to_string()),
        ("TORCH_FR_DUMP_ON_TIMEOUT", "1".to_string()),
        ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1".to_string()),
        ("TORCH_FR_DUMP_TEMP_FILE", prefix.clone()),
        ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix),
    ];
    if recorder == Recorder::Timing {
        vars.push(("TORCH_NCCL_ENABLE_TIMING", "1".to_string()));
    }
    vars
}

/// Why the job's own environment keeps its dumps from us, if it does: a
/// dump prefix of its own (the dumps go where the epilog never looks), a
/// ring of 0 (no recording), or file names without the rank. The job's
/// choice is kept; this only says so. `env` reads the job's variables.
pub fn defeated_by(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let mut why = Vec::new();
    for name in ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] {
        if let Some(v) = env(name).filter(|v| !is_ours(v)) {
            why.push(format!("{name}={v}"));
        }
    }
    for name in ["TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"] {
        if env(name).is_some_and(|v| v.trim() == "0") {
            why.push(format!("{name}=0"));
        }
    }
    if let Some(v) = env("TORCH_FR_DUMP_DYNAMIC_FILE_NAME").filter(|v| !is_false(v)) {
        why.push(format!("TORCH_FR_DUMP_DYNAMIC_FILE_NAME={v}"));
    }
    (!why.is_empty()).then(|| {
        format!(
            "flight recorder off by the job's own setting: {}",
            why.join(", ")
        )
    })
}

/// A prefix this plugin set in an earlier step of the job (a batch
/// script's environment is every later `srun` step's):
/// `.../flight-recorder/<job>/nccl_trace_rank_`.
fn is_ours(prefix: &str) -> bool {
    let path = Path::new(prefix);
    let named_ours = path.file_name().is_some_and(|n| n == DUMP_PREFIX);
    let under_root = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "flight-recorder");
    named_ours && under_root
}

/// PyTorch's reading of a boolean variable's "no".
fn is_false(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "n" | "no" | "off"
    )
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
    fn off_sets_nothing_and_on_sets_both_the_current_and_the_deprecated_names() {
        let dir = Path::new("/var/lib/lemonade/flight-recorder/77");
        assert!(environment(Recorder::Off, 2000, dir).is_empty());
        let on = environment(Recorder::On, 2000, dir);
        let prefix = "/var/lib/lemonade/flight-recorder/77/nccl_trace_rank_".to_string();
        assert_eq!(
            on,
            vec![
                ("TORCH_FR_BUFFER_SIZE", "2000".to_string()),
                ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000".to_string()),
                ("TORCH_FR_DUMP_ON_TIMEOUT", "1".to_string()),
                ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1".to_string()),
                ("TORCH_FR_DUMP_TEMP_FILE", prefix.clone()),
                ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix),
            ]
        );
        let timing = environment(Recorder::Timing, 500, dir);
        assert_eq!(timing.len(), 7);
        assert_eq!(timing[6], ("TORCH_NCCL_ENABLE_TIMING", "1".to_string()));
    }

    #[test]
    fn a_jobs_own_prefix_empty_ring_or_rankless_file_name_is_named_and_nothing_else_is() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(defeated_by(env(&[])), None);
        // What the plugin set for the batch step, inherited by a later srun.
        assert_eq!(
            defeated_by(env(&[(
                "TORCH_FR_DUMP_TEMP_FILE",
                "/var/lib/lemonade/flight-recorder/77/nccl_trace_rank_"
            )])),
            None
        );
        assert_eq!(defeated_by(env(&[("TORCH_FR_BUFFER_SIZE", "4000")])), None);
        assert_eq!(
            defeated_by(env(&[("TORCH_FR_DUMP_DYNAMIC_FILE_NAME", "0")])),
            None
        );
        let why = defeated_by(env(&[("TORCH_FR_DUMP_TEMP_FILE", "/scratch/me/fr_")])).unwrap();
        assert_eq!(
            why,
            "flight recorder off by the job's own setting: TORCH_FR_DUMP_TEMP_FILE=/scratch/me/fr_"
        );
        let why = defeated_by(env(&[
            ("TORCH_FR_BUFFER_SIZE", "0"),
            ("TORCH_FR_DUMP_DYNAMIC_FILE_NAME", "1"),
        ]))
        .unwrap();
        assert!(why.contains("TORCH_FR_BUFFER_SIZE=0"), "{why}");
        assert!(why.contains("TORCH_FR_DUMP_DYNAMIC_FILE_NAME=1"), "{why}");
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
