//! Measuring whole commands: wall time and peak RSS of a child process.
//!
//! The benchmarks run the real release binaries, as a node or the head node
//! would, and report the median and the worst of several runs.

pub mod kernel_log;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One measured run.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub wall: Duration,
    /// Peak resident set size of the child, in bytes.
    pub max_rss: u64,
    pub exit_code: i32,
}

/// Runs `cmd` once and measures it with `wait4`'s rusage.
pub fn measure(cmd: &mut Command) -> Sample {
    let start = Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn benchmark command");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid out-pointers.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(rc, pid, "wait4 failed");
    std::mem::forget(child);
    let exit_code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Sample {
        wall,
        max_rss: usage.ru_maxrss as u64 * 1024,
        exit_code,
    }
}

/// Summary of repeated samples.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub runs: usize,
    pub median: Duration,
    pub worst: Duration,
    pub max_rss: u64,
}

/// Runs `make()`'s command `runs` times (after one warm-up) and summarises.
pub fn repeat(runs: usize, mut make: impl FnMut() -> Command) -> Summary {
    measure(&mut make());
    let mut samples: Vec<Sample> = (0..runs).map(|_| measure(&mut make())).collect();
    samples.sort_by_key(|s| s.wall);
    Summary {
        runs,
        median: samples[samples.len() / 2].wall,
        worst: samples.last().map(|s| s.wall).unwrap_or_default(),
        max_rss: samples.iter().map(|s| s.max_rss).max().unwrap_or(0),
    }
}

/// Prints one figure as the README quotes it.
pub fn report(name: &str, s: &Summary, limit: Option<Duration>) {
    let verdict = match limit {
        Some(l) if s.median <= l => format!("  (limit {:.0} ms: met)", l.as_secs_f64() * 1000.0),
        Some(l) => format!("  (limit {:.0} ms: MISSED)", l.as_secs_f64() * 1000.0),
        None => String::new(),
    };
    println!(
        "{name:<48} median {:>8.2} ms  worst {:>8.2} ms  peak RSS {:>6.1} MB  ({} runs){verdict}",
        s.median.as_secs_f64() * 1000.0,
        s.worst.as_secs_f64() * 1000.0,
        s.max_rss as f64 / 1e6,
        s.runs
    );
}

/// A release binary of the workspace (`cargo build --release` first).
pub fn release_bin(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .join("target")
        });
    let path = target.join("release").join(name);
    assert!(
        path.exists(),
        "{} missing: run `cargo build --release` first",
        path.display()
    );
    path
}

/// CPU time (user + system) of every waited-for child so far: the
/// difference across [`repeat`], divided by its runs plus the warm-up, is
/// the CPU a run costs, which a loaded machine inflates far less than the
/// wall time.
pub fn children_cpu() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage with a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// [`repeat`], also returning the mean CPU time of a run.
pub fn repeat_cpu(runs: usize, make: impl FnMut() -> Command) -> (Summary, Duration) {
    let before = children_cpu();
    let summary = repeat(runs, make);
    let cpu = children_cpu().saturating_sub(before) / (runs as u32 + 1);
    (summary, cpu)
}
