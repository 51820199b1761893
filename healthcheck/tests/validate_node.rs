//! `healthcheck validate` on a node (issue 31): the suite runner with fake
//! benchmarks that print real outputs (the parser fixtures of
//! `validate/tests/fixtures`), the judge against a criteria file and the
//! floors, and the verdict's state changes through a fake `sinfo` and
//! `scontrol` that log what they are asked.

use healthcheck::root::NodeRoot;
use healthcheck::validate::act::act;
use healthcheck::validate::judge::{judge, load_criteria, Criteria, Judgement, Verdict};
use healthcheck::validate::run::{run, Request};
use healthcheck::validate::suite::{run_suite, NodeHardware, Outcome};
use lemonade_config::{Benchmark, Config, FloorRule, ValidateSettings};
use lemonade_slurm::command::SlurmCommands;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use validate::criteria_file::{self, Band, CriteriaFile, Direction, FILE_NAME};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../validate/tests/fixtures");
const NCCL: &str = "nccl_tests/all_reduce_h100_16gpus.txt";
const NCCL_WRONG: &str = "nccl_tests/all_reduce_gh200_wrong.txt";
const PERFTEST: &str = "perftest/ib_write_bw_gbits_8bytes.txt";
const DCGMI_FAIL: &str = "dcgmi_diag/handmade_r2_gpu0_fail.json";
/// The `# Avg bus bandwidth` of [`NCCL`].
const NCCL_AVG_BUSBW: f64 = 70.742;
const NOW: i64 = 1_800_000_000;

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// An executable `/bin/sh` script in `dir`; its path.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A benchmark that prints a fixture and exits `code`.
fn printing(dir: &Path, name: &str, parser: &str, fixture_name: &str, code: i32) -> Benchmark {
    let body = format!("cat '{}'\nexit {code}", fixture(fixture_name));
    bench(name, vec![script(dir, name, &body)], parser, 10)
}

fn bench(name: &str, argv: Vec<String>, parser: &str, timeout_s: u64) -> Benchmark {
    Benchmark {
        name: name.into(),
        argv,
        parser: parser.into(),
        timeout_s,
        ..Benchmark::default()
    }
}

fn node() -> NodeHardware {
    NodeHardware {
        gpus: 8,
        hcas: vec!["mlx5_0".into(), "mlx5_1".into()],
    }
}

#[test]
fn a_missing_tool_a_timeout_and_a_garbled_output_are_unknown_never_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let cut = std::fs::read_to_string(fixture(NCCL)).unwrap();
    let cut = &cut[..cut.find("# Avg bus").unwrap()];
    std::fs::write(dir.path().join("cut.txt"), cut.replace("  8  ", "  x8 ")).unwrap();
    let suite = vec![
        printing(dir.path(), "all_reduce", "nccl-tests", NCCL, 0),
        bench(
            "gpu_burn",
            vec!["gpu_burn_not_installed_here".into(), "60".into()],
            "gpu-burn",
            10,
        ),
        bench(
            "hang",
            vec![script(dir.path(), "hang", "sleep 30")],
            "nvbandwidth",
            1,
        ),
        bench(
            "garbled",
            vec![script(
                dir.path(),
                "garbled",
                &format!("cat '{}/cut.txt'", dir.path().display()),
            )],
            "nccl-tests",
            10,
        ),
    ];
    let started = std::time::Instant::now();
    let runs = run_suite(&suite, &node());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the deadline held"
    );
    let Outcome::Ran { metrics, exit_code } = &runs[0].outcome else {
        panic!("{:?}", runs[0]);
    };
    assert_eq!(*exit_code, Some(0));
    let avg = metrics.iter().find(|m| m.name == "avg_busbw").unwrap();
    assert_eq!((avg.value, avg.unit.as_str()), (NCCL_AVG_BUSBW, "GB/s"));
    assert!(matches!(&runs[1].outcome, Outcome::NotRun(why) if why.contains("not found")));
    assert!(matches!(&runs[2].outcome, Outcome::Error(why) if why.contains("deadline")));
    let Outcome::Error(why) = &runs[3].outcome else {
        panic!("{:?}", runs[3]);
    };
    assert!(why.contains("nccl-tests output: line "), "{why}");

    let judged = judge(
        &runs,
        "H100x8",
        &ValidateSettings::default(),
        &Criteria::default(),
    );
    assert_eq!(judged.verdict, Verdict::Unknown);
    assert_eq!(judged.verdict.exit_code(), 3);
    assert!(judged.failing.is_empty());
    let notes = judged.notes.join("\n");
    assert!(
        notes.contains("gpu_burn: NOT RUN: gpu_burn_not_installed_here: not found"),
        "{notes}"
    );
    assert!(notes.contains("hang: ERROR"), "{notes}");
}

#[test]
fn a_per_hca_benchmark_runs_once_per_device_beside_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = script(
        dir.path(),
        "server",
        &format!("echo \"$@\" >> '{}'", log.display()),
    );
    let client = format!("cat '{}'", fixture(PERFTEST));
    let perftest = Benchmark {
        per_hca: true,
        server_argv: vec![server, "-d".into(), "{hca}".into()],
        ..bench(
            "ib_write_bw",
            vec![script(dir.path(), "client", &client)],
            "perftest",
            10,
        )
    };
    let runs = run_suite(&[perftest], &node());
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["ib_write_bw.mlx5_0", "ib_write_bw.mlx5_1"]);
    let Outcome::Ran { metrics, .. } = &runs[1].outcome else {
        panic!("{:?}", runs[1]);
    };
    assert!(
        metrics.iter().any(|m| m.name == "bw_average.8.mlx5_1"),
        "{metrics:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "-d mlx5_0\n-d mlx5_1\n"
    );
}

fn criteria(dir: &Path, generated_at: i64, bound: f64) -> PathBuf {
    let file = CriteriaFile {
        generated_at,
        bands: vec![Band {
            sku: "H100x8".into(),
            metric: "avg_busbw".into(),
            direction: Direction::HigherIsBetter,
            bound,
            detail: "median of 57 nodes".into(),
        }],
    };
    criteria_file::write(&dir.join(FILE_NAME), &file).unwrap();
    dir.to_path_buf()
}

#[test]
fn a_learned_band_fails_a_slow_node_and_a_stale_file_leaves_the_floors() {
    let dir = tempfile::tempdir().unwrap();
    let runs = run_suite(
        &[printing(dir.path(), "all_reduce", "nccl-tests", NCCL, 0)],
        &node(),
    );
    let spool = criteria(dir.path(), NOW - 3600, 75.0);
    let settings = ValidateSettings::default();
    let fresh = load_criteria(Some(&spool), NOW, 48.0);
    let judged = judge(&runs, "H100x8", &settings, &fresh);
    assert_eq!(judged.verdict, Verdict::Fail);
    assert_eq!(judged.failing, ["avg_busbw 70.742<75 GB/s (learned)"]);
    assert_eq!(judged.criteria, format!("learned {}", NOW - 3600));
    // Another SKU has no band: the floors judge, and pass.
    let other = judge(&runs, "A100x8", &settings, &fresh);
    assert_eq!(
        (other.verdict, other.criteria.as_str()),
        (Verdict::Pass, "static floors")
    );

    let stale = load_criteria(Some(&spool), NOW + 72 * 3600, 48.0);
    assert!(stale.learned.is_none());
    assert!(
        stale.notes[0].contains("over criteria_max_age_hours = 48; ignored"),
        "{:?}",
        stale.notes
    );
    let floors = ValidateSettings {
        floor: vec![FloorRule {
            metric: "avg_busbw".into(),
            sku: Some("H100x8".into()),
            min: Some(80.0),
            max: None,
        }],
        ..ValidateSettings::default()
    };
    let judged = judge(&runs, "H100x8", &floors, &stale);
    assert_eq!(judged.failing, ["avg_busbw 70.742<80 GB/s (floor)"]);
    assert_eq!(judged.criteria, "static floors");
}

#[test]
fn wrong_results_and_a_tool_that_exits_non_zero_fail_whatever_the_criteria() {
    let dir = tempfile::tempdir().unwrap();
    let suite = [
        printing(dir.path(), "all_reduce", "nccl-tests", NCCL_WRONG, 0),
        printing(dir.path(), "dcgmi_diag", "dcgmi-diag", DCGMI_FAIL, 1),
    ];
    let runs = run_suite(&suite, &node());
    let judged = judge(
        &runs,
        "GH200x1",
        &ValidateSettings::default(),
        &Criteria::default(),
    );
    assert_eq!(judged.verdict, Verdict::Fail);
    let failing = judged.failing.join("\n");
    assert!(
        failing.contains("wrong_total ") && failing.contains("(must be 0)"),
        "{failing}"
    );
    assert!(failing.contains("tests_failed 3 (must be 0)"), "{failing}");
    assert!(failing.ends_with("dcgmi_diag exit 1"), "{failing}");
}

/// A fake Slurm: `sinfo` prints `<dir>/state`; `scontrol` appends its
/// arguments to `<dir>/scontrol.log`, and `-o show reservation` lists the
/// node's validation reservation when `<dir>/reservation` exists (as Slurm
/// 22.05 prints it).
fn fake_slurm(dir: &Path, state: &str) -> SlurmCommands {
    std::fs::write(dir.join("state"), format!("{state}\n")).unwrap();
    let d = dir.display();
    script(dir, "sinfo", &format!("cat '{d}/state'"));
    let scontrol = format!(
        "echo \"$@\" >> '{d}/scontrol.log'\n\
         if [ \"$2\" = show ]; then\n\
           [ -e '{d}/reservation' ] || {{ echo 'No reservations in the system'; exit 0; }}\n\
           echo 'ReservationName=lemonade_validate_node1 StartTime=2026-01-01T00:00:00 Nodes=node1'\n\
         fi"
    );
    script(dir, "scontrol", &scontrol);
    SlurmCommands::new(dir, None, Duration::from_secs(5))
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("scontrol.log")).unwrap_or_default()
}

fn failed(lines: &[&str]) -> Judgement {
    Judgement {
        verdict: Verdict::Fail,
        failing: lines.iter().map(|l| l.to_string()).collect(),
        criteria: "static floors".into(),
        notes: Vec::new(),
    }
}

#[test]
fn a_failed_validation_drains_with_its_first_failure_then_deletes_the_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = fake_slurm(dir.path(), "node1|idle|none|root|2026-01-01T00:00:00");
    std::fs::write(dir.path().join("reservation"), "").unwrap();
    let judged = failed(&[
        "avg_busbw 312<371 GB/s (learned)",
        "gpus_faulty 1 (must be 0)",
    ]);

    let shown = act(&cmds, "node1", &judged, true);
    let calls = log(dir.path());
    assert!(
        !calls.contains("update") && !calls.contains("delete"),
        "dry run: {calls}"
    );
    let said = shown.messages.join("\n");
    assert!(
        said.contains("dry-run: ") && said.contains("'Reason=hc: VALIDATE avg_busbw 312<371 GB/s"),
        "{said}"
    );

    let done = act(&cmds, "node1", &judged, false);
    let calls = log(dir.path());
    let drain = calls.find("update NodeName=node1 State=DRAIN Reason=hc: VALIDATE avg_busbw 312<371 GB/s (learned); +1 more");
    let delete = calls.find("delete ReservationName=lemonade_validate_node1");
    assert!(
        drain.is_some() && delete.is_some() && drain < delete,
        "{calls}"
    );
    let actions: Vec<&str> = done.changes.iter().map(|c| c.action.as_str()).collect();
    assert_eq!(actions, ["drain", "unreserve"]);
    assert_eq!(done.changes[0].causes[0].entity, "avg_busbw");
}

#[test]
fn a_node_out_for_another_reason_is_left_alone_and_a_pass_resumes_only_our_validation_drain() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = fake_slurm(
        dir.path(),
        "node1|drained|hc: XID_79 gpu3|root|2026-01-01T00:00:00",
    );
    let skipped = act(
        &cmds,
        "node1",
        &failed(&["avg_busbw 1<2 GB/s (floor)"]),
        false,
    );
    assert!(!log(dir.path()).contains("update"), "{}", log(dir.path()));
    assert!(skipped.messages[0].contains("not a validation reason of ours"));

    let pass = Judgement {
        verdict: Verdict::Pass,
        ..failed(&[])
    };
    for reason in ["hc: XID_79 gpu3", "maintenance by bob", "none"] {
        let state = format!("node1|drained|{reason}|root|2026-01-01T00:00:00");
        let cmds = fake_slurm(dir.path(), &state);
        act(&cmds, "node1", &pass, false);
    }
    assert!(
        !log(dir.path()).contains("State=RESUME"),
        "{}",
        log(dir.path())
    );
    let state = "node1|drained|hc: VALIDATE avg_busbw 1<2 GB/s (floor)|root|2026-01-01T00:00:00";
    let cmds = fake_slurm(dir.path(), state);
    let resumed = act(&cmds, "node1", &pass, false);
    assert!(log(dir.path()).contains("update NodeName=node1 State=RESUME"));
    assert_eq!(resumed.changes[0].action, "resume");
}

#[test]
fn a_whole_run_records_its_metrics_and_exports_a_validation_record() {
    let dir = tempfile::tempdir().unwrap();
    let slurm_dir = dir.path().join("slurm");
    std::fs::create_dir(&slurm_dir).unwrap();
    fake_slurm(&slurm_dir, "node1|idle|none|root|2026-01-01T00:00:00");
    let spool = dir.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    criteria(&spool, NOW - 60, 75.0);
    let mut config = Config::default();
    config.store.path = dir.path().join("node.db");
    config.spool.dir = Some(spool.clone());
    config.slurm.bin_dir = slurm_dir.clone();
    config.validate.sku = Some("H100x8".into());
    config.validate.benchmark = vec![printing(dir.path(), "all_reduce", "nccl-tests", NCCL, 0)];
    let root = NodeRoot::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/nodes/healthy"
    ));
    let request = Request {
        config: &config,
        root: &root,
        node: "node1",
        job_id: Some("42".into()),
        dry_run: false,
        record: true,
        now: NOW,
    };
    let report = run(&request);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.exit_code(), 2);
    assert!(log(&slurm_dir).contains("Reason=hc: VALIDATE avg_busbw 70.742<75 GB/s (learned)"));

    let store =
        lemonade_sql::node::NodeStore::open(&config.store.path, Duration::from_secs(1)).unwrap();
    let path = config.store.path.clone();
    let last = lemonade_sql::node_validation::last(store.connection(), &path).unwrap();
    assert_eq!(last, Some((NOW, "fail".to_string())));
    let (records, errors) =
        lemonade_spool::read(&lemonade_spool::node_file(&spool, "node1")).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let validation = records
        .iter()
        .find_map(|r| match &r.body {
            lemonade_spool::Body::Validation {
                job_id,
                sku,
                metrics,
                passed,
                failing,
                criteria,
            } => Some((
                job_id.clone(),
                sku.clone(),
                metrics.len(),
                *passed,
                failing.clone(),
                criteria.clone(),
            )),
            _ => None,
        })
        .expect("a validation record");
    assert_eq!(validation.0.as_deref(), Some("42"));
    assert_eq!(validation.1, "H100x8");
    assert!(validation.2 > 10 && !validation.3);
    assert_eq!(validation.4, ["avg_busbw 70.742<75 GB/s (learned)"]);
    assert_eq!(validation.5, format!("learned {}", NOW - 60));
    assert!(records.iter().any(|r| matches!(&r.body,
        lemonade_spool::Body::StateChange { action, reason } if action == "drain (applied)" && reason.starts_with("hc: VALIDATE avg_busbw"))));
}
