//! The generated bindings of `slurm/spank.h` (see `build.rs`).
//!
//! Only declarations: the `spank_*` and `slurm_*` functions are resolved at
//! `dlopen` time from the `libslurmfull.so` that slurmd, slurmstepd, srun,
//! sbatch and salloc already carry. Every function declared here and called
//! from the plugin must exist in the oldest supported release (22.05),
//! because a Rust cdylib binds its symbols immediately at load.

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    clippy::upper_case_acronyms
)]

include!(concat!(env!("OUT_DIR"), "/spank_bindings.rs"));
