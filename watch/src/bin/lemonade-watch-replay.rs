//! `lemonade-watch-replay FILE [--format json|text] [--config PATH]`: what
//! `lemon watch --replay FILE` does (the same library calls), for testing
//! the library without lemon.
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
    std::io::stdout()
        .lock()
        .write_all(outcome.render(json).as_bytes())?;
    eprintln!("{}", outcome.summary());
    Ok(())
}
