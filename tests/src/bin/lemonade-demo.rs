//! `lemonade-demo`: the README's first command, after the build.
//!
//! Starts the local Slurm cluster of the end-to-end tests (munge, MariaDB,
//! slurmdbd, slurmctld, four slurmd) with our health check, prolog, epilog and
//! SPANK plugin installed, then plays a short story and prints what an
//! administrator would see at each step:
//!
//! 1. a healthy cluster;
//! 2. node2 logs XID 79: it is taken out, its job is requeued and completes elsewhere;
//! 3. node3 loses a mount: drained, then resumed when the mount is back;
//! 4. node4 keeps failing jobs with no check firing: `lemon run` drains it;
//! 5. the reliability report is written as HTML.
//!
//! Each step checks what it claims (the reason `sinfo -R` shows, the requeue
//! in `sacct -D`, the resume, the lemon drain, the report) and the demo ends
//! with how many claims held; the first that fails stops it, naming the step,
//! with exit 1. `scripts/test` runs it, so a demo that tells a story the
//! code no longer makes true fails CI.
//!
//! Ctrl-C stops the cluster and cleans up; `--keep` leaves it running.

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Why the story stopped early.
enum Stop {
    Interrupted,
    Failed(String),
}

type Step = Result<(), Stop>;

/// How many claims the story makes: two in step 2, two in step 3, one each in 4 and 5.
const CLAIMS: usize = 6;

/// The claims that held so far.
#[derive(Default)]
struct Claims {
    held: usize,
}

impl Claims {
    /// Checks one claim of `step`: prints it held, or stops the demo naming it.
    fn check(&mut self, step: &str, claim: &str, held: Result<(), String>) -> Step {
        match held {
            Ok(()) => {
                self.held += 1;
                println!("\u{2713} {claim}");
                Ok(())
            }
            Err(why) => Err(Stop::Failed(format!(
                "step {step}: the claim \"{claim}\" did not hold: {why}"
            ))),
        }
    }
}

fn main() {
    let keep = std::env::args().any(|a| a == "--keep");
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        println!("usage: lemonade-demo [--keep]\n\nStarts a local 4-node Slurm cluster with Lemonade installed and plays\na short story of faults. --keep leaves the cluster running afterwards.");
        return;
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }

    let bins = lemonade_tests::target_bin_dir();
    let plugin = bins.join("liblemonade_spank.so");
    heading("Starting a local Slurm cluster: munge, MariaDB, slurmdbd, slurmctld, node1-4");
    let started = Instant::now();
    let cluster = match Cluster::start(options(&plugin)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("demo: the cluster did not start: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "up in {:.0} s, in {}",
        started.elapsed().as_secs_f64(),
        cluster.dir().display()
    );

    let mut claims = Claims::default();
    let result = story(&cluster, &bins, &mut claims);
    match &result {
        Ok(()) => heading(&format!(
            "Done in {:.0} s: {} of {CLAIMS} claims held",
            started.elapsed().as_secs_f64(),
            claims.held
        )),
        Err(Stop::Interrupted) => eprintln!("\ndemo: interrupted, stopping the cluster"),
        Err(Stop::Failed(why)) => eprintln!(
            "\ndemo: {why}\ndemo: {} of {CLAIMS} claims held",
            claims.held
        ),
    }
    if keep && !matches!(result, Err(Stop::Interrupted)) {
        let stop = cluster.keep();
        println!("\nThe cluster keeps running (--keep). Explore it with:");
        println!("  export SLURM_CONF={}", cluster_conf(&stop).display());
        println!("  sinfo -R; squeue; sacct -X -a");
        println!(
            "Stop it and delete its files with:\n  sh {}",
            stop.display()
        );
        return;
    }
    drop(cluster);
    if result.is_err() {
        std::process::exit(1);
    }
}

fn cluster_conf(stop_script: &Path) -> PathBuf {
    stop_script
        .parent()
        .unwrap_or(Path::new("."))
        .join("etc/slurm.conf")
}

fn options(plugin: &Path) -> ClusterOptions {
    let mut options = ClusterOptions {
        nodes: 4,
        health_check_interval: Some(5),
        prolog: true,
        epilog: true,
        // A demo has one afternoon of history: a lemon may fail on a single day.
        lemonade_toml: "[lemon]\nmin_failing_days = 1\n".into(),
        ..ClusterOptions::default()
    };
    if plugin.exists() {
        // The checks around jobs are slurm.conf's Prolog/Epilog above; the
        // plugin hands them each job's --health-check.
        options.plugstack = vec![format!("optional {} default=quick", plugin.display())];
    }
    options
}

fn story(c: &Cluster, bins: &Path, claims: &mut Claims) -> Step {
    heading("1. A healthy cluster");
    show(c, "sinfo", &["-N", "-o", "%N %T %E"])?;
    for n in ["node1", "node2", "node3", "node4"] {
        if state_of(c, n) != "idle" || !reason_of(c, n).is_empty() {
            return Err(Stop::Failed(format!(
                "step 1: {n} is {} ({}) before any fault",
                state_of(c, n),
                reason_of(c, n)
            )));
        }
    }
    xid_takes_node2_out(c, claims)?;
    lost_mount_drains_node3(c, claims)?;
    lemon_drains_node4(c, bins, claims)?;
    reliability_report(c, bins, claims)
}

fn xid_takes_node2_out(c: &Cluster, claims: &mut Claims) -> Step {
    heading("2. node2 logs XID 79 (GPU fell off the bus) while a job runs on it");
    let jobs: Vec<String> = (0..4)
        .map(|_| c.sbatch(&["-N1", "--exclusive", "--requeue", "--wrap", "sleep 15"]))
        .collect::<Result<_, _>>()
        .map_err(Stop::Failed)?;
    wait("the four jobs to start", Duration::from_secs(60), || {
        running_on(c, "node2").is_some()
    })?;
    let victim = running_on(c, "node2").ok_or_else(|| Stop::Failed("no job on node2".into()))?;
    println!("job {victim} runs on node2; planting XID 79 in node2's kernel log");
    c.set_fixture("node2", "xid-79")
        .map_err(|e| Stop::Failed(e.to_string()))?;
    wait("node2 to be taken out", Duration::from_secs(60), || {
        reason_of(c, "node2").starts_with("hc:")
    })?;
    show(c, "sinfo", &["-R"])?;
    claims.check(
        "2",
        "sinfo -R shows node2 out with reason hc: XID_79 gpu3",
        listed_with_reason(c, "node2", "hc: XID_79 gpu3"),
    )?;
    wait(
        &format!("job {victim} to be requeued"),
        Duration::from_secs(60),
        || queue_state(c, &victim).as_deref() == Some("PENDING"),
    )?;
    println!(
        "Slurm holds a requeued job for about two minutes before it starts again; skip that wait:"
    );
    show(
        c,
        "scontrol",
        &["update", &format!("JobId={victim}"), "StartTime=now"],
    )?;
    wait(
        &format!("job {victim} to complete elsewhere"),
        Duration::from_secs(120),
        || final_state(c, &victim).as_deref() == Some("COMPLETED"),
    )?;
    show(
        c,
        "sacct",
        &[
            "-X",
            "-D",
            "-j",
            &victim,
            "-o",
            "JobID,State,NodeList,Start,End",
        ],
    )?;
    claims.check(
        "2",
        &format!("sacct -D shows job {victim} requeued from node2 and completed on another node"),
        requeued_elsewhere(c, &victim, "node2"),
    )?;
    wait("the other jobs to finish", Duration::from_secs(60), || {
        jobs.iter().all(|j| final_state(c, j).is_some())
    })
}

fn lost_mount_drains_node3(c: &Cluster, claims: &mut Claims) -> Step {
    heading("3. node3 loses /checkpoint: drained; the mount comes back: resumed");
    c.set_fixture("node3", "mount-missing")
        .map_err(|e| Stop::Failed(e.to_string()))?;
    wait("node3 to be drained", Duration::from_secs(60), || {
        reason_of(c, "node3").starts_with("hc:")
    })?;
    show(c, "sinfo", &["-R"])?;
    claims.check(
        "3",
        "sinfo -R shows node3 drained with reason hc: MOUNT_MISSING /checkpoint",
        listed_with_reason(c, "node3", "hc: MOUNT_MISSING /checkpoint"),
    )?;
    println!("the mount is back");
    c.set_fixture("node3", "healthy")
        .map_err(|e| Stop::Failed(e.to_string()))?;
    wait(
        "node3 to be resumed after clean runs",
        Duration::from_secs(90),
        || reason_of(c, "node3").is_empty() && state_of(c, "node3") == "idle",
    )?;
    show(c, "sinfo", &["-N", "-o", "%N %T %E"])?;
    claims.check(
        "3",
        "node3 is back in service (idle, no reason) without an administrator",
        match (state_of(c, "node3").as_str(), reason_of(c, "node3")) {
            ("idle", r) if r.is_empty() => Ok(()),
            (state, reason) => Err(format!("node3 is {state} ({reason})")),
        },
    )
}

fn lemon_drains_node4(c: &Cluster, bins: &Path, claims: &mut Claims) -> Step {
    heading("4. node4 keeps failing jobs, and no check fires");
    let mut ids = Vec::new();
    // The healthy nodes run jobs for a while, as a fleet does: the fleet's
    // background must be node time, not two `true`s of a second each, or
    // whether node4 stands out hangs on how sacct rounds seconds.
    for (node, script, count) in [
        ("node4", "kill -BUS $$", 5),
        ("node1", "sleep 10", 4),
        ("node3", "sleep 10", 4),
    ] {
        for _ in 0..count {
            ids.push(
                c.sbatch(&["-w", node, "--wrap", script])
                    .map_err(Stop::Failed)?,
            );
        }
    }
    wait(
        "every job to be finished in accounting",
        Duration::from_secs(180),
        || ids.iter().all(|j| final_state(c, j).is_some()),
    )?;
    let lemon = lemon_command(c, bins);
    run_shown("lemon run", lemon(&["run"]))?;
    show(c, "sinfo", &["-R"])?;
    claims.check(
        "4",
        "sinfo -R shows node4 drained by lemon (reason lemon: ...)",
        listed_with_reason(c, "node4", "lemon: "),
    )?;
    run_shown("lemon report", lemon(&["report"]))
}

fn reliability_report(c: &Cluster, bins: &Path, claims: &mut Claims) -> Step {
    heading("5. The cluster reliability report");
    let html = c.dir().join("reliability.html");
    let html_arg = html.display().to_string();
    let lemon = lemon_command(c, bins);
    run_shown(
        "lemon report --reliability --format html",
        lemon(&[
            "report",
            "--reliability",
            "--format",
            "html",
            "--output",
            &html_arg,
        ]),
    )?;
    println!("written to {}", html.display());
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    claims.check(
        "5",
        "the reliability report is written, with its outcomes and node4 on the lemon list",
        if !page.contains("<h2>Job outcomes</h2>") {
            Err(format!("{} has no job outcomes section", html.display()))
        } else if !page.contains("node4") {
            Err(format!("{} does not name node4", html.display()))
        } else {
            Ok(())
        },
    )
}

/// `lemon ARGS` against the demo cluster's config and its own lemon.db.
fn lemon_command<'a>(c: &'a Cluster, bins: &'a Path) -> impl Fn(&[&str]) -> Command + 'a {
    move |args| {
        let mut cmd = Command::new(bins.join("lemon"));
        cmd.arg("--config")
            .arg(c.config_path())
            .arg("--db")
            .arg(c.dir().join("lemon.db"))
            .args(args);
        cmd.env("SLURM_CONF", c.slurm_conf());
        cmd
    }
}

/// `sinfo -R` lists `node` with a reason that starts with `reason`.
fn listed_with_reason(c: &Cluster, node: &str, reason: &str) -> Result<(), String> {
    let listed = c.run("sinfo", &["-R", "-h", "-N", "-o", "%N|%E"])?;
    if listed.lines().any(|l| {
        l.split_once('|')
            .is_some_and(|(n, r)| n == node && r.starts_with(reason))
    }) {
        Ok(())
    } else {
        Err(format!("sinfo -R lists:\n{listed}"))
    }
}

/// `sacct -D` shows a run of `job` on `node` that did not complete, and a
/// completed run on another node.
fn requeued_elsewhere(c: &Cluster, job: &str, node: &str) -> Result<(), String> {
    let runs = c.run(
        "sacct",
        &["-X", "-D", "-n", "-P", "-j", job, "-o", "State,NodeList"],
    )?;
    let rows: Vec<(&str, &str)> = runs.lines().filter_map(|l| l.split_once('|')).collect();
    let left = rows
        .iter()
        .any(|(state, n)| *n == node && !state.starts_with("COMPLETED"));
    let completed = rows
        .iter()
        .any(|(state, n)| *n != node && state.starts_with("COMPLETED"));
    if left && completed {
        Ok(())
    } else {
        Err(format!("sacct -D shows:\n{runs}"))
    }
}

fn heading(text: &str) {
    println!("\n\x1b[1m== {text}\x1b[0m");
}

/// Runs a Slurm client command against the cluster and prints it with its
/// output, times as people read them.
fn show(c: &Cluster, program: &str, args: &[&str]) -> Step {
    check_interrupt()?;
    println!("$ {program} {}", args.join(" "));
    let out = c
        .command(program)
        .args(args)
        .env("SLURM_TIME_FORMAT", "%H:%M:%S")
        .output()
        .map_err(|e| Stop::Failed(format!("{program}: {e}")))?;
    if !out.status.success() {
        return Err(Stop::Failed(format!(
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

/// Runs one of our commands and prints its output; lemon's exit 1 means "new lemons".
fn run_shown(label: &str, mut cmd: Command) -> Step {
    check_interrupt()?;
    println!("$ {label}");
    let out = cmd
        .output()
        .map_err(|e| Stop::Failed(format!("{label}: {e}")))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    let code = out.status.code().unwrap_or(-1);
    if code > 1 {
        return Err(Stop::Failed(format!(
            "{label} exited {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

fn check_interrupt() -> Step {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(Stop::Interrupted)
    } else {
        Ok(())
    }
}

/// Polls `done` until it holds, printing what we wait for; a limit that
/// passes stops the demo with a message.
fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Step {
    println!("… waiting for {what}");
    let until = Instant::now() + limit;
    loop {
        check_interrupt()?;
        if done() {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(Stop::Failed(format!(
                "gave up waiting for {what} after {} s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn reason_of(c: &Cluster, node: &str) -> String {
    c.node_state(node).map(|(_, r)| r).unwrap_or_default()
}

fn state_of(c: &Cluster, node: &str) -> String {
    c.node_state(node).map(|(s, _)| s).unwrap_or_default()
}

/// The job running on `node`, if any.
fn running_on(c: &Cluster, node: &str) -> Option<String> {
    let out = c.run("squeue", &["-h", "-t", "R", "-o", "%i %N"]).ok()?;
    out.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(node))
        .and_then(|l| l.split_whitespace().next().map(String::from))
}

/// The job's state in the queue, while slurmctld knows it.
fn queue_state(c: &Cluster, job: &str) -> Option<String> {
    let out = c.run("squeue", &["-h", "-j", job, "-o", "%T"]).ok()?;
    out.lines().next().map(|l| l.trim().to_string())
}

/// The job's final state in accounting, once it has one.
fn final_state(c: &Cluster, job: &str) -> Option<String> {
    let out = c
        .run("sacct", &["-X", "-n", "-P", "-o", "State", "-j", job])
        .ok()?;
    let state = out.lines().last()?.trim().to_string();
    let done = [
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
    ];
    done.iter().any(|d| state.starts_with(d)).then_some(state)
}
