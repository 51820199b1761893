//! The `lemon` command line. Kept in the library so that packaging can
//! generate the man page and completions from the same definitions.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

pub use crate::report::Format;

#[derive(Debug, Parser)]
#[command(
    name = "lemon",
    version,
    about = "Find and drain lemon nodes: nodes that keep failing jobs without any single health check catching them.",
    long_about = "Find and drain lemon nodes from scheduler history.\n\n\
        `lemon run` (the cron entry) ingests sacct jobs, node events, the nodes' spool exports \
        and job exclusions into lemon.db, scores every node over the window, drains new lemons \
        with a `lemon:` reason and prints a report.\n\n\
        Exit codes: 0 nothing new, 1 new lemons found (drained, or would be with --dry-run), \
        2 error (ingest failed, history stale, circuit breaker tripped, bad usage).",
    after_help = "Lemons go to repair; `lemon release NODE` forgives a node's history once it is fixed. \
        lemon never resumes a node: do that with `scontrol update NodeName=NODE State=RESUME`."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Config file.
    #[arg(long, global = true, env = "LEMONADE_CONFIG", default_value = lemonade_config::DEFAULT_PATH)]
    pub config: PathBuf,
    /// The lemon database (default: `[lemon] db_path`).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// Score as of this time (unix seconds) instead of now: for replayed histories.
    #[arg(long, global = true, value_name = "EPOCH")]
    pub now: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ingest history into lemon.db: sacct, node events, spool exports, exclusions.
    #[command(after_long_help = crate::ingest::job_logs::HELP)]
    Ingest(IngestArgs),
    /// Score nodes and print the flagged ones; changes nothing in Slurm.
    Score(ScoreArgs),
    /// The cron entry: ingest, score, drain new lemons, report.
    Run(RunArgs),
    /// Ranked nodes, their signals and the history of lemon decisions.
    Report(ReportArgs),
    /// Forgive a repaired node's history. Does not resume it in Slurm.
    Release(ReleaseArgs),
    /// Repair tickets: open, close, import.
    #[command(subcommand)]
    Ticket(TicketCommand),
    /// The faulty machine of a job, from its nodes' metrics compared with each other (after Minder).
    Watch(WatchArgs),
    /// Hangs and stragglers inside one job, from its ranks' NCCL flight-recorder dumps.
    Trace(TraceArgs),
    /// Expected ETTR of one job: the reliability paper's formula, and the checkpoint interval a target needs.
    Ettr(crate::reliability::cli::EttrArgs),
    /// Proactive validation (after Anubis): judge benchmark results against criteria learned from the fleet.
    #[command(subcommand)]
    Validate(ValidateCommand),
}

#[derive(Debug, Subcommand, Clone)]
pub enum ValidateCommand {
    /// Judge each node's latest results in a CSV file (or SuperBench's results-summary.jsonl)
    /// against the criteria learned from the same file, every node against the others of its
    /// SKU. Exit codes: 0 no node fails, 1 some node fails, 2 bad usage or a bad file (its
    /// line named), 3 no node fails but some metric, or some node's result of it, could not be
    /// judged.
    Judge(JudgeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct JudgeArgs {
    /// Results: a CSV file with the header `node,sku,time,metric,value` (time as unix
    /// seconds or `YYYY-MM-DDTHH:MM:SS` UTC), or SuperBench's results summary (JSON Lines,
    /// one object of `benchmark/metric` -> value per node, with `node`). Not a symlink; at
    /// most 64 MiB.
    #[arg(long, value_name = "FILE")]
    pub results: PathBuf,
    /// `json`: stdout carries one object (failing nodes with their bands, notes).
    #[arg(long, value_enum, default_value_t)]
    pub format: WatchFormat,
}

/// Where history comes from. Without any file option, from Slurm itself.
#[derive(Debug, Args, Clone, Default)]
pub struct SourceArgs {
    /// Read jobs from `sacct -P` output in a file, or `-` for stdin, instead of running sacct.
    /// A header line maps fields by name (any order, any extra fields); without one, the
    /// fixed list JobIDRaw,JobID,NodeList,NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,User,AllocTRES.
    #[arg(long, value_name = "FILE")]
    pub sacct_file: Option<PathBuf>,
    /// The time zone of ISO times in the files (sacct prints local time): an IANA name
    /// (Europe/Berlin), `local`, or +HH:MM. Default: `[lemon] time_zone`, else the local zone.
    #[arg(long, value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// Read node events (`sacctmgr -n -P show event format=NodeName,Start,End,State,Reason,User`) from a file instead of sacctmgr.
    #[arg(long, value_name = "FILE")]
    pub events_file: Option<PathBuf>,
    /// Read `squeue -h -o '%i|%x'` output from a file instead of running squeue.
    #[arg(long, value_name = "FILE")]
    pub exclusions_file: Option<PathBuf>,
    /// The spool directory of the nodes' exports (default: `[lemon] spool_dir`, then `[spool] dir`).
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Do not call any Slurm command to ingest; only the files given.
    #[arg(long)]
    pub no_slurm: bool,
}

#[derive(Debug, Args, Clone)]
pub struct IngestArgs {
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Args, Clone)]
pub struct WatchArgs {
    /// Replay recorded samples: a CSV file with the header `time,job,node,metric,value`
    /// (unix seconds, rows in time order). The detector sees each row as it would live.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "live",
        conflicts_with = "live"
    )]
    pub replay: Option<PathBuf>,
    /// The service: every `[watch.service] poll_s`, the running multi-node jobs'
    /// samples from `[watch] source`; an outlier is drained (`lemon: OUTLIER ...`).
    /// The embedded source's polls first ingest the nodes' spool exports.
    #[arg(long)]
    pub live: bool,
    /// With --live: one poll, then exit (0 nothing, 1 an outlier acted on, 2 poll skipped).
    #[arg(long, requires = "live")]
    pub once: bool,
    /// With --live: print the scontrol commands and hooks instead of running them
    /// (the spool is still ingested, as `lemon run --dry-run` ingests).
    #[arg(long, requires = "live")]
    pub dry_run: bool,
    /// `json`: stdout carries only the array of detections (`[]` when none).
    #[arg(long, value_enum, default_value_t)]
    pub format: WatchFormat,
}

/// Output formats of `lemon watch`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Default)]
pub enum WatchFormat {
    /// One line per detection: job, node, time, score, metrics.
    #[default]
    Text,
    Json,
}

#[derive(Debug, Args, Clone)]
pub struct TraceArgs {
    /// The Slurm job id.
    pub job: String,
    /// A rank's flight-recorder dump (`<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`:
    /// the name ends in the rank). Takes several (`--dump dir/nccl_trace_rank_*`) or repeats.
    /// Without it: the summaries the nodes' epilogs collected into lemon.db
    /// for the job's last run, with its NodeList from the jobs table.
    #[arg(long = "dump", value_name = "FILE", num_args = 1..)]
    pub dumps: Vec<PathBuf>,
    /// The job's NodeList, in order (e.g. `gpu[041-042]`): names the node of each rank.
    #[arg(long, value_name = "HOSTLIST")]
    pub nodes: Option<String>,
    /// Ranks per node (default: the ranks seen, spread evenly over --nodes).
    #[arg(long, value_name = "N")]
    pub tasks_per_node: Option<u32>,
    /// The user the dumps must belong to (default: the user running lemon).
    #[arg(long, value_name = "UID")]
    pub owner: Option<u32>,
    /// `json`: stdout carries one object (job, hangs, stragglers, notes, unread).
    #[arg(long, value_enum, default_value_t)]
    pub format: crate::trace::TraceFormat,
}

#[derive(Debug, Args, Clone)]
pub struct ScoreArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print the scontrol commands instead of running them; record nothing as drained.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How many healthy nodes to list after the flagged ones.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// The cluster reliability report instead: job outcomes, attributed failures,
    /// failure rate, MTTF by job size, expected ETTR, lost goodput, lemon signals.
    #[arg(long)]
    pub reliability: bool,
    #[command(flatten)]
    pub reliability_args: crate::reliability::cli::ReliabilityArgs,
}

#[derive(Debug, Args, Clone)]
pub struct ReleaseArgs {
    /// The Slurm node name.
    pub node: String,
    /// Why, e.g. the repair done.
    #[arg(long, default_value = "")]
    pub note: String,
}

#[derive(Debug, Subcommand, Clone)]
pub enum TicketCommand {
    /// Open a repair ticket for a node.
    Open {
        node: String,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Close the node's open tickets.
    Close {
        node: String,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// List the open tickets (with `--all`, the closed ones too), oldest first.
    List {
        #[arg(long)]
        all: bool,
    },
    /// Import tickets from a CSV file with the header `node,opened_at,closed_at,note`
    /// (times as unix seconds or `YYYY-MM-DDTHH:MM:SS` UTC; `closed_at` may be empty).
    Import { file: PathBuf },
}
