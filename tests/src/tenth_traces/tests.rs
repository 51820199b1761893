use super::*;

fn small(seed: u64) -> IndependentSpec {
    IndependentSpec {
        jobs: 12,
        max_nodes: 12,
        min_minutes: 30,
        max_minutes: 35,
        ..IndependentSpec::new(seed)
    }
}

fn run(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let jobs = generate(spec, &mut out).unwrap();
    (out, jobs)
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    let (a, ja) = run(&small(3));
    let (b, _) = run(&small(3));
    let (c, _) = run(&small(4));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(ja.len(), 12);
}

#[test]
fn rows_are_time_sorted_with_finite_values_and_known_jobs() {
    let (out, jobs) = run(&small(9));
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,job,node,metric,value"));
    let mut last = i64::MIN;
    let mut count = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 5, "{line}");
        let t: i64 = f[0].parse().unwrap();
        assert!(t >= last, "time went back at {line}");
        last = t;
        assert!(f[4].parse::<f64>().unwrap().is_finite());
        let job = jobs.iter().find(|j| j.job == f[1]).expect("a known job");
        assert!(job.nodes.iter().any(|n| n == f[2]), "{line}");
        count += 1;
    }
    assert!(count > 10_000, "{count}");
}

#[test]
fn faults_follow_the_asked_mix_over_many_seeds() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let (mut jobs, mut faulty, mut subtle) = (0, 0, 0);
    for seed in 0..60 {
        let spec = IndependentSpec {
            jobs: 40,
            ..IndependentSpec::new(seed)
        };
        for p in plan_all(&spec) {
            let j = truth(&p);
            jobs += 1;
            if let Some(f) = j.fault {
                faulty += 1;
                subtle += usize::from(f.subtle);
                assert!(
                    f.onset >= p.start + 600,
                    "onset after the first ten minutes"
                );
                assert!(j.nodes.contains(&f.node));
                *kinds.entry(f.kind).or_default() += 1;
            }
        }
    }
    let share = faulty as f64 / jobs as f64;
    assert!((0.35..0.45).contains(&share), "faulty share {share}");
    let sub = subtle as f64 / faulty as f64;
    assert!((0.10..0.20).contains(&sub), "subtle share {sub}");
    let ecc = kinds["ecc_error"] as f64 / faulty as f64;
    assert!((0.52..0.68).contains(&ecc), "ecc share {ecc}");
    for k in [
        "pcie_downgrade",
        "nic_dropout",
        "gpu_card_drop",
        "nvlink_error",
        "aoc_cable_error",
    ] {
        assert!(kinds.get(k).copied().unwrap_or(0) > 0, "{k} never drawn");
    }
    assert!(kinds["pcie_downgrade"] > kinds["aoc_cable_error"]);
}

#[test]
fn each_confounder_is_present_in_most_jobs() {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut jobs = 0;
    let mut user_errors = 0;
    for seed in 0..20 {
        for j in plan_all(&IndependentSpec::new(seed)).iter().map(truth) {
            jobs += 1;
            let user = [
                "user_exception",
                "user_deadlock",
                "wrong_layout",
                "crash_loop",
                "requeue",
                "profiler",
            ];
            if j.confounders.iter().any(|c| user.contains(&c.as_str())) {
                user_errors += 1;
                assert!(j.fault.is_none(), "a user error is not a fault");
            }
            for c in j.confounders {
                *seen.entry(c).or_default() += 1;
            }
        }
    }
    let share = |c: &str| seen.get(c).copied().unwrap_or(0) as f64 / jobs as f64;
    let checkpoint = share("checkpoint_rank0") + share("checkpoint_sharded");
    assert!(checkpoint > 0.5, "checkpoints {checkpoint}");
    for c in [
        "warmup",
        "node_bias",
        "rank0_extra",
        "unknown_metrics",
        "pfc_bursts",
        "metric_subset",
        "clock_skew",
    ] {
        assert!(share(c) > 0.5, "{c}: {}", share(c));
    }
    for c in [
        "eval",
        "dataloader_stall",
        "exporter_gap",
        "tenant_congestion",
        "pipeline_stages",
        "maintenance_burst",
    ] {
        assert!(share(c) > 0.2, "{c}: {}", share(c));
    }
    let users = user_errors as f64 / jobs as f64;
    assert!((0.2..0.4).contains(&users), "user errors {users}");
}

fn job(id: &str, fault: Option<(&str, i64)>, conf: &[&str]) -> IndependentJob {
    IndependentJob {
        job: id.into(),
        nodes: vec!["a".into(), "b".into()],
        fault: fault.map(|(n, onset)| PlantedFault {
            kind: "ecc_error".into(),
            node: n.into(),
            onset,
            subtle: false,
        }),
        confounders: conf.iter().map(|c| c.to_string()).collect(),
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
fn the_scorer_counts_a_tiny_hand_case_right() {
    let jobs = [
        job("1", Some(("a", 100)), &["eval"]),
        job("2", Some(("b", 100)), &[]),
        job("3", None, &["eval"]),
        job("4", None, &[]),
        job("5", Some(("a", 500)), &[]),
    ];
    let calls = [
        call("1", "a", 90, false),
        call("1", "a", 160, true),
        call("2", "a", 200, true),
        call("3", "a", 50, true),
        call("3", "b", 60, false),
        call("5", "a", 400, false),
        call("9", "a", 1, true),
    ];
    let s = score(&jobs, &calls);
    let t = &s.total.all;
    assert_eq!((t.jobs, t.faulty, t.detected), (5, 3, 1));
    assert_eq!(
        (t.healthy_calls, t.healthy_jobs_called, t.wrong_node_calls),
        (2, 1, 1)
    );
    assert_eq!((t.early_calls, t.unknown_calls, t.false_calls()), (1, 1, 5));
    assert_eq!(t.delays, vec![60]);
    assert!((t.precision() - 1.0 / 6.0).abs() < 1e-9);
    assert!((t.recall() - 1.0 / 3.0).abs() < 1e-9);
    let d = &s.total.drain;
    assert_eq!(
        (
            d.detected,
            d.healthy_calls,
            d.wrong_node_calls,
            d.unknown_calls
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(s.healthy_jobs_drained(), 1);
    let eval = &s.by_confounder["eval"].all;
    assert_eq!((eval.jobs, eval.detected, eval.healthy_calls), (2, 1, 2));
    assert_eq!(s.by_kind["ecc_error"].all.faulty, 3);
    assert_eq!(t.median_delay(), Some(60));
    assert!(s.to_string().contains("| all jobs | 5 | 3 | 1 |"));
}

#[test]
fn a_dead_rank_leaves_its_peers_spinning_at_low_power() {
    let spec = IndependentSpec::new(1);
    let plans = plan_all(&spec);
    let p = plans
        .iter()
        .find(|p| p.hang.is_some() && p.nodes.len() >= 3)
        .expect("a hang");
    let h = p.hang.unwrap();
    let st = job_states(p, h.at + 30).expect("rows during the hang");
    let peer = (h.node + 1) % p.nodes.len();
    let mut v = Vec::new();
    values(p, peer, 1, &st[peer], &mut v);
    let util = v.iter().find(|m| m.0 == 3).unwrap().1;
    let power = v.iter().find(|m| m.0 == 5).unwrap().1;
    assert!(util > 85.0 && power < 2500.0, "util {util} power {power}");
}

/// The full-size speed check: `cargo test --release -p lemonade-tests --lib
/// tenth_traces -- --ignored --nocapture`.
#[test]
#[ignore]
fn a_full_size_seed_is_written_in_well_under_a_second_in_release() {
    let started = std::time::Instant::now();
    let (out, jobs) = run(&IndependentSpec::new(45));
    let took = started.elapsed();
    let rows = out.iter().filter(|&&b| b == b'\n').count() - 1;
    let faulty = jobs.iter().filter(|j| j.fault.is_some()).count();
    let nodes: usize = jobs.iter().map(|j| j.nodes.len()).sum();
    println!(
        "{} jobs, {faulty} faulty, {nodes} nodes, {rows} rows, {} bytes, {took:?}",
        jobs.len(),
        out.len()
    );
    assert!((1_000_000..6_000_000).contains(&rows), "{rows} rows");
    assert!(took.as_secs_f64() < 1.0, "{took:?}");
}
