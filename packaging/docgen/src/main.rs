//! `lemonade-docgen OUT_DIR`: writes `OUT_DIR/man/<bin>.1` (and one page per
//! subcommand) and `OUT_DIR/completions/{bash,zsh,fish}/...` for every binary.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

fn main() -> Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: lemonade-docgen OUT_DIR")?,
    );
    for cmd in commands() {
        write_man(&cmd, &out.join("man"))?;
        write_completions(cmd, &out.join("completions"))?;
    }
    Ok(())
}

/// Every binary we ship, as clap sees it.
fn commands() -> Vec<clap::Command> {
    vec![
        healthcheck::cli::Cli::command(),
        lemon::cli::Cli::command().name("lemon"),
        prolog_epilog::job::Args::command().name("lemonade-prolog"),
        prolog_epilog::job::Args::command().name("lemonade-epilog"),
    ]
}

fn write_man(cmd: &clap::Command, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(cmd.clone(), dir)
        .with_context(|| format!("man pages for {}", cmd.get_name()))?;
    Ok(())
}

fn write_completions(mut cmd: clap::Command, dir: &Path) -> Result<()> {
    let name = cmd.get_name().to_string();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let shell_dir = dir.join(shell.to_string());
        std::fs::create_dir_all(&shell_dir)?;
        clap_complete::generate_to(shell, &mut cmd, &name, &shell_dir)
            .with_context(|| format!("{shell} completions for {name}"))?;
    }
    Ok(())
}
