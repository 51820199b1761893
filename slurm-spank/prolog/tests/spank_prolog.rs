//! `lemonade_spank_prolog.so`, the plugin with a job prolog and epilog,
//! loaded by a real Slurm on the test cluster of `lemonade_tests::cluster`,
//! one cluster per test. What it shares with `lemonade_spank.so` (the
//! option, task exits) is tested in `slurm-spank/tests/`. The workspace's binaries must be built first
//! (`cargo build --workspace --bins`), as for the other end-to-end tests.

use lemonade_config::StoreSettings;
use lemonade_sql::node::{NodeStore, RunRow};
use lemonade_tests::cluster::Cluster;
use lemonade_tests::spank::Plugin;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// The plugin under test.
fn plugin() -> Plugin {
    Plugin::built("liblemonade_spank_prolog.so")
}

fn start(nodes: usize, prolog_in_slurm_conf: bool) -> Cluster {
    plugin().start(nodes, prolog_in_slurm_conf, "prolog=none epilog=none")
}

fn set_plugin_args(c: &Cluster, args: &str) {
    plugin().set_args(c, args);
}

/// The arguments a site would use, with the cluster's programs and config.
fn site_args(c: &Cluster) -> String {
    format!(
        "default=quick allow_off=no prolog={} epilog={} config={} timeout=60",
        c.wrapper("lemonade-prolog").display(),
        c.wrapper("lemonade-epilog").display(),
        c.config_path().display()
    )
}

fn store(c: &Cluster, node: &str) -> StoreSettings {
    StoreSettings {
        path: c.node_db(node),
        ..Default::default()
    }
}

fn output(c: &Cluster, program: &str, args: &[&str]) -> Output {
    c.command(program).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The runs a node's database holds for `job`.
fn runs_of(c: &Cluster, node: &str, job: &str) -> Vec<RunRow> {
    NodeStore::open(&c.node_db(node), Duration::from_secs(2))
        .and_then(|s| s.runs_since(0, 10_000))
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.job_id.as_deref() == Some(job))
        .collect()
}

#[test]
fn full_runs_once_on_every_node_even_with_the_prolog_in_slurm_conf() {
    lemonade_tests::skip_without_cluster!();
    // Prolog=/Epilog= name lemonade-prolog/-epilog too: the site runs both.
    let c = start(3, true);
    set_plugin_args(&c, &site_args(&c));

    let job = c
        .sbatch(&["-N3", "--health-check=full", "--wrap", "srun true"])
        .unwrap();
    assert!(
        c.wait_job_completed(&job, Duration::from_secs(120)),
        "job {}",
        job
    );

    for node in c.nodes() {
        // The epilogs run after the job: wait for both phases on the node.
        let mut runs = Vec::new();
        c.wait_until(Duration::from_secs(60), || {
            runs = runs_of(&c, node, &job);
            runs.iter().any(|r| r.profile == "epilog")
        });
        let summary: Vec<(&str, &str)> = runs
            .iter()
            .map(|r| (r.trigger.as_str(), r.profile.as_str()))
            .collect();
        // One prolog run with the full suite, one epilog run, both the
        // plugin's: lemonade-prolog/-epilog from slurm.conf saw the marker.
        assert_eq!(
            {
                let mut s = summary.clone();
                s.sort();
                s
            },
            [("spank", "epilog"), ("spank", "full")],
            "{node}: {summary:?}"
        );
        assert!(
            !store(&c, node).spank_marker_path(&job).exists(),
            "{node}: lemonade-epilog left the marker"
        );
    }

    // Without the option the site default applies.
    let quick = c.sbatch(&["-N1", "-w", "node2", "--wrap", "true"]).unwrap();
    assert!(
        c.wait_job_completed(&quick, Duration::from_secs(60)),
        "job {}",
        quick
    );
    let runs = runs_of(&c, "node2", &quick);
    assert!(
        runs.iter()
            .any(|r| r.trigger == "spank" && r.profile == "quick"),
        "{runs:?}"
    );
    assert!(!runs.iter().any(|r| r.trigger == "prolog"), "{runs:?}");

    // `off` (where allowed) skips the prolog's checks, not the epilog's:
    // those protect the next job.
    set_plugin_args(&c, &site_args(&c).replace("allow_off=no", "allow_off=yes"));
    let off = c
        .sbatch(&["-N1", "-w", "node3", "--health-check=off", "--wrap", "true"])
        .unwrap();
    assert!(
        c.wait_job_completed(&off, Duration::from_secs(60)),
        "job {off}"
    );
    let mut runs = Vec::new();
    c.wait_until(Duration::from_secs(60), || {
        runs = runs_of(&c, "node3", &off);
        !runs.is_empty()
    });
    let summary: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r.trigger.as_str(), r.profile.as_str()))
        .collect();
    assert_eq!(summary, [("spank", "epilog")]);
}

#[test]
fn a_fault_on_one_node_requeues_the_job_onto_healthy_nodes() {
    lemonade_tests::skip_without_cluster!();
    let c = start(3, false);
    set_plugin_args(&c, &site_args(&c));
    c.set_fixture("node1", "xid-79").unwrap();

    // The scheduler fills node1 first; its prolog finds the XID.
    let job = c
        .sbatch(&["-N2", "--health-check=full", "--wrap", "srun hostname"])
        .unwrap();
    assert!(
        c.wait_job_completed(&job, Duration::from_secs(120)),
        "job {}",
        job
    );

    assert!(c.job_field(&job, "Restarts").parse::<u32>().unwrap_or(0) >= 1);
    let nodes = c.job_field(&job, "NodeList");
    assert!(
        !nodes.contains("node1") && nodes != "node[1-2]",
        "ran on {nodes}"
    );
    let (state, reason) = c.node_state("node1").unwrap();
    assert!(reason.starts_with("hc: XID_79"), "{state} {reason}");
    let sinfo_r = c.run("sinfo", &["-R", "-h", "-o", "%E|%N"]).unwrap();
    assert!(
        sinfo_r
            .lines()
            .any(|l| l.starts_with("hc: XID_79") && l.ends_with("node1")),
        "sinfo -R shows our reason, not `Prolog error`: {sinfo_r}"
    );
    let runs = runs_of(&c, "node1", &job);
    assert!(
        runs.iter()
            .any(|r| r.trigger == "spank" && r.profile == "full" && r.worst == "down"),
        "{runs:?}"
    );
}

#[test]
fn a_broken_config_or_missing_program_never_takes_slurm_down() {
    lemonade_tests::skip_without_cluster!();
    let c = start(3, false);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("lemonade.toml");
    std::fs::write(&broken, "[store\npath = ").unwrap();
    set_plugin_args(
        &c,
        &format!(
            "config={} prolog=/nonexistent/lemonade-prolog epilog=/nonexistent/lemonade-epilog timeout=5",
            broken.display()
        ),
    );

    // Documented: our own failures are logged and the job runs unchecked.
    let out = output(&c, "srun", &["-N3", "--health-check=full", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let job = c.sbatch(&["-N3", "--wrap", "srun true"]).unwrap();
    assert!(
        c.wait_job_completed(&job, Duration::from_secs(60)),
        "job {}",
        job
    );
    for node in c.nodes() {
        let ok = c.wait_until(Duration::from_secs(20), || {
            c.node_state(node).is_ok_and(|(s, _)| s == "idle")
        });
        assert!(ok, "{node}: {:?}", c.node_state(node));
    }
    let log = std::fs::read_to_string(c.dir().join("log/slurmd.node1.log")).unwrap_or_default();
    assert!(
        log.contains("cannot run /nonexistent/lemonade-prolog"),
        "{log}"
    );
    assert!(
        log.contains("no task-exit records or job markers on this node"),
        "{log}"
    );
    assert!(!log.contains("fatal"), "{log}");
    // Nothing written where the broken config does not say.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    assert!(!Path::new("/nonexistent").exists());
}
