//! The users' records: runs, signal deaths and failing exits, overall and
//! per node, so that a user's record elsewhere is known.

use super::FailedRun;
use crate::fast_hash::FastMap;
use crate::job_state::JobState;
use std::collections::HashMap;

/// Runs, deaths by each signal and plain failing exits of every user:
/// overall and per node (one-node runs), so that a user's record
/// *elsewhere* is known. Signals are kept apart: a user whose code
/// segfaults says nothing about a SIGBUS (the kernel's signal for a memory
/// error it could not correct).
#[derive(Debug, Default)]
pub struct UserStats {
    pub names: Vec<String>,
    pub runs: Vec<u32>,
    /// Per user: deaths by each signal.
    pub crashes: Vec<HashMap<i64, u32>>,
    pub exits: Vec<u32>,
    pub runs_on: FastMap<(u32, i64), u32>,
    /// By (user, node, signal).
    pub crashes_on: FastMap<(u32, i64, i64), u32>,
    pub exits_on: FastMap<(u32, i64), u32>,
}

/// A user's record: runs, failures of one kind among them, and for a
/// signal death the deaths by other signals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserRecord {
    pub runs: u32,
    pub fails: u32,
    /// Deaths by other signals: a program that crashes one way may crash
    /// another, so they count at [`RELATED_WEIGHT`].
    pub related: u32,
}

/// How much a user's deaths by other signals count towards a signal's rate.
/// 1 pools all signals (a segfaulting user's SIGBUS is theirs as much as a
/// segfault); 0 keeps them apart, which over 20 generated histories blamed
/// healthy nodes for rarer signals of crashing users (precision 0.8 at
/// 10x); one half keeps precision and finds a few more lemons.
pub const RELATED_WEIGHT: f64 = 0.5;

impl UserRecord {
    /// Failures of this kind per run, smoothed so that a short record
    /// neither clears nor condemns anyone:
    /// `(fails + RELATED_WEIGHT * related + 0.5) / (runs + 1)`.
    pub fn rate(self) -> f64 {
        (f64::from(self.fails) + RELATED_WEIGHT * f64::from(self.related) + 0.5)
            / (f64::from(self.runs) + 1.0)
    }
}

impl UserStats {
    /// The index of `name`, added when new.
    pub fn intern<S: std::hash::BuildHasher>(
        &mut self,
        index: &mut HashMap<String, u32, S>,
        name: &str,
    ) -> u32 {
        if let Some(&i) = index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.runs.push(0);
        self.crashes.push(HashMap::new());
        self.exits.push(0);
        index.insert(name.to_string(), i);
        i
    }

    /// Counts one run of `user` (on `node` when it had one node).
    pub fn add_run(&mut self, user: u32, node: Option<i64>) {
        self.runs[user as usize] += 1;
        if let Some(n) = node {
            *self.runs_on.entry((user, n)).or_default() += 1;
        }
    }

    /// Counts the signal deaths and the plain failing exits among the failed runs.
    pub fn add_failures(&mut self, runs: &[FailedRun]) {
        for r in runs.iter().filter(|r| r.state == JobState::Failed) {
            let one_node = match r.nodes[..] {
                [n] => Some(n),
                _ => None,
            };
            match r.signal() {
                Some(signal) => {
                    *self.crashes[r.user as usize].entry(signal).or_default() += 1;
                    if let Some(n) = one_node {
                        *self.crashes_on.entry((r.user, n, signal)).or_default() += 1;
                    }
                }
                None => {
                    self.exits[r.user as usize] += 1;
                    if let Some(n) = one_node {
                        *self.exits_on.entry((r.user, n)).or_default() += 1;
                    }
                }
            }
        }
    }

    /// `user`'s record of failures like `run`'s (a death by its signal, with
    /// deaths by other signals as `related`, or a plain exit) on nodes other
    /// than a one-node run's node; for a multi-node run, every run of the
    /// user but this one.
    pub fn elsewhere(&self, user: u32, run: &FailedRun) -> UserRecord {
        let u = user as usize;
        let node = match run.nodes[..] {
            [n] => Some(n),
            _ => None,
        };
        let runs = match node {
            Some(n) => self.runs[u] - self.runs_on.get(&(user, n)).copied().unwrap_or(0),
            None => self.runs[u].saturating_sub(1),
        };
        let Some(signal) = run.signal() else {
            let here = node.map_or(1, |n| self.exits_on.get(&(user, n)).copied().unwrap_or(0));
            return UserRecord {
                runs,
                fails: self.exits[u].saturating_sub(here),
                related: 0,
            };
        };
        // Deaths by each signal elsewhere: all of the user's, less those on
        // this run's node (or less this run itself).
        let (mut same, mut other) = (0u32, 0u32);
        for (&s, &count) in &self.crashes[u] {
            let here = match node {
                Some(n) => self.crashes_on.get(&(user, n, s)).copied().unwrap_or(0),
                None => u32::from(s == signal),
            };
            let elsewhere = count.saturating_sub(here);
            if s == signal {
                same += elsewhere;
            } else {
                other += elsewhere;
            }
        }
        UserRecord {
            runs,
            fails: same,
            related: other,
        }
    }
}
