use super::*;

fn small(seed: u64) -> IndependentSpec {
    IndependentSpec {
        jobs: 6,
        min_minutes: 14,
        max_minutes: 16,
        max_nodes: 8,
        ..IndependentSpec::new(seed)
    }
}

fn bytes(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let truth = generate(spec, &mut out).expect("writing to a Vec cannot fail");
    (out, truth)
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_other_bytes() {
    let (a, ta) = bytes(&small(7));
    let (b, tb) = bytes(&small(7));
    let (c, _) = bytes(&small(8));
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    assert_ne!(a, c);
}

#[test]
fn rows_are_well_formed_and_time_sorted_across_the_whole_file() {
    let (out, truth) = bytes(&small(3));
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,job,node,metric,value"));
    let mut last = i64::MIN;
    let mut rows = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 5, "{line}");
        let t: i64 = f[0].parse().unwrap();
        assert!(t >= last, "time goes backwards at {line}");
        last = t;
        assert!(f[4].parse::<f64>().unwrap().is_finite());
        assert!(truth
            .iter()
            .any(|j| j.job == f[1] && j.nodes.iter().any(|n| n == f[2])));
        rows += 1;
    }
    assert!(rows > 1000, "only {rows} rows");
}

#[test]
fn the_fault_mix_follows_minders_table_over_many_seeds() {
    let mut jobs = 0;
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut subtle = 0;
    for seed in 0..200 {
        for j in truth(&IndependentSpec::new(seed)) {
            jobs += 1;
            if let Some(f) = j.fault {
                assert!(j.nodes.contains(&f.node));
                subtle += usize::from(f.subtle);
                *kinds.entry(f.kind).or_default() += 1;
            }
        }
    }
    let faults: usize = kinds.values().sum();
    let share = |k: &str| kinds.get(k).copied().unwrap_or(0) as f64 / faults as f64;
    assert!((faults as f64 / jobs as f64 - 0.40).abs() < 0.03);
    assert!((subtle as f64 / faults as f64 - 0.15).abs() < 0.03);
    assert!(
        (share("ecc") - 0.85 * 38.9 / 56.0).abs() < 0.04,
        "ecc {}",
        share("ecc")
    );
    assert!((share("pcie_downgrade") - 0.85 * 6.6 / 56.0).abs() < 0.025);
    assert!((share("nic_dropout") - 0.85 * 5.7 / 56.0).abs() < 0.025);
    for k in [
        "gpu_card_drop",
        "nvlink_error",
        "aoc_cable",
        "cpu_slow",
        "gpu_throttle",
    ] {
        assert!(share(k) > 0.0, "{k} never drawn");
    }
}

#[test]
fn every_confounder_is_present_in_most_jobs_and_sizes_span_2_to_128_nodes() {
    let mut jobs = 0;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut sizes = BTreeSet::new();
    for seed in 0..40 {
        for j in truth(&IndependentSpec::new(seed)) {
            jobs += 1;
            sizes.insert(j.nodes.len());
            for c in j.confounders {
                *seen.entry(c).or_default() += 1;
            }
        }
    }
    for c in CONFOUNDERS {
        let share = seen.get(c).copied().unwrap_or(0) as f64 / jobs as f64;
        assert!(share > 0.55, "{c} in only {share:.2} of jobs");
    }
    assert!(sizes.contains(&2) && sizes.contains(&3));
    assert!(sizes.iter().any(|&n| (4..=8).contains(&n)));
    assert!(sizes.iter().any(|&n| n > 64) && sizes.iter().all(|&n| n <= 128));
}

#[test]
fn a_hang_stops_the_jobs_traffic_and_an_onset_is_after_eight_minutes() {
    let spec = IndependentSpec {
        jobs: 30,
        max_nodes: 6,
        min_minutes: 20,
        max_minutes: 22,
        ..IndependentSpec::new(11)
    };
    let models = plan(&spec);
    let hung = models
        .iter()
        .find(|j| j.fault.as_ref().is_some_and(|f| f.timeout.is_some()))
        .expect("some job of 30 hangs");
    let f = hung.fault.as_ref().unwrap();
    assert!(f.onset >= hung.start + 480);
    let other = (f.node + 1) % hung.nodes.len();
    let mut rng = Rng::new(1);
    let before = sample(hung, other, f.onset - 200, &mut rng);
    let after = sample(hung, other, f.onset + 60, &mut rng);
    assert!(
        after[IB_TX] < before[IB_TX] * 0.05
            || moment(hung, other, f.onset - 200).mode != Mode::Train
    );
    assert!(after[POWER] < hung.base.busy_w * 0.5);
}

#[test]
fn the_scorer_counts_right_wrong_early_and_healthy_calls() {
    let job = |id: &str, fault: Option<(&str, i64)>, conf: &[&str]| IndependentJob {
        job: id.into(),
        nodes: vec!["n1".into(), "n2".into()],
        fault: fault.map(|(node, onset)| PlantedFault {
            kind: "ecc".into(),
            node: node.into(),
            onset,
            subtle: false,
        }),
        confounders: conf.iter().map(|c| c.to_string()).collect(),
    };
    let jobs = vec![
        job("1", Some(("n1", 100)), &["eval"]),
        job("2", Some(("n2", 100)), &["eval"]),
        job("3", None, &["eval", "pipeline"]),
        job("4", None, &[]),
    ];
    let call = |j: &str, n: &str, t: i64, drain: bool| Call {
        job: j.into(),
        node: n.into(),
        detected_at: t,
        drain,
    };
    let calls = vec![
        call("1", "n1", 160, true),
        call("1", "n1", 400, true),  // the same node again counts once
        call("1", "n2", 170, false), // wrong node
        call("2", "n2", 90, true),   // before onset: wrong
        call("3", "n1", 500, true),  // healthy job, drain tier
        call("9", "n1", 500, false), // no such job
    ];
    let s = score(&jobs, &calls);
    assert_eq!(s.all.calls, 5);
    assert_eq!(s.all.right, 1);
    assert!((s.all.precision() - 0.2).abs() < 1e-9);
    assert_eq!((s.all.found, s.all.faulty), (1, 2));
    assert_eq!(s.all.median_delay(), Some(60.0));
    assert_eq!(s.all.wrong_node, 2);
    assert_eq!(s.all.healthy_called, 1);
    assert_eq!(s.all.drain_on_healthy, 1);
    assert_eq!(s.unknown_job_calls, 1);
    assert_eq!(s.by_confounder["pipeline"].healthy_called, 1);
    assert_eq!(s.by_confounder["eval"].jobs, 3);
    assert_eq!(s.by_kind["ecc"].faulty, 2);
    let table = s.to_string();
    assert!(
        table.contains("| all | 4 | 5 | 0.200 | 0.500 (1/2) | 60 | 1 | 2 | 1 |"),
        "{table}"
    );
}

#[test]
fn the_truth_json_names_every_job_and_escapes_strings() {
    let jobs = vec![IndependentJob {
        job: "5\"1".into(),
        nodes: vec!["a".into()],
        fault: None,
        confounders: vec![],
    }];
    let json = truth_json(&jobs);
    assert!(json.contains("\"job\":\"5\\\"1\""), "{json}");
    assert!(json.contains("\"fault\":null"));
}
