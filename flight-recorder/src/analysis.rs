//! The verdict on one job from all its ranks' summaries (after XPUTimer).
//!
//! Built on what every backend writes (issue 46): the collectives a rank
//! *enqueued* (their sequence ids, `last_enqueued_collective`) and when
//! (`time_created_ns`). Real PyTorch dumps need not carry more: on gloo, and
//! on NCCL without timing, every entry stays `scheduled`, the last started
//! collective stays -1 and there is no `duration_ms`. Where `started`,
//! `completed` and durations are there, they refine the verdict.
//!
//! * **hang**: in a process group, the frontier is the furthest collective
//!   any rank enqueued. When some ranks enqueued it and have not completed
//!   it, the ranks that never enqueued it are the ones the others wait for.
//!   Named only when they are a strict minority of the group's ranks (a
//!   dump taken while most ranks are between collectives says nothing). A
//!   backend that marks a timed-out collective completed on some ranks
//!   (gloo does, racily) does not hide it while one rank still waits.
//! * **straggler**: with durations (`TORCH_NCCL_ENABLE_TIMING=1`), the rank
//!   that arrives last at a collective spends the least time in it, because
//!   everyone else was already waiting: the rank whose duration is the
//!   shortest, at most half the others' median, in at least half of the
//!   timed collectives. Failing that, the rank that enqueues (or starts)
//!   collectives last by at least [`Params::min_lag_ms`], in at least half
//!   of them (node clocks must agree to better than that).
//!
//! When nobody is named, a note says why. Pure functions: no files, no
//! Slurm. Ranks map to nodes through the job's [`JobLayout`] (issue 36,
//! "Task layout"), when one is given.

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
    /// The op of the last collective it reached, if still in its ring.
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
    let groups = by_group(ranks);
    for (name, members) in &groups {
        let mut said = true;
        match hang(name, members, &node) {
            Ok(Some(h)) => out.hangs.push(h),
            Ok(None) => said = false,
            Err(note) => out.notes.push(note),
        }
        let straggler =
            short_durations(name, members, params).or_else(|| enters_last(name, members, params));
        if let Some(mut s) = straggler {
            s.node = node(s.rank);
            out.stragglers.push(s);
        } else if !said {
            out.notes.push(quiet_note(name, members));
        }
    }
    if groups.is_empty() {
        out.notes.push(format!(
            "these dumps carry no progress markers: none of the {} ranks' dumps holds a process group",
            ranks.len()
        ));
    }
    if !out.missing_ranks.is_empty() {
        let of = layout.map_or(ranks.len() as u32, JobLayout::ranks);
        out.notes.push(format!(
            "{} of {of} ranks have no dump: a rank that never wrote one may be the one the others wait for",
            out.missing_ranks.len()
        ));
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

/// How far a rank got in a group: the furthest collective it enqueued,
/// by its counter or by the entries still in its ring.
fn enqueued(g: &GroupSummary) -> i64 {
    let in_ring = g.collectives.iter().map(|c| c.seq).max();
    [g.last_enqueued, g.last_started, in_ring]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(-1)
}

/// Whether the rank completed collective `seq`, by its counter or its entry.
fn completed(g: &GroupSummary, seq: i64) -> bool {
    g.last_completed.is_some_and(|c| c >= seq)
        || g.collectives
            .iter()
            .any(|c| c.seq == seq && c.state == State::Completed)
}

/// The hang in one group, if localized; Err(note) when ranks wait but no
/// minority can be blamed. Judged by what the ranks enqueued; where every
/// rank enqueued the frontier and the dumps carry start markers, by what
/// they started (a rank that enqueued a collective but never launched it).
fn hang(
    name: &str,
    members: &Members<'_>,
    node: &dyn Fn(u32) -> Option<String>,
) -> Result<Option<Hang>, String> {
    let by_enqueue = hang_by(name, members, node, &enqueued, "enqueued");
    let has_starts = members.iter().any(|(_, g)| g.last_started.is_some());
    match by_enqueue {
        Err(note) if has_starts && note.contains("no rank is behind") => {
            let started = |g: &GroupSummary| g.last_started.unwrap_or(-1);
            hang_by(name, members, node, &started, "started").or(Err(note))
        }
        other => other,
    }
}

/// The hang in one group by one measure of a rank's progress.
fn hang_by(
    name: &str,
    members: &Members<'_>,
    node: &dyn Fn(u32) -> Option<String>,
    progress: &dyn Fn(&GroupSummary) -> i64,
    verb: &str,
) -> Result<Option<Hang>, String> {
    let Some(frontier) = members.iter().map(|(_, g)| progress(g)).max() else {
        return Ok(None);
    };
    let waiting = members
        .iter()
        .filter(|(_, g)| progress(g) == frontier && !completed(g, frontier))
        .count();
    if frontier < 0 || waiting == 0 {
        return Ok(None);
    }
    let op = members
        .iter()
        .find_map(|(_, g)| g.op_of(frontier))
        .map(str::to_string);
    let behind: Vec<Behind> = members
        .iter()
        .filter(|(_, g)| progress(g) < frontier)
        .map(|&(rank, g)| Behind {
            rank,
            node: node(rank),
            last_enqueued: Some(enqueued(g)).filter(|&s| s >= 0),
            last_started: g.last_started,
            last_op: g.op_of(progress(g)).map(str::to_string),
        })
        .collect();
    let op_text = op.as_deref().unwrap_or("?");
    if behind.is_empty() {
        return Err(format!(
            "group {name}: all {} ranks {verb} seq {frontier} ({op_text}) and {waiting} have not completed it; no rank is behind, the hang is not localized",
            members.len()
        ));
    }
    if behind.len() * 2 >= members.len() {
        return Err(format!(
            "group {name}: {} of {} ranks never {verb} seq {frontier} ({op_text}); too many to blame",
            behind.len(),
            members.len()
        ));
    }
    Ok(Some(Hang {
        group: name.to_string(),
        seq: frontier,
        op,
        waiting,
        ranks: behind,
    }))
}

/// Why a group named nobody, when its dumps show no trouble at all.
fn quiet_note(name: &str, members: &Members<'_>) -> String {
    let enq: BTreeSet<i64> = members.iter().map(|(_, g)| enqueued(g)).collect();
    match (enq.first(), enq.last()) {
        (Some(_), Some(&hi)) if hi < 0 => format!(
            "group {name}: these dumps carry no progress markers (no collective enqueued in any of {} ranks)",
            members.len()
        ),
        (Some(&lo), Some(&hi)) if lo == hi => format!(
            "group {name}: no rank is behind: every rank of {} enqueued seq {hi}, and no rank stood out in time",
            members.len()
        ),
        (Some(&lo), Some(&hi)) => format!(
            "group {name}: ranks enqueued seq {lo} to {hi} and every rank at {hi} completed it: the dumps were taken at different moments, not in a hang"
        ),
        _ => format!("group {name}: no rank in it"),
    }
}

/// Per collective seq, each member's value of `pick` when every member has
/// one, whatever the entries' state (real dumps may leave every entry
/// `scheduled`).
fn per_seq(
    members: &Members<'_>,
    pick: impl Fn(&crate::dump::Collective) -> Option<f64>,
) -> Vec<Vec<(u32, f64)>> {
    let mut seqs: BTreeMap<i64, Vec<(u32, f64)>> = BTreeMap::new();
    for &(rank, g) in members {
        for c in &g.collectives {
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
                    "hang: rank {}{} never entered {op} seq {} of group {}, where {} ranks wait; last enqueued: {}{last_op}, last started: {}",
                    b.rank, on(&b.node), h.seq, h.group, h.waiting, seq(b.last_enqueued), seq(b.last_started)
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
                    format!(
                        "it reached them last, {:.1} ms behind the median",
                        s.measure
                    )
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
