//! Nodes as `sinfo` shows them: one parser for state and reason, shared by
//! the node-side policy (one node) and lemon (every node).
//!
//! We ask for [`NODE_FORMAT`], `%N|%T|%E|%u|%H`: name, state with its suffix
//! flags, the full reason (`sinfo -R` cuts it at 20 characters), who set it,
//! and when. The reason is free text and may hold `|`, so the fixed fields are
//! taken from both ends and the middle is the reason's.
//!
//! `%T` is a state word with at most one suffix flag (sinfo(1), NODE STATE
//! CODES): `*` not responding, `~` powered off, `#` powering up, `!` power
//! down pending, `%` powering down, `$` in a maintenance reservation, `@`
//! reboot pending, `^` reboot issued, `-` planned by the backfill scheduler
//! for a higher-priority job.

use crate::command::{CommandError, SlurmCommands};
use std::collections::BTreeMap;
use thiserror::Error;

/// The `sinfo -o` format every caller uses.
pub const NODE_FORMAT: &str = "%N|%T|%E|%u|%H";

/// The suffix flags of a `%T` state.
const SUFFIX_FLAGS: [char; 9] = ['*', '~', '#', '!', '%', '$', '@', '^', '-'];

/// One node's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub name: String,
    /// As sinfo wrote it: `idle`, `mixed`, `drained`, `down*`, `idle~`, ...
    pub state: String,
    /// The full reason; empty when none.
    pub reason: String,
    /// Who set the reason (`Unknown` when none).
    pub user: String,
}

impl NodeState {
    /// The state without its suffix flag, lowercased: `down*` is `down`.
    pub fn base(&self) -> String {
        self.state
            .trim_end_matches(SUFFIX_FLAGS)
            .to_ascii_lowercase()
    }

    /// The suffix flags sinfo appended to the state (`*` in `down*`).
    pub fn flags(&self) -> &str {
        let base_len = self.state.trim_end_matches(SUFFIX_FLAGS).len();
        &self.state[base_len..]
    }

    /// The words of the base state: `idle+drain` is `idle` and `drain`.
    fn words(&self) -> Vec<String> {
        self.base().split('+').map(str::to_string).collect()
    }

    pub fn is_down(&self) -> bool {
        self.words().iter().any(|w| w == "down")
    }

    pub fn is_drain(&self) -> bool {
        self.words()
            .iter()
            .any(|w| matches!(w.as_str(), "drained" | "draining" | "drain"))
    }

    /// Plainly in service: idle, mixed, allocated or completing, no flag but
    /// "planned" (`-`), and no reason at all (an administrator's words count).
    /// Anything else, a state we do not know included, is out of service:
    /// whoever acts on a node in service must not act on one in doubt.
    pub fn in_service(&self) -> bool {
        let base = self.base();
        matches!(base.as_str(), "idle" | "mixed" | "allocated" | "completing")
            && self.flags().chars().all(|c| c == '-')
            && self.reason.is_empty()
    }
}

/// What `sinfo` listed, by node name (a node in several partitions is listed
/// once per partition; their lines agree, and the first is kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nodes {
    pub nodes: BTreeMap<String, NodeState>,
    /// Lines that are not in [`NODE_FORMAT`], with their 1-based number: a
    /// node on such a line is unknown to the caller, never guessed at.
    pub malformed: Vec<(usize, String)>,
}

/// Parses the output of `sinfo -h -N -o` [`NODE_FORMAT`].
pub fn parse_nodes(stdout: &str) -> Nodes {
    let mut out = Nodes::default();
    for (i, line) in stdout.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Some(node) => {
                out.nodes.entry(node.name.clone()).or_insert(node);
            }
            None => out.malformed.push((i + 1, line.to_string())),
        }
    }
    out
}

fn parse_line(line: &str) -> Option<NodeState> {
    let (name, rest) = line.split_once('|')?;
    let (state, rest) = rest.split_once('|')?;
    let mut tail = rest.rsplitn(3, '|');
    let _time = tail.next()?;
    let user = tail.next()?;
    let reason = tail.next()?.trim();
    let name = name.trim();
    let state = state.trim();
    if name.is_empty() || state.is_empty() {
        return None;
    }
    let reason = if reason == "none" || reason == "(null)" {
        ""
    } else {
        reason
    };
    Some(NodeState {
        name: name.to_string(),
        state: state.to_string(),
        reason: reason.to_string(),
        user: user.trim().to_string(),
    })
}

/// Why a node's state could not be read.
#[derive(Debug, Error)]
pub enum SinfoError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("sinfo does not list node {node}: {stdout:?}")]
    NotListed { node: String, stdout: String },
}

/// Every node, from one `sinfo` call.
pub fn all_nodes(cmds: &SlurmCommands) -> Result<Nodes, CommandError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", NODE_FORMAT])?;
    Ok(parse_nodes(&out.stdout))
}

/// One node's state and reason.
pub fn node(cmds: &SlurmCommands, node: &str) -> Result<NodeState, SinfoError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", NODE_FORMAT, "-n", node])?;
    parse_nodes(&out.stdout)
        .nodes
        .remove(node)
        .ok_or_else(|| SinfoError::NotListed {
            node: node.to_string(),
            stdout: out.stdout.trim().to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(state: &str, reason: &str) -> NodeState {
        NodeState {
            name: "n1".into(),
            state: state.into(),
            reason: reason.into(),
            user: String::new(),
        }
    }

    #[test]
    fn parses_state_reason_and_user_with_bars_in_the_reason() {
        let nodes = parse_nodes(
            "node1|idle|none|Unknown|Unknown\n\
             node2|drained|hc: XID_79 gpu3|root|2026-11-20T23:51:36\n\
             node3|down*|bad | fan|alice|x\n\
             node4|mixed|(null)|Unknown|Unknown\n",
        );
        assert!(nodes.malformed.is_empty());
        assert_eq!(nodes.nodes.len(), 4);
        assert_eq!(nodes.nodes["node1"].reason, "");
        assert_eq!(nodes.nodes["node2"].reason, "hc: XID_79 gpu3");
        assert_eq!(nodes.nodes["node2"].user, "root");
        assert_eq!(nodes.nodes["node3"].reason, "bad | fan");
        assert_eq!(nodes.nodes["node3"].user, "alice");
        assert_eq!(nodes.nodes["node4"].reason, "");
    }

    #[test]
    fn a_node_in_several_partitions_is_kept_once() {
        let nodes = parse_nodes("n1|idle|none|U|U\nn1|idle|none|U|U\nn2|mixed|none|U|U\n");
        assert_eq!(nodes.nodes.len(), 2);
    }

    #[test]
    fn lines_not_in_the_format_are_reported_with_their_number_and_skipped() {
        let nodes = parse_nodes("n1|idle|none|U|U\n\nn2|idle\n|idle|none|U|U\nn3|mixed|none|U|U\n");
        assert_eq!(
            nodes.nodes.keys().collect::<Vec<_>>(),
            ["n1", "n3"],
            "the good lines around bad ones count"
        );
        assert_eq!(
            nodes.malformed,
            [
                (3, "n2|idle".to_string()),
                (4, "|idle|none|U|U".to_string())
            ]
        );
    }

    #[test]
    fn down_and_drain_are_read_through_suffix_flags_and_compound_states() {
        assert!(state("down*", "").is_down());
        assert!(state("DOWN~", "").is_down());
        assert!(!state("idle", "").is_down());
        for s in [
            "drained",
            "draining",
            "drain",
            "drained*",
            "idle+drain",
            "draining@",
        ] {
            assert!(state(s, "").is_drain(), "{s}");
        }
        assert!(!state("mixed", "").is_drain());
        assert_eq!(state("down*", "").base(), "down");
        assert_eq!(state("down*", "").flags(), "*");
        assert_eq!(state("idle", "").flags(), "");
    }

    #[test]
    fn only_plain_working_states_without_a_reason_are_in_service() {
        for s in ["idle", "mixed", "allocated", "completing", "idle-", "MIXED"] {
            assert!(state(s, "").in_service(), "{s}");
        }
        for s in [
            "drained",
            "draining",
            "down",
            "down*",
            "idle*",
            "idle~",
            "idle#",
            "idle!",
            "idle%",
            "idle$",
            "idle@",
            "mixed^",
            "maint",
            "reserved",
            "planned",
            "future",
            "unknown",
            "inval",
            "fail",
            "failing",
            "reboot_issued",
            "powered_down",
            "idle+drain",
            "something_new",
        ] {
            assert!(!state(s, "").in_service(), "{s}");
        }
        assert!(
            !state("idle", "admin says wait").in_service(),
            "any reason takes a node out of service"
        );
    }
}

/// Random input: nodes and malformed lines, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn any_text_parses_without_a_panic(text in "[a-z0-9|*~#!%$@^ +\n-]{0,200}") {
            let nodes = parse_nodes(&text);
            for n in nodes.nodes.values() {
                let _ = (n.is_down(), n.is_drain(), n.in_service(), n.flags());
            }
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            prop_assert!(nodes.nodes.len() + nodes.malformed.len() <= lines);
        }
    }
}
