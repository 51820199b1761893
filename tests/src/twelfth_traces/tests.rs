//! The generator's own tests: determinism, the truth, each fault's mark,
//! the scorer's rules, and a size report.

use super::emit::Row;
use super::plan::{Mode, Plan};
use super::sim::Sim;
use super::*;
use std::collections::BTreeMap;

fn small(seed: u64) -> IndependentSpec {
    IndependentSpec {
        jobs: 14,
        max_rows: 250_000,
        ..IndependentSpec::new(seed)
    }
}

fn bytes(spec: &IndependentSpec) -> (Vec<u8>, Vec<IndependentJob>) {
    let mut out = Vec::new();
    let truth = generate(spec, &mut out).expect("writes to a Vec");
    (out, truth)
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let (a, ta) = bytes(&small(3));
    let (b, tb) = bytes(&small(3));
    let (c, _) = bytes(&small(4));
    assert_eq!(a, b);
    assert_eq!(ta.len(), tb.len());
    assert!(ta
        .iter()
        .zip(&tb)
        .all(|(x, y)| x.job == y.job && x.fault == y.fault && x.confounders == y.confounders));
    assert_ne!(a, c);
}

/// Per job: (first row time, last row time, nodes seen); checks the format.
fn spans(csv: &[u8]) -> BTreeMap<String, (i64, i64, Vec<String>)> {
    let text = std::str::from_utf8(csv).expect("utf-8");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,job,node,metric,value"));
    let mut out: BTreeMap<String, (i64, i64, Vec<String>)> = BTreeMap::new();
    let mut last = i64::MIN;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 5, "{l}");
        let t: i64 = f[0].parse().expect("integer time");
        assert!(t >= last, "rows out of time order at {l}");
        last = t;
        assert!(f[1].bytes().all(|b| b.is_ascii_digit()));
        let v: f64 = f[4].parse().expect("decimal value");
        assert!(v.is_finite() && v >= 0.0, "{l}");
        let e = out.entry(f[1].to_string()).or_insert((t, t, Vec::new()));
        e.1 = t;
        if !e.2.iter().any(|n| n == f[2]) {
            e.2.push(f[2].to_string());
        }
    }
    out
}

#[test]
fn truth_is_consistent_with_the_rows() {
    let (mut jobs, mut faulty, mut subtle) = (0, 0, 0);
    for seed in 1..=4 {
        let spec = IndependentSpec {
            max_rows: 400_000,
            ..IndependentSpec::new(seed)
        };
        let (csv, truth) = bytes(&spec);
        let spans = spans(&csv);
        assert_eq!(truth.len(), spec.jobs);
        for j in &truth {
            assert!(j.confounders.iter().any(|c| c.starts_with("job:")), "{j:?}");
            let (t0, t1, seen) = &spans[&j.job];
            assert!(seen.iter().all(|n| j.nodes.contains(n)), "{j:?}");
            jobs += 1;
            if let Some(f) = &j.fault {
                faulty += 1;
                subtle += usize::from(f.subtle);
                assert!(j.nodes.contains(&f.node), "{j:?}");
                assert!(
                    f.onset > *t0 + 300 && f.onset < *t1,
                    "onset outside the trace: {j:?} {t0} {t1}"
                );
                assert!(
                    !j.confounders.iter().any(|c| c.starts_with("user_")),
                    "{j:?}"
                );
            }
        }
    }
    let share = faulty as f64 / jobs as f64;
    assert!((share - 0.4).abs() < 0.06, "fault share {share}");
    assert!(
        subtle >= 1 && subtle * 3 < faulty,
        "subtle {subtle} of {faulty}"
    );
}

/// Mean of metric `m` of node `i` over true times [from, to).
fn mean(rows: &[Row], p: &Plan, i: usize, m: u8, from: i64, to: i64) -> Option<f64> {
    let host = p.hosts[i] as u16;
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.host == host && r.metric == m && (from..to).contains(&(r.t - p.skew[i])))
        .map(|r| r.value)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The faulty node's metric against its peers' median over a window; the
/// peers are the nodes of the same role (rollout or learner in RL).
fn versus(rows: &[Row], p: &Plan, f: usize, m: u8, w: (i64, i64)) -> Option<(f64, f64)> {
    let mine = mean(rows, p, f, m, w.0, w.1)?;
    let mut peers: Vec<f64> = (0..p.n())
        .filter(|&i| i != f && p.rollout[i] == p.rollout[f])
        .filter_map(|i| mean(rows, p, i, m, w.0, w.1))
        .collect();
    peers.sort_by(f64::total_cmp);
    Some((mine, *peers.get(peers.len() / 2)?))
}

/// One faulty job's observation: did the brief's mark show?
fn mark_holds(p: &Plan, rows: &[Row]) -> Option<bool> {
    let f = p.fault.as_ref()?;
    // Up to the halt (after it every peer spins), but the lost GPU stays lost.
    let stop = p.halt.map_or(i64::MAX, |h| {
        if f.kind == faults::FaultKind::OffBus {
            h.kill
        } else {
            h.t
        }
    });
    let end = stop.min(f.onset + 330);
    let (pre, post) = (
        ((f.onset - 600).max(p.steady), f.onset - 20),
        (f.onset + 30, end),
    );
    // Difference in differences: the node's ratio to its peers moves.
    let did = |m: u8| -> Option<f64> {
        let (a, b) = versus(rows, p, f.node, m, post)?;
        let (c, d) = versus(rows, p, f.node, m, pre)?;
        Some((a / b.max(1e-9)) / (c / d.max(1e-9)).max(1e-9))
    };
    let xid = |x: u32| mean(rows, p, f.node, 16, f.onset + 1, p.end).is_some_and(|v| v == x as f64);
    Some(match f.kind {
        faults::FaultKind::Ecc | faults::FaultKind::NvLink if !f.subtle && end <= f.onset + 30 => {
            xid(f.xid)
        }
        faults::FaultKind::Ecc => xid(f.xid),
        faults::FaultKind::OffBus => xid(79) && did(4)? < 0.95,
        faults::FaultKind::Gsp => {
            xid(f.xid) || mean(rows, p, f.node, 0, f.onset + 60, p.end).is_none()
        }
        faults::FaultKind::NvLink => xid(74) && did(7)? < 0.9,
        faults::FaultKind::Pcie => did(8)? < 0.9,
        faults::FaultKind::Nic => did(9)? < 0.99,
        // A throttled GPU is hotter and clocks lower; in colocated RL the
        // straggler decodes while its peers idle, so its mean clock can rise.
        faults::FaultKind::Thermal => did(6)? < 0.995 || did(5)? > 1.0,
        faults::FaultKind::PowerBrake => did(6)? < 0.995,
        // One slow GPU: the node's mean clock barely drops, or it computes
        // (decodes) while its peers wait.
        faults::FaultKind::SlowGpu => did(6)? < 1.0 || did(0)? > 1.0,
        faults::FaultKind::Host => did(0)? < 0.995,
        faults::FaultKind::Unreachable => mean(rows, p, f.node, 0, f.onset + 35, p.end).is_none(),
    })
}

#[test]
fn each_fault_kind_leaves_its_mark() {
    let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for seed in 1..=20 {
        let spec = IndependentSpec {
            max_rows: 700_000,
            ..IndependentSpec::new(seed)
        };
        let (site, plans) = draw(&spec);
        for (k, p) in plans.iter().enumerate().filter(|(_, p)| p.fault.is_some()) {
            let sim = Sim::new(p, &site, mix(spec.seed ^ (k as u64 + 1) << 32));
            let mut rows = Vec::new();
            for i in 0..p.n() {
                node_rows(&sim, k as u16, i, &mut rows);
            }
            let f = p.fault.as_ref().expect("faulty");
            if let Some(ok) = mark_holds(p, &rows) {
                let e = seen.entry(f.kind.name()).or_default();
                e.0 += 1;
                e.1 += usize::from(ok);
                if !ok {
                    eprintln!(
                        "seed {seed} job {} {:?} subtle={} x={:.2}: no mark",
                        p.id, f.kind, f.subtle, f.x
                    );
                }
            }
        }
    }
    eprintln!("{seen:?}");
    assert_eq!(
        seen.len(),
        faults::KINDS.len(),
        "every kind drawn: {seen:?}"
    );
    for (kind, (n, ok)) in &seen {
        assert!(*ok as f64 >= 0.8 * *n as f64, "{kind}: mark in {ok} of {n}");
    }
}

#[test]
fn halts_end_synchronous_jobs_with_peers_spinning() {
    for seed in 1..=6 {
        let (site, plans) = draw(&small(seed));
        for (k, p) in plans.iter().enumerate() {
            let Some(h) = p.halt else { continue };
            if !p.kind.synchronous() || h.culprit.is_none() || h.peers != Mode::Spin {
                continue;
            }
            assert_eq!(p.end, h.kill + 20);
            let sim = Sim::new(p, &site, k as u64);
            let c = h.culprit.expect("culprit");
            let peer = (0..p.n()).find(|&i| i != c && sim.present(i, h.t + 1));
            if let Some(s) = peer.and_then(|i| sim.snap(i, h.t + 1)) {
                assert!(s.spin > 0.9 && s.busy < 0.05, "{s:?}");
            }
        }
    }
}

fn job(id: &str, nodes: &[&str], fault: Option<(&str, i64)>, conf: &[&str]) -> IndependentJob {
    IndependentJob {
        job: id.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        fault: fault.map(|(n, t)| PlantedFault {
            kind: "thermal_throttle".into(),
            node: n.into(),
            onset: t,
            subtle: false,
        }),
        confounders: conf.iter().map(|c| c.to_string()).collect(),
    }
}

fn call(job: &str, node: &str, t: i64, drain: bool) -> Call {
    Call {
        job: job.into(),
        node: node.into(),
        detected_at: t,
        drain,
    }
}

/// Five jobs (three faulty) and calls of every sort.
fn scorer_case() -> (Vec<IndependentJob>, Vec<Call>) {
    let jobs = vec![
        job("1", &["a", "b"], Some(("a", 1000)), &["c1"]),
        job("2", &["c", "d"], Some(("c", 1000)), &["c1", "c2"]),
        job("3", &["e", "f"], None, &["c2"]),
        job("4", &["g", "h"], Some(("g", 500)), &[]),
        job("5", &["i", "j"], None, &[]),
    ];
    let calls = vec![
        call("1", "a", 990, false), // early, but a later call detects
        call("1", "a", 1060, false),
        call("1", "a", 1300, true),
        call("2", "d", 1100, true), // wrong node
        call("2", "c", 900, false), // early only
        call("3", "e", 10, false),
        call("3", "f", 20, true),
        call("3", "f", 30, true),
        call("9", "z", 5, true), // unknown job
        call("9", "z", 6, false),
    ];
    (jobs, calls)
}

#[test]
fn scorer_counts_every_field_of_all_calls() {
    let (jobs, calls) = scorer_case();
    let s = score(&jobs, &calls);
    let a = &s.total.all;
    assert_eq!((a.jobs, a.faulty, a.detected), (5, 3, 1));
    let false_parts = (
        a.healthy_calls,
        a.healthy_jobs_called,
        a.wrong_node_calls,
        a.early_calls,
        a.unknown_calls,
    );
    assert_eq!(false_parts, (2, 1, 1, 1, 1));
    assert_eq!(a.delays, vec![60]);
    assert_eq!(a.false_calls(), 5);
    assert!((a.precision() - 1.0 / 6.0).abs() < 1e-9);
    assert!((a.recall() - 1.0 / 3.0).abs() < 1e-9);
    assert_eq!(a.median_delay(), Some(60));
    let empty = score(&jobs, &[]);
    let e = &empty.total.all;
    assert_eq!(
        (e.precision(), e.recall(), e.median_delay()),
        (1.0, 0.0, None)
    );
    assert!(s.to_string().contains("TOTAL"));
}

#[test]
fn scorer_drain_tier_and_groups() {
    let (jobs, calls) = scorer_case();
    let s = score(&jobs, &calls);
    let d = &s.total.drain;
    let parts = (
        d.detected,
        d.healthy_calls,
        d.healthy_jobs_called,
        d.wrong_node_calls,
        d.early_calls,
        d.unknown_calls,
    );
    assert_eq!(parts, (1, 1, 1, 1, 0, 1));
    assert_eq!(d.delays, vec![300]);
    assert_eq!(d.false_calls(), 3);
    let c1 = &s.by_confounder["c1"].all;
    assert_eq!(
        (
            c1.jobs,
            c1.faulty,
            c1.detected,
            c1.wrong_node_calls,
            c1.early_calls
        ),
        (2, 2, 1, 1, 1)
    );
    let c2 = &s.by_confounder["c2"];
    assert_eq!(
        (
            c2.all.jobs,
            c2.all.healthy_calls,
            c2.drain.healthy_calls,
            c2.all.unknown_calls
        ),
        (2, 2, 1, 0)
    );
    assert_eq!((c2.drain.wrong_node_calls, c2.drain.early_calls), (1, 0));
    let k = &s.by_kind["thermal_throttle"];
    assert_eq!((k.all.faulty, k.all.detected, k.drain.detected), (3, 1, 1));
}

#[test]
#[ignore]
fn size_report() {
    let started = std::time::Instant::now();
    let (csv, truth) = bytes(&IndependentSpec::new(1));
    let rows = csv.iter().filter(|&&b| b == b'\n').count() - 1;
    let faulty = truth.iter().filter(|j| j.fault.is_some()).count();
    eprintln!(
        "seed 1: {rows} rows, {} bytes, {} jobs ({faulty} faulty) in {:?}",
        csv.len(),
        truth.len(),
        started.elapsed()
    );
    let sizes: Vec<usize> = truth.iter().map(|j| j.nodes.len()).collect();
    eprintln!("nodes per job: {sizes:?}");
    eprintln!("{}", score(&truth, &[]));
    let mut labels: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 2..=6 {
        let started = std::time::Instant::now();
        let (csv, truth) = bytes(&IndependentSpec::new(seed));
        let rows = csv.iter().filter(|&&b| b == b'\n').count() - 1;
        eprintln!(
            "seed {seed}: {rows} rows, {} bytes in {:?}",
            csv.len(),
            started.elapsed()
        );
        for c in truth.iter().flat_map(|j| &j.confounders) {
            *labels.entry(c.clone()).or_default() += 1;
        }
    }
    eprintln!("labels over seeds 2-6: {labels:?}");
    // To look at the rows: TWELFTH_OUT=/tmp/seed1.csv cargo test ... size_report.
    if let Ok(path) = std::env::var("TWELFTH_OUT") {
        std::fs::write(&path, &csv).expect("writes the CSV");
        for j in &truth {
            eprintln!(
                "{} {:?} {:?} {:?}",
                j.job,
                j.nodes.len(),
                j.fault,
                j.confounders
            );
        }
    }
}
