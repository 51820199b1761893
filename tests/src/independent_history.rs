//! Cluster histories with job logs, written from a brief of real behaviour by
//! an engineer who has not read lemon's detector (issue 47): the second
//! generator that lemon's defaults are reported on.
//!
//! The model: 512 nodes of 8 GPUs for 35 days; users whose own bugs fail
//! about a fifth of the jobs, very unevenly; bad users pinned to one node;
//! arrays crashing within an hour on one healthy node; a bad hour in which a
//! filesystem fails jobs across the fleet; requeues; jobs of 1 to 64 nodes;
//! checks that catch some hardware faults and not others. Planted: lemons
//! after the paper's Table II (mostly not caught by checks), one node that
//! the checks take out again and again (a repeat offender), one healthy node
//! out once for a long repair. Logs are in torchrun's, NCCL's and Slurm's
//! formats; a hardware failure's log names the node only sometimes.

mod hw_logs;
mod logs;
mod outcome;
mod rng;
mod sim;

use sim::{node_name, Fault, Request, Sim, User};
use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to generate.
#[derive(Debug, Clone)]
pub struct IndependentHistorySpec {
    pub seed: u64,
    pub nodes: usize,
    pub days: u32,
    /// Lemons planted, the repeat offender included.
    pub lemons: usize,
    /// Write the jobs' logs (else the dump still names them).
    pub logs: bool,
    /// Jobs submitted a day, over the fleet (before bad users and bursts).
    pub jobs_per_day: u32,
    /// The scoring window.
    pub window_days: u32,
    pub bad_users: usize,
    pub bursts: usize,
}

impl IndependentHistorySpec {
    pub fn new(seed: u64) -> Self {
        IndependentHistorySpec {
            seed,
            nodes: 512,
            days: 35,
            lemons: 6,
            logs: true,
            jobs_per_day: 420,
            window_days: 28,
            bad_users: 2,
            bursts: 2,
        }
    }
}

/// A hardware failure planted on a job.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedFailure {
    pub node: String,
    pub job_id_raw: i64,
    pub end: i64,
    pub caught_by_check: bool,
    pub log_names_node: bool,
}

/// A generated history and what was planted in it.
#[derive(Debug, Clone)]
pub struct IndependentHistory {
    pub seed: u64,
    pub sacct: Vec<u8>,
    pub events: String,
    /// The "now" to score at.
    pub end: i64,
    pub window_days: u32,
    /// Lemons, the repeat offender included.
    pub lemons: Vec<String>,
    pub flapper: String,
    pub long_repair: String,
    /// Bad users' nodes and burst nodes: healthy, but full of failures.
    pub confounder_nodes: Vec<String>,
    pub failures: Vec<PlantedFailure>,
    /// Starts of the checks' outs of the repeat offender.
    pub flapper_outs: Vec<i64>,
}

impl IndependentHistory {
    /// Writes the dump and the events as `sacct.txt` and `events.txt` in
    /// `dir`, for `lemon ingest --sacct-file` and `--events-file` style runs;
    /// returns their paths.
    pub fn write_inputs(&self, dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
        let (sacct, events) = (dir.join("sacct.txt"), dir.join("events.txt"));
        std::fs::write(&sacct, &self.sacct)?;
        std::fs::write(&events, &self.events)?;
        Ok((sacct, events))
    }

    fn window_start(&self) -> i64 {
        self.end - i64::from(self.window_days) * 86_400
    }

    /// Lemons with ≥ 2 uncaught failures on ≥ 2 distinct days within
    /// [end - window_days, end] (the flapper counts as reachable when it was
    /// taken out ≥ 3 times in the window).
    pub fn reachable_lemons(&self) -> Vec<String> {
        let from = self.window_start();
        self.lemons
            .iter()
            .filter(|lemon| {
                if **lemon == self.flapper {
                    let outs = self
                        .flapper_outs
                        .iter()
                        .filter(|t| **t >= from && **t <= self.end);
                    if outs.count() >= 3 {
                        return true;
                    }
                }
                let days: BTreeSet<i64> = self
                    .failures
                    .iter()
                    .filter(|f| f.node == **lemon && !f.caught_by_check)
                    .filter(|f| f.end >= from && f.end <= self.end)
                    .map(|f| f.end.div_euclid(86_400))
                    .collect();
                days.len() >= 2
            })
            .cloned()
            .collect()
    }
}

/// The first second of 2026-01-05 (UTC): histories start there.
const T0: i64 = 1_767_571_200;

/// Writes job logs (when `spec.logs`) under `log_dir`, the dump naming them
/// with `uid` as the jobs' user id, and returns the history.
pub fn generate(
    spec: &IndependentHistorySpec,
    log_dir: &Path,
    uid: u32,
) -> std::io::Result<IndependentHistory> {
    let mut sim = Sim::new(spec, T0);
    let cast = cast(&mut sim, spec);
    let requests = requests(&mut sim, spec, &cast);
    for (submit, req) in &requests {
        sim.run_job(req, *submit, uid);
    }
    let sacct = write_runs(&mut sim, spec, log_dir, uid)?;
    let mut events = String::new();
    sim.events
        .sort_by_key(|e| e.split('|').nth(1).and_then(|t| t.parse::<i64>().ok()));
    for e in &sim.events {
        events.push_str(e);
        events.push('\n');
    }
    Ok(IndependentHistory {
        seed: spec.seed,
        sacct,
        events,
        end: sim.end,
        window_days: spec.window_days,
        lemons: cast.lemons.iter().map(|n| node_name(*n)).collect(),
        flapper: node_name(cast.flapper),
        long_repair: node_name(cast.long_repair),
        confounder_nodes: cast.confounders.iter().map(|n| node_name(*n)).collect(),
        failures: sim.failures,
        flapper_outs: cast.flapper_outs,
    })
}

/// The planted nodes.
struct Cast {
    lemons: Vec<usize>,
    flapper: usize,
    flapper_outs: Vec<i64>,
    long_repair: usize,
    bad_user_nodes: Vec<usize>,
    burst_nodes: Vec<usize>,
    confounders: Vec<usize>,
}

/// Picks the special nodes (all distinct) and plants their faults.
fn cast(sim: &mut Sim, spec: &IndependentHistorySpec) -> Cast {
    let wanted = spec.lemons.max(1) + 1 + spec.bad_users + spec.bursts;
    let mut picked: Vec<usize> = Vec::new();
    while picked.len() < wanted.min(spec.nodes) {
        let n = sim.rng.below(spec.nodes);
        if !picked.contains(&n) {
            picked.push(n);
        }
    }
    let mut it = picked.into_iter();
    let mut lemons: Vec<usize> = it.by_ref().take(spec.lemons.max(1)).collect();
    let flapper = lemons.pop().expect("at least one lemon");
    let long_repair = it.next().unwrap_or(0);
    let bad_user_nodes: Vec<usize> = it.by_ref().take(spec.bad_users).collect();
    let burst_nodes: Vec<usize> = it.collect();
    for &lemon in &lemons {
        plant_lemon(sim, spec, lemon);
    }
    let flapper_outs = plant_flapper(sim, spec, flapper);
    plant_long_repair(sim, spec, long_repair);
    let special: Vec<usize> = lemons
        .iter()
        .copied()
        .chain([flapper, long_repair])
        .chain(bad_user_nodes.iter().copied())
        .chain(burst_nodes.iter().copied())
        .collect();
    plant_background(sim, spec, &special);
    lemons.push(flapper);
    let confounders = bad_user_nodes.iter().chain(&burst_nodes).copied().collect();
    Cast {
        lemons,
        flapper,
        flapper_outs,
        long_repair,
        bad_user_nodes,
        burst_nodes,
        confounders,
    }
}

/// A lemon: one root cause, 1 to 7 faults on distinct days, few caught.
fn plant_lemon(sim: &mut Sim, spec: &IndependentHistorySpec, node: usize) {
    let cause = sim.cause();
    let count = [1, 2, 3, 4, 5, 7][sim.rng.weighted(&[2.0, 2.0, 3.0, 3.0, 2.0, 1.0])];
    let mut days: Vec<i64> = (0..i64::from(spec.days) - 1).collect();
    for _ in 0..count {
        let day = days.remove(sim.rng.below(days.len()));
        let at = sim.t0 + day * 86_400 + sim.rng.range(0, 86_400);
        let caught = sim.rng.chance(0.15);
        let repair = sim.rng.range(6 * 3600, 48 * 3600);
        sim.plant(
            node,
            Fault {
                at,
                cause,
                caught,
                repair,
            },
        );
    }
}

/// The repeat offender: taken out by the checks 3 or 4 times in the window,
/// back within a day or so each time; at most one uncaught failure.
fn plant_flapper(sim: &mut Sim, spec: &IndependentHistorySpec, node: usize) -> Vec<i64> {
    let cause = *sim
        .rng
        .pick(&[logs::Cause::Gpu, logs::Cause::Pcie, logs::Cause::Nic]);
    let outs = sim.rng.range(3, 5);
    let from = sim.end - i64::from(spec.window_days) * 86_400 + 86_400;
    let span = (sim.end - 86_400 - from) / outs;
    let mut starts = Vec::new();
    for i in 0..outs {
        let at = from + i * span + sim.rng.range(0, span / 2);
        let repair = sim.rng.range(3 * 3600, 30 * 3600);
        sim.plant(
            node,
            Fault {
                at,
                cause,
                caught: true,
                repair,
            },
        );
        starts.push(at);
    }
    if sim.rng.chance(0.5) {
        let at = sim.rng.range(sim.t0, sim.end - 86_400);
        sim.plant(
            node,
            Fault {
                at,
                cause,
                caught: false,
                repair: 0,
            },
        );
    }
    starts
}

/// A healthy node whose one fault is caught and repaired over a week or two.
fn plant_long_repair(sim: &mut Sim, spec: &IndependentHistorySpec, node: usize) {
    let from = sim.end - i64::from(spec.window_days) * 86_400 + 3 * 86_400;
    let at = sim.rng.range(from, sim.end - 14 * 86_400);
    let repair = sim.rng.range(8 * 86_400, 14 * 86_400);
    let cause = *sim
        .rng
        .pick(&[logs::Cause::Pcie, logs::Cause::Gpu, logs::Cause::Psu]);
    sim.plant(
        node,
        Fault {
            at,
            cause,
            caught: true,
            repair,
        },
    );
}

/// The fleet's own rate of hardware failures (a few per 1000 node-days),
/// mostly caught, and administrators' maintenance.
fn plant_background(sim: &mut Sim, spec: &IndependentHistorySpec, special: &[usize]) {
    let node_days = spec.nodes as f64 * f64::from(spec.days);
    let count = (node_days * 4.0 / 1000.0).round() as usize;
    for _ in 0..count {
        let node = sim.rng.below(spec.nodes);
        if special.contains(&node) {
            continue;
        }
        let cause = sim.cause();
        let at = sim.rng.range(sim.t0, sim.end);
        let caught = sim.rng.chance(0.75);
        let repair = sim.rng.range(2 * 3600, 72 * 3600);
        sim.plant(
            node,
            Fault {
                at,
                cause,
                caught,
                repair,
            },
        );
    }
    for _ in 0..spec.nodes / 100 {
        let node = sim.rng.below(spec.nodes);
        if !special.contains(&node) {
            let at = sim.rng.range(sim.t0, sim.end);
            let hours = sim.rng.range(2, 30);
            sim.maintenance(node, at, hours);
        }
    }
}

/// Users: a long tail of submitters, failure rates very uneven; the bad
/// users are the last ones.
fn users(sim: &mut Sim, cast: &Cast) {
    for i in 0..60 {
        let u = sim.rng.f64();
        sim.users.push(User {
            name: format!("u{:03}{}", i, ["ml", "nlp", "cv", "rl"][i % 4]),
            fail: 0.03 + 0.45 * u * u,
            pinned: None,
        });
    }
    for (i, &node) in cast.bad_user_nodes.iter().enumerate() {
        sim.users.push(User {
            name: format!("intern{}", i + 1),
            fail: 0.95,
            pinned: Some(node),
        });
    }
}

/// Every job request with its submit time, in submit order.
fn requests(sim: &mut Sim, spec: &IndependentHistorySpec, cast: &Cast) -> Vec<(i64, Request)> {
    users(sim, cast);
    let mut out = Vec::new();
    let mean_gap = 86_400.0 / f64::from(spec.jobs_per_day.max(1));
    let weights: Vec<f64> = (0..60)
        .map(|i| 1.0 / (f64::from(i) + 1.0).powf(0.9))
        .collect();
    let mut t = sim.t0 as f64;
    while (t as i64) < sim.end {
        t += sim.rng.exp(mean_gap);
        let user = sim.rng.weighted(&weights);
        let size =
            [1, 2, 4, 8, 16, 32, 64][sim.rng.weighted(&[60.0, 15.0, 12.0, 8.0, 3.0, 1.5, 0.5])];
        let size = size.min(spec.nodes);
        let duration = sim.rng.log_uniform(600.0, 36.0 * 3600.0) as i64;
        let id = sim.new_id();
        out.push((
            t as i64,
            Request {
                job_id_raw: id,
                job_id: id.to_string(),
                user,
                size,
                duration,
                pinned: None,
                crash_after: None,
            },
        ));
    }
    bad_user_jobs(sim, &mut out);
    bursts(sim, cast, &mut out);
    out.sort_by_key(|r| (r.0, r.1.job_id_raw));
    out
}

/// Bad users submit to their one node (`-w`) for a week or two.
fn bad_user_jobs(sim: &mut Sim, out: &mut Vec<(i64, Request)>) {
    for user in 60..sim.users.len() {
        let pinned = sim.users[user].pinned;
        let from = sim.rng.range(sim.t0, sim.end - 10 * 86_400);
        let days = sim.rng.range(5, 15);
        let mut t = from;
        while t < from + days * 86_400 && t < sim.end {
            t += sim.rng.exp(86_400.0 / 5.0) as i64;
            let id = sim.new_id();
            let duration = sim.rng.range(600, 4 * 3600);
            out.push((
                t,
                Request {
                    job_id_raw: id,
                    job_id: id.to_string(),
                    user,
                    size: 1,
                    duration,
                    pinned,
                    crash_after: None,
                },
            ));
        }
    }
}

/// Arrays that crash task after task within an hour on one healthy node.
fn bursts(sim: &mut Sim, cast: &Cast, out: &mut Vec<(i64, Request)>) {
    for &node in &cast.burst_nodes {
        let user = sim.rng.below(60);
        let at = sim.rng.range(sim.t0 + 86_400, sim.end - 2 * 86_400);
        let tasks = sim.rng.range(20, 40);
        let base = sim.new_id();
        sim.next_id += tasks + 1;
        for k in 0..tasks {
            let crash = sim.rng.range(40, 150);
            out.push((
                at + k,
                Request {
                    job_id_raw: base + 1 + k,
                    job_id: format!("{base}_{k}"),
                    user,
                    size: 1,
                    duration: 3 * 3600,
                    pinned: Some(node),
                    crash_after: Some(crash),
                },
            ));
        }
    }
}

/// The sacct dump, and the logs of the runs that keep theirs.
fn write_runs(
    sim: &mut Sim,
    spec: &IndependentHistorySpec,
    log_dir: &Path,
    uid: u32,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(sim.runs.len() * 160);
    out.extend_from_slice(b"JobIDRaw|JobID|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|UID|AllocTRES|StdOut|StdErr\n");
    let runs = std::mem::take(&mut sim.runs);
    for run in &runs {
        let hosts: Vec<String> = run.nodes.iter().map(|n| node_name(*n)).collect();
        let path = log_dir.join(format!("slurm-{}.out", run.job_id));
        let failed = run.state != "COMPLETED";
        // Failed runs' logs are the evidence; of the others only a few are
        // written: a log named in the dump may never have been written.
        let failed_hard = matches!(run.state.as_str(), "FAILED" | "NODE_FAIL" | "OUT_OF_MEMORY");
        if spec.logs && run.keeps_log && (failed_hard || sim.rng.chance(0.03)) {
            let job = logs::LogJob {
                job_id: run.job_id_raw,
                hosts: &hosts,
                start: run.start,
                end: run.end,
                user: &sim.users[run.user].name,
                launcher: run.launcher,
                ending: run.ending,
            };
            let text = logs::render(&job, &mut sim.rng);
            write_log(&path, &text, run.end)?;
        }
        let n = hosts.len();
        let derived = if failed && run.exit != "0:0" {
            "1:0"
        } else {
            "0:0"
        };
        let p = path.display();
        writeln!(
            out,
            "{}|{}|{}|{n}|{}|{}|{derived}|{}|{}|{}|{}|gpu|{}|{uid}|billing={},cpu={},gres/gpu={},mem={}G,node={n}|{p}|{p}",
            run.job_id_raw, run.job_id, hostlist(&run.nodes), run.state, run.exit, run.submit, run.start, run.end, run.end - run.start, sim.users[run.user].name, 16 * n, 128 * n, 8 * n, 1024 * n
        )?;
    }
    sim.runs = runs;
    Ok(out)
}

/// A log as Slurm leaves it: last written when the job ended.
fn write_log(path: &Path, text: &str, end: i64) -> std::io::Result<()> {
    let file = std::fs::File::create(path)?;
    (&file).write_all(text.as_bytes())?;
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(end.max(0) as u64);
    file.set_modified(when)
}

/// Slurm's compressed hostlist of sorted node indexes: `gpu[0001-0004,0010]`.
pub fn hostlist(nodes: &[usize]) -> String {
    if let [one] = nodes {
        return node_name(*one);
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < nodes.len() {
        let mut j = i;
        while j + 1 < nodes.len() && nodes[j + 1] == nodes[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            format!("{:04}", nodes[i] + 1)
        } else {
            format!("{:04}-{:04}", nodes[i] + 1, nodes[j] + 1)
        });
        i = j + 1;
    }
    format!("gpu[{}]", parts.join(","))
}

/// How a detector's flagged nodes score on a history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryScore {
    pub seed: u64,
    pub flagged: usize,
    pub true_positives: usize,
    pub precision: f64,
    pub reachable: usize,
    pub reachable_found: usize,
    /// Found reachable lemons over reachable lemons.
    pub recall: f64,
    pub planted: usize,
    /// Reachable over planted: the best recall counting could reach.
    pub ceiling: f64,
    pub confounders_flagged: Vec<String>,
    pub long_repair_flagged: bool,
}

impl HistoryScore {
    /// The markdown table's header, for [`HistoryScore`]'s rows.
    pub const HEADER: &'static str = "| seed | flagged | precision | recall (reachable) | ceiling | confounders flagged | long repair flagged |\n|---|---|---|---|---|---|---|";

    /// Several seeds' scores as one: sums, then the ratios of the sums.
    pub fn total(scores: &[HistoryScore]) -> HistoryScore {
        let sum = |f: fn(&HistoryScore) -> usize| scores.iter().map(f).sum::<usize>();
        let (flagged, tp) = (sum(|s| s.flagged), sum(|s| s.true_positives));
        let (reachable, found, planted) = (
            sum(|s| s.reachable),
            sum(|s| s.reachable_found),
            sum(|s| s.planted),
        );
        HistoryScore {
            seed: u64::MAX,
            flagged,
            true_positives: tp,
            precision: ratio(tp, flagged),
            reachable,
            reachable_found: found,
            recall: ratio(found, reachable),
            planted,
            ceiling: ratio(reachable, planted),
            confounders_flagged: scores
                .iter()
                .flat_map(|s| s.confounders_flagged.clone())
                .collect(),
            long_repair_flagged: scores.iter().any(|s| s.long_repair_flagged),
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

impl fmt::Display for HistoryScore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seed = if self.seed == u64::MAX {
            "all".to_string()
        } else {
            self.seed.to_string()
        };
        write!(
            f,
            "| {seed} | {} | {:.2} ({}/{}) | {:.2} ({}/{}) | {:.2} ({}/{}) | {} | {} |",
            self.flagged,
            self.precision,
            self.true_positives,
            self.flagged,
            self.recall,
            self.reachable_found,
            self.reachable,
            self.ceiling,
            self.reachable,
            self.planted,
            self.confounders_flagged.len(),
            if self.long_repair_flagged {
                "yes"
            } else {
                "no"
            }
        )
    }
}

/// Scores flagged nodes: precision, recall over reachable lemons, ceiling
/// (reachable/planted), confounders flagged, long-repair node flagged.
pub fn score(h: &IndependentHistory, flagged: &[String]) -> HistoryScore {
    let flagged: BTreeSet<&String> = flagged.iter().collect();
    let reachable = h.reachable_lemons();
    let tp = h.lemons.iter().filter(|l| flagged.contains(l)).count();
    let found = reachable.iter().filter(|l| flagged.contains(l)).count();
    HistoryScore {
        seed: h.seed,
        flagged: flagged.len(),
        true_positives: tp,
        precision: ratio(tp, flagged.len()),
        reachable: reachable.len(),
        reachable_found: found,
        recall: ratio(found, reachable.len()),
        planted: h.lemons.len(),
        ceiling: ratio(reachable.len(), h.lemons.len()),
        confounders_flagged: h
            .confounder_nodes
            .iter()
            .filter(|c| flagged.contains(c))
            .cloned()
            .collect(),
        long_repair_flagged: flagged.contains(&h.long_repair),
    }
}

#[cfg(test)]
mod tests;
