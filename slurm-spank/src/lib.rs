//! Lemonade's SPANK plugins.
//!
//! This crate builds `lemonade_spank.so`, the plugin most sites want:
//!
//! * `--health-check[=quick|full|off]` for `srun`, `sbatch` and `salloc`;
//!   the site's default and whether `off` is allowed come from the
//!   plugstack.conf arguments (`lemonade_config::spank::Settings`). The job's choice reaches
//!   slurm.conf's `lemonade-prolog`/`-epilog` through the job control
//!   environment (`SPANK_LEMONADE_HEALTH_CHECK`).
//! * Task exits: one line per task appended to the node's task-exit file,
//!   which the next healthcheck run folds into the export for the head node.
//! * Every task sees `LEMONADE_NODE_HEALTH` and `LEMONADE_LAST_CHECK`.
//! * `--flight-recorder[=on|timing|off]` (site default `flight_recorder=` in
//!   plugstack.conf, off unless set): PyTorch's NCCL flight recorder for the
//!   job's tasks, dumping into a per-job directory on each node
//!   (`recorder`, issue 32).
//!
//! The `slurm-spank/prolog` crate builds `lemonade_spank_prolog.so`: all of
//! the above plus a job prolog and epilog ([`job_script`]) that run the
//! checks themselves, for sites without `Prolog=` in slurm.conf. Those two
//! callbacks make slurmd start a process per job, which is why they are not
//! in the default plugin.
//!
//! Slurm reads the data symbols below when it loads the plugin. The
//! callbacks live in `callbacks`; everything they decide is in plain modules
//! that the unit tests cover without Slurm.

// The callbacks are the only users of some items, and they are not built for tests.
#![cfg_attr(test, allow(dead_code))]

mod exec;
mod recorder;
mod status;
mod task;

// The callbacks and the logger call into libslurmfull, which only a Slurm
// process provides: the unit-test binary could not link them.
#[cfg(not(test))]
mod callbacks;
#[cfg(not(test))]
pub mod job_script;
#[cfg(not(test))]
mod log;

mod ffi;
/// The SPANK handle type, for the crate that exports [`job_script`].
pub use ffi::spank_t;

/// The plugin's name: Slurm's logs and the option's environment variable
/// (`_SLURM_SPANK_OPTION_lemonade_health_check`) use it.
#[no_mangle]
#[used]
#[allow(non_upper_case_globals)]
pub static plugin_name: [u8; 9] = *b"lemonade\0";

/// Marks this as a SPANK plugin.
#[no_mangle]
#[used]
#[allow(non_upper_case_globals)]
pub static plugin_type: [u8; 6] = *b"spank\0";

/// Slurm loads only plugins whose major.minor match its own release.
#[no_mangle]
#[used]
#[allow(non_upper_case_globals)]
pub static plugin_version: u32 = ffi::SLURM_VERSION_NUMBER;
