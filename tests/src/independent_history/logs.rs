//! The text of a job's log: what torchrun, NCCL and Slurm print, written
//! from public knowledge of those tools (not from lemon's catalog).

use super::rng::Rng;
use std::fmt::Write;

/// Hardware root causes, after the paper's Table II.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Gpu,
    Dimm,
    Pcie,
    Eud,
    Nic,
    Bios,
    Psu,
    Cpu,
    Optics,
}

/// Table II's shares: GPU 28%, DIMM 20%, PCIe 15%, EUD 10%, NIC 8%, BIOS 8%,
/// PSU 5%, CPU 3%, optics 3%.
pub const CAUSES: [(Cause, f64); 9] = [
    (Cause::Gpu, 28.0),
    (Cause::Dimm, 20.0),
    (Cause::Pcie, 15.0),
    (Cause::Eud, 10.0),
    (Cause::Nic, 8.0),
    (Cause::Bios, 8.0),
    (Cause::Psu, 5.0),
    (Cause::Cpu, 3.0),
    (Cause::Optics, 3.0),
];

impl Cause {
    /// How often a failure of this cause leaves a line in the job's log
    /// that names the node (a rank placed on it, its host prefix).
    pub fn names_node_share(self) -> f64 {
        match self {
            Cause::Gpu => 0.7,
            Cause::Dimm => 0.55,
            Cause::Pcie => 0.5,
            Cause::Eud => 0.45,
            Cause::Nic | Cause::Optics => 0.6,
            Cause::Cpu => 0.3,
            Cause::Bios => 0.1,
            Cause::Psu => 0.0,
        }
    }
}

/// How a run ended, as its log shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    Completed,
    Timeout,
    Cancelled,
    Preempted,
    /// A bug of the user's: kind picks the traceback.
    UserBug(u8),
    /// The step's cgroup killed a task for memory.
    CgroupOom,
    /// A shared filesystem failed under every job (the bad hour).
    Filesystem,
    /// The node's hardware failed the job; `witnessed` when the log names it.
    Hardware {
        cause: Cause,
        node_index: usize,
        witnessed: bool,
    },
    /// The node died: the log stops mid-line.
    NodeDied {
        node_index: usize,
    },
}

/// How a job's lines are prefixed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Launcher {
    /// torchrun: `[rankN]:` before each rank's lines.
    Torchrun,
    /// `srun --label`: `N: ` before each task's lines.
    SrunLabel,
}

pub struct LogJob<'a> {
    pub job_id: i64,
    pub hosts: &'a [String],
    pub start: i64,
    pub end: i64,
    pub user: &'a str,
    pub launcher: Launcher,
    pub ending: Ending,
}

impl LogJob<'_> {
    fn ranks(&self) -> usize {
        self.hosts.len() * 8
    }

    /// The prefix of a rank's own lines (each is followed by a space).
    pub fn prefix(&self, rank: usize) -> String {
        match self.launcher {
            Launcher::Torchrun => format!("[rank{rank}]:"),
            Launcher::SrunLabel => format!("{rank}:"),
        }
    }

    /// NCCL's own prefix: `HOST:PID:TID [LOCALRANK]`.
    fn nccl(&self, rank: usize) -> String {
        let host = &self.hosts[rank / 8];
        let pid = 100_000 + (self.job_id as usize % 50_000) + rank;
        format!("{host}:{pid}:{} [{}]", pid + 37, rank % 8)
    }

    fn stamp(&self, t: i64) -> String {
        clock(t, 'T')
    }
}

/// `YYYY-MM-DDTHH:MM:SS` (UTC) of unix seconds.
pub fn clock(t: i64, sep: char) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02}{sep}{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's algorithm.
fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The whole log of one run.
pub fn render(job: &LogJob, rng: &mut Rng) -> String {
    let mut out = String::with_capacity(3000);
    preamble(job, rng, &mut out);
    progress(job, rng, &mut out);
    ending(job, rng, &mut out);
    out
}

fn preamble(job: &LogJob, rng: &mut Rng, out: &mut String) {
    let _ = writeln!(out, "+ export NCCL_DEBUG=INFO OMP_NUM_THREADS=8");
    if job.launcher == Launcher::Torchrun {
        let _ = writeln!(
            out,
            "W{} torch/distributed/run.py:793] *****************************************\n\
             W{} torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.",
            glog(job.start + 2),
            glog(job.start + 2)
        );
    }
    let shown = job.ranks().min(4);
    for rank in 0..shown {
        let n = job.nccl(rank);
        let _ = writeln!(
            out,
            "{n} NCCL INFO Bootstrap : Using ib0:10.{}.{}.{}<0>",
            1 + rank / 8 % 4,
            rank / 8 / 250,
            10 + rank / 8 % 240
        );
        let _ = writeln!(
            out,
            "{n} NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)"
        );
        let _ = writeln!(
            out,
            "{n} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.1.0.{}<0>",
            10 + rank / 8
        );
    }
    let _ = writeln!(out, "{} NCCL INFO cudaDriverVersion 12080", job.nccl(0));
    let _ = writeln!(
        out,
        "{} NCCL INFO NCCL version 2.21.5+cuda12.4",
        job.nccl(0)
    );
    if rng.chance(0.5) {
        let _ = writeln!(
            out,
            "{} /opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create.",
            job.prefix(0)
        );
    }
    let _ = writeln!(
        out,
        "{} NCCL INFO comm 0x5581c3a0 rank 0 nranks {} cudaDev 0 nvmlDev 0 busId 18000 commId 0x{:x} - Init COMPLETE",
        job.nccl(0),
        job.ranks(),
        job.job_id * 7919
    );
}

/// glog's `MMDD HH:MM:SS.uuuuuu` after the level letter.
fn glog(t: i64) -> String {
    let c = clock(t, ' ');
    format!(
        "{}{} {}.{:06}",
        &c[5..7],
        &c[8..10],
        &c[11..],
        (t % 997) * 1003
    )
}

fn progress(job: &LogJob, rng: &mut Rng, out: &mut String) {
    let steps = rng.range(2, 7);
    let mut loss = 4.0 + rng.f64() * 3.0;
    for i in 1..=steps {
        loss *= 0.8 + 0.1 * rng.f64();
        let _ = writeln!(
            out,
            "{} step {:>6} | loss {loss:.4} | lr 3.00e-04 | grad_norm {:.3} | tokens/s {}",
            job.prefix(0),
            i * 100,
            0.5 + rng.f64(),
            rng.range(80_000, 120_000) * job.hosts.len() as i64
        );
    }
}

fn ending(job: &LogJob, rng: &mut Rng, out: &mut String) {
    match job.ending {
        Ending::Completed => {
            let _ = writeln!(out, "{} training done, saved checkpoint", job.prefix(0));
        }
        Ending::Timeout => slurm_cancel(job, "DUE TO TIME LIMIT", out),
        Ending::Cancelled => slurm_cancel(job, "", out),
        Ending::Preempted => slurm_cancel(job, "DUE TO PREEMPTION", out),
        Ending::UserBug(kind) => user_bug(job, kind, rng, out),
        Ending::CgroupOom => cgroup_oom(job, rng, out),
        Ending::Filesystem => filesystem(job, rng, out),
        Ending::Hardware {
            cause,
            node_index,
            witnessed,
        } => super::hw_logs::hardware(job, cause, node_index, witnessed, rng, out),
        Ending::NodeDied { .. } => {
            // The node's kernel died: nothing was flushed after the progress.
            out.push_str("step    ");
        }
    }
}

fn slurm_cancel(job: &LogJob, why: &str, out: &mut String) {
    let host = &job.hosts[0];
    let at = job.stamp(job.end);
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" {why}")
    };
    let _ = writeln!(
        out,
        "slurmstepd: error: *** JOB {} ON {host} CANCELLED AT {at}{why} ***",
        job.job_id
    );
    let _ = writeln!(
        out,
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."
    );
    let _ = writeln!(
        out,
        "slurmstepd: error: *** STEP {}.0 ON {host} CANCELLED AT {at}{why} ***",
        job.job_id
    );
}

/// A rank's traceback, torchrun's summary naming the host where it ran (which
/// is not the host's fault), and srun's exit line.
fn user_bug(job: &LogJob, kind: u8, rng: &mut Rng, out: &mut String) {
    let rank = rng.below(job.ranks());
    let p = job.prefix(rank);
    let (file, what) = match kind % 6 {
        0 => ("train.py\", line 212, in <module>", format!("FileNotFoundError: [Errno 2] No such file or directory: '/checkpoint/{}/run{}/ckpt_{:06}.pt'", job.user, rng.range(1, 40), rng.range(1, 90) * 100)),
        1 => ("model.py\", line 88, in forward", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 3 has a total capacity of 79.19 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has 77.96 GiB memory in use. Of the allocated memory 74.10 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.".to_string()),
        2 => ("train.py\", line 301, in train_step", format!("ValueError: loss is nan at step {}", rng.range(2, 60) * 100)),
        3 => ("data.py\", line 54, in __getitem__", "KeyError: 'input_ids'".to_string()),
        4 => ("model.py\", line 140, in forward", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4096x1024 and 2048x1024)".to_string()),
        _ => ("train.py\", line 17, in <module>", "ModuleNotFoundError: No module named 'flash_attn'".to_string()),
    };
    let _ = writeln!(out, "{p} Traceback (most recent call last):");
    let _ = writeln!(out, "{p}   File \"/home/{}/proj/{file}", job.user);
    let _ = writeln!(out, "{p} {what}");
    match job.launcher {
        Launcher::Torchrun => torchrun_summary(job, rank, 1, out),
        Launcher::SrunLabel => {
            let _ = writeln!(
                out,
                "srun: error: {}: task {rank}: Exited with exit code 1",
                job.hosts[rank / 8]
            );
        }
    }
}

/// torchrun's ChildFailedError table; it names the host of the first
/// failing rank whatever the cause.
pub fn torchrun_summary(job: &LogJob, rank: usize, code: i32, out: &mut String) {
    let _ = writeln!(out, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n============================================================\ntrain.py FAILED\n------------------------------------------------------------");
    let _ = writeln!(out, "Root Cause (first observed failure):\n[0]:\n  time      : {}\n  host      : {}\n  rank      : {rank} (local_rank: {})\n  exitcode  : {code} (pid: {})\n  error_file: <N/A>\n============================================================", clock(job.end - 3, '_'), job.hosts[rank / 8], rank % 8, 200_000 + rank);
    let _ = writeln!(
        out,
        "srun: error: {}: task 0: Exited with exit code 1",
        job.hosts[rank / 8]
    );
}

fn cgroup_oom(job: &LogJob, rng: &mut Rng, out: &mut String) {
    let node = rng.below(job.hosts.len());
    let _ = writeln!(out, "slurmstepd: error: Detected 1 oom_kill event in StepId={}.0. Some of the step tasks have been OOM Killed.", job.job_id);
    let _ = writeln!(
        out,
        "srun: error: {}: task {}: Out Of Memory",
        job.hosts[node],
        node * 8 + rng.below(8)
    );
}

fn filesystem(job: &LogJob, rng: &mut Rng, out: &mut String) {
    let rank = rng.below(job.ranks());
    let p = job.prefix(rank);
    let what = if rng.chance(0.5) {
        "OSError: [Errno 5] Input/output error: '/datasets/web/shard-00412.tar'"
    } else {
        "OSError: [Errno 116] Stale file handle"
    };
    let _ = writeln!(out, "{p} Traceback (most recent call last):");
    let _ = writeln!(
        out,
        "{p}   File \"/home/{}/proj/data.py\", line 61, in _load",
        job.user
    );
    let _ = writeln!(out, "{p} {what}");
    let _ = writeln!(
        out,
        "srun: error: {}: task {rank}: Exited with exit code 1",
        job.hosts[rank / 8]
    );
}
