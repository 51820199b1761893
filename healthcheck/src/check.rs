//! The [`Check`] trait and what a check is given and gives back.
//!
//! A check is two steps. `gather` does all the I/O through [`NodeRoot`] and
//! returns plain data; `evaluate` is a pure function from that data, the
//! config and the previous run's state to findings. [`Check::run`] glues the
//! two; tests call `evaluate` directly on gathered fixtures.

use crate::finding::Finding;
use crate::nvml_handle::InitFailure;
use crate::root::{NodeRoot, ReadError};
use chrono::{DateTime, Utc};
use lemonade_config::Config;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Which suite a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Before a job: fast checks only (GPU access, mounts, new XIDs, stray GPU processes).
    Quick,
    /// Every five minutes: everything but the job-bound checks.
    Periodic,
    /// After a job: quick plus the counters that a job can move (XID, ECC, NVLink).
    Epilog,
    /// Everything.
    Full,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Quick => "quick",
            Profile::Periodic => "periodic",
            Profile::Epilog => "epilog",
            Profile::Full => "full",
        }
    }
}

/// Profiles for checks that belong everywhere.
pub const ALL_PROFILES: &[Profile] = &[
    Profile::Quick,
    Profile::Periodic,
    Profile::Epilog,
    Profile::Full,
];
/// Profiles for checks too slow or too noisy for the prolog.
pub const BACKGROUND_PROFILES: &[Profile] = &[Profile::Periodic, Profile::Epilog, Profile::Full];

/// The job a prolog or epilog run is about.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobContext {
    pub job_id: String,
    pub user: Option<String>,
    /// GPU indices the job was given (`SLURM_JOB_GPUS` or `CUDA_VISIBLE_DEVICES`), if known.
    pub gpus: Option<Vec<u32>>,
}

/// What a check is given. Owned (behind `Arc`s), because a check that hangs
/// is abandoned on its thread and may outlive the run.
#[derive(Clone)]
pub struct CheckContext {
    pub root: Arc<NodeRoot>,
    pub config: Arc<Config>,
    /// This check's state from the previous run (counters, cursors), if any.
    pub previous: Option<serde_json::Value>,
    pub now: DateTime<Utc>,
    pub profile: Profile,
    pub job: Option<Arc<JobContext>>,
    /// Resources several checks share in one run (the NVML handle).
    pub shared: Arc<Shared>,
}

impl CheckContext {
    /// One check's context outside a run (tests, replay tools): the full
    /// profile, no previous state, no job, shared resources of its own.
    pub fn standalone(
        root: impl Into<std::path::PathBuf>,
        config: Config,
        now: DateTime<Utc>,
    ) -> CheckContext {
        CheckContext {
            root: Arc::new(NodeRoot::new(root)),
            config: Arc::new(config),
            previous: None,
            now,
            profile: Profile::Full,
            job: None,
            shared: Arc::new(Shared::default()),
        }
    }
}

/// Resources initialised once per run and shared by the checks that need them.
#[derive(Default)]
pub struct Shared {
    /// The NVML session, loaded by the first GPU check that asks for it (see
    /// `checks::gpu::session`). A check waiting here while another is stuck
    /// in a wedged driver's init misses its own deadline and becomes
    /// `unknown`, so a hung init never holds up the run.
    pub nvml: std::sync::OnceLock<Result<Arc<nvml_wrapper::Nvml>, InitFailure>>,
}

/// Something that happened once and is recorded once (an XID line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub entity: String,
    pub code: String,
    pub severity: lemonade_config::Severity,
    /// Unix seconds.
    pub occurred_at: i64,
    pub boot_id: String,
    /// Position in its source (kmsg sequence number), to record it once.
    pub seq: i64,
    pub detail: String,
}

/// What a check gives back.
#[derive(Debug, Clone, Default)]
pub struct CheckOutput {
    pub findings: Vec<Finding>,
    /// State to hand to the next run; `None` keeps the previous state.
    pub state: Option<serde_json::Value>,
    pub events: Vec<Event>,
}

impl CheckOutput {
    pub fn findings(findings: Vec<Finding>) -> CheckOutput {
        CheckOutput {
            findings,
            ..Default::default()
        }
    }

    /// Findings and the state to hand to the next run.
    pub fn with_state<S: Serialize>(findings: Vec<Finding>, state: &S) -> CheckOutput {
        CheckOutput {
            findings,
            state: serde_json::to_value(state).ok(),
            events: Vec::new(),
        }
    }
}

/// Why a check could not run. Becomes an `unknown` finding, never a drain.
#[derive(Debug, Error)]
pub enum CheckError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A value that is not what the kernel or driver writes; names file and field.
    #[error("{source_name}: {message}")]
    Malformed {
        source_name: String,
        message: String,
    },
    #[error("{0}")]
    Other(String),
}

impl CheckError {
    pub fn malformed(source_name: impl Into<String>, message: impl Into<String>) -> CheckError {
        CheckError::Malformed {
            source_name: source_name.into(),
            message: message.into(),
        }
    }
}

/// The common settings every check has, plus all of its settings for `healthcheck list`.
pub struct SettingsView {
    pub enabled: bool,
    pub deadline: Option<Duration>,
    pub all: serde_json::Value,
}

impl SettingsView {
    pub fn of<S: Serialize>(enabled: bool, deadline_s: Option<f64>, settings: &S) -> SettingsView {
        SettingsView {
            enabled,
            deadline: deadline_s.filter(|s| *s > 0.0).map(Duration::from_secs_f64),
            all: serde_json::to_value(settings).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// One health check.
pub trait Check: Send + Sync + 'static {
    /// Short name, as used on the command line and in findings: `xid`, `pcie`.
    fn name(&self) -> &'static str;
    /// One line for `healthcheck list`.
    fn summary(&self) -> &'static str;
    /// Profiles the check belongs to.
    fn profiles(&self) -> &'static [Profile];
    /// Its settings in `config`.
    fn settings(&self, config: &Config) -> SettingsView;
    /// Gather and evaluate.
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError>;

    /// Files a snapshot needs beyond the plain files this check reads: the
    /// kernel log of a character device, probe results, NVML readings. Paths
    /// are as the node sees them; replaying the snapshot reads them back.
    fn snapshot_files(&self, _ctx: &CheckContext) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        Vec::new()
    }
}

/// Reads a check's previous state, treating a state it cannot read as none
/// (a new version of a check may change its state's shape).
pub fn previous_state<T: serde::de::DeserializeOwned + Default>(ctx: &CheckContext) -> T {
    ctx.previous
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}
