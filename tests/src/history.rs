//! Synthetic scheduler histories in sacct's format, for the lemon tests and
//! benchmark: what a cluster produces, written without looking at the
//! detector.
//!
//! [`generate`] writes `sacct -X -a -D -n -P --noconvert -o JobIDRaw,JobID,NodeList,
//! NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,
//! User,AllocTRES` rows (times in unix seconds, as with `SLURM_TIME_FORMAT=%s`)
//! and the matching `sacctmgr show event` rows
//! (`NodeName|Start|End|State|Reason|User`).
//!
//! What happens on the simulated cluster:
//!
//! * **Users** submit most of the jobs and cause most failures. Each user
//!   has a failure propensity (overall `user_failure_share`, 10-30 % of jobs,
//!   spread very unevenly over users) and a way of failing: ordinary exit
//!   codes (1, 2, sometimes 127), `OUT_OF_MEMORY`, `TIMEOUT`, cancellations;
//!   users of native code also crash with `SIGSEGV`/`SIGABRT`. A few
//!   **bad users** fail nearly every job and like one node (`-w`).
//! * **Bursts**: one user's job array crashes within an hour, all on one
//!   healthy node (half of the bursts with a segfault).
//! * **Hardware** fails jobs as a Poisson process per node-day of runtime:
//!   healthy nodes at `hardware_per_1000_node_days` (the paper's 6.5), planted
//!   lemons at `lemon_factor` times that. On a healthy node a health check
//!   usually catches the fault (an `hc: CODE entity` drain event near the
//!   job's end); on a lemon it usually does not: a third of its failures end
//!   as `NODE_FAIL` (slurmctld's `Not responding`), the others as a signal
//!   death (SIGBUS, SIGSEGV, SIGABRT, SIGKILL with `Kill task failed` now and
//!   then) or as a plain exit 1 (the framework caught the CUDA error),
//!   indistinguishable from a user's bug.
//! * **Requeues**: jobs killed by `NODE_FAIL` are often requeued and then
//!   complete elsewhere; a few jobs have an earlier `REQUEUED` run
//!   (preemption).
//! * **Multi-node jobs** (hostlist NodeLists, some with two bracket groups)
//!   fail with or without an event naming the culprit.
//! * Noise: jobs cancelled while pending (`None assigned`), array and het job ids.
//! * **Task exits** (with [`HistorySpec::task_exits`]: a cluster with the
//!   SPANK plugin and a shared spool): most failed runs' steps record their
//!   failing tasks. Hardware crashes the culprit's task first; the other
//!   ranks hang in a collective and are aborted or killed seconds to 20
//!   minutes later. A user's bug fails rank 0 (the allocation's first node)
//!   first, or every rank within half a second in any order. A node that
//!   died (`NODE_FAIL`) records nothing; its survivors' tasks are killed.
//!   Drawn from a random stream of their own: the jobs are the same with
//!   and without them.
//!
//! The ground truth ([`HistoryTruth`]) lists the lemons, the confounders'
//! nodes and every planted hardware failure. Deterministic for a seed; no
//! dependency beyond std.

use std::io::{self, Write};

/// What to generate. [`HistorySpec::realistic`] draws the parameters of one
/// cluster from a seed.
#[derive(Debug, Clone)]
pub struct HistorySpec {
    pub nodes: usize,
    pub jobs: usize,
    /// Unix seconds of the history's start.
    pub start: i64,
    pub days: u32,
    /// How many nodes are planted lemons (spread over the node list).
    pub lemons: usize,
    /// Lemons' hardware hazard as a multiple of a healthy node's.
    pub lemon_factor: f64,
    /// Healthy nodes' hardware failures per 1000 node-days of job runtime.
    pub hardware_per_1000_node_days: f64,
    /// Share of a healthy node's hardware failures a health check catches.
    pub healthy_caught_share: f64,
    /// Share of a lemon's hardware failures a health check catches.
    pub lemon_caught_share: f64,
    /// Share of jobs that fail through their user's own fault.
    pub user_failure_share: f64,
    /// Users whose jobs nearly always fail.
    pub bad_users: usize,
    /// Job arrays crashing within an hour on one node.
    pub bursts: usize,
    /// Share of jobs that span several nodes.
    pub multi_node_fraction: f64,
    /// Largest multi-node job.
    pub max_job_nodes: usize,
    /// Share of node time that jobs use.
    pub utilization: f64,
    /// First JobIDRaw; histories continued later use a higher base.
    pub first_job_id: i64,
    /// The SPANK plugin records failing tasks ([`HistoryTruth::task_exits`]).
    pub task_exits: bool,
    pub seed: u64,
}

impl Default for HistorySpec {
    fn default() -> Self {
        Self {
            nodes: 200,
            jobs: 20_000,
            start: 1_700_000_000,
            days: 28,
            lemons: 3,
            lemon_factor: 30.0,
            hardware_per_1000_node_days: 6.5,
            healthy_caught_share: 0.8,
            lemon_caught_share: 0.1,
            user_failure_share: 0.2,
            bad_users: 2,
            bursts: 2,
            multi_node_fraction: 0.1,
            max_job_nodes: 16,
            utilization: 0.85,
            first_job_id: 1_000,
            task_exits: false,
            seed: 42,
        }
    }
}

impl HistorySpec {
    /// One cluster's history: 512 nodes, 35 days, about 25,000 jobs, lemons
    /// at `lemon_factor`, the rest drawn from `seed` (user failure share
    /// 10-30 %, 4-8 lemons, 1-3 bad users, 1-3 bursts, 6-14 % multi-node
    /// jobs, 75-95 % utilisation, checks catching 70-90 % of healthy nodes'
    /// hardware failures and 5-15 % of lemons').
    pub fn realistic(seed: u64, lemon_factor: f64) -> HistorySpec {
        let mut r = Rng::new(seed.wrapping_mul(0x51_7CC1_B727_220A));
        HistorySpec {
            nodes: 512,
            jobs: 22_000 + r.below(6_000),
            days: 35,
            lemons: 4 + r.below(5),
            lemon_factor,
            healthy_caught_share: 0.7 + 0.2 * r.f64(),
            lemon_caught_share: 0.05 + 0.1 * r.f64(),
            user_failure_share: 0.1 + 0.2 * r.f64(),
            bad_users: 1 + r.below(3),
            bursts: 1 + r.below(3),
            multi_node_fraction: 0.06 + 0.08 * r.f64(),
            utilization: 0.75 + 0.2 * r.f64(),
            seed,
            ..HistorySpec::default()
        }
    }
}

/// One planted hardware failure.
#[derive(Debug, Clone, PartialEq)]
pub struct HardwareFailure {
    pub job_id_raw: i64,
    pub node: String,
    pub end: i64,
    /// A health check caught it (an `hc:` event near the end).
    pub caught: bool,
    /// Slurm saw the node fail: `NODE_FAIL`, `Not responding` or `Kill task failed`.
    pub slurm_saw: bool,
    pub lemon: bool,
}

/// A failing task as the SPANK plugin records it on its node.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedTaskExit {
    pub node: String,
    pub job_id_raw: i64,
    /// Unix milliseconds.
    pub at_ms: i64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// What was generated: the ground truth the tests check against.
#[derive(Debug, Clone, Default)]
pub struct HistoryTruth {
    pub node_names: Vec<String>,
    pub lemons: Vec<String>,
    /// Healthy nodes that bursts crashed on or bad users favoured: a
    /// detector that flags one of them blames users' faults on a node.
    pub confounder_nodes: Vec<String>,
    /// The bad users (nearly every job fails).
    pub bad_users: Vec<String>,
    /// Every planted hardware failure, by end time.
    pub hardware: Vec<HardwareFailure>,
    /// Failed runs whose culprit is a lemon.
    pub lemon_failures: u64,
    /// Failed runs whose culprit is a healthy node's hardware.
    pub background_failures: u64,
    /// Runs that ended badly through their user's fault (failed, OOM,
    /// timeout, cancelled), bursts and bad users included.
    pub user_failures: u64,
    pub rows: u64,
    pub node_days: f64,
    /// Latest End of any row.
    pub end: i64,
    /// The next free JobIDRaw.
    pub next_job_id: i64,
    /// Failing tasks, with [`HistorySpec::task_exits`].
    pub task_exits: Vec<GeneratedTaskExit>,
}

/// What a detector flagged against what was planted, summed over seeds:
/// the one tally of the detection tests.
#[derive(Debug, Default)]
pub struct Detection {
    /// Planted lemons among the flagged nodes.
    pub hits: usize,
    pub flagged: usize,
    pub planted: usize,
    /// Confounder nodes flagged, as `seed S: NODE`.
    pub confounded: Vec<String>,
}

impl Detection {
    /// Adds one seed's history and the nodes flagged on it.
    pub fn add(&mut self, seed: u64, truth: &HistoryTruth, flagged: &[String]) {
        self.hits += flagged.iter().filter(|n| truth.lemons.contains(n)).count();
        self.flagged += flagged.len();
        self.planted += truth.lemons.len();
        self.confounded.extend(
            flagged
                .iter()
                .filter(|n| truth.confounder_nodes.contains(n))
                .map(|n| format!("seed {seed}: {n}")),
        );
    }
}

impl HistoryTruth {
    /// Hardware failures that ended in `[since, until)`.
    pub fn hardware_between(&self, since: i64, until: i64) -> usize {
        self.hardware
            .iter()
            .filter(|h| h.end >= since && h.end < until)
            .count()
    }
}

/// Node name of index `i`: `gpu0001`...
pub fn node_name(i: usize) -> String {
    format!("gpu{:04}", i + 1)
}

/// splitmix64: small, fast, good enough for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
    /// Index drawn with the given weights.
    pub fn pick(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

/// `gpu[0003-0006]`, or two groups when the block wraps around the node list.
fn hostlist(first: usize, count: usize, nodes: usize) -> (String, Vec<usize>) {
    let idx: Vec<usize> = (0..count).map(|k| (first + k) % nodes).collect();
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for &i in &idx {
        match groups.last_mut() {
            Some((_, hi)) if *hi + 1 == i => *hi = i,
            _ => groups.push((i, i)),
        }
    }
    groups.sort();
    let ranges: Vec<String> = groups
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                format!("{:04}", lo + 1)
            } else {
                format!("{:04}-{:04}", lo + 1, hi + 1)
            }
        })
        .collect();
    let expr = if count == 1 {
        node_name(idx[0])
    } else {
        format!("gpu[{}]", ranges.join(","))
    };
    (expr, idx)
}

/// One user of the cluster.
#[derive(Debug, Clone)]
struct User {
    name: String,
    /// Relative share of the jobs.
    activity: f64,
    /// Chance that one of their jobs fails through their own fault.
    propensity: f64,
    /// Share of their own failures that are crashes by a signal.
    crash_share: f64,
    /// The node a bad user asks for with `-w`.
    favourite: Option<usize>,
}

fn users(spec: &HistorySpec, rng: &mut Rng, n: usize) -> Vec<User> {
    let count = 60;
    let mut users: Vec<User> = (0..count)
        .map(|i| {
            // Propensities spread very unevenly: most users rarely fail,
            // some fail a lot (mean 1 before scaling).
            let spread = rng.exp(1.0);
            User {
                name: format!("u{:03}", i + 1),
                activity: 1.0 / (1.0 + i as f64).powf(0.8),
                propensity: (spec.user_failure_share * spread).min(0.8),
                crash_share: if rng.f64() < 0.3 { 0.3 } else { 0.03 },
                favourite: None,
            }
        })
        .collect();
    for k in 0..spec.bad_users.min(count) {
        let u = &mut users[count - 1 - k];
        u.propensity = 0.97;
        u.activity = 0.15;
        u.crash_share = 0.2;
        u.favourite = Some(rng.below(n));
    }
    users
}

/// A user's own bad end: state, ExitCode, and whether it stops the job
/// before its planned end.
fn user_failure(rng: &mut Rng, user: &User) -> (&'static str, &'static str, bool) {
    if rng.f64() < user.crash_share {
        return match rng.below(2) {
            0 => ("FAILED", "0:11", true),
            _ => ("FAILED", "0:6", true),
        };
    }
    match rng.pick(&[45.0, 12.0, 3.0, 15.0, 15.0, 10.0]) {
        0 => ("FAILED", "1:0", true),
        1 => ("FAILED", "2:0", true),
        2 => ("FAILED", "127:0", true),
        3 => ("OUT_OF_MEMORY", "0:125", true),
        4 => ("TIMEOUT", "0:15", false),
        _ => ("CANCELLED by 1001", "0:9", true),
    }
}

/// How a hardware failure shows in sacct, and the event it leaves, if any:
/// `(state, exit, event state, event reason, event user)`.
type Manifestation = (
    &'static str,
    &'static str,
    Option<(&'static str, String, &'static str)>,
);

fn manifestation(rng: &mut Rng, caught: bool) -> Manifestation {
    if caught {
        let (code, entity) = [
            ("XID_79", "gpu3"),
            ("XID_48", "gpu5"),
            ("ECC_VOLATILE_UNCORRECTED", "gpu1"),
            ("PCIE_LINK_DOWN", "gpu6"),
            ("IB_PORT_DOWN", "mlx5_2:1"),
            ("MOUNT_HUNG", "/checkpoint"),
            ("NVLINK_INACTIVE", "gpu0"),
        ][rng.below(7)];
        let down = rng.f64() < 0.4;
        let (state, exit) = if down {
            ("NODE_FAIL", "0:0")
        } else {
            [("FAILED", "0:7"), ("FAILED", "1:0"), ("FAILED", "0:6")][rng.below(3)]
        };
        let ev_state = if down { "DOWN" } else { "DRAIN" };
        return (
            state,
            exit,
            Some((ev_state, format!("hc: {code} {entity}"), "root")),
        );
    }
    match rng.pick(&[33.0, 40.0, 27.0]) {
        0 => (
            "NODE_FAIL",
            "0:0",
            Some(("DOWN*", "Not responding".into(), "slurm")),
        ),
        1 => {
            let (exit, kill_failed) = [
                ("0:7", false),
                ("0:11", false),
                ("0:6", false),
                ("0:9", rng.f64() < 0.5),
            ][rng.below(4)];
            let ev = kill_failed.then(|| ("DRAIN", "Kill task failed".to_string(), "slurm"));
            ("FAILED", exit, ev)
        }
        _ => ("FAILED", "1:0", None),
    }
}

/// `0:7` → (None, Some(7)); `1:0` → (Some(1), None).
fn exit_parts(exit: &str) -> (Option<i32>, Option<i32>) {
    let (code, signal) = exit.split_once(':').unwrap_or((exit, "0"));
    let signal: i32 = signal.parse().unwrap_or(0);
    if signal != 0 {
        (None, Some(signal))
    } else {
        (Some(code.parse().unwrap_or(1)), None)
    }
}

/// The failing tasks of one failed run, if its steps recorded them.
/// `culprit`: the node whose hardware failed it; `None`: its user's bug.
fn task_exits(
    rng: &mut Rng,
    raw: i64,
    nodes: &[usize],
    end: i64,
    state: &str,
    exit: &str,
    culprit: Option<usize>,
) -> Vec<GeneratedTaskExit> {
    // Batch scripts that fail before their first `srun` record nothing.
    if rng.f64() < 0.15 {
        return Vec::new();
    }
    let end_ms = end * 1000;
    let record = |node: usize, at_ms: i64, exit: (Option<i32>, Option<i32>)| GeneratedTaskExit {
        node: node_name(node),
        job_id_raw: raw,
        at_ms,
        exit_code: exit.0,
        signal: exit.1,
    };
    let killed = |rng: &mut Rng| {
        if rng.f64() < 0.5 {
            (None, Some(9))
        } else {
            (None, Some(6))
        }
    };
    match culprit {
        Some(c) if state == "NODE_FAIL" => nodes
            .iter()
            .filter(|&&n| n != c)
            .map(|&n| record(n, end_ms + rng.below(60_000) as i64, (None, Some(9))))
            .collect(),
        Some(c) => {
            // The culprit crashes; the others wait in a collective, then die.
            let lag = 1_000 + rng.below(20 * 60_000) as i64;
            let first = end_ms - lag;
            let mut out = vec![record(c, first, exit_parts(exit))];
            for &n in nodes.iter().filter(|&&n| n != c) {
                let at = first + 50 + rng.below(lag.max(51) as usize - 50) as i64;
                let how = killed(rng);
                out.push(record(n, at, how));
            }
            out
        }
        None => {
            let first = end_ms - rng.below(2_000) as i64;
            let together = rng.f64() < 0.5;
            let mut order: Vec<usize> = nodes.to_vec();
            if together {
                // Every rank hits the bug: in any order within half a second.
                for k in (1..order.len()).rev() {
                    order.swap(k, rng.below(k + 1));
                }
            }
            order
                .iter()
                .enumerate()
                .map(|(k, &n)| {
                    if k == 0 || together {
                        let at = first + if k == 0 { 0 } else { rng.below(500) as i64 };
                        record(n, at, exit_parts(exit))
                    } else {
                        // Rank 0 failed; srun kills the rest.
                        let how = killed(rng);
                        record(n, first + 20 + rng.below(3_000) as i64, how)
                    }
                })
                .collect()
        }
    }
}

struct Writer<'a, S: Write, E: Write> {
    sacct: &'a mut S,
    events: &'a mut E,
    truth: HistoryTruth,
}

impl<S: Write, E: Write> Writer<'_, S, E> {
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        raw: i64,
        display: &str,
        nodelist: &str,
        count: usize,
        state: &str,
        exit: &str,
        times: (i64, i64, i64),
        user: &str,
    ) -> io::Result<()> {
        let (submit, start, end) = times;
        let gpus = count * 8;
        writeln!(
            self.sacct,
            "{raw}|{display}|{nodelist}|{count}|{state}|{exit}|0:0|{submit}|{start}|{end}|{}|batch|{user}|billing={gpus},cpu={},gres/gpu={gpus},mem=512G,node={count}",
            end - start,
            count * 64
        )?;
        self.truth.rows += 1;
        self.truth.end = self.truth.end.max(end);
        Ok(())
    }

    fn event(&mut self, node: usize, at: i64, ev: (&str, String, &str)) -> io::Result<()> {
        let (state, reason, user) = ev;
        writeln!(
            self.events,
            "{}|{}|{}|{}|{}|{}",
            node_name(node),
            at,
            at + 3600 + (at % 7200),
            state,
            reason,
            user
        )
    }
}

/// Writes the history: jobs to `sacct`, node events to `events`.
pub fn generate(
    spec: &HistorySpec,
    sacct: &mut impl Write,
    events: &mut impl Write,
) -> io::Result<HistoryTruth> {
    let mut rng = Rng::new(spec.seed);
    // Task exits draw from a stream of their own: the jobs stay the same.
    let mut task_rng = Rng::new(spec.seed ^ 0x5A5A_7A5C_E417_0000);
    let n = spec.nodes.max(1);
    let mut w = Writer {
        sacct,
        events,
        truth: HistoryTruth {
            node_names: (0..n).map(node_name).collect(),
            ..HistoryTruth::default()
        },
    };
    let lemons = spec.lemons.min(n);
    let mut lemon_idx: Vec<usize> = Vec::with_capacity(lemons);
    for k in 0..lemons {
        let mut i = ((k * n) / lemons.max(1) + n / (2 * lemons.max(1)) + 7 * k).min(n - 1);
        // The last few can land past the end and be clamped onto one node:
        // every lemon is a node of its own.
        while lemon_idx.contains(&i) {
            i = (i + 1) % n;
        }
        lemon_idx.push(i);
    }
    w.truth.lemons = lemon_idx.iter().map(|&i| node_name(i)).collect();
    w.truth.lemons.sort();
    let is_lemon = |i: usize| lemon_idx.contains(&i);
    let bg = spec.hardware_per_1000_node_days / 1000.0;
    let hazard = |i: usize| {
        if is_lemon(i) {
            bg * spec.lemon_factor
        } else {
            bg
        }
    };
    let users = users(spec, &mut rng, n);
    for u in users.iter().filter(|u| u.favourite.is_some()) {
        w.truth.bad_users.push(u.name.clone());
    }
    let activity: Vec<f64> = users.iter().map(|u| u.activity).collect();
    let span = i64::from(spec.days) * 86_400;
    let max_nodes = spec.max_job_nodes.clamp(2, n.max(2));
    let avg_nodes =
        1.0 - spec.multi_node_fraction + spec.multi_node_fraction * (2 + max_nodes) as f64 / 2.0;
    let mean_days = (spec.utilization * n as f64 * f64::from(spec.days)
        / (spec.jobs.max(1) as f64 * avg_nodes))
        .max(60.0 / 86_400.0);
    let mut job_id = spec.first_job_id;
    for j in 0..spec.jobs {
        // Ends spread evenly: a later history continues where this one stops.
        let planned_end =
            spec.start + (j as i64 * span) / spec.jobs.max(1) as i64 + rng.below(60) as i64;
        let user = &users[rng.pick(&activity)];
        let raw = job_id;
        job_id += 1;
        let roll = rng.f64();
        let display = if roll < 0.1 {
            format!("{}_{}", raw - (j as i64 % 7), j % 7)
        } else if roll < 0.105 {
            format!("{raw}+0")
        } else {
            raw.to_string()
        };
        let submit = planned_end - 86_400.min(span) / 4 - rng.below(3600) as i64;
        if rng.f64() < 0.02 {
            // Cancelled while pending: never ran.
            writeln!(
                w.sacct,
                "{raw}|{display}|None assigned|1|CANCELLED by {}|0:0|0:0|{submit}|Unknown|{planned_end}|0|batch|{}|",
                1000 + rng.below(6),
                user.name
            )?;
            w.truth.rows += 1;
            w.truth.user_failures += 1;
            w.truth.end = w.truth.end.max(planned_end);
            continue;
        }
        let count = if user.favourite.is_none() && rng.f64() < spec.multi_node_fraction {
            2 + rng.below(max_nodes - 1)
        } else {
            1
        }
        .min(n);
        let planned_days = rng.exp(mean_days).clamp(120.0 / 86_400.0, 7.0);
        let start = planned_end - (planned_days * 86_400.0) as i64;
        let first = match user.favourite {
            Some(f) if rng.f64() < 0.5 => f,
            _ => rng.below(n),
        };
        let (expr, idx) = hostlist(first, count, n);

        if rng.f64() < 0.005 && start - 7200 > submit {
            // An earlier run that was preempted and requeued.
            let (e2, _) = hostlist(rng.below(n), count, n);
            w.run(
                raw,
                &display,
                &e2,
                count,
                "REQUEUED",
                "0:0",
                (submit, start - 7200, start - 3600),
                &user.name,
            )?;
        }

        // The user's own end comes first; hardware fails the job if its
        // failure time comes earlier (drawing in the other order would
        // over-count failures against the exposure of runs that end early).
        let own = (rng.f64() < user.propensity).then(|| user_failure(&mut rng, user));
        let own_days = match own {
            Some((_, _, true)) => planned_days * rng.f64().max(0.01),
            _ => planned_days,
        };
        let total_hazard: f64 = idx.iter().map(|&i| hazard(i)).sum();
        let hw_after = rng.exp(1.0 / total_hazard);
        if hw_after < own_days {
            let end = start + (hw_after * 86_400.0) as i64;
            w.truth.node_days += hw_after * count as f64;
            let weights: Vec<f64> = idx.iter().map(|&i| hazard(i)).collect();
            let culprit = idx[rng.pick(&weights)];
            let lemon = is_lemon(culprit);
            let caught_share = if lemon {
                spec.lemon_caught_share
            } else {
                spec.healthy_caught_share
            };
            let caught = rng.f64() < caught_share;
            let (state, exit, ev) = manifestation(&mut rng, caught);
            let slurm_saw = state == "NODE_FAIL" || matches!(ev, Some((_, _, "slurm")));
            if spec.task_exits {
                let exits = task_exits(&mut task_rng, raw, &idx, end, state, exit, Some(culprit));
                w.truth.task_exits.extend(exits);
            }
            if let Some(ev) = ev {
                // The check or slurmctld reacts within minutes of the fault.
                let at = end - 120 + rng.below(300) as i64;
                w.event(culprit, at, ev)?;
            }
            w.run(
                raw,
                &display,
                &expr,
                count,
                state,
                exit,
                (submit, start, end),
                &user.name,
            )?;
            if lemon {
                w.truth.lemon_failures += 1;
            } else {
                w.truth.background_failures += 1;
            }
            w.truth.hardware.push(HardwareFailure {
                job_id_raw: raw,
                node: node_name(culprit),
                end,
                caught,
                slurm_saw,
                lemon,
            });
            if state == "NODE_FAIL" && rng.f64() < 0.5 {
                // Requeued by slurmctld: runs again elsewhere and completes.
                let (e2, idx2) = hostlist(rng.below(n), count, n);
                let (s2, e2end) = (end + 300, end + 300 + 3600 + rng.below(20_000) as i64);
                w.truth.node_days += (e2end - s2) as f64 / 86_400.0 * idx2.len() as f64;
                w.run(
                    raw,
                    &display,
                    &e2,
                    count,
                    "COMPLETED",
                    "0:0",
                    (submit, s2, e2end),
                    &user.name,
                )?;
            }
            continue;
        }
        let end = start + (own_days * 86_400.0) as i64;
        w.truth.node_days += own_days * count as f64;
        let (state, exit) = match own {
            Some((state, exit, _)) => {
                w.truth.user_failures += 1;
                (state, exit)
            }
            None => ("COMPLETED", "0:0"),
        };
        if spec.task_exits && matches!(state, "FAILED" | "OUT_OF_MEMORY") {
            let exits = task_exits(&mut task_rng, raw, &idx, end, state, exit, None);
            w.truth.task_exits.extend(exits);
        }
        w.run(
            raw,
            &display,
            &expr,
            count,
            state,
            exit,
            (submit, start, end),
            &user.name,
        )?;
    }
    job_id = bursts(spec, &mut rng, &mut w, &users, &is_lemon, job_id)?;
    let mut confounders: Vec<String> = users
        .iter()
        .filter_map(|u| u.favourite)
        .filter(|&i| !is_lemon(i))
        .map(node_name)
        .collect();
    confounders.append(&mut w.truth.confounder_nodes);
    confounders.sort();
    confounders.dedup();
    w.truth.confounder_nodes = confounders;
    w.truth.hardware.sort_by_key(|h| h.end);
    w.truth.next_job_id = job_id;
    Ok(w.truth)
}

/// Job arrays that crash within an hour on one healthy node.
fn bursts<S: Write, E: Write>(
    spec: &HistorySpec,
    rng: &mut Rng,
    w: &mut Writer<'_, S, E>,
    users: &[User],
    is_lemon: &dyn Fn(usize) -> bool,
    mut job_id: i64,
) -> io::Result<i64> {
    let n = spec.nodes.max(1);
    let span = i64::from(spec.days) * 86_400;
    for _ in 0..spec.bursts {
        let user = &users[rng.below(users.len() / 2)];
        let mut node = rng.below(n);
        while is_lemon(node) && n > spec.lemons {
            node = (node + 1) % n;
        }
        w.truth.confounder_nodes.push(node_name(node));
        let array = job_id;
        let t0 = spec.start + 86_400 + rng.below((span - 2 * 86_400).max(1) as usize) as i64;
        let exit = if rng.f64() < 0.5 { "0:11" } else { "1:0" };
        let tasks = 10 + rng.below(21);
        for k in 0..tasks {
            let start = t0 + rng.below(1800) as i64;
            let end = start + 30 + rng.below(1500) as i64;
            w.truth.node_days += (end - start) as f64 / 86_400.0;
            w.truth.user_failures += 1;
            w.run(
                job_id,
                &format!("{array}_{k}"),
                &node_name(node),
                1,
                "FAILED",
                exit,
                (t0 - 600, start, end),
                &user.name,
            )?;
            job_id += 1;
        }
    }
    Ok(job_id)
}

/// The task exits as each node's spool export carries them, in time order.
pub fn spool_records(
    truth: &HistoryTruth,
) -> std::collections::BTreeMap<String, Vec<lemonade_spool::Record>> {
    let mut by_node: std::collections::BTreeMap<String, Vec<&GeneratedTaskExit>> =
        std::collections::BTreeMap::new();
    for t in &truth.task_exits {
        by_node.entry(t.node.clone()).or_default().push(t);
    }
    by_node
        .into_iter()
        .map(|(node, mut exits)| {
            exits.sort_by_key(|t| t.at_ms);
            let records = exits
                .iter()
                .enumerate()
                .map(|(k, t)| lemonade_spool::Record {
                    seq: k as u64 + 1,
                    epoch: "history".into(),
                    node: node.clone(),
                    at: t.at_ms.div_euclid(1000),
                    body: lemonade_spool::Body::TaskExit {
                        job_id: t.job_id_raw.to_string(),
                        step_id: "0".into(),
                        task_id: 0,
                        exit_code: t.exit_code,
                        signal: t.signal,
                        at_ms: Some(t.at_ms),
                    },
                })
                .collect();
            (node, records)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostlists_compress_blocks_and_wraps() {
        assert_eq!(hostlist(2, 3, 10).0, "gpu[0003-0005]");
        assert_eq!(hostlist(8, 4, 10).0, "gpu[0001-0002,0009-0010]");
        assert_eq!(hostlist(4, 1, 10).0, "gpu0005");
    }

    #[test]
    fn every_planted_lemon_is_a_node_of_its_own() {
        // The benchmark's shape: 40 lemons over 4000 nodes, whose last
        // positions once landed past the end and were clamped onto one node.
        let spec = HistorySpec {
            nodes: 4000,
            jobs: 2_000,
            lemons: 40,
            days: 2,
            ..HistorySpec::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let t = generate(&spec, &mut a, &mut b).unwrap();
        let mut distinct = t.lemons.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 40, "{:?}", t.lemons);
    }

    #[test]
    fn healthy_hardware_rate_is_what_was_asked() {
        let spec = HistorySpec {
            nodes: 500,
            jobs: 50_000,
            lemons: 0,
            days: 56,
            ..HistorySpec::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let t = generate(&spec, &mut a, &mut b).unwrap();
        let rate = t.background_failures as f64 / t.node_days * 1000.0;
        assert!((rate - 6.5).abs() < 1.0, "rate {rate}");
        assert!(t.rows >= 50_000);
        let text = String::from_utf8(a).unwrap();
        assert!(text.contains("None assigned"));
        assert!(text.contains("REQUEUED"));
    }

    #[test]
    fn task_exits_come_from_a_stream_of_their_own_and_leave_the_jobs_as_they_were() {
        let spec = HistorySpec::realistic(4, 30.0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let plain = generate(&spec, &mut a, &mut b).unwrap();
        let (mut a2, mut b2) = (Vec::new(), Vec::new());
        let with = HistorySpec {
            task_exits: true,
            ..spec
        };
        let t = generate(&with, &mut a2, &mut b2).unwrap();
        assert!(a == a2 && b == b2, "the same jobs and events");
        assert!(plain.task_exits.is_empty());
        let jobs_text = String::from_utf8(a2).unwrap();
        // Failed multi-node runs leave several nodes' exits, a NODE_FAIL's
        // culprit none.
        let jobs: std::collections::BTreeSet<i64> =
            t.task_exits.iter().map(|e| e.job_id_raw).collect();
        assert!(jobs.len() > 1_000, "{} jobs with task exits", jobs.len());
        for h in t.hardware.iter().filter(|h| !h.caught) {
            let dead = t
                .task_exits
                .iter()
                .any(|e| e.job_id_raw == h.job_id_raw && e.node == h.node);
            let row = jobs_text
                .lines()
                .find(|l| l.starts_with(&format!("{}|", h.job_id_raw)))
                .map(|l| l.contains("|NODE_FAIL|"))
                .unwrap();
            if row {
                assert!(!dead, "a dead node recorded a task exit: {h:?}");
            }
        }
    }

    #[test]
    fn a_realistic_history_has_what_a_cluster_has() {
        for seed in 1..=3 {
            let spec = HistorySpec::realistic(seed, 10.0);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let t = generate(&spec, &mut a, &mut b).unwrap();
            let jobs = String::from_utf8(a).unwrap();
            let events = String::from_utf8(b).unwrap();
            let share = t.user_failures as f64 / t.rows as f64;
            assert!(
                (0.07..0.4).contains(&share),
                "seed {seed}: user share {share}"
            );
            for s in [
                "|FAILED|1:0|",
                "|FAILED|2:0|",
                "|FAILED|0:11|",
                "|OUT_OF_MEMORY|",
            ] {
                assert!(jobs.contains(s), "seed {seed}: no {s}");
            }
            for s in ["|TIMEOUT|", "|NODE_FAIL|", "CANCELLED by"] {
                assert!(jobs.contains(s), "seed {seed}: no {s}");
            }
            assert!(events.contains("|hc: "), "seed {seed}");
            assert!(events.contains("|Not responding|"), "seed {seed}");
            assert_eq!(t.lemons.len(), spec.lemons);
            assert!(!t.confounder_nodes.is_empty());
            assert!(t.confounder_nodes.iter().all(|c| !t.lemons.contains(c)));
            let caught_healthy = t.hardware.iter().filter(|h| !h.lemon && h.caught).count();
            let healthy = t.hardware.iter().filter(|h| !h.lemon).count();
            assert!(
                caught_healthy * 2 > healthy,
                "seed {seed}: healthy mostly caught"
            );
        }
    }
}
