//! `cargo run --release -p lemonade-watch --example tune [FIRST COUNT [FAULT%]]`: the
//! detector's score on the tuning seeds (0..200 by default), which the
//! held-out test never uses, with each mistake described.

use lemonade_tests::metric_traces::{generate, score, Call, TraceSpec};
use lemonade_watch::{Config, Detector, Sample};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (first, count) = (
        args.first().copied().unwrap_or(0),
        args.get(1).copied().unwrap_or(200),
    );
    let share = args.get(2).map_or(0.7, |p| *p as f64 / 100.0);
    let mut traces = Vec::new();
    let mut calls = Vec::new();
    for seed in first..first + count {
        let trace = generate(&TraceSpec::drawn(seed, share));
        let mut detector = Detector::new(Config::default());
        for (time, node, metric, value) in trace.samples() {
            let sample = Sample {
                time,
                job: &trace.job,
                node,
                metric,
                value,
            };
            for d in detector
                .push(sample)
                .expect("generated rows are in time order")
            {
                println!(
                    "  call {} {} at {} score {} {:?}",
                    d.job, d.node, d.detected_at, d.score, d.metrics
                );
                calls.push(Call {
                    job: d.job,
                    node: d.node,
                    detected_at: d.detected_at,
                });
            }
        }
        traces.push(trace);
    }
    let s = score(&traces, &calls);
    for m in &s.mistakes {
        println!("{m}");
    }
    println!(
        "seeds {first}..{}: precision {:.3} recall {:.3} F1 {:.3} median delay {:?} s (tp {} fp {} missed {})",
        first + count,
        s.precision,
        s.recall,
        s.f1,
        s.median_delay(),
        s.true_positives,
        s.false_positives,
        s.missed
    );
}
