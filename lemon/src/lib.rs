//! The head node's lemon job: find nodes that keep failing jobs without any
//! single health check catching them, drain them, and report.
//!
//! `lemon run` = [`ingest`] (sacct jobs, sacctmgr node events, the nodes'
//! spool exports, squeue exclusions, into lemon.db) → [`signals`] (per node,
//! over the window, after [`attribute`]-ing each failed job) → [`decide`]
//! (threshold rules, Poisson tail test, distinct-job gate) → [`act`] (drain
//! new lemons, safely) → [`report`].

pub mod act;
pub mod app;
pub mod attribute;
pub mod cli;
pub mod db;
pub mod decide;
pub mod document;
pub mod drift;
pub mod error;
pub mod fast_hash;
pub mod ingest;
pub mod input_file;
pub mod job_state;
pub mod rack_drift;
pub mod reliability;
pub mod report;
pub mod signals;
pub mod stats;
pub mod time_zone;
pub mod trace;
pub mod validate;
pub mod watch;
