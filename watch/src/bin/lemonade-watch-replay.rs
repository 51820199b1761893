//! `lemonade-watch-replay FILE [--format json|text] [--config PATH]`: what
//! `lemon watch --replay FILE` does, for testing the library on its own.
//!
//! With `--format json`, stdout carries only the JSON array of detections
//! (`[]` when none). Nothing is printed before the whole file has been read,
//! so a bad row leaves stdout empty. Exit 0 when it ran, 1 on bad input.

use anyhow::{bail, Context, Result};
use lemonade_watch::{replay, Config};
use std::io::Write;

fn main() {
    if let Err(e) = run() {
        eprintln!("lemonade-watch-replay: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut file, mut json, mut config) = (None, false, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--format" => match args.next().as_deref() {
                Some("json") => json = true,
                Some("text") => json = false,
                other => bail!("--format takes json or text, not {other:?}"),
            },
            "--config" => config = Some(args.next().context("--config takes a path")?),
            _ if file.is_none() => file = Some(arg),
            _ => bail!("usage: lemonade-watch-replay FILE [--format json|text] [--config PATH]"),
        }
    }
    let file =
        file.context("usage: lemonade-watch-replay FILE [--format json|text] [--config PATH]")?;
    let settings = match config {
        Some(path) => {
            lemonade_config::load(path.as_ref(), None)
                .map_err(anyhow::Error::msg)?
                .watch
        }
        None => Config::default(),
    };
    let input = std::fs::File::open(&file).with_context(|| format!("cannot open {file}"))?;
    let outcome =
        replay(std::io::BufReader::new(input), &settings).with_context(|| file.clone())?;
    let text = if json {
        serde_json::to_string_pretty(&outcome.detections)? + "\n"
    } else {
        outcome
            .detections
            .iter()
            .map(|d| {
                format!(
                    "{} {} {} score {} ({})\n",
                    d.job,
                    d.node,
                    d.detected_at,
                    d.score,
                    d.metrics.join(",")
                )
            })
            .collect()
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    let c = outcome.counts;
    eprintln!(
        "{} rows, {} jobs, {} detections; skipped: {} NaN or infinite, {} first after an exporter gap",
        outcome.rows,
        c.jobs,
        outcome.detections.len(),
        c.non_finite,
        c.after_gap
    );
    Ok(())
}
