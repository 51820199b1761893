//! The verdict on one job from all its ranks' summaries (after XPUTimer):
//!
//! * **hang**: in a process group where some ranks are inside collective
//!   `S` and have not completed it, the ranks whose last started
//!   collective is before `S` never entered it: the others wait for them.
//!   Named only when they are a strict minority of the group's ranks (a
//!   dump taken while most ranks are between collectives says nothing).
//! * **straggler** (needs `TORCH_NCCL_ENABLE_TIMING=1`): the rank that
//!   arrives last at a collective spends the least time in it, because
//!   everyone else's kernel was already waiting for it. The rank whose
//!   duration is the shortest, at most half the others' median, in at
//!   least half of the timed collectives, is named. Failing that, the rank
//!   that starts collectives last by at least [`Params::min_lag_ms`], in at
//!   least half of them (node clocks must agree to better than that).
//!
//! Pure functions: no files, no Slurm. Ranks map to nodes through the
//! job's [`JobLayout`] (issue 36, "Task layout"), when one is given.

use crate::dump::{GroupSummary, RankSummary, State};
use joblog::JobLayout;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Thresholds of the straggler rules.
#[derive(Debug, Clone)]
pub struct Params {
    /// The others' median duration over the straggler's, at least.
    pub min_ratio: f64,
    /// The share of timed collectives that must point at the same rank.
    pub min_share: f64,
    /// And at least this many of them.
    pub min_collectives: usize,
    /// "Enters last" needs this lag behind the median start.
    pub min_lag_ms: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            min_ratio: 2.0,
            min_share: 0.5,
            min_collectives: 3,
            min_lag_ms: 10.0,
        }
    }
}

/// A rank the others wait for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Behind {
    pub rank: u32,
    pub node: Option<String>,
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    /// The op of its last started collective, if still in its ring.
    pub last_op: Option<String>,
}

/// A hang localized to a few ranks of one group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hang {
    pub group: String,
    /// The collective the others wait in.
    pub seq: i64,
    pub op: Option<String>,
    /// How many ranks are inside it.
    pub waiting: usize,
    pub ranks: Vec<Behind>,
}

/// How a straggler showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StragglerSign {
    /// Its collectives were short while everyone else's were long.
    ShortDurations,
    /// It started collectives last.
    EntersLast,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    pub group: String,
    pub rank: u32,
    pub node: Option<String>,
    pub sign: StragglerSign,
    /// Collectives that point at it, of those compared.
    pub collectives: usize,
    pub compared: usize,
    /// Median of the others' duration over its own (short durations), or
    /// its median lag in ms (enters last).
    pub measure: f64,
}

/// What the dumps of one job say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub ranks: usize,
    /// Ranks the layout has that left no dump.
    pub missing_ranks: Vec<u32>,
    pub hangs: Vec<Hang>,
    pub stragglers: Vec<Straggler>,
    /// Why nothing was named where something looked wrong.
    pub notes: Vec<String>,
}

impl Analysis {
    /// Every rank named, hang or straggler.
    pub fn named_ranks(&self) -> BTreeSet<u32> {
        let hung = self
            .hangs
            .iter()
            .flat_map(|h| h.ranks.iter().map(|b| b.rank));
        hung.chain(self.stragglers.iter().map(|s| s.rank)).collect()
    }
}

/// Analyzes the summaries of one job's ranks.
pub fn analyze(ranks: &[RankSummary], layout: Option<&JobLayout>, params: &Params) -> Analysis {
    let node = |rank: u32| {
        layout
            .and_then(|l| l.node_of_rank(rank))
            .map(str::to_string)
    };
    let mut out = Analysis {
        ranks: ranks.len(),
        missing_ranks: missing(ranks, layout),
        hangs: Vec::new(),
        stragglers: Vec::new(),
        notes: Vec::new(),
    };
    for (name, members) in by_group(ranks) {
        match hang(&name, &members, &node) {
            Ok(Some(h)) => out.hangs.push(h),
            Ok(None) => {}
            Err(note) => out.notes.push(note),
        }
        let straggler = short_durations(&name, &members, params)
            .or_else(|| enters_last(&name, &members, params));
        if let Some(mut s) = straggler {
            s.node = node(s.rank);
            out.stragglers.push(s);
        }
    }
    out
}

type Members<'a> = Vec<(u32, &'a GroupSummary)>;

fn by_group(ranks: &[RankSummary]) -> BTreeMap<String, Members<'_>> {
    let mut groups: BTreeMap<String, Members<'_>> = BTreeMap::new();
    for r in ranks {
        for (name, g) in &r.groups {
            groups.entry(name.clone()).or_default().push((r.rank, g));
        }
    }
    groups
}

fn missing(ranks: &[RankSummary], layout: Option<&JobLayout>) -> Vec<u32> {
    let Some(layout) = layout else {
        return Vec::new();
    };
    let have: BTreeSet<u32> = ranks.iter().map(|r| r.rank).collect();
    (0..layout.ranks()).filter(|r| !have.contains(r)).collect()
}

/// The hang in one group, if localized; Err(note) when ranks wait but no
/// minority can be blamed.
fn hang(
    name: &str,
    members: &Members<'_>,
    node: &dyn Fn(u32) -> Option<String>,
) -> Result<Option<Hang>, String> {
    let started = |g: &GroupSummary| g.last_started.unwrap_or(-1);
    let Some(frontier) = members.iter().map(|(_, g)| started(g)).max() else {
        return Ok(None);
    };
    let waiting: Vec<&(u32, &GroupSummary)> = members
        .iter()
        .filter(|(_, g)| started(g) == frontier && g.last_completed.unwrap_or(-1) < frontier)
        .collect();
    if frontier < 0 || waiting.is_empty() {
        return Ok(None);
    }
    let op = waiting
        .iter()
        .find_map(|(_, g)| g.op_of(frontier))
        .map(str::to_string);
    let behind: Vec<Behind> = members
        .iter()
        .filter(|(_, g)| started(g) < frontier)
        .map(|&(rank, g)| Behind {
            rank,
            node: node(rank),
            last_enqueued: g.last_enqueued,
            last_started: g.last_started,
            last_op: g.last_started.and_then(|s| g.op_of(s)).map(str::to_string),
        })
        .collect();
    let op_text = op.as_deref().unwrap_or("?");
    if behind.is_empty() {
        return Err(format!(
            "group {name}: all {} ranks are inside seq {frontier} ({op_text}); no rank is behind, the hang is not localized",
            members.len()
        ));
    }
    if behind.len() * 2 >= members.len() {
        return Err(format!(
            "group {name}: {} of {} ranks are before seq {frontier} ({op_text}); too many to blame",
            behind.len(),
            members.len()
        ));
    }
    Ok(Some(Hang {
        group: name.to_string(),
        seq: frontier,
        op,
        waiting: waiting.len(),
        ranks: behind,
    }))
}

/// Per collective seq, each member's value of `pick` when every member has one.
fn per_seq(
    members: &Members<'_>,
    pick: impl Fn(&crate::dump::Collective) -> Option<f64>,
) -> Vec<Vec<(u32, f64)>> {
    let mut seqs: BTreeMap<i64, Vec<(u32, f64)>> = BTreeMap::new();
    for &(rank, g) in members {
        for c in g.collectives.iter().filter(|c| c.state == State::Completed) {
            if let Some(v) = pick(c) {
                seqs.entry(c.seq).or_default().push((rank, v));
            }
        }
    }
    seqs.into_values()
        .filter(|v| v.len() == members.len())
        .collect()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The rank a tally points at, when it does so persistently.
fn persistent(
    tally: BTreeMap<u32, Vec<f64>>,
    compared: usize,
    params: &Params,
) -> Option<(u32, usize, f64)> {
    let (rank, measures) = tally.into_iter().max_by_key(|(_, m)| m.len())?;
    let count = measures.len();
    let enough =
        count >= params.min_collectives && count as f64 >= params.min_share * compared as f64;
    enough.then(|| (rank, count, median(measures)))
}

fn short_durations(name: &str, members: &Members<'_>, params: &Params) -> Option<Straggler> {
    if members.len() < 3 {
        return None;
    }
    let seqs = per_seq(members, |c| c.duration_ms);
    let mut tally: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for seq in &seqs {
        let &(rank, own) = seq.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let others = median(
            seq.iter()
                .filter(|(r, _)| *r != rank)
                .map(|(_, d)| *d)
                .collect(),
        );
        if others >= params.min_ratio * own.max(1e-6) {
            tally.entry(rank).or_default().push(others / own.max(1e-6));
        }
    }
    let (rank, collectives, measure) = persistent(tally, seqs.len(), params)?;
    Some(Straggler {
        group: name.to_string(),
        rank,
        node: None,
        sign: StragglerSign::ShortDurations,
        collectives,
        compared: seqs.len(),
        measure,
    })
}

fn enters_last(name: &str, members: &Members<'_>, params: &Params) -> Option<Straggler> {
    if members.len() < 3 {
        return None;
    }
    let seqs = per_seq(members, |c| c.started_ns.or(c.created_ns).map(|t| t as f64));
    let mut tally: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for seq in &seqs {
        let &(rank, t) = seq.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let lag_ms = (t - median(seq.iter().map(|(_, t)| *t).collect())) / 1e6;
        if lag_ms >= params.min_lag_ms {
            tally.entry(rank).or_default().push(lag_ms);
        }
    }
    let (rank, collectives, measure) = persistent(tally, seqs.len(), params)?;
    Some(Straggler {
        group: name.to_string(),
        rank,
        node: None,
        sign: StragglerSign::EntersLast,
        collectives,
        compared: seqs.len(),
        measure,
    })
}

impl std::fmt::Display for Analysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = |node: &Option<String>| {
            node.as_ref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default()
        };
        let seq = |s: Option<i64>| s.map_or("none".to_string(), |s| format!("seq {s}"));
        writeln!(f, "{} ranks read", self.ranks)?;
        for h in &self.hangs {
            let op = h.op.as_deref().unwrap_or("?");
            for b in &h.ranks {
                let last_op = b
                    .last_op
                    .as_deref()
                    .map(|o| format!(" ({o})"))
                    .unwrap_or_default();
                writeln!(
                    f,
                    "hang: rank {}{} never entered {op} seq {} of group {}, where {} ranks wait; its last started collective: {}{last_op}, last enqueued: {}",
                    b.rank, on(&b.node), h.seq, h.group, h.waiting, seq(b.last_started), seq(b.last_enqueued)
                )?;
            }
        }
        for s in &self.stragglers {
            let how = match s.sign {
                StragglerSign::ShortDurations => format!(
                    "its collectives were the shortest, the others' median {:.1}x as long",
                    s.measure
                ),
                StragglerSign::EntersLast => {
                    format!("it started last, {:.1} ms behind the median", s.measure)
                }
            };
            writeln!(
                f,
                "straggler: rank {}{} in group {}: {how}, in {} of {} collectives",
                s.rank,
                on(&s.node),
                s.group,
                s.collectives,
                s.compared
            )?;
        }
        if !self.missing_ranks.is_empty() {
            writeln!(f, "ranks without a dump: {:?}", self.missing_ranks)?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if self.hangs.is_empty() && self.stragglers.is_empty() {
            writeln!(f, "no rank named")?;
        }
        Ok(())
    }
}
