//! `packaging/lemonade.toml`, the example config the packages install, must
//! load, and must show every key the schema has (so that it documents them all).

use lemonade_config::{load, Config, GpuCount};
use std::path::PathBuf;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packaging/lemonade.toml")
}

#[test]
fn the_example_loads_for_gpu_and_cpu_nodes() {
    let gpu = load(&example(), Some("gpu001")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gpu.checks.gpu.expected_count, GpuCount::Exactly(8));
    assert_eq!(gpu.checks.pcie.expect.len(), 2);
    let cpu = load(&example(), Some("cpu001")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpu.checks.gpu.expected_count, GpuCount::Exactly(0));
    assert!(cpu.checks.pcie.expect.is_empty());
}

/// Every `section.key` of the default config, as TOML writes it.
fn keys(value: &toml::Value, path: &str, out: &mut Vec<(String, String)>) {
    if let toml::Value::Table(table) = value {
        for (key, v) in table {
            match v {
                toml::Value::Table(t) if !t.is_empty() => keys(v, &join(path, key), out),
                _ => out.push((path.to_string(), key.clone())),
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[test]
fn the_example_shows_every_key_of_the_schema() {
    let text = std::fs::read_to_string(example()).unwrap();
    let defaults = toml::Value::try_from(Config::default()).unwrap();
    let mut all = Vec::new();
    keys(&defaults, "", &mut all);
    assert!(all.len() > 80, "only {} keys found", all.len());
    let mut missing = Vec::new();
    for (section, key) in all {
        let header = format!("[{section}]");
        // A key shows as `key = ...` (perhaps commented out), or, for an empty
        // table or array of tables, as its own header.
        let full = join(&section, &key);
        let shown = text.lines().any(|l| {
            let l = l.trim_start_matches('#').trim();
            l.starts_with(&format!("{key} ="))
                || l == format!("[{full}]")
                || l == format!("[[{full}]]")
        });
        let has_section = section.is_empty()
            || text.contains(&header)
            || text.contains(&format!("[[{section}]]"));
        if !shown || !has_section {
            missing.push(format!("{section}.{key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "packaging/lemonade.toml does not show: {missing:?}"
    );
}
