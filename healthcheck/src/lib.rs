//! Lemonade's node health checks.
//!
//! A run gathers each check's inputs through [`root::NodeRoot`] (the real `/`
//! or a fixture tree), evaluates them with pure functions into
//! [`finding::Finding`]s, and records the run in the node database.
//!
//! * [`check`]: the [`check::Check`] trait every check implements.
//! * [`checks`]: the checks themselves, one module each.
//! * [`codes`]: every finding code with its severity, repair and silencing.
//! * [`engine`]: runs checks in parallel, each under its deadline.
//! * [`pipeline`]: one run start to end, for every entry point: store and
//!   lock once, checks, record, policy, export, report.
//! * [`record`]: the checks' part of a run (state in, findings out, recorded).
//! * [`session`]: the node database as one run holds it (lock, store, use).
//! * [`exit_status`]: the run's exit status (the Nagios convention).
//! * [`state_change`]: a change of the node's Slurm state, as the policy and
//!   the remediation make it and the hooks, export and database receive it.
//! * [`nvml_handle`]: loading NVML once per run for the GPU checks.
//! * [`output`]: human table, JSON, Prometheus textfile.
//! * [`snapshot`]: capture what the checks read, for offline replay.
//! * [`policy`]: findings to Slurm node state (drain, down, resume).
//! * [`repair`]: the periodic run's GPU resets and reboots of nodes it took out.
//! * [`hooks`]: the site's commands told about every state change.
//! * [`bounded`]: outside programs as argv under a deadline.
//! * [`export`]: the spool export the head node reads.
//! * [`baseline`]: a node's expectations as config (`healthcheck baseline`).
//! * [`sampler`]: the node sampler for `lemon watch` (`healthcheck sample`).

pub mod baseline;
pub mod bounded;
pub mod check;
pub mod checks;
pub mod cli;
pub mod codes;
pub mod engine;
pub mod exit_status;
pub mod export;
pub mod finding;
pub mod flight_recorder;
pub mod history;
pub mod hooks;
pub mod nvml_handle;
pub mod output;
pub mod pipeline;
pub mod policy;
pub mod record;
pub mod repair;
pub mod root;
pub mod sampler;
pub mod session;
pub mod snapshot;
pub mod state_change;
pub mod status_file;
pub mod validate;

pub use lemonade_config::{Action, Config, Severity};
