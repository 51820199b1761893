//! `lemonade-docgen OUT_DIR`: writes `OUT_DIR/man/<bin>.1` (and one page per
//! subcommand) and `OUT_DIR/completions/{bash,zsh,fish}/...` for every binary,
//! `OUT_DIR/man/lemonade.toml.5`, `OUT_DIR/man/lemonade-checks.7`, and the
//! book's generated chapters, `OUT_DIR/book/reference/config.md` and
//! `OUT_DIR/book/reference/checks.md` (committed under
//! `docs/src/reference/`; tests keep each equal to what is generated).

mod checks_reference;
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
    let codes = finding_codes();
    std::fs::write(
        out.join("man/lemonade-checks.7"),
        checks_reference::man_page(&codes),
    )?;
    std::fs::write(book.join("checks.md"), checks_reference::markdown(&codes))?;
    Ok(())
}

/// Every finding code, from the health checks' own table.
fn finding_codes() -> Vec<&'static healthcheck::codes::CodeEntry> {
    healthcheck::codes::all().collect()
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

    /// `[section] key` and `[[section]] key` in a silence text, as written in backticks.
    fn named_keys(silence: &str) -> Vec<(String, String)> {
        silence
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|span| {
                let (section, rest) = span.trim_start_matches('[').split_once(']')?;
                let key = rest.trim_start_matches(']').split_whitespace().next()?;
                let plain = |s: &str| {
                    s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.".contains(c))
                };
                (plain(section) && plain(key) && !key.is_empty())
                    .then(|| (section.to_string(), key.to_string()))
            })
            .collect()
    }

    /// Whether the example config shows `key` (set or commented out) in
    /// `[section]` or `[[section]]`: keys unset by default (`Option`s) are
    /// not in the schema's defaults.
    fn example_shows(section: &str, key: &str) -> bool {
        let mut inside = false;
        for line in EXAMPLE_CONFIG.lines() {
            let line = line.trim_start_matches('#').trim();
            if line.starts_with('[') {
                inside = line.trim_matches(|c| c == '[' || c == ']') == section;
            } else if inside && line.split_once('=').is_some_and(|(k, _)| k.trim() == key) {
                return true;
            }
        }
        false
    }

    #[test]
    fn every_config_key_the_checks_reference_names_is_a_key_of_the_config() {
        let keys = config_keys().unwrap();
        let known = |section: &str, key: &str| {
            keys.iter().any(|k| k.section == section && k.name == key)
                || example_shows(section, key)
        };
        let mut named = 0;
        for entry in finding_codes() {
            for (section, key) in named_keys(entry.silence) {
                named += 1;
                assert!(
                    known(&section, &key),
                    "{}: `[{section}] {key}` is no key of the config",
                    entry.code.display()
                );
            }
        }
        assert!(named > 60, "only {named} keys named");
    }

    #[test]
    fn a_silence_text_names_its_keys_and_a_made_up_key_is_unknown() {
        assert_eq!(
            named_keys("`[checks.ecc] retired_pages_max`; `[[checks.pcie.expect]] count`; `enabled = false`"),
            [
                ("checks.ecc".to_string(), "retired_pages_max".to_string()),
                ("checks.pcie.expect".to_string(), "count".to_string()),
            ]
        );
        assert!(example_shows("checks.ecc", "retired_pages_max"));
        assert!(!example_shows("checks.ecc", "retired_pages_maximum"));
    }

    #[test]
    fn the_books_checks_reference_is_what_the_table_of_codes_generates() {
        let committed = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/src/reference/checks.md"
        ))
        .unwrap_or_default();
        let generated = checks_reference::markdown(&finding_codes());
        assert!(
            committed == generated,
            "docs/src/reference/checks.md is out of date: run `cargo run -p lemonade-docgen -- target/docgen` and copy target/docgen/book/reference/checks.md there"
        );
    }
}
