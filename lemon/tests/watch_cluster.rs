//! `lemon watch --live` end to end on a real Slurm cluster (issue 33's
//! "Done when"), with the embedded source and nothing stood in but the GPUs:
//!
//! * a 4-node job runs (`lemonade_tests::cluster`, prolog and epilog on:
//!   the prolog records the job in each node's database);
//! * one node sampler per node (`healthcheck sample --interval 1
//!   --flush-every 1`, through the cluster's wrapper, as the node's service
//!   runs it) reads its node's fake NVML and exports a chunk every second;
//! * the `lemon watch --live` service polls every second: it ingests the
//!   spool exports into lemon.db itself (nothing else runs `lemon ingest`),
//!   reads squeue and sinfo and drains through the cluster's own scontrol.
//!
//! The GPUs are healthy until the test creates a trigger file; then (the
//! fake NVML's `then` overlay) node2's GPUs throttle hard (SM clock, power
//! and utilisation fall), or every node's utilisation drops together (a
//! checkpoint).
//!
//! The detector runs on a short clock here (1 s steps and an 8 s warm-up)
//! so that each test takes well under a minute on every Slurm
//! series; the limits below are correctness bounds for a loaded CI machine,
//! not measurements.

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use lemonade_tests::fake_nvml;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODES: [&str; 4] = ["node1", "node2", "node3", "node4"];
/// Seconds of healthy samples in lemon.db before the fault: past the warm-up.
const HEALTHY_S: u64 = 12;
/// The issue's bound from the fault to the drain.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);
/// How long the checkpoint is watched: several times the sustain the
/// detector needs, so a wrong call would have been made.
const CHECKPOINT_S: u64 = 20;

/// Every GPU busy, as a training job keeps them.
const BUSY: &str = r#""util_gpu": 97, "util_mem": 40, "power_mw": 650000, "sm_clock_mhz": 1980, "pcie_tx_kbps": 1000, "pcie_rx_kbps": 2000"#;
/// A node whose GPUs throttle hard (a power brake): SM clock, power and
/// utilisation fall, and the GPUs keep working. GPUs that stop altogether
/// are reported, not drained: their own checks judge them
/// (`stopped_fraction`).
const COLLAPSED: &str = r#""util_gpu": 60, "sm_clock_mhz": 705, "power_mw": 250000"#;
/// A checkpoint: the GPUs wait for the file system; clocks stay up.
const CHECKPOINT: &str = r#""util_gpu": 3, "power_mw": 80000"#;

const LEMONADE_TOML: &str = r#"
[watch]
interval_s = 1
stale_s = 5
warmup_s = 8
baseline_s = 5
# Time runs about 30 times faster here than on a cluster (warm-up 8 s for
# 300 s): a node is a candidate for 6 steps of 1 s rather than 18 of 10 s,
# and is drained after holding the drain bar for 20 s rather than 180 s.
continuity_steps = 6
drain_after_s = 20

[watch.service]
drain = true
poll_s = 1
lookback_s = 120
"#;

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    Node2Collapses,
    AllDropTogether,
}

/// A process of the test (sampler, watch service), killed on drop.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The running setup; fields drop in order: the processes before the cluster.
struct Setup {
    watch: Option<Background>,
    _samplers: Vec<Background>,
    c: Cluster,
    job: String,
    trigger: PathBuf,
    db: PathBuf,
    _scenarios: tempfile::TempDir,
}

/// Each node's scenario: busy GPUs, and the fault's overlay while `trigger` exists.
fn scenarios(dir: &Path, fault: Fault, trigger: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut env = BTreeMap::new();
    for node in NODES {
        let then = match fault {
            Fault::Node2Collapses if node == "node2" => Some(COLLAPSED),
            Fault::Node2Collapses => None,
            Fault::AllDropTogether => Some(CHECKPOINT),
        };
        let mut fields = format!("\"defaults\": {{{BUSY}}}");
        if let Some(then) = then {
            fields += &format!(
                ",\n\"then_when\": \"{}\",\n\"then\": {{\"defaults\": {{{then}}}}}",
                trigger.display()
            );
        }
        let path = fake_nvml::derive(dir, node, fake_nvml::HEALTHY, &fields);
        env.insert(
            node.to_string(),
            vec![(
                fake_nvml::SCENARIO_ENV.to_string(),
                path.display().to_string(),
            )],
        );
    }
    env
}

fn lemon_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lemon"))
}

/// `lemon --config --db ARGS` where the cluster's Slurm commands are.
fn lemon(c: &Cluster, db: &Path, args: &[&str]) -> Command {
    let mut cmd = c.host_binary(lemon_bin());
    cmd.arg("--config")
        .arg(c.config_path())
        .arg("--db")
        .arg(db)
        .args(args);
    cmd
}

fn log_file(c: &Cluster, name: &str) -> std::fs::File {
    std::fs::File::create(c.dir().join("log").join(name)).expect("create a log")
}

/// Starts the node's sampler as its service would run it, every second.
fn sampler(c: &Cluster, node: &str) -> Background {
    let log = log_file(c, &format!("sampler-{node}.log"));
    let child = Command::new(c.wrapper("healthcheck"))
        .env("SLURMD_NODENAME", node)
        .args(["sample", "--interval", "1", "--flush-every", "1"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start the sampler");
    Background(child)
}

/// Nodes with samples of `job` in lemon.db.
fn nodes_sampled(db: &Path, job: &str) -> usize {
    let Ok(conn) = lemon::db::open(db, Duration::from_secs(5)) else {
        return 0;
    };
    let rows = lemon::db::samples::recent(&conn, job, &NODES, 0).unwrap_or_default();
    NODES
        .iter()
        .filter(|n| rows.iter().any(|r| r.node == **n))
        .count()
}

/// The cluster, a 4-node job, the samplers and the watch service (which
/// ingests the spool), with every node's samples in lemon.db for [`HEALTHY_S`].
fn start(fault: Fault) -> Setup {
    let scenarios_dir = tempfile::tempdir().unwrap();
    let trigger = scenarios_dir.path().join("fault-now");
    let c = Cluster::start(ClusterOptions {
        nodes: 4,
        prolog: true,
        epilog: true,
        node_env: scenarios(scenarios_dir.path(), fault, &trigger),
        lemonade_toml: LEMONADE_TOML.into(),
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let db = c.dir().join("lemon.db");
    let samplers: Vec<Background> = NODES.iter().map(|n| sampler(&c, n)).collect();
    let job = c
        .sbatch(&["-N4", "--wrap", "sleep 600"])
        .unwrap_or_else(|e| panic!("sbatch: {e}"));
    // The service alone carries the samplers' chunks into lemon.db.
    let watch = Background(
        lemon(&c, &db, &["watch", "--live"])
            .stdout(log_file(&c, "watch.out"))
            .stderr(log_file(&c, "watch.err"))
            .spawn()
            .expect("start lemon watch --live"),
    );
    let sampled = c.wait_until(Duration::from_secs(90), || nodes_sampled(&db, &job) == 4);
    assert!(
        sampled,
        "job {job}: samples of {} nodes in lemon.db; job state {}; logs in {}",
        nodes_sampled(&db, &job),
        c.job_field(&job, "JobState"),
        c.save_logs()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    std::thread::sleep(Duration::from_secs(HEALTHY_S));
    Setup {
        watch: Some(watch),
        _samplers: samplers,
        c,
        job,
        trigger,
        db,
        _scenarios: scenarios_dir,
    }
}

impl Setup {
    /// The watch service's output so far, for failure messages.
    fn watch_log(&self) -> String {
        let read =
            |n: &str| std::fs::read_to_string(self.c.dir().join("log").join(n)).unwrap_or_default();
        let err = read("watch.err");
        // The last polls are enough: the log has one line a second.
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        format!(
            "watch stdout:\n{}\nwatch stderr (last lines):\n{}",
            read("watch.out"),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    }

    fn in_service(&self, node: &str) -> bool {
        let (state, reason) = self.c.node_state(node).unwrap();
        !state.contains("drain") && reason.is_empty()
    }
}

#[test]
fn node2s_gpus_throttling_mid_job_get_it_drained_as_an_outlier_alone_within_two_minutes() {
    lemonade_tests::skip_without_cluster!();
    let mut s = start(Fault::Node2Collapses);
    assert!(
        NODES.iter().all(|n| s.in_service(n)),
        "a node was drained before the fault: {:?}\n{}",
        s.c.run("sinfo", &["-R", "-h"]),
        s.watch_log()
    );
    std::fs::write(&s.trigger, "").unwrap();
    let fault_at = Instant::now();
    let drained = s.c.wait_until(DRAIN_LIMIT, || {
        s.c.node_state("node2")
            .is_ok_and(|(state, reason)| state.contains("drain") && reason.contains(" OUTLIER "))
    });
    let took = fault_at.elapsed();
    assert!(
        drained,
        "node2 not drained {DRAIN_LIMIT:?} after the fault: {:?}\n{}",
        s.c.node_state("node2"),
        s.watch_log()
    );
    eprintln!(
        "watch_cluster: node2 drained {:.1} s after its GPUs throttled (Slurm {})",
        took.as_secs_f64(),
        s.c.slurm_series()
    );
    let (_, reason) = s.c.node_state("node2").unwrap();
    assert!(
        reason.starts_with(&format!("lemon: j{} ", s.job)) && reason.contains(" OUTLIER gpu_"),
        "{reason}"
    );
    let r = s.c.run("sinfo", &["-R", "-h"]).unwrap();
    assert!(
        r.lines()
            .any(|l| l.contains("node2") && l.contains(&format!("lemon: j{}", s.job))),
        "{r}"
    );
    // The peers keep running the job, and stay in service.
    for n in ["node1", "node3", "node4"] {
        assert!(
            s.in_service(n),
            "{n}: {:?}\n{}",
            s.c.node_state(n),
            s.watch_log()
        );
    }
    // One call, acted on once: the service printed the drain.
    s.watch = None;
    let out = std::fs::read_to_string(s.c.dir().join("log/watch.out")).unwrap();
    let drains: Vec<&str> = out.lines().filter(|l| l.starts_with("drained ")).collect();
    assert_eq!(drains.len(), 1, "{out}");
    // Reported first; drained once it held the drain bar for drain_after_s.
    let first = out
        .lines()
        .find(|l| l.contains(" node2: "))
        .unwrap_or_default();
    assert!(first.starts_with("reported "), "{out}");
    assert!(
        drains[0].starts_with(&format!("drained job {} node2: lemon: j{} ", s.job, s.job)),
        "{out}"
    );

    let report = lemon(&s.c, &s.db, &["report"]).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert_eq!(
        report.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(text.contains("Outliers in running jobs"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains(&s.job) && l.contains("node2"))
        .unwrap_or_default();
    assert!(line.contains("drained") && line.contains("gpu_"), "{text}");
    assert!(
        !text.lines().any(|l| l.contains(&s.job)
            && (l.contains("node1") || l.contains("node3") || l.contains("node4"))),
        "{text}"
    );
    let _ = s.c.run("scancel", &[&s.job]);
}

#[test]
fn every_nodes_gpus_dropping_together_is_a_checkpoint_and_drains_nothing() {
    lemonade_tests::skip_without_cluster!();
    let mut s = start(Fault::AllDropTogether);
    std::fs::write(&s.trigger, "").unwrap();
    std::thread::sleep(Duration::from_secs(CHECKPOINT_S));
    // The drop reached lemon.db from every node: the watch had it to judge.
    let conn = lemon::db::open(&s.db, Duration::from_secs(5)).unwrap();
    let rows = lemon::db::samples::recent(&conn, &s.job, &NODES, 0).unwrap();
    for n in NODES {
        let low = rows
            .iter()
            .filter(|r| r.node == n && r.metric == "gpu_util" && r.value < 10.0)
            .count();
        assert!(low >= 5, "{n}: {low} samples of the checkpoint in lemon.db");
    }
    for n in NODES {
        assert!(
            s.in_service(n),
            "{n}: {:?}\n{}",
            s.c.node_state(n),
            s.watch_log()
        );
    }
    s.watch = None;
    let detections = lemon::db::detections::recent(&conn, 10).unwrap();
    assert!(detections.is_empty(), "{detections:?}\n{}", s.watch_log());
    let err = std::fs::read_to_string(s.c.dir().join("log/watch.err")).unwrap();
    assert!(
        err.lines()
            .any(|l| l.contains("1 jobs") && !l.contains(" 0 samples")),
        "the service never read the job's samples:\n{err}"
    );
    let _ = s.c.run("scancel", &[&s.job]);
}
