//! The callbacks of `lemonade_spank.so`, and only those: each one exported
//! makes Slurm do work for every job. The job prolog and epilog, which cost
//! a process per job, are in [`crate::job_script`].
//!
//! Every callback runs inside slurmd, slurmstepd or a client, so none may
//! unwind into C: [`guard`] turns a panic into a logged error. `init`, the
//! option check and `task_exit` then return `-1`. In the job prolog and
//! epilog (and `user_init`, `init_post_opt`) our own failures (config
//! unreadable, program missing, deadline passed, a bug) are logged and let
//! the job run: only the program saying "unhealthy" (a non-zero exit) fails
//! the callback, exactly as Slurm treats that program in slurm.conf.

use crate::ffi::{self, spank_t};
use crate::{log, recorder, status, task};
use lemonade_config::spank::{Choice, Recorder, Settings};
use lemonade_config::{Config, StoreSettings};
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::SystemTime;

/// Parsed in `slurm_spank_init`, read by the option callback in the same process.
static SETTINGS: Mutex<Option<Settings>> = Mutex::new(None);
/// The user's `--health-check`, kept by the option callback in srun, sbatch
/// or salloc for `slurm_spank_init_post_opt`; none when not given.
static CHOSEN: Mutex<Option<Choice>> = Mutex::new(None);
/// The user's `--flight-recorder`, kept by its option callback (in
/// slurmstepd too: Slurm hands the job's options to every step).
static CHOSEN_RECORDER: Mutex<Option<Recorder>> = Mutex::new(None);
/// What a slurmstepd learns in `slurm_spank_init`, as root and before any
/// task exists, so that the later callbacks parse nothing and, running as
/// the user, need not read root's state directory.
static STEP: Mutex<Option<Step>> = Mutex::new(None);

struct Step {
    /// Where this node's task exits go; none when `[spool] dir` is unset.
    task_exits: Option<std::path::PathBuf>,
    /// The last check's result; none before the first run.
    health: Option<status::NodeHealth>,
    /// The node's state files, for the flight-recorder directory.
    store: StoreSettings,
}

pub(crate) const OPTION_NAME: &CStr = c"health-check";
pub(crate) const OPTION_ARGINFO: &CStr = c"quick|full|off";
/// getopt's `optional_argument`: `--health-check` alone is allowed.
pub(crate) const OPTIONAL_ARGUMENT: c_int = 2;
/// The job control variable that carries the job's choice to slurm.conf's
/// `Prolog`/`Epilog`; Slurm prefixes it, so they read
/// `SPANK_LEMONADE_HEALTH_CHECK`.
const CHOICE_VARIABLE: &CStr = c"LEMONADE_HEALTH_CHECK";
pub(crate) const RECORDER_OPTION_NAME: &CStr = c"flight-recorder";
pub(crate) const RECORDER_OPTION_ARGINFO: &CStr = c"on|timing|off";

/// Runs a callback body; panics and errors become a log line and
/// `on_failure`: `-1` where Slurm should see the error, `0` where a failure
/// of ours must not fail the job (the job prolog would drain the node).
pub(crate) fn guard(
    callback: &str,
    on_failure: c_int,
    body: impl FnOnce() -> Result<c_int, String>,
) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(rc)) => rc,
        Ok(Err(e)) => {
            log::error(&format!("{callback}: {e}"));
            on_failure
        }
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            log::error(&format!("{callback}: internal error: {why}"));
            on_failure
        }
    }
}

/// The plugstack.conf words Slurm passes to every callback.
///
/// # Safety
/// `argv` holds `argc` NUL-terminated strings, as Slurm guarantees.
pub(crate) unsafe fn plugin_args(argc: c_int, argv: *mut *mut c_char) -> Vec<String> {
    if argv.is_null() {
        return Vec::new();
    }
    (0..argc.max(0) as usize)
        .filter_map(|i| {
            let word = *argv.add(i);
            (!word.is_null()).then(|| CStr::from_ptr(word).to_string_lossy().into_owned())
        })
        .collect()
}

pub(crate) fn parse_settings(args: &[String]) -> Result<Settings, String> {
    Settings::parse(args.iter().map(String::as_str)).map_err(|e| format!("plugstack.conf: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers the option and remembers the settings; in slurmstepd also
/// finds the node's files. Unknown plugstack arguments fail here, which for
/// a `required` plugin stops slurmd from starting and srun from running.
///
/// # Safety
/// Called by Slurm with a valid handle and arguments.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(
    sp: spank_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    guard("init", -1, || {
        let settings = parse_settings(&plugin_args(argc, argv))?;
        // Compared as numbers: a context a later Slurm adds is just "other".
        let context = ffi::spank_context();
        if [
            ffi::spank_context_S_CTX_LOCAL,
            ffi::spank_context_S_CTX_ALLOCATOR,
            ffi::spank_context_S_CTX_REMOTE,
        ]
        .contains(&context)
        {
            register_option(sp, &settings)?;
        }
        if context == ffi::spank_context_S_CTX_REMOTE {
            *lock(&STEP) = node_config(&settings, node_name(sp)).map(|config| Step {
                // Without a spool nothing would ever read them.
                task_exits: config
                    .spool
                    .dir
                    .is_some()
                    .then(|| config.store.task_exits_path()),
                health: std::fs::read_to_string(config.store.status_path())
                    .ok()
                    .as_deref()
                    .and_then(status::parse),
                store: config.store.clone(),
            });
        }
        *lock(&SETTINGS) = Some(settings);
        Ok(0)
    })
}

unsafe fn register_option(sp: spank_t, settings: &Settings) -> Result<(), String> {
    let usage = CString::new(format!(
        "Health checks on the job's nodes before it starts: quick (fast checks), full (the complete \
         suite, for large expensive jobs){}. Alone, the option means full. Default here: {}.",
        if settings.allow_off { " or off" } else { "; off is not allowed here" },
        settings.default
    ))
    .map_err(|e| e.to_string())?;
    // Slurm copies every string of the option while registering it.
    let mut option = ffi::spank_option {
        name: OPTION_NAME.as_ptr().cast_mut(),
        arginfo: OPTION_ARGINFO.as_ptr().cast_mut(),
        usage: usage.as_ptr().cast_mut(),
        has_arg: OPTIONAL_ARGUMENT,
        val: 0,
        cb: Some(option_callback),
    };
    let rc = ffi::spank_option_register(sp, &mut option);
    if rc != ffi::ESPANK_SUCCESS {
        return Err(format!("cannot register --health-check (spank error {rc})"));
    }
    register_recorder_option(sp, settings)
}

unsafe fn register_recorder_option(sp: spank_t, settings: &Settings) -> Result<(), String> {
    let usage = CString::new(format!(
        "PyTorch's NCCL flight recorder for this job: on (a ring of the last collectives, dumped \
         on a watchdog timeout so that `lemon trace` can name the rank that hangs), timing (also \
         CUDA-event timing of each collective, to find stragglers; costs more), or off. Alone, \
         the option means on. Default here: {}.",
        settings.flight_recorder
    ))
    .map_err(|e| e.to_string())?;
    let mut option = ffi::spank_option {
        name: RECORDER_OPTION_NAME.as_ptr().cast_mut(),
        arginfo: RECORDER_OPTION_ARGINFO.as_ptr().cast_mut(),
        usage: usage.as_ptr().cast_mut(),
        has_arg: OPTIONAL_ARGUMENT,
        val: 0,
        cb: Some(recorder_option_callback),
    };
    let rc = ffi::spank_option_register(sp, &mut option);
    if rc != ffi::ESPANK_SUCCESS {
        return Err(format!(
            "cannot register --flight-recorder (spank error {rc})"
        ));
    }
    Ok(())
}

/// Checks a `--flight-recorder` value; a bad one stops srun or sbatch.
unsafe extern "C" fn recorder_option_callback(
    _val: c_int,
    optarg: *const c_char,
    _remote: c_int,
) -> c_int {
    guard("--flight-recorder", -1, || {
        let value =
            (!optarg.is_null()).then(|| CStr::from_ptr(optarg).to_string_lossy().into_owned());
        *lock(&CHOSEN_RECORDER) = Some(Recorder::parse_option(value.as_deref())?);
        Ok(0)
    })
}

/// Checks a `--health-check` value when srun, sbatch or salloc parse it: a
/// bad value stops the command before the job is submitted.
unsafe extern "C" fn option_callback(_val: c_int, optarg: *const c_char, _remote: c_int) -> c_int {
    guard("--health-check", -1, || {
        let value =
            (!optarg.is_null()).then(|| CStr::from_ptr(optarg).to_string_lossy().into_owned());
        let choice = Choice::parse_option(value.as_deref())?;
        let settings = lock(&SETTINGS).clone().unwrap_or_default();
        settings.resolve(Some(choice))?;
        *lock(&CHOSEN) = Some(choice);
        Ok(0)
    })
}

/// In srun, sbatch and salloc, after the options: puts the job's choice (the
/// user's, or the site default) into the job control environment, which
/// Slurm hands to slurm.conf's `Prolog` and `Epilog` on every node of the
/// job. That is how `lemonade-prolog` learns it without this plugin
/// exporting a job prolog (which would cost every job a process).
///
/// Only a command that creates the job decides: an srun inside an existing
/// allocation changes nothing, its job's prolog has run.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init_post_opt(
    sp: spank_t,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    guard("init_post_opt", 0, || {
        let context = ffi::spank_context();
        if context == ffi::spank_context_S_CTX_REMOTE {
            return start_recorder(sp);
        }
        if context != ffi::spank_context_S_CTX_LOCAL
            && context != ffi::spank_context_S_CTX_ALLOCATOR
        {
            return Ok(0);
        }
        // No settings: init failed (and said why) in an `optional` plugin.
        let Some(settings) = lock(&SETTINGS).clone() else {
            return Ok(0);
        };
        let choice = settings.resolve(*lock(&CHOSEN))?;
        let value = CString::new(choice.as_str()).map_err(|e| e.to_string())?;
        let rc = ffi::spank_job_control_setenv(sp, CHOICE_VARIABLE.as_ptr(), value.as_ptr(), 1);
        if rc != ffi::ESPANK_SUCCESS {
            log::verbose(&format!(
                "cannot hand --health-check={choice} to the prolog (spank error {rc})"
            ));
        }
        Ok(0)
    })
}

/// In slurmstepd, as root, before the tasks exist: when the job's flight
/// recorder is on, makes the job's dump directory on this node and puts the
/// recorder's variables into the tasks' environment. A variable the user
/// set already is kept (overwrite=0). Failures are logged, the job runs.
unsafe fn start_recorder(sp: spank_t) -> Result<c_int, String> {
    let Some(settings) = lock(&SETTINGS).clone() else {
        return Ok(0);
    };
    let choice = settings.resolve_recorder(*lock(&CHOSEN_RECORDER));
    // No store: the node's config was unreadable, which init has logged.
    let store = lock(&STEP).as_ref().map(|step| step.store.clone());
    let (Some(store), true) = (store, choice != Recorder::Off) else {
        return Ok(0);
    };
    let job = item_u32(sp, ffi::spank_item_S_JOB_ID, "the job id")?;
    let uid = item_u32(sp, ffi::spank_item_S_JOB_UID, "the job's uid")?;
    let gid = item_u32(sp, ffi::spank_item_S_JOB_GID, "the job's gid")?;
    let dir = recorder::prepare_dir(&store.flight_recorder_dir(&job.to_string()), uid, gid)?;
    note_if_defeated(sp, &store.flight_recorder_off_note(&job.to_string()));
    for (name, value) in recorder::environment(choice, settings.flight_recorder_buffer, &dir) {
        let name = CString::new(name).map_err(|e| e.to_string())?;
        let value = CString::new(value).map_err(|e| e.to_string())?;
        let rc = ffi::spank_setenv(sp, name.as_ptr(), value.as_ptr(), 0);
        // ESPANK_ENV_EXISTS (the user's own value, kept) is the usual one.
        if rc != ffi::ESPANK_SUCCESS {
            log::verbose(&format!("{name:?} not set (spank error {rc})"));
        }
    }
    Ok(0)
}

/// When the job's own environment keeps its dumps from us, says so in the
/// step's log and leaves the epilog a note beside the job's directory (in
/// the parent only root writes; an existing note or link is left alone).
unsafe fn note_if_defeated(sp: spank_t, note: &std::path::Path) {
    let Some(why) = recorder::defeated_by(|name| job_env(sp, name)) else {
        return;
    };
    log::error(&why);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(note)
        .and_then(|mut f| std::io::Write::write_all(&mut f, why.as_bytes()));
    if let Err(e) = written {
        log::verbose(&format!("{}: {e}", note.display()));
    }
}

/// A variable of the job's environment, `None` when unset or unreadable.
unsafe fn job_env(sp: spank_t, name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    let mut buf = [0 as c_char; 4096];
    (ffi::spank_getenv(sp, name.as_ptr(), buf.as_mut_ptr(), buf.len() as c_int)
        == ffi::ESPANK_SUCCESS)
        .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
}

/// The node's config (its state directory, whether it has a spool). A
/// config that cannot be read leaves none: the plugin then writes nowhere
/// rather than into a directory the site did not choose, and the job runs
/// as usual.
pub(crate) fn node_config(settings: &Settings, node: Option<String>) -> Option<Config> {
    match lemonade_config::load(&settings.config, node.as_deref()) {
        Ok(config) => Some(config),
        Err(e) => {
            log::error(&format!(
                "{e}; no task-exit records or job markers on this node"
            ));
            None
        }
    }
}

/// The Slurm node this slurmd or slurmstepd serves, resolved as every
/// Lemonade binary does ([`lemonade_slurm::node_name`]): `SLURMD_NODENAME`
/// from our environment or the job's, then the short host name. Several
/// slurmd may share a host, so the host name is only the last resort.
pub(crate) unsafe fn node_name(sp: spank_t) -> Option<String> {
    let slurmd_nodename = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .or_else(|| {
            let mut buf = [0 as c_char; 256];
            (ffi::spank_getenv(
                sp,
                c"SLURMD_NODENAME".as_ptr(),
                buf.as_mut_ptr(),
                buf.len() as c_int,
            ) == ffi::ESPANK_SUCCESS)
                .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
        });
    let host = lemonade_slurm::node_name::host_name();
    lemonade_slurm::node_name::resolve(None, slurmd_nodename.as_deref(), host.as_deref())
}

pub(crate) unsafe fn item_u32(
    sp: spank_t,
    item: ffi::spank_item_t,
    what: &str,
) -> Result<u32, String> {
    let mut value: u32 = 0;
    let rc = ffi::spank_get_item(sp, item, &mut value as *mut u32);
    if rc != ffi::ESPANK_SUCCESS {
        return Err(format!("cannot read {what} (spank error {rc})"));
    }
    Ok(value)
}

/// Puts the node's health into the environment of the step's tasks.
/// Runs in slurmstepd, as the user, before the tasks start; never fails the step.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_user_init(
    sp: spank_t,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    guard("user_init", 0, || {
        // No status file yet (no run since install): the variables stay unset.
        let Some(health) = lock(&STEP).as_ref().and_then(|step| step.health.clone()) else {
            return Ok(0);
        };
        let checked_at = CString::new(health.checked_at.to_string()).map_err(|e| e.to_string())?;
        let health = CString::new(health.health).map_err(|e| e.to_string())?;
        for (name, value) in [
            (c"LEMONADE_NODE_HEALTH", &health),
            (c"LEMONADE_LAST_CHECK", &checked_at),
        ] {
            let rc = ffi::spank_setenv(sp, name.as_ptr(), value.as_ptr(), 1);
            if rc != ffi::ESPANK_SUCCESS {
                log::verbose(&format!("cannot set {name:?} (spank error {rc})"));
            }
        }
        Ok(0)
    })
}

/// Appends the task's end to the node's task-exit file: one `write(2)`, no
/// database, nothing that can wait on another process.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_exit(
    sp: spank_t,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    guard("task_exit", -1, || {
        // None: no spool, or the config was unreadable (which init has logged once).
        let Some(path) = lock(&STEP)
            .as_ref()
            .and_then(|step| step.task_exits.clone())
        else {
            return Ok(0);
        };
        let job = item_u32(sp, ffi::spank_item_S_JOB_ID, "the job id")?;
        let step = item_u32(sp, ffi::spank_item_S_JOB_STEPID, "the step id")?;
        let task_id = item_u32(sp, ffi::spank_item_S_TASK_GLOBAL_ID, "the global task id")?;
        let mut status: c_int = 0;
        let rc = ffi::spank_get_item(
            sp,
            ffi::spank_item_S_TASK_EXIT_STATUS,
            &mut status as *mut c_int,
        );
        if rc != ffi::ESPANK_SUCCESS {
            return Err(format!(
                "cannot read the task's exit status (spank error {rc})"
            ));
        }
        let exit = task::task_exit(job, step, task_id, status, SystemTime::now());
        lemonade_spool::append_task_exit(&path, &exit)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(0)
    })
}
