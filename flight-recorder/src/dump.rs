//! One rank's dump, reduced to what the analysis needs: per process group,
//! the last collective enqueued, started and completed, and the collectives
//! still in the ring with their op, state and (with timing on) times.
//!
//! The layout is PyTorch's (`torch/csrc/distributed/c10d/FlightRecorder.hpp`
//! and `FlightRecorder.cpp`, dump version "2.x"): a dict with `version`,
//! `pg_config`, `pg_status` (keyed by pg id as a string, each holding
//! `last_enqueued_collective`, `last_started_collective`,
//! `last_completed_collective`, -1 for none) and `entries`, a list of dicts
//! with `record_id`, `pg_id`, `process_group` (a `(name, desc)` tuple),
//! `collective_seq_id`, `p2p_seq_id`, `op_id`, `profiling_name` (e.g.
//! `nccl:all_reduce`), `time_created_ns`, `duration_ms` (only with
//! `TORCH_NCCL_ENABLE_TIMING=1`), `input_sizes`, `state` (`scheduled`,
//! `started`, `completed`), `time_discovered_started_ns` and
//! `time_discovered_completed_ns` (None until seen), `retired`,
//! `timeout_ms`, `is_p2p`, and `frames` with stacks. The dump holds no rank:
//! the writer names the file `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`.
//!
//! Keys the analysis does not need may be missing (older versions lack
//! `pg_status`, `is_p2p`, `timeout_ms`; `entries` is absent when collectives
//! were left out); a key that is there with the wrong type is an error
//! naming it.

use crate::pickle::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// A dump that does not have PyTorch's layout.
#[derive(Debug, Error, PartialEq)]
#[error("{key}: {problem}")]
pub struct DumpError {
    /// Where, e.g. `entries[17].collective_seq_id`.
    pub key: String,
    pub problem: String,
}

/// Where a collective was when the dump was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Scheduled,
    Started,
    Completed,
}

/// One collective of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    pub seq: i64,
    /// `profiling_name`, e.g. `nccl:all_reduce`.
    pub op: String,
    pub state: State,
    pub created_ns: Option<i64>,
    pub started_ns: Option<i64>,
    pub completed_ns: Option<i64>,
    /// GPU time of the collective, with `TORCH_NCCL_ENABLE_TIMING=1`.
    pub duration_ms: Option<f64>,
}

/// One process group as one rank saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// The group's name (`process_group[0]`), the same on every rank; the
    /// pg id is the process's own counter.
    pub name: String,
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    pub last_completed: Option<i64>,
    /// The collectives still in the ring, oldest first; p2p ops left out.
    pub collectives: Vec<Collective>,
}

impl GroupSummary {
    /// The op of collective `seq`, if it is still in the ring.
    pub fn op_of(&self, seq: i64) -> Option<&str> {
        self.collectives
            .iter()
            .rev()
            .find(|c| c.seq == seq)
            .map(|c| c.op.as_str())
    }
}

/// One rank's dump, summarized (what a node exports to lemon).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    pub rank: u32,
    pub version: Option<String>,
    /// By group name.
    pub groups: BTreeMap<String, GroupSummary>,
}

/// Summarizes the parsed dump of rank `rank`.
pub fn summarize(rank: u32, dump: &Value) -> Result<RankSummary, DumpError> {
    if !matches!(dump, Value::Dict(_)) {
        return Err(err(
            "(top)",
            format!("expected a dict, found {}", dump.kind()),
        ));
    }
    let version = match dump.get("version") {
        None => None,
        Some(Value::Str(s)) => Some(s.clone()),
        Some(v) => return Err(wrong("version", "str", v)),
    };
    let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
    let mut names_by_id: BTreeMap<i64, String> = BTreeMap::new();
    let entries = match dump.get("entries") {
        None => &[][..],
        Some(Value::List(items)) => items.as_slice(),
        Some(v) => return Err(wrong("entries", "list", v)),
    };
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("entries[{i}]");
        let Some((pg_id, name, collective)) = entry_of(&at, entry)? else {
            continue;
        };
        if let Some(id) = pg_id {
            names_by_id.insert(id, name.clone());
        }
        group(&mut groups, &name).collectives.push(collective);
    }
    apply_status(dump, &names_by_id, &mut groups)?;
    for g in groups.values_mut() {
        fill_from_entries(g);
    }
    Ok(RankSummary {
        rank,
        version,
        groups,
    })
}

fn group<'a>(groups: &'a mut BTreeMap<String, GroupSummary>, name: &str) -> &'a mut GroupSummary {
    groups
        .entry(name.to_string())
        .or_insert_with(|| GroupSummary {
            name: name.to_string(),
            last_enqueued: None,
            last_started: None,
            last_completed: None,
            collectives: Vec::new(),
        })
}

/// One entry: its pg id, group name and collective; None for a p2p op.
fn entry_of(at: &str, e: &Value) -> Result<Option<(Option<i64>, String, Collective)>, DumpError> {
    if !matches!(e, Value::Dict(_)) {
        return Err(wrong(at, "dict", e));
    }
    if let Some(Value::Bool(true)) = e.get("is_p2p") {
        return Ok(None);
    }
    let seq = required_int(at, e, "collective_seq_id")?;
    let op = match e.get("profiling_name") {
        Some(Value::Str(s)) => s.clone(),
        Some(v) => return Err(wrong(&format!("{at}.profiling_name"), "str", v)),
        None => return Err(err(&format!("{at}.profiling_name"), "missing".into())),
    };
    let name = match e.get("process_group") {
        Some(Value::Tuple(t) | Value::List(t)) => match t.first() {
            Some(Value::Str(s)) => s.clone(),
            _ => {
                return Err(err(
                    &format!("{at}.process_group"),
                    "expected (name, desc)".into(),
                ))
            }
        },
        Some(v) => return Err(wrong(&format!("{at}.process_group"), "tuple", v)),
        None => "0".to_string(),
    };
    let started_ns = optional_int(at, e, "time_discovered_started_ns")?;
    let completed_ns = optional_int(at, e, "time_discovered_completed_ns")?;
    let state = match e.get("state") {
        Some(Value::Str(s)) => state_named(s)
            .ok_or_else(|| err(&format!("{at}.state"), format!("unknown state {s:?}")))?,
        Some(v) => return Err(wrong(&format!("{at}.state"), "str", v)),
        // As PyTorch derives it.
        None if completed_ns.is_some() => State::Completed,
        None if started_ns.is_some() => State::Started,
        None => State::Scheduled,
    };
    let duration_ms = match e.get("duration_ms") {
        None | Some(Value::None) => None,
        Some(Value::Float(f)) => Some(*f),
        Some(Value::Int(n)) => Some(*n as f64),
        Some(v) => return Err(wrong(&format!("{at}.duration_ms"), "float", v)),
    };
    let collective = Collective {
        seq,
        op,
        state,
        created_ns: optional_int(at, e, "time_created_ns")?,
        started_ns,
        completed_ns,
        duration_ms,
    };
    Ok(Some((optional_int(at, e, "pg_id")?, name, collective)))
}

fn state_named(s: &str) -> Option<State> {
    match s {
        "scheduled" => Some(State::Scheduled),
        "started" => Some(State::Started),
        "completed" => Some(State::Completed),
        _ => None,
    }
}

/// `pg_status`: the watchdog's own last sequence numbers, which outlive the
/// ring (a collective long overwritten in the ring is still counted here).
fn apply_status(
    dump: &Value,
    names_by_id: &BTreeMap<i64, String>,
    groups: &mut BTreeMap<String, GroupSummary>,
) -> Result<(), DumpError> {
    let pairs = match dump.get("pg_status") {
        None => return Ok(()),
        Some(Value::Dict(pairs)) => pairs,
        Some(v) => return Err(wrong("pg_status", "dict", v)),
    };
    for (key, status) in pairs {
        let Value::Str(id) = key else {
            return Err(wrong("pg_status key", "str", key));
        };
        let at = format!("pg_status[{id:?}]");
        let name = id
            .parse::<i64>()
            .ok()
            .and_then(|n| names_by_id.get(&n).cloned())
            .unwrap_or_else(|| id.clone());
        let (enq, started, completed) = (
            seq_or_none(&at, status, "last_enqueued_collective")?,
            seq_or_none(&at, status, "last_started_collective")?,
            seq_or_none(&at, status, "last_completed_collective")?,
        );
        let g = group(groups, &name);
        g.last_enqueued = enq;
        g.last_started = started;
        g.last_completed = completed;
    }
    Ok(())
}

/// Without `pg_status`, the last sequence numbers as the ring shows them.
fn fill_from_entries(g: &mut GroupSummary) {
    let last = |pred: fn(State) -> bool| {
        g.collectives
            .iter()
            .filter(|c| pred(c.state))
            .map(|c| c.seq)
            .max()
    };
    let enq = last(|_| true);
    let started = last(|s| s != State::Scheduled);
    let completed = last(|s| s == State::Completed);
    g.last_enqueued = g.last_enqueued.or(enq);
    g.last_started = g.last_started.or(started);
    g.last_completed = g.last_completed.or(completed);
}

fn seq_or_none(at: &str, d: &Value, key: &str) -> Result<Option<i64>, DumpError> {
    Ok(optional_int(at, d, key)?.filter(|&n| n >= 0))
}

fn required_int(at: &str, d: &Value, key: &str) -> Result<i64, DumpError> {
    optional_int(at, d, key)?.ok_or_else(|| err(&format!("{at}.{key}"), "missing".into()))
}

fn optional_int(at: &str, d: &Value, key: &str) -> Result<Option<i64>, DumpError> {
    match d.get(key) {
        None | Some(Value::None) => Ok(None),
        Some(Value::Int(n)) => Ok(Some(*n)),
        Some(v) => Err(wrong(&format!("{at}.{key}"), "int", v)),
    }
}

fn wrong(key: &str, expected: &str, found: &Value) -> DumpError {
    err(key, format!("expected {expected}, found {}", found.kind()))
}

fn err(key: &str, problem: String) -> DumpError {
    DumpError {
        key: key.to_string(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }

    fn entry(seq: i64, state: &str) -> Value {
        Value::Dict(vec![
            (s("pg_id"), Value::Int(0)),
            (
                s("process_group"),
                Value::Tuple(vec![s("0"), s("default_pg")]),
            ),
            (s("collective_seq_id"), Value::Int(seq)),
            (s("profiling_name"), s("nccl:all_reduce")),
            (s("state"), s(state)),
        ])
    }

    #[test]
    fn the_last_sequences_come_from_the_ring_when_pg_status_is_missing() {
        let dump = Value::Dict(vec![(
            s("entries"),
            Value::List(vec![
                entry(7, "completed"),
                entry(8, "started"),
                entry(9, "scheduled"),
            ]),
        )]);
        let r = summarize(3, &dump).unwrap();
        let g = &r.groups["0"];
        assert_eq!(
            (g.last_enqueued, g.last_started, g.last_completed),
            (Some(9), Some(8), Some(7))
        );
        assert_eq!(g.op_of(8), Some("nccl:all_reduce"));
    }

    #[test]
    fn a_key_of_the_wrong_type_is_named_with_its_entry() {
        let mut bad = entry(7, "completed");
        if let Value::Dict(pairs) = &mut bad {
            pairs.push((s("time_created_ns"), s("soon")));
        }
        let dump = Value::Dict(vec![(
            s("entries"),
            Value::List(vec![entry(6, "completed"), bad]),
        )]);
        let e = summarize(0, &dump).unwrap_err();
        assert_eq!(e.key, "entries[1].time_created_ns");
        assert!(e.to_string().contains("expected int, found str"), "{e}");
    }

    #[test]
    fn p2p_entries_are_left_out_and_a_bad_state_or_version_is_named() {
        let mut p2p = entry(1, "completed");
        if let Value::Dict(pairs) = &mut p2p {
            pairs.push((s("is_p2p"), Value::Bool(true)));
        }
        let dump = Value::Dict(vec![(
            s("entries"),
            Value::List(vec![p2p, entry(5, "started")]),
        )]);
        let g = &summarize(0, &dump).unwrap().groups["0"];
        assert_eq!(g.collectives.len(), 1);
        assert_eq!(g.collectives[0].seq, 5);

        let dump = Value::Dict(vec![(s("entries"), Value::List(vec![entry(5, "stuck")]))]);
        let e = summarize(0, &dump).unwrap_err();
        assert_eq!(e.to_string(), "entries[0].state: unknown state \"stuck\"");
        let dump = Value::Dict(vec![(s("version"), Value::Float(2.1))]);
        assert_eq!(summarize(0, &dump).unwrap_err().key, "version");
        assert!(summarize(0, &Value::List(vec![])).is_err());
    }

    #[test]
    fn pg_status_minus_one_means_none_yet() {
        let status = Value::Dict(vec![(
            s("0"),
            Value::Dict(vec![
                (s("last_enqueued_collective"), Value::Int(4)),
                (s("last_started_collective"), Value::Int(-1)),
                (s("last_completed_collective"), Value::Int(-1)),
            ]),
        )]);
        let dump = Value::Dict(vec![(s("pg_status"), status)]);
        let g = &summarize(0, &dump).unwrap().groups["0"];
        assert_eq!((g.last_enqueued, g.last_started), (Some(4), None));
    }
}
