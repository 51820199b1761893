//! The node evidence of a time range (findings and node events, failed
//! task exits) and the categories of our reason codes.

use super::{Rule, AFTER_END_S, BEFORE_END_S};
use std::borrow::Cow;
use std::collections::HashMap;

/// Something seen on a node at a time.
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: i64,
    /// `xid`, `ecc`, `pcie`, `ib`, `mounts`, ..., `slurm`; borrowed for our
    /// own codes' families, owned for a site's check names.
    pub category: Cow<'static, str>,
    /// What was seen: `finding XID_79 gpu3`, `event DOWN: Not responding`.
    pub what: String,
}

/// The node evidence of a time range, per node, sorted by time.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Drain/down findings of the health checks, per node.
    pub findings: HashMap<i64, Vec<Mark>>,
    /// Node events of our checks and of Slurm, per node.
    pub events: HashMap<i64, Vec<Mark>>,
    /// Failed task exits per job id: (node, Unix **milliseconds**), so that
    /// tasks ending within one second are still ordered. Records without
    /// milliseconds are given as their second times 1000.
    pub task_fails_ms: HashMap<i64, Vec<(i64, i64)>>,
}

impl Evidence {
    /// Sorts the per-node lists; call once after filling.
    pub fn sort(&mut self) {
        for v in self.findings.values_mut().chain(self.events.values_mut()) {
            v.sort_by_key(|m| m.at);
        }
        for v in self.task_fails_ms.values_mut() {
            v.sort_by_key(|&(node, at_ms)| (at_ms, node));
        }
    }
}

/// The node evidence by time, for the windows of the failed runs: the
/// attribution looks at every node of every failed run (8.5 million node
/// slots in a month of large jobs), but only a few dozen findings or
/// events fall into any one window fleet-wide. So each run marks its
/// nodes, and the marks of its window are checked against them; looking
/// each node up instead cost more than all the rest of the attribution.
pub(super) struct ByTime<'e> {
    /// Every finding as (at, node, mark), by time then node.
    findings: Vec<(i64, i64, &'e Mark)>,
    events: Vec<(i64, i64, &'e Mark)>,
    /// `marked[node]`: the number of the run that marked it last.
    marked: Vec<u32>,
    runs: u32,
}

impl<'e> ByTime<'e> {
    pub(super) fn new(ev: &'e Evidence) -> Self {
        let findings = ByTime::by_time(&ev.findings);
        let events = ByTime::by_time(&ev.events);
        let nodes = findings
            .iter()
            .chain(&events)
            .filter_map(|&(_, node, _)| usize::try_from(node).ok())
            .max()
            .map_or(0, |n| n + 1);
        ByTime {
            findings,
            events,
            marked: vec![0; nodes],
            runs: 0,
        }
    }

    /// Stable, so that one node's marks of one second keep their order.
    fn by_time(map: &'e HashMap<i64, Vec<Mark>>) -> Vec<(i64, i64, &'e Mark)> {
        let mut list: Vec<(i64, i64, &Mark)> = map
            .iter()
            .flat_map(|(&node, marks)| marks.iter().map(move |m| (m.at, node, m)))
            .collect();
        list.sort_by_key(|&(at, node, _)| (at, node));
        list
    }

    /// The earliest (then lowest node id) mark of `list` in `[lo, hi]` on a marked node.
    fn earliest_in(
        &self,
        list: &[(i64, i64, &'e Mark)],
        lo: i64,
        hi: i64,
    ) -> Option<(i64, &'e Mark)> {
        let first = list.partition_point(|&(at, _, _)| at < lo);
        list[first..]
            .iter()
            .take_while(|&&(at, _, _)| at <= hi)
            .find(|&&(_, node, _)| {
                usize::try_from(node)
                    .ok()
                    .and_then(|n| self.marked.get(n))
                    .is_some_and(|&run| run == self.runs)
            })
            .map(|&(_, node, m)| (node, m))
    }

    /// The earliest finding, else the earliest event, on `nodes` in the window of `end`.
    pub(super) fn node_evidence(
        &mut self,
        nodes: &[i64],
        end: i64,
    ) -> Option<(i64, &'e Mark, Rule)> {
        let (lo, hi) = (end - BEFORE_END_S, end + AFTER_END_S);
        let in_window = |list: &[(i64, i64, &Mark)]| {
            let first = list.partition_point(|&(at, _, _)| at < lo);
            list.get(first).is_some_and(|&(at, _, _)| at <= hi)
        };
        if !in_window(&self.findings) && !in_window(&self.events) {
            return None;
        }
        self.runs += 1;
        for &node in nodes {
            if let Some(m) = usize::try_from(node)
                .ok()
                .and_then(|n| self.marked.get_mut(n))
            {
                *m = self.runs;
            }
        }
        self.earliest_in(&self.findings, lo, hi)
            .map(|(n, m)| (n, m, Rule::Finding))
            .or_else(|| {
                self.earliest_in(&self.events, lo, hi)
                    .map(|(n, m)| (n, m, Rule::NodeEvent))
            })
    }
}

/// The category of each family of our reason codes, by the code's first
/// word: the check that owns the hardware, so that the reliability report
/// groups `EDAC_UE` (memory check) with `EDAC_CE_LOGGED` (kernel log) and
/// `MCE_*` apart from the GPU's XIDs although one pass finds both.
const CODE_CATEGORIES: &[(&str, &str)] = &[
    ("XID", "xid"),
    ("ECC", "ecc"),
    ("ROW", "ecc"),
    ("ROWS", "ecc"),
    ("RETIRED", "ecc"),
    ("NVLINK", "nvlink"),
    ("PCIE", "pcie"),
    ("IB", "ib"),
    ("MOUNT", "mounts"),
    ("NFS", "mounts"),
    ("GPU", "gpu"),
    ("DRIVER", "gpu"),
    ("VBIOS", "gpu"),
    ("INFOROM", "gpu"),
    ("CLOCKS", "clocks"),
    ("MEM", "memory"),
    ("EDAC", "memory"),
    ("MCE", "mce"),
    ("CPU", "cpus"),
    ("NVME", "block"),
    ("BLOCK", "block"),
    ("FS", "block"),
    ("SERVICE", "services"),
    ("FIRMWARE", "firmware"),
];

/// The category of one of our reason codes, `None` for a code we do not
/// know (a site's own check, a newer node's code).
pub fn known_category(code: &str) -> Option<&'static str> {
    let head = code.split('_').next().unwrap_or(code);
    CODE_CATEGORIES
        .iter()
        .find(|(word, _)| head.eq_ignore_ascii_case(word))
        .map(|&(_, category)| category)
}

/// The category of one of our reason codes: `XID_79` is `xid`,
/// `EDAC_UE` `memory`, `MOUNT_HUNG` `mounts`; an unknown code its first
/// word in lower case.
pub fn category_of_code(code: &str) -> String {
    match known_category(code) {
        Some(category) => category.into(),
        None => match code.split('_').next().unwrap_or("") {
            "" => "unknown".into(),
            head => head.to_ascii_lowercase(),
        },
    }
}
