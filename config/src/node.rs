//! Node-side sections: where things live, how long things may take, what we do to Slurm.

use lemonade_slurm::command::SlurmCommands;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `[slurm]`: how to reach Slurm's commands. Prolog, epilog and HealthCheckProgram
/// run without `PATH` or `SLURM_CONF`, so everything is absolute.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmSettings {
    /// Directory holding `scontrol`, `sinfo`, `sacct`, `sacctmgr`, `squeue`.
    pub bin_dir: PathBuf,
    /// `SLURM_CONF` to pass to the commands; unset means Slurm's own default.
    pub conf: Option<PathBuf>,
    /// Deadline of one Slurm command, in seconds.
    pub command_timeout_s: f64,
}

impl Default for SlurmSettings {
    fn default() -> Self {
        Self {
            bin_dir: PathBuf::from("/usr/bin"),
            conf: None,
            // HealthCheckProgram is killed at 60 s: a run's checks (30 s) plus
            // a few Slurm calls must fit, and one timeout stops the others.
            command_timeout_s: 5.0,
        }
    }
}

impl SlurmSettings {
    /// The Slurm commands as this section describes them; the one place they
    /// are built from the config. A timeout below 0.1 s is taken as 0.1 s.
    pub fn commands(&self) -> SlurmCommands {
        SlurmCommands::new(
            self.bin_dir.clone(),
            self.conf.clone(),
            Duration::from_secs_f64(self.command_timeout_s.max(0.1)),
        )
    }
}

/// `[store]`: the node's SQLite history.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSettings {
    /// Node-local disk only: WAL does not work over NFS.
    pub path: PathBuf,
    /// History older than this (runs, findings, events, jobs, state changes)
    /// is deleted, a batch a run. The checks' cursors and counters are kept.
    pub retention_days: u32,
    /// How long a run waits for another run (timer and prolog at once) to finish.
    pub lock_wait_ms: u64,
    /// The run that finds the write-ahead log larger than this checkpoints
    /// and empties it (`lemonade_sql::wal`).
    pub max_log_kib: u64,
    /// Raw NCCL flight-recorder dumps (issue 32) stay on the node this many
    /// days after their job's directory last changed; the epilog prunes older
    /// ones (their summaries went to the head node when the job ended).
    pub flight_recorder_keep_days: u32,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            path: PathBuf::from("/var/lib/lemonade/node.db"),
            retention_days: 30,
            lock_wait_ms: 2000,
            max_log_kib: 4096,
            flight_recorder_keep_days: 7,
        }
    }
}

/// The small node-local files beside the database. The SPANK plugin finds
/// them from here, so that the plugin and the programs never disagree.
impl StoreSettings {
    /// The directory holding the database.
    pub fn state_dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// Task exits the SPANK plugin appends; the next run folds them into the export.
    pub fn task_exits_path(&self) -> PathBuf {
        self.state_dir().join("task-exits.jsonl")
    }

    /// The last run's worst severity and time (`<severity> <unix seconds>`),
    /// which the SPANK plugin puts into every task's environment.
    pub fn status_path(&self) -> PathBuf {
        self.state_dir().join("status")
    }

    /// Present when the SPANK plugin has taken over a job's checks on this
    /// node: `lemonade-prolog`/`-epilog` then skip theirs (the plugin runs
    /// before them) and the epilog removes it.
    pub fn spank_marker_path(&self, job_id: &str) -> PathBuf {
        self.state_dir().join("spank").join(job_id)
    }

    /// Where a job's ranks write their NCCL flight-recorder dumps on this
    /// node (issue 32): one directory per job, made by the SPANK plugin and
    /// owned by the job's user, under one that root owns.
    pub fn flight_recorder_dir(&self, job_id: &str) -> PathBuf {
        self.state_dir().join("flight-recorder").join(job_id)
    }

    /// Where the SPANK plugin notes, for the epilog, that the job's own
    /// environment kept its dumps from us (issue 46): beside the job's
    /// directory, in the parent that only root writes.
    pub fn flight_recorder_off_note(&self, job_id: &str) -> PathBuf {
        self.state_dir()
            .join("flight-recorder")
            .join(format!("{job_id}.recorder-off"))
    }
}

/// `[spool]`: the per-node export that the head node's `lemon` reads.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SpoolSettings {
    /// Shared directory; one file per node. Unset disables the export.
    pub dir: Option<PathBuf>,
    /// The node's file is cut from the front (oldest records) past this size.
    pub max_bytes: u64,
}

impl Default for SpoolSettings {
    fn default() -> Self {
        Self {
            dir: None,
            max_bytes: 8 << 20,
        }
    }
}

/// `[engine]`: deadlines of a run.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSettings {
    /// The whole run ends by then, whatever hangs.
    pub run_deadline_s: f64,
    /// Default deadline of one check; a check's own `deadline_s` wins.
    pub check_deadline_s: f64,
    /// The whole of `lemonade-prolog` (checks and Slurm calls) ends by then:
    /// `PrologEpilogTimeout` defaults to waiting forever, and every job waits on it.
    pub prolog_deadline_s: f64,
    /// The same bound for `lemonade-epilog`.
    pub epilog_deadline_s: f64,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            run_deadline_s: 30.0,
            check_deadline_s: 10.0,
            prolog_deadline_s: 10.0,
            epilog_deadline_s: 30.0,
        }
    }
}

/// `[policy]`: what findings do to the node's Slurm state.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySettings {
    /// Print the scontrol commands instead of running them.
    pub dry_run: bool,
    /// `unknown` on the same check this many runs in a row becomes a `warning`.
    pub unknown_runs_to_warning: u32,
    /// Consecutive clean runs before a node we drained is resumed.
    pub clean_runs_to_resume: u32,
    /// Checks whose findings clear by themselves (a mount coming back).
    pub auto_resume_checks: Vec<String>,
    /// Fleet breaker: do not act when more than this fraction of the
    /// partition took an `hc:` reason with the same code within
    /// `fleet_breaker_window_s`, and at least `fleet_breaker_min_nodes` did.
    pub fleet_breaker_fraction: f64,
    /// Fleet breaker: only reasons set this many seconds ago or less count
    /// (Slurm's reason time, `sinfo %H`). The breaker is for a bad config
    /// pushed to every node, a burst; nodes waiting days for repair are a
    /// backlog and must not keep the next broken node in service.
    pub fleet_breaker_window_s: u64,
    /// Fleet breaker: the fewest other nodes with the same recent code that
    /// can hold it, whatever the fraction: in a small partition one node
    /// awaiting repair is already over 10%.
    pub fleet_breaker_min_nodes: usize,
    /// How `down` takes the node out: `down` (State=DOWN, jobs requeued by
    /// slurmctld) or `drain-requeue` (DRAIN, then `scontrol requeue` of its jobs).
    pub down_action: DownAction,
    /// Checks whose drain and down findings must be seen in `runs` of the
    /// last `of` runs before they take the node out: links that flap
    /// (NVLink right after a reboot, an IB port training). Checks not listed
    /// act at once (a lost GPU, an uncorrectable ECC error).
    pub confirm_runs: BTreeMap<String, ConfirmRuns>,
    /// Seconds after boot during which findings judged from counter growth
    /// (error rates, AER, NVLink replays) stay warnings: links train and
    /// counters jump while a node comes up. 0: no grace.
    pub boot_grace_s: u64,
}

/// `N of M`: a finding takes the node out once it was seen in `runs` of the
/// last `of` runs of its check.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, try_from = "RawConfirmRuns")]
pub struct ConfirmRuns {
    pub runs: u32,
    pub of: u32,
}

/// The most runs a confirmation can look back over (a bit each, in a `u32`).
pub const CONFIRM_RUNS_MAX: u32 = 32;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfirmRuns {
    runs: u32,
    of: u32,
}

impl TryFrom<RawConfirmRuns> for ConfirmRuns {
    type Error = String;

    fn try_from(raw: RawConfirmRuns) -> Result<Self, String> {
        if raw.runs == 0 || raw.runs > raw.of || raw.of > CONFIRM_RUNS_MAX {
            return Err(format!(
                "confirm_runs: `runs = {}, of = {}` must have 1 <= runs <= of <= {CONFIRM_RUNS_MAX}",
                raw.runs, raw.of
            ));
        }
        Ok(ConfirmRuns {
            runs: raw.runs,
            of: raw.of,
        })
    }
}

/// `[hooks]`: commands told about every state change, one JSON object on
/// stdin. Each is an argv list (never a shell string) and runs under
/// `timeout_s`; a hook that fails or hangs is recorded and killed, and never
/// holds up the run.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HooksSettings {
    /// `[["/usr/local/sbin/open-ticket", "--queue", "hpc"], ...]`.
    pub commands: Vec<Vec<String>>,
    /// Deadline of each hook, in seconds.
    pub timeout_s: f64,
}

impl Default for HooksSettings {
    fn default() -> Self {
        Self {
            commands: Vec::new(),
            timeout_s: 10.0,
        }
    }
}

impl HooksSettings {
    /// The deadline as a duration, at least 10 ms.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s.max(0.01))
    }
}

/// `[remediation]`: what the periodic run repairs by itself on a node it
/// took out, once the node has no jobs. `reset-gpu` findings: the reset
/// command per GPU, then the GPU checks again; `reboot` findings (and resets
/// that did not help): `scontrol reboot ASAP nextstate=DOWN`, and the first
/// check after the reboot decides. `repair` and `investigate` are never
/// automatic: they tell the hooks.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RemediationSettings {
    /// False: findings take nodes out and stop there, as before.
    pub enabled: bool,
    /// The argv that resets one GPU; `{gpu}` is its index.
    pub reset_command: Vec<String>,
    /// Deadline of the reset command, and of the checks run after it. At
    /// most [`RESET_TIMEOUT_MAX_S`]: the whole periodic run must end before
    /// slurmd kills it.
    #[serde(deserialize_with = "reset_timeout_within_the_run")]
    pub reset_timeout_s: f64,
    /// Automatic remediations of one node within `window_days` before it
    /// stays out for a human.
    pub max_remediations: u32,
    pub window_days: u32,
    /// Remediation breaker: no new reboot or reset while more than this
    /// fraction of the node's partitions is rebooting or in remediation.
    pub breaker_fraction: f64,
}

impl Default for RemediationSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            reset_command: ["nvidia-smi", "--gpu-reset", "-i", "{gpu}"]
                .map(String::from)
                .to_vec(),
            reset_timeout_s: 20.0,
            max_remediations: 3,
            window_days: 7,
            breaker_fraction: 0.10,
        }
    }
}

/// The longest `reset_timeout_s`. slurmd kills HealthCheckProgram after
/// 60 s (so does the systemd unit's `TimeoutStartSec`), and a reset is one
/// part of a run that also checks, re-checks and calls Slurm.
pub const RESET_TIMEOUT_MAX_S: f64 = 40.0;

fn reset_timeout_within_the_run<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let s = f64::deserialize(d)?;
    if s > 0.0 && s <= RESET_TIMEOUT_MAX_S {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "reset_timeout_s = {s}: must be above 0 and at most {RESET_TIMEOUT_MAX_S} \
             (slurmd kills HealthCheckProgram after 60 s, and the reset is one part of that run)"
        )))
    }
}

impl RemediationSettings {
    /// The reset deadline as a duration, at least 10 ms.
    pub fn reset_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.reset_timeout_s.max(0.01))
    }
}

impl Default for PolicySettings {
    fn default() -> Self {
        Self {
            dry_run: false,
            unknown_runs_to_warning: 3,
            clean_runs_to_resume: 2,
            auto_resume_checks: vec!["mounts".to_string()],
            fleet_breaker_fraction: 0.10,
            fleet_breaker_window_s: 900,
            fleet_breaker_min_nodes: 3,
            down_action: DownAction::Down,
            confirm_runs: BTreeMap::from([
                ("ib".to_string(), ConfirmRuns { runs: 2, of: 3 }),
                ("nvlink".to_string(), ConfirmRuns { runs: 2, of: 3 }),
            ]),
            boot_grace_s: 600,
        }
    }
}

/// How a `down` finding takes the node out of service.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DownAction {
    Down,
    DrainRequeue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_commands_come_from_the_section_with_a_floor_on_the_timeout() {
        let settings = SlurmSettings {
            bin_dir: PathBuf::from("/opt/slurm/bin"),
            conf: Some(PathBuf::from("/opt/slurm/etc/slurm.conf")),
            command_timeout_s: 2.5,
        };
        let cmds = settings.commands();
        assert_eq!(cmds.program("sinfo"), PathBuf::from("/opt/slurm/bin/sinfo"));
        assert_eq!(cmds.conf, settings.conf);
        assert_eq!(cmds.timeout, Duration::from_millis(2500));
        let zero = SlurmSettings {
            command_timeout_s: 0.0,
            ..SlurmSettings::default()
        };
        assert_eq!(zero.commands().timeout, Duration::from_millis(100));
    }
}
