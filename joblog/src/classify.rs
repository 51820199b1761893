//! One verdict per job from what its logs say (issue 36, "Interpretation
//! details"), in this order of precedence:
//!
//! 1. a hardware line that names a node (by host, by rank through the
//!    layout, or because the job ran on one node) blames that node; lines
//!    naming several nodes go to the most telling component (a GPU error
//!    causes its peers' network errors, not the reverse), then to the node
//!    with most lines, else the verdict is hardware, not localized;
//! 2. a user line (exception, CUDA or cgroup OOM) makes it the job's own,
//!    and so does the same GPU or memory error on every rank of every node
//!    (two ranks at least): a program fails the same way everywhere, a
//!    broken GPU does not;
//! 3. when every rank but one printed a collateral timeout, the silent one
//!    is the suspect (or the one node none of whose ranks printed one);
//! 4. a hardware line that names no node: hardware, not localized;
//! 5. anything else: unknown.
//!
//! `srun`'s exit-code lines and OOM kills are never hardware (the catalog
//! classes them unknown and user), and `ignore` lines (NCCL start-up
//! warnings) are dropped before any of this.

use crate::catalog::{Catalog, Class, Component, Localize};
use crate::evidence::evidence_line;
use crate::layout::JobLayout;
use crate::scan::Hit;
use crate::tail::LogTail;
use std::collections::{BTreeMap, BTreeSet};

/// The most evidence lines a verdict keeps.
pub const MAX_EVIDENCE: usize = 2;

/// Past this many ranks (a layout from a wrong AllocTRES), the rules that
/// walk every rank are not applied.
const MAX_RANKS_WALKED: u32 = 1 << 20;

/// What the job's logs say about its failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VerdictKind {
    /// The job's own failure: never counts against a node.
    User,
    /// A hardware fault of this node (one of the job's nodes).
    HardwareOn(String),
    /// A hardware fault on a node the logs do not name.
    HardwareUnlocalized,
    /// The logs say nothing decisive (or there were none).
    Unknown,
}

impl VerdictKind {
    /// A stable short name for storage: `user`, `hardware`,
    /// `hardware_unlocalized`, `unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            VerdictKind::User => "user",
            VerdictKind::HardwareOn(_) => "hardware",
            VerdictKind::HardwareUnlocalized => "hardware_unlocalized",
            VerdictKind::Unknown => "unknown",
        }
    }

    /// The node blamed, for [`VerdictKind::HardwareOn`].
    pub fn node(&self) -> Option<&str> {
        match self {
            VerdictKind::HardwareOn(node) => Some(node),
            _ => None,
        }
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerdictKind::HardwareOn(node) => write!(f, "hardware on {node}"),
            VerdictKind::HardwareUnlocalized => f.write_str("hardware, not localized"),
            other => f.write_str(other.name()),
        }
    }
}

/// The verdict on one job, with up to [`MAX_EVIDENCE`] lines that show it,
/// sanitised (printable, at most 200 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub evidence: Vec<String>,
}

/// The verdict on a job that ran with `layout` and left `tails` (its
/// stdout and stderr, one or both), by the signatures of `catalog`.
pub fn classify(layout: &JobLayout, tails: &[LogTail], catalog: &Catalog) -> Verdict {
    let hits: Vec<Hit> = tails
        .iter()
        .flat_map(|t| catalog.scan(t))
        .filter(|h| h.signature.class != Class::Ignore)
        .collect();
    let sorted = Sorted::new(layout, &hits);
    sorted
        .localized_hardware()
        .or_else(|| sorted.users())
        .or_else(|| sorted.odd_one_out())
        .or_else(|| sorted.unlocalized_hardware())
        .unwrap_or_else(|| sorted.unknown())
}

/// A job's hits, sorted by what they can decide.
struct Sorted<'a> {
    layout: &'a JobLayout,
    located: Vec<(&'a Hit<'a, 'a>, &'a str)>,
    unlocated: Vec<&'a Hit<'a, 'a>>,
    /// User lines, and hardware lines printed by every rank.
    user: Vec<&'a Hit<'a, 'a>>,
    collateral: Vec<&'a Hit<'a, 'a>>,
    unknown: Vec<&'a Hit<'a, 'a>>,
}

impl<'a> Sorted<'a> {
    fn new(layout: &'a JobLayout, hits: &'a [Hit<'a, 'a>]) -> Sorted<'a> {
        let job_own = everywhere_signatures(layout, hits);
        let mut s = Sorted {
            layout,
            located: Vec::new(),
            unlocated: Vec::new(),
            user: Vec::new(),
            collateral: Vec::new(),
            unknown: Vec::new(),
        };
        for hit in hits {
            match hit.signature.class {
                Class::Hardware if job_own.contains(hit.signature.id.as_str()) => s.user.push(hit),
                Class::Hardware => match blamed_node(layout, hit) {
                    Some(node) => s.located.push((hit, node)),
                    None => s.unlocated.push(hit),
                },
                Class::User => s.user.push(hit),
                Class::Collateral => s.collateral.push(hit),
                Class::Unknown => s.unknown.push(hit),
                Class::Ignore => {}
            }
        }
        s
    }

    fn localized_hardware(&self) -> Option<Verdict> {
        // Per node: its most telling component, then its number of lines.
        let mut by_node: BTreeMap<&str, (u8, usize)> = BTreeMap::new();
        for (hit, node) in &self.located {
            let entry = by_node.entry(node).or_insert((u8::MAX, 0));
            entry.0 = entry.0.min(telling(hit.signature.component));
            entry.1 += 1;
        }
        let best = by_node
            .values()
            .map(|&(c, n)| (c, std::cmp::Reverse(n)))
            .min()?;
        let mut winners = by_node
            .iter()
            .filter(|(_, &(c, n))| (c, std::cmp::Reverse(n)) == best);
        let (node, _) = winners.next()?;
        if winners.next().is_some() {
            let lines = self.located.iter().map(|(h, _)| *h);
            return Some(verdict(VerdictKind::HardwareUnlocalized, lines));
        }
        let own = self
            .located
            .iter()
            .filter(|(_, n)| n == node)
            .map(|(h, _)| *h);
        let rest = self.collateral.iter().copied();
        Some(verdict(
            VerdictKind::HardwareOn(node.to_string()),
            own.chain(rest),
        ))
    }

    fn users(&self) -> Option<Verdict> {
        (!self.user.is_empty()).then(|| verdict(VerdictKind::User, self.user.iter().copied()))
    }

    fn odd_one_out(&self) -> Option<Verdict> {
        if self.collateral.is_empty() {
            return None;
        }
        let suspect = self.silent_rank_node().or_else(|| self.silent_node())?;
        let lines = self.unlocated.iter().chain(&self.collateral).copied();
        Some(verdict(VerdictKind::HardwareOn(suspect.to_string()), lines))
    }

    /// The node of the one rank that printed no collateral line, or of the
    /// one node all of whose ranks (and only they) printed none.
    fn silent_rank_node(&self) -> Option<&'a str> {
        let total = self.layout.ranks();
        let printed: BTreeSet<u32> = self
            .collateral
            .iter()
            .flat_map(|h| h.ranks.iter().copied())
            .collect();
        // Ranks the layout does not have: the layout is wrong, do not guess.
        if !(2..=MAX_RANKS_WALKED).contains(&total)
            || printed.is_empty()
            || printed.iter().any(|&r| r >= total)
        {
            return None;
        }
        let silent: Vec<u32> = (0..total).filter(|r| !printed.contains(r)).collect();
        let node = self.layout.node_of_rank(*silent.first()?)?;
        let one_node = silent
            .iter()
            .all(|&r| self.layout.node_of_rank(r) == Some(node));
        let whole_node =
            silent.len() as u32 == self.layout.tasks_per_node() && self.layout.nodes().len() >= 2;
        (silent.len() == 1 || (one_node && whole_node)).then_some(node)
    }

    /// The one node of a multi-node job that no collateral line came from.
    fn silent_node(&self) -> Option<&'a str> {
        let nodes = self.layout.nodes();
        let printed: BTreeSet<&str> = self
            .collateral
            .iter()
            .flat_map(|h| origin_nodes(self.layout, h))
            .collect();
        if nodes.len() < 2 || printed.len() + 1 != nodes.len() {
            return None;
        }
        nodes
            .iter()
            .map(String::as_str)
            .find(|n| !printed.contains(n))
    }

    fn unlocalized_hardware(&self) -> Option<Verdict> {
        (!self.unlocated.is_empty()).then(|| {
            verdict(
                VerdictKind::HardwareUnlocalized,
                self.unlocated.iter().copied(),
            )
        })
    }

    fn unknown(&self) -> Verdict {
        let lines = self.collateral.iter().chain(&self.unknown).copied();
        verdict(VerdictKind::Unknown, lines)
    }
}

/// The order in which components explain a failure: a dead GPU or bad
/// memory takes its process down, and its peers then see network errors.
fn telling(component: Component) -> u8 {
    match component {
        Component::Gpu => 0,
        Component::Memory => 1,
        Component::Storage => 2,
        Component::Network => 3,
        Component::Software => 4,
    }
}

/// The node a hardware line blames: the one it names by its localize rule,
/// else the job's only node.
fn blamed_node<'a>(layout: &'a JobLayout, hit: &Hit) -> Option<&'a str> {
    let named = match hit.signature.localize {
        Localize::HostInLine => hit.host.as_deref().and_then(|h| layout.node_named(h)),
        Localize::RankInLine => one_node(hit.ranks.iter().map(|&r| layout.node_of_rank(r))),
        Localize::None => None,
    };
    match layout.nodes() {
        [only] => named.or(Some(only.as_str())),
        _ => named,
    }
}

fn one_node<'a>(mut nodes: impl Iterator<Item = Option<&'a str>>) -> Option<&'a str> {
    let first = nodes.next()??;
    nodes.all(|n| n == Some(first)).then_some(first)
}

/// The job's nodes a line came from, by host or by rank, whatever the
/// signature's localize rule.
fn origin_nodes<'a>(layout: &'a JobLayout, hit: &Hit) -> BTreeSet<&'a str> {
    let by_host = hit.host.as_deref().and_then(|h| layout.node_named(h));
    let by_rank = hit.ranks.iter().filter_map(|&r| layout.node_of_rank(r));
    by_host.into_iter().chain(by_rank).collect()
}

/// The GPU and memory signatures that every rank of every node printed:
/// by rank where the lines name ranks (two at least), else by node.
fn everywhere_signatures<'a>(layout: &JobLayout, hits: &'a [Hit]) -> BTreeSet<&'a str> {
    let mut groups: BTreeMap<&str, Vec<&Hit>> = BTreeMap::new();
    for hit in hits {
        let s = hit.signature;
        if s.class == Class::Hardware && matches!(s.component, Component::Gpu | Component::Memory) {
            groups.entry(s.id.as_str()).or_default().push(hit);
        }
    }
    groups.retain(|_, group| {
        let ranks: BTreeSet<u32> = group.iter().flat_map(|h| h.ranks.iter().copied()).collect();
        if !ranks.is_empty() {
            let all = layout.ranks();
            return ranks.len() >= 2
                && all <= MAX_RANKS_WALKED
                && (0..all).all(|r| ranks.contains(&r));
        }
        let nodes: BTreeSet<&str> = group.iter().flat_map(|h| origin_nodes(layout, h)).collect();
        layout.nodes().len() >= 2 && nodes.len() == layout.nodes().len()
    });
    groups.into_keys().collect()
}

/// A verdict with the first [`MAX_EVIDENCE`] distinct lines of `hits`.
fn verdict<'h>(kind: VerdictKind, hits: impl Iterator<Item = &'h Hit<'h, 'h>>) -> Verdict {
    let mut evidence: Vec<String> = Vec::with_capacity(MAX_EVIDENCE);
    for hit in hits {
        let line = evidence_line(hit.line);
        if !line.is_empty() && !evidence.contains(&line) {
            evidence.push(line);
        }
        if evidence.len() == MAX_EVIDENCE {
            break;
        }
    }
    Verdict { kind, evidence }
}
