//! Slurm plumbing shared by every Lemonade binary.
//!
//! * [`hostlist`]: expand and compress Slurm hostlist expressions (`gpu[001-004,010]`).
//! * [`bounded`]: one program under a deadline that kills its whole process group; every
//!   command Lemonade runs goes through it.
//! * [`command`]: Slurm's commands by absolute path, argv only, under a deadline.
//! * [`reason`]: the reasons we set (`hc: CODE entity [remark]`, `lemon: ...`): their
//!   format, their parse, and who owns a reason.
//! * [`node_state`]: the one writer of node states (drain, down, resume, requeue,
//!   reboot), with dry run.
//! * [`sinfo`]: nodes' states and reasons as `sinfo` shows them.
//! * [`squeue`]: the running jobs and their nodes.
//! * [`node_name`]: which Slurm node this process runs for.
//! * [`topology`]: the `block` topology of `topology.yaml` (which nodes form each block).
//! * [`show_job`]: the output files of jobs slurmctld still holds, and Slurm's
//!   filename patterns.

pub mod bounded;
pub mod command;
pub mod hostlist;
pub mod node_name;
pub mod node_state;
pub mod reason;
pub mod show_job;
pub mod sinfo;
pub mod squeue;
pub mod topology;
