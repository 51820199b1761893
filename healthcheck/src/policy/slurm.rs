//! The Slurm reads of the policy: count the fleet's reasons for the breaker
//! and list a node's running jobs. A node's own state comes from
//! [`lemonade_slurm::sinfo`] and every change of it goes through
//! [`lemonade_slurm::node_state`]. Every call goes through [`SlurmCommands`]:
//! absolute path, argv only, under a deadline.

use lemonade_slurm::command::{CommandError, SlurmCommands};
use lemonade_slurm::reason;
use std::collections::{BTreeMap, BTreeSet};

/// What the breaker saw: nodes of our partitions, and how many of the others
/// carry our reason with the same code, all of them and those set within
/// the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub nodes: usize,
    pub same_code: usize,
    /// Of `same_code`, those whose reason was set at `since` or later, or
    /// whose time does not read: a time Slurm does not give cannot prove a
    /// reason old, and the breaker errs towards holding a burst.
    pub recent_same_code: usize,
}

/// One `sinfo` call over every node: partitions, names, reason times and
/// reasons (last: a reason is free text and may hold a `|`).
pub fn fleet(
    cmds: &SlurmCommands,
    node: &str,
    code: &str,
    since: i64,
) -> Result<Fleet, CommandError> {
    let out = cmds.run("sinfo", &["-h", "-N", "-o", "%N|%R|%H|%E"])?;
    Ok(parse_fleet(&out.stdout, node, code, since))
}

pub fn parse_fleet(stdout: &str, node: &str, code: &str, since: i64) -> Fleet {
    let mut rows = Vec::new();
    let mut reasons: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for line in stdout.lines() {
        let mut parts = line.splitn(4, '|');
        let (Some(name), Some(partition)) = (parts.next(), parts.next()) else {
            continue;
        };
        rows.push((name.trim(), partition.trim()));
        let at = parts.next().unwrap_or("").trim();
        reasons.insert(name.trim(), (at, parts.next().unwrap_or("").trim()));
    }
    let mine = partition_peers(&rows, node);
    let same: Vec<&str> = (mine.iter().copied())
        .filter(|n| *n != node)
        .filter(|n| {
            reasons
                .get(n)
                .is_some_and(|(_, r)| reason::code_of(r) == Some(code))
        })
        .collect();
    let recent = same
        .iter()
        .filter(|n| reason_time(reasons[*n].0).is_none_or(|t| t >= since))
        .count();
    Fleet {
        nodes: mine.len(),
        same_code: same.len(),
        recent_same_code: recent,
    }
}

/// `sinfo %H`: `2026-11-28T06:56:26` in slurmctld's local time, which is
/// the node's (one site, one zone); `Unknown` or `None` read as `None`.
fn reason_time(text: &str) -> Option<i64> {
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").ok()?;
    chrono::Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp())
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
        let out = "n1|gpu|Unknown|hc: XID_79 gpu1\nn2|gpu|Unknown|none\nn3|gpu|Unknown|hc: MOUNT_MISSING /x\nn4|gpu|Unknown|bad fan\nc1|cpu|Unknown|hc: XID_79 gpu0\n";
        let f = parse_fleet(out, "n2", "XID_79", 0);
        assert_eq!(
            f,
            Fleet {
                nodes: 4,
                same_code: 1,
                recent_same_code: 1,
            }
        );
        let f = parse_fleet(out, "n1", "XID_79", 0);
        assert_eq!(f.same_code, 0, "our own reason does not count");
    }

    #[test]
    fn only_reasons_set_within_the_window_are_recent_and_a_reason_may_hold_a_bar() {
        let at = |t: &str| reason_time(t).unwrap();
        let since = at("2026-11-28T06:45:00");
        let out = "n1|gpu|2026-11-20T10:00:00|hc: ECC_VOLATILE_UNCORRECTED gpu5\n\
                   n2|gpu|2026-11-28T06:50:00|hc: ECC_VOLATILE_UNCORRECTED gpu1 | reset did not help\n\
                   n3|gpu|2026-11-28T06:44:59|hc: ECC_VOLATILE_UNCORRECTED gpu0\n\
                   n4|gpu|None|none\n";
        let f = parse_fleet(out, "n4", "ECC_VOLATILE_UNCORRECTED", since);
        assert_eq!(
            f,
            Fleet {
                nodes: 4,
                same_code: 3,
                recent_same_code: 1,
            }
        );
        assert_eq!(reason_time("Unknown"), None);
    }
}
