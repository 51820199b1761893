//! The detector on traces it was not tuned on (issue 45): the independent
//! generator (`tests/src/independent_traces.rs`), written from a brief of
//! how real jobs and faults behave by an engineer who never read the
//! detector. Its first runs were held out; rules have since been read from
//! it and defaults chosen on it (the watch chapter). The 20-seed report is `cargo test -p
//! lemonade-watch --test independent -- --ignored --nocapture`. Issue 45's
//! targets are not met on these traces yet (the drain tier still drains
//! healthy jobs here), so no CI test asserts them: see the watch chapter.

use lemonade_tests::independent_traces::{
    generate, score, Call, IndependentJob, IndependentSpec, Score, Tally,
};
use lemonade_watch::{first_calls, replay, Config, Detection, Tier};

/// The calls of the default detector over one generated replay file, read
/// as `lemon watch --replay` reads it.
fn calls_on(spec: &IndependentSpec) -> (Vec<IndependentJob>, (Vec<Call>, Vec<Call>)) {
    let mut bytes = Vec::new();
    let jobs = generate(spec, &mut bytes).expect("generate");
    let outcome = replay(bytes.as_slice(), &Config::default()).expect("a well-formed replay file");
    let calls = calls_of(&outcome.detections);
    (jobs, calls)
}

/// Both tiers and the drain tier alone, over `seeds`, with the per-confounder table.
fn evaluate(seeds: impl Iterator<Item = u64>, jobs: usize) -> (Tally, Tally, Score) {
    let (mut both, mut drain) = (Tally::default(), Tally::default());
    let mut by = Score::default();
    for seed in seeds {
        let mut spec = IndependentSpec::new(seed);
        spec.jobs = jobs;
        let (truth, (calls, drains)) = calls_on(&spec);
        let all = score(&truth, &calls);
        both.add(&all.all);
        for (k, t) in &all.by_confounder {
            by.by_confounder.entry(k.clone()).or_default().add(t);
        }
        for (k, t) in &all.by_kind {
            by.by_kind.entry(k.clone()).or_default().add(t);
        }
        drain.add(&score(&truth, &drains).all);
    }
    by.all = both.clone();
    (both, drain, by)
}

fn line(name: &str, t: &Tally) -> String {
    format!(
        "{name}: precision {:.3} recall {:.3} ({} of {} faulty), calls {} right {}, healthy jobs called {}, wrong-node {}, drain on healthy {}, median delay {:?} s",
        t.precision(),
        t.recall(),
        t.found,
        t.faulty,
        t.calls,
        t.right,
        t.healthy_called,
        t.wrong_node,
        t.drain_on_healthy,
        t.median_delay()
    )
}

#[test]
#[ignore = "20 full seeds (about 3 M rows each): the README's table"]
fn on_twenty_independent_seeds_report_both_tiers_per_confounder() {
    let (both, drain, by) = evaluate(1..21, 38);
    println!(
        "{}\n{}\n\n{by}",
        line("both tiers", &both),
        line("drain tier", &drain)
    );
}

/// Each node's first call, marked `drain` if any of its calls was of the
/// drain tier (the "both tiers" figures), then every drain-tier call at its
/// own time (the drain tier's).
fn calls_of(detections: &[Detection]) -> (Vec<Call>, Vec<Call>) {
    let call = |d: &Detection, drain: bool| Call {
        drain,
        job: d.job.clone(),
        node: d.node.clone(),
        detected_at: d.detected_at,
    };
    let first = first_calls(detections)
        .into_iter()
        .map(|(d, drain)| call(d, drain));
    let drains = detections.iter().filter(|d| d.tier == Tier::Drain);
    (first.collect(), drains.map(|d| call(d, true)).collect())
}
