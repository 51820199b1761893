//! The command-line side of the reliability report: the options of
//! `lemon report --reliability` and `lemon ettr`, and what they print.

use super::ettr::EttrCase;
use super::load::{current_lemons, fleet_nodes, load_runs, signals_from_scores};
use super::render::{render, Format};
use super::{build_report, ReliabilityError, ReportInput, ReportParams, TimeRange};
use crate::attribute::AttributionParams;
use crate::decide::Scores;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use clap::Args;
use lemonade_config::LemonSettings;
use lemonade_sql::rusqlite::Connection;
use std::path::{Path, PathBuf};

/// Options of `lemon report --reliability` (all but `--output` need `--reliability`).
#[derive(Debug, Args, Clone, Default)]
pub struct ReliabilityArgs {
    /// With --reliability: start of the range (YYYY-MM-DD, RFC 3339 or unix seconds; default: the window before --until).
    #[arg(long, value_name = "TIME", requires = "reliability")]
    pub since: Option<String>,
    /// With --reliability: end of the range (default: now).
    #[arg(long, value_name = "TIME", requires = "reliability")]
    pub until: Option<String>,
    /// Write the report to this file (atomically) instead of stdout, e.g. for cron.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --reliability: GPUs per node for runs whose AllocTRES has no gres/gpu (default: inferred from the history).
    #[arg(long, value_name = "N", requires = "reliability")]
    pub gpus_per_node: Option<u32>,
    /// With --reliability: the paper's r_f counts jobs with more GPUs than this.
    #[arg(
        long,
        value_name = "GPUS",
        default_value_t = 128,
        requires = "reliability"
    )]
    pub large_job_gpus: u32,
    /// With --reliability: checkpoint interval of the ETTR table, minutes.
    #[arg(
        long,
        value_name = "MIN",
        default_value_t = 60.0,
        requires = "reliability"
    )]
    pub checkpoint_min: f64,
    /// With --reliability: restart overhead of the ETTR table, minutes.
    #[arg(
        long,
        value_name = "MIN",
        default_value_t = 5.0,
        requires = "reliability"
    )]
    pub restart_min: f64,
    /// With --reliability: queue time after a failure, minutes (default: median wait of large jobs in the history).
    #[arg(long, value_name = "MIN", requires = "reliability")]
    pub queue_min: Option<f64>,
}

/// Options of `lemon ettr`: one expected-ETTR case.
#[derive(Debug, Args, Clone)]
pub struct EttrArgs {
    /// GPUs of the job.
    #[arg(long)]
    pub gpus: f64,
    /// Checkpoint interval Δt, minutes.
    #[arg(long, value_name = "MIN", default_value_t = 60.0)]
    pub checkpoint_min: f64,
    /// Restart overhead u0 (relaunch, reload the checkpoint), minutes.
    #[arg(long, value_name = "MIN", default_value_t = 5.0)]
    pub restart_min: f64,
    /// Queue time q after each failure, minutes.
    #[arg(long, value_name = "MIN", default_value_t = 0.0)]
    pub queue_min: f64,
    /// Failures per 1000 node-days (default: the paper's rule over lemon.db's last window).
    #[arg(long, value_name = "R")]
    pub failure_rate: Option<f64>,
    /// GPUs per node.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub gpus_per_node: u32,
    /// Productive runtime R of the job, hours (default: so long that u0/R vanishes).
    #[arg(long, value_name = "HOURS")]
    pub runtime_hours: Option<f64>,
    /// ETTR for which to print the checkpoint interval needed.
    #[arg(long, default_value_t = 0.9)]
    pub target: f64,
}

/// Parses `YYYY-MM-DD` (midnight UTC), RFC 3339 or unix seconds.
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, ReliabilityError> {
    let bad = || ReliabilityError::InvalidParameter {
        name: "time",
        why: format!("{s:?} is not YYYY-MM-DD, RFC 3339 or unix seconds"),
    };
    if let Ok(secs) = s.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0).ok_or_else(bad);
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).ok_or_else(bad)?.and_utc());
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| bad())
}

/// The range of `args`: `--until` (default: the end of the current second)
/// and `--since` (default `default_days` before it).
pub fn range_of(
    args: &ReliabilityArgs,
    now: i64,
    default_days: u32,
) -> Result<TimeRange, ReliabilityError> {
    // Ranges are half-open and records carry whole seconds: ending at `now`
    // itself would leave out what was recorded earlier in this same second
    // (a repair applied just before the report ran).
    let until = match &args.until {
        Some(s) => parse_time(s)?,
        None => DateTime::from_timestamp(now + 1, 0).unwrap_or_default(),
    };
    let since = match &args.since {
        Some(s) => parse_time(s)?,
        None => until - Duration::days(i64::from(default_days)),
    };
    Ok(TimeRange { since, until })
}

/// The range of `args`, starting no earlier than lemon.db's first record:
/// a site that installed Lemonade an hour ago has an hour of history, not
/// the window's 28 days. With no record at all the range is empty.
pub fn recorded_range(
    conn: &Connection,
    args: &ReliabilityArgs,
    now: i64,
    default_days: u32,
) -> Result<TimeRange, ReliabilityError> {
    let mut range = range_of(args, now, default_days)?;
    if range.since >= range.until {
        return Ok(range);
    }
    let first = super::load::first_record(conn, range.since.timestamp())?;
    let first = first.map_or(range.until, |t| {
        DateTime::from_timestamp(t, 0).unwrap_or(range.until)
    });
    range.since = range.since.max(first);
    Ok(range)
}

/// Builds and renders the reliability report from lemon.db. `scores`: the
/// latest scoring, for the signal distributions and their thresholds;
/// `settings`: the `[lemon]` window (the default range) and the minimum
/// exposure for rates.
pub fn reliability_report(
    conn: &Connection,
    scores: Option<&Scores>,
    args: &ReliabilityArgs,
    format: Format,
    now: i64,
    settings: &LemonSettings,
    attribution: &AttributionParams,
) -> Result<String, ReliabilityError> {
    let range = recorded_range(conn, args, now, settings.window_days)?;
    if range.since >= range.until {
        return Err(ReliabilityError::NoHistory { until: range.until });
    }
    let loaded = load_runs(conn, range, args.gpus_per_node, attribution)?;
    let input = ReportInput {
        range,
        fleet_nodes: fleet_nodes(conn)?,
        gpus_per_node: loaded.gpus_per_node,
        jobs: loaded.jobs,
        lemons: current_lemons(conn)?,
        signals: scores.map(signals_from_scores).unwrap_or_default(),
        state_changes: super::load::state_changes(conn, range)?,
    };
    let params = ReportParams {
        large_job_gpus: args.large_job_gpus,
        checkpoint_min: args.checkpoint_min,
        restart_min: args.restart_min,
        queue_min: args.queue_min,
        min_node_days: settings.min_report_node_days,
        ..ReportParams::default()
    };
    let report = build_report(&input, &params)?;
    render(&report, format)
}

/// The paper's r_f (per 1000 node-days) over lemon.db's `days` before `now`.
pub fn history_rate(
    conn: &Connection,
    now: i64,
    days: u32,
    attribution: &AttributionParams,
) -> Result<Option<f64>, ReliabilityError> {
    let until = DateTime::from_timestamp(now, 0).unwrap_or_default();
    let range = TimeRange::last_days(until, i64::from(days));
    let loaded = load_runs(conn, range, None, attribution)?;
    let refs: Vec<_> = loaded.jobs.iter().collect();
    let defaults = ReportParams::default();
    let rate = super::failure_rate::rate(&refs, defaults.large_job_gpus, "", defaults.confidence);
    Ok((rate.node_days > 0.0).then_some(rate.per_1000_node_days))
}

/// `lemon ettr`: one case, in words.
pub fn ettr_answer(
    args: &EttrArgs,
    rate_per_1000: f64,
    rate_source: &str,
) -> Result<String, ReliabilityError> {
    if args.gpus <= 0.0 || !(args.target > 0.0 && args.target < 1.0) || rate_per_1000 < 0.0 {
        return Err(ReliabilityError::InvalidParameter {
            name: "gpus/target/failure-rate",
            why: "need --gpus > 0, 0 < --target < 1 and a non-negative rate".into(),
        });
    }
    let case = EttrCase {
        gpus: args.gpus,
        gpus_per_node: args.gpus_per_node.max(1),
        rate_per_node_day: rate_per_1000 / 1000.0,
        checkpoint_min: args.checkpoint_min,
        restart_min: args.restart_min,
        queue_min: args.queue_min,
        runtime_min: args.runtime_hours.map(|h| h * 60.0),
    };
    let mttf =
        super::mttf::projected_mttf_hours(args.gpus, case.gpus_per_node, case.rate_per_node_day);
    let nodes = (args.gpus / case.gpus_per_node as f64).max(1.0);
    let mut out = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "{} GPUs ({nodes:.0} nodes) at r_f = {rate_per_1000:.2} per 1000 node-days ({rate_source})",
        args.gpus
    );
    let _ = writeln!(
        out,
        "MTTF 1/(N·r_f):        {}",
        mttf.map_or("no failures expected".into(), super::render::duration_hours)
    );
    let _ = writeln!(
        out,
        "expected ETTR:         {:.3}   (checkpoint {} min, restart {} min, queue {} min, R {})",
        case.expected_ettr(),
        args.checkpoint_min,
        args.restart_min,
        args.queue_min,
        args.runtime_hours
            .map_or("→ ∞".to_string(), |h| format!("{h} h"))
    );
    if case.expected_ettr_raw() < 0.0 {
        let _ = writeln!(out, "                       (the formula goes below 0: failures come faster than checkpoint + restart)");
    }
    let _ = writeln!(
        out,
        "checkpoint for {:.2}:   {}",
        args.target,
        super::render::checkpoint_cell(case.checkpoint_for(args.target))
    );
    Ok(out)
}

/// Writes `content` to `path` atomically (the shared helper: a temporary
/// file in the same directory, then a rename), so a cron-written report is
/// never half there.
pub fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    lemonade_spool::atomic::write_atomically(path, content.as_bytes())
}
