//! Test support shared by the fixture tests, the end-to-end tests and the benchmarks.
//!
//! * [`fixture`]: node trees (sysfs, procfs, kernel log) composed from the
//!   healthy node and one overlay per fault.
//! * [`cluster`]: a real Slurm cluster (munge, MariaDB, slurmdbd, slurmctld,
//!   several slurmd) in a temporary directory.
//! * [`fake_nvml`]: the fake `libnvidia-ml.so.1` and its scenarios.
//! * [`spank`]: our SPANK plugins on such a cluster.
//! * [`slurm_root`]: another Slurm series (24.11, 26.05) from a Debian root,
//!   for clusters of that series.
//! * [`history`]: scheduler histories in sacct's format with planted lemons.
//! * [`independent_history`]: histories with job logs written from a brief
//!   by an engineer who has not read lemon's detector, and their scorer (issue 47).
//! * [`job_logs`]: the logs of such a history's failed jobs, and the dump
//!   that names them (issue 36).
//! * [`reliability_history`] (feature `reliability`): job records with a
//!   known hardware failure rate, for the reliability report.
//! * [`metric_traces`]: per-node metric traces of training jobs with planted
//!   faulty machines, and the scorer of `lemon watch`'s calls.
//! * [`independent_traces`]: the same kind of traces written without reading
//!   the detector (issue 45), with confounders, and its scorer.
//! * [`heldout_traces`]: a third generator of such traces, held out from
//!   the detector's tuning (issue 45), with its own model of jobs and faults.
//! * [`blind_traces`]: a fourth generator of such traces, held out from
//!   the detector's tuning (issue 45), and its scorer with a drain tier.
//! * [`fifth_traces`]: a fifth generator of such traces, held out from the
//!   detector's tuning (issue 45): real-cluster confounders, and its scorer.
//! * [`sixth_traces`]: a sixth generator of such traces, written from a
//!   brief without reading the detector or the other generators, with its
//!   scorer (all calls and a drain tier).
//! * [`seventh_traces`]: a seventh generator of such traces, held out from
//!   the detector's tuning (issue 45): a 2026 fleet's job mix (pretraining,
//!   RL post-training, multimodal, benchmarks), its confounders and faults,
//!   and its scorer with a drain tier.
//! * [`eighth_traces`]: an eighth generator of such traces, held out from the
//!   detector's tuning (issue 45): a week of long pretraining compressed
//!   into short jobs (restarts on new nodes, growing and self-healing faults).
//! * [`ninth_traces`]: a ninth generator of such traces, held out from the
//!   detector's tuning (issue 45): a mixed, busy fleet's step-time beats,
//!   heterogeneous nodes, switching roles, elastic restarts and fleet events.
//! * [`tenth_traces`]: a tenth generator of such traces, held out from the
//!   detector's tuning (issue 45): a shared site seen from the users' side
//!   (user errors that are not faults, site-wide bursts), and its scorer.
//! * [`eleventh_traces`]: an eleventh generator of such traces, held out from
//!   the detector's tuning (issue 45): a shared H100/H200 site's job mix
//!   (3D, FSDP, MoE, multimodal, RL, inference), user errors, site-wide
//!   confounders and Minder's fault mix, and its scorer.
//! * [`twelfth_traces`]: a twelfth generator of such traces, held out from
//!   the detector's tuning (issue 45): a 2026 neo-cloud of GB200 NVL72, B200
//!   and H100 nodes, its tenants' job mix (3D, FSDP, MoE, both RL forms,
//!   inference and hyper-parameter sweeps, elastic), confounders, user errors
//!   and Minder's fault mix, and its scorer with a drain tier.
//! * [`sampler_node`]: a node as the node sampler reads it, counters growing.

pub mod blind_traces;
pub mod cluster;
pub mod eighth_traces;
pub mod eleventh_traces;
pub mod fake_nvml;
pub mod fifth_traces;
pub mod fixture;
pub mod heldout_traces;
pub mod history;
pub mod independent_history;
pub mod independent_traces;
pub mod job_logs;
pub mod metric_traces;
pub mod ninth_traces;
#[cfg(feature = "reliability")]
pub mod reliability_history;
pub mod sampler_node;
pub mod seventh_traces;
pub mod sixth_traces;
pub mod slurm_root;
pub mod spank;
pub mod tenth_traces;
pub mod twelfth_traces;

use std::path::PathBuf;

/// The `tests/` directory of the repository.
pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    tests_dir()
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Where cargo puts the workspace's binaries for this build.
pub fn target_bin_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    target.join(profile)
}
