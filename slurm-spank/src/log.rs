//! Messages into the log of whichever Slurm process loaded the plugin
//! (slurmd, slurmstepd, srun, sbatch), through Slurm's own logger.

use crate::ffi;
use std::ffi::CString;

/// Logs at Slurm's `error` level, prefixed with the plugin's name.
pub fn error(message: &str) {
    let text = cstring(message);
    // SAFETY: a constant "%s" format with one NUL-terminated argument.
    unsafe { ffi::slurm_error(c"lemonade: %s".as_ptr(), text.as_ptr()) };
}

/// Logs at Slurm's `verbose` level (`-v` on the clients, SlurmdDebug=verbose).
pub fn verbose(message: &str) {
    let text = cstring(message);
    // SAFETY: as in `error`.
    unsafe { ffi::slurm_verbose(c"lemonade: %s".as_ptr(), text.as_ptr()) };
}

fn cstring(message: &str) -> CString {
    CString::new(message.replace('\0', " ")).unwrap_or_default()
}
