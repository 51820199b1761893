//! Job evidence at ingest (issue 36): classifying 10,000 failed jobs' logs,
//! 256 KiB each, on local disk, must take at most 10 s. Each job's log is
//! read the way `lemon ingest` should read a batch (`joblog::read_tails`:
//! for each file the checked path walk and the tail read in a worker thread
//! with its deadline, eight files at a time) and then classified against the
//! default catalog.
//!
//! The logs are mostly ordinary training output (step lines, NCCL INFO,
//! progress bars, start-up NCCL warnings) with the planted failure near the
//! end: an ECC error on one rank, an InfiniBand error on one host, timeouts
//! from every rank but one, a KeyError traceback, CUDA OOM, or nothing but
//! srun's exit line. Every verdict is checked against what was planted.
//!
//! Three runs with the files in the page cache, then one after evicting them
//! (`posix_fadvise(DONTNEED)` on each file, so nobody else's cache is touched).
//!
//! `cargo run --release -p lemonade-bench --bin joblog_classify`
//! (`LEMONADE_JOBLOG_JOBS=N` for N jobs instead of 10,000.)

use joblog::{classify, read_tails, Catalog, JobLayout, Limits, VerdictKind};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LOG_BYTES: usize = 256 * 1024;
const LIMIT: Duration = Duration::from_secs(10);
const WARM_RUNS: usize = 3;
const NODES: [&str; 2] = ["gpu001", "gpu002"];
const GPUS_PER_NODE: u32 = 8;

fn main() {
    let jobs: usize = std::env::var("LEMONADE_JOBLOG_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::Builder::new()
        .prefix("lemonade-bench-joblog-")
        .tempdir()
        .expect("temporary directory");
    let started = Instant::now();
    let planted: Vec<(PathBuf, VerdictKind)> =
        (0..jobs).map(|i| write_log(dir.path(), i)).collect();
    println!(
        "wrote {jobs} logs of {} KiB in {:.1} s ({:.2} GB)",
        LOG_BYTES / 1024,
        started.elapsed().as_secs_f64(),
        (jobs * LOG_BYTES) as f64 / 1e9
    );
    let layout = JobLayout::new(NODES.iter().map(|n| n.to_string()).collect(), GPUS_PER_NODE);
    let catalog = Catalog::defaults();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let logs: Vec<(PathBuf, u32)> = planted.iter().map(|(p, _)| (p.clone(), uid)).collect();
    let mut walls = Vec::new();
    for run in 1..=WARM_RUNS {
        let (wall, cpu) = classify_all(&planted, &logs, &layout, &catalog);
        println!(
            "  run {run} (page cache): {:.2} s, CPU {:.2} s",
            wall.as_secs_f64(),
            cpu.as_secs_f64()
        );
        walls.push(wall);
    }
    evict(&planted);
    let (cold, cpu) = classify_all(&planted, &logs, &layout, &catalog);
    println!(
        "  run {} (evicted from the page cache): {:.2} s, CPU {:.2} s",
        WARM_RUNS + 1,
        cold.as_secs_f64(),
        cpu.as_secs_f64()
    );
    walls.sort();
    let median = walls[walls.len() / 2];
    for (name, wall) in [("page cache, median", median), ("evicted", cold)] {
        println!(
            "{:<48} {:>6.2} s for {jobs} jobs, {:>6.1} µs/job  (limit {} s: {})",
            format!("joblog classify ({name})"),
            wall.as_secs_f64(),
            wall.as_secs_f64() * 1e6 / jobs as f64,
            LIMIT.as_secs(),
            if wall <= LIMIT { "met" } else { "MISSED" }
        );
    }
}

/// Reads and classifies every job's log, as ingest should: `read_tails`,
/// a few files at a time. Panics on a verdict other than the planted one,
/// so that the figure is for the real work. Returns the wall and CPU time
/// (all threads).
fn classify_all(
    planted: &[(PathBuf, VerdictKind)],
    logs: &[(PathBuf, u32)],
    layout: &JobLayout,
    catalog: &Catalog,
) -> (Duration, Duration) {
    let cpu_before = cpu_time();
    let started = Instant::now();
    read_tails(logs, &Limits::default(), |i, tail| {
        let path = planted[i].0.display();
        let tail = tail.unwrap_or_else(|skip| panic!("{path}: skipped, {skip}"));
        let verdict = classify(layout, &[tail], catalog);
        assert_eq!(verdict.kind, planted[i].1, "{path}: {:?}", verdict.evidence);
    });
    (started.elapsed(), cpu_time() - cpu_before)
}

/// This process's user and system time so far, all threads.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn evict(planted: &[(PathBuf, VerdictKind)]) {
    for (path, _) in planted {
        let f = std::fs::File::open(path).expect("open log");
        f.sync_all().expect("sync log");
        // SAFETY: a valid descriptor; advice only.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// Writes job `i`'s log, exactly [`LOG_BYTES`] long, and returns the verdict planted in it.
fn write_log(dir: &Path, i: usize) -> (PathBuf, VerdictKind) {
    let mut rng = Rng(i as u64 * 2_654_435_761 + 1);
    let (ending, expected) = failure(i, &mut rng);
    let mut log = start_up();
    let body_end = LOG_BYTES - ending.len();
    let mut step = 0;
    while log.len() < body_end {
        let line = ordinary_line(&mut rng, step);
        step += 1;
        if log.len() + line.len() > body_end {
            log.extend(std::iter::repeat_n(b'=', body_end - log.len() - 1));
            log.push(b'\n');
            break;
        }
        log.extend_from_slice(line.as_bytes());
    }
    log.extend_from_slice(ending.as_bytes());
    assert_eq!(log.len(), LOG_BYTES);
    let path = dir.join(format!("slurm-{}.out", 100_000 + i));
    let mut f = std::fs::File::create(&path).expect("create log");
    f.write_all(&log).expect("write log");
    (path, expected)
}

fn start_up() -> Vec<u8> {
    let mut s = String::new();
    for r in 0..GPUS_PER_NODE {
        s += &format!("gpu001:4242:4242 [{r}] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory\n");
        s += &format!("gpu001:4242:4242 [{r}] NCCL INFO NCCL version 2.21.5+cuda12.4\n");
    }
    s.into_bytes()
}

fn ordinary_line(rng: &mut Rng, step: u64) -> String {
    let rank = rng.below(16);
    match rng.below(10) {
        0 => format!(
            "gpu00{}:4242:4300 [{}] NCCL INFO Channel {:02}/32 : {} -> {} via P2P/CUMEM/read\n",
            1 + rank / 8,
            rank % 8,
            rng.below(32),
            rank,
            (rank + 1) % 16
        ),
        1 => format!(
            "Epoch 3:  {:>2}%|#####     | {}/10000 [12:34<15:21,  5.97it/s, loss={}.{:03}]\n",
            step % 100,
            step % 10_000,
            rng.below(4),
            rng.below(1000)
        ),
        _ => format!(
            "[rank{rank}]: 2026-11-24 10:{:02}:{:02},{:03} - INFO - step {step}/100000 | loss {}.{:04} | lr 3.000e-04 | grad_norm 0.{:03} | tokens/s {} | mem 61.2GiB\n",
            rng.below(60),
            rng.below(60),
            rng.below(1000),
            rng.below(4),
            rng.below(10_000),
            rng.below(1000),
            400_000 + rng.below(20_000)
        ),
    }
}

/// The failure planted at the end of job `i`'s log.
fn failure(i: usize, rng: &mut Rng) -> (String, VerdictKind) {
    let rank = rng.below(16) as u32;
    let node = |r: u32| VerdictKind::HardwareOn(NODES[(r / GPUS_PER_NODE) as usize].to_string());
    let timeouts = |except: u32| -> String {
        (0..16)
            .filter(|&r| r != except)
            .map(|r| format!("[rank{r}]:[E1124 10:00:00.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n"))
            .collect()
    };
    let exit = "srun: error: gpu001: tasks 0-7: Exited with exit code 1\nsrun: error: gpu002: tasks 8-15: Exited with exit code 1\n";
    match i % 6 {
        0 => (
            format!("[rank{rank}]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n[rank{rank}]: CUDA kernel errors might be asynchronously reported at some other API call\n{}{exit}", timeouts(rank)),
            node(rank),
        ),
        1 => (
            format!("gpu002:4242:4300 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<54321> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n{exit}"),
            node(8),
        ),
        2 => (format!("{}{exit}", timeouts(rank)), node(rank)),
        3 => (
            format!("[rank{rank}]: Traceback (most recent call last):\n[rank{rank}]:   File \"train.py\", line 120, in <module>\n[rank{rank}]:     batch = collate(samples)\n[rank{rank}]: KeyError: 'labels'\n{exit}"),
            VerdictKind::User,
        ),
        4 => (
            format!("[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {} has a total capacity of 79.10 GiB\n{exit}", rank % 8),
            VerdictKind::User,
        ),
        _ => (exit.to_string(), VerdictKind::Unknown),
    }
}

/// A small deterministic generator (xorshift64): the same logs every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
