//! `lemon watch --live` (issue 33): the CPU of one poll over 100 running
//! jobs of 64 nodes each (6,400 nodes), with the default 11 Prometheus
//! metrics, samples every 10 s and a poll every 30 s (limit 1 s of CPU).
//!
//! A poll here is what lemon itself does: parse squeue's listing, parse
//! each metric's `query_range` JSON answer (rendered beforehand, as the
//! server would send it), and feed every job's new samples to its detector.
//! The HTTP round trips wait on the server and cost lemon no CPU; nothing
//! is called, so nothing is drained.
//!
//! `cargo run --release -p lemonade-bench --bin watch_live`

use lemon::watch::live::Watcher;
use lemon::watch::prometheus::parse_matrix;
use lemon::watch::{OwnedSample, SampleSource, SourceError};
use lemonade_config::{PrometheusSettings, WatchSettings};
use lemonade_slurm::squeue::{parse_running, RunningJob};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

const JOBS: usize = 100;
const NODES: usize = 64;
const POLL_S: i64 = 30;
const STEP_S: i64 = 10;
const START: i64 = 1_760_000_000;
const CPU_LIMIT: Duration = Duration::from_secs(1);
/// Polls before the measured ones: past the detectors' 300 s warm-up.
const WARM_POLLS: i64 = 12;
const MEASURED_POLLS: i64 = 10;

/// The answers of one poll, parsed in `prepare` as the Prometheus source does.
struct Answers {
    settings: PrometheusSettings,
    texts: Vec<String>,
    by_node: RefCell<HashMap<String, Vec<OwnedSample>>>,
}

impl SampleSource for Answers {
    fn prepare(&self, _jobs: &[RunningJob], _since: i64, _now: i64) -> Result<(), SourceError> {
        let mut samples = Vec::new();
        for (m, text) in self.settings.metrics.iter().zip(&self.texts) {
            parse_matrix(text, m, &self.settings, &mut samples).expect("well-formed answer");
        }
        let mut by_node: HashMap<String, Vec<OwnedSample>> = HashMap::new();
        for s in samples {
            by_node.entry(s.node.clone()).or_default().push(s);
        }
        self.by_node.replace(by_node);
        Ok(())
    }

    fn recent(&self, job: &RunningJob, since: i64) -> Result<Vec<OwnedSample>, SourceError> {
        let by_node = self.by_node.borrow();
        Ok(job
            .nodes
            .iter()
            .filter_map(|n| by_node.get(n))
            .flatten()
            .filter(|s| s.time > since)
            .cloned()
            .collect())
    }
}

/// One metric's `query_range` answer for every node over `(now - 30, now]`.
fn answer(metric: usize, now: i64, settings: &PrometheusSettings) -> String {
    let label = &settings.metrics[metric].label;
    let mut text = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for node in 0..JOBS * NODES {
        if node > 0 {
            text.push(',');
        }
        let _ = write!(
            text,
            r#"{{"metric":{{"{label}":"gpu{node:04}:9400"}},"values":["#
        );
        for (i, t) in (now - POLL_S + STEP_S..=now)
            .step_by(STEP_S as usize)
            .enumerate()
        {
            let noise = ((node * 31 + metric * 7 + t as usize) % 13) as f64 * 0.1;
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(text, r#"{sep}[{t},"{}"]"#, 90.0 + noise);
        }
        text.push_str("]}");
    }
    text + "]}}"
}

fn squeue_text() -> String {
    (0..JOBS)
        .map(|j| {
            let first = j * NODES;
            format!(
                "{}|{NODES}|gpu[{first:04}-{:04}]\n",
                5_000_000 + j,
                first + NODES - 1
            )
        })
        .collect()
}

/// CPU time of this thread so far.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for the calling thread's clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let mut settings = WatchSettings::default();
    settings.service.lookback_s = POLL_S;
    let prometheus = PrometheusSettings::default();
    let mut watcher = Watcher::new(settings);
    let squeue = squeue_text();
    let mut cpu = Vec::new();
    let mut samples = 0;
    for poll in 1..=WARM_POLLS + MEASURED_POLLS {
        let now = START + poll * POLL_S;
        let source = Answers {
            texts: (0..prometheus.metrics.len())
                .map(|m| answer(m, now, &prometheus))
                .collect(),
            settings: prometheus.clone(),
            by_node: RefCell::new(HashMap::new()),
        };
        let before = thread_cpu();
        let jobs = parse_running(&squeue).jobs;
        let outcome = watcher.poll(&jobs, &source, now).expect("in-memory source");
        let spent = thread_cpu() - before;
        assert_eq!(outcome.jobs, JOBS);
        assert!(
            outcome.called.is_empty(),
            "healthy nodes called: {:?}",
            outcome.called
        );
        if poll > WARM_POLLS {
            cpu.push(spent);
            samples = outcome.samples;
        }
    }
    cpu.sort();
    let median = cpu[cpu.len() / 2];
    let worst = *cpu.last().unwrap();
    let verdict = if worst <= CPU_LIMIT { "met" } else { "MISSED" };
    println!(
        "poll of {JOBS} jobs x {NODES} nodes ({samples} samples)   median {:.0} ms CPU  worst {:.0} ms CPU  (limit {} ms: {verdict})",
        median.as_secs_f64() * 1000.0,
        worst.as_secs_f64() * 1000.0,
        CPU_LIMIT.as_millis()
    );
}
