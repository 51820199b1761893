//! The `lemon` binary against fake Slurm commands: what it drains, what it
//! leaves alone, the circuit breaker, dry runs, refusals and exit codes.
//!
//! The fakes are shell scripts in a temporary bin dir (`[slurm] bin_dir`)
//! that print canned output and log their argv, so the tests see exactly
//! what lemon asked of Slurm.

use lemonade_tests::history::{generate, node_name, HistorySpec, HistoryTruth};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Cluster {
    dir: tempfile::TempDir,
    truth: HistoryTruth,
}

impl Cluster {
    /// A 200-node history with three lemons; the second lemon is drained by an administrator.
    fn new(extra_config: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let bin = p.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let spec = HistorySpec {
            lemon_factor: 200.0, // plumbing tests: lemons no one can miss
            ..HistorySpec::default()
        };
        let (mut jobs, mut events) = (Vec::new(), Vec::new());
        let truth = generate(&spec, &mut jobs, &mut events).unwrap();
        std::fs::write(p.join("sacct.txt"), &jobs).unwrap();
        std::fs::write(p.join("events.txt"), &events).unwrap();
        std::fs::write(p.join("squeue.txt"), "99|gpu0001\n").unwrap();
        let mut sinfo = String::new();
        for name in &truth.node_names {
            if *name == truth.lemons[1] {
                sinfo.push_str(&format!(
                    "{name}|drained|bad fan, ticket 123|root|2026-01-01T00:00:00\n"
                ));
            } else {
                sinfo.push_str(&format!("{name}|idle|none|Unknown|Unknown\n"));
            }
        }
        std::fs::write(p.join("sinfo.txt"), sinfo).unwrap();
        let d = p.display();
        for (name, body) in [
            ("sinfo", format!("cat {d}/sinfo.txt")),
            ("sacctmgr", format!("cat {d}/events.txt")),
            ("squeue", format!("cat {d}/squeue.txt")),
            (
                "sacct",
                format!("echo \"TF=$SLURM_TIME_FORMAT $*\" >> {d}/sacct.log\n[ -e {d}/sacct.fail ] && exit 1\ncat {d}/sacct.txt"),
            ),
            (
                "scontrol",
                format!("for a in \"$@\"; do printf '%s\\n' \"$a\" >> {d}/scontrol.log; done\necho -- >> {d}/scontrol.log"),
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
                "[slurm]\nbin_dir = \"{d}/bin\"\n\n[lemon]\ndb_path = \"{d}/lemon.db\"\nsacct_window_hours = 1000\n{extra_config}\n"
            ),
        )
        .unwrap();
        Cluster { dir, truth }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn now(&self) -> String {
        (self.truth.end + 60).to_string()
    }

    fn lemon(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_lemon"))
            .arg("--config")
            .arg(self.path("lemonade.toml"))
            .args(args)
            .env_remove("LEMONADE_CONFIG")
            .output()
            .unwrap()
    }

    /// The scontrol calls, one argv each.
    fn scontrol_calls(&self) -> Vec<Vec<String>> {
        read(&self.path("scontrol.log"))
            .split("--\n")
            .filter(|c| !c.is_empty())
            .map(|c| c.lines().map(String::from).collect())
            .collect()
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
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
fn run_drains_new_lemons_only_and_leaves_an_administrators_drain_alone() {
    let c = Cluster::new("");
    let out = c.lemon(&["--now", &c.now(), "run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let calls = c.scontrol_calls();
    let mut drained: Vec<String> = calls.iter().map(|a| a[1].clone()).collect();
    drained.sort();
    let mut expected = vec![
        format!("NodeName={}", c.truth.lemons[0]),
        format!("NodeName={}", c.truth.lemons[2]),
    ];
    expected.sort();
    assert_eq!(drained, expected, "{}", text(&out));
    assert_eq!(calls.len(), 2, "{calls:?}");
    for call in &calls {
        assert_eq!(call[0], "update");
        assert_eq!(call[2], "State=DRAIN");
        let reason = call[3].strip_prefix("Reason=").unwrap();
        assert!(reason.starts_with("lemon: "), "{reason}");
        assert!(
            reason[..20.min(reason.len())].contains("fails/28d"),
            "{reason}"
        );
        assert!(!call.iter().any(|a| a.contains("RESUME")));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("skipped_out_of_service"), "{stdout}");
    assert!(stdout.contains("bad fan"), "{stdout}");
    // sacct was asked with epoch output and a bounded window.
    let sacct = read(&c.path("sacct.log"));
    assert!(
        sacct.starts_with("TF=%s -X -a -D -P --noconvert -S "),
        "{sacct}"
    );

    // The next run has nothing new: the lemons are known, nothing is drained twice.
    let later = (c.truth.end + 3660).to_string();
    let again = c.lemon(&["--now", &later, "run"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(c.scontrol_calls().len(), 2);
    // ... and its sacct window starts where the first one ended (the watermark).
    let sacct = read(&c.path("sacct.log"));
    let arg = |line: &str, flag: &str| -> String {
        let words: Vec<&str> = line.split(' ').collect();
        let i = words.iter().position(|w| *w == flag).unwrap();
        words[i + 1].to_string()
    };
    let lines: Vec<&str> = sacct.lines().collect();
    assert_eq!(lines.len(), 2, "{sacct}");
    assert_eq!(arg(lines[1], "-S"), arg(lines[0], "-E"));
}

#[test]
fn dry_run_prints_the_argv_and_touches_nothing() {
    let c = Cluster::new("");
    let out = c.lemon(&["--now", &c.now(), "run", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(c.scontrol_calls().is_empty());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expect = format!(
        "{}/bin/scontrol update NodeName={} State=DRAIN 'Reason=lemon: ",
        c.dir.path().display(),
        c.truth.lemons[0]
    );
    assert!(stdout.contains(&expect), "{stdout}");
    assert!(stdout.contains("would_drain"), "{stdout}");
}

#[test]
fn circuit_breaker_caps_drains_and_exits_with_an_error() {
    let c = Cluster::new("max_drains_per_run = 1");
    let out = c.lemon(&["--now", &c.now(), "run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(c.scontrol_calls().len(), 1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("CIRCUIT BREAKER"), "{stdout}");
    assert!(stdout.contains("held_by_breaker"), "{stdout}");
}

#[test]
fn failed_or_stale_ingest_drains_nothing() {
    let c = Cluster::new("");
    std::fs::write(c.path("sacct.fail"), "").unwrap();
    let out = c.lemon(&["--now", &c.now(), "run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(c.scontrol_calls().is_empty());
    assert!(String::from_utf8_lossy(&out.stdout).contains("NOTHING DRAINED"));

    // A replayed history that ends two days before "now" is stale.
    let c = Cluster::new("");
    let late = (c.truth.end + 2 * 86_400).to_string();
    let file = c.path("sacct.txt");
    let out = c.lemon(&[
        "--now",
        &late,
        "run",
        "--sacct-file",
        file.to_str().unwrap(),
        "--no-slurm",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(c.scontrol_calls().is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than 6 h before now"));
}

#[test]
fn release_forgives_and_reports_render_in_every_format() {
    let c = Cluster::new("");
    let (file, events) = (c.path("sacct.txt"), c.path("events.txt"));
    let ingest = c.lemon(&[
        "--now",
        &c.now(),
        "ingest",
        "--sacct-file",
        file.to_str().unwrap(),
        "--events-file",
        events.to_str().unwrap(),
    ]);
    assert_eq!(ingest.status.code(), Some(0), "{}", text(&ingest));
    let score = c.lemon(&["--now", &c.now(), "score", "--format", "json"]);
    assert_eq!(score.status.code(), Some(1), "{}", text(&score));
    let json: serde_json::Value = serde_json::from_slice(&score.stdout).unwrap();
    let flagged: Vec<&str> = json["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["signals"]["node"].as_str().unwrap())
        .collect();
    assert_eq!(flagged.len(), 3, "{flagged:?}");
    assert!(json["flagged"][0]["signals"]["failing_jobs"]
        .as_array()
        .is_some_and(|j| j.len() >= 3));

    for lemon in &c.truth.lemons {
        let r = c.lemon(&[
            "--now",
            &c.now(),
            "release",
            lemon,
            "--note",
            "DIMM swapped",
        ]);
        assert_eq!(r.status.code(), Some(0), "{}", text(&r));
        assert!(String::from_utf8_lossy(&r.stdout).contains("State=RESUME"));
    }
    let score = c.lemon(&["--now", &c.now(), "score"]);
    assert_eq!(score.status.code(), Some(0), "{}", text(&score));

    let t = c.lemon(&[
        "--now",
        &c.now(),
        "ticket",
        "open",
        &node_name(5),
        "--note",
        "psu",
    ]);
    assert_eq!(t.status.code(), Some(0), "{}", text(&t));
    let listed = c.lemon(&["ticket", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.starts_with(&node_name(5)) && listed.contains("\tcli\tpsu"),
        "{listed}"
    );
    let t = c.lemon(&["--now", &c.now(), "ticket", "close", &node_name(5)]);
    assert_eq!(t.status.code(), Some(0), "{}", text(&t));
    let listed = c.lemon(&["ticket", "list"]);
    assert!(listed.stdout.is_empty(), "{}", text(&listed));
    let all = c.lemon(&["ticket", "list", "--all"]);
    assert!(
        String::from_utf8_lossy(&all.stdout).contains(", closed "),
        "{}",
        text(&all)
    );
    let md = c.lemon(&["--now", &c.now(), "report", "--format", "markdown"]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("| node | flagged |"), "{md}");
    assert!(md.contains("released"), "{md}");
    let txt = c.lemon(&["--now", &c.now(), "report"]);
    assert!(String::from_utf8_lossy(&txt.stdout).contains("decision history"));
}

#[test]
fn bad_usage_is_exit_code_two_with_a_hint() {
    let c = Cluster::new("");
    let out = c.lemon(&["ticket", "close", "gpu9999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no open ticket"));
    std::fs::write(c.path("lemonade.toml"), "[lemon]\nwindow = 3\n").unwrap();
    let out = c.lemon(&["score"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("window"));
}

#[test]
fn the_report_shows_the_firmware_versions_of_flagged_nodes() {
    use lemonade_spool::{Body, Record};
    let c = Cluster::new("");
    let spool = c.path("spool");
    let (with, without) = (&c.truth.lemons[0], &c.truth.lemons[2]);
    let version = |seq: u64, at: i64, entity: &str, value: &str| Record {
        seq,
        epoch: "e1".into(),
        node: with.clone(),
        at,
        body: Body::Inventory {
            check: "firmware".into(),
            entity: entity.into(),
            value: value.into(),
        },
    };
    let t = c.truth.end - 86_400;
    let records = [
        version(1, t - 86_400, "bios", "1.6.7"),
        version(2, t - 86_400, "mlx5_0", "28.39.1002"),
        // Updated since: the latest version is the one shown.
        version(3, t, "bios", "1.7.0"),
        Record {
            body: Body::Inventory {
                check: "gpu".into(),
                entity: "gpu0".into(),
                value: "96.00.89.00.01".into(),
            },
            ..version(4, t, "", "")
        },
    ];
    lemonade_spool::write(&spool, with, &records, 1 << 20).unwrap();
    let (file, events) = (c.path("sacct.txt"), c.path("events.txt"));
    let ingest = c.lemon(&[
        "--now",
        &c.now(),
        "ingest",
        "--no-slurm",
        "--sacct-file",
        file.to_str().unwrap(),
        "--events-file",
        events.to_str().unwrap(),
        "--spool-dir",
        spool.to_str().unwrap(),
    ]);
    assert_eq!(ingest.status.code(), Some(0), "{}", text(&ingest));
    let report = c.lemon(&["--now", &c.now(), "report"]);
    let out = String::from_utf8_lossy(&report.stdout);
    let block = |node: &str| -> String {
        // The node's line and its indented lines, up to the next node.
        let from = out
            .find(&format!("\n  {node}: "))
            .expect("flagged node in the report");
        let mut lines = out[from + 1..].lines();
        let head = lines.next().unwrap_or_default();
        std::iter::once(head)
            .chain(lines.take_while(|l| l.starts_with("    ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        block(with)
            .contains("    firmware: bios=1.7.0 mlx5_0=28.39.1002 gpu0.vbios=96.00.89.00.01"),
        "{out}"
    );
    assert!(
        block(without).contains("    firmware: none exported"),
        "{out}"
    );
    let md = c.lemon(&["--now", &c.now(), "report", "--format", "markdown"]);
    assert!(
        String::from_utf8_lossy(&md.stdout).contains("  * firmware: bios=1.7.0 mlx5_0=28.39.1002")
    );
}

#[test]
fn an_ingest_larger_than_the_log_limit_leaves_the_log_short() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let spec = HistorySpec {
        nodes: 500,
        jobs: 80_000,
        ..HistorySpec::default()
    };
    let (mut jobs, mut events) = (Vec::new(), Vec::new());
    generate(&spec, &mut jobs, &mut events).unwrap();
    std::fs::write(p.join("sacct.txt"), &jobs).unwrap();
    std::fs::write(p.join("events.txt"), &events).unwrap();
    let db = p.join("lemon.db");
    std::fs::write(
        p.join("lemonade.toml"),
        format!("[lemon]\ndb_path = \"{}\"\n", db.display()),
    )
    .unwrap();
    let limit = lemonade_sql::wal::DEFAULT_LIMIT_BYTES;
    let (sacct, events) = (p.join("sacct.txt"), p.join("events.txt"));
    let ingest = [
        "ingest",
        "--no-slurm",
        "--sacct-file",
        path(&sacct),
        "--events-file",
        path(&events),
    ];
    for args in [&ingest[..], &["score"]] {
        let command = args.join(" ");
        let out = Command::new(env!("CARGO_BIN_EXE_lemon"))
            .arg("--config")
            .arg(p.join("lemonade.toml"))
            .args(args)
            .env_remove("LEMONADE_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.code().unwrap_or(9) <= 1, "{}", text(&out));
        let log = lemonade_sql::wal::log_size(&db);
        assert!(
            log <= limit,
            "after `lemon {command}`: a {log}-byte log (limit {limit})"
        );
    }
    let database = std::fs::metadata(&db).unwrap().len();
    assert!(
        database > 2 * limit,
        "the ingest wrote {database} bytes, more than the log may hold"
    );
}

#[test]
fn a_take_out_the_nodes_fleet_breaker_refused_is_a_line_of_the_report() {
    use lemonade_spool::{Body, Record};
    let c = Cluster::new("");
    let spool = c.path("spool");
    let node = &c.truth.node_names[0];
    let change = |seq: u64, at: i64, action: &str| Record {
        seq,
        epoch: "e1".into(),
        node: node.clone(),
        at,
        body: Body::StateChange {
            action: action.into(),
            reason: "hc: ECC_VOLATILE_UNCORRECTED gpu5".into(),
        },
    };
    let t = c.truth.end - 3_600;
    // Applied take-outs are not news here; the refused one is.
    let records = [
        change(1, t - 60, "drain (applied)"),
        change(2, t, "down (breaker)"),
    ];
    lemonade_spool::write(&spool, node, &records, 1 << 20).unwrap();
    let (file, events) = (c.path("sacct.txt"), c.path("events.txt"));
    let ingest = c.lemon(&[
        "--now",
        &c.now(),
        "ingest",
        "--no-slurm",
        "--sacct-file",
        file.to_str().unwrap(),
        "--events-file",
        events.to_str().unwrap(),
        "--spool-dir",
        spool.to_str().unwrap(),
    ]);
    assert_eq!(ingest.status.code(), Some(0), "{}", text(&ingest));
    let report = c.lemon(&["--now", &c.now(), "report"]);
    let out = String::from_utf8_lossy(&report.stdout);
    assert!(
        out.contains("Held by the fleet breaker on the nodes (1)"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("FLEET BREAKER"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(&format!(
            "{node} not set `hc: ECC_VOLATILE_UNCORRECTED gpu5` (down)"
        )),
        "{line}"
    );
    let json = c.lemon(&["--now", &c.now(), "report", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["node_breaker_holds"][0]["action"], "down");
}

/// One GB200 tray's export: its four GPUs' NVLink domain, as the fabric
/// check's inventory.
fn tray_export(node: &str, at: i64, clique: u32) -> Vec<lemonade_spool::Record> {
    use lemonade_spool::domain::NvlinkDomain;
    let domain = NvlinkDomain {
        cluster_uuid: "6d0b3f4e-1a2b-4c3d-8e9f-0a1b2c3d4e5f".into(),
        clique_id: clique,
    };
    (0..4)
        .map(|gpu| lemonade_spool::Record {
            seq: gpu + 1,
            epoch: "e1".into(),
            node: node.into(),
            at,
            body: lemonade_spool::Body::Inventory {
                check: "fabric".into(),
                entity: format!("gpu{gpu}"),
                value: domain.value(),
            },
        })
        .collect()
}

#[test]
fn the_report_flags_the_tray_whose_clique_differs_from_its_topology_block() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/slurm-topology/nvl72.yaml"
    );
    let c = Cluster::new(&format!("topology_yaml = \"{fixture}\""));
    let spool = c.path("spool");
    let t = c.truth.end - 3600;
    for i in 1..=36 {
        let node = format!("gb{i:03}");
        let clique = if node == "gb023" { 4 } else { 32766 };
        lemonade_spool::write(&spool, &node, &tray_export(&node, t, clique), 1 << 20).unwrap();
    }
    // In no block of the topology: not judged, whatever its clique.
    lemonade_spool::write(&spool, "gb099", &tray_export("gb099", t, 9), 1 << 20).unwrap();
    let (file, events) = (c.path("sacct.txt"), c.path("events.txt"));
    let ingest = c.lemon(&[
        "--now",
        &c.now(),
        "ingest",
        "--no-slurm",
        "--sacct-file",
        path(&file),
        "--events-file",
        path(&events),
        "--spool-dir",
        path(&spool),
    ]);
    assert_eq!(ingest.status.code(), Some(0), "{}", text(&ingest));
    let md = c.lemon(&["--now", &c.now(), "report", "--format", "markdown"]);
    let out = String::from_utf8_lossy(&md.stdout);
    assert!(out.contains("NVLink domain drift"), "{out}");
    assert!(
        out.contains("| rack02 | gb023 | clique | 4 | 32766 |"),
        "{out}"
    );
    let flagged: Vec<&str> = out.lines().filter(|l| l.starts_with("| rack0")).collect();
    assert_eq!(flagged.len(), 1, "{out}");
    assert!(
        out.contains("1 node with an NVLink domain is in no rack"),
        "{out}"
    );
}

#[test]
fn an_unreadable_topology_yaml_stops_the_report_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let topology = dir.path().join("topology.yaml");
    std::fs::write(
        &topology,
        "- topology: t\n  block:\n    blocks:\n      - block: b1\n        nodes: [gb1, gb2]\n",
    )
    .unwrap();
    let c = Cluster::new(&format!("topology_yaml = \"{}\"", topology.display()));
    let out = c.lemon(&["--now", &c.now(), "report"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&topology.display().to_string()) && err.contains("line 5"),
        "{err}"
    );
}
