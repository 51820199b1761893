//! `lemon run`'s validation step (issue 31) against stand-in Slurm commands
//! (shell scripts in `[slurm] bin_dir` that print canned output and log
//! their argv): the criteria file it publishes in the spool directory, the
//! `sbatch` jobs it submits and in which order, what it never submits
//! (a node already queued, a dry run, a refused run), and what `lemon
//! report` shows of the nodes' validations.

use lemonade_spool::{Body, Record, ValidationMetric};
use lemonade_tests::history::{generate, node_name, HistorySpec, HistoryTruth};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SKU: &str = "H100x8";

struct Site {
    dir: tempfile::TempDir,
    truth: HistoryTruth,
}

impl Site {
    /// 20 nodes with a week of jobs; `gpu0002` parked in its validation
    /// reservation after a repair, `gpu0005` with a validation job queued.
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let spec = HistorySpec {
            nodes: 20,
            jobs: 1500,
            days: 7,
            lemons: 0,
            bad_users: 0,
            bursts: 0,
            ..HistorySpec::default()
        };
        let (mut jobs, mut events) = (Vec::new(), Vec::new());
        let truth = generate(&spec, &mut jobs, &mut events).unwrap();
        std::fs::write(p.join("sacct.txt"), &jobs).unwrap();
        std::fs::create_dir_all(p.join("spool")).unwrap();
        let mut sinfo = String::new();
        for name in &truth.node_names {
            let state = if name == "gpu0002" { "maint" } else { "idle" };
            sinfo += &format!("{name}|{state}|none|Unknown|Unknown\n");
        }
        std::fs::write(p.join("sinfo.txt"), sinfo).unwrap();
        let start = truth.end - 600;
        std::fs::write(
            p.join("reservations.txt"),
            format!("ReservationName=lemonade_validate_gpu0002 StartTime={start} EndTime={} Nodes=gpu0002 Flags=MAINT Users=root\nReservationName=pm StartTime=1 Nodes=gpu0019\n", start + 86_400),
        )
        .unwrap();
        std::fs::write(p.join("squeue.txt"), "77|gpu0005|\n").unwrap();
        let d = p.display();
        let log = |name: &str| {
            format!("for a in \"$@\"; do printf '%s\\n' \"$a\" >> {d}/{name}.log; done\necho -- >> {d}/{name}.log")
        };
        let bin = p.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, body) in [
            ("sinfo", format!("cat {d}/sinfo.txt")),
            ("squeue", format!("{}\ncat {d}/squeue.txt", log("squeue"))),
            (
                "scontrol",
                format!(
                    "{}\n[ \"$1\" = show ] && cat {d}/reservations.txt\nexit 0",
                    log("scontrol")
                ),
            ),
            (
                "sbatch",
                format!("{}\necho \"4242;cluster\"", log("sbatch")),
            ),
        ] {
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(
            p.join("lemonade.toml"),
            format!(
                "[slurm]\nbin_dir = \"{d}/bin\"\n\n[lemon]\ndb_path = \"{d}/lemon.db\"\n\n\
                 [validate]\nenabled = true\npartition = \"gpu\"\ntime_limit_minutes = 120\n"
            ),
        )
        .unwrap();
        let site = Site { dir, truth };
        site.export_results();
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn now(&self) -> i64 {
        self.truth.end + 60
    }

    /// Nodes 6-17 passed a validation two days ago (avg_busbw 470-472);
    /// gpu0003 failed one yesterday at 300.
    fn export_results(&self) {
        let at = self.now() - 2 * 86_400;
        for i in 5..17 {
            let bw = 470.0 + (i % 3) as f64;
            write_result(&self.path("spool"), &node_name(i), at, bw, true);
        }
        write_result(&self.path("spool"), "gpu0003", at + 86_400, 300.0, false);
    }

    fn lemon(&self, args: &[&str]) -> Output {
        let (sacct, spool) = (self.path("sacct.txt"), self.path("spool"));
        let now = self.now().to_string();
        let mut argv = vec!["--now", &now];
        argv.extend_from_slice(args);
        if args[0] == "run" {
            argv.extend(["--sacct-file", path(&sacct), "--spool-dir", path(&spool)]);
        }
        Command::new(env!("CARGO_BIN_EXE_lemon"))
            .arg("--config")
            .arg(self.path("lemonade.toml"))
            .args(argv)
            .env_remove("LEMONADE_CONFIG")
            .output()
            .unwrap()
    }

    /// The calls of one stand-in command, one argv each.
    fn calls(&self, name: &str) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.path(&format!("{name}.log")))
            .unwrap_or_default()
            .split("--\n")
            .filter(|c| !c.is_empty())
            .map(|c| c.lines().map(String::from).collect())
            .collect()
    }
}

fn write_result(spool: &Path, node: &str, at: i64, bw: f64, passed: bool) {
    let record = Record {
        seq: 1,
        epoch: "e1".into(),
        node: node.into(),
        at,
        body: Body::Validation {
            job_id: Some("70".into()),
            sku: SKU.into(),
            metrics: vec![
                ValidationMetric {
                    metric: "avg_busbw".into(),
                    value: bw,
                },
                ValidationMetric {
                    metric: "wrong_total".into(),
                    value: 0.0,
                },
            ],
            passed,
            failing: if passed {
                vec![]
            } else {
                vec![format!("avg_busbw {bw}<461.6 GB/s (learned)")]
            },
            criteria: "learned".into(),
        },
    };
    lemonade_spool::write(spool, node, &[record], 1 << 20).unwrap();
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_run_publishes_the_fleets_bands_and_validates_the_returning_node_first_in_its_reservation() {
    let site = Site::new();
    let out = site.lemon(&["run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let criteria = ::validate::criteria_file::read(&site.path("spool/validate-criteria.json"))
        .unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    assert_eq!(criteria.generated_at, site.now());
    let bands: Vec<(&str, &str, f64)> = (criteria.bands.iter())
        .map(|b| (b.sku.as_str(), b.metric.as_str(), b.bound))
        .collect();
    // 12 passed results (gpu0003's failure is not learned from): median
    // 471, less the 2% gap.
    assert_eq!(bands.len(), 1, "{bands:?}");
    assert_eq!(bands[0].0, SKU);
    assert_eq!(bands[0].1, "avg_busbw");
    assert!((bands[0].2 - (471.0 - 9.42)).abs() < 1e-9, "{bands:?}");

    // 20 nodes x 24 h x 2% = 9.6 node-hours, gpu0005's queued job took 2:
    // the returning node and two more two-hour validations by priority.
    let sbatch = site.calls("sbatch");
    assert_eq!(sbatch.len(), 3, "{sbatch:?}\n{}", text(&out));
    assert_eq!(
        sbatch[0],
        [
            "--parsable",
            "--exclusive",
            "-w",
            "gpu0002",
            "--job-name=lemonade-validate",
            "--partition=gpu",
            "--reservation=lemonade_validate_gpu0002",
            "--time=120",
            "--chdir=/tmp",
            "--output=/tmp/%x-%j.out",
            "--wrap",
            "/usr/bin/healthcheck validate",
        ]
    );
    let picked: Vec<&str> = sbatch.iter().map(|a| a[3].as_str()).collect();
    assert!(!picked.contains(&"gpu0005"), "queued already: {picked:?}");
    assert!(
        sbatch[1..]
            .iter()
            .all(|a| !a.iter().any(|w| w.starts_with("--reservation"))),
        "{sbatch:?}"
    );
    let squeue = site.calls("squeue");
    assert_eq!(
        squeue[0],
        ["-h", "--name", "lemonade-validate", "-o", "%i|%n|%N"]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("gpu0002: submitted job 4242 (returned_from_repair"),
        "{stdout}"
    );
    assert!(stdout.contains("Already queued: gpu0005."), "{stdout}");
}

#[test]
fn a_dry_run_prints_the_sbatch_argv_and_writes_and_submits_nothing() {
    let site = Site::new();
    let out = site.lemon(&["run", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(site.calls("sbatch").is_empty());
    assert!(!site.path("spool/validate-criteria.json").exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("gpu0002: would submit"), "{stdout}");
    assert!(
        stdout.contains("sbatch --parsable --exclusive -w gpu0002 --job-name=lemonade-validate"),
        "{stdout}"
    );
    assert!(
        stdout.contains("criteria not written (dry run)"),
        "{stdout}"
    );
}

#[test]
fn a_run_that_refuses_to_act_on_a_stale_history_holds_every_validation_job() {
    let site = Site::new();
    let late = (site.now() + 10 * 86_400).to_string();
    let (sacct, spool) = (site.path("sacct.txt"), site.path("spool"));
    let out = Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(site.path("lemonade.toml"))
        .args([
            "--now",
            &late,
            "run",
            "--sacct-file",
            path(&sacct),
            "--spool-dir",
            path(&spool),
        ])
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(site.calls("sbatch").is_empty());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("gpu0002: held: job history ends at"),
        "{stdout}"
    );
}

#[test]
fn a_submission_that_slurm_refuses_is_reported_and_the_run_exits_2() {
    let site = Site::new();
    let sbatch = site.path("bin/sbatch");
    std::fs::write(
        &sbatch,
        "#!/bin/sh\necho 'sbatch: error: Invalid partition name specified' >&2\nexit 1\n",
    )
    .unwrap();
    let out = site.lemon(&["run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("gpu0002: submission failed:") && stdout.contains("Invalid partition name"),
        "{stdout}"
    );
}

#[test]
fn the_report_shows_each_nodes_last_validation_the_bands_and_a_chart_marking_failing_nodes() {
    let site = Site::new();
    assert_eq!(site.lemon(&["run", "--dry-run"]).status.code(), Some(0));
    let out = site.lemon(&["report"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    if std::env::var_os("SHOW_REPORT").is_some() {
        eprintln!("{report}");
    }
    assert!(
        report.contains("13 nodes validated, 1 failing their last validation."),
        "{report}"
    );
    let line = (report.lines())
        .find(|l| l.contains("gpu0003") && l.contains("H100x8"))
        .unwrap();
    assert!(
        line.contains("FAIL") && line.contains("avg_busbw 300<461.6 GB/s (learned)"),
        "{line}"
    );
    assert!(
        report.contains("avg_busbw >= 461.6 [learned: median 471 of 12 peers - 9.42 (min_gap 2% of the median)]"),
        "{report}"
    );

    let html =
        String::from_utf8_lossy(&site.lemon(&["report", "--format", "html"]).stdout).into_owned();
    // Kept for a look in a browser.
    let page = Path::new(env!("CARGO_TARGET_TMPDIR")).join("validation-report.html");
    std::fs::write(&page, &html).unwrap();
    assert!(
        html.contains(r#"data-chart="validation-H100x8""#),
        "no chart"
    );
    assert_eq!(html.matches(r#"class="point failing""#).count(), 1);
    assert!(html.contains(r#"class="point failing" data-node="gpu0003""#));
    assert_eq!(html.matches(r#"<circle class="point"#).count(), 13);
    assert!(
        html.contains(r#"data-threshold="461.5"#),
        "the band's bound is drawn"
    );
}
