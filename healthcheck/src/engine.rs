//! Runs checks in parallel, each on its own thread under its own deadline,
//! and the whole run under a global deadline.
//!
//! A check that misses its deadline becomes an `unknown` finding naming the
//! check, and its thread is abandoned: it may be stuck in the kernel (a hung
//! NFS mount, a wedged driver) and nothing can unstick it, but the run ends on
//! time. Probes that can enter uninterruptible sleep run in a child process
//! (see `checks::mounts`), so that even the process exit is not held up.

use crate::check::{Check, CheckContext, CheckError, CheckOutput, Event};
use crate::finding::{worst, Finding};
use lemonade_config::Severity;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Code of the finding for a check that missed its deadline.
pub const CHECK_TIMEOUT: &str = "CHECK_TIMEOUT";
/// Code of the finding for a check that failed (I/O error, malformed input, panic).
pub const CHECK_FAILED: &str = "CHECK_FAILED";

/// How one check went.
#[derive(Debug, Clone, Serialize)]
pub struct CheckSummary {
    pub name: String,
    pub worst: Severity,
    pub duration_ms: f64,
    pub timed_out: bool,
}

/// What a set of checks produced.
#[derive(Debug, Default)]
pub struct EngineResult {
    pub findings: Vec<Finding>,
    pub checks: Vec<CheckSummary>,
    /// New state per check, for those that gave one.
    pub states: Vec<(String, serde_json::Value)>,
    pub events: Vec<(String, Event)>,
}

/// A check with the context it runs in and the deadline it must meet.
pub struct Job {
    pub check: Arc<dyn Check>,
    pub context: CheckContext,
    pub deadline: Duration,
}

/// What a check's thread sends back: the job's index, its result, its time.
type Done = (usize, Result<CheckOutput, CheckError>, Duration);

/// Runs the jobs in parallel; returns when all finished or their deadlines
/// (capped by `run_deadline`) passed. Results are in the jobs' order.
pub fn run(jobs: Vec<Job>, run_deadline: Duration) -> EngineResult {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Done>();
    let names: Vec<&'static str> = jobs.iter().map(|j| j.check.name()).collect();
    let deadlines: Vec<Instant> = jobs
        .iter()
        .map(|j| start + j.deadline.min(run_deadline))
        .collect();
    for (index, job) in jobs.into_iter().enumerate() {
        spawn(index, job, tx.clone());
    }
    drop(tx);
    let mut results = wait(&rx, &deadlines);
    let mut out = EngineResult::default();
    for (i, name) in names.iter().enumerate() {
        let waited = deadlines[i].saturating_duration_since(start);
        out.add(name, results.remove(&i), waited);
    }
    out
}

/// Runs the job on a thread of its own, which sends what it did on `tx`.
fn spawn(index: usize, job: Job, tx: mpsc::Sender<Done>) {
    let thread_tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("check-{}", job.check.name()))
        .spawn(move || {
            let began = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                job.check.run(&job.context)
            }))
            .unwrap_or_else(|panic| {
                Err(CheckError::Other(format!(
                    "check panicked: {}",
                    panic_text(&panic)
                )))
            });
            // The receiver is gone when the run gave up on us: nothing to do.
            let _ = thread_tx.send((index, result, began.elapsed()));
        });
    if let Err(e) = spawned {
        let _ = tx.send((
            index,
            Err(CheckError::Other(format!("cannot start thread: {e}"))),
            Duration::ZERO,
        ));
    }
}

/// The results that came in before their job's deadline, by job index;
/// returns once every job answered or is late.
fn wait(
    rx: &mpsc::Receiver<Done>,
    deadlines: &[Instant],
) -> HashMap<usize, (Result<CheckOutput, CheckError>, Duration)> {
    let mut results = HashMap::new();
    let mut timed_out = vec![false; deadlines.len()];
    while results.len() + timed_out.iter().filter(|t| **t).count() < deadlines.len() {
        let now = Instant::now();
        for (i, deadline) in deadlines.iter().enumerate() {
            if !results.contains_key(&i) && !timed_out[i] && now >= *deadline {
                timed_out[i] = true;
            }
        }
        let next = deadlines
            .iter()
            .enumerate()
            .filter(|(i, _)| !results.contains_key(i) && !timed_out[*i])
            .map(|(_, d)| *d)
            .min();
        let Some(next) = next else { break };
        match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok((i, result, took)) => {
                if !timed_out[i] {
                    results.insert(i, (result, took));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    results
}

impl EngineResult {
    /// Adds one check's result: its output, its failure as `unknown`, or
    /// (`None`) its missed deadline after `waited`.
    fn add(
        &mut self,
        name: &str,
        result: Option<(Result<CheckOutput, CheckError>, Duration)>,
        waited: Duration,
    ) {
        let (findings, duration, late) = match result {
            Some((Ok(output), took)) => {
                if let Some(state) = output.state {
                    self.states.push((name.to_string(), state));
                }
                self.events
                    .extend(output.events.into_iter().map(|e| (name.to_string(), e)));
                (output.findings, took, false)
            }
            Some((Err(e), took)) => (
                vec![Finding::unknown(name, "node", CHECK_FAILED, e.to_string())],
                took,
                false,
            ),
            None => {
                let message = format!(
                    "check `{name}` did not finish within {:.1} s; its probe was abandoned",
                    waited.as_secs_f64()
                );
                (
                    vec![Finding::unknown(name, "node", CHECK_TIMEOUT, message)],
                    waited,
                    true,
                )
            }
        };
        self.checks.push(CheckSummary {
            name: name.to_string(),
            worst: worst(&findings),
            duration_ms: duration.as_secs_f64() * 1000.0,
            timed_out: late,
        });
        self.findings.extend(findings);
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Profile, SettingsView, Shared, ALL_PROFILES};
    use crate::root::NodeRoot;
    use lemonade_config::Config;

    struct Fake {
        name: &'static str,
        behaviour: fn() -> Result<CheckOutput, CheckError>,
    }

    impl Check for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn summary(&self) -> &'static str {
            "test"
        }
        fn profiles(&self) -> &'static [Profile] {
            ALL_PROFILES
        }
        fn settings(&self, _: &Config) -> SettingsView {
            SettingsView::of(true, None, &())
        }
        fn run(&self, _: &CheckContext) -> Result<CheckOutput, CheckError> {
            (self.behaviour)()
        }
    }

    fn job(
        name: &'static str,
        deadline_ms: u64,
        behaviour: fn() -> Result<CheckOutput, CheckError>,
    ) -> Job {
        Job {
            check: Arc::new(Fake { name, behaviour }),
            context: CheckContext {
                root: Arc::new(NodeRoot::new("/nonexistent")),
                config: Arc::new(Config::default()),
                previous: None,
                now: chrono::Utc::now(),
                profile: Profile::Full,
                job: None,
                shared: Arc::new(Shared::default()),
            },
            deadline: Duration::from_millis(deadline_ms),
        }
    }

    #[test]
    fn a_hung_check_becomes_unknown_and_the_run_ends_on_time() {
        let started = Instant::now();
        let result = run(
            vec![
                job("hangs", 100, || loop {
                    std::thread::park();
                }),
                job("fine", 1000, || {
                    Ok(CheckOutput::findings(vec![Finding::ok("fine", "node")]))
                }),
            ],
            Duration::from_secs(5),
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(result.findings[0].code, CHECK_TIMEOUT);
        assert_eq!(result.findings[0].severity, Severity::Unknown);
        assert!(result.findings[0].message.contains("hangs"));
        assert!(result.checks[0].timed_out);
        assert_eq!(result.findings[1].code, "OK");
    }

    #[test]
    fn the_run_deadline_caps_every_check() {
        let started = Instant::now();
        let result = run(
            vec![job("hangs", 60_000, || loop {
                std::thread::park();
            })],
            Duration::from_millis(150),
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(result.findings[0].code, CHECK_TIMEOUT);
    }

    #[test]
    fn errors_and_panics_become_unknown_not_drain() {
        let result = run(
            vec![
                job("fails", 1000, || {
                    Err(CheckError::malformed("/sys/x/y", "bad value `zz`"))
                }),
                job("panics", 1000, || panic!("boom")),
            ],
            Duration::from_secs(5),
        );
        assert_eq!(result.findings.len(), 2);
        assert!(result
            .findings
            .iter()
            .all(|f| f.severity == Severity::Unknown && f.code == CHECK_FAILED));
        assert!(result.findings[0].message.contains("/sys/x/y"));
        assert!(result.findings[1].message.contains("boom"));
    }
}
