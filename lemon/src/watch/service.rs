//! `lemon watch --live`: the service loop. Every `[watch.service] poll_s`
//! it lists the running jobs, polls their samples, and acts on the calls.
//! When Slurm or the source cannot be read, the poll is logged and skipped:
//! nothing is ever decided on part of the picture or an old one.
//! With the embedded source, each poll first ingests the spool exports
//! ([`super::feed`]), so the service alone keeps its samples fresh.

use super::embedded::EmbeddedSource;
use super::feed::{self, SpoolFeed};
use super::live::Watcher;
use super::prometheus::PrometheusSource;
use super::respond::{self, RespondParams};
use super::SampleSource;
use crate::error::{LemonError, Result};
use lemonade_config::{Config, WatchSourceKind};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::squeue;
use lemonade_sql::rusqlite::Connection;
use std::time::Duration;

/// What the service needs from lemon's command line.
pub struct ServiceParams<'a> {
    pub cfg: &'a Config,
    pub slurm: &'a SlurmCommands,
    pub dry_run: bool,
    pub once: bool,
    /// Ingested before each poll when the source is the embedded one
    /// (a dry run too: it changes no Slurm state, as `lemon run --dry-run`
    /// ingests); `None` when no spool directory is configured.
    pub spool: Option<SpoolFeed<'a>>,
}

/// How a poll ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollEnd {
    /// Nothing new was called.
    Quiet,
    /// At least one node was drained, or would be in a dry run.
    Acted,
    /// Slurm or the source could not be read: skipped.
    Skipped,
}

/// The configured source.
pub fn source_of<'a>(cfg: &Config, conn: &'a Connection) -> Result<Box<dyn SampleSource + 'a>> {
    let w = &cfg.watch;
    match w.source {
        WatchSourceKind::Embedded => Ok(Box::new(EmbeddedSource::new(
            conn,
            w.service.embedded_wait_s,
        ))),
        WatchSourceKind::Prometheus => {
            let url = w.prometheus_url.as_deref().ok_or_else(|| {
                LemonError::Usage(
                    "config: [watch] source = \"prometheus\" needs prometheus_url".into(),
                )
            })?;
            let source = PrometheusSource::new(url, &w.prometheus, w.interval_s)
                .map_err(|e| LemonError::Usage(format!("config: {e}")))?;
            Ok(Box::new(source))
        }
    }
}

/// Runs polls until killed (or one, with `once`); the last poll's end.
pub fn run(conn: &Connection, p: &ServiceParams<'_>) -> Result<PollEnd> {
    let source = source_of(p.cfg, conn)?;
    let mut watcher = Watcher::new(p.cfg.watch.clone());
    let period = Duration::from_secs(p.cfg.watch.service.poll_s.max(1));
    let spool = spool_feed(p);
    loop {
        let started = std::time::Instant::now();
        if let Some(spool) = spool {
            let now = chrono::Utc::now().timestamp();
            feed::log(&spool.feed(p.cfg, p.slurm, now));
        }
        let end = poll(conn, &mut watcher, source.as_ref(), p);
        if p.once {
            return end;
        }
        if let Err(e) = end {
            // A database that cannot be written is logged like an
            // unreachable Slurm: the service keeps trying.
            eprintln!("lemon watch: poll failed: {e}");
        }
        std::thread::sleep(period.saturating_sub(started.elapsed()));
    }
}

/// The feed each poll runs first: the embedded source's alone.
fn spool_feed<'p>(p: &'p ServiceParams<'_>) -> Option<&'p SpoolFeed<'p>> {
    match (p.cfg.watch.source, &p.spool) {
        (WatchSourceKind::Prometheus, _) => None,
        (WatchSourceKind::Embedded, Some(feed)) => Some(feed),
        (WatchSourceKind::Embedded, None) => {
            eprintln!(
                "lemon watch: no spool directory configured ([lemon] spool_dir, [spool] dir): \
                 samples are as fresh as the last `lemon ingest`"
            );
            None
        }
    }
}

/// One poll: squeue, samples, detector, actions.
pub fn poll(
    conn: &Connection,
    watcher: &mut Watcher,
    source: &dyn SampleSource,
    p: &ServiceParams<'_>,
) -> Result<PollEnd> {
    let now = chrono::Utc::now().timestamp();
    let running = match squeue::running_jobs(p.slurm) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lemon watch: squeue failed, poll skipped: {e}");
            return Ok(PollEnd::Skipped);
        }
    };
    for (line, text) in &running.unparsed {
        eprintln!("lemon watch: squeue line {line} not understood, job not watched: {text}");
    }
    let outcome = match watcher.poll(&running.jobs, source, now) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lemon watch: {e}; poll skipped");
            return Ok(PollEnd::Skipped);
        }
    };
    eprintln!(
        "lemon watch: {} jobs, {} samples, {} calls",
        outcome.jobs,
        outcome.samples,
        outcome.called.len()
    );
    let params = RespondParams {
        slurm: p.slurm,
        lemon: &p.cfg.lemon,
        hooks: &p.cfg.hooks,
        dry_run: p.dry_run,
        requeue: p.cfg.watch.service.requeue,
        drain: p.cfg.watch.service.drain,
        max_sample_age_s: p.cfg.watch.service.max_sample_age_s,
        now,
    };
    let responses = match respond::respond(conn, &outcome.called, &params) {
        Ok(r) => r,
        Err(LemonError::Slurm { what, source }) => {
            eprintln!("lemon watch: {what} failed, nothing drained this poll: {source}");
            watcher.keep_pending(outcome.called);
            return Ok(PollEnd::Skipped);
        }
        Err(e) => return Err(e),
    };
    for r in &responses {
        println!("{}", r.line());
    }
    let acted = responses.iter().any(|r| {
        matches!(
            r.action,
            crate::act::Action::Drained | crate::act::Action::WouldDrain
        )
    });
    Ok(if acted {
        PollEnd::Acted
    } else {
        PollEnd::Quiet
    })
}
