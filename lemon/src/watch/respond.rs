//! Acting on what a poll called, with the rules of `lemon run` ([`crate::act`]):
//!
//! * only a node in service with no reason at all is drained (an
//!   administrator's drain, or anything in doubt, is left alone), with the
//!   reason `lemon: j<id> <short metric> OUTLIER <metric>`, through the one
//!   writer of node states and its dry run;
//! * only a call of the drain tier is drained, and only where `[watch.service]
//!   drain` is on; any other call is recorded as `reported` and told to the
//!   hooks (with its tier: `"event": "report"` or `"drain"`);
//! * the circuit breaker caps drains per poll as it caps them per run;
//! * each detection is recorded once with its evidence, the `[hooks]` are
//!   told, and the job is requeued only if `[watch.service] requeue` says so;
//! * a call whose newest sample is older than `[watch.service]
//!   max_sample_age_s` (samples that arrived late) is recorded as `refused`
//!   and never acted on.

use super::hooks::{self, OutlierEvent};
use super::live::Called;
use crate::act::{breaker_cap, Action};
use crate::db::detections::{self, DetectionRow};
use crate::error::{LemonError, Result};
use lemonade_config::{HooksSettings, LemonSettings};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::node_state::{NodeWriter, StateCommand, StateWrite};
use lemonade_slurm::{reason, sinfo};
use lemonade_sql::rusqlite::Connection;
use lemonade_watch::Tier;

/// How to act.
pub struct RespondParams<'a> {
    pub slurm: &'a SlurmCommands,
    pub lemon: &'a LemonSettings,
    pub hooks: &'a HooksSettings,
    pub dry_run: bool,
    pub requeue: bool,
    /// `[watch.service] drain`: act on drain-tier calls at all.
    pub drain: bool,
    /// Calls whose newest sample is older than this (seconds) are not acted on.
    pub max_sample_age_s: i64,
    pub now: i64,
}

/// What was done about one call, for the log.
#[derive(Debug, Clone)]
pub struct Response {
    pub job: String,
    pub node: String,
    pub action: Action,
    pub reason: String,
    /// The scontrol argv, for drains done or shown.
    pub command: Option<String>,
    pub detail: String,
}

impl Response {
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} job {} {}: {}",
            self.action.as_str(),
            self.job,
            self.node,
            self.reason
        );
        if let Some(c) = &self.command {
            s += &format!(" [{c}]");
        }
        if !self.detail.is_empty() {
            s += &format!(" ({})", self.detail);
        }
        s
    }
}

/// `lemon: j4419021 gmin OUTLIER gpu_util_min`: the first metric is the most sensitive.
pub fn outlier_reason(called: &Called) -> String {
    let metric = called
        .detection
        .metrics
        .first()
        .map_or("metrics", String::as_str);
    reason::outlier(&called.detection.job, metric)
}

/// Acts on the calls of one poll. Slurm's node states are read once; if
/// they cannot be, nothing is done and the error says so.
pub fn respond(
    conn: &Connection,
    calls: &[Called],
    p: &RespondParams<'_>,
) -> Result<Vec<Response>> {
    let fresh: Vec<&Called> = calls
        .iter()
        .filter(|c| {
            let d = &c.detection;
            match detections::action_of(conn, &d.job, &d.node, p.dry_run) {
                // A node first reported is drained when its drain-tier call
                // follows (`[watch] drain_after_s`), where draining is on.
                Ok(Some(done)) => done == "reported" && p.drain && d.tier == Tier::Drain,
                _ => true,
            }
        })
        .collect();
    let (late, fresh): (Vec<&Called>, Vec<&Called>) = fresh
        .into_iter()
        .partition(|c| p.now - c.detection.detected_at > p.max_sample_age_s);
    let (fresh, reported): (Vec<&Called>, Vec<&Called>) = fresh
        .into_iter()
        .partition(|c| p.drain && c.detection.tier == Tier::Drain);
    // Recorded before Slurm is asked anything: they need no node state.
    let mut responses = Vec::new();
    for called in late {
        let r = refuse_late(called, p);
        follow_up(conn, called, &r, p)?;
        responses.push(r);
    }
    for called in reported {
        let r = report_only(called);
        follow_up(conn, called, &r, p)?;
        responses.push(r);
    }
    if fresh.is_empty() {
        return Ok(responses);
    }
    let states = sinfo::all_nodes(p.slurm)
        .map_err(|source| LemonError::Slurm {
            what: "sinfo".into(),
            source,
        })?
        .nodes;
    let cap = breaker_cap(
        states.len(),
        p.lemon.max_drain_fraction,
        p.lemon.max_drains_per_run,
    );
    let writer = NodeWriter::new(p.slurm, p.dry_run);
    let mut drained = 0usize;
    for called in fresh {
        let r = drain_one(called, &states, (cap, &mut drained), &writer, p);
        follow_up(conn, called, &r, p)?;
        responses.push(r);
    }
    Ok(responses)
}

/// One fresh call: drained (or would be, dry), or why not. `drained`
/// counts this poll's drains against the breaker's `cap`.
fn drain_one(
    called: &Called,
    states: &std::collections::BTreeMap<String, sinfo::NodeState>,
    (cap, drained): (usize, &mut usize),
    writer: &NodeWriter<'_>,
    p: &RespondParams<'_>,
) -> Response {
    let d = &called.detection;
    let reason = outlier_reason(called);
    let command = StateCommand::drain(&d.node, &reason);
    let mut r = Response {
        job: d.job.clone(),
        node: d.node.clone(),
        action: Action::HeldByBreaker,
        reason: reason.clone(),
        command: Some(writer.shown(&command)),
        detail: String::new(),
    };
    match states.get(&d.node) {
        None => {
            (r.action, r.command) = (Action::SkippedUnknownToSlurm, None);
            r.detail = "sinfo does not list it".into();
        }
        Some(s) if !s.in_service() => {
            (r.action, r.command) = (Action::SkippedOutOfService, None);
            r.detail = format!("state {}, reason `{}`", s.state, s.reason);
        }
        Some(_) if *drained >= cap => {
            r.detail = format!("circuit breaker: at most {cap} drains per poll");
        }
        Some(_) => {
            (r.action, r.detail) = match writer.apply(&command) {
                StateWrite::DryRun { .. } => (Action::WouldDrain, String::new()),
                StateWrite::Applied { .. } => (Action::Drained, String::new()),
                StateWrite::Failed { error, .. } => (Action::DrainFailed, error.to_string()),
            };
            if r.action != Action::DrainFailed {
                *drained += 1;
                if p.requeue {
                    r.detail = requeue(writer, &d.job);
                }
            }
        }
    }
    r
}

/// A call on samples older than `max_sample_age_s`: `refused`, no command.
fn refuse_late(called: &Called, p: &RespondParams<'_>) -> Response {
    let d = &called.detection;
    Response {
        job: d.job.clone(),
        node: d.node.clone(),
        action: Action::Refused,
        reason: outlier_reason(called),
        command: None,
        detail: format!(
            "newest sample {} s old, over [watch.service] max_sample_age_s = {}: late samples are not acted on",
            p.now - d.detected_at,
            p.max_sample_age_s
        ),
    }
}

/// A call of the report tier, or of the drain tier while `[watch.service]
/// drain` is off: recorded, never drained.
fn report_only(called: &Called) -> Response {
    let d = &called.detection;
    let detail = match d.tier {
        Tier::Drain => format!(
            "drain tier (score {}); [watch.service] drain is off: reported, not drained",
            d.score
        ),
        Tier::Report => format!(
            "report tier (score {}): drained only once it holds the drain bar for [watch] drain_after_s",
            d.score
        ),
    };
    Response {
        job: d.job.clone(),
        node: d.node.clone(),
        action: Action::Reported,
        reason: outlier_reason(called),
        command: None,
        detail,
    }
}

/// `scontrol requeue JOB` after the drain, so the job restarts without the node.
fn requeue(writer: &NodeWriter, job: &str) -> String {
    match writer.apply(&StateCommand::requeue(&[job.to_string()])) {
        StateWrite::DryRun { .. } => format!("would requeue job {job}"),
        StateWrite::Applied { .. } => format!("requeued job {job}"),
        StateWrite::Failed { error, .. } => format!("requeue of job {job} failed: {error}"),
    }
}

/// Records the call and tells the hooks.
fn follow_up(
    conn: &Connection,
    called: &Called,
    r: &Response,
    p: &RespondParams<'_>,
) -> Result<()> {
    let d = &called.detection;
    detections::insert(
        conn,
        &DetectionRow {
            at: p.now,
            job: d.job.clone(),
            node: d.node.clone(),
            detected_at: d.detected_at,
            metrics: serde_json::to_string(&d.metrics).unwrap_or_default(),
            score: d.score,
            action: r.action.as_str().to_string(),
            reason: r.reason.clone(),
            evidence: serde_json::to_string(&called.evidence).unwrap_or_default(),
            dry_run: p.dry_run,
        },
    )?;
    let outcome = match r.action {
        Action::Drained => "applied",
        Action::WouldDrain => "dry-run",
        Action::DrainFailed => "failed",
        Action::HeldByBreaker => "breaker",
        Action::Reported => "reported",
        _ => "skipped",
    };
    let event = OutlierEvent {
        node: &d.node,
        at: p.now,
        event: d.tier.as_str(),
        tier: d.tier.as_str(),
        outcome,
        reason: &r.reason,
        code: "OUTLIER",
        job_ids: vec![&d.job],
        metrics: &d.metrics,
        score: d.score,
    };
    for line in hooks::notify(p.hooks, &event, p.dry_run) {
        eprintln!("lemon watch: {line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_watch::Detection;
    use std::path::Path;
    use std::time::Duration;

    fn call(node: &str, detected_at: i64) -> Called {
        Called {
            detection: Detection {
                job: "7".into(),
                node: node.into(),
                detected_at,
                metrics: vec!["gpu_util".into()],
                score: 9.0,
                tier: Tier::Drain,
            },
            evidence: Vec::new(),
        }
    }

    /// A Slurm whose sinfo lists nodes a and b in service (or none, when
    /// `bin` is not written: any Slurm command then fails).
    fn slurm(bin: &Path, write: bool) -> SlurmCommands {
        if write {
            use std::os::unix::fs::PermissionsExt;
            std::fs::create_dir_all(bin).unwrap();
            let sinfo = bin.join("sinfo");
            std::fs::write(
                &sinfo,
                "#!/bin/sh\necho 'a|allocated|none|Unknown|Unknown'\necho 'b|allocated|none|Unknown|Unknown'\n",
            )
            .unwrap();
            std::fs::set_permissions(&sinfo, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        SlurmCommands::new(bin, None, Duration::from_secs(10))
    }

    fn params<'a>(
        slurm: &'a SlurmCommands,
        lemon: &'a LemonSettings,
        hooks: &'a HooksSettings,
        now: i64,
    ) -> RespondParams<'a> {
        RespondParams {
            slurm,
            lemon,
            hooks,
            dry_run: true,
            requeue: false,
            drain: true,
            max_sample_age_s: 600,
            now,
        }
    }

    #[test]
    fn a_call_on_late_samples_is_recorded_as_refused_and_never_drained_even_without_slurm() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let (lemon, hooks) = (LemonSettings::default(), HooksSettings::default());
        let now = 1_800_000_000;
        // No Slurm at all: a late call needs no node state, so this works.
        let gone = slurm(&dir.path().join("no-slurm"), false);
        let out = respond(
            &conn,
            &[call("b", now - 601)],
            &params(&gone, &lemon, &hooks, now),
        )
        .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].action, Action::Refused);
        assert!(out[0].command.is_none());
        assert!(
            out[0].detail.contains("newest sample 601 s old")
                && out[0].detail.contains("max_sample_age_s = 600"),
            "{}",
            out[0].detail
        );
        assert_eq!(
            detections::action_of(&conn, "7", "b", true)
                .unwrap()
                .as_deref(),
            Some("refused")
        );
        // Recorded once: the same call again is not acted on either.
        let again = respond(
            &conn,
            &[call("b", now - 601)],
            &params(&gone, &lemon, &hooks, now + 30),
        );
        assert!(again.unwrap().is_empty());
    }

    #[test]
    fn a_report_tier_call_is_recorded_as_reported_and_never_drained_even_without_slurm() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let (lemon, hooks) = (LemonSettings::default(), HooksSettings::default());
        let now = 1_800_000_000;
        let gone = slurm(&dir.path().join("no-slurm"), false);
        let mut low = call("b", now - 10);
        low.detection.tier = Tier::Report;
        let out = respond(&conn, &[low], &params(&gone, &lemon, &hooks, now)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].action, Action::Reported);
        assert!(out[0].command.is_none(), "{out:?}");
        assert_eq!(out[0].reason, "lemon: j7 gpu OUTLIER gpu_util");
        assert_eq!(
            detections::action_of(&conn, "7", "b", true)
                .unwrap()
                .as_deref(),
            Some("reported")
        );
        // The same Slurm-less poll with a drain-tier call needs sinfo: it fails.
        assert!(respond(
            &conn,
            &[call("a", now - 10)],
            &params(&gone, &lemon, &hooks, now)
        )
        .is_err());
    }

    #[test]
    fn a_node_reported_first_is_drained_when_its_drain_tier_call_follows() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let (lemon, hooks) = (LemonSettings::default(), HooksSettings::default());
        let now = 1_800_000_000;
        let sinfo = slurm(&dir.path().join("bin"), true);
        let mut first = call("b", now - 10);
        first.detection.tier = Tier::Report;
        let out = respond(
            &conn,
            &[first.clone()],
            &params(&sinfo, &lemon, &hooks, now),
        )
        .unwrap();
        assert_eq!(out[0].action, Action::Reported);
        // The same report again (a restarted service) is not acted on twice.
        let again = respond(&conn, &[first], &params(&sinfo, &lemon, &hooks, now + 10));
        assert!(again.unwrap().is_empty());
        let later = call("b", now + 170);
        let out = respond(&conn, &[later], &params(&sinfo, &lemon, &hooks, now + 180)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].action, Action::WouldDrain, "{out:?}");
        assert_eq!(
            detections::action_of(&conn, "7", "b", true)
                .unwrap()
                .as_deref(),
            Some("would_drain")
        );
    }

    #[test]
    fn with_draining_off_a_drain_tier_call_is_reported_and_slurm_is_never_asked() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let (lemon, hooks) = (LemonSettings::default(), HooksSettings::default());
        let now = 1_800_000_000;
        let gone = slurm(&dir.path().join("no-slurm"), false);
        let off = RespondParams {
            drain: false,
            ..params(&gone, &lemon, &hooks, now)
        };
        let out = respond(&conn, &[call("a", now - 10)], &off).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].action, Action::Reported);
        assert!(out[0].detail.contains("drain is off"), "{out:?}");
        assert_eq!(
            detections::action_of(&conn, "7", "a", true)
                .unwrap()
                .as_deref(),
            Some("reported")
        );
    }

    #[test]
    fn a_call_at_the_age_limit_is_acted_on_and_one_past_it_beside_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let (lemon, hooks) = (LemonSettings::default(), HooksSettings::default());
        let now = 1_800_000_000;
        let s = slurm(&dir.path().join("bin"), true);
        let calls = [call("a", now - 600), call("b", now - 601)];
        let out = respond(&conn, &calls, &params(&s, &lemon, &hooks, now)).unwrap();
        let actions: Vec<(&str, Action)> = out
            .iter()
            .map(|r| (r.node.as_str(), r.action.clone()))
            .collect();
        assert!(actions.contains(&("a", Action::WouldDrain)), "{out:?}");
        assert!(actions.contains(&("b", Action::Refused)), "{out:?}");
        assert_eq!(out.len(), 2);
    }
}
