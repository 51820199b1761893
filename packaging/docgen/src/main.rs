//! `lemonade-docgen OUT_DIR`: writes `OUT_DIR/man/<bin>.1` (and one page per
//! subcommand) and `OUT_DIR/completions/{bash,zsh,fish}/...` for every binary,
//! `OUT_DIR/man/lemonade.toml.5`, and the book's generated chapter,
//! `OUT_DIR/book/reference/config.md` (committed as
//! `docs/src/reference/config.md`; a test keeps the two equal).

mod config_reference;

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
    let keys = config_keys()?;
    std::fs::write(
        out.join("man/lemonade.toml.5"),
        config_reference::man_page(&keys),
    )?;
    let book = out.join("book/reference");
    std::fs::create_dir_all(&book)?;
    std::fs::write(book.join("config.md"), config_reference::markdown(&keys))?;
    Ok(())
}

/// The example config the packages install: the keys' meanings.
const EXAMPLE_CONFIG: &str = include_str!("../../lemonade.toml");

/// Every key of the schema with its default and meaning.
fn config_keys() -> Result<Vec<config_reference::Key>> {
    let defaults = toml::Value::try_from(lemonade_config::Config::default())?;
    config_reference::keys(&defaults, EXAMPLE_CONFIG).map_err(|missing| {
        anyhow::anyhow!(
            "packaging/lemonade.toml gives no meaning (a comment above the key) for: {}",
            missing.join(", ")
        )
    })
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

#[cfg(test)]
mod book_tests {
    use super::*;

    #[test]
    fn every_config_key_has_a_meaning_in_the_example_config() {
        let keys = config_keys().unwrap_or_else(|e| panic!("{e}"));
        assert!(keys.len() > 80, "only {} keys", keys.len());
    }

    #[test]
    fn the_books_config_reference_is_what_the_schema_generates() {
        let committed = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/src/reference/config.md"
        ))
        .unwrap_or_default();
        let generated = config_reference::markdown(&config_keys().unwrap());
        assert!(
            committed == generated,
            "docs/src/reference/config.md is out of date: run `cargo run -p lemonade-docgen -- target/docgen` and copy target/docgen/book/reference/config.md there"
        );
    }
}
