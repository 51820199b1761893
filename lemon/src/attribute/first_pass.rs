//! Rules 1-4 of the attribution: what the evidence, the exit code and the
//! task exits decide without weighing, and the bursts of an array's
//! failures on one node.

use super::evidence::ByTime;
use super::{
    evidence_text, exit_text, Attribution, AttributionParams, Evidence, FailedRun, Rule,
    AFTER_END_S, BEFORE_END_S, BURST_MIN, BURST_S, SLURM_CATEGORY,
};
use crate::fast_hash::FastMap;
use crate::job_state::JobState;

/// What the first pass decided: final, or a signal death to weigh.
pub(super) enum FirstPass {
    Done(Attribution),
    /// No evidence decides: a plain exit or signal death, or a multi-node run.
    Weigh,
    /// A multi-node run whose first failing task was on `node`: weighed as
    /// if it had run there alone (a user's bug fails some task first too).
    Localized {
        node: i64,
        detail: String,
    },
}

/// Rules 1-3 and the multi-node rule: what needs no weighing.
pub(super) fn first_pass(
    run: &FailedRun,
    ev: &Evidence,
    by_time: &mut ByTime,
    p: &AttributionParams,
) -> FirstPass {
    match super::job_log::blame(run) {
        // A hardware line that named no node: the trace may name it.
        Some(unlocalized) if unlocalized.rule == Rule::JobLogUnlocalized => {
            let traced = super::trace::blame(run).unwrap_or(unlocalized);
            return FirstPass::Done(with_check_evidence(traced, run, by_time));
        }
        Some(decided) => return FirstPass::Done(with_check_evidence(decided, run, by_time)),
        None => {}
    }
    if let [node] = run.nodes[..] {
        return one_node(run, node, by_time, p);
    }
    if let Some((node, m, rule)) = by_time.node_evidence(&run.nodes, run.end) {
        let detail = p.text(|| format!("{}; {}", exit_text(run), evidence_text(m, run.end)));
        return FirstPass::Done(Attribution::evidence(node, rule, m, detail));
    }
    if let Some(traced) = super::trace::blame(run) {
        return FirstPass::Done(traced);
    }
    if run.state == JobState::NodeFail {
        // The node that died records no task exit: the first one recorded
        // is a survivor's, killed by Slurm.
        return FirstPass::Weigh;
    }
    // The window is in seconds, the task exits in milliseconds: every
    // millisecond of the seconds `from..=hi` is inside.
    let hi = run.end + AFTER_END_S;
    let from_ms = run
        .start
        .unwrap_or(run.end - BEFORE_END_S)
        .saturating_mul(1000);
    let hi_ms = hi.saturating_mul(1000).saturating_add(999);
    if let Some(&(node, at_ms)) = ev.task_fails_ms.get(&run.job_id_raw).and_then(|v| {
        v.iter()
            .find(|&&(n, at_ms)| at_ms >= from_ms && at_ms <= hi_ms && run.nodes.contains(&n))
    }) {
        let detail = p.text(|| {
            format!(
                "first failing task of {} nodes on this node, {:+.3}s from the end",
                run.nodes.len(),
                (at_ms - run.end * 1000) as f64 / 1000.0
            )
        });
        return FirstPass::Localized { node, detail };
    }
    FirstPass::Weigh
}

/// Rules 1-3 for a run on one node: `NODE_FAIL` is the node's, a user
/// error code the user's, evidence in the window the node's.
fn one_node(run: &FailedRun, node: i64, by_time: &mut ByTime, p: &AttributionParams) -> FirstPass {
    let found = by_time.node_evidence(&run.nodes, run.end);
    if run.state == JobState::NodeFail {
        return FirstPass::Done(match found {
            Some((_, m, _)) => Attribution::evidence(
                node,
                Rule::NodeFail,
                m,
                p.text(|| format!("NODE_FAIL; {}", evidence_text(m, run.end))),
            ),
            None => Attribution::node(
                node,
                Rule::NodeFail,
                "node_fail",
                p.text(|| "NODE_FAIL".into()),
            ),
        });
    }
    let code = run.exit_code.unwrap_or(0);
    if run.signal().is_none()
        && p.user_error_exit_codes
            .iter()
            .any(|&c| i64::from(c) == code)
    {
        return FirstPass::Done(Attribution::nobody(
            Rule::UserExit,
            "user",
            p.text(|| format!("exit {code}: a user error")),
        ));
    }
    if let Some((_, m, rule)) = found {
        let detail = p.text(|| format!("{}; {}", exit_text(run), evidence_text(m, run.end)));
        return FirstPass::Done(Attribution::evidence(node, rule, m, detail));
    }
    super::trace::blame(run).map_or(FirstPass::Weigh, FirstPass::Done)
}

/// A job log or a trace named the node; whether one of our checks caught
/// the same fault is still the node evidence's to say. Without this, every
/// caught fault that a log also names would count as uncaught, and the
/// lemon test would judge nodes against a background of faults the checks
/// already handled (on generated histories: 282 such runs on healthy
/// nodes over 10 seeds, enough to give 10 healthy nodes two "uncaught").
fn with_check_evidence(mut a: Attribution, run: &FailedRun, by_time: &mut ByTime) -> Attribution {
    if let Some(node) = a.node {
        if let Some((_, m, _)) = by_time.node_evidence(&[node], run.end) {
            a.caught_by_check = m.category != SLURM_CATEGORY;
        }
    }
    a
}

/// The array a run belongs to: `123` of `123_4`; `None` outside arrays.
fn array_of(job_id: &str) -> Option<&str> {
    job_id.split_once('_').map(|(array, _)| array)
}

/// Which of the weighed runs are part of a burst (rule 4): at least
/// [`BURST_MIN`] tasks of one job array failing on one node within [`BURST_S`].
pub(super) fn bursts(runs: &[FailedRun], weigh: &[usize]) -> Vec<bool> {
    let mut by_pair: FastMap<(&str, i64), Vec<usize>> = FastMap::default();
    for (k, &i) in weigh.iter().enumerate() {
        if let (Some(array), [node]) = (array_of(&runs[i].job_id), &runs[i].nodes[..]) {
            by_pair.entry((array, *node)).or_default().push(k);
        }
    }
    let mut burst = vec![false; weigh.len()];
    for ks in by_pair.values_mut().filter(|ks| ks.len() >= BURST_MIN) {
        ks.sort_by_key(|&k| runs[weigh[k]].end);
        let ends: Vec<i64> = ks.iter().map(|&k| runs[weigh[k]].end).collect();
        for (a, &end) in ends.iter().enumerate() {
            // Enough failures within an hour either side of this one.
            let lo = ends.partition_point(|&e| e < end - BURST_S);
            let hi = ends.partition_point(|&e| e <= end + BURST_S);
            if hi - lo >= BURST_MIN {
                burst[ks[a]] = true;
            }
        }
    }
    burst
}
