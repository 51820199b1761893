//! `lemon`: the head node's cron job. Everything lives in the library; this
//! file only maps errors to exit code 2.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = lemon::cli::Cli::parse();
    match lemon::app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let e = anyhow::Error::from(e);
            eprintln!("lemon: error: {e:#}");
            ExitCode::from(lemon::app::EXIT_ERROR)
        }
    }
}
