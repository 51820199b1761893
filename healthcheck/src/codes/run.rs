//! Codes the run itself reports: a check that failed or ran out of time,
//! bad config, the node database, Slurm, and the healthy `OK`.

use super::{exact, CodeEntry};
use crate::{engine, finding, policy, record, session};
use lemonade_config::Action::{Investigate, None as Nothing};
use lemonade_config::Severity::{Ok as Healthy, Unknown, Warning};

const ANY: &str = "any check";

pub(super) static ENTRIES: &[CodeEntry] = &[
    exact(
        ANY,
        finding::OK,
        &[Healthy],
        Nothing,
        "the check found the entity healthy",
        "nothing to silence",
    ),
    exact(
        ANY,
        engine::CHECK_TIMEOUT,
        &[Unknown],
        Investigate,
        "the check did not finish within its deadline and was abandoned",
        "the check's `deadline_s`, `[engine] check_deadline_s`",
    ),
    exact(
        ANY,
        engine::CHECK_FAILED,
        &[Unknown],
        Investigate,
        "the check returned an error instead of findings",
        "the check's `enabled = false`",
    ),
    exact(
        ANY,
        record::CONFIG_ERROR,
        &[Unknown],
        Investigate,
        "the config could not be loaded; no check ran",
        "fix `lemonade.toml`: the message names the error",
    ),
    exact(
        ANY,
        policy::UNKNOWN_STREAK,
        &[Warning],
        Investigate,
        "the check was `unknown` `unknown_runs_to_warning` runs in a row",
        "`[policy] unknown_runs_to_warning`",
    ),
    exact(
        "policy",
        policy::SLURM_UNREACHABLE,
        &[Unknown],
        Investigate,
        "scontrol failed, so a drain, down or resume was not applied; the next run tries again",
        "none: fix Slurm",
    ),
    exact(
        "store",
        session::STORE_UNAVAILABLE,
        &[Unknown],
        Investigate,
        "the node database could not be opened or written",
        "`[store]` path on node-local disk",
    ),
];
