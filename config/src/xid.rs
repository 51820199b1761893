//! `[checks.xid]`: NVIDIA XID errors in the kernel log.

use crate::{Action, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `[checks.xid]`: NVIDIA XID errors in the kernel log.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct XidSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// Kernel log to read. An absolute path is a node path, read under
    /// `--root` (`/dev/kmsg`, or a file in kmsg record format); a relative
    /// path is a file of the machine running the check (replay of a capture).
    pub kmsg_file: PathBuf,
    /// How long an XID of each severity keeps the check at that severity, in
    /// seconds. `down` XIDs stay until reboot whatever this says.
    pub window_s: WindowsBySeverity,
    /// XIDs that escalate when they repeat on one GPU (13 and 31: an
    /// application fault once, a hardware fault when it keeps coming back).
    pub repeat_xids: Vec<u32>,
    /// `repeat_xids` seen this many times on one GPU inside `repeat_window_s` escalate.
    pub repeat_count: u32,
    pub repeat_window_s: u64,
    /// Severity of a repeated XID; it then lasts as long as this severity's window.
    pub repeat_severity: Severity,
    /// Site rules: `[[checks.xid.rule]] codes = [31, 43], count = 3, window = "1h",
    /// severity = "drain"`. XIDs of `codes` seen `count` times on one GPU inside
    /// `window` take `severity` for its window; the strongest rule that holds wins.
    pub rule: Vec<XidCountRule>,
    /// Overrides of the built-in catalog, keyed by XID number: `[checks.xid.catalog."79"]`.
    #[serde(deserialize_with = "catalog_by_number")]
    pub catalog: BTreeMap<u32, XidRule>,
    /// Host hardware errors matched in the same kernel-log pass.
    pub kernel_log: crate::KernelLogSettings,
    /// Kernel and fabric faults matched in the same pass.
    pub kernel_faults: crate::KernelFaultSettings,
}

impl Default for XidSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            kmsg_file: PathBuf::from("/dev/kmsg"),
            window_s: WindowsBySeverity::default(),
            repeat_xids: vec![13, 31],
            repeat_count: 3,
            repeat_window_s: 3600,
            repeat_severity: Severity::Drain,
            rule: Vec::new(),
            catalog: BTreeMap::new(),
            kernel_log: crate::KernelLogSettings::default(),
            kernel_faults: crate::KernelFaultSettings::default(),
        }
    }
}

/// Per-severity windows, in seconds.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WindowsBySeverity {
    pub warning: u64,
    pub drain: u64,
}

impl Default for WindowsBySeverity {
    fn default() -> Self {
        Self {
            warning: 3600,
            drain: 7 * 86400,
        }
    }
}

/// One `[[checks.xid.rule]]`: a count of XIDs in a time window.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct XidCountRule {
    pub codes: Vec<u32>,
    pub count: u32,
    /// Seconds; written `"90s"`, `"10m"`, `"1h"`, `"7d"` or a number of seconds.
    #[serde(deserialize_with = "window_seconds")]
    pub window: u64,
    pub severity: Severity,
    #[serde(default = "default_action")]
    pub action: Action,
}

/// `"1h"` → 3600; a bare number is seconds.
pub fn parse_window(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "" | "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    number.checked_mul(scale)
}

fn window_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Window {
        Seconds(u64),
        Text(String),
    }
    match Window::deserialize(d)? {
        Window::Seconds(s) => Ok(s),
        Window::Text(t) => parse_window(&t).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "window `{t}` is not a duration such as \"90s\", \"10m\", \"1h\" or \"7d\""
            ))
        }),
    }
}

/// One catalog entry: what an XID means for the node. `ok` records the XID
/// without changing the node's status.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct XidRule {
    pub severity: Severity,
    #[serde(default = "default_action")]
    pub action: Action,
    #[serde(default)]
    pub description: Option<String>,
}

fn default_action() -> Action {
    Action::Investigate
}

/// A catalog key. TOML keys are strings, and `[[node]]` blocks reach serde
/// through a `toml::Value` that keeps them as strings, so a plain `u32` key
/// would only work in the base file.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct XidKey(u32);

impl<'de> Deserialize<'de> for XidKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = XidKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an XID number such as \"79\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<XidKey, E> {
                u32::try_from(v)
                    .map(XidKey)
                    .map_err(|_| E::custom(format!("XID number {v} is out of range")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<XidKey, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("XID number {v} is out of range")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<XidKey, E> {
                v.trim().parse().map(XidKey).map_err(|_| {
                    E::custom(format!(
                        "catalog key `{v}` is not an XID number (write [checks.xid.catalog.\"79\"])"
                    ))
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

pub(crate) fn catalog_by_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<u32, XidRule>, D::Error> {
    let by_key: BTreeMap<XidKey, XidRule> = BTreeMap::deserialize(d)?;
    Ok(by_key.into_iter().map(|(k, v)| (k.0, v)).collect())
}

#[cfg(test)]
mod tests {
    use crate::{load_str, Action, Severity};
    use std::path::Path;

    #[test]
    fn catalog_overrides_are_keyed_by_xid_number() {
        let config = load_str(
            "[checks.xid.catalog.\"79\"]\nseverity = \"drain\"\naction = \"reboot\"\n\
             [checks.xid.catalog.13]\nseverity = \"ok\"\n",
            Path::new("lemonade.toml"),
            None,
        )
        .unwrap();
        let rule = &config.checks.xid.catalog[&79];
        assert_eq!(rule.severity, Severity::Drain);
        assert_eq!(rule.action, Action::Reboot);
        assert_eq!(config.checks.xid.catalog[&13].action, Action::Investigate);
    }

    #[test]
    fn catalog_overrides_work_in_node_blocks() {
        let config = load_str(
            "[[node]]\nhosts = \"gpu[001-004]\"\ncatalog = {}\n",
            Path::new("lemonade.toml"),
            Some("gpu002"),
        );
        assert!(config.is_err(), "unknown keys in blocks are still caught");
        let config = load_str(
            "[[node]]\nhosts = \"gpu[001-004]\"\nchecks.xid.catalog.\"31\" = { severity = \"down\" }\n",
            Path::new("lemonade.toml"),
            Some("gpu002"),
        )
        .unwrap();
        assert_eq!(config.checks.xid.catalog[&31].severity, Severity::Down);
    }

    #[test]
    fn count_rules_read_their_window_as_a_duration() {
        let config = load_str(
            "[[checks.xid.rule]]\ncodes = [31, 43]\ncount = 3\nwindow = \"1h\"\nseverity = \"drain\"\n\
             [[checks.xid.rule]]\ncodes = [13]\ncount = 2\nwindow = 600\nseverity = \"warning\"\n",
            Path::new("lemonade.toml"),
            None,
        )
        .unwrap();
        let rules = &config.checks.xid.rule;
        assert_eq!(rules.len(), 2);
        assert_eq!(
            (rules[0].codes.as_slice(), rules[0].count, rules[0].window),
            (&[31, 43][..], 3, 3600)
        );
        assert_eq!(rules[0].severity, Severity::Drain);
        assert_eq!(rules[1].window, 600);
        assert!(config
            .checks
            .xid
            .rule
            .iter()
            .all(|r| r.action == Action::Investigate));
        let e = load_str(
            "[[checks.xid.rule]]\ncodes = [31]\ncount = 3\nwindow = \"an hour\"\nseverity = \"drain\"\n",
            Path::new("lemonade.toml"),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("an hour"), "{e}");
        assert!(
            crate::Config::default().checks.xid.rule.is_empty(),
            "no rule by default"
        );
    }

    #[test]
    fn a_catalog_key_that_is_not_a_number_names_the_line() {
        let e = load_str(
            "[checks.xid]\nenabled = true\n\n[checks.xid.catalog.fell-off]\nseverity = \"down\"\n",
            Path::new("lemonade.toml"),
            None,
        )
        .unwrap_err();
        assert!(e.line.is_some(), "{e}");
        assert!(e.to_string().contains("lemonade.toml"), "{e}");
    }
}
