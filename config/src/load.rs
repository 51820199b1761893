//! Reading `lemonade.toml`: syntax, types, unknown keys, and `[[node]]` overrides.

use crate::Config;
use lemonade_slurm::hostlist;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where the config lives unless `--config` or [`ENV_VAR`] says otherwise.
pub const DEFAULT_PATH: &str = "/etc/lemonade/lemonade.toml";
/// Environment variable naming the config file.
pub const ENV_VAR: &str = "LEMONADE_CONFIG";

/// A config that cannot be used, located as precisely as we can.
#[derive(Debug, Error, Clone, PartialEq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line of the offending key or block, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file.display(), line, self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// The file as written: the base sections plus the `[[node]]` blocks.
#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    node: Vec<toml::Spanned<toml::Table>>,
    #[serde(default)]
    rack: Vec<toml::Spanned<toml::Table>>,
}

/// Loads the config for `node` (a Slurm node name) from `path`.
///
/// A missing file at [`DEFAULT_PATH`] gives the defaults: a node without a
/// config still runs the checks that need none. Any other missing file is an error.
pub fn load(path: &Path, node: Option<&str>) -> Result<Config, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(&text, path, node),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == Path::new(DEFAULT_PATH) => {
            Ok(Config::default())
        }
        Err(e) => Err(ConfigError {
            file: path.to_path_buf(),
            line: None,
            message: format!("cannot read: {e}"),
        }),
    }
}

/// Parses config text; `origin` names the file in errors.
pub fn load_str(text: &str, origin: &Path, node: Option<&str>) -> Result<Config, ConfigError> {
    let error_at = |span: Option<std::ops::Range<usize>>, message: String| ConfigError {
        file: origin.to_path_buf(),
        line: span.map(|s| line_of(text, s.start)),
        message,
    };

    // Types and unknown keys of the base sections, with the line of the culprit.
    let mut base: Config =
        toml::from_str(text).map_err(|e| error_at(e.span(), e.message().to_string()))?;
    base.node.clear();
    let raw: RawFile =
        toml::from_str(text).map_err(|e| error_at(e.span(), e.message().to_string()))?;
    let mut base_table: toml::Table =
        toml::from_str(text).map_err(|e| error_at(e.span(), e.message().to_string()))?;
    base_table.remove("node");
    check_racks(&base.rack, &raw.rack, &error_at)?;
    if raw.node.is_empty() {
        return Ok(base);
    }

    // Every override is checked, matching this node or not, so that a typo in
    // the block for other nodes is caught on the first node that reads the file.
    let mut merged = base_table.clone();
    for block in &raw.node {
        let span = block.span();
        let mut table = block.get_ref().clone();
        let hosts = match table.remove("hosts") {
            Some(toml::Value::String(h)) => h,
            Some(_) => {
                return Err(error_at(
                    Some(span),
                    "[[node]]: `hosts` must be a hostlist string".into(),
                ))
            }
            None => {
                return Err(error_at(
                    Some(span),
                    "[[node]]: missing `hosts` (a hostlist such as \"gpu[001-128]\")".into(),
                ))
            }
        };
        let matches = match node {
            Some(name) => hostlist::contains(&hosts, name)
                .map_err(|e| error_at(Some(span.clone()), e.to_string()))?,
            None => {
                hostlist::expand(&hosts)
                    .map_err(|e| error_at(Some(span.clone()), e.to_string()))?;
                false
            }
        };
        let mut alone = base_table.clone();
        deep_merge(&mut alone, table.clone());
        Config::deserialize(toml::Value::Table(alone)).map_err(|e| {
            error_at(
                Some(span.clone()),
                format!("[[node]] hosts = \"{hosts}\": {}", e.message()),
            )
        })?;
        if matches {
            deep_merge(&mut merged, table);
        }
    }
    Config::deserialize(toml::Value::Table(merged))
        .map_err(|e| error_at(None, e.message().to_string()))
}

/// Every `[[rack]]` entry names its rack and nodes, and no node is in two.
fn check_racks(
    racks: &[crate::RackSettings],
    spans: &[toml::Spanned<toml::Table>],
    error_at: &dyn Fn(Option<std::ops::Range<usize>>, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let mut names = Vec::new();
    let mut placed = std::collections::BTreeMap::new();
    for (i, rack) in racks.iter().enumerate() {
        if let Some(problem) = crate::rack::rack_problem(rack, &placed, &names) {
            return Err(error_at(spans.get(i).map(|s| s.span()), problem));
        }
        for (node, name) in crate::rack_of_nodes(std::slice::from_ref(rack)) {
            placed.insert(node, name);
        }
        names.push(rack.name.clone());
    }
    Ok(())
}

/// Merges `over` into `base`: tables merge key by key, anything else replaces.
fn deep_merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuCount;

    fn parse(text: &str, node: Option<&str>) -> Result<Config, ConfigError> {
        load_str(text, Path::new("test.toml"), node)
    }

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(parse("", None).unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse("[store]\nretention_days = 5\nretension = 3\n", None).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.to_string().starts_with("test.toml:3:"), "{err}");
        assert!(err.message.contains("retension"), "{err}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let err = parse("[engine]\n\nrun_deadline_s = \"soon\"\n", None).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn confirm_runs_replace_the_defaults_and_an_impossible_one_names_its_line() {
        let defaults = parse("", None).unwrap().policy.confirm_runs;
        assert_eq!(defaults.len(), 2, "ib and nvlink by default");
        let own = parse("[policy.confirm_runs]\nib = { runs = 3, of = 5 }\n", None).unwrap();
        assert_eq!(own.policy.confirm_runs.len(), 1);
        assert_eq!(own.policy.confirm_runs["ib"].runs, 3);
        let off = parse("[policy.confirm_runs]\n", None).unwrap();
        assert!(off.policy.confirm_runs.is_empty());
        let err = parse(
            "[policy.confirm_runs]\n\nnvlink = { runs = 4, of = 3 }\n",
            None,
        )
        .unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("runs <= of"), "{err}");
    }

    #[test]
    fn a_reset_timeout_longer_than_a_run_may_last_names_its_line() {
        let ok = parse("[remediation]\nreset_timeout_s = 30\n", None).unwrap();
        assert_eq!(ok.remediation.reset_timeout_s, 30.0);
        let err = parse("[remediation]\n\nreset_timeout_s = 120\n", None).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("at most 40"), "{err}");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let err = parse("[store\npath = 1\n", None).unwrap_err();
        assert_eq!(err.line, Some(1), "{err}");
    }

    #[test]
    fn overrides_apply_by_hostlist_and_later_blocks_win() {
        let text = r#"
[checks.gpu]
expected_count = 8

[[node]]
hosts = "cpu[01-04]"
checks.gpu.expected_count = 0

[[node]]
hosts = "cpu04"
checks.gpu.expected_count = 2
"#;
        assert_eq!(
            parse(text, Some("gpu01"))
                .unwrap()
                .checks
                .gpu
                .expected_count,
            GpuCount::Exactly(8)
        );
        assert_eq!(
            parse(text, Some("cpu02"))
                .unwrap()
                .checks
                .gpu
                .expected_count,
            GpuCount::Exactly(0)
        );
        assert_eq!(
            parse(text, Some("cpu04"))
                .unwrap()
                .checks
                .gpu
                .expected_count,
            GpuCount::Exactly(2)
        );
        // Untouched keys of a section keep the base value.
        assert!(parse(text, Some("cpu02")).unwrap().checks.gpu.enabled);
    }

    #[test]
    fn the_gpu_count_is_auto_unless_a_number_is_given() {
        let count = |text: &str| parse(text, Some("n1")).map(|c| c.checks.gpu.expected_count);
        assert_eq!(count("").unwrap(), GpuCount::Auto);
        assert_eq!(
            count("[checks.gpu]\nexpected_count = \"auto\"\n").unwrap(),
            GpuCount::Auto
        );
        assert_eq!(
            count("[checks.gpu]\nexpected_count = 0\n").unwrap(),
            GpuCount::Exactly(0)
        );
        let err = count("[checks.gpu]\nexpected_count = \"eight\"\n").unwrap_err();
        assert!(err.message.contains("\"auto\""), "{err}");
        assert_eq!(err.line, Some(2), "{err}");
        assert!(count("[checks.gpu]\nexpected_count = -1\n").is_err());
    }

    #[test]
    fn bad_override_is_reported_even_for_other_nodes() {
        let text = "[[node]]\nhosts = \"gpu[1-2]\"\nchecks.gpu.expected_cnt = 1\n";
        let err = parse(text, Some("other")).unwrap_err();
        assert_eq!(err.line, Some(1), "{err}");
        assert!(err.message.contains("expected_cnt"), "{err}");
        let err = parse("[[node]]\nchecks.gpu.expected_count = 1\n", Some("x")).unwrap_err();
        assert!(err.message.contains("hosts"), "{err}");
        let err = parse("[[node]]\nhosts = \"gpu[1-\"\n", Some("x")).unwrap_err();
        assert!(err.message.contains("unbalanced"), "{err}");
    }

    #[test]
    fn racks_name_their_nodes_and_a_bad_one_names_its_line_and_key() {
        let text = "[[rack]]\nname = \"r01\"\nhosts = \"gb[001-018]\"\n\n[[rack]]\nname = \"r02\"\nhosts = \"gb[019-036]\"\n";
        let config = parse(text, Some("gb001")).unwrap();
        let racks = crate::rack_of_nodes(&config.rack);
        assert_eq!(racks.len(), 36);
        assert_eq!(racks["gb018"], "r01");
        assert_eq!(racks["gb019"], "r02");

        let overlap = "[[rack]]\nname = \"r01\"\nhosts = \"gb[001-018]\"\n\n[[rack]]\nname = \"r02\"\nhosts = \"gb[018-036]\"\n";
        let err = parse(overlap, None).unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.to_string().starts_with("test.toml:5:"), "{err}");
        assert!(err.message.contains("name = \"r02\""), "{err}");
        assert!(
            err.message.contains("gb018 is already in rack \"r01\""),
            "{err}"
        );

        let bad = parse("[[rack]]\nname = \"r01\"\nhosts = \"gb[001-\"\n", None).unwrap_err();
        assert!(bad.message.contains("`hosts`"), "{bad}");
        assert_eq!(bad.line, Some(1), "{bad}");
        let unnamed = parse("[[rack]]\nname = \"\"\nhosts = \"gb1\"\n", None).unwrap_err();
        assert!(unnamed.message.contains("`name`"), "{unnamed}");
        let twice =
            "[[rack]]\nname = \"r\"\nhosts = \"a\"\n[[rack]]\nname = \"r\"\nhosts = \"b\"\n";
        assert!(parse(twice, None)
            .unwrap_err()
            .message
            .contains("defined above"));
        let typo = parse("[[rack]]\nname = \"r\"\nhost = \"a\"\n", None).unwrap_err();
        assert!(typo.message.contains("host"), "{typo}");
    }

    #[test]
    fn missing_explicit_file_is_an_error_but_default_path_is_not() {
        let err = load(Path::new("/nonexistent/lemonade.toml"), None).unwrap_err();
        assert!(err.message.contains("cannot read"));
    }
}
