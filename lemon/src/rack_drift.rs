//! NVLink domain drift (issue 50): per rack, the nodes whose NVLink clique
//! or cluster UUID differs from what most of the rack reports.
//!
//! On a GB200/GB300 NVL72 rack the 18 compute trays form one NVLink domain
//! (one `clusterUuid`) and normally one partition (one `cliqueId`). A tray
//! in another partition passes every check of its own and still cannot
//! reach its peers: only a comparison across the rack shows it.
//!
//! * **The rack** of a node is its `[[rack]]` entry, else its block of
//!   Slurm's `topology.yaml` ([`Racks`]). A node in neither is not judged.
//! * **The domain** of a node is what its GPUs exported as `fabric/gpuN`
//!   inventory ([`lemonade_spool::domain`]); a node whose GPUs disagree
//!   among themselves reports them all, which differs from any rack. A node
//!   that exported none (an older healthcheck, no multi-node domain) is not
//!   judged.
//! * The comparison is the version drift's ([`crate::drift`]): the value
//!   most of the rack reports is the reference, a tie has none.

use crate::document::{Paragraph, Section, Table};
use crate::drift::{self, KeyDrift, Majority};
use lemonade_config::RackSettings;
use lemonade_slurm::hostlist::{self, HostlistError};
use lemonade_slurm::topology::BlockTopology;
use lemonade_spool::domain::{NvlinkDomain, CHECK};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The compared key of a node's cluster UUID.
pub const CLUSTER_KEY: &str = "nvlink/cluster";
/// The compared key of a node's clique.
pub const CLIQUE_KEY: &str = "nvlink/clique";

/// Node to rack name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Racks(BTreeMap<String, String>);

impl Racks {
    /// `[[rack]]` entries first; the blocks of `topology` place the rest.
    pub fn of(
        configured: &[RackSettings],
        topology: Option<&BlockTopology>,
    ) -> Result<Racks, HostlistError> {
        let mut out = lemonade_config::rack_of_nodes(configured);
        for block in topology.map(|t| t.blocks.as_slice()).unwrap_or_default() {
            for node in hostlist::expand(&block.nodes)? {
                out.entry(node).or_insert_with(|| block.name.clone());
            }
        }
        Ok(Racks(out))
    }

    /// The rack of `node`, if any.
    pub fn of_node(&self, node: &str) -> Option<&str> {
        self.0.get(node).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Pure: a node's cluster and clique from its inventory (`check/entity` to
/// value), as the compared keys; empty when it exported no domain.
pub fn domain_of(inventory: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let domains: BTreeSet<NvlinkDomain> = inventory
        .iter()
        .filter(|(item, _)| {
            item.split_once('/')
                .is_some_and(|(check, gpu)| check == CHECK && gpu.starts_with("gpu"))
        })
        .filter_map(|(_, value)| NvlinkDomain::parse(value))
        .collect();
    if domains.is_empty() {
        return BTreeMap::new();
    }
    let join = |part: &dyn Fn(&NvlinkDomain) -> String| {
        let values: BTreeSet<String> = domains.iter().map(part).collect();
        values.into_iter().collect::<Vec<_>>().join(" + ")
    };
    BTreeMap::from([
        (CLUSTER_KEY.to_string(), join(&|d| d.cluster_uuid.clone())),
        (CLIQUE_KEY.to_string(), join(&|d| d.clique_id.to_string())),
    ])
}

/// One rack on which some node differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RackDrift {
    pub rack: String,
    /// Nodes of the rack that reported a domain.
    pub nodes: usize,
    /// The keys with a differing node: clique, cluster or both.
    pub keys: Vec<KeyDrift>,
}

/// Per rack, the nodes whose domain differs; racks that agree are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RackDriftReport {
    pub racks: Vec<RackDrift>,
    /// Nodes compared: in a rack, with a domain.
    pub judged: usize,
    /// Nodes with a domain that are in no rack: not judged.
    pub unplaced: Vec<String>,
}

/// Pure: the domain drift of every node of `inventory` (node to its items,
/// as `db::inventory::latest_inventory` returns them) within its rack.
pub fn analyse(
    inventory: &BTreeMap<String, BTreeMap<String, String>>,
    racks: &Racks,
) -> RackDriftReport {
    let domains: BTreeMap<&str, BTreeMap<String, String>> = inventory
        .iter()
        .map(|(node, items)| (node.as_str(), domain_of(items)))
        .filter(|(_, d)| !d.is_empty())
        .collect();
    let mut by_rack: BTreeMap<&str, BTreeMap<&str, &BTreeMap<String, String>>> = BTreeMap::new();
    let mut report = RackDriftReport::default();
    for (node, domain) in &domains {
        match racks.of_node(node) {
            Some(rack) => {
                by_rack.entry(rack).or_default().insert(node, domain);
            }
            None => report.unplaced.push(node.to_string()),
        }
    }
    for (rack, members) in by_rack {
        report.judged += members.len();
        let keys = drift::sku_drift(&members);
        if !keys.is_empty() {
            report.racks.push(RackDrift {
                rack: rack.to_string(),
                nodes: members.len(),
                keys,
            });
        }
    }
    report
}

/// One differing node on one key, flat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RackDriftRow {
    pub rack: String,
    /// `clique` or `cluster uuid`.
    pub key: String,
    pub node: String,
    pub value: String,
    /// What most of the rack reports, or `no majority (tie)`.
    pub majority: String,
}

fn key_label(key: &str) -> &str {
    match key {
        CLIQUE_KEY => "clique",
        CLUSTER_KEY => "cluster uuid",
        other => other,
    }
}

/// Pure: the report as rows, by rack, key and node.
pub fn rows(report: &RackDriftReport) -> Vec<RackDriftRow> {
    let mut out = Vec::new();
    for rack in &report.racks {
        for key in &rack.keys {
            let majority = match &key.majority {
                Majority::Value(v) => v.clone(),
                Majority::NotReported => "not reported".to_string(),
                Majority::Tie => "no majority (tie)".to_string(),
            };
            for d in &key.differing {
                out.push(RackDriftRow {
                    rack: rack.rack.clone(),
                    key: key_label(&key.key).to_string(),
                    node: d.node.clone(),
                    value: d.value.clone().unwrap_or_else(|| "not reported".into()),
                    majority: majority.clone(),
                });
            }
        }
    }
    out
}

/// `lemon report`'s section: one row per differing node and key, or a line
/// saying how many nodes agreed with their rack.
pub fn section(report: &RackDriftReport) -> Section<'static> {
    let section = Section::new("NVLink domain drift (nodes whose clique differs from their rack)");
    let unplaced = match report.unplaced.len() {
        0 => String::new(),
        1 => " 1 node with an NVLink domain is in no rack and was not judged.".to_string(),
        n => format!(" {n} nodes with an NVLink domain are in no rack and were not judged."),
    };
    if report.racks.is_empty() {
        return section.with(Paragraph::plain(format!(
            "None: {} nodes compared within their rack.{unplaced}",
            report.judged
        )));
    }
    let table = Table::new("rack_drift")
        .left("rack", 0)
        .left("node", 0)
        .left("what", 0)
        .left("node has", 0)
        .left("most of the rack", 0)
        .rows(
            rows(report)
                .into_iter()
                .map(|r| [r.rack, r.node, r.key, r.value, r.majority]),
        );
    let section = section.with(table);
    if unplaced.is_empty() {
        section
    } else {
        section.with(Paragraph::plain(unplaced.trim().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "6d0b3f4e-1a2b-4c3d-8e9f-0a1b2c3d4e5f";

    fn domain(cluster: &str, clique: u32) -> String {
        NvlinkDomain {
            cluster_uuid: cluster.into(),
            clique_id: clique,
        }
        .value()
    }

    /// A tray of four GPUs in `clique`.
    fn tray(clique: u32) -> BTreeMap<String, String> {
        (0..4)
            .map(|g| (format!("fabric/gpu{g}"), domain(CLUSTER, clique)))
            .chain([("versions/driver".to_string(), "580.65.06".to_string())])
            .collect()
    }

    fn rack_of_18(odd: Option<(usize, u32)>) -> BTreeMap<String, BTreeMap<String, String>> {
        (1..=18)
            .map(|i| {
                let clique = match odd {
                    Some((at, c)) if at == i => c,
                    _ => 32766,
                };
                (format!("gb{i:03}"), tray(clique))
            })
            .collect()
    }

    fn rack_r01() -> Racks {
        let r = RackSettings {
            name: "r01".into(),
            hosts: "gb[001-018]".into(),
        };
        Racks::of(&[r], None).unwrap()
    }

    #[test]
    fn the_tray_in_another_clique_of_an_18_tray_rack_is_flagged() {
        let report = analyse(&rack_of_18(Some((7, 1))), &rack_r01());
        assert_eq!(report.judged, 18);
        let rows = rows(&report);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            (
                rows[0].rack.as_str(),
                rows[0].node.as_str(),
                rows[0].key.as_str()
            ),
            ("r01", "gb007", "clique")
        );
        assert_eq!(
            (rows[0].value.as_str(), rows[0].majority.as_str()),
            ("1", "32766")
        );
    }

    #[test]
    fn a_uniform_rack_is_not_flagged() {
        let report = analyse(&rack_of_18(None), &rack_r01());
        assert!(report.racks.is_empty(), "{report:?}");
        assert_eq!(report.judged, 18);
        let doc = crate::document::Document {
            title: "t".into(),
            preamble: Vec::new(),
            sections: vec![section(&report)],
        };
        let text = crate::document::text::render(&doc);
        assert!(
            text.contains("None: 18 nodes compared within their rack."),
            "{text}"
        );
    }

    #[test]
    fn a_node_in_no_rack_is_not_judged() {
        // Two trays outside every rack, in different cliques: judged
        // together they would be a tie, both flagged.
        let mut inventory = rack_of_18(None);
        inventory.insert("gb099".into(), tray(5));
        inventory.insert("gb100".into(), tray(6));
        let report = analyse(&inventory, &rack_r01());
        assert!(report.racks.is_empty(), "{report:?}");
        assert_eq!(report.unplaced, ["gb099", "gb100"]);
        assert_eq!(report.judged, 18);
    }

    #[test]
    fn another_cluster_and_a_tray_split_across_cliques_are_flagged() {
        let mut inventory = rack_of_18(None);
        let other = "11111111-2222-3333-4444-555555555555";
        inventory.insert(
            "gb003".into(),
            (0..4)
                .map(|g| (format!("fabric/gpu{g}"), domain(other, 32766)))
                .collect(),
        );
        let split = inventory.get_mut("gb004").unwrap();
        split.insert("fabric/gpu3".into(), domain(CLUSTER, 9));
        let report = analyse(&inventory, &rack_r01());
        let flagged: Vec<(String, String, String)> = rows(&report)
            .into_iter()
            .map(|r| (r.node, r.key, r.value))
            .collect();
        // By key (clique before cluster), then node.
        assert_eq!(
            flagged,
            [
                (
                    "gb004".to_string(),
                    "clique".to_string(),
                    "32766 + 9".to_string()
                ),
                (
                    "gb003".to_string(),
                    "cluster uuid".to_string(),
                    other.to_string()
                ),
            ]
        );
    }

    #[test]
    fn nodes_without_a_domain_are_not_judged() {
        let mut inventory = rack_of_18(None);
        inventory.insert(
            "gb018".into(),
            BTreeMap::from([("versions/driver".to_string(), "580".to_string())]),
        );
        let report = analyse(&inventory, &rack_r01());
        assert!(report.racks.is_empty(), "{report:?}");
        assert_eq!(report.judged, 17);
    }

    #[test]
    fn the_config_places_nodes_before_the_topology_blocks() {
        let topology = lemonade_slurm::topology::parse(include_str!(
            "../../tests/fixtures/slurm-topology/nvl72.yaml"
        ))
        .unwrap()
        .unwrap();
        let moved = RackSettings {
            name: "spare".into(),
            hosts: "gb018".into(),
        };
        let racks = Racks::of(&[moved], Some(&topology)).unwrap();
        assert_eq!(racks.of_node("gb001"), Some("rack01"));
        assert_eq!(racks.of_node("gb018"), Some("spare"));
        assert_eq!(racks.of_node("gb036"), Some("rack02"));
        assert_eq!(racks.of_node("login1"), None);
    }
}
