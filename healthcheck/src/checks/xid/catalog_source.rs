//! The generated table checked against NVIDIA's saved catalog.
//!
//! `catalog_table.rs` is made by a script from `nvidia/catalog.tsv`; these
//! tests read the TSV itself, so a table edited by hand, a catalog updated
//! without rerunning the script, or a mapping changed in one place only fails
//! here rather than on a node.

use super::catalog::{self, Entry};
use super::catalog_table::{EDITION, ENTRIES};
use lemonade_config::{Action, Severity, XidSettings};

const SAVED: &str = include_str!("nvidia/catalog.tsv");

/// XIDs whose action departs from what NVIDIA's immediate action maps to;
/// each is explained in its entry's `judged`.
const DEPARTS_FROM_NVIDIA: &[u32] = &[61, 63, 121];

/// One row of the saved catalog.
struct Row {
    xid: u32,
    mnemonic: String,
    immediate_action: String,
}

fn saved_rows() -> Vec<Row> {
    let mut lines = SAVED.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().expect("a header").split('\t').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (xid, mnemonic, action) = (
        column("xid"),
        column("mnemonic"),
        column("immediate_action"),
    );
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            Row {
                xid: cells[xid].parse().expect("a number"),
                mnemonic: cells[mnemonic].to_string(),
                immediate_action: cells[action].to_string(),
            }
        })
        .collect()
}

fn saved_edition() -> &'static str {
    SAVED
        .lines()
        .find_map(|l| l.strip_prefix("# edition:"))
        .expect("an edition line")
        .trim()
}

/// The mapping the issue asks for, written out independently of the script.
fn nvidia_says(action: &str) -> Option<(Severity, Action)> {
    Some(match action {
        "RESTART_APP" => (Severity::Warning, Action::RestartApp),
        "RESET_GPU" => (Severity::Drain, Action::ResetGpu),
        "RESTART_BM" => (Severity::Down, Action::Reboot),
        "RESTART_VM" => (Severity::Drain, Action::Reboot),
        "CONTACT_SUPPORT" | "CHECK_UVM" | "UPDATE_SWFW" | "" => {
            (Severity::Warning, Action::Investigate)
        }
        "CHECK_MECHANICALS" => (Severity::Drain, Action::Repair),
        "IGNORE" => (Severity::Ok, Action::None),
        _ => return None,
    })
}

fn table_entry(xid: u32) -> &'static Entry {
    catalog::entry(xid).unwrap_or_else(|| panic!("XID {xid} of NVIDIA's catalog has no rule"))
}

#[test]
fn every_xid_of_nvidias_catalog_has_a_rule_and_nothing_else_does() {
    let saved: Vec<u32> = saved_rows().iter().map(|r| r.xid).collect();
    for xid in &saved {
        table_entry(*xid);
    }
    let table: Vec<u32> = ENTRIES.iter().map(|e| e.xid).collect();
    let extra: Vec<u32> = table
        .iter()
        .filter(|x| !saved.contains(x))
        .copied()
        .collect();
    assert!(
        extra.is_empty(),
        "XIDs in the table but not in NVIDIA's catalog: {extra:?}"
    );
    assert!(table.windows(2).all(|w| w[0] < w[1]), "the table is sorted");
}

#[test]
fn the_table_was_made_from_this_edition_of_the_catalog() {
    assert_eq!(EDITION, saved_edition());
    for row in saved_rows() {
        let e = table_entry(row.xid);
        assert_eq!(e.mnemonic, row.mnemonic, "XID {}", row.xid);
        assert_eq!(e.nvidia_action, row.immediate_action, "XID {}", row.xid);
    }
}

#[test]
fn nvidias_immediate_action_decides_unless_we_judged_the_xid_and_say_why() {
    for row in saved_rows() {
        let e = table_entry(row.xid);
        let mapped = nvidia_says(&row.immediate_action);
        match (e.judged, mapped) {
            (None, Some(m)) => assert_eq!((e.severity, e.action), m, "XID {}", row.xid),
            (None, None) => panic!(
                "XID {}: NVIDIA's {:?} has no mapping and nobody judged it",
                row.xid, row.immediate_action
            ),
            (Some(why), Some((_, action))) if !DEPARTS_FROM_NVIDIA.contains(&row.xid) => {
                assert!(!why.is_empty());
                assert_eq!(e.action, action, "XID {}: {why}", row.xid);
            }
            (Some(why), _) => assert!(!why.is_empty(), "XID {}", row.xid),
        }
    }
}

#[test]
fn the_rule_for_each_catalog_xid_comes_from_the_table() {
    let s = XidSettings::default();
    for e in ENTRIES.iter().filter(|e| e.xid != catalog::RECOVERY_XID) {
        let rule = catalog::rule(e.xid, None, &s);
        assert_eq!((rule.severity, rule.action), (e.severity, e.action));
        assert_eq!(rule.description, e.description);
    }
}

#[test]
fn the_edition_line_names_nvidia_and_counts_the_entries() {
    let line = catalog::edition();
    assert!(line.starts_with("XID catalog: NVIDIA"), "{line}");
    assert!(
        line.ends_with(&format!("{} entries", saved_rows().len())),
        "{line}"
    );
}
