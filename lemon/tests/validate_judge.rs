//! `lemon validate judge`: a fleet's validation results, generated here
//! independently of the judge's rule, replayed through the library and the
//! binary. The noise is not what the rule assumes: a triangular core with a
//! cubed-uniform skew (a long tail on the failing side for latency, on the
//! good side for bandwidth), good-side outliers, stale older runs, a node
//! missing a metric, and a second SKU too small to learn from.

use lemon::validate::criteria::Rule;
use lemon::validate::judge::{judge_file, Judgement};
use lemonade_config::{FloorRule, ValidateSettings};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

/// splitmix64: a small, reproducible generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A metric of the generated fleet: its level and whether higher is better.
const H100: [(&str, f64, bool); 8] = [
    ("avg_busbw", 470.0, true),
    ("busbw.out_of_place.1073741824", 482.0, true),
    ("busbw.in_place.1073741824", 480.5, true),
    ("gflops.gpu0", 49_800.0, true),
    ("gflops.gpu1", 49_750.0, true),
    ("host_to_device_memcpy_ce.sum", 441.0, true),
    ("host_device_latency_sm.sum", 6.4, false),
    ("wrong_total", 0.0, true),
];

const NOW: i64 = 1_760_000_000;

/// Relative noise: triangular on ±1.2%, plus up to 1% of skew towards
/// `towards` (+1 or -1), cubed so most nodes get little of it.
fn noise(rng: &mut Rng, towards: f64) -> f64 {
    let core = (rng.unit() + rng.unit() - 1.0) * 0.012;
    core + towards * 0.01 * rng.unit().powi(3)
}

/// The fleet of one seed: the CSV text and the degraded nodes.
fn fleet(seed: u64, degrade: bool) -> (String, BTreeSet<String>) {
    let mut rng = Rng(seed);
    let names: Vec<String> = (1..=64).map(|i| format!("gpu{i:03}")).collect();
    let mut bad = BTreeSet::new();
    while degrade && bad.len() < 3 {
        bad.insert(names[rng.below(64)].clone());
    }
    let missing = loop {
        let n = &names[rng.below(64)];
        if !bad.contains(n) {
            break n.clone();
        }
    };
    // Two nodes run fast (a newer BIOS, better cooling); a degraded node is
    // not one of them, or its slowdown would only cancel its speed-up.
    let mut fast = Vec::new();
    while fast.len() < 2 {
        let n = &names[rng.below(64)];
        if !bad.contains(n) {
            fast.push(n.clone());
        }
    }
    let mut rows = Vec::new();
    for node in &names {
        for (metric, level, higher) in H100 {
            if level == 0.0 {
                rows.push(format!("{node},H100x8,{NOW},{metric},0"));
                continue;
            }
            if node == &missing && metric == "gflops.gpu1" {
                continue;
            }
            // Skewed upwards: the good side of a bandwidth, the failing
            // side of a latency.
            let mut v = level * (1.0 + noise(&mut rng, 1.0));
            if fast.contains(node) {
                let better = 1.0 + 0.04 + 0.04 * rng.unit();
                v = if higher { v * better } else { v / better };
            }
            if bad.contains(node) && metric == "avg_busbw" {
                v *= 1.0 - (0.05 + 0.05 * rng.unit());
            }
            rows.push(format!("{node},H100x8,{NOW},{metric},{v:.3}"));
            // A week-old run: noisier, and on some nodes slow before a repair.
            let old = if rng.below(10) == 0 { 0.7 } else { 1.0 };
            let t = NOW - 7 * 86_400;
            rows.push(format!("{node},H100x8,{t},{metric},{:.3}", v * old));
        }
    }
    for i in 1..=6 {
        let v = 231.0 * (1.0 + noise(&mut rng, 1.0));
        rows.push(format!("a100-{i},A100x8,{NOW},avg_busbw,{v:.3}"));
        rows.push(format!("a100-{i},A100x8,{NOW},wrong_total,0"));
    }
    // The file's order is no help: shuffle (Fisher-Yates).
    for i in (1..rows.len()).rev() {
        rows.swap(i, rng.below(i + 1));
    }
    let text = "node,sku,time,metric,value\n".to_string() + &rows.join("\n") + "\n";
    (text, bad)
}

fn settings() -> ValidateSettings {
    let mut s = ValidateSettings::default();
    s.floor.push(FloorRule {
        metric: "avg_busbw".into(),
        sku: Some("A100x8".into()),
        min: Some(200.0),
        max: None,
    });
    s
}

fn flagged(j: &Judgement) -> BTreeSet<String> {
    j.failing.iter().map(|n| n.node.clone()).collect()
}

#[test]
fn of_64_nodes_exactly_the_3_degraded_by_5_to_10_percent_are_flagged_over_50_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let (mut false_flags, mut misses, mut closest) = (0, 0, f64::INFINITY);
    for seed in 0..50 {
        let (text, bad) = fleet(1000 + seed, true);
        let path = dir.path().join(format!("results-{seed}.csv"));
        std::fs::write(&path, text).unwrap();
        let j = judge_file(&path, &settings()).unwrap();
        let got = flagged(&j);
        false_flags += got.difference(&bad).count();
        misses += bad.difference(&got).count();
        for m in bad.difference(&got) {
            eprintln!("seed {seed}: missed {m}");
        }
        for n in &j.failing {
            assert!(n.failures.iter().all(|f| f.metric == "avg_busbw"), "{n:?}");
            assert!(n.failures.iter().all(|f| f.band.rule == Rule::Learned));
            for f in &n.failures {
                closest = closest.min(f.band.min.unwrap() / f.value - 1.0);
            }
        }
        assert_eq!(j.nodes, 70);
        assert_eq!(j.missing.len(), 1, "one node lacks gflops.gpu1");
        let a100 = j
            .below_min
            .iter()
            .find(|b| b.metric == "avg_busbw")
            .unwrap();
        assert_eq!(
            (a100.sku.as_str(), a100.results, a100.static_floor),
            ("A100x8", 6, true)
        );
    }
    eprintln!(
        "50 seeds x 64 nodes: {false_flags} false flags, {misses} misses of 150; \
         the degraded value nearest its band sat {:.2}% below it",
        closest * 100.0
    );
    assert_eq!((false_flags, misses), (0, 0));
}

#[test]
fn a_healthy_fleet_has_no_false_flag_over_50_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let mut false_flags = 0;
    for seed in 0..50 {
        let path = dir.path().join("results.csv");
        std::fs::write(&path, fleet(5000 + seed, false).0).unwrap();
        false_flags += flagged(&judge_file(&path, &settings()).unwrap()).len();
    }
    eprintln!("50 healthy fleets x 70 nodes: {false_flags} false flags");
    assert_eq!(false_flags, 0);
}

fn lemon_judge(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("lemonade.toml");
    let toml = format!(
        "[lemon]\ndb_path = \"{}/lemon.db\"\n\n[[validate.floor]]\nmetric = \"avg_busbw\"\n\
         sku = \"A100x8\"\nmin = 200.0\n",
        dir.display()
    );
    std::fs::write(&config, toml).unwrap();
    Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(&config)
        .args(["validate", "judge"])
        .args(args)
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn the_binary_exits_1_with_the_failing_nodes_in_json_and_3_when_none_fails_but_a_result_is_missing()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    let (text, bad) = fleet(42, true);
    std::fs::write(&path, text).unwrap();
    let out = lemon_judge(
        dir.path(),
        &["--results", path.to_str().unwrap(), "--format", "json"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: BTreeSet<String> = (doc["failing"].as_array().unwrap().iter())
        .map(|n| n["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, bad);
    let first = &doc["failing"][0]["failures"][0];
    assert_eq!(first["metric"], "avg_busbw");
    assert_eq!(first["band"]["rule"], "learned");
    assert!(first["band"]["min"].as_f64().unwrap() > first["value"].as_f64().unwrap());
    assert!(
        !dir.path().join("lemon.db").exists(),
        "judging needs no database"
    );

    // No node fails, but one node has no gflops.gpu1: that node was not
    // judged on it, which is no pass (exit 3, issue 48).
    std::fs::write(&path, fleet(42, false).0).unwrap();
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("NOT JUDGED"), "{stdout}");
    assert!(
        stdout.starts_with("0 of 70 nodes fail (2 SKUs,"),
        "{stdout}"
    );
    assert!(
        stdout.contains("note: A100x8 avg_busbw: static floor: 6 results of 8 needed"),
        "{stdout}"
    );
}

#[test]
fn a_bad_row_or_a_symlink_exits_2_naming_the_file_and_line_with_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    std::fs::write(
        &path,
        "node,sku,time,metric,value\na,s,1,avg_busbw,1\na,s,1,m\n",
    )
    .unwrap();
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("results.csv:3: 4 fields; expected 5"),
        "{stderr}"
    );

    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let out = lemon_judge(dir.path(), &["--results", link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("link.csv: is a symlink"));
}

/// The fleet: 64 nodes, four metrics by common names, three nodes
/// 6-10% slow, each in one of the three names the default patterns did
/// not know.
fn common_names_fleet() -> (String, BTreeSet<String>) {
    let mut rng = Rng(48);
    let metrics = [
        ("nccl_allreduce_busbw", 480.0),
        ("h2d_bandwidth", 26.0),
        ("gemm_tflops", 700.0),
        ("ib_write_bw", 48.5),
    ];
    let slow = [("gpu007", 0), ("gpu031", 1), ("gpu050", 2)];
    let mut text = String::from("node,sku,time,metric,value\n");
    for i in 1..=64 {
        let node = format!("gpu{i:03}");
        for (m, (metric, level)) in metrics.iter().enumerate() {
            let mut v = level * (1.0 + (rng.unit() - 0.5) * 0.02);
            if slow.contains(&(node.as_str(), m)) {
                v *= 1.0 - (0.06 + 0.04 * rng.unit());
            }
            text += &format!("{node},H100x8,{NOW},{metric},{v:.3}\n");
        }
    }
    let bad = slow.iter().map(|(n, _)| n.to_string()).collect();
    (text, bad)
}

#[test]
fn the_three_nodes_slow_in_metrics_with_common_names_all_fail_and_the_binary_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    let (text, bad) = common_names_fleet();
    std::fs::write(&path, text).unwrap();
    let j = judge_file(&path, &ValidateSettings::default()).unwrap();
    assert_eq!(flagged(&j), bad, "{j:?}");
    assert!(j.no_direction.is_empty(), "{:?}", j.no_direction);
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("3 of 64 nodes fail"), "{stdout}");
}

#[test]
fn superbenchs_results_summary_is_judged_directly_with_its_own_metric_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results-summary.jsonl");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/superbench/results-summary.jsonl");
    std::fs::copy(&fixture, &path).unwrap();
    let j = judge_file(&path, &ValidateSettings::default()).unwrap();
    let failures: BTreeSet<(String, String)> = (j.failing.iter())
        .flat_map(|n| {
            n.failures
                .iter()
                .map(|f| (n.node.clone(), f.metric.clone()))
        })
        .collect();
    let want: BTreeSet<(String, String)> = [
        ("node05", "nccl-bw:default/allreduce_8589934592_busbw"),
        ("node09", "mem-bw/h2d_bw"),
        ("node11", "kernel-launch/return_code"),
        ("node13", "gemm-flops/fp16_tc_flops"),
    ]
    .iter()
    .map(|(n, m)| (n.to_string(), m.to_string()))
    .collect();
    assert_eq!(failures, want);
    assert!(j.no_direction.is_empty(), "{:?}", j.no_direction);
    assert_eq!((j.nodes, j.skus), (16, 1));
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_metric_no_node_can_be_judged_by_exits_3_and_says_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    let mut text = String::from("node,sku,time,metric,value\n");
    for i in 0..4 {
        text += &format!("n{i},s,{NOW},gemm_tflops,{}\n", 700 + i);
    }
    std::fs::write(&path, text).unwrap();
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("NOT JUDGED"), "{stdout}");
}

#[test]
fn a_superbench_line_with_a_value_that_is_no_number_exits_2_naming_line_and_metric() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results-summary.jsonl");
    std::fs::write(
        &path,
        "{\"node\": \"a\", \"mem-bw/h2d_bw\": 26.0}\n{\"node\": \"b\", \"mem-bw/h2d_bw\": null}\n",
    )
    .unwrap();
    let out = lemon_judge(dir.path(), &["--results", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("results-summary.jsonl:2: mem-bw/h2d_bw: null is not a finite number"),
        "{stderr}"
    );
}
