//! The `healthcheck` command line. Kept in the library so that packaging can
//! generate the man page and completions from the same definitions.

use crate::check::Profile;
use crate::output::Format;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Parser)]
#[command(
    name = "healthcheck",
    version,
    about = "Lemonade's node health checks: XID, ECC, NVLink, PCIe, InfiniBand, mounts, memory, CPUs, disks, services, firmware.",
    long_about = "Lemonade's node health checks.\n\n\
        With no subcommand, runs the periodic profile and applies the node-state policy: \
        this is what Slurm's HealthCheckProgram and the systemd timer run.\n\n\
        Exit codes follow Nagios: 0 ok, 1 warning, 2 drain or down, 3 unknown.",
    after_help = "Run one check by name: `healthcheck xid`, `healthcheck pcie`, ... (see `healthcheck list`).",
    allow_external_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Config file.
    #[arg(long, global = true, env = "LEMONADE_CONFIG", default_value = lemonade_config::DEFAULT_PATH)]
    pub config: PathBuf,
    /// Root directory the checks read from: `/` on a node, a fixture or unpacked snapshot otherwise.
    #[arg(long, global = true, default_value = "/")]
    pub root: PathBuf,
    /// Slurm node name (default: $SLURMD_NODENAME, then the short host name).
    #[arg(long, global = true)]
    pub node: Option<String>,
    /// Print the scontrol commands the node-state policy would run instead of running them.
    #[arg(long, global = true)]
    pub dry_run: bool,
    /// With `--root` other than `/`: read and record the configured node
    /// database all the same. Without it, a replay starts from no previous
    /// state and records nothing, so the live node's cursors and counters
    /// stay out of the snapshot's findings (and the snapshot out of them).
    #[arg(long, global = true)]
    pub use_store: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the configured suite (or the named checks) once.
    Run(RunArgs),
    /// Show the checks, their profiles and settings.
    List,
    /// Show recorded runs and findings.
    History(HistoryArgs),
    /// Capture what the checks read into a .tar.gz, for replay with `run --root`.
    Snapshot {
        /// Archive to write.
        out: PathBuf,
    },
    /// Print a config with this node's expectations (GPUs, PCIe, HCAs,
    /// mounts, memory, CPUs, disks, services, firmware), read through `--root`.
    Baseline {
        /// Wrap it as a `[[node]]` block for these nodes (a Slurm hostlist: `gpu[001-128]`).
        #[arg(long)]
        hosts: Option<String>,
    },
    /// Proactive validation (issue 31). For now: read a saved benchmark
    /// output with its parser and print the metrics it finds.
    Validate(ValidateArgs),
    /// The node sampler for `lemon watch`: every --interval while a job runs
    /// here, GPU, InfiniBand, CPU, memory and disk metrics to the spool export
    /// (what `lemonade-sampler.service` runs).
    Sample(SampleArgs),
    /// A check's name: run that check alone, e.g. `healthcheck xid`.
    #[command(external_subcommand)]
    Check(Vec<String>),
}

/// `healthcheck sample`'s flags.
#[derive(Debug, Args, Clone)]
pub struct SampleArgs {
    /// Seconds between rounds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
    /// Rounds per chunk sent to the spool export.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=360))]
    pub flush_every: u32,
    /// Seconds after a job's end before its chunks leave the node's export file.
    #[arg(long, default_value_t = 3600)]
    pub prune_after: u64,
    /// Stop after this many rounds (and export what is pending); default: until SIGTERM.
    #[arg(long)]
    pub rounds: Option<u64>,
}

/// `healthcheck <check> [OPTIONS]`: one check's command line, where the
/// global flags may come after the check's name too.
#[derive(Debug, Parser)]
#[command(
    name = "healthcheck",
    about = "Run this check alone (the global flags may come before or after its name)."
)]
struct CheckCli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(flatten)]
    run: RunArgs,
}

/// Parses what follows `healthcheck` when the first word is a check's name
/// (`words[0]`): the run's options, and the global flags with those given
/// after the name winning over `before` (those given before it). Errors
/// (and `--help`) show the usage as `healthcheck <check>`.
pub fn parse_check_words(
    words: &[String],
    before: &GlobalArgs,
) -> Result<(GlobalArgs, RunArgs), clap::Error> {
    let name = words.first().map(String::as_str).unwrap_or("check");
    let matches = CheckCli::command()
        .bin_name(format!("healthcheck {name}"))
        .mut_arg("checks", |a| a.hide(true))
        .try_get_matches_from(words)?;
    let after = GlobalArgs::from_arg_matches(&matches)?;
    let mut run = RunArgs::from_arg_matches(&matches)?;
    if run.checks.is_none() {
        run.checks = Some(vec![name.to_string()]);
    }
    Ok((before.overridden_by(after, &matches), run))
}

impl GlobalArgs {
    /// These flags, with those `matches` has from the command line replaced by `later`'s.
    fn overridden_by(&self, later: GlobalArgs, matches: &ArgMatches) -> GlobalArgs {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        GlobalArgs {
            config: if given("config") {
                later.config
            } else {
                self.config.clone()
            },
            root: if given("root") {
                later.root
            } else {
                self.root.clone()
            },
            node: if given("node") {
                later.node
            } else {
                self.node.clone()
            },
            dry_run: self.dry_run || later.dry_run,
            use_store: self.use_store || later.use_store,
        }
    }
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Run only these checks (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub checks: Option<Vec<String>>,
    /// Which suite to run.
    #[arg(long, value_enum, default_value = "full")]
    pub profile: Profile,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Do not create or change the node database: the previous state is
    /// read if there is one, nothing is written, nothing is exported.
    #[arg(long)]
    pub no_record: bool,
    /// Read the kernel log from this file (kmsg record format) instead of the configured one.
    #[arg(long)]
    pub kmsg_file: Option<PathBuf>,
    /// Also write node_exporter textfile metrics here, atomically.
    #[arg(long)]
    pub prometheus_textfile: Option<PathBuf>,
    /// Also apply the node-state policy (drain, down, resume) and export, as a bare `healthcheck` does.
    #[arg(long)]
    pub apply_policy: bool,
    /// Pretend the time is this (unix seconds): replays and tests.
    #[arg(long, hide = true)]
    pub now: Option<i64>,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Parse a saved output: KIND is nccl-tests, nvbandwidth, perftest,
    /// dcgmi-diag or gpu-burn; FILE is not followed if a symlink. Without
    /// it: run the `[validate]` suite on this node, judge it, and drain or
    /// resume the node by the verdict (exit 0 pass, 2 fail, 3 unknown).
    #[arg(long, num_args = 2, value_names = ["KIND", "FILE"])]
    pub parse: Vec<String>,
    /// The Slurm job the suite runs in (recorded with the results).
    #[arg(long, env = "SLURM_JOB_ID")]
    pub job_id: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// How far back: `24h`, `7d`, `30m`, a date (`2026-11-01`) or RFC 3339 time.
    #[arg(long, default_value = "24h")]
    pub since: String,
    /// Also list runs whose findings were all ok.
    #[arg(long)]
    pub all: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// At most this many runs.
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
}

/// Why `--since` could not be read; `text` is what was given, trimmed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SinceError {
    #[error("--since `{text}`: unknown unit `{unit}` (use s, m, h, d or w)")]
    UnknownUnit { text: String, unit: char },
    #[error("--since `{text}`: further back than a date can be")]
    TooFarBack { text: String },
    #[error("--since `{text}`: expected a span like 24h or 7d, a date like 2026-11-01, or an RFC 3339 time")]
    Unreadable { text: String },
}

/// Parses `--since`: a span back from `now` (`90s`, `30m`, `24h`, `7d`), a date, or RFC 3339.
pub fn parse_since(
    text: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<chrono::DateTime<chrono::Utc>, SinceError> {
    let t = text.trim();
    if let Some(unit) = t.chars().last().filter(|c| c.is_ascii_alphabetic()) {
        if let Ok(n) = t[..t.len() - 1].parse::<i64>() {
            let per_unit = match unit {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                'w' => 7 * 86_400,
                _ => {
                    return Err(SinceError::UnknownUnit {
                        text: t.to_string(),
                        unit,
                    })
                }
            };
            return n
                .checked_mul(per_unit)
                .and_then(chrono::Duration::try_seconds)
                .and_then(|span| now.checked_sub_signed(span))
                .ok_or_else(|| SinceError::TooFarBack {
                    text: t.to_string(),
                });
        }
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    }
    Err(SinceError::Unreadable {
        text: t.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_too_large_for_a_date_is_an_error_not_a_panic() {
        let now = chrono::Utc::now();
        for huge in [
            "9223372036854775807d",
            "999999999999w",
            "-9223372036854775807s",
        ] {
            let err = parse_since(huge, now).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("--since `{huge}`: further back than a date can be")
            );
        }
        assert_eq!(
            parse_since("2d", now).unwrap(),
            now - chrono::Duration::days(2)
        );
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn global_flags_work_after_a_checks_name() {
        let cli = Cli::try_parse_from(words(
            "healthcheck --node n1 mounts --root /x --format json",
        ))
        .unwrap();
        let Some(Command::Check(rest)) = cli.command else {
            panic!("a check's name is its own subcommand");
        };
        let (global, run) = parse_check_words(&rest, &cli.global).unwrap();
        assert_eq!(global.root, PathBuf::from("/x"));
        assert_eq!(
            global.node.as_deref(),
            Some("n1"),
            "flags before the name stay"
        );
        assert_eq!(run.checks, Some(vec!["mounts".to_string()]));
        assert_eq!(run.format, Format::Json);
    }

    #[test]
    fn flags_after_the_name_win_and_the_usage_names_the_check() {
        let cli = Cli::try_parse_from(words("healthcheck --root /a xid --root /b")).unwrap();
        let Some(Command::Check(rest)) = cli.command else {
            panic!("a check's name is its own subcommand");
        };
        let (global, _) = parse_check_words(&rest, &cli.global).unwrap();
        assert_eq!(global.root, PathBuf::from("/b"));
        let err = parse_check_words(&words("xid --bogus"), &cli.global).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("Usage: healthcheck xid"), "{text}");
        assert!(!text.contains("--checks"), "{text}");
    }

    #[test]
    fn validate_parse_takes_a_kind_and_a_file() {
        let cli = Cli::try_parse_from(words(
            "healthcheck validate --parse nccl-tests /tmp/out.txt --format json",
        ))
        .unwrap();
        let Some(Command::Validate(args)) = cli.command else {
            panic!("validate is its own subcommand");
        };
        assert_eq!(args.parse, ["nccl-tests", "/tmp/out.txt"]);
        assert_eq!(args.format, Format::Json);
        assert!(Cli::try_parse_from(words("healthcheck validate --parse nccl-tests")).is_err());
        let cli = Cli::try_parse_from(words("healthcheck validate --dry-run --job-id 7")).unwrap();
        let Some(Command::Validate(args)) = cli.command else {
            panic!("validate runs the suite without --parse");
        };
        assert!(args.parse.is_empty() && cli.global.dry_run);
        assert_eq!(args.job_id.as_deref(), Some("7"));
    }

    #[test]
    fn since_accepts_spans_dates_and_times() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-20T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            parse_since("2h", now).unwrap().to_rfc3339(),
            "2026-11-20T10:00:00+00:00"
        );
        assert_eq!(
            parse_since("1d", now).unwrap().to_rfc3339(),
            "2026-11-19T12:00:00+00:00"
        );
        assert_eq!(
            parse_since("2026-11-01", now).unwrap().to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert!(parse_since("3y", now).is_err());
        assert!(parse_since("yesterday", now).is_err());
    }
}
