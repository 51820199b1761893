//! Where a job's ranks ran: its nodes in NodeList order and how many tasks
//! each ran. Unless told otherwise (issue 36, "Task layout"), one task per
//! allocated GPU, in blocks over the nodes: ranks 0-7 on the first of 8-GPU
//! nodes, 8-15 on the second, and so on.

/// A job's nodes and its task layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLayout {
    nodes: Vec<String>,
    tasks_per_node: u32,
}

impl JobLayout {
    /// `nodes` in NodeList order (already expanded from a hostlist), one
    /// task per GPU; with no GPUs, one task per node.
    pub fn new(nodes: Vec<String>, gpus_per_node: u32) -> JobLayout {
        JobLayout {
            nodes,
            tasks_per_node: gpus_per_node.max(1),
        }
    }

    /// The layout from sacct's AllocTRES (`cpu=64,gres/gpu=16,mem=1T,node=2`):
    /// its `gres/gpu` count (the job's total) spread over the nodes.
    pub fn from_alloc_tres(nodes: Vec<String>, alloc_tres: &str) -> JobLayout {
        let total = gpus_in_tres(alloc_tres);
        let per_node = total.div_ceil(nodes.len().max(1) as u32);
        JobLayout::new(nodes, per_node)
    }

    /// The nodes, in NodeList order.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Tasks (ranks) on each node.
    pub fn tasks_per_node(&self) -> u32 {
        self.tasks_per_node
    }

    /// How many ranks the job has.
    pub fn ranks(&self) -> u32 {
        self.tasks_per_node.saturating_mul(self.nodes.len() as u32)
    }

    /// The node rank `rank` ran on, if the job has that rank.
    pub fn node_of_rank(&self, rank: u32) -> Option<&str> {
        self.nodes
            .get((rank / self.tasks_per_node) as usize)
            .map(String::as_str)
    }

    /// The job's node that `host` names: the same name, or the same first
    /// label (NCCL prints the host name, which may be `gpu042.cluster`).
    pub fn node_named(&self, host: &str) -> Option<&str> {
        let short = |n: &str| n.split('.').next().unwrap_or(n).to_string();
        self.nodes
            .iter()
            .find(|n| n.as_str() == host)
            .or_else(|| self.nodes.iter().find(|n| short(n) == short(host)))
            .map(String::as_str)
    }
}

/// The GPU count of an AllocTRES string: `gres/gpu=N`, else the sum of the
/// typed `gres/gpu:TYPE=N` entries; 0 when it has none.
fn gpus_in_tres(tres: &str) -> u32 {
    let mut typed = 0u32;
    for entry in tres.split(',') {
        let Some((key, value)) = entry.trim().split_once('=') else {
            continue;
        };
        let Ok(n) = value.trim().parse::<u32>() else {
            continue;
        };
        if key == "gres/gpu" {
            return n;
        }
        if key.starts_with("gres/gpu:") {
            typed = typed.saturating_add(n);
        }
    }
    typed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranks_are_laid_out_in_blocks_of_gpus_over_the_node_list() {
        let l = JobLayout::new(nodes(&["gpu01", "gpu02"]), 8);
        assert_eq!(l.ranks(), 16);
        assert_eq!(l.node_of_rank(0), Some("gpu01"));
        assert_eq!(l.node_of_rank(7), Some("gpu01"));
        assert_eq!(l.node_of_rank(8), Some("gpu02"));
        assert_eq!(l.node_of_rank(16), None);
    }

    #[test]
    fn alloc_tres_gives_the_gpus_per_node() {
        let two = nodes(&["a", "b"]);
        let l = JobLayout::from_alloc_tres(
            two.clone(),
            "billing=128,cpu=128,gres/gpu=16,mem=2T,node=2",
        );
        assert_eq!(l.tasks_per_node(), 8);
        let l = JobLayout::from_alloc_tres(two.clone(), "cpu=8,gres/gpu:h100=4,mem=1G,node=2");
        assert_eq!(l.tasks_per_node(), 2);
        let l = JobLayout::from_alloc_tres(two, "cpu=8,mem=1G,node=2");
        assert_eq!(l.tasks_per_node(), 1, "no GPUs: one task per node");
    }

    #[test]
    fn a_host_name_matches_its_node_by_full_or_short_name() {
        let l = JobLayout::new(nodes(&["gpu042", "gpu043.cluster"]), 8);
        assert_eq!(l.node_named("gpu042"), Some("gpu042"));
        assert_eq!(l.node_named("gpu042.cluster.local"), Some("gpu042"));
        assert_eq!(l.node_named("gpu043"), Some("gpu043.cluster"));
        assert_eq!(l.node_named("gpu44"), None);
    }
}
