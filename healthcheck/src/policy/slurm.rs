//! The Slurm reads of the policy: count the fleet's reasons for the breaker
//! and list a node's running jobs. A node's own state comes from
//! [`lemonade_slurm::sinfo`] and every change of it goes through
//! [`lemonade_slurm::node_state`]. Every call goes through [`SlurmCommands`]:
//! absolute path, argv only, under a deadline.

use lemonade_slurm::command::{CommandError, SlurmCommands};
use lemonade_slurm::reason;
use std::collections::{BTreeMap, BTreeSet};

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
    let mut rows = Vec::new();
    let mut reasons: BTreeMap<&str, &str> = BTreeMap::new();
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '|');
        let (Some(name), Some(partition)) = (parts.next(), parts.next()) else {
            continue;
        };
        rows.push((name.trim(), partition.trim()));
        reasons.insert(name.trim(), parts.next().unwrap_or("").trim());
    }
    let mine = partition_peers(&rows, node);
    let same_code = mine
        .iter()
        .filter(|n| **n != node)
        .filter(|n| {
            reasons
                .get(*n)
                .is_some_and(|r| reason::code_of(r) == Some(code))
        })
        .count();
    Fleet {
        nodes: mine.len(),
        same_code,
    }
}

/// The nodes of every partition `node` is in (itself included), from
/// `(name, partition)` rows of `sinfo -N`: what the breakers count against.
pub fn partition_peers<'a>(rows: &[(&'a str, &'a str)], node: &str) -> BTreeSet<&'a str> {
    let mut by_partition: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for &(name, partition) in rows {
        by_partition.entry(partition).or_default().insert(name);
    }
    by_partition
        .values()
        .filter(|nodes| nodes.contains(node))
        .flat_map(|nodes| nodes.iter().copied())
        .collect()
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
