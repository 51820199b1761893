use std::collections::BTreeMap;

use super::design::FaultKind;
use super::*;

fn small(seed: u64) -> IndependentSpec {
    IndependentSpec {
        jobs: 8,
        max_nodes: 12,
        min_minutes: 30,
        max_minutes: 36,
        ..IndependentSpec::new(seed)
    }
}

fn bytes(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let truth = generate(spec, &mut out).expect("writing to a Vec cannot fail");
    (out, truth)
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    let (a, truth_a) = bytes(&small(7));
    let (b, truth_b) = bytes(&small(7));
    let (c, _) = bytes(&small(8));
    assert_eq!(a, b);
    assert_eq!(truth_a, truth_b);
    assert_ne!(a, c);
}

#[test]
fn rows_are_time_sorted_well_formed_and_name_only_true_jobs_and_nodes() {
    let (out, truth) = bytes(&small(3));
    let text = String::from_utf8(out).expect("the file is UTF-8");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,job,node,metric,value"));
    let nodes: BTreeMap<&str, &Vec<String>> =
        truth.iter().map(|j| (j.job.as_str(), &j.nodes)).collect();
    let mut last = i64::MIN;
    let mut count = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 5, "{line}");
        let t: i64 = f[0].parse().expect("integer time");
        assert!(t >= last, "time went back at {line}");
        last = t;
        assert!(nodes[f[1]].iter().any(|n| n == f[2]), "{line}");
        assert!(METRICS.contains(&f[3]), "{line}");
        assert!(f[4].parse::<f64>().expect("a number").is_finite(), "{line}");
        count += 1;
    }
    assert!(count > 10_000, "only {count} rows");
}

#[test]
fn the_fault_mix_follows_minders_table_with_fifteen_percent_subtle() {
    let mut kinds: BTreeMap<FaultKind, usize> = BTreeMap::new();
    let (mut jobs, mut faulty) = (0, 0);
    for seed in 0..300 {
        for job in plan(&IndependentSpec::new(seed)) {
            jobs += 1;
            if let Some(f) = &job.fault {
                faulty += 1;
                *kinds.entry(f.kind).or_default() += 1;
                assert!(
                    f.onset >= job.life.start + 600,
                    "onset in the first 10 minutes"
                );
                assert!(f.onset >= job.life.inits[0].1, "onset during init");
            }
        }
    }
    let share = |k: &[FaultKind]| {
        k.iter()
            .map(|k| kinds.get(k).copied().unwrap_or(0))
            .sum::<usize>() as f64
            / faulty as f64
    };
    let rate = faulty as f64 / jobs as f64;
    assert!((0.36..0.44).contains(&rate), "fault rate {rate}");
    let subtle = share(&[
        FaultKind::SubtleGpu,
        FaultKind::SubtleCpu,
        FaultKind::SubtleLink,
    ]);
    assert!((0.12..0.18).contains(&subtle), "subtle share {subtle}");
    // ECC is 38.9 of Minder's 56.0 loud points: 0.695 of 85%.
    let ecc = share(&[FaultKind::Ecc]);
    assert!((0.54..0.64).contains(&ecc), "ecc share {ecc}");
    let pcie = share(&[FaultKind::PcieDowngrade]);
    assert!((0.07..0.13).contains(&pcie), "pcie share {pcie}");
    for kind in [
        FaultKind::GpuCardDrop,
        FaultKind::NvlinkError,
        FaultKind::AocError,
    ] {
        assert!(
            kinds.get(&kind).copied().unwrap_or(0) > 5,
            "{kind:?} too rare"
        );
    }
}

/// The confounders the brief asks to be present in most jobs.
const MAJOR: [&str; 29] = [
    "checkpoint",
    "eval",
    "loader_stall",
    "warmup_ramp",
    "lr_batch_change",
    "step_beats",
    "pipeline_stages",
    "moe_imbalance",
    "rank0_extra",
    "role_switch",
    "loader_host",
    "context_parallel",
    "hetero_hw",
    "slow_node_lifelong",
    "metric_subset",
    "unknown_metrics",
    "exporter_restart",
    "exporter_gap",
    "missing_rows",
    "clock_skew",
    "pfc_bursts",
    "leaf_congestion",
    "rack_throttle",
    "rack_power_cap",
    "fs_slowdown",
    "firmware_rollout",
    "long_init",
    "early_end",
    "job_restart",
];

#[test]
fn each_confounder_is_present_in_most_jobs() {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut jobs = 0;
    for seed in 0..100 {
        for job in plan(&IndependentSpec::new(seed)) {
            jobs += 1;
            for c in MAJOR {
                *seen.entry(c).or_default() += usize::from(job.has(c));
            }
        }
    }
    for (c, n) in seen {
        let share = n as f64 / jobs as f64;
        assert!(share > 0.5, "{c} in only {share:.2} of jobs");
    }
}

fn job(id: &str, fault: Option<(&str, i64)>, confounders: &[&str]) -> IndependentJob {
    IndependentJob {
        job: id.to_string(),
        nodes: vec!["a".into(), "b".into(), "c".into()],
        fault: fault.map(|(node, onset)| PlantedFault {
            kind: "ecc_error".into(),
            node: node.into(),
            onset,
            subtle: false,
        }),
        confounders: confounders.iter().map(|c| c.to_string()).collect(),
    }
}

fn call(job: &str, node: &str, at: i64, drain: bool) -> Call {
    Call {
        job: job.into(),
        node: node.into(),
        detected_at: at,
        drain,
    }
}

#[test]
fn the_scorer_counts_right_wrong_early_and_healthy_calls_once_per_node() {
    let jobs = [
        job("1", Some(("b", 1000)), &["eval"]),
        job("2", Some(("a", 1000)), &["eval", "checkpoint"]),
        job("3", None, &["checkpoint"]),
        job("4", Some(("c", 500)), &[]),
    ];
    let calls = [
        call("1", "b", 1090, true),
        call("1", "b", 1200, true),
        call("1", "c", 1100, false),
        call("2", "a", 900, true),
        call("3", "a", 50, false),
        call("3", "b", 60, true),
        call("3", "b", 70, true),
        call("9", "x", 10, true),
    ];
    let s = score(&jobs, &calls);
    let all = &s.total.all;
    assert_eq!((all.jobs, all.faulty, all.detected), (4, 3, 1));
    assert_eq!((all.healthy_calls, all.healthy_jobs_called), (2, 1));
    assert_eq!(
        (all.wrong_node_calls, all.early_calls, all.unknown_job_calls),
        (1, 1, 1)
    );
    assert_eq!(all.false_calls(), 5);
    assert!((all.precision() - 1.0 / 6.0).abs() < 1e-9);
    assert!((all.recall() - 1.0 / 3.0).abs() < 1e-9);
    assert_eq!(all.median_delay(), Some(90));
    let drain = &s.total.drain;
    assert_eq!(
        (drain.detected, drain.healthy_calls, drain.wrong_node_calls),
        (1, 1, 0)
    );
    assert_eq!((drain.early_calls, drain.unknown_job_calls), (1, 1));
    assert_eq!(s.healthy_jobs_drained(), 1);
    let eval = &s.by_confounder["eval"].all;
    assert_eq!((eval.jobs, eval.detected, eval.early_calls), (2, 1, 1));
    let ckpt = &s.by_confounder["checkpoint"].drain;
    assert_eq!((ckpt.jobs, ckpt.healthy_jobs_called), (2, 1));
    assert_eq!(s.by_kind["ecc_error"].all.faulty, 3);
    let table = s.to_string();
    assert!(
        table.contains("| all calls | 4 | 3 | 1 | 0.167 | 0.333 | 90 | 2 | 1 | 2 |"),
        "{table}"
    );
}

#[test]
fn no_calls_score_full_precision_and_zero_recall() {
    let s = score(&[job("1", Some(("a", 10)), &[])], &[]);
    assert_eq!(s.total.all.precision(), 1.0);
    assert_eq!(s.total.all.recall(), 0.0);
    assert_eq!(s.total.all.median_delay(), None);
}

/// The first small job of some seed whose fault is `kind`, with its rows.
fn rows_of(kind: FaultKind, want: impl Fn(&design::Fault) -> bool) -> (JobDesign, Vec<Row>) {
    for seed in 0..400 {
        let spec = IndependentSpec {
            max_nodes: 8,
            ..IndependentSpec::new(seed)
        };
        for (j, design) in plan(&spec).into_iter().enumerate() {
            if design
                .fault
                .as_ref()
                .is_some_and(|f| f.kind == kind && want(f))
            {
                let mut rows = Vec::new();
                job_rows(seed, j, &design, &mut rows);
                return (design, rows);
            }
        }
    }
    panic!("no job with {kind:?}");
}

fn mean(rows: &[Row], metric: &str, node: Option<u32>, from: i64, to: i64) -> Option<f64> {
    let m = METRICS.iter().position(|x| *x == metric)? as u8;
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.metric == m && node.unwrap_or(r.node) == r.node && from <= r.t && r.t < to)
        .map(|r| r.value)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[test]
fn a_dropped_card_hangs_the_job_with_peers_spinning_at_low_power() {
    let (design, rows) = rows_of(FaultKind::GpuCardDrop, |f| !f.vanish);
    let f = design.fault.as_ref().expect("faulty");
    let bad = f.node as u32;
    let peer = if bad == 0 { 1 } else { 0 };
    let (on, hang) = (f.onset, design.life.hangs[0]);
    let before = mean(&rows, "gpu_power", Some(peer), on - 240, on - 30).expect("rows before");
    let util = mean(&rows, "gpu_util", Some(peer), on + 30, hang.1 - 30).expect("peer rows");
    let power = mean(&rows, "gpu_power", Some(peer), on + 30, hang.1 - 30).expect("peer rows");
    let dead = mean(&rows, "gpu_util", Some(bad), on + 30, hang.1 - 30).expect("bad rows");
    assert!(util > 90.0, "peers spin: util {util}");
    assert!(power < 0.7 * before, "peers' power {power} vs {before}");
    assert!(dead < 5.0, "the dropped card's node reads {dead}");
}

#[test]
fn a_subtle_throttle_slows_the_node_without_halting_the_job() {
    let (design, rows) = rows_of(FaultKind::SubtleGpu, |_| true);
    let f = design.fault.as_ref().expect("faulty");
    let bad = f.node as u32;
    let on = f.onset;
    let clock = |from, to| mean(&rows, "gpu_sm_clock", Some(bad), from, to).unwrap_or(0.0);
    let after = mean(&rows, "gpu_util", None, on + 60, on + 600).expect("rows after onset");
    assert!(after > 30.0, "the job goes on: util {after}");
    assert!(
        design
            .life
            .hangs
            .iter()
            .all(|h| h.1 <= on || h.0 > on + 600),
        "no hang"
    );
    let (b, a) = (clock(on - 600, on), clock(on + 30, on + 600));
    assert!(a < b * 0.97, "throttled clock {a} vs {b}");
}

#[test]
fn an_application_crash_idles_one_healthy_node_while_its_peers_hang() {
    let found = (0..200).find_map(|seed| {
        let spec = IndependentSpec {
            max_nodes: 8,
            ..IndependentSpec::new(seed)
        };
        plan(&spec)
            .into_iter()
            .enumerate()
            .find(|(_, d)| d.fault.is_none() && d.life.app_exit.is_some())
            .map(|(j, d)| (seed, j, d))
    });
    let (seed, j, design) = found.expect("some healthy job has an application crash");
    let mut rows = Vec::new();
    job_rows(seed, j, &design, &mut rows);
    let (at, k) = design.life.app_exit.expect("drawn");
    let hang = design
        .life
        .hangs
        .iter()
        .find(|h| h.0 == at)
        .expect("its hang");
    let peer = if k == 0 { 1 } else { 0 };
    let (from, to) = (hang.0 + 30, hang.1 - 30);
    let exited = mean(&rows, "gpu_util", Some(k as u32), from, to).expect("rows");
    let waiting = mean(&rows, "gpu_util", Some(peer), from, to).expect("rows");
    assert!(
        exited < 5.0 && waiting > 90.0,
        "exited {exited}, waiting {waiting}"
    );
    assert!(design.has("job_restart"));
}
