//! `[lemon]`: the head node's lemon job.
//!
//! Defaults aim at a fleet of DGX-class nodes scored over the paper's 28-day
//! window. Every threshold left unset is derived from the fleet's own
//! distribution at scoring time (see [`LemonThresholds`]).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[lemon]`: history, scoring rules and the circuit breaker.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LemonSettings {
    /// The lemon database (head node, local disk).
    pub db_path: PathBuf,
    /// How long a command waits for another writer of the database, in milliseconds.
    pub busy_timeout_ms: u64,
    /// Signals are computed over this many days before now.
    pub window_days: u32,
    /// Width of one `sacct` call, in hours: one slurmdbd RPC per window keeps
    /// each call bounded on a busy cluster.
    pub sacct_window_hours: u32,
    /// Refuse to drain when the job history ends more than this many hours
    /// before now (sacct down, cron stopped).
    pub max_history_lag_hours: f64,
    /// The compute nodes' spool exports; unset falls back to `[spool] dir`.
    pub spool_dir: Option<PathBuf>,
    /// The zone of ISO times in replayed sacct and event files (sacct prints
    /// local time): an IANA name such as `Europe/Berlin`, `local`, or `+02:00`.
    /// Unset: the local zone. `lemon ingest --time-zone` overrides it.
    pub time_zone: Option<String>,
    /// A site's job-log signatures (issue 36), read on top of the defaults
    /// compiled into lemon, e.g. `/etc/lemonade/signatures.toml`. Unset: the
    /// defaults alone.
    pub signatures: Option<PathBuf>,
    /// Tail probability below which a node's failure count is improbable
    /// given the fleet's failure rate (Poisson test), whatever the
    /// false-discovery cut says.
    pub p_value: f64,
    /// Tail probability below which a node's count of failures witnessed
    /// by its own hardware lines in the jobs' logs is improbable, given the
    /// fleet's rate of such failures. Its own cut, looser than `p_value`:
    /// such a failure is a fact about the node, not a weighing of exit
    /// codes, and the fleet's rate of them is far lower. On 512 nodes
    /// 1e-3 allows at most 0.5 false flags per run, and fewer in practice
    /// since a count of at least `log_min_jobs` on two days is needed.
    pub log_p_value: f64,
    /// A node is flagged by its log-witnessed failures alone only with at
    /// least this many of them (on `min_failing_days` days). 0: the log
    /// tier is off, and those failures weigh like any other.
    pub log_min_jobs: u32,
    /// Repeat offenders: a node the health checks took out of service at
    /// least this many times in the window, and that came back to service
    /// each time, is flagged (`lemon: out 3x/28d`). 0: off.
    pub repeat_out_count: u32,
    /// ... when so many returns are improbable against the fleet's mean
    /// returns per node: a tail at most this (Poisson). Below the cut, the
    /// returns still flag a node that also failed a job no check caught
    /// and Slurm or its log saw fail. Returns alone are no log's witness, so
    /// they take the strict cut of `p_value`: on 512 nodes 1e-4 allows at
    /// most 0.05 false flags per run.
    pub repeat_p_value: f64,
    /// Expected share of healthy nodes among the improbable ones: the
    /// Benjamini-Hochberg cut over the fleet's Poisson tails (0 turns it
    /// off, leaving `p_value` alone).
    pub false_discovery_rate: f64,
    /// A node is never flagged with fewer distinct failing jobs than this ...
    pub min_failing_jobs: u32,
    /// ... unless this many of them are failures Slurm saw the node cause
    /// (`NODE_FAIL`, `Not responding`, `Kill task failed`). The weighing's
    /// verdicts on one node lean on each other (each raises the node's
    /// hazard that the next is weighed with), so two of them need a third;
    /// two failures Slurm saw are facts. 0: off.
    pub min_witnessed_jobs: u32,
    /// ... nor with all its failures on fewer distinct days than this (one bad day is not a lemon).
    pub min_failing_days: u32,
    /// Exit codes of single-node failures that are the user's fault (126: not
    /// executable, 127: command not found); never blamed on the node.
    pub user_error_exit_codes: Vec<i32>,
    /// A failure within this many seconds of the job's start counts as `early_fails`.
    pub early_fail_s: i64,
    /// Quantile of the fleet's distribution that a derived threshold sits at.
    pub fleet_quantile: f64,
    /// Thresholds per signal; unset ones are derived from the fleet.
    pub thresholds: LemonThresholds,
    /// Lower bounds of derived thresholds, so a quiet fleet does not make one event a lemon.
    pub threshold_floors: LemonThresholdFloors,
    /// Circuit breaker: drain at most this fraction of the fleet per run (rounded up).
    pub max_drain_fraction: f64,
    /// Circuit breaker: drain at most this many nodes per run.
    pub max_drains_per_run: u32,
    /// Reports withhold failure rates, MTTF and ETTR below this much
    /// exposure (node-days of runtime): a few hours of history make rates
    /// that mean nothing. They still show the counts.
    pub min_report_node_days: f64,
    /// Slurm's `topology.yaml`, read for its `block` topology: each block
    /// is a rack for the NVLink domain drift of `lemon report` (issue 50),
    /// for nodes no `[[rack]]` names. Unset: only `[[rack]]` places nodes.
    pub topology_yaml: Option<PathBuf>,
}

impl Default for LemonSettings {
    fn default() -> Self {
        Self {
            db_path: PathBuf::from("/var/lib/lemonade/lemon.db"),
            busy_timeout_ms: 10_000,
            window_days: 28,
            sacct_window_hours: 24,
            max_history_lag_hours: 6.0,
            spool_dir: None,
            time_zone: None,
            signatures: None,
            p_value: 1e-4,
            false_discovery_rate: 0.1,
            log_p_value: 1e-3,
            log_min_jobs: 2,
            repeat_out_count: 3,
            repeat_p_value: 1e-4,
            min_failing_jobs: 3,
            min_witnessed_jobs: 2,
            min_failing_days: 2,
            user_error_exit_codes: vec![126, 127],
            early_fail_s: 600,
            fleet_quantile: 0.99,
            thresholds: LemonThresholds::default(),
            threshold_floors: LemonThresholdFloors::default(),
            max_drain_fraction: 0.02,
            max_drains_per_run: 10,
            min_report_node_days: 100.0,
            topology_yaml: None,
        }
    }
}

/// `[lemon.thresholds]`: a node trips a signal's rule when its value reaches
/// the threshold. Unset: the fleet quantile, but at least the floor.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LemonThresholds {
    pub excl_jobid_count: Option<f64>,
    pub xid_cnt: Option<f64>,
    pub tickets: Option<f64>,
    pub out_count: Option<f64>,
    pub multi_node_node_fails: Option<f64>,
    pub single_node_node_fails: Option<f64>,
    pub single_node_node_failure_rate: Option<f64>,
    pub early_fails: Option<f64>,
}

/// `[lemon.threshold_floors]`: the least a derived threshold may be.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LemonThresholdFloors {
    pub excl_jobid_count: f64,
    pub xid_cnt: f64,
    pub tickets: f64,
    pub out_count: f64,
    pub multi_node_node_fails: f64,
    pub single_node_node_fails: f64,
    pub single_node_node_failure_rate: f64,
    pub early_fails: f64,
}

impl Default for LemonThresholdFloors {
    fn default() -> Self {
        Self {
            excl_jobid_count: 5.0,
            xid_cnt: 3.0,
            tickets: 2.0,
            out_count: 3.0,
            multi_node_node_fails: 3.0,
            single_node_node_fails: 3.0,
            single_node_node_failure_rate: 0.2,
            early_fails: 3.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::load_str;
    use std::path::Path;

    #[test]
    fn lemon_section_reads_thresholds_and_rejects_typos() {
        let text = "[lemon]\nwindow_days = 14\nmax_drain_fraction = 0.01\n\n[lemon.thresholds]\ntickets = 1\n";
        let cfg = load_str(text, Path::new("t.toml"), None).unwrap().lemon;
        assert_eq!(cfg.window_days, 14);
        assert_eq!(cfg.thresholds.tickets, Some(1.0));
        assert_eq!(cfg.thresholds.xid_cnt, None);
        assert_eq!(cfg.max_drains_per_run, 10);
        assert_eq!(cfg.time_zone, None);
        let text = "[lemon]\ntime_zone = \"Europe/Berlin\"\n";
        let cfg = load_str(text, Path::new("t.toml"), None).unwrap().lemon;
        assert_eq!(cfg.time_zone.as_deref(), Some("Europe/Berlin"));
        let err = load_str(
            "[lemon.thresholds]\nticket = 1\n",
            Path::new("t.toml"),
            None,
        )
        .unwrap_err();
        assert!(err.message.contains("ticket"), "{err}");
    }

    #[test]
    fn the_evidence_tiers_and_repeat_offenders_are_on_by_default_and_can_be_set() {
        let cfg = load_str("", Path::new("t.toml"), None).unwrap().lemon;
        assert_eq!(
            (cfg.log_p_value, cfg.log_min_jobs, cfg.repeat_out_count),
            (1e-3, 2, 3)
        );
        let text = "[lemon]\nlog_p_value = 2e-3\nlog_min_jobs = 0\nrepeat_out_count = 0\n";
        let cfg = load_str(text, Path::new("t.toml"), None).unwrap().lemon;
        assert_eq!(
            (cfg.log_p_value, cfg.log_min_jobs, cfg.repeat_out_count),
            (2e-3, 0, 0)
        );
    }
}
