//! `lemonade_spank.so` loaded by a real Slurm (slurmd, slurmstepd, srun,
//! sbatch, salloc) on the test cluster of `lemonade_tests::cluster`, one
//! cluster per test. The workspace's binaries must be built first
//! (`cargo build --workspace --bins`), as for the other end-to-end tests.
//! The job prolog/epilog variant, `lemonade_spank_prolog.so`, has its tests
//! in `slurm-spank/prolog/tests/`.

use lemonade_config::StoreSettings;
use lemonade_spool::TaskExit;
use lemonade_sql::node::{NodeStore, RunRow};
use lemonade_tests::cluster::Cluster;
use lemonade_tests::spank::Plugin;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The plugin under test.
fn plugin() -> Plugin {
    Plugin::built("liblemonade_spank.so")
}

fn start(nodes: usize, prolog_in_slurm_conf: bool) -> Cluster {
    plugin().start(nodes, prolog_in_slurm_conf, "")
}

fn set_plugin_args(c: &Cluster, args: &str) {
    plugin().set_args(c, args);
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

/// (trigger, profile) of the runs a node's database holds for `job`, sorted.
fn runs_of(c: &Cluster, node: &str, job: &str) -> Vec<(String, String)> {
    let mut runs: Vec<(String, String)> = NodeStore::open(&c.node_db(node), Duration::from_secs(2))
        .and_then(|s| s.runs_since(0, 10_000))
        .unwrap_or_default()
        .into_iter()
        .filter(|r: &RunRow| r.job_id.as_deref() == Some(job))
        .map(|r| (r.trigger, r.profile))
        .collect();
    runs.sort();
    runs
}

/// Waits until the node's epilog has recorded its run for `job`, then
/// returns all of the job's runs there.
fn runs_after_epilog(c: &Cluster, node: &str, job: &str) -> Vec<(String, String)> {
    let mut runs = Vec::new();
    c.wait_until(Duration::from_secs(60), || {
        runs = runs_of(c, node, job);
        runs.iter().any(|(_, profile)| profile == "epilog")
    });
    runs
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
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
    lemonade_tests::skip_without_cluster!();
    let c = start(1, false);
    set_plugin_args(&c, &format!("config={}", c.config_path().display()));

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
    let slurmd = c
        .command("slurmd")
        .args(["-D", "-N", "node1"])
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
fn the_jobs_choice_reaches_lemonade_prolog_on_every_node() {
    lemonade_tests::skip_without_cluster!();
    // The site runs lemonade-prolog/-epilog from slurm.conf; the plugin
    // exports no job prolog and only hands the choice over.
    let c = start(3, true);
    set_plugin_args(
        &c,
        &format!(
            "default=quick allow_off=yes config={}",
            c.config_path().display()
        ),
    );
    let began = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;

    // sbatch: the full suite in the prolog of every node, then the epilog.
    let job = c
        .sbatch(&[
            "-N3",
            "--health-check=full",
            "--wrap",
            "srun sh -c 'echo $SLURMD_NODENAME ${LEMONADE_NODE_HEALTH:-unset} ${LEMONADE_LAST_CHECK:-unset}'",
        ])
        .unwrap();
    assert!(
        c.wait_job_completed(&job, Duration::from_secs(120)),
        "job {job}"
    );
    for node in c.nodes() {
        assert_eq!(
            runs_after_epilog(&c, node, &job),
            pairs(&[("epilog", "epilog"), ("prolog", "full")]),
            "{node}"
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

    // An srun that creates its job, and salloc, hand their choice over too.
    let srun = output(
        &c,
        "srun",
        &[
            "-N2",
            "-w",
            "node[1-2]",
            "--health-check=full",
            "sh",
            "-c",
            "[ $SLURM_PROCID = 0 ] && echo $SLURM_JOB_ID; true",
        ],
    );
    assert!(srun.status.success(), "{}", stderr(&srun));
    let srun_job = String::from_utf8_lossy(&srun.stdout).trim().to_string();
    let salloc = output(
        &c,
        "salloc",
        &[
            "-N1",
            "-w",
            "node3",
            "--health-check=full",
            "sh",
            "-c",
            "echo $SLURM_JOB_ID",
        ],
    );
    assert!(salloc.status.success(), "{}", stderr(&salloc));
    let salloc_job = String::from_utf8_lossy(&salloc.stdout).trim().to_string();
    for (node, job) in [
        ("node1", &srun_job),
        ("node2", &srun_job),
        ("node3", &salloc_job),
    ] {
        assert_eq!(
            runs_after_epilog(&c, node, job),
            pairs(&[("epilog", "epilog"), ("prolog", "full")]),
            "{node}, job {job}"
        );
    }

    // No option: the site default. `off`: no prolog checks, but the epilog,
    // which protects the next job, still runs.
    let quick = c.sbatch(&["-N1", "-w", "node2", "--wrap", "true"]).unwrap();
    let off = c
        .sbatch(&["-N1", "-w", "node3", "--health-check=off", "--wrap", "true"])
        .unwrap();
    for job in [&quick, &off] {
        assert!(
            c.wait_job_completed(job, Duration::from_secs(60)),
            "job {job}"
        );
    }
    assert_eq!(
        runs_after_epilog(&c, "node2", &quick),
        pairs(&[("epilog", "epilog"), ("prolog", "quick")])
    );
    assert_eq!(
        runs_after_epilog(&c, "node3", &off),
        pairs(&[("epilog", "epilog")])
    );

    // A job that brings `off` from a client whose plugstack line allowed it,
    // to nodes whose line does not: lemonade-prolog judges by the node's
    // line and runs its default.
    let held = c
        .sbatch(&[
            "-N1",
            "-w",
            "node1",
            "--hold",
            "--health-check=off",
            "--wrap",
            "true",
        ])
        .unwrap();
    set_plugin_args(
        &c,
        &format!(
            "default=full allow_off=no config={}",
            c.config_path().display()
        ),
    );
    c.run("scontrol", &["release", &held]).unwrap();
    assert!(
        c.wait_job_completed(&held, Duration::from_secs(60)),
        "job {held}"
    );
    assert_eq!(
        runs_after_epilog(&c, "node1", &held),
        pairs(&[("epilog", "epilog"), ("prolog", "full")])
    );
}

#[test]
fn task_exits_name_the_node_whose_task_failed_first() {
    lemonade_tests::skip_without_cluster!();
    let c = start(3, false);
    set_plugin_args(&c, &format!("config={}", c.config_path().display()));

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
    // As lemon orders them: by their millisecond times, in which the failure
    // comes before the kills it caused even within one second.
    assert!(all.iter().all(|(_, e)| e.at_ms.is_some()), "{all:?}");
    let mut order: Vec<&(String, TaskExit)> = all.iter().collect();
    order.sort_by_key(|(_, e)| e.time_ms());
    assert_eq!(order[0].0, "node2", "{order:?}");
    let ids: std::collections::BTreeSet<u32> = all.iter().map(|(_, e)| e.task_id).collect();
    assert_eq!(ids.len(), 3, "global task ids: {all:?}");
}

/// What a task saw of the flight-recorder variables, one line.
const RECORDER_ECHO: &str = "echo ${TORCH_NCCL_TRACE_BUFFER_SIZE:-unset} ${TORCH_NCCL_DUMP_ON_TIMEOUT:-unset} ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-unset} ${TORCH_NCCL_ENABLE_TIMING:-unset}";

/// The recorder's current names (PyTorch 2.x reads them first; issue 46).
const RECORDER_ECHO_FR: &str =
    "echo ${TORCH_FR_BUFFER_SIZE:-unset} ${TORCH_FR_DUMP_ON_TIMEOUT:-unset} ${TORCH_FR_DUMP_TEMP_FILE:-unset}";

/// A job that sends its dumps elsewhere keeps its choice, and the plugin
/// leaves the epilog a note beside the job's directory saying so.
fn user_prefix_is_kept_and_noted(c: &Cluster) {
    let mine = output(
        c,
        "srun",
        &[
            "--flight-recorder=on",
            "--export=ALL,TORCH_FR_DUMP_TEMP_FILE=/tmp/mine_",
            "sh",
            "-c",
            "echo ${TORCH_FR_DUMP_TEMP_FILE:-unset} ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-unset}",
        ],
    );
    let words: Vec<String> = String::from_utf8_lossy(&mine.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(words.len(), 2, "{words:?} {}", stderr(&mine));
    assert_eq!(words[0], "/tmp/mine_", "the user's own value is kept");
    let job_dir = std::path::Path::new(&words[1]).parent().unwrap();
    let note = job_dir.with_file_name(format!(
        "{}.recorder-off",
        job_dir.file_name().unwrap().to_string_lossy()
    ));
    let text = std::fs::read_to_string(&note).unwrap_or_default();
    assert_eq!(
        text,
        "flight recorder off by the job's own setting: TORCH_FR_DUMP_TEMP_FILE=/tmp/mine_"
    );
}

#[test]
fn the_flight_recorder_is_set_for_the_tasks_when_the_site_or_the_user_turns_it_on() {
    lemonade_tests::skip_without_cluster!();
    let c = start(1, false);
    let config = format!("config={}", c.config_path().display());
    set_plugin_args(&c, &config);
    let off = output(&c, "srun", &["sh", "-c", RECORDER_ECHO]);
    assert!(off.status.success(), "{}", stderr(&off));
    assert_eq!(
        String::from_utf8_lossy(&off.stdout).trim(),
        "unset unset unset unset"
    );

    // The user turns it on, with timing: a directory of the job's own.
    let on = output(
        &c,
        "srun",
        &["--flight-recorder=timing", "sh", "-c", RECORDER_ECHO],
    );
    assert!(on.status.success(), "{}", stderr(&on));
    let words: Vec<String> = String::from_utf8_lossy(&on.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(words.len(), 4, "{words:?}");
    assert_eq!(
        (words[0].as_str(), words[1].as_str(), words[3].as_str()),
        ("2000", "1", "1")
    );
    let prefix = std::path::PathBuf::from(&words[2]);
    assert!(words[2].ends_with("/nccl_trace_rank_"), "{words:?}");
    let dir = prefix.parent().unwrap();
    assert!(dir.is_dir(), "{}", dir.display());
    // Both families, so that torch before and after the rename records,
    // and one that has the new names reads them (no deprecation warning).
    let fr = output(
        &c,
        "srun",
        &["--flight-recorder=on", "sh", "-c", RECORDER_ECHO_FR],
    );
    let fr_words: Vec<String> = String::from_utf8_lossy(&fr.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(fr_words.len(), 3, "{fr_words:?} {}", stderr(&fr));
    assert_eq!((fr_words[0].as_str(), fr_words[1].as_str()), ("2000", "1"));
    assert!(fr_words[2].ends_with("/nccl_trace_rank_"), "{fr_words:?}");
    user_prefix_is_kept_and_noted(&c);
    let bad = output(&c, "srun", &["--flight-recorder=loud", "true"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("`loud` is not one of on, timing, off"),
        "{}",
        stderr(&bad)
    );

    // The site turns it on; the user may still turn it off.
    set_plugin_args(
        &c,
        &format!("{config} flight_recorder=on flight_recorder_buffer=500"),
    );
    let site = output(&c, "srun", &["sh", "-c", RECORDER_ECHO]);
    let text = String::from_utf8_lossy(&site.stdout).to_string();
    assert!(
        text.starts_with("500 1 /") && text.trim().ends_with("nccl_trace_rank_ unset"),
        "{text}"
    );
    let user_off = output(
        &c,
        "srun",
        &["--flight-recorder=off", "sh", "-c", RECORDER_ECHO],
    );
    assert_eq!(
        String::from_utf8_lossy(&user_off.stdout).trim(),
        "unset unset unset unset"
    );
}
