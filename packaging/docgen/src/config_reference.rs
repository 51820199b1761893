//! The configuration reference (the book's `reference/config.md` and the
//! `lemonade.toml(5)` man page) from the schema itself: every key and its
//! default come from `Config::default()` as TOML writes it, and each key's
//! meaning from the comment above it in `packaging/lemonade.toml`, the
//! example the packages install (whose own test checks it shows every key).
//! A key without a meaning is an error naming it, so neither can drift.

use std::collections::BTreeMap;

/// One key of the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The section (`checks.ecc`), empty for the top level.
    pub section: String,
    pub name: String,
    /// As TOML writes the default.
    pub default: String,
    pub meaning: String,
}

/// Every key of `defaults` with its meaning from `example`; Err lists the
/// keys the example gives no meaning for.
pub fn keys(defaults: &toml::Value, example: &str) -> Result<Vec<Key>, Vec<String>> {
    let meanings = meanings(example);
    let mut flat = Vec::new();
    flatten(defaults, "", &mut flat);
    let mut out = unset_keys(&meanings, &flat);
    let mut missing = Vec::new();
    for (section, name, default) in flat {
        match meaning_of(&meanings, &section, &name) {
            Some(m) => out.push(Key {
                section,
                name,
                default,
                meaning: m,
            }),
            _ => missing.push(join(&section, &name)),
        }
    }
    if missing.is_empty() {
        out.sort_by(|a, b| (&a.section, &a.name).cmp(&(&b.section, &b.name)));
        Ok(out)
    } else {
        Err(missing)
    }
}

/// A key's own comment; else, for a key in a table of its own (an IB
/// counter's limits), the comment above that table's header; else the one
/// meaning every check shares.
fn meaning_of(
    meanings: &BTreeMap<(String, String), String>,
    section: &str,
    name: &str,
) -> Option<String> {
    let said = |s: &str, n: &str| {
        meanings
            .get(&(s.to_string(), n.to_string()))
            .filter(|m| !m.is_empty())
            .cloned()
    };
    said(section, name)
        .or_else(|| {
            (name == "enabled" && section.starts_with("checks."))
                .then(|| "Whether the check runs; `false` silences it.".to_string())
        })
        .or_else(|| {
            let (parent, table) = section.rsplit_once('.')?;
            said(parent, table)
        })
        .or_else(|| {
            // A sibling table's comment (the IB counters' limits, the
            // debounce of each check): one comment covers them all.
            let (parent, _) = section.rsplit_once('.')?;
            let tables = format!("{TABLES}{parent}");
            meanings
                .iter()
                .find(|((s, _), m)| *s == tables && !m.is_empty())
                .map(|(_, m)| m.clone())
        })
}

/// Keys with no default (TOML has no "unset"), such as `prometheus_url`:
/// the example names them in a section the schema has, as a key and not
/// a table of their own. Shown as `(unset)`.
fn unset_keys(
    meanings: &BTreeMap<(String, String), String>,
    flat: &[(String, String, String)],
) -> Vec<Key> {
    let sections: std::collections::BTreeSet<&str> =
        flat.iter().map(|(s, _, _)| s.as_str()).collect();
    let has = |s: &str, n: &str| flat.iter().any(|(fs, fname, _)| fs == s && fname == n);
    meanings
        .iter()
        .filter(|((section, name), meaning)| {
            !meaning.is_empty()
                && !section.starts_with(TABLES)
                && sections.contains(section.as_str())
                && !sections.contains(join(section, name).as_str())
                && !has(section, name)
        })
        .map(|((section, name), meaning)| Key {
            section: section.clone(),
            name: name.clone(),
            default: "(unset)".into(),
            // Every check has one; the block above it describes the check.
            meaning: if name == "deadline_s" && section.starts_with("checks.") {
                "This check's deadline in seconds; unset: `[engine] check_deadline_s`.".into()
            } else {
                meaning.clone()
            },
        })
        .collect()
}

fn flatten(value: &toml::Value, path: &str, out: &mut Vec<(String, String, String)>) {
    let toml::Value::Table(table) = value else {
        return;
    };
    for (key, v) in table {
        match v {
            toml::Value::Table(t) if !t.is_empty() => flatten(v, &join(path, key), out),
            _ => out.push((path.to_string(), key.clone(), shown(v))),
        }
    }
}

fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) if t.is_empty() => "(none)".into(),
        toml::Value::Array(a) if a.is_empty() => "`[]`".into(),
        other => format!("`{other}`"),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// (section, key) → the prose of the comment block above the key's line
/// (commented out or not). A block covers the keys that follow it until a
/// blank line or the next block; a table's own header takes the block
/// above it as the meaning of that table's key in its parent.
fn meanings(example: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    let mut section = String::new();
    let mut prose: Vec<String> = Vec::new();
    let mut after_key = false;
    let mut table_to_describe: Option<(String, String)> = None;
    for raw in example.lines() {
        let line = raw.trim();
        let uncommented = line.trim_start_matches('#').trim();
        if line.is_empty() {
            prose.clear();
            after_key = false;
        } else if let Some(header) = table_header(line) {
            let (parent, name) = header.rsplit_once('.').unwrap_or(("", header.as_str()));
            let entry = (parent.to_string(), name.to_string());
            // A block that already described keys above the header is theirs.
            let above = if after_key {
                String::new()
            } else {
                prose.join(" ")
            };
            let said = out.entry(entry.clone()).or_insert_with(|| above.clone());
            // A table described inside itself ("# Overrides of ...").
            table_to_describe = said.is_empty().then_some(entry);
            out.insert((format!("{TABLES}{parent}"), name.to_string()), above);
            section = header.clone();
            prose.clear();
            after_key = false;
        } else if let Some(key) = key_of(uncommented) {
            table_to_describe = None;
            out.entry((section.clone(), key))
                .or_insert_with(|| prose.join(" "));
            after_key = true;
        } else if line.starts_with('#') {
            if after_key {
                prose.clear();
                after_key = false;
            }
            if !uncommented.starts_with("---") {
                prose.push(uncommented.to_string());
                if let Some(table) = &table_to_describe {
                    out.insert(table.clone(), prose.join(" "));
                }
            }
        }
    }
    out
}

/// Where [`meanings`] also files each table's own comment, by its parent.
const TABLES: &str = "tables of ";

/// `[a.b]` or `[[a.b]]` (perhaps commented out) → `a.b`.
fn table_header(line: &str) -> Option<String> {
    let l = line.trim_start_matches('#').trim();
    let inner = l
        .strip_prefix("[[")
        .and_then(|r| r.strip_suffix("]]"))
        .or_else(|| l.strip_prefix('[').and_then(|r| r.strip_suffix(']')))?;
    let ok = !inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '"'));
    ok.then(|| inner.replace('"', ""))
}

/// `key = value` → `key`.
fn key_of(line: &str) -> Option<String> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then(|| key.to_string())
}

/// The book's chapter.
pub fn markdown(keys: &[Key]) -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated by `lemonade-docgen` from the schema (`config/`: every key and its \
         default) and the comments of `packaging/lemonade.toml` (its meaning); do not \
         edit by hand. `/etc/lemonade/lemonade.toml` is one file with a section per \
         component; `[[node]]` blocks selected by Slurm hostlist override it per node. \
         The same text is the `lemonade.toml(5)` man page.\n",
    );
    let mut current = None;
    for k in keys {
        if current != Some(&k.section) {
            let title = if k.section.is_empty() {
                "top level"
            } else {
                &k.section
            };
            out += &format!("\n## `[{title}]`\n\n| key | default | meaning |\n|---|---|---|\n");
            current = Some(&k.section);
        }
        // The comments quote paths like /proc/<pid>/comm: not HTML.
        let meaning = k
            .meaning
            .replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let default = k.default.replace('|', "\\|");
        out += &format!("| `{}` | {default} | {meaning} |\n", k.name);
    }
    out
}

/// The man page, from the same keys.
pub fn man_page(keys: &[Key]) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('`', "").replace('-', "\\-");
    let mut out = String::from(
        ".TH LEMONADE.TOML 5 \"\" \"Lemonade\" \"File formats\"\n.SH NAME\nlemonade.toml \\- Lemonade's configuration\n\
         .SH DESCRIPTION\nOne file, /etc/lemonade/lemonade.toml, with a section per component; [[node]] blocks \
         selected by Slurm hostlist override it per node. Every key, its default and its meaning:\n",
    );
    let mut current = None;
    for k in keys {
        if current != Some(&k.section) {
            out += &format!(".SH [{}]\n", esc(&k.section));
            current = Some(&k.section);
        }
        out += &format!(
            ".TP\n.B {}\n(default {}) {}\n",
            esc(&k.name),
            esc(&k.default),
            esc(&k.meaning)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "[a]\n# Where it lives.\n# path = \"/x\"\n\n# Two deadlines,\n# in seconds.\n# one_s = 1\n# two_s = 2\n[a.b]\n# c = true\n";

    fn defaults() -> toml::Value {
        toml::from_str("[a]\npath = \"/x\"\none_s = 1\ntwo_s = 2\n[a.b]\nc = true\n").unwrap()
    }

    #[test]
    fn a_comment_block_gives_its_meaning_to_the_keys_below_it() {
        let keys = keys(&defaults(), EXAMPLE).unwrap_err();
        // [a.b] c has no comment above it.
        assert_eq!(keys, ["a.b.c"]);
        let with = EXAMPLE.replace("[a.b]\n", "[a.b]\n# Whether.\n");
        let keys = super::keys(&defaults(), &with).unwrap();
        let got: Vec<(String, String)> = keys
            .iter()
            .map(|k| (join(&k.section, &k.name), k.meaning.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "a.one_s".to_string(),
                    "Two deadlines, in seconds.".to_string()
                ),
                ("a.path".to_string(), "Where it lives.".to_string()),
                (
                    "a.two_s".to_string(),
                    "Two deadlines, in seconds.".to_string()
                ),
                ("a.b.c".to_string(), "Whether.".to_string()),
            ]
        );
        assert!(markdown(&keys).contains("| `path` | `\"/x\"` | Where it lives. |"));
        assert!(man_page(&keys).contains(".B path\n"));
    }

    #[test]
    fn a_key_with_no_default_that_the_example_names_is_listed_as_unset() {
        let with = EXAMPLE.replace(
            "[a.b]\n",
            "# Where the log goes.\n# log = \"/y\"\n[a.b]\n# Whether.\n",
        );
        let keys = super::keys(&defaults(), &with).unwrap();
        let log = keys.iter().find(|k| k.name == "log").expect("log listed");
        assert_eq!(
            (log.section.as_str(), log.default.as_str()),
            ("a", "(unset)")
        );
        assert_eq!(log.meaning, "Where the log goes.");
        // A table of its own is a section, not a key.
        assert!(!keys.iter().any(|k| k.section == "a" && k.name == "b"));
    }
}
