//! The tail of a log whose job a node's hardware failed: sometimes a line
//! from the node itself, sometimes only the other ranks timing out.

use super::logs::{torchrun_summary, Cause, Launcher, LogJob};
use super::rng::Rng;
use std::fmt::Write;

pub fn hardware(
    job: &LogJob,
    cause: Cause,
    node: usize,
    witnessed: bool,
    rng: &mut Rng,
    out: &mut String,
) {
    let rank = node * 8 + rng.below(8);
    if witnessed {
        witness(job, cause, rank, out);
    }
    if job.hosts.len() > 1 {
        watchdog_timeouts(job, node, rng, out);
    }
    let host = &job.hosts[node];
    match (cause, job.launcher) {
        (Cause::Dimm, _) if witnessed => {
            let _ = writeln!(
                out,
                "srun: error: {host}: task {rank}: Bus error (core dumped)"
            );
        }
        (Cause::Cpu, _) if witnessed => {
            let _ = writeln!(
                out,
                "srun: error: {host}: task {rank}: Illegal instruction (core dumped)"
            );
        }
        (_, Launcher::Torchrun) => {
            // torchrun names the first rank it saw fail: with a silent node
            // that is often a healthy one whose watchdog fired.
            let first = if witnessed || job.hosts.len() == 1 {
                rank
            } else {
                other_rank(job, node, rng)
            };
            torchrun_summary(job, first, 1, out);
        }
        (_, Launcher::SrunLabel) => {
            let first = if witnessed {
                rank
            } else {
                other_rank(job, node, rng)
            };
            let _ = writeln!(
                out,
                "srun: error: {}: task {first}: Exited with exit code 1",
                job.hosts[first / 8]
            );
        }
    }
}

/// A rank on another node than `node` (the same one for a single-node job).
fn other_rank(job: &LogJob, node: usize, rng: &mut Rng) -> usize {
    let n = job.hosts.len();
    let other = if n == 1 {
        node
    } else {
        (node + 1 + rng.below(n - 1)) % n
    };
    other * 8 + rng.below(8)
}

/// The line the node's own hardware leaves, on a rank placed on it or with
/// its host's NCCL prefix.
fn witness(job: &LogJob, cause: Cause, rank: usize, out: &mut String) {
    let p = job.prefix(rank);
    let nccl = nccl_prefix(job, rank);
    match cause {
        Cause::Gpu => {
            let _ = writeln!(out, "{p} Traceback (most recent call last):\n{p}   File \"/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py\", line 825, in _engine_run_backward\n{p} RuntimeError: CUDA error: uncorrectable ECC error encountered\n{p} CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n{p} For debugging consider passing CUDA_LAUNCH_BLOCKING=1");
        }
        Cause::Eud => {
            let _ = writeln!(out, "{p} RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution\n{p} Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.");
        }
        Cause::Pcie => {
            let _ = writeln!(out, "{nccl} NCCL WARN Cuda failure 'unspecified launch failure'\n{p} RuntimeError: CUDA error: unspecified launch failure");
        }
        Cause::Nic | Cause::Optics => {
            let peer = 10 + (rank / 8 + 1) % job.hosts.len().max(2);
            let _ = writeln!(out, "{nccl} NCCL WARN NET/IB : Got completion from peer 10.1.0.{peer}<{}> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.1.0.{} remoteGids::ffff:10.1.0.{peer}", 40_000 + rank, 10 + rank / 8);
            let _ = writeln!(
                out,
                "{nccl} NCCL INFO transport/net.cc:1298 -> 6\n{nccl} NCCL INFO proxy.cc:694 -> 6"
            );
        }
        Cause::Bios => {
            let _ = writeln!(out, "{nccl} NCCL WARN Cuda failure 'peer access is not supported between these two devices'");
        }
        Cause::Dimm | Cause::Cpu | Cause::Psu => {}
    }
}

fn nccl_prefix(job: &LogJob, rank: usize) -> String {
    let pid = 100_000 + (job.job_id as usize % 50_000) + rank;
    format!("{}:{pid}:{} [{}]", job.hosts[rank / 8], pid + 37, rank % 8)
}

/// Ranks on other nodes give up waiting for the collective the failed node
/// never joined.
fn watchdog_timeouts(job: &LogJob, node: usize, rng: &mut Rng, out: &mut String) {
    let seq = rng.range(1000, 90_000);
    for _ in 0..3 {
        let r = other_rank(job, node, rng);
        // c10's own `[rankN]:` prefix; srun --label puts its task number first.
        let label = match job.launcher {
            Launcher::Torchrun => String::new(),
            Launcher::SrunLabel => format!("{r}: "),
        };
        out.push_str(&label);
        let _ = writeln!(out, "[rank{r}]:[E{} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=67108864, NumelOut=67108864, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.", glog_at(job.end - 5));
    }
}

fn glog_at(t: i64) -> String {
    let c = super::logs::clock(t, ' ');
    format!(
        "{}{} {}.{:06}",
        &c[5..7],
        &c[8..10],
        &c[11..],
        (t % 991) * 1009
    )
}
