//! The detector on the fifth to twelfth generators (`tests/src/*_traces.rs`),
//! each written by an engineer who read neither the detector nor any other
//! generator. Each one's first run was the held-out measure of the detector
//! of its day; rules have since been found on each (the watch chapter's
//! tables hold every figure):
//!
//! * fifth: after 2026-11-28 (c);
//! * sixth: after 2026-11-29 (g);
//! * seventh: after (h): drain tier precision 0.853, recall 0.409 (122 of
//!   298), 13 healthy jobs drained, 8 wrong nodes; every call 0.615 / 0.701;
//! * eighth: after (h) and (i): drain tier 0.988 / 0.262 (80 of 305), 1
//!   healthy job drained; every call 0.570 / 0.479;
//! * ninth: after (k) and (l): drain tier 0.600 / 0.256 (81 of 316), 45
//!   healthy jobs drained, 9 wrong nodes; every call 0.411 / 0.563;
//! * tenth: after (m).
//! * eleventh: after (r): drain tier 0.800 / 0.200, 15 healthy jobs drained;
//! * twelfth: after (u).
//!
//! The 20-seed report of one generator, e.g. the eighth: `cargo test
//! --release -p lemonade-watch --test outside_generators eighth --
//! --ignored --nocapture`.

/// One module per generator: the same harness, over its own types; `extra`
/// names the counts of false calls its `Tally` has beyond the common ones.
macro_rules! outside_generator {
    ($module:ident, $traces:ident $(, extra: $($extra:ident),+)?) => {
        mod $module {
            use lemonade_tests::$traces::{generate, score, Call, IndependentSpec, Score, Tally};
            use lemonade_watch::{replay, Config, Tier};

            /// Every call of the default detector over one generated replay
            /// file, read as `lemon watch --replay` reads it: a node reported
            /// and later drained gives two calls, the scorer reads the first
            /// for "both tiers" and the drain for the drain tier.
            fn score_seed(seed: u64) -> Score {
                let mut bytes = Vec::new();
                let jobs = generate(&IndependentSpec::new(seed), &mut bytes).expect("generate");
                let outcome = replay(bytes.as_slice(), &Config::default())
                    .expect("a well-formed replay file");
                let calls: Vec<Call> = outcome
                    .detections
                    .into_iter()
                    .map(|d| Call {
                        drain: d.tier == Tier::Drain,
                        job: d.job,
                        node: d.node,
                        detected_at: d.detected_at,
                    })
                    .collect();
                score(&jobs, &calls)
            }

            fn add(into: &mut Tally, t: &Tally) {
                into.jobs += t.jobs;
                into.faulty += t.faulty;
                into.detected += t.detected;
                into.healthy_calls += t.healthy_calls;
                into.healthy_jobs_called += t.healthy_jobs_called;
                into.wrong_node_calls += t.wrong_node_calls;
                $($(into.$extra += t.$extra;)+)?
                into.delays.extend(&t.delays);
            }

            fn line(name: &str, t: &Tally) -> String {
                format!(
                    "{name}: precision {:.3} recall {:.3} ({} of {} faulty), false calls {}, healthy jobs called {}, wrong-node {}, median delay {:?} s",
                    t.precision(),
                    t.recall(),
                    t.detected,
                    t.faulty,
                    t.false_calls(),
                    t.healthy_jobs_called,
                    t.wrong_node_calls,
                    t.median_delay()
                )
            }

            #[test]
            #[ignore = "20 full seeds (2 to 4 M rows each): the watch chapter's tables"]
            fn on_twenty_seeds_report_both_tiers() {
                let (mut both, mut drain) = (Tally::default(), Tally::default());
                let mut last = None;
                for seed in 1..21 {
                    let s = score_seed(seed);
                    add(&mut both, &s.total.all);
                    add(&mut drain, &s.total.drain);
                    last = Some(s);
                }
                println!(
                    "{} generator\n{}\n{}\n\nlast seed:\n{}",
                    stringify!($module),
                    line("both tiers", &both),
                    line("drain tier", &drain),
                    last.expect("seeds")
                );
            }
        }
    };
}

outside_generator!(fifth, fifth_traces);
outside_generator!(sixth, sixth_traces);
outside_generator!(seventh, seventh_traces);
outside_generator!(eighth, eighth_traces);
outside_generator!(ninth, ninth_traces, extra: early_calls, unknown_job_calls);
outside_generator!(tenth, tenth_traces, extra: early_calls, unknown_calls);
outside_generator!(eleventh, eleventh_traces, extra: early_calls, unknown_calls);
outside_generator!(twelfth, twelfth_traces, extra: early_calls, unknown_calls);
