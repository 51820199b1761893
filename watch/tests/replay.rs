//! `replay` and the replay binary: what `lemon watch --replay` promises
//! (prefix replays, the JSON keys, bad input named by line, nothing half
//! written, streaming).

use lemonade_tests::metric_traces::{generate, write_csv, FaultKind, JobTrace, TraceSpec};
use lemonade_watch::{replay, Config, InputError, ReplayError};
use std::io::Read;
use std::process::Command;

fn traces() -> Vec<JobTrace> {
    let spec =
        |seed: u64, job: &str, nodes: usize, fault: Option<FaultKind>, start: i64| TraceSpec {
            seed,
            job: job.to_string(),
            nodes,
            start,
            duration_s: 2400,
            fault,
        };
    let t0 = 1_760_000_000;
    vec![
        generate(&spec(2_000_001, "4419021_7", 16, Some(FaultKind::Ecc), t0)),
        generate(&spec(
            2_000_002,
            "4419022",
            24,
            Some(FaultKind::NvlinkError),
            t0 + 300,
        )),
        generate(&spec(2_000_003, "4419023", 8, None, t0 + 900)),
    ]
}

fn csv_text(traces: &[JobTrace]) -> String {
    let mut out = Vec::new();
    write_csv(traces, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn run(text: &str) -> Result<lemonade_watch::ReplayOutcome, ReplayError> {
    replay(text.as_bytes(), &Config::default())
}

#[test]
fn a_prefix_replay_makes_the_same_calls_up_to_the_prefixs_end() {
    let text = csv_text(&traces());
    let full = run(&text).unwrap();
    assert!(full.detections.len() >= 2, "{:?}", full.detections);
    assert!(
        full.detections.iter().any(|d| d.job == "4419021_7"),
        "array job ids are kept as written"
    );
    let lines: Vec<&str> = text.lines().collect();
    for cut in [
        lines.len() / 5,
        lines.len() / 2,
        lines.len() * 3 / 4,
        lines.len() - 1,
    ] {
        let prefix = lines[..cut].join("\n") + "\n";
        let end: i64 = lines[cut - 1].split(',').next().unwrap().parse().unwrap();
        let partial = run(&prefix).unwrap();
        let expected: Vec<_> = full
            .detections
            .iter()
            .filter(|d| d.detected_at <= end)
            .cloned()
            .collect();
        assert_eq!(
            partial.detections, expected,
            "prefix of {cut} lines, ending at {end}"
        );
    }
}

#[test]
fn a_nan_or_infinite_value_is_skipped_and_counted() {
    let text = "time,job,node,metric,value\n10,1,a,gpu_util,NaN\n11,1,b,gpu_util,inf\n12,1,c,gpu_util,-inf\n13,1,d,gpu_util,90\n";
    let outcome = run(text).unwrap();
    assert_eq!((outcome.rows, outcome.counts.non_finite), (4, 3));
}

fn error_of(text: &str) -> String {
    run(text).expect_err("bad input").to_string()
}

#[test]
fn bad_rows_are_errors_that_name_their_line() {
    let head = "time,job,node,metric,value\n10,1,a,gpu_util,90\n";
    let cases = [
        ("20,1,a,gpu_util\n", "line 3: malformed row: 4 fields"),
        ("5,1,a,gpu_util,90\n", "line 3: time 5 is before 10"),
        (
            "20,1,a,gpu_util,ninety\n",
            "line 3: value `ninety` is not a number",
        ),
        (
            "20.5,1,a,gpu_util,90\n",
            "line 3: time `20.5` is not whole unix seconds",
        ),
        ("20,,a,gpu_util,90\n", "line 3: malformed row: job is empty"),
    ];
    for (row, message) in cases {
        let e = error_of(&format!("{head}{row}"));
        assert!(e.contains(message), "{row:?}: {e}");
    }
    assert!(error_of("when,job,node,metric,value\n").contains("line 1: the header"));
}

#[test]
fn a_line_without_end_is_an_error_not_a_memory_hog() {
    let text = format!(
        "time,job,node,metric,value\n10,1,a,gpu_util,{}\n",
        "9".repeat(200_000)
    );
    assert!(matches!(
        run(&text),
        Err(ReplayError::Input(InputError::LineTooLong { line: 2 }))
    ));
}

/// An endless file of well-formed rows with a time going backwards at one line.
struct Endless {
    row: u64,
    bad_at: u64,
    pending: Vec<u8>,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.len() < buf.len() {
            let time = if self.row == self.bad_at {
                0
            } else {
                1_760_000_000 + self.row as i64 / 64
            };
            let line = if self.row == 0 {
                "time,job,node,metric,value\n".to_string()
            } else {
                format!("{time},9,n{:02},gpu_util,95.5\n", self.row % 64)
            };
            self.pending.extend_from_slice(line.as_bytes());
            self.row += 1;
        }
        let n = buf.len();
        buf.copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

#[test]
fn a_file_larger_than_memory_is_streamed_row_by_row() {
    // Endless input: only a reader that streams ever reaches line 2,000,000.
    let input = Endless {
        row: 0,
        bad_at: 1_999_999,
        pending: Vec::new(),
    };
    let e = replay(input, &Config::default()).expect_err("time goes backwards");
    assert!(
        e.to_string().starts_with("line 2000000: time 0 is before"),
        "{e}"
    );
}

fn binary(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lemonade-watch-replay"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_binary_prints_only_the_json_array_with_the_issues_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.csv");
    std::fs::write(&file, csv_text(&traces())).unwrap();
    let out = binary(&[file.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is JSON only");
    let calls = value.as_array().expect("an array");
    assert!(!calls.is_empty());
    for call in calls {
        let mut keys: Vec<&str> = call
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            ["detected_at", "job", "metrics", "node", "score", "tier"]
        );
        assert!(call["job"].is_string() && call["detected_at"].is_i64());
    }
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "time,job,node,metric,value\n").unwrap();
    let out = binary(&[empty.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

#[test]
fn the_binary_writes_nothing_to_stdout_when_a_row_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.csv");
    let mut text = csv_text(&traces());
    text.push_str("1,4419021_7,x,gpu_util,1\n");
    std::fs::write(&file, &text).unwrap();
    let out = binary(&[file.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "half-written: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines = text.lines().count();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("line {lines}:")));
}
