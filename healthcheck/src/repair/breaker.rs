//! The remediation breaker: how many nodes of our partitions are rebooting
//! or in a remediation of ours right now, from one `sinfo` call.

use crate::policy::slurm::partition_peers;
use lemonade_slurm::command::{CommandError, SlurmCommands};
use lemonade_slurm::reason;
use std::collections::BTreeSet;

/// What the breaker saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// Nodes of the partitions this node is in.
    pub nodes: usize,
    /// The others among them that reboot or are in a remediation.
    pub in_remediation: usize,
}

impl Busy {
    /// One more may start while the busy ones and it stay within `fraction`
    /// of the nodes; one node at a time always may.
    pub fn allows_one_more(&self, fraction: f64) -> bool {
        let limit = ((self.nodes as f64 * fraction).floor() as usize).max(1);
        self.in_remediation < limit
    }
}

/// A `%T` state Slurm shows while it has a reboot to do or under way:
/// `@` reboot pending, `^` reboot issued, or a state word that says so.
pub fn rebooting(state: &str) -> bool {
    let state = state.trim();
    state.ends_with(['@', '^']) || state.to_ascii_lowercase().contains("reboot")
}

/// One `sinfo` call: name, partition, state, reason of every node.
pub fn count(cmds: &SlurmCommands, node: &str) -> Result<Busy, CommandError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", "%N|%R|%T|%E"])?;
    Ok(parse(&out.stdout, node))
}

/// Parses `%N|%R|%T|%E` lines (the reason last: it may hold `|`).
pub fn parse(stdout: &str, node: &str) -> Busy {
    let mut rows = Vec::new();
    let mut busy: BTreeSet<&str> = BTreeSet::new();
    for line in stdout.lines() {
        let mut parts = line.splitn(4, '|');
        let (Some(name), Some(partition), Some(state)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let name = name.trim();
        rows.push((name, partition.trim()));
        let reason = parts.next().unwrap_or("").trim();
        // Our reason with the remark of a step under way (`hc: XID_79 gpu3 reboot`).
        let ours_under_way = matches!(reason::parse(reason).remark, Some("reboot" | "reset"));
        if rebooting(state) || ours_under_way {
            busy.insert(name);
        }
    }
    let mine = partition_peers(&rows, node);
    Busy {
        nodes: mine.len(),
        in_remediation: mine
            .iter()
            .filter(|n| **n != node && busy.contains(*n))
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebooting_nodes_and_our_remediations_of_our_partitions_count() {
        let out = "\
n1|gpu|draining@|hc: XID_79 gpu1 reboot
n2|gpu|idle|none
n3|gpu|down^|Reboot ASAP
n4|gpu|drained|hc: ECC_VOLATILE_UNCORRECTED gpu0 reset
n5|gpu|drained|hc: MOUNT_MISSING /x
c1|cpu|down@|hc: XID_79 gpu0 reboot
";
        let b = parse(out, "n2");
        assert_eq!(
            b,
            Busy {
                nodes: 5,
                in_remediation: 3
            }
        );
        assert!(!b.allows_one_more(0.5), "2 of 5 at most");
        assert!(parse(out, "n1").in_remediation == 2, "not itself");
    }

    #[test]
    fn a_small_partition_still_repairs_one_node_at_a_time() {
        let idle = Busy {
            nodes: 4,
            in_remediation: 0,
        };
        assert!(idle.allows_one_more(0.1));
        let one = Busy {
            nodes: 4,
            in_remediation: 1,
        };
        assert!(!one.allows_one_more(0.1));
        let big = Busy {
            nodes: 1000,
            in_remediation: 99,
        };
        assert!(big.allows_one_more(0.1));
        assert!(!Busy {
            in_remediation: 100,
            ..big
        }
        .allows_one_more(0.1));
    }
}
