//! XIDs 144–150 (NVLink5, Blackwell): which NVLink unit reported, and how
//! bad NVIDIA says that sub-code is.
//!
//! The driver's line carries the words NVIDIA's decode sheet is keyed on:
//!
//! `NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 ...)`
//!
//! The first word in the parentheses is IntrInfo, matched against the sheet's
//! bit patterns (one for drivers before R575, one from R575; a line matches
//! one or the other), the second is the error status, one of the sheet's
//! values or a set of its single-bit flags. The table ([`super::nvlink5_table`])
//! is generated from `nvidia/nvlink5-decode.tsv` by `nvidia/make_catalog.py`.
//! A line that does not decode keeps the XID's catalog rule (down, reset):
//! an NVLink error we cannot place is not assumed harmless.

use super::nvlink5_table::ROWS;
use lemonade_config::{Action, Severity};
use serde::{Deserialize, Serialize};

/// The XIDs the sheet decodes.
pub const XIDS: std::ops::RangeInclusive<u32> = 144..=150;

/// At most this many words are read from the parentheses: the driver prints six.
const MAX_WORDS: usize = 8;

/// One row of NVIDIA's sheet with our severity and action for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeRow {
    pub xid: u32,
    /// NVIDIA's unit name (`SAW_MVB`, `NETIR_LINK_EVT/NETIR_LINK_DOWN`).
    pub unit: &'static str,
    /// IntrInfo bit pattern, bit 31 first, `-` for any: drivers before R575.
    pub intrinfo_v1: &'static str,
    /// The same from R575.
    pub intrinfo_v2: &'static str,
    pub error_status: u32,
    pub immediate_action: &'static str,
    pub investigatory_action: &'static str,
    /// NVIDIA's words: `Fatal`, `Non-fatal`, `Link Fatal`, ...
    pub nvidia_severity: &'static str,
    pub hw_sw: &'static str,
    pub severity: Severity,
    pub action: Action,
}

/// A decoded XID 144–150 line, kept with the XID's tally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nvlink5 {
    /// NVIDIA's unit; two when an old driver's IntrInfo cannot tell them apart.
    pub unit: String,
    /// The link number the driver printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    pub intr_info: u32,
    pub error_status: u32,
    /// IntrInfo bits 25..20: which event of the unit (`149.37` in NVIDIA's notation).
    pub sub_code: u32,
    /// The worst matching row's NVIDIA severity, HW/SW and actions.
    pub nvidia_severity: String,
    pub hw_sw: String,
    pub immediate_action: String,
    pub investigatory_action: String,
    pub severity: Severity,
    pub action: Action,
}

impl Nvlink5 {
    /// The finding's words for it.
    pub fn description(&self, xid: u32) -> String {
        let link = self
            .link
            .as_deref()
            .map(|l| format!(" link {l}"))
            .unwrap_or_default();
        format!(
            "NVLink5 {}{link}, XID {xid}.{} error status 0x{:08x}: NVIDIA {} ({}), immediate action {}, then {}",
            self.unit,
            self.sub_code,
            self.error_status,
            self.nvidia_severity,
            self.hw_sw,
            self.immediate_action,
            self.investigatory_action
        )
    }
}

/// Whether `word` fits a 32-character pattern of `0`, `1` and `-`.
pub fn fits(pattern: &str, word: u32) -> bool {
    pattern.len() == 32
        && pattern.bytes().enumerate().all(|(i, c)| {
            let bit = (word >> (31 - i)) & 1;
            match c {
                b'0' => bit == 0,
                b'1' => bit == 1,
                _ => true,
            }
        })
}

/// The link number and the hex words of a line's text (after `144, `).
fn words(text: &str) -> Option<(Option<String>, u32, u32)> {
    let open = text.rfind('(')?;
    let inside = text[open + 1..].split(')').next()?;
    let mut hex = inside.split_whitespace().take(MAX_WORDS).map(|w| {
        let digits = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X"))?;
        u32::from_str_radix(digits, 16).ok()
    });
    let intr_info = hex.next()??;
    let status = hex.next()??;
    let link = text[..open]
        .split_whitespace()
        .skip_while(|w| *w != "Link")
        .nth(1)
        .filter(|l| l.len() <= 4 && l.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
        .map(str::to_string);
    Some((link, intr_info, status))
}

/// The rows a status selects among one IntrInfo's rows: an exact value
/// first (the sheet lists values for NETIR), else each flag it sets.
fn by_status(rows: &[&'static DecodeRow], status: u32) -> Vec<&'static DecodeRow> {
    let exact: Vec<_> = rows
        .iter()
        .copied()
        .filter(|r| r.error_status == status)
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    rows.iter()
        .copied()
        .filter(|r| r.error_status.count_ones() == 1 && status & r.error_status != 0)
        .collect()
}

/// Decodes an XID 144–150 line's text; `None` for another XID or a line
/// whose words are missing or match no row of the sheet.
pub fn decode(xid: u32, text: &str) -> Option<Nvlink5> {
    if !XIDS.contains(&xid) {
        return None;
    }
    let (link, intr_info, error_status) = words(text)?;
    let units: Vec<&'static DecodeRow> = ROWS
        .iter()
        .filter(|r| {
            r.xid == xid && (fits(r.intrinfo_v1, intr_info) || fits(r.intrinfo_v2, intr_info))
        })
        .collect();
    let rows = by_status(&units, error_status);
    // The worst row decides; on a tie the sheet's first.
    let worst = rows.iter().copied().rev().max_by_key(|r| r.severity)?;
    let mut names: Vec<&str> = rows.iter().map(|r| r.unit).collect();
    names.dedup();
    Some(Nvlink5 {
        unit: names.join(" or "),
        link,
        intr_info,
        error_status,
        sub_code: (intr_info >> 20) & 0x3f,
        nvidia_severity: worst.nvidia_severity.to_string(),
        hw_sw: worst.hw_sw.to_string(),
        immediate_action: worst.immediate_action.to_string(),
        investigatory_action: worst.investigatory_action.to_string(),
        severity: worst.severity,
        action: worst.action,
    })
}

/// The worse of two readings of one XID's tally: a later harmless sub-code
/// must not hide an earlier fatal one.
pub fn worse(old: Option<Nvlink5>, new: Option<Nvlink5>) -> Option<Nvlink5> {
    match (old, new) {
        (Some(o), Some(n)) if o.severity > n.severity => Some(o),
        (o, None) => o,
        (_, n) => n,
    }
}

#[cfg(test)]
mod tests {
    use super::super::nvlink5_table::EDITION;
    use super::*;

    const SAVED: &str = include_str!("nvidia/nvlink5-decode.tsv");
    const LINES: &str = include_str!("nvidia/nvlink5-lines.tsv");

    /// NVIDIA's action mapped to ours, written out apart from the script.
    fn nvidia_says(immediate: &str, investigatory: &str) -> (Severity, Action) {
        match (immediate, investigatory) {
            ("RESET_GPU", _) => (Severity::Down, Action::ResetGpu),
            ("XID_154_EVAL", _) => (Severity::Warning, Action::Investigate),
            ("IGNORE", "IGNORE") => (Severity::Ok, Action::None),
            ("IGNORE", _) => (Severity::Warning, Action::Investigate),
            other => panic!("no mapping for {other:?}"),
        }
    }

    #[test]
    fn the_generated_table_is_nvidias_sheet_row_for_row() {
        let edition = SAVED.lines().find_map(|l| l.strip_prefix("# edition:"));
        assert_eq!(Some(EDITION), edition.map(str::trim));
        let rows: Vec<Vec<&str>> = SAVED
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .skip(1)
            .map(|l| l.split('\t').collect())
            .collect();
        assert_eq!(rows.len(), ROWS.len());
        for (cells, row) in rows.iter().zip(ROWS) {
            let status = u32::from_str_radix(cells[4].trim_start_matches("0x"), 16).unwrap();
            assert_eq!(
                (
                    cells[0].parse::<u32>().unwrap(),
                    cells[1],
                    cells[2],
                    cells[3],
                    status
                ),
                (
                    row.xid,
                    row.unit,
                    row.intrinfo_v1,
                    row.intrinfo_v2,
                    row.error_status
                )
            );
            assert_eq!(
                (cells[5], cells[6], cells[7], cells[8]),
                (
                    row.immediate_action,
                    row.investigatory_action,
                    row.nvidia_severity,
                    row.hw_sw
                )
            );
            assert_eq!(
                (row.severity, row.action),
                nvidia_says(cells[5], cells[6]),
                "{cells:?}"
            );
        }
        let xids: std::collections::BTreeSet<u32> = ROWS.iter().map(|r| r.xid).collect();
        assert_eq!(xids, XIDS.collect());
    }

    #[test]
    fn each_fixture_line_decodes_to_its_unit_and_severity() {
        let mut seen = std::collections::BTreeSet::new();
        for line in LINES
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let cells: Vec<&str> = line.split('\t').collect();
            let [message, unit, sub, nvidia, ours] = cells[..] else {
                panic!("fixture row `{line}`")
            };
            let x = match super::super::parse::parse(message) {
                super::super::parse::Nvrm::Xid(x) => x,
                other => panic!("{message}: {other:?}"),
            };
            let d = x
                .nvlink5
                .unwrap_or_else(|| panic!("{message} did not decode"));
            let severity: Severity = serde_json::from_value(ours.into()).unwrap();
            assert_eq!(
                (d.unit.as_str(), d.sub_code.to_string().as_str()),
                (unit, sub),
                "{message}"
            );
            assert_eq!(
                (d.nvidia_severity.as_str(), d.severity),
                (nvidia, severity),
                "{message}"
            );
            assert!(d.description(x.xid).contains(unit), "{message}");
            seen.insert(x.xid);
        }
        assert_eq!(seen, XIDS.collect(), "a fixture line for each XID");
    }

    #[test]
    fn patterns_fit_bit_31_first() {
        assert!(fits("------000000----------0000100001", 0x0000_0021));
        assert!(!fits("------000000----------0000100001", 0x0010_0021));
        assert!(fits("------100101----------0111000110", 0x0250_01c6));
        assert!(!fits("short", 0));
    }

    #[test]
    fn several_flags_take_the_worst_and_unknown_words_do_not_decode() {
        // SAW_MVB 0x2 is fatal, 0x4 is to be ignored: together, fatal.
        let d = decode(
            144,
            "SAW_MVB Fatal XC0 i0 Link 3 (0x00000001 0x00000006 0x0)",
        )
        .unwrap();
        assert_eq!((d.severity, d.link.as_deref()), (Severity::Down, Some("3")));
        let d = decode(
            144,
            "SAW_MVB Nonfatal XC0 i0 Link 3 (0x00000001 0x00000004)",
        )
        .unwrap();
        assert_eq!(d.severity, Severity::Ok);
        assert_eq!(
            decode(144, "SAW_MVB Nonfatal (0x00000001 0x40000000)"),
            None
        );
        assert_eq!(
            decode(144, "SAW_MVB Nonfatal (0x0000007f 0x00000002)"),
            None
        );
        assert_eq!(decode(144, "SAW_MVB Nonfatal without words"), None);
        assert_eq!(decode(144, "(0xzz 0x1)"), None);
        assert_eq!(decode(79, "(0x00000001 0x00000002)"), None);
    }

    #[test]
    fn a_later_milder_sub_code_does_not_hide_a_fatal_one() {
        let fatal = decode(144, "SAW_MVB Fatal (0x00000001 0x00000002)");
        let mild = decode(144, "SAW_MVB Nonfatal (0x00000001 0x00000008)");
        assert_eq!(worse(fatal.clone(), mild.clone()), fatal);
        assert_eq!(worse(mild.clone(), fatal.clone()), fatal);
        assert_eq!(worse(fatal.clone(), None), fatal);
    }
}
