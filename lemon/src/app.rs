//! The subcommands, wired together: config, database, lock, exit codes.

use crate::act::{self, ActParams};
use crate::attribute::AttributionParams;
use crate::cli::{
    Cli, Command, Format, IngestArgs, ReleaseArgs, ReportArgs, RunArgs, ScoreArgs, SourceArgs,
    TicketCommand, TraceArgs, ValidateCommand, WatchArgs, WatchFormat,
};
use crate::db;
use crate::decide::{self, Scores};
use crate::error::{LemonError, Result};
use crate::ingest::{self, IngestContext, Sources};
use crate::reliability;
use crate::reliability::cli::EttrArgs;
use crate::report::{self, Report};
use crate::signals::{self, SignalParams};
use crate::validate;
use lemonade_config::Config;
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{NodeWriter, StateCommand};
use lemonade_sql::lock::RunLock;
use lemonade_sql::rusqlite::Connection;
use lemonade_sql::wal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Exit code: nothing new.
pub const EXIT_OK: u8 = 0;
/// Exit code: new lemons (drained, or would be in a dry run).
pub const EXIT_NEW_LEMONS: u8 = 1;
/// Exit code: error, stale or failed ingest, circuit breaker tripped.
pub const EXIT_ERROR: u8 = 2;
/// Exit code of `lemon validate judge`: no node fails, but some metric was
/// judged by nothing (too few results, no static floor).
pub const EXIT_NOT_JUDGED: u8 = 3;

/// Decisions shown by reports.
const REPORT_DECISIONS: usize = 50;

/// What every subcommand needs: config, database path, clock, Slurm.
struct App {
    cfg: Config,
    db_path: PathBuf,
    now: i64,
    busy: Duration,
    slurm: SlurmCommands,
    default_spool: Option<PathBuf>,
}

impl App {
    fn new(cli: &Cli) -> Result<App> {
        let cfg = lemonade_config::load(&cli.global.config, None)
            .map_err(|e| LemonError::Usage(format!("config: {e}")))?;
        let slurm = cfg.slurm.commands();
        Ok(App {
            db_path: cli
                .global
                .db
                .clone()
                .unwrap_or_else(|| cfg.lemon.db_path.clone()),
            now: cli
                .global
                .now
                .unwrap_or_else(|| chrono::Utc::now().timestamp()),
            busy: Duration::from_millis(cfg.lemon.busy_timeout_ms),
            default_spool: cfg.lemon.spool_dir.clone().or(cfg.spool.dir.clone()),
            slurm,
            cfg,
        })
    }

    /// Opens lemon.db, first emptying a write-ahead log that an earlier
    /// command left past its limit.
    fn open(&self) -> Result<Connection> {
        let conn = db::open(&self.db_path, self.busy)?;
        self.keep_log_short(&conn)?;
        Ok(conn)
    }

    /// What the node runs do with node.db (`lemonade_sql::wal`): whichever
    /// command finds the log past the limit empties it. The writing commands
    /// call it again when they are done, so an hourly `lemon run` leaves no
    /// big log behind for an hour.
    fn keep_log_short(&self, conn: &Connection) -> Result<()> {
        wal::truncate_if_over(
            conn,
            &self.db_path,
            wal::DEFAULT_LIMIT_BYTES,
            wal::DEFAULT_WAIT,
            self.busy,
        )?;
        Ok(())
    }

    fn lock(&self) -> Result<RunLock> {
        Ok(RunLock::acquire(&self.db_path, self.busy)?)
    }
}

/// Where ingest reads from: files replace their Slurm command; giving a
/// jobs file means replaying, so Slurm is then not asked for the other
/// sources either.
fn sources_of(args: &SourceArgs, default_spool: Option<PathBuf>) -> Sources {
    Sources {
        sacct_file: args.sacct_file.clone(),
        events_file: args.events_file.clone(),
        exclusions_file: args.exclusions_file.clone(),
        spool_dir: args.spool_dir.clone().or(default_spool),
        use_slurm: !args.no_slurm && args.sacct_file.is_none(),
        time_zone: args.time_zone.clone(),
    }
}

/// Runs one command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8> {
    let ctx = App::new(&cli)?;
    match cli.command {
        Command::Ingest(args) => ingest_cmd(&ctx, &args),
        Command::Score(args) => score_cmd(&ctx, &args),
        Command::Run(args) => run_cmd(&ctx, &args),
        Command::Report(args) => report_cmd(&ctx, &args),
        Command::Ettr(args) => ettr_cmd(&ctx, &args),
        Command::Watch(args) => watch_cmd(&ctx, &args),
        Command::Trace(args) => trace_cmd(&ctx, &args),
        Command::Release(args) => release_cmd(&ctx, &args),
        Command::Ticket(t) => ticket_cmd(&ctx, t),
        Command::Validate(v) => validate_cmd(&ctx, v),
    }
}

fn ingest_cmd(ctx: &App, args: &IngestArgs) -> Result<u8> {
    let _lock = ctx.lock()?;
    let mut conn = ctx.open()?;
    let sources = sources_of(&args.source, ctx.default_spool.clone());
    let rep = ingest::ingest(
        &mut conn,
        &sources,
        &IngestContext::of(&ctx.cfg, &ctx.slurm, ctx.now),
    )?;
    print!("{}", rep.text());
    ctx.keep_log_short(&conn)?;
    Ok(if rep.ok() { EXIT_OK } else { EXIT_ERROR })
}

fn score_cmd(ctx: &App, args: &ScoreArgs) -> Result<u8> {
    let conn = ctx.open()?;
    let scores = score(&conn, &ctx.cfg, ctx.now)?;
    let rep = Report::new(
        &scores,
        ctx.cfg.lemon.window_days,
        10,
        ctx.now,
        db::history_until(&conn)?,
        Vec::new(),
    )
    .with_firmware(&conn)?;
    print!("{}", rep.render(args.format));
    Ok(if scores.flagged().next().is_some() {
        EXIT_NEW_LEMONS
    } else {
        EXIT_OK
    })
}

/// The cron entry: ingest, score, keep the attributions, drain, report.
fn run_cmd(ctx: &App, args: &RunArgs) -> Result<u8> {
    let _lock = ctx.lock()?;
    let mut conn = ctx.open()?;
    let sources = sources_of(&args.source, ctx.default_spool.clone());
    let ing = ingest::ingest(
        &mut conn,
        &sources,
        &IngestContext::of(&ctx.cfg, &ctx.slurm, ctx.now),
    )?;
    let until = db::history_until(&conn)?;
    let refuse = refusal(&ing, until, ctx.now, ctx.cfg.lemon.max_history_lag_hours);
    let (fleet, window) = signals::compute_with_window(&conn, &signal_params(&ctx.cfg), ctx.now)?;
    signals::store_attributions(&conn, &window, ctx.now)?;
    let scores = decide::decide(fleet, &ctx.cfg.lemon);
    let params = ActParams {
        slurm: &ctx.slurm,
        dry_run: args.dry_run,
        window_days: ctx.cfg.lemon.window_days,
        max_drain_fraction: ctx.cfg.lemon.max_drain_fraction,
        max_drains_per_run: ctx.cfg.lemon.max_drains_per_run,
        now: ctx.now,
    };
    let acted = act::act(&conn, &scores, &params, refuse.clone())?;
    let validation = validation_step(ctx, &conn, &scores, &sources, args.dry_run, &refuse, &acted)?;
    let mut rep = Report::new(
        &scores,
        ctx.cfg.lemon.window_days,
        10,
        ctx.now,
        until,
        report::decisions(&conn, REPORT_DECISIONS)?,
    )
    .with_firmware(&conn)?
    .with_node_breaker_holds(&conn)?;
    rep.ingest = Some(&ing);
    rep.actions = Some(&acted);
    rep.validation_step = validation.as_ref();
    print!("{}", rep.render(args.format));
    if let Some(r) = &refuse {
        eprintln!("lemon: nothing drained: {r}");
    }
    ctx.keep_log_short(&conn)?;
    let failed_submission = validation.as_ref().is_some_and(|v| v.failed());
    Ok(run_exit_code(refuse.is_some() || failed_submission, &acted))
}

/// The validation step of `lemon run` (issue 31), when `[validate]
/// enabled`: nothing is submitted after a refused ingest or a tripped
/// breaker.
fn validation_step(
    ctx: &App,
    conn: &Connection,
    scores: &Scores,
    sources: &Sources,
    dry_run: bool,
    refuse: &Option<String>,
    acted: &act::ActReport,
) -> Result<Option<validate::step::StepReport>> {
    let settings = &ctx.cfg.validate;
    if !settings.enabled {
        return Ok(None);
    }
    settings.check().map_err(LemonError::Usage)?;
    let hold = refuse.clone().or_else(|| {
        (acted.breaker_tripped)
            .then(|| format!("circuit breaker tripped (cap {} drains)", acted.breaker_cap))
    });
    let params = validate::step::StepParams {
        settings,
        slurm: &ctx.slurm,
        scores,
        spool_dir: sources.spool_dir.as_deref(),
        dry_run,
        hold,
        now: ctx.now,
    };
    Ok(Some(validate::step::run(conn, &params)?))
}

/// `lemon run`'s exit code: 2 when it refused, the breaker tripped or a
/// drain failed; 1 for new lemons; else 0.
fn run_exit_code(refused: bool, acted: &act::ActReport) -> u8 {
    let failed_drain = acted
        .outcomes
        .iter()
        .any(|o| o.action == act::Action::DrainFailed);
    if refused || acted.breaker_tripped || failed_drain {
        EXIT_ERROR
    } else if acted.new_lemons() > 0 {
        EXIT_NEW_LEMONS
    } else {
        EXIT_OK
    }
}

fn report_cmd(ctx: &App, args: &ReportArgs) -> Result<u8> {
    let conn = ctx.open()?;
    let scores = score(&conn, &ctx.cfg, ctx.now)?;
    let out = if args.reliability {
        reliability_text(ctx, &conn, &scores, args)?
    } else {
        Report::new(
            &scores,
            ctx.cfg.lemon.window_days,
            args.top,
            ctx.now,
            db::history_until(&conn)?,
            report::decisions(&conn, REPORT_DECISIONS)?,
        )
        .with_firmware(&conn)?
        .with_watch_detections(&conn)?
        .with_node_breaker_holds(&conn)?
        .with_drift(&conn)?
        .with_rack_drift(&conn, &racks(&ctx.cfg)?)?
        .with_validations(&conn, &ctx.cfg.validate)?
        .render(args.format)
    };
    emit(args.reliability_args.output.as_deref(), &out)?;
    Ok(EXIT_OK)
}

/// The racks of `[[rack]]`, then the blocks of `[lemon] topology_yaml`.
fn racks(cfg: &Config) -> Result<crate::rack_drift::Racks> {
    let topology = match &cfg.lemon.topology_yaml {
        Some(path) => {
            let cap = lemonade_slurm::topology::MAX_BYTES as u64;
            let bytes = crate::input_file::read_plain(path, cap, "Slurm's topology.yaml")?;
            let text = String::from_utf8_lossy(&bytes);
            lemonade_slurm::topology::parse(&text)
                .map_err(|e| LemonError::Usage(format!("{}: {e}", path.display())))?
        }
        None => None,
    };
    crate::rack_drift::Racks::of(&cfg.rack, topology.as_ref()).map_err(|e| {
        let file = cfg
            .lemon
            .topology_yaml
            .as_deref()
            .unwrap_or(Path::new("topology.yaml"));
        LemonError::Usage(format!("{}: {e}", file.display()))
    })
}

fn reliability_text(
    ctx: &App,
    conn: &Connection,
    scores: &Scores,
    args: &ReportArgs,
) -> Result<String> {
    let format = match args.format {
        Format::Text => reliability::render::Format::Text,
        Format::Json => reliability::render::Format::Json,
        Format::Html => reliability::render::Format::Html,
        Format::Markdown => {
            return Err(LemonError::Usage(
                "--reliability writes text, json or html".into(),
            ))
        }
    };
    Ok(reliability::cli::reliability_report(
        conn,
        Some(scores),
        &args.reliability_args,
        format,
        ctx.now,
        &ctx.cfg.lemon,
        &attribution_params(&ctx.cfg),
    )?)
}

/// Exit 0 when the replay ran, whether it found anything or not.
fn watch_cmd(ctx: &App, args: &WatchArgs) -> Result<u8> {
    let Some(replay) = &args.replay else {
        return watch_live(ctx, args);
    };
    let json = args.format == WatchFormat::Json;
    let (out, summary) = crate::watch::replay_file(replay, &ctx.cfg.watch, json)?;
    print!("{out}");
    eprintln!("lemon watch: {summary}");
    Ok(EXIT_OK)
}

/// `lemon validate judge`: exit 0 when no node fails, 1 when some does
/// (the verdicts are the output, as new lemons are `lemon run`'s), 3 when
/// none fails but some metric or some node's result could not be judged.
fn validate_cmd(ctx: &App, command: ValidateCommand) -> Result<u8> {
    let ValidateCommand::Judge(args) = command;
    let judgement = crate::validate::judge::judge_file(&args.results, &ctx.cfg.validate)?;
    print!(
        "{}",
        crate::validate::judge::render(&judgement, args.format == WatchFormat::Json)
    );
    Ok(if judgement.any_failing() {
        EXIT_NEW_LEMONS
    } else if judgement.any_unjudged() {
        EXIT_NOT_JUDGED
    } else {
        EXIT_OK
    })
}

/// Exit 0 when the dumps were analysed, whether anyone was named or not.
fn trace_cmd(ctx: &App, args: &TraceArgs) -> Result<u8> {
    if args.dumps.is_empty() {
        let conn = ctx.open()?;
        let (out, summary) = crate::trace::trace_collected(&conn, &args.job, args.format)?;
        print!("{out}");
        eprint!("{summary}");
        return Ok(EXIT_OK);
    }
    let placement = crate::trace::Placement {
        nodes: args.nodes.clone(),
        tasks_per_node: args.tasks_per_node,
    };
    let owner = args
        .owner
        .unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    let (out, summary) =
        crate::trace::trace_dumps(&args.job, &args.dumps, &placement, owner, args.format)?;
    print!("{out}");
    eprint!("{summary}");
    Ok(EXIT_OK)
}

/// `lemon watch --live`: the service; with `--once`, one poll's exit code.
fn watch_live(ctx: &App, args: &WatchArgs) -> Result<u8> {
    use crate::watch::service::{self, PollEnd, ServiceParams};
    let conn = ctx.open()?;
    let params = ServiceParams {
        cfg: &ctx.cfg,
        slurm: &ctx.slurm,
        dry_run: args.dry_run,
        once: args.once,
        spool: ctx
            .default_spool
            .clone()
            .map(|spool_dir| crate::watch::feed::SpoolFeed {
                db_path: &ctx.db_path,
                spool_dir,
            }),
    };
    Ok(match service::run(&conn, &params)? {
        PollEnd::Quiet => EXIT_OK,
        PollEnd::Acted => EXIT_NEW_LEMONS,
        PollEnd::Skipped => EXIT_ERROR,
    })
}

fn ettr_cmd(ctx: &App, args: &EttrArgs) -> Result<u8> {
    let (rate, source) = match args.failure_rate {
        Some(r) => (r, "given".to_string()),
        None => history_failure_rate(ctx)?,
    };
    print!("{}", reliability::cli::ettr_answer(args, rate, &source)?);
    Ok(EXIT_OK)
}

/// r_f from lemon.db's large jobs, for `lemon ettr` without `--failure-rate`.
fn history_failure_rate(ctx: &App) -> Result<(f64, String)> {
    if !ctx.db_path.exists() {
        return Err(LemonError::Usage(format!(
            "{} does not exist: pass --failure-rate (RSC-1: 6.5)",
            ctx.db_path.display()
        )));
    }
    let conn = ctx.open()?;
    let days = ctx.cfg.lemon.window_days;
    match reliability::cli::history_rate(&conn, ctx.now, days, &attribution_params(&ctx.cfg))? {
        Some(r) => Ok((r, format!("lemon.db, jobs > 128 GPUs, last {days} days"))),
        None => Err(LemonError::Usage(format!(
            "no jobs > 128 GPUs in lemon.db's last {days} days: pass --failure-rate (RSC-1: 6.5)"
        ))),
    }
}

fn release_cmd(ctx: &App, args: &ReleaseArgs) -> Result<u8> {
    let conn = ctx.open()?;
    act::release(&conn, &args.node, &args.note, ctx.now)?;
    println!(
        "{}: released; its history before now no longer counts. lemon does not resume nodes: \
         when it is repaired, run {}",
        args.node,
        // Shown, never run: resuming is the administrator's call.
        NodeWriter::new(&ctx.slurm, true).shown(&StateCommand::resume(&args.node))
    );
    Ok(EXIT_OK)
}

fn ticket_cmd(ctx: &App, t: TicketCommand) -> Result<u8> {
    let mut conn = ctx.open()?;
    match t {
        TicketCommand::Open { node, note } => {
            ingest::tickets::open(&conn, &node, &note, ctx.now)?;
            println!("{node}: ticket opened");
        }
        TicketCommand::Close { node, note } => {
            let n = ingest::tickets::close(&conn, &node, &note, ctx.now)?;
            if n == 0 {
                return Err(LemonError::Usage(format!(
                    "{node} has no open ticket (see `lemon ticket list`)"
                )));
            }
            println!("{node}: {n} ticket(s) closed");
        }
        TicketCommand::List { all } => {
            for t in ingest::tickets::list(&conn, all)? {
                let closed = t
                    .closed_at
                    .map(|c| format!(", closed {}", db::fmt_time(c)))
                    .unwrap_or_default();
                println!(
                    "{}\topened {}{closed}\t{}\t{}",
                    t.node,
                    db::fmt_time(t.opened_at),
                    t.source,
                    t.note
                );
            }
        }
        TicketCommand::Import { file } => {
            let stats = ingest::tickets::import_csv(&mut conn, &file)?;
            let rep = ingest::IngestReport {
                sources: vec![(format!("tickets ({})", file.display()), stats)],
                failures: Vec::new(),
            };
            print!("{}", rep.text());
        }
    }
    Ok(EXIT_OK)
}

/// The scoring's settings from config.
fn signal_params(cfg: &Config) -> SignalParams {
    SignalParams {
        window_days: cfg.lemon.window_days,
        attribution: attribution_params(cfg),
        early_fail_s: cfg.lemon.early_fail_s,
    }
}

/// Computes the signals and applies the rules. Writes nothing.
pub fn score(conn: &Connection, cfg: &Config, now: i64) -> Result<Scores> {
    let fleet = signals::compute(conn, &signal_params(cfg), now)?;
    Ok(decide::decide(fleet, &cfg.lemon))
}

/// The attribution's settings from config.
pub fn attribution_params(cfg: &Config) -> AttributionParams {
    AttributionParams {
        user_error_exit_codes: cfg.lemon.user_error_exit_codes.clone(),
        own_job_name: Some(cfg.validate.job_name.clone()).filter(|n| !n.is_empty()),
        without_texts: false,
    }
}

/// Why this run must not drain anything, if it must not.
pub fn refusal(
    ing: &ingest::IngestReport,
    history_until: Option<i64>,
    now: i64,
    max_lag_hours: f64,
) -> Option<String> {
    if !ing.ok() {
        let names: Vec<&str> = ing.failures.iter().map(|(n, _)| n.as_str()).collect();
        return Some(format!(
            "ingest of {} failed; fix it and re-run",
            names.join(", ")
        ));
    }
    match history_until {
        None => Some("no job history yet (run `lemon ingest` first)".into()),
        Some(t) if (now - t) as f64 > max_lag_hours * 3600.0 => Some(format!(
            "job history ends at {}, more than {max_lag_hours} h before now (is slurmdbd down? does cron run?)",
            db::fmt_time(t)
        )),
        Some(_) => None,
    }
}

/// Renders scores without actions (for tests and scripts).
pub fn render_scores(scores: &Scores, window_days: u32, now: i64, format: Format) -> String {
    Report::new(scores, window_days, 10, now, None, Vec::new()).render(format)
}

/// Prints a report, or writes it atomically to `output` (cron keeps the
/// previous report whole until the new one is complete).
fn emit(output: Option<&std::path::Path>, content: &str) -> Result<()> {
    match output {
        Some(path) => {
            reliability::cli::write_atomically(path, content).map_err(|e| LemonError::io(path, e))
        }
        None => {
            print!("{content}");
            Ok(())
        }
    }
}
