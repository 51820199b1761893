//! The job prolog and epilog of `lemonade_spank_prolog.so` (the
//! `slurm-spank/prolog` crate exports them; `lemonade_spank.so` does not).
//!
//! They are kept out of the default plugin because exporting
//! `slurm_spank_job_prolog`/`_epilog` makes slurmd start a
//! `slurmstepd spank prolog|epilog` process for every job, whatever the job
//! asked for: about 15 ms per job on our bench machine, three times the
//! plugin's budget. Sites that run `lemonade-prolog`/`-epilog` from
//! slurm.conf get the same checks from the default plugin, which hands the
//! job's choice to those programs through the job control environment.

use crate::callbacks::{guard, item_u32, node_config, node_name, parse_settings, plugin_args};
use crate::callbacks::{OPTIONAL_ARGUMENT, OPTION_ARGINFO, OPTION_NAME};
use crate::exec::{self, Outcome};
use crate::ffi::{self, spank_t};
use crate::log;
use lemonade_config::spank::{Choice, Settings};
use std::ffi::{c_char, c_int, CStr};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Markers of the SPANK plugin older than this are removed by its epilog.
const MARKER_MAX_AGE: Duration = Duration::from_secs(7 * 86_400);

/// `slurm_spank_job_prolog`: runs the chosen profile before the job starts
/// on this node; a non-zero exit of the program (unhealthy node) fails it,
/// which Slurm treats like a failing `Prolog=`: the job is requeued.
///
/// # Safety
/// Called from Slurm's callback with its valid handle and arguments.
pub unsafe fn prolog(sp: spank_t, argc: c_int, argv: *mut *mut c_char) -> c_int {
    guard("job_prolog", 0, || {
        job_script(sp, &plugin_args(argc, argv), Phase::Prolog)
    })
}

/// `slurm_spank_job_epilog`: runs the epilog profile after the job.
///
/// # Safety
/// Called from Slurm's callback with its valid handle and arguments.
pub unsafe fn epilog(sp: spank_t, argc: c_int, argv: *mut *mut c_char) -> c_int {
    guard("job_epilog", 0, || {
        job_script(sp, &plugin_args(argc, argv), Phase::Epilog)
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prolog,
    Epilog,
}

/// `job_script` context: a `slurmstepd spank prolog|epilog` process of its
/// own, with the prolog environment; `slurm_spank_init` did not run here.
unsafe fn job_script(sp: spank_t, args: &[String], phase: Phase) -> Result<c_int, String> {
    let settings = match parse_settings(args) {
        Ok(s) => s,
        Err(e) => {
            log::error(&format!("{e}; no health checks for this job"));
            return Ok(0);
        }
    };
    let job_id = item_u32(sp, ffi::spank_item_S_JOB_ID, "the job id")?.to_string();
    let choice = job_choice(sp, &settings);
    let node = node_name(sp);
    if let Some(config) = node_config(&settings, node) {
        let marker = config.store.spank_marker_path(&job_id);
        match phase {
            Phase::Prolog => write_marker(&marker, choice),
            Phase::Epilog => prune_markers(&marker),
        }
    }
    let (program, profile) = match phase {
        Phase::Prolog if choice == Choice::Off => {
            log::verbose(&format!("job {job_id}: --health-check=off, no checks"));
            return Ok(0);
        }
        Phase::Prolog => (settings.prolog.as_deref(), choice.as_str()),
        // The option is about the job's start: the epilog, which protects
        // the next job, runs its own profile whatever the job chose.
        Phase::Epilog => (settings.epilog.as_deref(), "epilog"),
    };
    let Some(program) = program else {
        return Ok(0);
    };
    let config = settings.config.to_string_lossy();
    let env = [
        (lemonade_config::ENV_VAR, config.as_ref()),
        ("LEMONADE_PROFILE", profile),
        ("LEMONADE_TRIGGER", "spank"),
    ];
    Ok(match exec::run(program, &env, settings.timeout) {
        Outcome::Exited(0) => 0,
        // Only the prolog fails the job for an unhealthy node; a failing
        // epilog would add Slurm's own `Epilog error` drain on top of ours.
        Outcome::Exited(code) if phase == Phase::Prolog => {
            log::error(&format!(
                "job {job_id}: {} exited {code}: the node is not healthy",
                program.display()
            ));
            -1
        }
        Outcome::Exited(code) => {
            log::error(&format!(
                "job {job_id}: {} exited {code}",
                program.display()
            ));
            0
        }
        Outcome::Signaled(signal) => {
            log::error(&format!(
                "job {job_id}: {} killed by signal {signal}; the job proceeds",
                program.display()
            ));
            0
        }
        Outcome::TimedOut => {
            log::error(&format!(
                "job {job_id}: {} still running after {:.1}s, killed; the job proceeds",
                program.display(),
                settings.timeout.as_secs_f64()
            ));
            0
        }
        Outcome::NotStarted(e) => {
            log::error(&format!(
                "job {job_id}: cannot run {}: {e}; the job proceeds without health checks",
                program.display()
            ));
            0
        }
    })
}

/// The job's `--health-check`, or the site default. In `job_script` context
/// Slurm finds the value in the job's SPANK environment; the node's own
/// plugstack arguments decide, so `allow_off=no` holds even for a job
/// submitted from a host with another plugstack.conf.
unsafe fn job_choice(sp: spank_t, settings: &Settings) -> Choice {
    let mut option = ffi::spank_option {
        name: OPTION_NAME.as_ptr().cast_mut(),
        arginfo: OPTION_ARGINFO.as_ptr().cast_mut(),
        usage: c"".as_ptr().cast_mut(),
        has_arg: OPTIONAL_ARGUMENT,
        val: 0,
        cb: None,
    };
    let mut optarg: *mut c_char = std::ptr::null_mut();
    let user = if ffi::spank_option_getopt(sp, &mut option, &mut optarg) == ffi::ESPANK_SUCCESS {
        let value =
            (!optarg.is_null()).then(|| CStr::from_ptr(optarg).to_string_lossy().into_owned());
        match Choice::parse_option(value.as_deref()) {
            Ok(c) => Some(c),
            Err(e) => {
                log::error(&format!("--health-check: {e}; using the default"));
                None
            }
        }
    } else {
        None
    };
    settings.resolve(user).unwrap_or_else(|e| {
        log::error(&format!("{e}; using the default"));
        settings.default
    })
}

/// Tells `lemonade-prolog`/`-epilog`, which slurmd runs after this plugin,
/// that the plugin has handled the job on this node.
fn write_marker(marker: &Path, choice: Choice) {
    let written = marker
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(marker, format!("{choice}\n")));
    if let Err(e) = written {
        log::error(&format!("cannot write {}: {e}", marker.display()));
    }
}

/// Removes markers of jobs long gone: where slurm.conf runs no
/// `lemonade-epilog` (which removes a job's marker), nothing else would.
fn prune_markers(marker: &Path) {
    let Some(dir) = marker.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > MARKER_MAX_AGE);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
