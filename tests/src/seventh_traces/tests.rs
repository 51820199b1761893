use super::plan::{plan_jobs, FaultKind, Seg, CONFOUNDERS, HARD_MIX, NAMES};
use super::*;

fn render(spec: &IndependentSpec) -> (String, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let truth = generate(spec, &mut out).expect("writing to memory works");
    (String::from_utf8(out).expect("the trace is text"), truth)
}

struct Row<'a> {
    time: i64,
    job: &'a str,
    node: &'a str,
    metric: &'a str,
    value: f64,
}

fn rows(text: &str) -> Vec<Row<'_>> {
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 5, "five fields in {line:?}");
            Row {
                time: f[0].parse().expect("integer time"),
                job: f[1],
                node: f[2],
                metric: f[3],
                value: f[4].parse().expect("a number"),
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "a median needs samples");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    let spec = IndependentSpec::small(11, 4);
    let (a, truth_a) = render(&spec);
    let (b, truth_b) = render(&spec);
    assert_eq!(a, b);
    assert_eq!(truth_a, truth_b);
    assert_eq!(
        truth_a,
        truth_only(&spec),
        "the truth does not depend on writing"
    );
    let (c, _) = render(&IndependentSpec::small(12, 4));
    assert_ne!(a, c);
}

#[test]
fn rows_are_time_sorted_well_formed_and_cover_every_job() {
    let (text, truth) = render(&IndependentSpec::small(3, 6));
    assert!(text.starts_with("time,job,node,metric,value\n"));
    let rows = rows(&text);
    assert!(rows.len() > 10_000, "{} rows", rows.len());
    assert!(
        rows.windows(2).all(|w| w[0].time <= w[1].time),
        "time never goes backwards"
    );
    assert!(rows.iter().all(|r| r.value.is_finite()));
    assert!(rows.iter().all(|r| NAMES.contains(&r.metric)));
    for job in &truth {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.job == job.job).collect();
        assert!(!mine.is_empty(), "job {} has rows", job.job);
        assert!(mine.iter().all(|r| job.nodes.iter().any(|n| n == r.node)));
        let skew = 8;
        assert!(mine
            .iter()
            .all(|r| r.time >= job.start - skew && r.time <= job.end + skew));
    }
    let unknown = rows
        .iter()
        .filter(|r| !NAMES[..plan::KNOWN].contains(&r.metric))
        .count();
    assert!(
        unknown > 0,
        "some rows carry metrics the detector does not know"
    );
}

#[test]
fn the_fault_mix_follows_minders_table_with_a_subtle_share_over_many_seeds() {
    let jobs: Vec<IndependentJob> = (0..300)
        .flat_map(|s| truth_only(&IndependentSpec::new(s)))
        .collect();
    let faulty: Vec<&PlantedFault> = jobs.iter().filter_map(|j| j.fault.as_ref()).collect();
    let share = faulty.len() as f64 / jobs.len() as f64;
    assert!((share - 0.4).abs() < 0.03, "faulty share {share}");
    let subtle = faulty.iter().filter(|f| f.subtle).count() as f64 / faulty.len() as f64;
    assert!((subtle - 0.15).abs() < 0.03, "subtle share {subtle}");
    let hard: Vec<&&PlantedFault> = faulty.iter().filter(|f| !f.subtle).collect();
    let total: f64 = HARD_MIX.iter().map(|k| k.1).sum();
    for (kind, weight) in HARD_MIX {
        let seen = hard.iter().filter(|f| f.kind == kind.name()).count() as f64 / hard.len() as f64;
        let want = weight / total;
        assert!(
            (seen - want).abs() < 0.03 + want * 0.25,
            "{}: {seen} vs {want}",
            kind.name()
        );
    }
    for job in jobs.iter().filter(|j| j.fault.is_some()) {
        let f = job.fault.as_ref().unwrap();
        assert!(job.nodes.contains(&f.node));
        assert!(
            f.onset >= job.start + 600,
            "onset after the first ten minutes"
        );
        assert!(f.halt.is_none_or(|h| h >= f.onset));
    }
}

#[test]
fn each_confounder_is_present_in_most_jobs() {
    let jobs: Vec<IndependentJob> = (0..100)
        .flat_map(|s| truth_only(&IndependentSpec::new(s)))
        .collect();
    for (name, _) in CONFOUNDERS {
        let share = jobs
            .iter()
            .filter(|j| j.confounders.iter().any(|c| c == name))
            .count() as f64
            / jobs.len() as f64;
        assert!(share > 0.5, "{name} in {share} of jobs");
    }
}

#[test]
fn job_sizes_and_scrape_intervals_span_what_a_fleet_runs() {
    let jobs: Vec<IndependentJob> = (0..40)
        .flat_map(|s| truth_only(&IndependentSpec::new(s)))
        .collect();
    let has = |n: usize| jobs.iter().any(|j| j.nodes.len() == n);
    assert!(has(2) && has(3) && has(256), "2-, 3- and 256-node jobs");
    assert!(jobs.iter().any(|j| (4..=8).contains(&j.nodes.len())));
    assert!(jobs.iter().all(|j| (2..=256).contains(&j.nodes.len())));
    for interval in [10, 15, 30, 60] {
        assert!(
            jobs.iter().any(|j| j.interval == interval),
            "{interval} s scrapes"
        );
    }
    let minutes: Vec<i64> = jobs.iter().map(|j| (j.end - j.start) / 60).collect();
    assert!(minutes.iter().all(|m| *m <= 90));
    let workloads: std::collections::BTreeSet<&str> =
        jobs.iter().map(|j| j.workload.as_str()).collect();
    assert_eq!(workloads.len(), 6, "{workloads:?}");
}

/// The first small seed with a job whose fault is of `kind` and, when
/// `hang` is set, hangs for at least that many seconds.
fn find(kind: FaultKind, hang: Option<i64>) -> (IndependentSpec, usize) {
    for seed in 0..500 {
        let spec = IndependentSpec::small(seed, 6);
        for (i, job) in plan_jobs(&spec).iter().enumerate() {
            let Some(f) = job.fault.as_ref().filter(|f| f.kind == kind) else {
                continue;
            };
            let hung = job
                .segs
                .iter()
                .find(|s| s.2 == Seg::Hung)
                .map_or(0, |s| s.1 - s.0);
            if hang.is_none_or(|h| f.halt.is_some() && hung >= h) {
                return (spec, i);
            }
        }
    }
    panic!("no seed has a {kind:?} fault");
}

#[test]
fn a_dead_rank_hangs_the_job_with_peers_spinning_in_nccl_and_no_traffic() {
    let (spec, i) = find(FaultKind::Ecc, Some(300));
    let (text, truth) = render(&spec);
    let job = &truth[i];
    let fault = job.fault.as_ref().unwrap();
    let halt = fault.halt.unwrap();
    let rows = rows(&text);
    let peers = |metric: &str, a: i64, b: i64| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.job == job.job && r.node != fault.node && r.metric == metric)
            .filter(|r| r.time >= a && r.time < b)
            .map(|r| r.value)
            .collect()
    };
    let (before, during) = (
        (fault.onset - 150, fault.onset - 10),
        (halt + 90, halt + 290),
    );
    let ib_before = median(peers("ib_tx", before.0, before.1));
    let ib_during = median(peers("ib_tx", during.0, during.1));
    assert!(
        ib_during < ib_before * 0.01,
        "ib {ib_before} then {ib_during}"
    );
    assert!(
        median(peers("gpu_util", during.0, during.1)) > 80.0,
        "spinning kernels read as busy"
    );
    let power = (
        median(peers("gpu_power", before.0, before.1)),
        median(peers("gpu_power", during.0, during.1)),
    );
    assert!(power.1 < power.0 * 0.6, "power {power:?}");
}

#[test]
fn a_thermally_throttled_node_runs_on_with_clocks_below_its_peers() {
    let (spec, i) = find(FaultKind::ThermalThrottle, None);
    let (text, truth) = render(&spec);
    let job = &truth[i];
    let fault = job.fault.as_ref().unwrap();
    let rows = rows(&text);
    let clocks = |faulty: bool| -> Vec<f64> {
        rows.iter()
            .filter(|r| {
                r.job == job.job && (r.node == fault.node) == faulty && r.metric == "gpu_sm_clock"
            })
            .filter(|r| r.time > fault.onset + 60 && r.time < job.end - 120)
            .map(|r| r.value)
            .collect()
    };
    let (node, peers) = (median(clocks(true)), median(clocks(false)));
    assert!(
        node < peers * 0.95,
        "throttled {node} MHz vs peers {peers} MHz"
    );
    assert!(fault.halt.is_none() && fault.subtle);
}

fn planted(node: &str, onset: i64, kind: &str) -> Option<PlantedFault> {
    Some(PlantedFault {
        kind: kind.into(),
        node: node.into(),
        onset,
        subtle: kind == "slow_host",
        halt: None,
    })
}

fn job(
    id: &str,
    nodes: &[&str],
    fault: Option<PlantedFault>,
    confounders: &[&str],
) -> IndependentJob {
    IndependentJob {
        job: id.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        fault,
        confounders: confounders.iter().map(|c| c.to_string()).collect(),
        workload: "finetune".into(),
        details: Vec::new(),
        start: 0,
        end: 3600,
        interval: 10,
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
fn the_scorer_counts_a_small_hand_case_right() {
    let jobs = vec![
        job("A", &["a1", "a2"], None, &["checkpoint"]),
        job(
            "B",
            &["b1", "b2", "b3"],
            planted("b2", 1000, "ecc_error"),
            &["checkpoint", "clock_skew"],
        ),
        job("C", &["c1", "c2"], planted("c1", 500, "slow_host"), &[]),
    ];
    let calls = vec![
        call("A", "a1", 100, false),
        call("A", "a1", 200, false),
        call("B", "b2", 900, true),
        call("B", "b2", 1060, true),
        call("B", "b3", 1100, false),
        call("C", "c1", 620, false),
        call("X", "x1", 50, true),
    ];
    let s = score(&jobs, &calls);
    let all = &s.total.all;
    assert_eq!((all.jobs, all.faulty, all.detected), (3, 2, 2));
    assert_eq!(
        (
            all.healthy_calls,
            all.healthy_jobs_called,
            all.wrong_node_calls
        ),
        (1, 1, 2)
    );
    assert_eq!((all.unknown_job_calls, all.false_calls()), (1, 4));
    assert!((all.precision() - 2.0 / 6.0).abs() < 1e-12);
    assert_eq!((all.recall(), all.median_delay()), (1.0, Some(60)));
    let drain = &s.total.drain;
    assert_eq!(
        (
            drain.detected,
            drain.healthy_calls,
            drain.wrong_node_calls,
            drain.unknown_job_calls
        ),
        (1, 0, 1, 1)
    );
    assert!((drain.precision() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!((drain.recall(), drain.median_delay()), (0.5, Some(60)));
    assert_eq!(s.healthy_jobs_drained(), 0);
    let ckpt = &s.by_confounder["checkpoint"].all;
    assert_eq!(
        (ckpt.jobs, ckpt.faulty, ckpt.detected, ckpt.healthy_calls),
        (2, 1, 1, 1)
    );
    assert_eq!(s.by_kind["slow_host"].drain.recall(), 0.0);
    assert_eq!(s.by_kind["ecc_error"].all.delays, vec![60]);
    let table = s.to_string();
    assert!(
        table.contains("| all calls | 3 | 2 | 2 | 0.333 | 1.000 | 60 s | 1 | 1 | 2 |"),
        "{table}"
    );
    assert!(
        table.contains("| drain tier | 3 | 2 | 1 | 0.333 | 0.500 | 60 s | 0 | 0 | 1 |"),
        "{table}"
    );
    let row = "| checkpoint | 2 | 1 | 0.250 | 1.000 | 60 s | 1 | 2 | 0.500 | 1.000 | 0 | 1 |";
    assert!(table.contains(row), "{table}");
}

#[test]
fn an_empty_call_list_scores_full_precision_and_no_recall() {
    let jobs = vec![job(
        "B",
        &["b1", "b2"],
        planted("b1", 1000, "ecc_error"),
        &[],
    )];
    let s = score(&jobs, &[]);
    assert_eq!(
        (
            s.total.all.precision(),
            s.total.all.recall(),
            s.total.all.median_delay()
        ),
        (1.0, 0.0, None)
    );
}
