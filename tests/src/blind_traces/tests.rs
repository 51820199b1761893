use super::*;

/// A seed small enough for a debug-mode test: a handful of short, small jobs.
fn small(seed: u64, jobs: usize) -> IndependentSpec {
    IndependentSpec {
        jobs,
        min_minutes: 16,
        max_minutes: 22,
        max_nodes: 6,
        ..IndependentSpec::new(seed)
    }
}

fn render(spec: &IndependentSpec) -> (String, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let truth = generate(spec, &mut out).expect("writing to memory");
    (String::from_utf8(out).expect("ascii"), truth)
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_other_bytes() {
    let (a, ta) = render(&small(11, 5));
    let (b, tb) = render(&small(11, 5));
    let (c, _) = render(&small(12, 5));
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    assert_ne!(a, c);
    assert_eq!(truth(&small(11, 5)), ta);
}

#[test]
fn rows_are_time_sorted_with_five_finite_fields() {
    let (text, truth) = render(&small(3, 6));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,job,node,metric,value"));
    let mut last = i64::MIN;
    let mut rows = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 5, "{line}");
        let t: i64 = f[0].parse().expect("integer time");
        assert!(t >= last, "time went back at {line}");
        last = t;
        assert!(f[4].parse::<f64>().expect("number").is_finite());
        assert!(truth
            .iter()
            .any(|j| j.job == f[1] && j.nodes.iter().any(|n| n == f[2])));
        rows += 1;
    }
    assert!(rows > 1000, "only {rows} rows");
}

#[test]
fn a_faulty_node_keeps_reporting_after_its_onset_and_metrics_outside_the_vocabulary_appear() {
    let spec = small(5, 30);
    let (text, truth) = render(&spec);
    for job in truth.iter().filter(|j| j.fault.is_some()) {
        let f = job.fault.as_ref().expect("faulty");
        let after = text.lines().skip(1).any(|l| {
            let v: Vec<&str> = l.split(',').collect();
            v[1] == job.job && v[2] == f.node && v[0].parse::<i64>().unwrap_or(0) > f.onset + 30
        });
        // A card drop may silence the node's GPU rows, never its host rows.
        assert!(
            after,
            "no rows of {} after onset in job {}",
            f.node, job.job
        );
    }
    assert!(text.contains(",gpu_temp,") || text.contains(",DCGM_FI_PROF_SM_ACTIVE,"));
}

#[test]
fn the_fault_mix_follows_minders_table_with_about_fifteen_percent_subtle() {
    let jobs: Vec<IndependentJob> = (0..60)
        .flat_map(|s| truth(&IndependentSpec::new(s)))
        .collect();
    let faults: Vec<&PlantedFault> = jobs.iter().filter_map(|j| j.fault.as_ref()).collect();
    let share = faults.len() as f64 / jobs.len() as f64;
    assert!((0.35..0.45).contains(&share), "faulty share {share}");
    let subtle = faults.iter().filter(|f| f.subtle).count() as f64 / faults.len() as f64;
    assert!((0.11..0.19).contains(&subtle), "subtle share {subtle}");
    let total: f64 = FAULT_MIX.iter().map(|f| f.1).sum();
    let hard = faults.iter().filter(|f| !f.subtle).count() as f64;
    for (kind, pct) in FAULT_MIX {
        let n = faults.iter().filter(|f| f.kind == kind).count() as f64;
        let want = pct / total * hard;
        assert!(
            (n - want).abs() <= 4.0 * want.sqrt() + 2.0,
            "{kind}: {n} against {want:.1}"
        );
    }
    assert!(faults
        .iter()
        .all(|f| !f.subtle || SUBTLE_KINDS.contains(&f.kind.as_str())));
}

#[test]
fn every_confounder_is_present_in_most_jobs_and_sizes_span_two_to_256_nodes() {
    let jobs: Vec<IndependentJob> = (0..20)
        .flat_map(|s| truth(&IndependentSpec::new(s)))
        .collect();
    for c in CONFOUNDERS {
        let n = jobs.iter().filter(|j| j.has(c)).count();
        assert!(n * 2 > jobs.len(), "{c} in {n} of {} jobs", jobs.len());
    }
    let sizes: Vec<usize> = jobs.iter().map(|j| j.nodes.len()).collect();
    for want in [2, 3, 4, 8] {
        assert!(sizes.contains(&want), "no {want}-node job");
    }
    assert!(sizes.iter().all(|s| (2..=256).contains(s)));
    let names: std::collections::BTreeSet<&String> =
        jobs[..38].iter().flat_map(|j| &j.nodes).collect();
    assert_eq!(
        names.len(),
        jobs[..38].iter().map(|j| j.nodes.len()).sum::<usize>()
    );
}

#[test]
fn an_ecc_error_silences_the_fabric_of_every_node_of_its_job_while_it_hangs() {
    let spec = small(9, 60);
    let (text, truth) = render(&spec);
    let hung: Vec<(&str, i64)> = truth
        .iter()
        .filter_map(|j| j.fault.as_ref().map(|f| (j, f)))
        .filter(|(_, f)| f.kind == "ecc_error")
        .map(|(j, f)| (j.job.as_str(), f.onset))
        .collect();
    assert!(hung.len() >= 3, "only {} ECC jobs", hung.len());
    let mut seen = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let t: i64 = f[0].parse().expect("time");
        let Some((_, onset)) = hung.iter().find(|(j, _)| *j == f[1]) else {
            continue;
        };
        // The shortest ECC timeout is 300 s; clocks are skewed by at most 5 s.
        if f[3] == "ib_tx" && t > onset + 30 && t < onset + 290 {
            assert!(f[4].parse::<f64>().expect("value") < 1e6, "{line}");
            seen += 1;
        }
    }
    assert!(seen > 20, "only {seen} rows inside hangs");
}

fn job(id: &str, fault: Option<(&str, i64)>, confounders: &[&str]) -> IndependentJob {
    IndependentJob {
        job: id.into(),
        nodes: vec!["n1".into(), "n2".into(), "n3".into()],
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
fn the_scorer_counts_right_wrong_early_and_healthy_calls_by_hand() {
    let jobs = [
        job("1", Some(("n2", 1000)), &["checkpoint"]),
        job("2", Some(("n1", 2000)), &["checkpoint", "clock_skew"]),
        job("3", None, &["clock_skew"]),
        job("4", None, &[]),
        job("5", Some(("n3", 500)), &[]),
    ];
    let calls = [
        call("1", "n2", 1060, true),  // right, 60 s
        call("1", "n2", 1200, false), // same pair again
        call("1", "n1", 1100, false), // wrong node
        call("2", "n1", 1900, true),  // before onset only: wrong
        call("3", "n3", 700, true),   // healthy job, drain tier
        call("3", "n2", 800, false),  // healthy job, second node
        call("5", "n3", 620, false),  // right, 120 s, report tier only
    ];
    let stray = [call("9", "n1", 100, true)];
    let with_stray = score(&jobs, &[&calls[..], &stray[..]].concat());
    assert_eq!(with_stray.unknown_job_calls, 1);
    assert_eq!(with_stray.drain_on_healthy, 2);
    assert_eq!(with_stray.all.false_calls(), 5);
    let s = score(&jobs, &calls);
    assert_eq!((s.all.jobs, s.all.faulty, s.all.detected), (5, 3, 2));
    assert_eq!(
        (
            s.all.healthy_calls,
            s.all.healthy_jobs_called,
            s.all.wrong_node
        ),
        (2, 1, 2)
    );
    assert!((s.all.precision() - 2.0 / 6.0).abs() < 1e-9);
    assert!((s.all.recall() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(s.all.median_delay(), Some(120));
    assert_eq!(
        (s.drain.detected, s.drain.wrong_node, s.drain_on_healthy),
        (1, 1, 1)
    );
    assert_eq!(s.drain.median_delay(), Some(60));
    let ckpt = &s.per_confounder["checkpoint"];
    assert_eq!((ckpt.jobs, ckpt.detected, ckpt.wrong_node), (2, 1, 2));
    assert_eq!(s.per_confounder["clock_skew"].healthy_jobs_called, 1);
    assert_eq!(s.per_kind["ecc_error"].recall(), 2.0 / 3.0);
    let table = s.to_string();
    assert!(
        table.contains("| all | 5 | 3 | 0.333 | 0.667 (2/3) | 120 s | 1 | 2 |"),
        "{table}"
    );
}

/// Release mode only (`cargo test --release -p lemonade-tests --lib -- --ignored full_seed`).
#[test]
#[ignore]
fn a_full_seed_renders_two_to_four_million_rows_in_well_under_a_second() {
    let mut sizes = Vec::new();
    for seed in 0..10 {
        let mut out = Vec::with_capacity(200 << 20);
        let t = std::time::Instant::now();
        let truth = generate(&IndependentSpec::new(seed), &mut out).expect("memory");
        let took = t.elapsed();
        let rows = out.iter().filter(|&&b| b == b'\n').count() - 1;
        let faulty = truth.iter().filter(|j| j.fault.is_some()).count();
        eprintln!(
            "seed {seed}: {rows} rows, {faulty}/{} faulty, {took:?}",
            truth.len()
        );
        assert!(took.as_secs_f64() < 1.0, "seed {seed} took {took:?}");
        sizes.push(rows);
    }
    let mean = sizes.iter().sum::<usize>() / sizes.len();
    assert!(
        (2_000_000..=4_000_000).contains(&mean),
        "mean {mean} rows a seed"
    );
}
