//! `lemonade_spank_prolog.so`: everything `lemonade_spank.so` does, plus a
//! SPANK job prolog and epilog that run `lemonade-prolog`/`-epilog` with the
//! job's `--health-check` profile (see `lemonade_spank::job_script`).
//!
//! For sites that want the checks around jobs without `Prolog=`/`Epilog=` in
//! slurm.conf. The price: for every job, slurmd starts a
//! `slurmstepd spank prolog` and `... epilog` process just because these two
//! symbols exist, even for `--health-check=off`.

use lemonade_spank::spank_t;
use std::ffi::{c_char, c_int};

/// Runs the health checks before the job starts on this node.
///
/// # Safety
/// Called by Slurm with a valid handle and arguments.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_prolog(
    sp: spank_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    lemonade_spank::job_script::prolog(sp, argc, argv)
}

/// Runs the health checks after the job ends on this node.
///
/// # Safety
/// Called by Slurm with a valid handle and arguments.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(
    sp: spank_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    lemonade_spank::job_script::epilog(sp, argc, argv)
}
