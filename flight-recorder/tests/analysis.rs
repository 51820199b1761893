//! The verdicts on generated jobs (issue 32, "Done when") and on dumps
//! written by Python's own pickle.

use flight_recorder::generate::{job_dumps, JobSpec};
use flight_recorder::pickle::Limits;
use flight_recorder::{analyze, summarize_bytes, Params, RankSummary, StragglerSign};
use joblog::JobLayout;
use std::path::Path;

fn summaries(spec: &JobSpec) -> Vec<RankSummary> {
    job_dumps(spec)
        .into_iter()
        .map(|(rank, bytes)| summarize_bytes(rank, &bytes, &Limits::default()).unwrap())
        .collect()
}

/// 8 nodes of 8 GPUs: ranks 0-7 on gpu001, ... 56-63 on gpu008.
fn layout() -> JobLayout {
    JobLayout::new((1..=8).map(|i| format!("gpu{i:03}")).collect(), 8)
}

#[test]
fn in_a_hang_across_64_ranks_the_one_rank_behind_is_named_with_its_node() {
    let spec = JobSpec {
        hung_rank: Some(13),
        ..Default::default()
    };
    let a = analyze(&summaries(&spec), Some(&layout()), &Params::default());
    assert_eq!(a.ranks, 64);
    assert_eq!(a.hangs.len(), 1, "{a}");
    let h = &a.hangs[0];
    assert_eq!((h.seq, h.waiting), (18231, 63));
    assert_eq!(h.op.as_deref(), Some("nccl:all_reduce"));
    assert_eq!(h.ranks.len(), 1);
    assert_eq!(h.ranks[0].rank, 13);
    assert_eq!(h.ranks[0].node.as_deref(), Some("gpu002"));
    assert_eq!(h.ranks[0].last_started, Some(18230));
    assert!(a.stragglers.is_empty(), "{a}");
    let text = a.to_string();
    assert!(
        text.contains("rank 13 on gpu002 never entered nccl:all_reduce seq 18231"),
        "{text}"
    );
    assert!(text.contains("63 ranks wait"), "{text}");
}

#[test]
fn a_rank_that_enqueued_the_collective_but_never_started_it_is_named_too() {
    let spec = JobSpec {
        hung_rank: Some(40),
        hung_enqueued: true,
        ..Default::default()
    };
    let a = analyze(&summaries(&spec), Some(&layout()), &Params::default());
    assert_eq!(a.hangs.len(), 1, "{a}");
    let b = &a.hangs[0].ranks[0];
    assert_eq!((b.rank, b.node.as_deref()), (40, Some("gpu006")));
    assert_eq!(
        (b.last_enqueued, b.last_started),
        (Some(18231), Some(18230))
    );
    assert!(a.to_string().contains("last enqueued: seq 18231"), "{a}");
}

#[test]
fn with_timing_the_straggler_is_named_by_its_short_durations() {
    let spec = JobSpec {
        timing: true,
        straggler: Some(42),
        ..Default::default()
    };
    let a = analyze(&summaries(&spec), Some(&layout()), &Params::default());
    assert!(a.hangs.is_empty(), "{a}");
    assert_eq!(a.stragglers.len(), 1, "{a}");
    let s = &a.stragglers[0];
    assert_eq!((s.rank, s.node.as_deref()), (42, Some("gpu006")));
    assert_eq!(s.sign, StragglerSign::ShortDurations);
    assert_eq!((s.collectives, s.compared), (20, 20));
    assert!(s.measure > 2.0, "{}", s.measure);
}

#[test]
fn without_durations_the_straggler_is_named_because_it_enters_last() {
    let spec = JobSpec {
        straggler: Some(7),
        ..Default::default()
    };
    let a = analyze(&summaries(&spec), None, &Params::default());
    assert_eq!(a.stragglers.len(), 1, "{a}");
    assert_eq!(a.stragglers[0].rank, 7);
    assert_eq!(a.stragglers[0].sign, StragglerSign::EntersLast);
    assert!(a.stragglers[0].node.is_none());
}

#[test]
fn a_healthy_job_names_nobody_with_or_without_timing() {
    for (seed, timing) in [(1, false), (2, true), (3, true), (4, false)] {
        let spec = JobSpec {
            timing,
            seed,
            ..Default::default()
        };
        let a = analyze(&summaries(&spec), Some(&layout()), &Params::default());
        assert!(a.named_ranks().is_empty(), "seed {seed}: {a}");
        assert!(a.missing_ranks.is_empty(), "{a}");
        // Never silent: the note says why nobody is named.
        assert_eq!(a.notes.len(), 1, "{a}");
        assert!(a.notes[0].contains("group 0: "), "{a}");
        assert!(a.to_string().contains("no rank named"));
    }
}

#[test]
fn a_hang_every_rank_is_inside_is_not_blamed_on_anyone() {
    // Every rank entered the last collective and none finished it: the
    // fabric, not a rank; nothing to localize.
    let mut spec = JobSpec {
        ranks: 16,
        hung_rank: Some(3),
        ..Default::default()
    };
    let mut ranks = summaries(&spec);
    spec.hung_rank = None;
    let healthy = summaries(&spec);
    ranks[3] = healthy[3].clone();
    let g = ranks[3].groups.get_mut("0").unwrap();
    g.last_completed = Some(18230);
    let a = analyze(&ranks, None, &Params::default());
    assert!(a.hangs.is_empty(), "{a}");
    assert_eq!(a.notes.len(), 1, "{a}");
    assert!(a.notes[0].contains("not localized"), "{}", a.notes[0]);
}

#[test]
fn ranks_the_layout_has_without_a_dump_are_listed() {
    let spec = JobSpec {
        ranks: 62,
        ..Default::default()
    };
    let a = analyze(&summaries(&spec), Some(&layout()), &Params::default());
    assert_eq!(a.missing_ranks, vec![62, 63]);
}

#[test]
fn dumps_written_by_pythons_pickle_in_protocols_4_and_2_give_the_same_verdict() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for proto in ["py4", "py2"] {
        let ranks: Vec<RankSummary> = (0..4)
            .map(|r| {
                let bytes =
                    std::fs::read(dir.join(proto).join(format!("nccl_trace_rank_{r}"))).unwrap();
                summarize_bytes(r, &bytes, &Limits::default()).unwrap()
            })
            .collect();
        let g = &ranks[0].groups["0"];
        assert_eq!(g.collectives.len(), 8, "{proto}");
        assert_eq!(g.collectives[0].duration_ms, Some(12.5));
        assert_eq!(g.collectives[0].created_ns, Some(1_764_000_001_750_000_000));
        let a = analyze(
            &ranks,
            Some(&JobLayout::new(vec!["n1".into(), "n2".into()], 2)),
            &Params::default(),
        );
        assert_eq!(a.hangs.len(), 1, "{proto}: {a}");
        assert_eq!(a.hangs[0].ranks[0].rank, 2);
        assert_eq!(a.hangs[0].ranks[0].node.as_deref(), Some("n2"));
        assert_eq!(a.hangs[0].waiting, 3);
    }
}
