//! `[[rack]]`: the nodes that share a rack, which for a GB200/GB300 NVL72
//! is one NVLink domain: `lemon report` expects them in one clique and flags
//! the odd one out (issue 50).
//!
//! ```toml
//! [[rack]]
//! name = "r01"
//! hosts = "gb[001-018]"
//! ```
//!
//! A node in no `[[rack]]` takes its block of Slurm's `topology.yaml`
//! (`[lemon] topology_yaml`), if any; a node in neither is not judged.

use lemonade_slurm::hostlist;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One `[[rack]]` entry.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RackSettings {
    /// How the report names the rack.
    pub name: String,
    /// Its nodes, a Slurm hostlist.
    pub hosts: String,
}

/// Why the `[[rack]]` entries cannot be used; the loader adds file and line.
pub(crate) fn rack_problem(
    rack: &RackSettings,
    earlier: &BTreeMap<String, String>,
    names: &[String],
) -> Option<String> {
    let which = format!("[[rack]] name = \"{}\"", rack.name);
    if rack.name.trim().is_empty() {
        return Some("[[rack]]: `name` must not be empty".into());
    }
    if names.contains(&rack.name) {
        return Some(format!("{which}: a rack of that name is defined above"));
    }
    let hosts = match hostlist::expand(&rack.hosts) {
        Ok(hosts) if hosts.is_empty() => {
            return Some(format!("{which}: `hosts` names no node"));
        }
        Ok(hosts) => hosts,
        Err(e) => return Some(format!("{which}: `hosts`: {e}")),
    };
    hosts.iter().find_map(|h| {
        earlier.get(h).map(|other| {
            format!("{which}: `hosts`: {h} is already in rack \"{other}\"; a node is in one rack")
        })
    })
}

/// Node to rack name, from entries [`rack_problem`] accepted.
pub fn rack_of_nodes(racks: &[RackSettings]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for rack in racks {
        for host in hostlist::expand(&rack.hosts).unwrap_or_default() {
            out.entry(host).or_insert_with(|| rack.name.clone());
        }
    }
    out
}
