//! Synthetic scheduler histories in sacct's format, for the lemon tests and benchmark.
//!
//! [`generate`] writes `sacct -X -a -D -n -P --noconvert -o JobIDRaw,JobID,NodeList,
//! NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,
//! User,AllocTRES` rows (times in unix seconds, as with `SLURM_TIME_FORMAT=%s`)
//! for N nodes and M jobs, and the matching `sacctmgr show event` rows.
//!
//! * Failures come from a hazard per node-day: background nodes fail jobs at
//!   `background_per_1000_node_days` (the paper's 6.5), planted lemons at
//!   `lemon_factor` times that. A job's culprit is drawn among its nodes in
//!   proportion to their hazards, so the planted truth is known.
//! * `NODE_FAIL` failures leave a node event (`DOWN*`, `Not responding`) on
//!   the culprit, so multi-node failures can be attributed; `FAILED`
//!   multi-node failures leave nothing (they stay unattributed).
//! * Realistic noise: multi-node jobs with hostlist NodeLists (some with two
//!   bracket groups), requeued jobs (an earlier `REQUEUED` run of the same id),
//!   jobs cancelled while pending (`None assigned`, `Unknown` start,
//!   `CANCELLED by N`), array and het job ids, timeouts, OOMs and user errors
//!   (exit 127) that are not the node's fault.
//!
//! Deterministic for a given seed; no dependency beyond std.

use std::io::{self, Write};

/// What to generate.
#[derive(Debug, Clone)]
pub struct HistorySpec {
    pub nodes: usize,
    pub jobs: usize,
    /// Unix seconds of the history's start.
    pub start: i64,
    pub days: u32,
    /// How many nodes are planted lemons (spread evenly over the node list).
    pub lemons: usize,
    /// Lemons' hazard as a multiple of the background's.
    pub lemon_factor: f64,
    /// Background failures per 1000 node-days of job runtime.
    pub background_per_1000_node_days: f64,
    /// Share of jobs that span several nodes.
    pub multi_node_fraction: f64,
    /// Largest multi-node job.
    pub max_job_nodes: usize,
    /// Share of node time that jobs use.
    pub utilization: f64,
    /// First JobIDRaw; histories continued later use a higher base.
    pub first_job_id: i64,
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
            lemon_factor: 40.0,
            background_per_1000_node_days: 6.5,
            multi_node_fraction: 0.1,
            max_job_nodes: 16,
            utilization: 0.8,
            first_job_id: 1_000,
            seed: 42,
        }
    }
}

/// What was generated: the ground truth the tests check against.
#[derive(Debug, Clone, Default)]
pub struct HistoryTruth {
    pub node_names: Vec<String>,
    pub lemons: Vec<String>,
    /// Failed runs whose culprit is a lemon.
    pub lemon_failures: u64,
    /// Failed runs whose culprit is a healthy node (user errors excluded).
    pub background_failures: u64,
    pub rows: u64,
    pub node_days: f64,
    /// Latest End of any row.
    pub end: i64,
    /// The next free JobIDRaw.
    pub next_job_id: i64,
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

/// Writes the history: jobs to `sacct`, node events to `events`.
pub fn generate(
    spec: &HistorySpec,
    sacct: &mut impl Write,
    events: &mut impl Write,
) -> io::Result<HistoryTruth> {
    let mut rng = Rng::new(spec.seed);
    let n = spec.nodes.max(1);
    let mut truth = HistoryTruth {
        node_names: (0..n).map(node_name).collect(),
        ..HistoryTruth::default()
    };
    let lemon_idx: Vec<usize> = (0..spec.lemons.min(n))
        .map(|k| (k * n) / spec.lemons.max(1) + n / (2 * spec.lemons.max(1)))
        .map(|i| i.min(n - 1))
        .collect();
    truth.lemons = lemon_idx.iter().map(|&i| node_name(i)).collect();
    let bg = spec.background_per_1000_node_days / 1000.0;
    let hazard = |i: usize| {
        if lemon_idx.contains(&i) {
            bg * spec.lemon_factor
        } else {
            bg
        }
    };
    let span = i64::from(spec.days) * 86_400;
    let max_nodes = spec.max_job_nodes.clamp(2, n.max(2));
    let avg_nodes =
        1.0 - spec.multi_node_fraction + spec.multi_node_fraction * (2 + max_nodes) as f64 / 2.0;
    let mean_days = (spec.utilization * n as f64 * f64::from(spec.days)
        / (spec.jobs.max(1) as f64 * avg_nodes))
        .max(60.0 / 86_400.0);
    let users = ["alice", "bob", "carol", "dave", "erin", "frank"];
    let mut job_id = spec.first_job_id;
    let mut line = String::with_capacity(256);
    for j in 0..spec.jobs {
        // Ends spread evenly: a later history continues where this one stops.
        let end = spec.start + (j as i64 * span) / spec.jobs.max(1) as i64 + rng.below(60) as i64;
        let user = users[rng.below(users.len())];
        let roll = rng.f64();
        let raw = job_id;
        job_id += 1;
        let display = if roll < 0.1 {
            format!("{}_{}", raw - (j as i64 % 7), j % 7)
        } else if roll < 0.105 {
            format!("{}+{}", raw, 0)
        } else {
            raw.to_string()
        };
        let submit = end - 86_400.min(span) / 4 - rng.below(3600) as i64;
        // Cancelled while pending: never ran.
        if rng.f64() < 0.02 {
            line.clear();
            line.push_str(&format!(
                "{raw}|{display}|None assigned|1|CANCELLED by {}|0:0|0:0|{submit}|Unknown|{end}|0|batch|{user}|\n",
                1000 + rng.below(6)
            ));
            sacct.write_all(line.as_bytes())?;
            truth.rows += 1;
            truth.end = truth.end.max(end);
            continue;
        }
        let count = if rng.f64() < spec.multi_node_fraction {
            2 + rng.below(max_nodes - 1)
        } else {
            1
        }
        .min(n);
        let dur_days = rng.exp(mean_days).clamp(60.0 / 86_400.0, 7.0);
        let dur = (dur_days * 86_400.0) as i64;
        let start = end - dur;
        let (expr, idx) = hostlist(rng.below(n), count, n);
        let total_hazard: f64 = idx.iter().map(|&i| hazard(i)).sum();
        let p_fail = 1.0 - (-total_hazard * dur_days).exp();
        truth.node_days += dur_days * count as f64;
        let gpus = count * 8;
        let tres = format!(
            "billing={gpus},cpu={},gres/gpu={gpus},mem=512G,node={count}",
            count * 64
        );

        // An earlier run that was requeued.
        if rng.f64() < 0.005 && start - 7200 > submit {
            let (e2, _) = hostlist(rng.below(n), count, n);
            line.clear();
            line.push_str(&format!(
                "{raw}|{display}|{e2}|{count}|REQUEUED|0:0|0:0|{submit}|{}|{}|3600|batch|{user}|{tres}\n",
                start - 7200,
                start - 3600
            ));
            sacct.write_all(line.as_bytes())?;
            truth.rows += 1;
        }

        let (state, exit) = if rng.f64() < p_fail {
            // The culprit, in proportion to the hazards.
            let mut pick = rng.f64() * total_hazard;
            let mut culprit = idx[0];
            for &i in &idx {
                pick -= hazard(i);
                if pick <= 0.0 {
                    culprit = i;
                    break;
                }
            }
            if lemon_idx.contains(&culprit) {
                truth.lemon_failures += 1;
            } else {
                truth.background_failures += 1;
            }
            if count > 1 || rng.f64() < 0.3 {
                // The node died: slurmctld marks it DOWN and the job NODE_FAIL.
                writeln!(
                    events,
                    "{}|{}|{}|DOWN*|Not responding|slurm",
                    node_name(culprit),
                    end - 30,
                    end + 1800
                )?;
                ("NODE_FAIL", "0:0")
            } else {
                ("FAILED", "1:0")
            }
        } else {
            let r = rng.f64();
            if r < 0.01 {
                ("FAILED", "127:0") // user error: not the node's fault
            } else if r < 0.03 {
                ("TIMEOUT", "0:15")
            } else if r < 0.04 {
                ("OUT_OF_MEMORY", "0:125")
            } else if r < 0.07 {
                ("CANCELLED by 1001", "0:9")
            } else {
                ("COMPLETED", "0:0")
            }
        };
        line.clear();
        line.push_str(&format!(
            "{raw}|{display}|{expr}|{count}|{state}|{exit}|0:0|{submit}|{start}|{end}|{dur}|batch|{user}|{tres}\n"
        ));
        sacct.write_all(line.as_bytes())?;
        truth.rows += 1;
        truth.end = truth.end.max(end);
    }
    truth.next_job_id = job_id;
    Ok(truth)
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
    fn background_rate_is_what_was_asked() {
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
        assert!((rate - 6.5).abs() < 1.5, "rate {rate}");
        assert!(t.rows >= 50_000);
        let text = String::from_utf8(a).unwrap();
        assert!(text.contains("None assigned"));
        assert!(text.contains("REQUEUED"));
    }
}
