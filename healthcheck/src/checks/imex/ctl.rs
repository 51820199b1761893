//! Reading `nvidia-imex-ctl -N`: the domain's nodes, who is connected to
//! whom, and the domain's state. The format is in `fixtures/SOURCE.md`.

use std::collections::BTreeMap;

/// The daemon state a node must be in to serve jobs.
pub const READY: &str = "READY";
/// The matrix letter of a working connection.
pub const CONNECTED: &str = "C";

/// One node of the domain, as its `Node #` line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainNode {
    pub index: usize,
    /// The address (or host name) `nodes_config.cfg` gives it.
    pub address: String,
    /// Its daemon's state: `READY`, `UNAVAILABLE`, `WAITING_FOR_PEERS`, ...
    pub state: String,
}

/// What `nvidia-imex-ctl -N` printed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DomainStatus {
    pub nodes: Vec<DomainNode>,
    /// `links[from][to]`: the letter of the connection, for the rows the
    /// table has (a node whose daemon did not answer has no row).
    pub links: BTreeMap<usize, Vec<String>>,
    /// `UP`, `DEGRADED`, `DOWN`.
    pub domain_state: String,
}

impl DomainStatus {
    /// The letter of `from` → `to`, when the table has that row.
    pub fn link(&self, from: usize, to: usize) -> Option<&str> {
        self.links.get(&from)?.get(to).map(String::as_str)
    }
}

/// At most this many nodes: an NVL72 rack has 18 trays, NVL576 144.
const MAX_NODES: usize = 1024;

/// Parses the output; an error names what is missing or wrong.
pub fn parse(text: &str) -> Result<DomainStatus, String> {
    let mut lines = text.lines();
    if !lines.by_ref().any(|l| l.trim() == "Nodes:") {
        return Err("no `Nodes:` line".into());
    }
    let mut status = DomainStatus::default();
    let mut columns: Option<usize> = None;
    for line in lines {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("Node #") {
            status.nodes.push(node_line(rest)?);
        } else if let Some(rest) = trimmed.strip_prefix("Nodes From\\To") {
            columns = Some(header(rest, status.nodes.len())?);
        } else if let Some(state) = trimmed.strip_prefix("Domain State:") {
            status.domain_state = state.trim().to_string();
            break;
        } else if let Some(n) = columns {
            let (from, cells) = matrix_row(trimmed, n)?;
            status.links.insert(from, cells);
        } else {
            return Err(format!("unexpected line `{trimmed}` among the nodes"));
        }
        if status.nodes.len() > MAX_NODES {
            return Err(format!("more than {MAX_NODES} nodes"));
        }
    }
    if status.nodes.is_empty() {
        return Err("no `Node #` lines".into());
    }
    if columns.is_none() {
        return Err("no connectivity table (`Nodes From\\To`)".into());
    }
    if status.domain_state.is_empty() {
        return Err("no `Domain State:` line".into());
    }
    Ok(status)
}

/// `0   - 172.31.48.81    - READY                - Version: 570.172`.
fn node_line(rest: &str) -> Result<DomainNode, String> {
    let fields: Vec<&str> = rest.split(" - ").map(str::trim).collect();
    let bad = || format!("node line `Node #{rest}`: expected `<n> - <address> - <state>`");
    let [index, address, state, ..] = fields.as_slice() else {
        return Err(bad());
    };
    let index = index.parse().map_err(|_| bad())?;
    if address.is_empty() || state.is_empty() {
        return Err(bad());
    }
    Ok(DomainNode {
        index,
        address: address.to_string(),
        state: state.to_string(),
    })
}

/// The column indices after `Nodes From\To`: 0, 1, ... one per node.
fn header(rest: &str, nodes: usize) -> Result<usize, String> {
    let columns: Vec<&str> = rest.split_whitespace().collect();
    let in_order = columns
        .iter()
        .enumerate()
        .all(|(i, c)| c.parse::<usize>() == Ok(i));
    if !in_order || columns.len() != nodes {
        return Err(format!(
            "connectivity table has columns `{}` for {nodes} nodes",
            rest.trim()
        ));
    }
    Ok(nodes)
}

/// `0        C   C   D`: the row's node and one letter per column.
fn matrix_row(line: &str, columns: usize) -> Result<(usize, Vec<String>), String> {
    let mut words = line.split_whitespace();
    let from = words
        .next()
        .and_then(|w| w.parse::<usize>().ok())
        .filter(|&from| from < columns)
        .ok_or_else(|| format!("connectivity row `{line}` does not start with a node"))?;
    let cells: Vec<String> = words.map(String::from).collect();
    if cells.len() != columns {
        return Err(format!(
            "connectivity row of node {from} has {} cells for {columns} nodes",
            cells.len()
        ));
    }
    Ok((from, cells))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UP_18: &str = include_str!("fixtures/ctl-n-18-up.txt");
    const UP_1: &str = include_str!("fixtures/ctl-n-1-up.txt");
    const UP_2: &str = include_str!("fixtures/ctl-n-2-up.txt");
    const DISCONNECTED: &str = include_str!("fixtures/ctl-n-4-peer-disconnected.txt");
    const UNAVAILABLE: &str = include_str!("fixtures/ctl-n-4-peer-unavailable.txt");

    #[test]
    fn the_published_18_tray_sample_is_18_ready_nodes_all_connected_and_up() {
        let s = parse(UP_18).unwrap();
        assert_eq!(s.nodes.len(), 18);
        assert!(s.nodes.iter().all(|n| n.state == READY));
        assert_eq!(s.nodes[17].address, "172.31.56.47");
        assert_eq!(s.links.len(), 18);
        assert!(s.links.values().flatten().all(|c| c == CONNECTED));
        assert_eq!(s.domain_state, "UP");
    }

    #[test]
    fn a_single_node_sample_without_versions_parses() {
        let s = parse(UP_1).unwrap();
        assert_eq!(s.nodes[0].address, "10.136.206.48");
        assert_eq!(s.link(0, 0), Some("C"));
        assert_eq!(s.domain_state, "UP");
        let s = parse(UP_2).unwrap();
        assert_eq!(s.nodes[1].address, "10.136.206.48");
        assert_eq!((s.link(0, 1), s.link(1, 0)), (Some("C"), Some("C")));
    }

    #[test]
    fn a_disconnected_link_and_a_node_without_a_row_are_read_as_printed() {
        let s = parse(DISCONNECTED).unwrap();
        assert_eq!(
            (s.link(0, 3), s.link(3, 0), s.link(1, 3)),
            (Some("D"), Some("D"), Some("C"))
        );
        let s = parse(UNAVAILABLE).unwrap();
        assert_eq!(s.nodes[3].state, "UNAVAILABLE");
        assert_eq!((s.link(0, 3), s.link(3, 0)), (Some("N"), None));
        assert_eq!(s.domain_state, "DEGRADED");
    }

    #[test]
    fn output_without_its_parts_is_an_error_naming_the_part() {
        let err = |t: &str| parse(t).unwrap_err();
        assert!(err("IMEX daemon is not running\n").contains("Nodes:"));
        assert!(err("Nodes:\nNode #0 - 10.0.0.1 - READY\nDomain State: UP\n").contains("table"));
        let no_state = "Nodes:\nNode #0 - 10.0.0.1 - READY\n Nodes From\\To  0\n 0 C\n";
        assert!(err(no_state).contains("Domain State"));
        let short_row = "Nodes:\nNode #0 - a - READY\nNode #1 - b - READY\n Nodes From\\To 0 1\n 0 C\nDomain State: UP\n";
        assert!(err(short_row).contains("1 cells for 2 nodes"));
        let wrong_header = "Nodes:\nNode #0 - a - READY\n Nodes From\\To 0 1\nDomain State: UP\n";
        assert!(err(wrong_header).contains("columns"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn parsing_never_panics(text in "(Nodes:\n|Node #|Nodes From\\\\To|Domain State:|[ -~]{0,12}|\n){0,30}") {
            let _ = parse(&text);
        }
    }
}
