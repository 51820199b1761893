//! The subcommands, wired together: config, database, lock, exit codes.

use crate::act::{self, ActParams};
use crate::cli::{Cli, Command, Format, TicketCommand};
use crate::db;
use crate::decide::{self, Scores};
use crate::error::{LemonError, Result};
use crate::ingest::{self, IngestContext, Sources};
use crate::reliability;
use crate::report::{self, Report};
use crate::signals::{self, SignalParams};
use lemonade_config::Config;
use lemonade_slurm::command::SlurmCommands;
use lemonade_sql::lock::RunLock;
use lemonade_sql::rusqlite::Connection;
use std::time::Duration;

/// Exit code: nothing new.
pub const EXIT_OK: u8 = 0;
/// Exit code: new lemons (drained, or would be in a dry run).
pub const EXIT_NEW_LEMONS: u8 = 1;
/// Exit code: error, stale or failed ingest, circuit breaker tripped.
pub const EXIT_ERROR: u8 = 2;

/// Decisions shown by reports.
const REPORT_DECISIONS: usize = 50;

/// Runs one command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8> {
    let cfg = lemonade_config::load(&cli.global.config, None)
        .map_err(|e| LemonError::Usage(format!("config: {e}")))?;
    let db_path = cli
        .global
        .db
        .clone()
        .unwrap_or_else(|| cfg.lemon.db_path.clone());
    let now = cli
        .global
        .now
        .unwrap_or_else(|| chrono::Utc::now().timestamp());
    let busy = Duration::from_millis(cfg.lemon.busy_timeout_ms);
    let slurm = SlurmCommands::new(
        cfg.slurm.bin_dir.clone(),
        cfg.slurm.conf.clone(),
        Duration::from_secs_f64(cfg.slurm.command_timeout_s.max(0.1)),
    );
    let default_spool = cfg.lemon.spool_dir.clone().or(cfg.spool.dir.clone());

    match cli.command {
        Command::Ingest(args) => {
            let _lock = RunLock::acquire(&db_path, busy)?;
            let mut conn = db::open(&db_path, busy)?;
            let sources = Sources::from_args(&args.source, default_spool);
            let rep = ingest::ingest(&mut conn, &sources, &ingest_ctx(&cfg, &slurm, now))?;
            print!("{}", rep.text());
            Ok(if rep.ok() { EXIT_OK } else { EXIT_ERROR })
        }
        Command::Score(args) => {
            let conn = db::open(&db_path, busy)?;
            let scores = score(&conn, &cfg, now)?;
            let rep = Report::new(
                &scores,
                cfg.lemon.window_days,
                10,
                now,
                db::history_until(&conn)?,
                Vec::new(),
            );
            print!("{}", rep.render(args.format));
            Ok(if scores.flagged().next().is_some() {
                EXIT_NEW_LEMONS
            } else {
                EXIT_OK
            })
        }
        Command::Run(args) => {
            let _lock = RunLock::acquire(&db_path, busy)?;
            let mut conn = db::open(&db_path, busy)?;
            let sources = Sources::from_args(&args.source, default_spool);
            let ing = ingest::ingest(&mut conn, &sources, &ingest_ctx(&cfg, &slurm, now))?;
            let until = db::history_until(&conn)?;
            let refuse = refusal(&ing, until, now, cfg.lemon.max_history_lag_hours);
            let scores = score(&conn, &cfg, now)?;
            let params = ActParams {
                slurm: &slurm,
                dry_run: args.dry_run,
                window_days: cfg.lemon.window_days,
                max_drain_fraction: cfg.lemon.max_drain_fraction,
                max_drains_per_run: cfg.lemon.max_drains_per_run,
                now,
            };
            let acted = act::act(&conn, &scores, &params, refuse.clone())?;
            let mut rep = Report::new(
                &scores,
                cfg.lemon.window_days,
                10,
                now,
                until,
                report::decisions(&conn, REPORT_DECISIONS)?,
            );
            rep.ingest = Some(&ing);
            rep.actions = Some(&acted);
            print!("{}", rep.render(args.format));
            let failed_drain = acted
                .outcomes
                .iter()
                .any(|o| o.action == act::Action::DrainFailed);
            if let Some(r) = &refuse {
                eprintln!("lemon: nothing drained: {r}");
            }
            Ok(
                if refuse.is_some() || acted.breaker_tripped || failed_drain {
                    EXIT_ERROR
                } else if acted.new_lemons() > 0 {
                    EXIT_NEW_LEMONS
                } else {
                    EXIT_OK
                },
            )
        }
        Command::Report(args) => {
            let conn = db::open(&db_path, busy)?;
            let scores = score(&conn, &cfg, now)?;
            if args.reliability {
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
                let out = reliability::cli::reliability_report(
                    &conn,
                    Some(&scores),
                    &args.reliability_args,
                    format,
                    now,
                    cfg.lemon.window_days,
                )?;
                emit(args.reliability_args.output.as_deref(), &out)?;
                return Ok(EXIT_OK);
            }
            let rep = Report::new(
                &scores,
                cfg.lemon.window_days,
                args.top,
                now,
                db::history_until(&conn)?,
                report::decisions(&conn, REPORT_DECISIONS)?,
            );
            emit(
                args.reliability_args.output.as_deref(),
                &rep.render(args.format),
            )?;
            Ok(EXIT_OK)
        }
        Command::Ettr(args) => {
            let (rate, source) = match args.failure_rate {
                Some(r) => (r, "given".to_string()),
                None => {
                    if !db_path.exists() {
                        return Err(LemonError::Usage(format!(
                            "{} does not exist: pass --failure-rate (RSC-1: 6.5)",
                            db_path.display()
                        )));
                    }
                    let conn = db::open(&db_path, busy)?;
                    let days = cfg.lemon.window_days;
                    match reliability::cli::history_rate(&conn, now, days)? {
                        Some(r) => (r, format!("lemon.db, jobs > 128 GPUs, last {days} days")),
                        None => {
                            return Err(LemonError::Usage(format!(
                                "no jobs > 128 GPUs in lemon.db's last {days} days: pass --failure-rate (RSC-1: 6.5)"
                            )))
                        }
                    }
                }
            };
            print!("{}", reliability::cli::ettr_answer(&args, rate, &source)?);
            Ok(EXIT_OK)
        }
        Command::Release(args) => {
            let conn = db::open(&db_path, busy)?;
            act::release(&conn, &args.node, &args.note, now)?;
            println!(
                "{}: released; its history before now no longer counts. lemon does not resume nodes: \
                 when it is repaired, run {}",
                args.node,
                slurm.display(
                    "scontrol",
                    &["update", &format!("NodeName={}", args.node), "State=RESUME"]
                )
            );
            Ok(EXIT_OK)
        }
        Command::Ticket(t) => {
            let mut conn = db::open(&db_path, busy)?;
            match t {
                TicketCommand::Open { node, note } => {
                    ingest::tickets::open(&conn, &node, &note, now)?;
                    println!("{node}: ticket opened");
                }
                TicketCommand::Close { node, note } => {
                    let n = ingest::tickets::close(&conn, &node, &note, now)?;
                    if n == 0 {
                        return Err(LemonError::Usage(format!(
                            "{node} has no open ticket (see `lemon report`)"
                        )));
                    }
                    println!("{node}: {n} ticket(s) closed");
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
    }
}

fn ingest_ctx<'a>(cfg: &Config, slurm: &'a SlurmCommands, now: i64) -> IngestContext<'a> {
    IngestContext {
        slurm,
        now,
        window_days: cfg.lemon.window_days,
        sacct_window_hours: cfg.lemon.sacct_window_hours,
        time_zone: cfg.lemon.time_zone.clone(),
    }
}

/// Computes the signals and applies the rules.
pub fn score(conn: &Connection, cfg: &Config, now: i64) -> Result<Scores> {
    let params = SignalParams {
        window_days: cfg.lemon.window_days,
        user_error_exit_codes: cfg.lemon.user_error_exit_codes.clone(),
        early_fail_s: cfg.lemon.early_fail_s,
    };
    let fleet = signals::compute(conn, &params, now)?;
    Ok(decide::decide(fleet, &cfg.lemon))
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
