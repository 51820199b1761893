//! Runs the benchmark suite of `[validate]` on this node: each program as
//! argv under its deadline through the one runner ([`crate::bounded`]), its
//! output capped, then read by its parser. A tool the node lacks is "not
//! run", a deadline or a garbled output is an error naming the line: never
//! a pass.

use crate::bounded::{self, RunError};
use lemonade_config::Benchmark;
use std::time::Duration;
use validate::Kind;

/// The most of a benchmark's stdout (and stderr) kept: the parsers' own cap.
pub const MAX_OUTPUT_BYTES: usize = validate::MAX_INPUT_BYTES;

/// How long a loopback server gets to listen before its client starts.
const SERVER_HEAD_START: Duration = Duration::from_secs(1);

/// What the suite's placeholders stand for on this node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeHardware {
    /// `{gpus}`.
    pub gpus: usize,
    /// RDMA devices (`mlx5_0`), one run each of a `per_hca` benchmark.
    pub hcas: Vec<String>,
}

/// One metric as the suite reports it: the parser's name, with the
/// benchmark's suffix and HCA appended.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteMetric {
    pub benchmark: String,
    pub name: String,
    pub value: f64,
    pub unit: String,
}

/// How one benchmark run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran and its output read whole. `exit_code` other than 0 is a
    /// failure of the node (the tool said so), judged beside the metrics.
    Ran {
        metrics: Vec<SuiteMetric>,
        exit_code: Option<i32>,
    },
    /// Its program is not on this node: unknown, never a pass.
    NotRun(String),
    /// Deadline, garbled or cut output, or a start failure: unknown.
    Error(String),
}

/// One benchmark's run (one per HCA for a `per_hca` benchmark).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRun {
    /// `all_reduce`, `ib_write_bw.mlx5_0`.
    pub name: String,
    pub outcome: Outcome,
}

/// Runs every benchmark of `suite` in order.
pub fn run_suite(suite: &[Benchmark], node: &NodeHardware) -> Vec<BenchRun> {
    let mut runs = Vec::new();
    for bench in suite {
        let kind = match bench.parser.parse::<Kind>() {
            Ok(kind) => kind,
            Err(e) => {
                let why = format!(
                    "[[validate.benchmark]] name = {:?}: parser: {e}",
                    bench.name
                );
                runs.push(BenchRun {
                    name: bench.name.clone(),
                    outcome: Outcome::Error(why),
                });
                continue;
            }
        };
        if !bench.per_hca {
            runs.push(run_one(bench, kind, node, None));
            continue;
        }
        if node.hcas.is_empty() {
            runs.push(BenchRun {
                name: bench.name.clone(),
                outcome: Outcome::NotRun("no RDMA device on this node".into()),
            });
        }
        for hca in &node.hcas {
            runs.push(run_one(bench, kind, node, Some(hca)));
        }
    }
    runs
}

/// `{gpus}` and `{hca}` replaced in each word.
fn expand(argv: &[String], node: &NodeHardware, hca: Option<&str>) -> Vec<String> {
    argv.iter()
        .map(|word| {
            let word = word.replace("{gpus}", &node.gpus.to_string());
            match hca {
                Some(hca) => word.replace("{hca}", hca),
                None => word,
            }
        })
        .collect()
}

fn run_one(bench: &Benchmark, kind: Kind, node: &NodeHardware, hca: Option<&str>) -> BenchRun {
    let name = match hca {
        Some(hca) => format!("{}.{hca}", bench.name),
        None => bench.name.clone(),
    };
    let argv = expand(&bench.argv, node, hca);
    let env: Vec<(String, String)> = bench.env.clone().into_iter().collect();
    let timeout = Duration::from_secs(bench.timeout_s);
    let server = (!bench.server_argv.is_empty()).then(|| {
        let argv = expand(&bench.server_argv, node, hca);
        let env = env.clone();
        let handle =
            std::thread::spawn(move || bounded::run_capped(&argv, &env, timeout, MAX_OUTPUT_BYTES));
        std::thread::sleep(SERVER_HEAD_START);
        handle
    });
    let result = bounded::run_capped(&argv, &env, timeout, MAX_OUTPUT_BYTES);
    if let Some(server) = server {
        // The server ends with its client's test, or at the same deadline.
        let _ = server.join();
    }
    let program = argv.first().cloned().unwrap_or_default();
    let outcome = match result {
        Err(RunError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            Outcome::NotRun(format!("{program}: not found on this node"))
        }
        Err(e) => Outcome::Error(format!("{program}: {e}")),
        Ok(done) if done.truncated => Outcome::Error(format!(
            "{program}: printed over {MAX_OUTPUT_BYTES} bytes; not a {kind} output"
        )),
        Ok(done) => read_output(kind, &done, bench, hca, &name, &program),
    };
    BenchRun { name, outcome }
}

fn read_output(
    kind: Kind,
    done: &bounded::Captured,
    bench: &Benchmark,
    hca: Option<&str>,
    name: &str,
    program: &str,
) -> Outcome {
    let text = String::from_utf8_lossy(&done.stdout);
    let metrics = match validate::parse(kind, &text) {
        Ok(metrics) => metrics,
        Err(e) => {
            let status = match done.code {
                Some(0) => String::new(),
                Some(code) => format!(" (exit {code}: {})", done.stderr_tail),
                None => " (killed by a signal)".to_string(),
            };
            return Outcome::Error(format!("{program}: {kind} output: {e}{status}"));
        }
    };
    let suffix: String = [bench.suffix.as_deref(), hca]
        .into_iter()
        .flatten()
        .map(|s| format!(".{s}"))
        .collect();
    let metrics = metrics
        .metrics
        .into_iter()
        .map(|m| SuiteMetric {
            benchmark: name.to_string(),
            name: format!("{}{suffix}", m.name),
            value: m.value,
            unit: m.unit,
        })
        .collect();
    Outcome::Ran {
        metrics,
        exit_code: done.code,
    }
}
