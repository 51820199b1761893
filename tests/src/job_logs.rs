//! The logs of a generated history's failed jobs (issue 36): what their
//! ranks printed, written as files, and the history as a headed sacct dump
//! with `UID`, `StdOut` and `StdErr` naming them.
//!
//! [`with_job_logs`] takes what [`crate::history::generate`] wrote (the
//! fixed fields, no header) and its truth, so the jobs are the same with
//! and without logs. The lines are modelled on what PyTorch (torchrun's
//! `[rankN]:` prefixes, `srun --label`'s `N: `), NCCL and Slurm print:
//!
//! | failure | what its log shows |
//! |---|---|
//! | hardware | 60 %: a localizing line on the failing node's ranks (CUDA error, NCCL `NET/IB` or `Cuda failure` with the host, `srun: error: HOST: task N: Bus error`), the other nodes' ranks NCCL watchdog timeouts; 25 %: timeouts only; 15 %: nothing |
//! | `NODE_FAIL` | the dead node prints nothing; the survivors time out (70 %) or say nothing |
//! | user | 85 %: a traceback (varied classes, some that no catalog knows), by every rank or rank 0; 10 %: out of memory (CUDA or the cgroup's OOM kill); the rest nothing |
//!
//! Every log starts with ordinary output: NCCL INFO and start-up warnings,
//! library warnings, training progress. A fifth of the jobs send stderr to a
//! file of its own.

use crate::history::{HistoryTruth, Rng};
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

/// The header of the dump [`with_job_logs`] writes.
pub const HEADER: &str = "JobIDRaw|JobID|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|UID|AllocTRES|StdOut|StdErr";

/// GPUs (ranks) per node of the generated clusters.
const RANKS_PER_NODE: usize = 8;

/// What the logs of the failed runs were made to show, by count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogTruth {
    /// Hardware failures whose culprit's ranks printed a localizing line.
    pub hardware_localizing: u64,
    /// ... whose logs hold the others' timeouts only.
    pub hardware_collateral: u64,
    /// ... whose logs say nothing.
    pub hardware_silent: u64,
    pub user_traceback: u64,
    pub user_oom: u64,
    pub user_silent: u64,
    /// Log files written.
    pub files: u64,
}

/// Writes each failed run's log under `dir` and returns `sacct`'s rows (as
/// [`crate::history::generate`] wrote them) as a headed dump whose UID is
/// `uid` and whose StdOut and StdErr name the logs. Runs that did not fail
/// name a log too, never written (Slurm names one for every job).
pub fn with_job_logs(
    sacct: &[u8],
    truth: &HistoryTruth,
    dir: &Path,
    uid: u32,
    seed: u64,
) -> io::Result<(Vec<u8>, LogTruth)> {
    let culprits: HashMap<(i64, i64), &str> = truth
        .hardware
        .iter()
        .map(|h| ((h.job_id_raw, h.end), h.node.as_str()))
        .collect();
    let mut rng = Rng::new(seed ^ 0x10C5_10C5_0000_0036);
    let mut out = Vec::with_capacity(sacct.len() * 2);
    writeln!(out, "{HEADER}")?;
    let mut log_truth = LogTruth::default();
    for line in String::from_utf8_lossy(sacct).lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() != 14 {
            writeln!(out, "{line}")?;
            continue;
        }
        let (raw, end): (i64, i64) = (f[0].parse().unwrap_or(0), f[9].parse().unwrap_or(0));
        let stdout = dir.join(format!("slurm-{raw}-{end}.out"));
        let stderr = if rng.f64() < 0.2 {
            dir.join(format!("slurm-{raw}-{end}.err"))
        } else {
            stdout.clone()
        };
        let job = Job {
            raw,
            nodes: expand(f[2]),
            state: f[4],
            exit: f[5],
        };
        if job.nodes.is_empty() || job.state == "COMPLETED" || job.state == "REQUEUED" {
            // Not a failure: its log is never read.
        } else {
            let log = match culprits.get(&(raw, end)) {
                Some(node) => hardware_log(&mut rng, &job, node, &mut log_truth),
                None => user_log(&mut rng, &job, &mut log_truth),
            };
            log_truth.files += write_log(&stdout, &stderr, &log)?;
        }
        writeln!(
            out,
            "{}|{uid}|{}|{}|{}",
            f[..13].join("|"),
            f[13],
            stdout.display(),
            stderr.display()
        )?;
    }
    Ok((out, log_truth))
}

/// One failed run as its log needs it.
struct Job<'a> {
    raw: i64,
    nodes: Vec<String>,
    state: &'a str,
    exit: &'a str,
}

impl Job<'_> {
    fn ranks(&self) -> usize {
        self.nodes.len() * RANKS_PER_NODE
    }

    fn node_of(&self, rank: usize) -> &str {
        &self.nodes[rank / RANKS_PER_NODE]
    }

    fn ranks_of(&self, node: &str) -> std::ops::Range<usize> {
        let k = self.nodes.iter().position(|n| n == node).unwrap_or(0);
        k * RANKS_PER_NODE..(k + 1) * RANKS_PER_NODE
    }
}

/// A log's lines: stdout's and stderr's.
#[derive(Default)]
struct Log {
    out: Vec<String>,
    err: Vec<String>,
}

fn write_log(stdout: &Path, stderr: &Path, log: &Log) -> io::Result<u64> {
    let text = |lines: &[String]| {
        let mut s = lines.join("\n");
        s.push('\n');
        s
    };
    if stdout == stderr {
        let mut all = log.out.clone();
        all.extend(log.err.iter().cloned());
        std::fs::write(stdout, text(&all))?;
        return Ok(1);
    }
    std::fs::write(stdout, text(&log.out))?;
    std::fs::write(stderr, text(&log.err))?;
    Ok(2)
}

/// How a rank's lines are prefixed: torchrun's `[rankN]:`, `srun --label`'s
/// `N: `, or not at all (one process per node printing for all).
#[derive(Clone, Copy)]
enum Prefix {
    Torchrun,
    SrunLabel,
}

impl Prefix {
    fn draw(rng: &mut Rng) -> Prefix {
        if rng.f64() < 0.7 {
            Prefix::Torchrun
        } else {
            Prefix::SrunLabel
        }
    }

    fn line(self, rank: usize, text: &str) -> String {
        match self {
            Prefix::Torchrun => format!("[rank{rank}]: {text}"),
            Prefix::SrunLabel => format!("{rank}: {text}"),
        }
    }
}

/// Ordinary output before anything goes wrong.
fn prelude(rng: &mut Rng, job: &Job, prefix: Prefix, log: &mut Log) {
    let host = &job.nodes[0];
    let pid = 20_000 + rng.below(60_000);
    log.out.push(format!(
        "{host}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using ib0:10.{}.{}.{}<0>",
        rng.below(16),
        rng.below(256),
        1 + rng.below(250)
    ));
    log.out.push(format!(
        "{host}:{pid}:{pid} [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
    ));
    if rng.f64() < 0.5 {
        log.out.push(format!(
            "{host}:{pid}:{} [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory",
            pid + 61
        ));
    }
    log.out.push(format!(
        "{host}:{pid}:{} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.0.0.1<0>",
        pid + 61
    ));
    log.out.push(format!(
        "{host}:{pid}:{pid} [0] NCCL INFO cudaDriverVersion 12040"
    ));
    log.err.push(
        "/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:558: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create.".into(),
    );
    if rng.f64() < 0.3 {
        log.err.push(prefix.line(0, "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py:1511: FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead."));
    }
    let steps = 5 + rng.below(30);
    let mut loss = 6.0 + rng.f64();
    for k in 0..steps {
        loss *= 0.97 + 0.02 * rng.f64();
        log.out.push(prefix.line(
            0,
            &format!(
                "step {} | loss {loss:.4} | lr {:.2e} | grad_norm {:.3} | {:.1} TFLOPS",
                (k + 1) * 100,
                3e-4 * (1.0 - k as f64 / 1000.0),
                0.5 + rng.f64(),
                380.0 + 40.0 * rng.f64()
            ),
        ));
    }
}

/// The NCCL watchdog's line that a surviving rank prints when a peer stops.
fn watchdog(rank: usize, seq: usize) -> String {
    format!(
        "[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600083 milliseconds before timing out."
    )
}

/// torchrun's closing summary, printed by every failed torchrun job.
fn child_failed(job: &Job, rank: usize, exit: &str) -> Vec<String> {
    vec![
        "Traceback (most recent call last):".into(),
        "  File \"/opt/conda/bin/torchrun\", line 8, in <module>".into(),
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ".into(),
        "============================================================".into(),
        "train.py FAILED".into(),
        "Root Cause (first observed failure):".into(),
        "[0]:".into(),
        format!("  host      : {}", job.node_of(rank)),
        format!(
            "  rank      : {rank} (local_rank: {})",
            rank % RANKS_PER_NODE
        ),
        format!("  exitcode  : {exit}"),
    ]
}

/// The log of a run that the hardware of `culprit` failed.
fn hardware_log(rng: &mut Rng, job: &Job, culprit: &str, t: &mut LogTruth) -> Log {
    let prefix = Prefix::draw(rng);
    let mut log = Log::default();
    prelude(rng, job, prefix, &mut log);
    let seq = 1000 + rng.below(90_000);
    let theirs = job.ranks_of(culprit);
    let survivors = (0..job.ranks()).filter(|r| !theirs.contains(r));
    if job.state == "NODE_FAIL" {
        // A dead node prints nothing; its peers wait, then time out.
        if job.nodes.len() > 1 && rng.f64() < 0.7 {
            log.err.extend(survivors.map(|r| watchdog(r, seq)));
        }
        log.err
            .push(format!("srun: error: Node failure on {culprit}"));
        t.hardware_silent += 1;
        return log;
    }
    match rng.pick(&[60.0, 25.0, 15.0]) {
        0 => {
            localizing(rng, job, culprit, prefix, &mut log);
            log.err.extend(survivors.map(|r| watchdog(r, seq)));
            t.hardware_localizing += 1;
        }
        1 => {
            log.err.extend(survivors.map(|r| watchdog(r, seq)));
            if rng.f64() < 0.4 {
                // Hung, not dead: its ranks time out like everyone else's.
                log.err.extend(theirs.clone().map(|r| watchdog(r, seq)));
            }
            t.hardware_collateral += 1;
        }
        _ => t.hardware_silent += 1,
    }
    let first = theirs.start + rng.below(RANKS_PER_NODE);
    log.err.extend(child_failed(job, first, "-7"));
    log
}

/// The line that names the culprit, on its ranks (or with its host name).
fn localizing(rng: &mut Rng, job: &Job, culprit: &str, prefix: Prefix, log: &mut Log) {
    let ranks = job.ranks_of(culprit);
    let rank = ranks.start + rng.below(RANKS_PER_NODE);
    let pid = 20_000 + rng.below(60_000);
    let dev = rank % RANKS_PER_NODE;
    if job.exit == "0:7" {
        log.err.push(format!(
            "srun: error: {culprit}: task {rank}: Bus error (core dumped)"
        ));
        return;
    }
    match rng.below(6) {
        0 | 1 => {
            let error = [
                "CUDA error: uncorrectable ECC error encountered",
                "CUDA error: an illegal memory access was encountered",
                "CUDA error: unspecified launch failure",
                "CUDA error: uncorrectable NVLink error detected during the execution",
            ][rng.below(4)];
            // One rank, or every rank of a node of a multi-node job (a GPU
            // fault can take its node's NVLink peers down with it). On one
            // node, every rank alike is how a program fails, not a GPU.
            let printing: Vec<usize> = if job.nodes.len() > 1 && rng.f64() < 0.4 {
                ranks.collect()
            } else {
                vec![rank]
            };
            for r in printing {
                log.err.push(prefix.line(r, "Traceback (most recent call last):"));
                log.err.push(prefix.line(
                    r,
                    "  File \"/workspace/train.py\", line 311, in train_step",
                ));
                log.err.push(prefix.line(r, "    loss.backward()"));
                log.err.push(prefix.line(r, &format!("RuntimeError: {error}")));
                log.err.push(prefix.line(r, "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."));
            }
        }
        2 | 3 => log.err.push(format!(
            "{culprit}:{pid}:{} [{dev}] NCCL WARN NET/IB : Got completion from peer 10.{}.{}.{}<{}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.3.17 remoteGids::ffff:10.0.5.21 hca mlx5_{}",
            pid + 87,
            rng.below(16),
            rng.below(256),
            1 + rng.below(250),
            40_000 + rng.below(20_000),
            rng.below(4)
        )),
        4 => log.err.push(format!(
            "{culprit}:{pid}:{} [{dev}] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'",
            pid + 12
        )),
        _ => log.err.push(format!(
            "{culprit}:{pid}:{} [{dev}] NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
            pid + 87
        )),
    }
}

/// Exceptions of users' own bugs, with the line Python ends them with.
const EXCEPTIONS: [(&str, f64); 12] = [
    ("KeyError: 'lr_scheduler'", 12.0),
    (
        "ValueError: Expected input batch_size (64) to match target batch_size (32).",
        10.0,
    ),
    (
        "TypeError: forward() got an unexpected keyword argument 'attention_mask'",
        9.0,
    ),
    (
        "AttributeError: 'NoneType' object has no attribute 'shape'",
        10.0,
    ),
    ("ModuleNotFoundError: No module named 'flash_attn'", 9.0),
    (
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/shards/train-00017.bin'",
        10.0,
    ),
    (
        "AssertionError: sequence length 4096 exceeds max_position_embeddings 2048",
        6.0,
    ),
    (
        "IndexError: index 50304 is out of bounds for dimension 0 with size 50257",
        6.0,
    ),
    (
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        4.0,
    ),
    ("NameError: name 'tokenizer' is not defined", 4.0),
    // Users' errors that no signature names: the exit-code model decides.
    (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x4096 and 2048x4096)",
        12.0,
    ),
    (
        "RuntimeError: Error(s) in loading state_dict for GPT: size mismatch for lm_head.weight",
        8.0,
    ),
];

/// The log of a run that failed through its user's fault.
fn user_log(rng: &mut Rng, job: &Job, t: &mut LogTruth) -> Log {
    let prefix = Prefix::draw(rng);
    let mut log = Log::default();
    prelude(rng, job, prefix, &mut log);
    let step = format!("{}.0", job.raw);
    let cancelled = |why: &str| {
        format!(
            "slurmstepd: error: *** JOB {} ON {} CANCELLED AT 2023-11-20T10:14:07{why} ***",
            job.raw, job.nodes[0]
        )
    };
    if job.state.starts_with("CANCELLED") {
        log.err.push(cancelled(""));
        t.user_silent += 1;
        return log;
    }
    if job.state == "TIMEOUT" {
        log.err.push(cancelled(" DUE TO TIME LIMIT"));
        t.user_silent += 1;
        return log;
    }
    let oom_kill = format!(
        "slurmstepd: error: Detected 1 oom_kill event in StepId={step}. Some of the step tasks have been OOM Killed."
    );
    if job.state == "OUT_OF_MEMORY" {
        if rng.f64() < 0.9 {
            log.err.push(oom_kill);
            t.user_oom += 1;
        } else {
            t.user_silent += 1;
        }
        return log;
    }
    match rng.pick(&[85.0, 10.0, 5.0]) {
        0 => {
            let (text, _) = EXCEPTIONS[rng.pick(&EXCEPTIONS.map(|e| e.1))];
            let everyone = rng.f64() < 0.4;
            let printing = if everyone { job.ranks() } else { 1 };
            for r in 0..printing {
                for line in [
                    "Traceback (most recent call last):",
                    "  File \"/workspace/train.py\", line 412, in <module>",
                    "    main(cfg)",
                    "  File \"/workspace/train.py\", line 388, in main",
                    "    trainer.fit(model, loader)",
                    text,
                ] {
                    log.err.push(prefix.line(r, line));
                }
            }
            t.user_traceback += 1;
        }
        1 => {
            if rng.f64() < 0.6 {
                let gpu = rng.below(RANKS_PER_NODE);
                log.err.push(prefix.line(gpu, &format!(
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a total capacity of 79.11 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use."
                )));
            } else {
                log.err.push(oom_kill);
            }
            t.user_oom += 1;
        }
        _ => {
            if job.exit == "127:0" {
                log.err.push(format!(
                    "/var/spool/slurmd/job{}/slurm_script: line 14: torchrun: command not found",
                    job.raw
                ));
            }
            t.user_silent += 1;
        }
    }
    log.err.push(format!(
        "srun: error: {}: task 0: Exited with exit code 1",
        job.nodes[0]
    ));
    log
}

/// The nodes of a generated NodeList: `gpu0007` or `gpu[0003-0006,0511]`.
fn expand(list: &str) -> Vec<String> {
    if list.is_empty() || list == "None assigned" {
        return Vec::new();
    }
    let Some(inner) = list.strip_prefix("gpu[").and_then(|l| l.strip_suffix(']')) else {
        return vec![list.to_string()];
    };
    let mut out = Vec::new();
    for part in inner.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
        out.extend((lo..=hi).map(|i| format!("gpu{i:04}")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_hostlist_expands_in_its_printed_order() {
        assert_eq!(
            expand("gpu[0003-0004,0511]"),
            ["gpu0003", "gpu0004", "gpu0511"]
        );
        assert_eq!(expand("gpu0042"), ["gpu0042"]);
        assert!(expand("None assigned").is_empty());
    }
}
