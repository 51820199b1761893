//! `lemonade-prolog` and `lemonade-epilog`: the programs slurm.conf names as
//! `Prolog` and `Epilog`.
//!
//! Both run the checks of their profile, record the job in the node database,
//! apply the node-state policy and export. Slurm waits on them forever by
//! default (`PrologEpilogTimeout`), so each bounds its own time with a
//! watchdog; running out of time is our failure, and exits 0 (never a drain).
//!
//! Exit codes: the prolog exits 1 when the policy took the node out (drain or
//! down) so that Slurm requeues the job; we set our reason first, so `sinfo -R`
//! shows why. Everything else exits 0: our own failures must not fail jobs.

pub mod env;
pub mod job;
