//! The epilog's share of issue 32: a job's NCCL flight-recorder dumps on
//! this node, reduced to per-rank summaries for the export, and the raw
//! dumps of old jobs pruned.
//!
//! The job's directory (`config::StoreSettings::flight_recorder_dir`) is
//! made by the SPANK plugin, as root, owned by the job's user, under a
//! directory that only root writes. Everything in it is the user's, so it
//! is hostile: the directory must be a real directory (not a link) under a
//! parent that only we can write, its owner is taken as the job's uid, and
//! each dump is read by `flight_recorder::read_dump` (no symlink, a regular
//! file of that uid, size and time caps, plain-data pickle only).

use flight_recorder::{read_dump, RankSummary, ReadLimits};
use lemonade_config::Config;
use lemonade_spool::Body;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// PyTorch names each dump `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`; the
/// plugin sets the prefix to `<dir>/nccl_trace_rank_`.
pub const DUMP_PREFIX: &str = "nccl_trace_rank_";

/// At most this many dumps of one job on one node are read (one per GPU is
/// the rule; a directory the user filled with files is not walked whole).
pub const MAX_DUMPS: usize = 64;

/// Each exported summary keeps the newest collectives of each group: the
/// hang needs only the last ones, the straggler test a few dozen.
pub const EXPORT_COLLECTIVES: usize = 64;

/// The time all of a job's dumps may take together. The epilog runs under
/// slurmd's watchdog: 64 dumps on a hung mount at a per-dump limit alone
/// would hold it for minutes, and a killed epilog loses the whole export.
pub const COLLECT_BUDGET: Duration = Duration::from_secs(10);

/// The export records for job `job_id`'s dumps on this node: one per dump,
/// with its summary or why it could not be read. None when the job wrote
/// no dumps (the setting was off, or nothing timed out).
pub fn collect(config: &Config, job_id: &str) -> Vec<Body> {
    let mut out = off_note(config, job_id).into_iter().collect::<Vec<_>>();
    out.extend(collect_dumps(config, job_id));
    out
}

/// The plugin's note that the job's own setting kept its dumps from us, as
/// a record the job's evidence shows. Read without following a link, capped.
fn off_note(config: &Config, job_id: &str) -> Option<Body> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = config.store.flight_recorder_off_note(job_id);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .ok()?;
    let mut text = String::new();
    file.take(1024).read_to_string(&mut text).ok()?;
    Some(failed(job_id, None, text.trim().to_string()))
}

fn collect_dumps(config: &Config, job_id: &str) -> Vec<Body> {
    let dir = config.store.flight_recorder_dir(job_id);
    let owner = match job_dir_owner(&dir) {
        Ok(Some(uid)) => uid,
        Ok(None) => return Vec::new(),
        Err(problem) => {
            return vec![failed(
                job_id,
                None,
                format!("{}: {problem}", dir.display()),
            )]
        }
    };
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(DUMP_PREFIX))
            .collect(),
        Err(e) => return vec![failed(job_id, None, format!("{}: {e}", dir.display()))],
    };
    names.sort();
    let mut out = Vec::new();
    if names.len() > MAX_DUMPS {
        let problem = format!(
            "{}: {} dumps, only the first {MAX_DUMPS} read",
            dir.display(),
            names.len()
        );
        out.push(failed(job_id, None, problem));
        names.truncate(MAX_DUMPS);
    }
    let deadline = Instant::now() + COLLECT_BUDGET;
    for name in names {
        let path = dir.join(&name);
        let rank = flight_recorder::rank_from_file_name(&path);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let problem = format!(
                "{}: not read: the collection's time was spent",
                path.display()
            );
            out.push(failed(job_id, rank, problem));
            continue;
        }
        let mut limits = ReadLimits::default();
        limits.timeout = limits.timeout.min(left);
        out.push(match read_dump(&path, owner, &limits) {
            Ok(summary) => summarized(job_id, trimmed(summary, EXPORT_COLLECTIVES)),
            Err(e) => failed(job_id, rank, e.to_string()),
        });
    }
    out
}

/// The uid owning the job's dump directory, `None` when there is none.
/// Refused: a link or non-directory in its place, or a parent another
/// user could write (then anyone could have made the job's directory).
fn job_dir_owner(dir: &Path) -> Result<Option<u32>, String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.file_type().is_dir() {
        return Err("not a directory (a link or file in its place); not read".into());
    }
    let parent = dir.parent().ok_or("no parent directory")?;
    let pmeta = std::fs::symlink_metadata(parent).map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !pmeta.file_type().is_dir() || pmeta.uid() != me || pmeta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a directory only uid {me} can write; not read",
            parent.display()
        ));
    }
    Ok(Some(meta.uid()))
}

/// `summary` with only the newest `keep` collectives of each group.
pub fn trimmed(mut summary: RankSummary, keep: usize) -> RankSummary {
    for group in summary.groups.values_mut() {
        let drop = group.collectives.len().saturating_sub(keep);
        group.collectives.drain(..drop);
    }
    summary
}

fn summarized(job_id: &str, summary: RankSummary) -> Body {
    let rank = summary.rank;
    match serde_json::to_value(&summary) {
        Ok(value) => Body::FlightRecorder {
            job_id: job_id.to_string(),
            rank: Some(rank),
            summary: Some(value),
            error: None,
        },
        Err(e) => failed(job_id, Some(rank), e.to_string()),
    }
}

fn failed(job_id: &str, rank: Option<u32>, error: String) -> Body {
    Body::FlightRecorder {
        job_id: job_id.to_string(),
        rank,
        summary: None,
        error: Some(error),
    }
}

/// Removes the job directories under `<state dir>/flight-recorder/` that
/// have not changed for `keep_days`, except those of `spared` (the job
/// ending now, and the jobs still running here: a job longer than the keep
/// age that has not dumped yet must still find its directory).
/// Never follows a link: entries are looked at with `lstat`, a link is
/// removed as a link, and `remove_dir_all` does not follow links inside.
/// Returns the names removed and the problems met.
pub fn prune(config: &Config, spared: &[String], now: SystemTime) -> (Vec<String>, Vec<String>) {
    let root = config.store.state_dir().join("flight-recorder");
    let keep = Duration::from_secs(u64::from(config.store.flight_recorder_keep_days) * 86_400);
    let mut removed = Vec::new();
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(&root) else {
        return (removed, problems);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if spared.contains(&name) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let changed = meta.modified().unwrap_or(now);
        if now.duration_since(changed).unwrap_or_default() < keep {
            continue;
        }
        let gone = if meta.file_type().is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match gone {
            Ok(()) => removed.push(name),
            Err(e) => problems.push(format!("{}: not pruned: {e}", path.display())),
        }
    }
    removed.sort();
    (removed, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flight_recorder::generate::{job_dumps, JobSpec};
    use std::os::unix::fs::PermissionsExt;

    fn node(dir: &Path) -> Config {
        let mut config = Config::default();
        config.store.path = dir.join("node.db");
        config
    }

    fn plant(config: &Config, job: &str, spec: &JobSpec) -> std::path::PathBuf {
        let dir = config.store.flight_recorder_dir(job);
        std::fs::create_dir_all(&dir).unwrap();
        for p in [dir.parent().unwrap(), dir.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        for (rank, bytes) in job_dumps(spec) {
            std::fs::write(dir.join(format!("{DUMP_PREFIX}{rank}")), bytes).unwrap();
        }
        dir
    }

    fn summaries(bodies: &[Body]) -> Vec<RankSummary> {
        bodies
            .iter()
            .filter_map(|b| match b {
                Body::FlightRecorder {
                    summary: Some(v), ..
                } => Some(serde_json::from_value(v.clone()).unwrap()),
                _ => None,
            })
            .collect()
    }

    fn errors(bodies: &[Body]) -> Vec<String> {
        bodies
            .iter()
            .filter_map(|b| match b {
                Body::FlightRecorder { error: Some(e), .. } => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_plugins_note_that_the_job_turned_the_recorder_off_reaches_the_export() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let note = config.store.flight_recorder_off_note("78");
        std::fs::create_dir_all(note.parent().unwrap()).unwrap();
        let why =
            "flight recorder off by the job's own setting: TORCH_FR_DUMP_TEMP_FILE=/scratch/fr_";
        std::fs::write(&note, why).unwrap();
        assert_eq!(errors(&collect(&config, "78")), [why]);
        // A link in the note's place is not followed.
        std::fs::remove_file(&note).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &note).unwrap();
        assert!(collect(&config, "78").is_empty());
    }

    #[test]
    fn a_jobs_dumps_become_one_trimmed_summary_per_rank() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let spec = JobSpec {
            ranks: 4,
            ring: 200,
            hung_rank: Some(2),
            ..Default::default()
        };
        plant(&config, "77", &spec);
        let bodies = collect(&config, "77");
        let got = summaries(&bodies);
        assert_eq!(got.iter().map(|s| s.rank).collect::<Vec<_>>(), [0, 1, 2, 3]);
        let group = &got[0].groups["0"];
        assert_eq!(group.collectives.len(), EXPORT_COLLECTIVES);
        assert_eq!(group.collectives.last().unwrap().seq, 18231);
        assert_eq!(got[2].groups["0"].last_started, Some(18230));
        assert!(errors(&bodies).is_empty());
        // A record stays small in the export (its default bound is 8 MiB).
        let longest = bodies
            .iter()
            .map(|b| serde_json::to_string(b).unwrap().len())
            .max()
            .unwrap();
        eprintln!("longest flight_recorder record: {longest} bytes");
        assert!(longest < 16 << 10, "{longest}");
    }

    #[test]
    fn no_directory_means_no_records() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(collect(&node(tmp.path()), "5").is_empty());
    }

    #[test]
    fn a_linked_dump_and_a_hostile_pickle_are_named_and_the_rest_still_read() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let spec = JobSpec {
            ranks: 2,
            ..Default::default()
        };
        let dir = plant(&config, "8", &spec);
        std::fs::write(tmp.path().join("secret"), b"x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("nccl_trace_rank_2"))
            .unwrap();
        // PROTO 2, GLOBAL 'os system', STOP: code, not data.
        std::fs::write(dir.join("nccl_trace_rank_3"), b"\x80\x02cos\nsystem\n.").unwrap();
        std::fs::write(dir.join("unrelated.txt"), b"ignored").unwrap();
        let bodies = collect(&config, "8");
        assert_eq!(summaries(&bodies).len(), 2);
        let errs = errors(&bodies);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("nccl_trace_rank_2"), "{errs:?}");
        assert!(
            errs[1].contains("nccl_trace_rank_3") && errs[1].contains("GLOBAL"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_link_in_place_of_the_job_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let elsewhere = plant(
            &config,
            "9",
            &JobSpec {
                ranks: 1,
                ..Default::default()
            },
        );
        let link = config.store.flight_recorder_dir("10");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let bodies = collect(&config, "10");
        assert!(summaries(&bodies).is_empty());
        assert!(errors(&bodies)[0].contains("not a directory"), "{bodies:?}");
    }

    #[test]
    fn a_parent_others_can_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let dir = plant(
            &config,
            "11",
            &JobSpec {
                ranks: 1,
                ..Default::default()
            },
        );
        let parent = dir.parent().unwrap();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o777)).unwrap();
        let bodies = collect(&config, "11");
        assert!(summaries(&bodies).is_empty());
        assert!(errors(&bodies)[0].contains("only uid"), "{bodies:?}");
    }

    #[test]
    fn pruning_removes_old_job_directories_and_links_without_following_them() {
        let tmp = tempfile::tempdir().unwrap();
        let config = node(tmp.path());
        let spec = JobSpec {
            ranks: 1,
            ..Default::default()
        };
        plant(&config, "old", &spec);
        plant(&config, "current", &spec);
        plant(&config, "running", &spec);
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("keep"), b"x").unwrap();
        let root = config.store.state_dir().join("flight-recorder");
        std::os::unix::fs::symlink(&victim, root.join("link")).unwrap();
        // A link inside an old job's directory: removed, its target kept.
        std::os::unix::fs::symlink(&victim, root.join("old").join("inner")).unwrap();
        let later = SystemTime::now() + Duration::from_secs(8 * 86_400);
        let (removed, problems) = prune(&config, &["current".into(), "running".into()], later);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(removed, ["link", "old"]);
        assert!(victim.join("keep").exists());
        assert!(root.join("current").exists());
        assert!(
            root.join("running").exists(),
            "a running job's directory is spared"
        );
        let (removed, _) = prune(&config, &[], SystemTime::now());
        assert!(removed.is_empty(), "nothing is 7 days old yet");
    }
}
