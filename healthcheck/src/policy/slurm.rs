//! The Slurm side of the policy: read one node's state and reason, count the
//! fleet's reasons for the breaker, and change the node's state. Every call
//! goes through [`SlurmCommands`]: absolute path, argv only, under a deadline.

use lemonade_slurm::command::{CommandError, SlurmCommands};
use lemonade_slurm::reason::HEALTHCHECK_PREFIX;
use std::collections::{BTreeMap, BTreeSet};

/// One node as `sinfo -h -N -o '%N|%T|%E|%u|%H'` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub name: String,
    /// `idle`, `mixed`, `allocated`, `drained`, `draining`, `down`, ... (`*` suffix: not responding).
    pub state: String,
    /// The full reason; empty when none.
    pub reason: String,
    pub user: String,
}

impl NodeState {
    pub fn is_down(&self) -> bool {
        self.state
            .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
            == "down"
    }
    pub fn is_drain(&self) -> bool {
        matches!(
            self.state
                .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']),
            "drained" | "draining" | "drain"
        )
    }
}

/// Reads one node's state and reason.
pub fn node_state(cmds: &SlurmCommands, node: &str) -> Result<NodeState, CommandError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", "%N|%T|%E|%u|%H", "-n", node])?;
    parse_node_state(&out.stdout, node).ok_or_else(|| CommandError::Failed {
        program: cmds.program("sinfo").display().to_string(),
        status: "0".into(),
        stderr: format!("node {node} not in the output: {:?}", out.stdout.trim()),
    })
}

/// The line of `node` (one per partition; they agree on state and reason).
pub fn parse_node_state(stdout: &str, node: &str) -> Option<NodeState> {
    stdout.lines().find_map(|line| {
        // The reason is free text and may hold `|`: take the fixed fields
        // from both ends and leave the middle to it.
        let (name, rest) = line.split_once('|')?;
        let name = name.trim();
        if name != node {
            return None;
        }
        let (state, rest) = rest.split_once('|')?;
        let state = state.trim().to_string();
        let mut tail = rest.rsplitn(3, '|');
        let _time = tail.next();
        let user = tail.next().unwrap_or("").trim().to_string();
        let reason = tail.next().unwrap_or("").trim();
        let reason = if reason == "none" || reason == "(null)" {
            String::new()
        } else {
            reason.to_string()
        };
        Some(NodeState {
            name: name.to_string(),
            state,
            reason,
            user,
        })
    })
}

/// What the breaker saw: nodes of our partitions, and how many of the others
/// already carry our reason with the same code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub nodes: usize,
    pub same_code: usize,
}

/// One `sinfo` call over every node: partitions, names and reasons.
pub fn fleet(cmds: &SlurmCommands, node: &str, code: &str) -> Result<Fleet, CommandError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", "%N|%R|%E"])?;
    Ok(parse_fleet(&out.stdout, node, code))
}

pub fn parse_fleet(stdout: &str, node: &str, code: &str) -> Fleet {
    let mut by_partition: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut reasons: BTreeMap<&str, &str> = BTreeMap::new();
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '|');
        let (Some(name), Some(partition)) = (parts.next(), parts.next()) else {
            continue;
        };
        let reason = parts.next().unwrap_or("").trim();
        by_partition
            .entry(partition.trim())
            .or_default()
            .insert(name.trim());
        reasons.insert(name.trim(), reason);
    }
    let mine: BTreeSet<&str> = by_partition
        .values()
        .filter(|nodes| nodes.contains(node))
        .flat_map(|nodes| nodes.iter().copied())
        .collect();
    let same_code = mine
        .iter()
        .filter(|n| **n != node)
        .filter(|n| {
            reasons.get(*n).is_some_and(|r| {
                r.starts_with(HEALTHCHECK_PREFIX) && super::reason::code_of(r) == Some(code)
            })
        })
        .count();
    Fleet {
        nodes: mine.len(),
        same_code,
    }
}

/// The argv of `scontrol update` for a node state with a reason (none for RESUME).
pub fn update_args(node: &str, state: &str, reason: Option<&str>) -> Vec<String> {
    let mut args = vec![
        "update".to_string(),
        format!("NodeName={node}"),
        format!("State={state}"),
    ];
    if let Some(r) = reason {
        args.push(format!("Reason={r}"));
    }
    args
}

/// Running job ids on a node (for `drain-requeue`).
pub fn running_jobs(cmds: &SlurmCommands, node: &str) -> Result<Vec<String>, CommandError> {
    let out = cmds.run("squeue", &["-h", "-w", node, "-t", "RUNNING", "-o", "%A"])?;
    Ok(out
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node_state_and_reason() {
        let out = "node1|idle|none|Unknown|Unknown\nnode2|drained|hc: XID_79 gpu3|root|2026-11-20T23:51:36\n";
        let n = parse_node_state(out, "node2").unwrap();
        assert_eq!(n.reason, "hc: XID_79 gpu3");
        assert!(n.is_drain());
        let n = parse_node_state(out, "node1").unwrap();
        assert_eq!(n.reason, "");
        assert!(parse_node_state(out, "node3").is_none());
        let down = parse_node_state("node3|down*|bad | fan|root|x\n", "node3").unwrap();
        assert!(down.is_down());
        assert_eq!(down.reason, "bad | fan");
    }

    #[test]
    fn fleet_counts_other_nodes_of_our_partitions_with_the_same_code() {
        let out = "n1|gpu|hc: XID_79 gpu1\nn2|gpu|none\nn3|gpu|hc: MOUNT_MISSING /x\nn4|gpu|bad fan\nc1|cpu|hc: XID_79 gpu0\n";
        let f = parse_fleet(out, "n2", "XID_79");
        assert_eq!(
            f,
            Fleet {
                nodes: 4,
                same_code: 1
            }
        );
        let f = parse_fleet(out, "n1", "XID_79");
        assert_eq!(f.same_code, 0, "our own reason does not count");
    }
}
