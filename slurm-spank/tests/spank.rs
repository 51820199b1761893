//! The plugin loaded by a real Slurm (slurmd, slurmstepd, srun, sbatch,
//! salloc) on the test cluster of `lemonade_tests::cluster`, one cluster per
//! test. The workspace's binaries must be built first
//! (`cargo build --workspace --bins`), as for the other end-to-end tests.
//!
//! The plugin's arguments name paths inside the cluster's directory, known
//! only once it runs: each test starts the cluster with a plain plugin line
//! (so that slurmd loads the plugin and runs the SPANK job prolog/epilog) and
//! then rewrites plugstack.conf, which srun, sbatch and every slurmstepd read
//! afresh.

use lemonade_config::StoreSettings;
use lemonade_spool::TaskExit;
use lemonade_sql::node::{NodeStore, RunRow};
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The plugin cargo built with this test binary (`target/<profile>/deps/`).
fn plugin() -> PathBuf {
    let path = std::env::current_exe()
        .expect("the test binary's path")
        .with_file_name("liblemonade_spank.so");
    assert!(path.exists(), "{} missing", path.display());
    path
}

fn start(nodes: usize, prolog_in_slurm_conf: bool) -> Cluster {
    let cluster = Cluster::start(ClusterOptions {
        nodes,
        prolog: prolog_in_slurm_conf,
        epilog: prolog_in_slurm_conf,
        plugstack: vec![format!(
            "required {} prolog=none epilog=none",
            plugin().display()
        )],
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cluster up in {:.1} s", cluster.started_in.as_secs_f64());
    cluster
}

/// Replaces the plugin's line in plugstack.conf.
fn set_plugin_args(c: &Cluster, args: &str) {
    std::fs::write(
        c.dir().join("etc/plugstack.conf"),
        format!("required {} {args}\n", plugin().display()),
    )
    .unwrap();
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

/// `scontrol show job` fields.
fn job_field(c: &Cluster, job: &str, key: &str) -> String {
    let out = c
        .run("scontrol", &["show", "job", "-o", job])
        .unwrap_or_default();
    out.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or("")
        .to_string()
}

/// Waits for a batch job to complete; a requeued job waits out its
/// BeginTime, so it is told to start now.
fn wait_completed(c: &Cluster, job: &str, limit: Duration) {
    let ok = c.wait_until(limit, || {
        if job_field(c, job, "Reason") == "BeginTime" {
            let _ = c.run(
                "scontrol",
                &["update", &format!("JobId={job}"), "StartTime=now"],
            );
        }
        job_field(c, job, "JobState") == "COMPLETED"
    });
    assert!(
        ok,
        "job {job} did not complete: {}",
        c.run("scontrol", &["show", "job", job]).unwrap_or_default()
    );
}

fn task_exits(c: &Cluster, node: &str) -> Vec<TaskExit> {
    std::fs::read_to_string(store(c, node).task_exits_path())
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn the_option_is_offered_and_bad_values_or_arguments_are_refused() {
    let c = start(1, false);
    set_plugin_args(
        &c,
        &format!(
            "prolog=none epilog=none config={}",
            c.config_path().display()
        ),
    );

    for client in ["srun", "sbatch", "salloc"] {
        let help = output(&c, client, &["--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(
            text.contains("--health-check=quick|full|off"),
            "{client} --help lacks the option:\n{text}"
        );
    }
    let bad = output(&c, "srun", &["--health-check=fast", "true"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("`fast` is not one of quick, full, off"),
        "{}",
        stderr(&bad)
    );
    let bad = output(&c, "sbatch", &["--health-check=fast", "--wrap", "true"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("`fast` is not one of quick, full, off"));
    // allow_off defaults to no.
    let off = output(&c, "sbatch", &["--health-check=off", "--wrap", "true"]);
    assert!(!off.status.success());
    assert!(stderr(&off).contains("allow_off=no"), "{}", stderr(&off));
    let queue = c.run("squeue", &["-h", "-t", "all"]).unwrap();
    assert!(queue.trim().is_empty(), "a refused job was queued: {queue}");
    let good = output(&c, "srun", &["--health-check=full", "true"]);
    assert!(good.status.success(), "{}", stderr(&good));

    // A typo in plugstack.conf: every client and slurmd refuse, naming it.
    set_plugin_args(&c, "default=quick alow_off=yes");
    let out = output(&c, "srun", &["true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown argument `alow_off=yes`"),
        "{}",
        stderr(&out)
    );
    let out = output(&c, "sbatch", &["--wrap", "true"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown argument `alow_off=yes`"));
    let slurmd = Command::new("/usr/sbin/slurmd")
        .args(["-D", "-N", "node1"])
        .env("SLURM_CONF", c.slurm_conf())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_exit(slurmd, Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| !s.success()),
        "slurmd started: {status:?}"
    );
    let log = std::fs::read_to_string(c.dir().join("log/slurmd.node1.log")).unwrap_or_default();
    assert!(log.contains("unknown argument `alow_off=yes`"), "{log}");
}

fn wait_exit(mut child: std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn full_runs_once_on_every_node_even_with_the_prolog_in_slurm_conf() {
    // Prolog=/Epilog= name lemonade-prolog/-epilog too: the site runs both.
    let c = start(3, true);
    set_plugin_args(&c, &site_args(&c));
    let began = chrono_now();

    let job = c
        .sbatch(&[
            "-N3",
            "--health-check=full",
            "--wrap",
            "srun sh -c 'echo $SLURMD_NODENAME ${LEMONADE_NODE_HEALTH:-unset} ${LEMONADE_LAST_CHECK:-unset}'",
        ])
        .unwrap();
    wait_completed(&c, &job, Duration::from_secs(120));

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

    // Every task saw the node's health as that prolog run left it.
    let out = std::fs::read_to_string(c.dir().join(format!("job-{job}.out"))).unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 3, "{out}");
    for (line, node) in lines.iter().zip(c.nodes()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[..2], [node.as_str(), "ok"], "{out}");
        let at: i64 = words[2].parse().unwrap_or_else(|_| panic!("{out}"));
        assert!(
            at >= began - 1,
            "LEMONADE_LAST_CHECK {at} is older than the job"
        );
    }

    // Without the option the site default applies.
    let quick = c.sbatch(&["-N1", "-w", "node2", "--wrap", "true"]).unwrap();
    wait_completed(&c, &quick, Duration::from_secs(60));
    let runs = runs_of(&c, "node2", &quick);
    assert!(
        runs.iter()
            .any(|r| r.trigger == "spank" && r.profile == "quick"),
        "{runs:?}"
    );
    assert!(!runs.iter().any(|r| r.trigger == "prolog"), "{runs:?}");
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn a_fault_on_one_node_requeues_the_job_onto_healthy_nodes() {
    let c = start(3, false);
    set_plugin_args(&c, &site_args(&c));
    c.set_fixture("node1", "xid-79").unwrap();

    // The scheduler fills node1 first; its prolog finds the XID.
    let job = c
        .sbatch(&["-N2", "--health-check=full", "--wrap", "srun hostname"])
        .unwrap();
    wait_completed(&c, &job, Duration::from_secs(120));

    assert!(job_field(&c, &job, "Restarts").parse::<u32>().unwrap_or(0) >= 1);
    let nodes = job_field(&c, &job, "NodeList");
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
fn task_exits_name_the_node_whose_task_failed_first() {
    let c = start(3, false);
    set_plugin_args(
        &c,
        &format!(
            "prolog=none epilog=none config={}",
            c.config_path().display()
        ),
    );

    // The task on node2 fails; srun kills the others.
    let out = output(
        &c,
        "srun",
        &[
            "-N3",
            "--kill-on-bad-exit=1",
            "sh",
            "-c",
            "if [ \"$SLURMD_NODENAME\" = node2 ]; then sleep 1; exit 1; fi; exec sleep 60",
        ],
    );
    assert!(!out.status.success());

    let mut all = Vec::new();
    for node in c.nodes() {
        let exits = task_exits(&c, node);
        assert_eq!(exits.len(), 1, "{node}: {exits:?}");
        all.push((node.clone(), exits[0].clone()));
    }
    let (_, failed) = all.iter().find(|(n, _)| n == "node2").unwrap();
    assert_eq!(
        (failed.exit_code, failed.signal),
        (Some(1), None),
        "{failed:?}"
    );
    assert_eq!(failed.step_id, "0");
    for (node, exit) in all.iter().filter(|(n, _)| n != "node2") {
        assert!(exit.signal.is_some(), "{node} was not killed: {exit:?}");
        assert_eq!(exit.job_id, failed.job_id);
    }
    // As lemon orders them: by time, and within a second the failure before
    // the kills it caused.
    let mut order: Vec<&(String, TaskExit)> = all.iter().collect();
    order.sort_by_key(|(_, e)| (e.at, e.signal.is_some()));
    assert_eq!(order[0].0, "node2", "{order:?}");
    let ids: std::collections::BTreeSet<u32> = all.iter().map(|(_, e)| e.task_id).collect();
    assert_eq!(ids.len(), 3, "global task ids: {all:?}");
}

#[test]
fn a_broken_config_or_missing_program_never_takes_slurm_down() {
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
    wait_completed(&c, &job, Duration::from_secs(60));
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
