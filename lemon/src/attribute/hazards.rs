//! Rule 5 of the attribution: the joint estimate of the nodes' hardware
//! hazards and the users' own failure rates.

use super::{
    exit_text, Attribution, AttributionParams, FailedRun, Rule, UserRecord, UserStats,
    PRIOR_NODE_DAYS,
};
use crate::fast_hash::FastMap;
use crate::job_state::JobState;
use std::collections::HashMap;

/// Rule 5: the joint estimate of the nodes' hardware hazards and the users'
/// own failure rates, for the runs that no evidence decides.
///
/// A run of `d` days on nodes with hazards `h` (hardware failures per
/// node-day) ends in a hardware failure of its kind (signal or plain exit)
/// with rate `π·h·d` per node, `π` the share of hardware failures with that
/// signature; its user fails it with their rate `u` elsewhere. The chance
/// that node `n` caused it is `π·h_n·d / (u + Σ π·h·d)`. The hazards are
/// estimated from the failures evidence blames plus these chances (an EM
/// iteration), each node starting from [`PRIOR_NODE_DAYS`] at the fleet
/// rate, and a run's own chance never raises its nodes' hazards.
pub(super) struct Hazards {
    /// Per weighed run: the user's rate.
    user_rates: Vec<f64>,
    /// Each node's chance, all weighed runs' in one list (the rounds go
    /// through it 50 times: one allocation per run scattered it over the
    /// heap, and the rounds waited on memory): run `k`'s are
    /// `spans[k]..spans[k + 1]`.
    chances: Vec<f64>,
    spans: Vec<usize>,
    /// Per weighed run: the user's record it was weighed with.
    records: Vec<UserRecord>,
}

impl Hazards {
    pub(super) fn estimate(
        runs: &[FailedRun],
        weighed: &[usize],
        user_share: &[f64],
        decided: &[Option<Attribution>],
        users: &UserStats,
        node_days: &HashMap<i64, f64>,
    ) -> Hazards {
        let total_days: f64 = node_days.values().sum();
        let (hard, share_signal, share_exit) = blamed_by_evidence(runs, decided);
        let records: Vec<UserRecord> = weighed
            .iter()
            .map(|&i| users.elsewhere(runs[i].user, &runs[i]))
            .collect();
        // Per weighed run: user rate, hardware rate per unit hazard.
        let base: Vec<(f64, f64)> = weighed
            .iter()
            .zip(&records)
            .zip(user_share)
            .map(|((&i, rec), &user_share)| {
                let share = if runs[i].signal().is_some() {
                    share_signal
                } else {
                    share_exit
                };
                // Only a node fails a job with NODE_FAIL.
                let u = if runs[i].state == JobState::NodeFail {
                    0.0
                } else {
                    rec.rate() * user_share
                };
                (u, share * runs[i].days().max(1.0 / 24.0))
            })
            .collect();
        let (dense, slots, mut chances, spans) = first_chances(runs, weighed);
        let mut hard_dense = vec![0.0; dense.len()];
        let mut days_dense = vec![0.0; dense.len()];
        for (n, d) in dense.nodes() {
            hard_dense[d] = hard.get(n).copied().unwrap_or(0.0);
            days_dense[d] = node_days.get(n).copied().unwrap_or(0.0) + PRIOR_NODE_DAYS;
        }
        let hard_total: f64 = hard.values().sum();
        let rounds = Rounds {
            slots: &slots,
            spans: &spans,
            base: &base,
            hard: &hard_dense,
            days: &days_dense,
            hard_total,
            total_days,
        };
        rounds.settle(&mut chances);
        Hazards {
            user_rates: base.iter().map(|&(u, _)| u).collect(),
            chances,
            spans,
            records,
        }
    }

    /// The verdict on the `k`th weighed run: its likeliest node's when that
    /// node's chance is at least one half, else the user's (or nobody's).
    pub(super) fn verdict(
        &self,
        k: usize,
        run: &FailedRun,
        users: &UserStats,
        p: &AttributionParams,
    ) -> Attribution {
        let (u, chances) = (
            &self.user_rates[k],
            &self.chances[self.spans[k]..self.spans[k + 1]],
        );
        let record =
            p.text(|| record_text(&users.names[run.user as usize], self.records[k], *u, run));
        let best = chances
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)));
        if let Some((j, &w)) = best.filter(|&(_, &w)| w >= 0.5) {
            let rule = match (run.nodes.len(), run.signal()) {
                (1, Some(_)) => Rule::SignalDeath,
                (1, None) => Rule::NodeExit,
                _ => Rule::NodeHazard,
            };
            let category = if run.state == JobState::NodeFail {
                "node_fail"
            } else if run.signal().is_some() {
                "signal"
            } else {
                "exit"
            };
            let detail = p.text(|| {
                let among = if run.nodes.len() > 1 {
                    format!(" (of {} nodes)", run.nodes.len())
                } else {
                    String::new()
                };
                format!(
                    "{}; {record}; the node's hardware{among} explains it with chance {w:.2}",
                    exit_text(run)
                )
            });
            return Attribution::node(run.nodes[j], rule, category, detail);
        }
        let best = best.map_or(0.0, |(_, &w)| w);
        not_one_nodes(run, &record, chances.iter().sum(), best, p)
    }
}

/// The weighed runs' node slots (dense node indices), each slot's first
/// chance, and where each run's slots start.
///
/// Start from every signal death its nodes' and every plain exit its
/// user's: a node that kills jobs shows from the first round, and users'
/// everyday bugs do not inflate the hazards they are weighed by. The
/// rounds touch every node of every weighed run up to 50 times: dense
/// indices instead of hash lookups (millions of node slots in a fleet's
/// month of large jobs).
fn first_chances(
    runs: &[FailedRun],
    weighed: &[usize],
) -> (DenseNodes, Vec<u32>, Vec<f64>, Vec<usize>) {
    let mut dense = DenseNodes::new(runs, weighed);
    // Sized once: a million slots grown by doubling were copied twice over.
    let total: usize = weighed.iter().map(|&i| runs[i].nodes.len()).sum();
    let mut slots = Vec::with_capacity(total);
    let mut chances = Vec::with_capacity(total);
    let mut spans = Vec::with_capacity(weighed.len() + 1);
    spans.push(0);
    for &i in weighed {
        let k = runs[i].nodes.len();
        let start = if runs[i].signal().is_some() {
            1.0 / k as f64
        } else {
            0.0
        };
        for &n in &runs[i].nodes {
            // Four bytes a slot: the rounds read every slot twice a round.
            slots.push(dense.index(n) as u32);
            chances.push(start);
        }
        spans.push(slots.len());
    }
    (dense, slots, chances, spans)
}

/// The verdict when no one node explains `run`: its user's, the hardware
/// of its nodes together (`together`, the sum of their chances), or nobody's.
fn not_one_nodes(
    run: &FailedRun,
    record: &str,
    together: f64,
    best: f64,
    p: &AttributionParams,
) -> Attribution {
    match (run.nodes.len(), run.signal()) {
            (1, Some(_)) => Attribution::nobody(
                Rule::UserCrash,
                "user",
                p.text(|| format!("{}; {record}", exit_text(run))),
            ),
            (1, None) => Attribution::nobody(
                Rule::UserExit,
                "user",
                p.text(|| format!("{}; {record}", exit_text(run))),
            ),
            (n, Some(_)) if together >= 0.5 => Attribution::nobody(
                Rule::AmongNodes,
                "multi_node",
                p.text(|| format!(
                    "{} on {n} nodes, no node evidence; {record}; the nodes' hardware together explains it with chance {together:.2}, no one node with more than {:.2}",
                    exit_text(run),
                    best,
                )),
            ),
            (n, _) => Attribution::nobody(
                Rule::Unattributed,
                "unknown",
                p.text(|| format!(
                    "{} on {n} nodes, no node evidence; {record}",
                    exit_text(run)
                )),
            ),
        }
}

/// A user's record in words: `alice died of this signal in 0 of 400 runs
/// elsewhere (0.001 per run)`.
fn record_text(user: &str, rec: UserRecord, u: f64, run: &FailedRun) -> String {
    let what = if run.state == JobState::NodeFail {
        "cannot cause NODE_FAIL; they failed"
    } else if run.signal().is_some() {
        "died of this signal"
    } else {
        "failed with an exit code"
    };
    let where_ = if run.nodes.len() == 1 {
        "elsewhere"
    } else {
        "in their other runs"
    };
    let related = if rec.related > 0 {
        format!(", of other signals in {}", rec.related)
    } else {
        String::new()
    };
    format!(
        "{user} {what} in {} of {} runs {where_}{related} ({u:.3} per run)",
        rec.fails, rec.runs
    )
}

/// Dense indices of the weighed runs' nodes, in the order first seen.
/// Node ids are SQLite row ids, dense from 1: a table indexed by id finds
/// the index of each of millions of node slots without hashing; a map
/// where ids are too sparse for a table.
struct DenseNodes {
    /// By node id: its index + 1 (0: not seen yet).
    table: Vec<u32>,
    map: FastMap<i64, usize>,
    /// The node ids, by index.
    ids: Vec<i64>,
}

impl DenseNodes {
    fn new(runs: &[FailedRun], weighed: &[usize]) -> DenseNodes {
        let (mut top, mut slots) = (0i64, 0usize);
        for &i in weighed {
            slots += runs[i].nodes.len();
            top = runs[i].nodes.iter().fold(top, |t, &n| t.max(n));
        }
        let table_len = usize::try_from(top).map_or(0, |t| t + 1);
        let table = if table_len <= slots.max(1 << 16) {
            vec![0; table_len]
        } else {
            Vec::new()
        };
        DenseNodes {
            table,
            map: FastMap::default(),
            ids: Vec::new(),
        }
    }

    /// The index of node `n`, given the next one when it is new.
    fn index(&mut self, n: i64) -> usize {
        let next = self.ids.len();
        if let Some(slot) = usize::try_from(n).ok().and_then(|i| self.table.get_mut(i)) {
            if *slot == 0 {
                *slot = next as u32 + 1;
                self.ids.push(n);
            }
            return *slot as usize - 1;
        }
        let d = *self.map.entry(n).or_insert(next);
        if d == next {
            self.ids.push(n);
        }
        d
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// (node id, index) of every node seen.
    fn nodes(&self) -> impl Iterator<Item = (&i64, usize)> {
        self.ids.iter().enumerate().map(|(d, n)| (n, d))
    }
}

/// The EM rounds over the weighed runs' node slots (dense node indices).
struct Rounds<'a> {
    slots: &'a [u32],
    /// Run `k`'s slots are `spans[k]..spans[k + 1]`.
    spans: &'a [usize],
    /// Per run: the user's rate, the hardware rate per unit hazard.
    base: &'a [(f64, f64)],
    /// Per node: failures evidence blames, node-days plus
    /// [`PRIOR_NODE_DAYS`] (the hazard's denominator, added once, not
    /// every round).
    hard: &'a [f64],
    days: &'a [f64],
    hard_total: f64,
    total_days: f64,
}

/// Below this many node slots the rounds run on one thread: a thread's
/// start costs more than the half it would take.
const SLOTS_FOR_TWO_THREADS: usize = 100_000;

impl Rounds<'_> {
    /// Re-estimates each node's chance of every run from the others'
    /// until the chances settle, at most 50 rounds.
    ///
    /// Each round first sums every node's chances in slot order (the one
    /// order-dependent step, kept on one thread), then updates each run
    /// from those sums alone: the runs are split in two halves that two
    /// threads update, with the same bits as one thread would give.
    fn settle(&self, chances: &mut [f64]) {
        let mut fails = vec![0.0; self.hard.len()];
        let split = self.split();
        for _ in 0..50 {
            fails.copy_from_slice(self.hard);
            let mut weighed_total = 0.0;
            for (&d, w) in self.slots.iter().zip(chances.iter()) {
                fails[d as usize] += w;
                weighed_total += w;
            }
            let fleet_rate = if self.total_days > 0.0 {
                (self.hard_total + weighed_total) / self.total_days
            } else {
                0.0
            };
            let prior = PRIOR_NODE_DAYS * fleet_rate;
            let runs = self.base.len();
            let change = if split == runs {
                self.update(0..runs, chances, &fails, prior)
            } else {
                let (first, second) = chances.split_at_mut(self.spans[split]);
                std::thread::scope(|s| {
                    let later = s.spawn(|| self.update(split..runs, second, &fails, prior));
                    let a = self.update(0..split, first, &fails, prior);
                    let b = later.join().expect("an EM half-round panicked");
                    // The larger, as one pass's running maximum would be.
                    if b > a {
                        b
                    } else {
                        a
                    }
                })
            };
            if change < 1e-6 {
                break;
            }
        }
    }

    /// The first run of the second thread's half (the number of runs: one
    /// thread), so that each half has about as many slots.
    fn split(&self) -> usize {
        let runs = self.base.len();
        let slots = self.slots.len();
        let two = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        if !two || slots < SLOTS_FOR_TWO_THREADS {
            return runs;
        }
        self.spans.partition_point(|&s| s < slots / 2).min(runs)
    }

    /// Updates the chances of `runs`, whose slots `chances` holds (from
    /// the first of them), from the nodes' summed chances `fails`; the
    /// largest change.
    fn update(
        &self,
        runs: std::ops::Range<usize>,
        chances: &mut [f64],
        fails: &[f64],
        prior: f64,
    ) -> f64 {
        let offset = self.spans[runs.start];
        let mut rates: Vec<f64> = Vec::new();
        let mut change: f64 = 0.0;
        for k in runs {
            let (base, (u, per_hazard)) = (self.spans[k], self.base[k]);
            let span = base..self.spans[k + 1];
            let own = &mut chances[span.start - offset..span.end - offset];
            rates.clear();
            for (&d, own) in self.slots[span].iter().zip(own.iter()) {
                let f = fails[d as usize] - own;
                let h = (f.max(0.0) + prior) / self.days[d as usize];
                rates.push(h * per_hazard);
            }
            let total = u + rates.iter().sum::<f64>();
            for (w, r) in own.iter_mut().zip(&rates) {
                let next = if total > 0.0 { r / total } else { 0.0 };
                // As `change.max(..)` (a NaN never wins), without
                // making every slot wait on the one before.
                let moved = (next - *w).abs();
                if moved > change {
                    change = moved;
                }
                *w = next;
            }
        }
        change
    }
}

/// The failures evidence blames, per node, and the shares of signal
/// deaths and of plain exits among them (smoothed).
fn blamed_by_evidence(
    runs: &[FailedRun],
    decided: &[Option<Attribution>],
) -> (FastMap<i64, f64>, f64, f64) {
    // Whole counts: their sum is the same in any order of the map.
    let mut hard: FastMap<i64, f64> = FastMap::default();
    let (mut signals, mut exits, mut blamed) = (0.0, 0.0, 0.0);
    for (run, a) in runs.iter().zip(decided) {
        if let Some(n) = a.as_ref().and_then(|a| a.node) {
            *hard.entry(n).or_default() += 1.0;
            blamed += 1.0;
            match (run.state, run.signal()) {
                (JobState::Failed, Some(_)) => signals += 1.0,
                (JobState::Failed, None) => exits += 1.0,
                _ => {}
            }
        }
    }
    let share_signal = (signals + 1.0) / (blamed + 3.0);
    let share_exit = (exits + 1.0) / (blamed + 3.0);
    (hard, share_signal, share_exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_on(nodes: Vec<i64>) -> FailedRun {
        FailedRun {
            row_id: 1,
            job_id_raw: 1,
            job_id: "1".into(),
            user: 0,
            state: JobState::Failed,
            start: Some(0),
            end: 3600,
            exit_code: Some(1),
            exit_signal: None,
            nodes,
            log: None,
            trace: None,
        }
    }

    #[test]
    fn nodes_are_numbered_in_the_order_first_seen_with_or_without_a_table() {
        // Small ids go through the table, ids far beyond the slots through the map.
        for far in [9, 1 << 40] {
            let runs = vec![
                run_on(vec![7, 3]),
                run_on(vec![3, far, 7]),
                run_on(vec![-2]),
            ];
            let mut dense = DenseNodes::new(&runs, &[0, 1, 2]);
            let got: Vec<usize> = runs
                .iter()
                .flat_map(|r| r.nodes.clone())
                .map(|n| dense.index(n))
                .collect();
            assert_eq!(got, [0, 1, 1, 2, 0, 3]);
            let nodes: Vec<(i64, usize)> = dense.nodes().map(|(&n, d)| (n, d)).collect();
            assert_eq!(nodes, [(7, 0), (3, 1), (far, 2), (-2, 3)]);
        }
    }
}
