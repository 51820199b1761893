//! Golden-config drift (issue 34): per SKU, the nodes whose versions differ
//! from what most nodes of that SKU run.
//!
//! Pure: the input is each node's latest exported inventory
//! (`db::inventory::latest_inventory`), the output a [`DriftReport`] with
//! text and Markdown forms and flat [`rows`] for any other renderer.
//!
//! * **The SKU** is what the node says it is: `versions/sku` (the GPU model
//!   and count NVML lists, `8x NVIDIA H100 80GB HBM3`) where the node sends
//!   it, else the DMI board name and the number of GPUs whose VBIOS it
//!   exported (`board DGXH100, 8 GPUs`), else the board alone. A node that
//!   sent none of these is in the SKU [`UNKNOWN_SKU`]. The GPU model is what
//!   makes two nodes comparable: one board ships with H100s or H200s, whose
//!   VBIOS differ by design.
//! * **The versions** compared are the `firmware`, `gpu` (VBIOS) and
//!   `versions` items; `ecc` history is evidence, not a version, and the
//!   SKU's own items are the grouping key.
//! * **The reference** of a key is the value most nodes of the SKU report.
//!   A node without the key counts as a value of its own ("not reported"):
//!   one node without NCCL among nodes with it is drift, and so is the one
//!   node with it among nodes without. When two values share the top count
//!   there is no reference ([`Majority::Tie`]) and every node is listed:
//!   which one is odd is unknowable (as the firmware check does for HCAs).
//! * A SKU with one node has nothing to differ from and is left out.

use crate::document::{Paragraph, Section, Table};
use serde::Serialize;
use std::collections::BTreeMap;

/// The SKU of nodes that exported neither a SKU, a board name nor a VBIOS.
pub const UNKNOWN_SKU: &str = "unknown SKU";

/// The item that names a node's SKU outright (the `versions` check).
const SKU_ITEM: &str = "versions/sku";
/// The DMI board name (the `firmware` check), the SKU's fallback.
const BOARD_ITEM: &str = "firmware/board";

/// One node's inventory: `check/entity` to its latest value.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeVersions {
    pub node: String,
    pub sku: String,
    /// Only the items that are versions (see [`is_version`]).
    pub versions: BTreeMap<String, String>,
}

impl NodeVersions {
    /// A node's SKU and versions from everything it exported.
    pub fn of(node: &str, inventory: &BTreeMap<String, String>) -> NodeVersions {
        NodeVersions {
            node: node.to_string(),
            sku: sku_of(inventory),
            versions: inventory
                .iter()
                .filter(|(item, _)| is_version(item))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Pure: the SKU a node's inventory names (see the module comment).
pub fn sku_of(inventory: &BTreeMap<String, String>) -> String {
    if let Some(sku) = inventory.get(SKU_ITEM).filter(|s| !s.is_empty()) {
        return sku.clone();
    }
    let gpus = inventory
        .keys()
        .filter(|k| k.strip_prefix("gpu/gpu").is_some_and(is_digits))
        .count();
    match (inventory.get(BOARD_ITEM), gpus) {
        (Some(board), 0) => format!("board {board}"),
        (Some(board), n) => format!("board {board}, {n} GPUs"),
        (None, 0) => UNKNOWN_SKU.to_string(),
        (None, n) => format!("unknown board, {n} GPUs"),
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Pure: whether an inventory item is a version drift compares.
pub fn is_version(item: &str) -> bool {
    let check = item.split_once('/').map_or(item, |(c, _)| c);
    matches!(check, "firmware" | "gpu" | "versions") && item != SKU_ITEM
}

/// The reference value of a key within a SKU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Majority {
    /// Most nodes run this.
    Value(String),
    /// Most nodes do not report the key.
    NotReported,
    /// Two or more values share the top count: no reference.
    Tie,
}

/// A node that differs from its SKU's reference on one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Differing {
    pub node: String,
    /// `None`: the node does not report the key.
    pub value: Option<String>,
}

/// One key of one SKU on which some nodes differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyDrift {
    /// `versions/driver`, `gpu/gpu3` (a VBIOS), `firmware/mlx5_0`.
    pub key: String,
    pub majority: Majority,
    /// How many nodes run the reference (with a tie: each top value's count).
    pub majority_nodes: usize,
    /// Sorted by node name.
    pub differing: Vec<Differing>,
}

/// One SKU's drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkuDrift {
    pub sku: String,
    /// Nodes of the SKU, drifting or not.
    pub nodes: usize,
    /// Only keys with a differing node, by key.
    pub keys: Vec<KeyDrift>,
}

/// Per SKU (by name), the keys on which nodes differ; SKUs without drift
/// are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DriftReport {
    pub skus: Vec<SkuDrift>,
    /// Nodes compared, all SKUs together.
    pub nodes: usize,
}

impl DriftReport {
    /// Whether no node differs from its SKU.
    pub fn is_empty(&self) -> bool {
        self.skus.is_empty()
    }
}

/// Pure: the drift among every node of `inventory` (node to its items, as
/// `db::inventory::latest_inventory` returns them).
pub fn from_inventory(inventory: &BTreeMap<String, BTreeMap<String, String>>) -> DriftReport {
    let nodes: Vec<NodeVersions> = inventory
        .iter()
        .map(|(node, items)| NodeVersions::of(node, items))
        .collect();
    analyse(&nodes)
}

/// Pure: the drift among `nodes` (a node listed twice counts once, its
/// last entry winning).
pub fn analyse(nodes: &[NodeVersions]) -> DriftReport {
    let mut by_sku: BTreeMap<&str, BTreeMap<&str, &BTreeMap<String, String>>> = BTreeMap::new();
    for n in nodes {
        by_sku
            .entry(&n.sku)
            .or_default()
            .insert(&n.node, &n.versions);
    }
    let mut report = DriftReport::default();
    for (sku, members) in by_sku {
        report.nodes += members.len();
        let keys = sku_drift(&members);
        if !keys.is_empty() {
            report.skus.push(SkuDrift {
                sku: sku.to_string(),
                nodes: members.len(),
                keys,
            });
        }
    }
    report
}

/// The keys on which the nodes of one group (a SKU, a rack) differ.
pub(crate) fn sku_drift(members: &BTreeMap<&str, &BTreeMap<String, String>>) -> Vec<KeyDrift> {
    if members.len() < 2 {
        return Vec::new();
    }
    let mut keys: Vec<&str> = members
        .values()
        .flat_map(|v| v.keys().map(String::as_str))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| key_drift(key, members))
        .collect()
}

/// One key across a SKU's nodes: `None` when they all agree.
fn key_drift(key: &str, members: &BTreeMap<&str, &BTreeMap<String, String>>) -> Option<KeyDrift> {
    let value_of = |versions: &BTreeMap<String, String>| versions.get(key).cloned();
    let mut counts: BTreeMap<Option<String>, usize> = BTreeMap::new();
    for versions in members.values() {
        *counts.entry(value_of(versions)).or_default() += 1;
    }
    if counts.len() == 1 {
        return None;
    }
    let top = counts.values().copied().max().unwrap_or(0);
    let mut leaders = counts.iter().filter(|(_, &c)| c == top).map(|(v, _)| v);
    let majority = match (leaders.next(), leaders.next()) {
        (Some(Some(v)), None) => Majority::Value(v.clone()),
        (Some(None), None) => Majority::NotReported,
        _ => Majority::Tie,
    };
    let reference = match &majority {
        Majority::Value(v) => Some(Some(v.clone())),
        Majority::NotReported => Some(None),
        Majority::Tie => None,
    };
    let differing = members
        .iter()
        .map(|(node, versions)| (node, value_of(versions)))
        .filter(|(_, value)| reference.as_ref() != Some(value))
        .map(|(node, value)| Differing {
            node: node.to_string(),
            value,
        })
        .collect();
    Some(KeyDrift {
        key: key.to_string(),
        majority,
        majority_nodes: top,
        differing,
    })
}

/// One differing node on one key, flat: a table row for any renderer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftRow {
    pub sku: String,
    pub key: String,
    pub node: String,
    /// What the node runs; `not reported` when it sends no value.
    pub value: String,
    /// What most of the SKU runs: the value, `not reported`, or
    /// `no majority (tie)`.
    pub majority: String,
}

const NOT_REPORTED: &str = "not reported";
const TIE: &str = "no majority (tie)";

/// Pure: the report as rows, by SKU, key and node.
pub fn rows(report: &DriftReport) -> Vec<DriftRow> {
    let mut out = Vec::new();
    for sku in &report.skus {
        for key in &sku.keys {
            let majority = match &key.majority {
                Majority::Value(v) => v.clone(),
                Majority::NotReported => NOT_REPORTED.to_string(),
                Majority::Tie => TIE.to_string(),
            };
            for d in &key.differing {
                out.push(DriftRow {
                    sku: sku.sku.clone(),
                    key: key.key.clone(),
                    node: d.node.clone(),
                    value: d.value.clone().unwrap_or_else(|| NOT_REPORTED.into()),
                    majority: majority.clone(),
                });
            }
        }
    }
    out
}

/// The key as a reader names it: `driver`, `gpu3 vbios`, `mlx5_0`.
fn key_label(key: &str) -> String {
    match key.split_once('/') {
        Some(("gpu", gpu)) => format!("{gpu} vbios"),
        Some((_, rest)) => rest.replace('/', " "),
        None => key.to_string(),
    }
}

/// `lemon report`'s section: one row per differing node and key, or a
/// line saying how many nodes agreed.
pub fn section(report: &DriftReport) -> Section<'static> {
    let section = Section::new("Version drift (nodes that differ from their SKU)");
    if report.is_empty() {
        return section.with(Paragraph::plain(format!(
            "None: {} nodes compared within their SKU.",
            report.nodes
        )));
    }
    let table = Table::new("drift")
        .left("SKU", 0)
        .left("version", 0)
        .left("node", 0)
        .left("runs", 0)
        .left("most of the SKU", 0)
        .rows(
            rows(report)
                .into_iter()
                .map(|r| [r.sku, key_label(&r.key), r.node, r.value, r.majority]),
        );
    section.with(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's section as text, through the model's text renderer.
    fn text(report: &DriftReport) -> String {
        let doc = crate::document::Document {
            title: "t".into(),
            preamble: Vec::new(),
            sections: vec![section(report)],
        };
        crate::document::text::render(&doc)
    }

    fn node(name: &str, sku: &str, versions: &[(&str, &str)]) -> NodeVersions {
        NodeVersions {
            node: name.into(),
            sku: sku.into(),
            versions: versions
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    const H100: &str = "8x NVIDIA H100 80GB HBM3";

    #[test]
    fn the_node_on_another_driver_is_listed_with_its_value_against_the_majority() {
        let nodes = [
            node("n1", H100, &[("versions/driver", "550.54.15")]),
            node("n2", H100, &[("versions/driver", "550.90.07")]),
            node("n3", H100, &[("versions/driver", "550.54.15")]),
        ];
        let report = analyse(&nodes);
        assert_eq!(report.nodes, 3);
        let key = &report.skus[0].keys[0];
        assert_eq!(key.majority, Majority::Value("550.54.15".into()));
        assert_eq!(key.majority_nodes, 2);
        assert_eq!(
            key.differing,
            [Differing {
                node: "n2".into(),
                value: Some("550.90.07".into())
            }]
        );
    }

    #[test]
    fn skus_are_compared_apart_and_agreeing_skus_are_left_out() {
        let nodes = [
            node("a1", H100, &[("versions/driver", "550")]),
            node("a2", H100, &[("versions/driver", "550")]),
            node("b1", "8x NVIDIA A100", &[("versions/driver", "535")]),
            node("b2", "8x NVIDIA A100", &[("versions/driver", "535")]),
            node("c1", "board X", &[("versions/driver", "470")]),
        ];
        let report = analyse(&nodes);
        assert!(report.is_empty());
        assert_eq!(report.nodes, 5);
        assert!(text(&report).contains("None: 5 nodes compared"));
    }

    #[test]
    fn a_tie_has_no_majority_and_lists_every_node() {
        let nodes = [
            node("n1", H100, &[("gpu/gpu0", "96.00.89")]),
            node("n2", H100, &[("gpu/gpu0", "96.00.74")]),
        ];
        let key = &analyse(&nodes).skus[0].keys[0];
        assert_eq!(key.majority, Majority::Tie);
        let listed: Vec<_> = key.differing.iter().map(|d| d.node.as_str()).collect();
        assert_eq!(listed, ["n1", "n2"]);
        let text = text(&analyse(&nodes));
        let rows = text.lines().filter(|l| l.contains("gpu0 vbios"));
        assert_eq!(
            rows.filter(|l| l.contains("no majority (tie)")).count(),
            2,
            "{text}"
        );
    }

    #[test]
    fn a_node_missing_a_key_the_rest_report_is_listed_as_not_reporting_it() {
        let nodes = [
            node("n1", H100, &[("versions/nccl", "2.21.5")]),
            node("n2", H100, &[]),
            node("n3", H100, &[("versions/nccl", "2.21.5")]),
        ];
        let rows = rows(&analyse(&nodes));
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].node.as_str(),
                rows[0].value.as_str(),
                rows[0].majority.as_str()
            ),
            ("n2", "not reported", "2.21.5")
        );
    }

    #[test]
    fn the_one_node_with_a_key_most_lack_is_listed_against_not_reported() {
        let nodes = [
            node("n1", H100, &[]),
            node("n2", H100, &[("versions/nccl", "2.18.1")]),
            node("n3", H100, &[]),
        ];
        let key = &analyse(&nodes).skus[0].keys[0];
        assert_eq!(key.majority, Majority::NotReported);
        assert_eq!(key.differing[0].value.as_deref(), Some("2.18.1"));
    }

    #[test]
    fn the_sku_is_the_nodes_own_else_its_board_and_gpu_count() {
        let inv = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let full = inv(&[
            ("versions/sku", H100),
            ("firmware/board", "DGXH100"),
            ("gpu/gpu0", "96"),
        ]);
        assert_eq!(sku_of(&full), H100);
        let board = inv(&[
            ("firmware/board", "DGXH100"),
            ("gpu/gpu0", "96"),
            ("gpu/gpu1", "96"),
            ("ecc/gpu1", "2 uncorrected"),
        ]);
        assert_eq!(sku_of(&board), "board DGXH100, 2 GPUs");
        assert_eq!(sku_of(&inv(&[("firmware/board", "X13")])), "board X13");
        assert_eq!(sku_of(&inv(&[("versions/kernel", "5.15")])), UNKNOWN_SKU);
        // The SKU and ECC history are not versions; VBIOS and firmware are.
        let n = NodeVersions::of("n1", &board);
        let keys: Vec<_> = n.versions.keys().map(String::as_str).collect();
        assert_eq!(keys, ["firmware/board", "gpu/gpu0", "gpu/gpu1"]);
        assert!(!NodeVersions::of("n1", &full)
            .versions
            .contains_key("versions/sku"));
    }
}
