//! `lemon watch` (issue 37), the in-job faulty-machine detector:
//!
//! 1. streaming a 2 GB file: peak memory (limit 64 MB above the start);
//! 2. one detection step of a 1,024-node job with 14 metrics after a
//!    10-minute window (limit 20 ms, the median of 30 steps);
//! 3. replaying a 2-hour, 256-node job from its CSV file (limit 5 s);
//! 4. replaying a ~150 MB, 3.3M-row file: that job and a 72-node one (limit 5 s);
//!
//! `cargo run --release -p lemonade-bench --bin watch`

use lemonade_tests::metric_traces::{generate, write_csv, JobTrace, TraceSpec};
use lemonade_watch::{replay, Config, Detector, Sample};
use std::io::{BufReader, Read};
use std::time::{Duration, Instant};

const STEP_LIMIT: Duration = Duration::from_millis(20);
const REPLAY_LIMIT: Duration = Duration::from_secs(5);
const STREAM_MEMORY_LIMIT_MB: f64 = 64.0;

fn main() {
    // First, while the process's peak memory is still its start-up's.
    stream_two_gigabytes();
    one_step();
    let dir = tempfile::Builder::new()
        .prefix("lemonade-bench-watch-")
        .tempdir()
        .expect("temporary directory");
    let big = job(7_001, "5100001", 256, 7200);
    replay_file(
        &dir.path().join("256-nodes.csv"),
        &[&big],
        "2-hour 256-node job",
    );
    let other = job(7_002, "5100002_3", 72, 7200);
    replay_file(
        &dir.path().join("3.3m-rows.csv"),
        &[&big, &other],
        "3.3M-row file",
    );
}

fn job(seed: u64, id: &str, nodes: usize, duration_s: i64) -> JobTrace {
    generate(&TraceSpec {
        seed,
        job: id.to_string(),
        nodes,
        start: 1_760_000_000,
        duration_s,
        fault: None,
    })
}

/// Feeds 10 minutes of a 1,024-node job, then times the sample that closes
/// each of the next 30 steps (that push runs the whole step).
fn one_step() {
    let trace = job(7_000, "5100000", 1024, 1200);
    let mut detector = Detector::new(Config::default());
    let window_end = 1_760_000_000 + 600;
    let mut steps = Vec::new();
    let mut last_step = None;
    for (time, node, metric, value) in trace.samples() {
        let sample = Sample {
            time,
            job: &trace.job,
            node,
            metric,
            value,
        };
        let closes =
            time >= window_end && last_step.is_none_or(|s| time >= s + 10) && time % 10 == 0;
        let started = Instant::now();
        detector.push(sample).expect("rows in time order");
        if closes && steps.len() < 30 {
            steps.push(started.elapsed());
            last_step = Some(time);
        }
    }
    steps.sort();
    let median = steps[steps.len() / 2];
    println!(
        "one detection step, 1,024 nodes x 14 metrics after a 10-minute window: median {:.2} ms, max {:.2} ms of {} steps (limit {} ms: {})",
        median.as_secs_f64() * 1e3,
        steps.last().unwrap().as_secs_f64() * 1e3,
        steps.len(),
        STEP_LIMIT.as_millis(),
        verdict(median <= STEP_LIMIT)
    );
}

fn replay_file(path: &std::path::Path, jobs: &[&JobTrace], what: &str) {
    let owned: Vec<JobTrace> = jobs.iter().map(|j| (*j).clone()).collect();
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create the file"));
    write_csv(&owned, &mut file).expect("write the file");
    drop(file);
    let bytes = std::fs::metadata(path).expect("the file").len();
    let mut best = Duration::MAX;
    let mut outcome = None;
    for _ in 0..3 {
        let started = Instant::now();
        let input = BufReader::new(std::fs::File::open(path).expect("open"));
        outcome = Some(replay(input, &Config::default()).expect("the file replays"));
        best = best.min(started.elapsed());
    }
    let outcome = outcome.unwrap();
    println!(
        "replay of a {what}: {} rows, {:.0} MB, {} calls: best of 3 {:.2} s, {:.1}M rows/s (limit {} s: {})",
        outcome.rows,
        bytes as f64 / 1e6,
        outcome.detections.len(),
        best.as_secs_f64(),
        outcome.rows as f64 / best.as_secs_f64() / 1e6,
        REPLAY_LIMIT.as_secs(),
        verdict(best <= REPLAY_LIMIT)
    );
}

/// 2 GB of rows made on the fly (no disk): 64 nodes of one job, one metric.
struct Rows {
    row: u64,
    left: u64,
    pending: Vec<u8>,
}

impl Read for Rows {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.len() < buf.len() && self.left > 0 {
            let line = if self.row == 0 {
                "time,job,node,metric,value\n".to_string()
            } else {
                let time = 1_760_000_000 + (self.row / 64) as i64 * 10;
                format!(
                    "{time},5100009,n{:04},gpu_util,{}.5\n",
                    self.row % 64,
                    90 + self.row % 7
                )
            };
            self.left = self.left.saturating_sub(line.len() as u64);
            self.pending.extend_from_slice(line.as_bytes());
            self.row += 1;
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

fn stream_two_gigabytes() {
    let before = peak_rss_mb();
    let started = Instant::now();
    let input = Rows {
        row: 0,
        left: 2_000_000_000,
        pending: Vec::new(),
    };
    let outcome = replay(input, &Config::default()).expect("the stream replays");
    let grew = peak_rss_mb() - before;
    println!(
        "streaming a 2 GB file: {} rows in {:.1} s, peak memory grew {grew:.1} MB (limit {STREAM_MEMORY_LIMIT_MB} MB: {})",
        outcome.rows,
        started.elapsed().as_secs_f64(),
        verdict(grew <= STREAM_MEMORY_LIMIT_MB)
    );
}

/// The process's peak resident memory (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}
