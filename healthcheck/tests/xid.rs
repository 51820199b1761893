//! The `xid` check on the fixture node: healthy, one overlay per XID fault,
//! the cursor across runs and reboots, windows, catalog overrides, replay of
//! a kernel log file and of a snapshot.

use healthcheck::check::{Check, CheckContext, CheckError, CheckOutput};
use healthcheck::checks::xid::evaluate::XidState;
use healthcheck::checks::xid::Xid;
use healthcheck::finding::Finding;
use healthcheck::{Action, Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Boot of every fixture node: 2026-11-20T00:00:00Z (`btime` in proc/stat).
const BOOT: i64 = 1_795_132_800;
/// Where the fixture XIDs happen: ten hours after boot.
const XID_TIME: i64 = BOOT + 10 * 3600;
/// The fixture's uptime: a day after boot.
const NOW: i64 = BOOT + 86_400;
const UUID: &str = "GPU-3f6e1c2a-8b4d-4e2f-9a1c-0d5e7b8c1a0";
const BUS: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn context(node: &FixtureNode, config: &Config, previous: Option<Value>, now: i64) -> CheckContext {
    CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config.clone(),
            chrono::DateTime::from_timestamp(now, 0).unwrap(),
        )
    }
}

fn run(node: &FixtureNode, config: &Config, previous: Option<Value>, now: i64) -> CheckOutput {
    Xid.run(&context(node, config, previous, now))
        .expect("xid runs")
}

fn problems(findings: &[Finding]) -> Vec<&Finding> {
    findings.iter().filter(|f| !f.is_ok()).collect()
}

#[test]
fn healthy_node_is_all_ok_with_bus_ids_and_uuids() {
    let node = fixture::node("healthy");
    let out = run(&node, &config(), None, NOW);
    assert!(problems(&out.findings).is_empty(), "{:#?}", out.findings);
    assert_eq!(out.findings.len(), 8, "{:#?}", out.findings);
    for (i, f) in out.findings.iter().enumerate() {
        assert_eq!(f.entity, format!("gpu{i}"));
        assert_eq!(f.pci_bus_id.as_deref(), Some(BUS[i]));
        assert_eq!(f.uuid.as_deref(), Some(format!("{UUID}{i}").as_str()));
        assert_eq!(f.message, "no XID since boot");
    }
    assert!(out.events.is_empty());
    let state: XidState = serde_json::from_value(out.state.unwrap()).unwrap();
    assert_eq!(state.boot_id, "8c1f4e2a-6b3d-4f5e-9a7c-2d1e0f3b4a5c");
    assert_eq!(state.uuids.len(), 8);
    assert!(state.cursor.is_some());
}

#[test]
fn each_fault_overlay_gives_its_code_severity_and_entity() {
    use Severity::*;
    // (fault, its findings as (gpu index, code, severity), events it records)
    type Case = (
        &'static str,
        &'static [(usize, &'static str, Severity)],
        usize,
    );
    let cases: &[Case] = &[
        ("xid-79", &[(3, "XID_79", Down)], 1),
        ("xid-48", &[(5, "XID_48", Down), (5, "XID_63", Drain)], 2),
        ("xid-13-repeated", &[(1, "XID_13", Drain)], 4),
        ("xid-154-reset", &[(6, "XID_154", Down)], 1),
        ("xid-mig", &[(4, "XID_31", Warning)], 1),
        ("xid-old-driver", &[(0, "XID_13", Warning)], 1),
        (
            "xid-malformed",
            &[(2, "XID_PARSE_ERROR", Unknown), (7, "XID_31", Warning)],
            1,
        ),
    ];
    for (fault, expected, events) in cases {
        let node = fixture::node(fault);
        let out = run(&node, &config(), None, NOW);
        let found: Vec<(String, String, Severity)> = problems(&out.findings)
            .iter()
            .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
            .collect();
        let wanted: Vec<(String, String, Severity)> = expected
            .iter()
            .map(|(gpu, code, sev)| (format!("gpu{gpu}"), code.to_string(), *sev))
            .collect();
        assert_eq!(found, wanted, "{fault}: {:#?}", out.findings);
        for f in problems(&out.findings) {
            let gpu: usize = f.entity[3..].parse().unwrap();
            assert_eq!(f.pci_bus_id.as_deref(), Some(BUS[gpu]), "{fault}");
        }
        // Every GPU has a line: the faulty ones their XIDs, the others ok.
        let entities: std::collections::BTreeSet<&str> =
            out.findings.iter().map(|f| f.entity.as_str()).collect();
        assert_eq!(entities.len(), 8, "{fault}");
        assert_eq!(out.events.len(), *events, "{fault}: {:#?}", out.events);
        assert!(out.events.iter().all(|e| e.occurred_at >= XID_TIME
            && e.occurred_at < XID_TIME + 3600
            && e.boot_id == "8c1f4e2a-6b3d-4f5e-9a7c-2d1e0f3b4a5c"));
    }
}

#[test]
fn the_findings_say_what_happened_and_what_to_do() {
    let out = run(&fixture::node("xid-79"), &config(), None, NOW);
    let f = out.findings.iter().find(|f| f.code == "XID_79").unwrap();
    assert_eq!(f.action, Action::Reboot);
    assert_eq!(f.uuid.as_deref(), Some(format!("{UUID}3").as_str()));
    assert_eq!(f.expected.as_deref(), Some("no XID"));
    let actual = f.actual.as_deref().unwrap();
    assert!(actual.contains("2026-11-20T10:00:00Z"), "{actual}");
    assert!(actual.contains("GPU has fallen off the bus."), "{actual}");
    assert!(f.message.contains("until reboot"), "{}", f.message);
    assert_eq!(out.events[0].entity, "gpu3");
    assert_eq!(out.events[0].occurred_at, XID_TIME);

    let out = run(&fixture::node("xid-154-reset"), &config(), None, NOW);
    let f = out.findings.iter().find(|f| f.code == "XID_154").unwrap();
    assert_eq!(f.action, Action::ResetGpu);

    let out = run(&fixture::node("xid-mig"), &config(), None, NOW);
    let f = out.findings.iter().find(|f| f.code == "XID_31").unwrap();
    assert!(f
        .actual
        .as_deref()
        .unwrap()
        .contains("GPU-I:05 pid=7001 name=infer"));

    let out = run(&fixture::node("xid-malformed"), &config(), None, NOW);
    let f = out
        .findings
        .iter()
        .find(|f| f.code == "XID_PARSE_ERROR")
        .unwrap();
    assert!(
        f.message.contains("/dev/kmsg line 118 (seq 67)"),
        "{}",
        f.message
    );
    assert!(f.message.contains("`7x9`"), "{}", f.message);
}

#[test]
fn the_cursor_resumes_and_only_new_xids_are_new() {
    let node = fixture::node("xid-79");
    let config = config();
    let first = run(&node, &config, None, NOW);
    assert_eq!(first.events.len(), 1);
    let state: XidState = serde_json::from_value(first.state.clone().unwrap()).unwrap();
    let cursor = state.cursor.unwrap();
    assert_eq!((cursor.seq, cursor.line), (70, Some(121)));

    let again = run(&node, &config, first.state.clone(), NOW + 60);
    assert!(again.events.is_empty(), "nothing new: {:#?}", again.events);
    assert_eq!(
        problems(&again.findings).len(),
        1,
        "XID 79 still counts: {:#?}",
        again.findings
    );

    node.append(
        "/dev/kmsg",
        "4,71,86000000000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=99, name=x, Graphics Exception\n SUBSYSTEM=pci\n",
    );
    let third = run(&node, &config, again.state.clone(), NOW + 120);
    assert_eq!(third.events.len(), 1);
    assert_eq!(
        (
            third.events[0].code.as_str(),
            third.events[0].entity.as_str()
        ),
        ("XID_13", "gpu0")
    );
    let codes: Vec<&str> = problems(&third.findings)
        .iter()
        .map(|f| f.code.as_str())
        .collect();
    assert_eq!(codes, ["XID_13", "XID_79"]);
}

#[test]
fn a_rewritten_log_is_rescanned_without_counting_twice() {
    let node = fixture::node("xid-13-repeated");
    let first = run(&node, &config(), None, NOW);
    // Same records, different bytes before them: the offset no longer fits.
    let log = std::fs::read_to_string(node.path("/dev/kmsg")).unwrap();
    node.write(
        "/dev/kmsg",
        log.replacen("Linux version", "Linux  version", 1),
    );
    let second = run(&node, &config(), first.state, NOW);
    assert!(second.events.is_empty());
    let state: XidState = serde_json::from_value(second.state.unwrap()).unwrap();
    assert_eq!(state.tallies[0].count, 4);
}

#[test]
fn a_reboot_resets_the_cursor_and_the_history() {
    let node = fixture::node("xid-79");
    let config = config();
    let first = run(&node, &config, None, NOW);
    assert_eq!(problems(&first.findings).len(), 1);

    // New boot: new boot id, and a kernel log that starts over.
    node.write(
        "/proc/sys/kernel/random/boot_id",
        "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f00\n",
    );
    let healthy = std::fs::read(fixture::nodes_dir().join("healthy/dev/kmsg")).unwrap();
    node.write("/dev/kmsg", healthy);
    let after = run(&node, &config, first.state, NOW + 600);
    assert!(
        problems(&after.findings).is_empty(),
        "{:#?}",
        after.findings
    );
    let state: XidState = serde_json::from_value(after.state.unwrap()).unwrap();
    assert_eq!(state.boot_id, "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f00");
    assert!(state.tallies.is_empty());
    assert_eq!(state.uuids.len(), 8);

    // The same log under a new boot id is read again from the start.
    node.write(
        "/proc/sys/kernel/random/boot_id",
        "11111111-2222-4333-8444-555555555555\n",
    );
    node.append(
        "/dev/kmsg",
        "4,67,9000000,-;NVRM: Xid (PCI:0000:ab:00): 48, pid=1, name=x, DBE\n",
    );
    let again = run(
        &node,
        &config,
        Some(serde_json::to_value(&state).unwrap()),
        NOW + 700,
    );
    assert_eq!(again.events.len(), 1);
    assert_eq!(
        again.events[0].boot_id,
        "11111111-2222-4333-8444-555555555555"
    );
}

#[test]
fn a_missing_log_or_boot_time_is_the_checks_failure_naming_the_file() {
    let node = fixture::node("healthy");
    node.remove("/dev/kmsg");
    let e = Xid.run(&context(&node, &config(), None, NOW)).unwrap_err();
    assert!(matches!(e, CheckError::Read(_)));
    assert!(e.to_string().starts_with("/dev/kmsg:"), "{e}");

    let node = fixture::node("healthy");
    node.write("/proc/stat", "cpu  1 2 3 4\nbtime soon\n");
    let e = Xid.run(&context(&node, &config(), None, NOW)).unwrap_err();
    assert!(e.to_string().contains("/proc/stat"), "{e}");
    assert!(e.to_string().contains("`soon`"), "{e}");
}

#[test]
fn lines_that_are_not_kmsg_records_are_reported_as_unknown() {
    let node = fixture::node("healthy");
    node.append(
        "/dev/kmsg",
        "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, dmesg -T output\n",
    );
    let out = run(&node, &config(), None, NOW);
    let f = out
        .findings
        .iter()
        .find(|f| f.code == "KMSG_MALFORMED")
        .expect("a finding about the line");
    assert_eq!((f.entity.as_str(), f.severity), ("node", Severity::Unknown));
    assert!(f.message.contains("/dev/kmsg line 118"), "{}", f.message);
}

// ---- the binary, with the node database -------------------------------

/// A config for the binary: the fixture's plus a store of its own and `extra`
/// keys for this node (`checks.xid.window_s = {...}`).
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let mut text = std::fs::read_to_string(fixture::node_config()).unwrap();
    text.push_str(&format!(
        "\n[[node]]\nhosts = \"xidtest\"\nstore.path = \"{}\"\n{extra}\n",
        db.display()
    ));
    let config = dir.path().join("lemonade.toml");
    std::fs::write(&config, text).unwrap();
    Setup { dir, config }
}

impl Setup {
    fn command(&self, root: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_healthcheck"));
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--root")
            .arg(root)
            .arg("--use-store")
            .arg("--node")
            .arg("xidtest");
        cmd
    }

    /// `healthcheck run --checks xid --format json`: the report and the exit code.
    fn run(&self, root: &Path, now: i64, args: &[&str]) -> (Value, i32) {
        let out = self
            .command(root)
            .args(["run", "--checks", "xid", "--format", "json", "--now"])
            .arg(now.to_string())
            .args(args)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (report, out.status.code().unwrap())
    }

    fn events(&self) -> Vec<lemonade_sql::node::EventRow> {
        let store = lemonade_sql::node::NodeStore::open(
            &self.dir.path().join("node.db"),
            std::time::Duration::from_secs(2),
        )
        .unwrap();
        store.events_since(0).unwrap()
    }
}

/// (entity, code, severity) of the report's findings that are not ok.
fn report_problems(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "ok")
        .map(|f| {
            (
                f["entity"].as_str().unwrap().to_string(),
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn p(entity: &str, code: &str, severity: &str) -> (String, String, String) {
    (entity.into(), code.into(), severity.into())
}

#[test]
fn runs_record_each_xid_once_and_resume_from_the_cursor() {
    let node = fixture::node("xid-79");
    let s = setup("");
    let (report, code) = s.run(node.root(), NOW, &[]);
    assert_eq!(code, 2);
    assert_eq!(report_problems(&report), [p("gpu3", "XID_79", "down")]);
    let (_, code) = s.run(node.root(), NOW + 300, &[]);
    assert_eq!(code, 2, "a down XID stays");
    assert_eq!(s.events().len(), 1, "recorded once");

    node.append(
        "/dev/kmsg",
        "4,71,86100000000,-;NVRM: Xid (PCI:0000:db:00): 94, pid=5, name=y, Contained: SM (0x1). RST: No, D-RST: No\n",
    );
    let (report, _) = s.run(node.root(), NOW + 600, &[]);
    assert_eq!(
        report_problems(&report),
        [p("gpu3", "XID_79", "down"), p("gpu7", "XID_94", "warning")]
    );
    let events = s.events();
    let codes: Vec<(&str, &str, i64)> = events
        .iter()
        .map(|e| (e.entity.as_str(), e.code.as_str(), e.seq))
        .collect();
    assert_eq!(codes, [("gpu3", "XID_79", 67), ("gpu7", "XID_94", 71)]);
    assert_eq!(events[1].occurred_at, BOOT + 86_100);
}

#[test]
fn windows_move_with_time_and_down_stays_until_reboot() {
    let s = setup("checks.xid.window_s = { warning = 600, drain = 7200 }");
    let node = fixture::node("xid-mig");
    let (report, code) = s.run(node.root(), XID_TIME + 300, &["--no-record"]);
    assert_eq!(
        (code, report_problems(&report)),
        (1, vec![p("gpu4", "XID_31", "warning")])
    );
    let (report, code) = s.run(node.root(), XID_TIME + 1200, &["--no-record"]);
    assert_eq!(code, 0, "{report:#}");
    let gpu4 = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["entity"] == "gpu4")
        .unwrap();
    assert!(gpu4["message"].as_str().unwrap().contains("XID 31 x1"));

    let node = fixture::node("xid-13-repeated");
    let (report, _) = s.run(node.root(), XID_TIME + 3600, &["--no-record"]);
    assert_eq!(report_problems(&report), [p("gpu1", "XID_13", "drain")]);
    let (report, _) = s.run(node.root(), XID_TIME + 3 * 3600, &["--no-record"]);
    assert_eq!(report_problems(&report), []);

    let node = fixture::node("xid-79");
    let (report, _) = s.run(node.root(), XID_TIME + 90 * 86_400, &[]);
    assert_eq!(report_problems(&report), [p("gpu3", "XID_79", "down")]);
}

#[test]
fn the_config_catalog_overrides_the_builtin_one() {
    let s = setup(
        "checks.xid.catalog.\"79\" = { severity = \"drain\", action = \"repair\" }\n\
         checks.xid.catalog.\"31\" = { severity = \"ok\" }",
    );
    let (report, _) = s.run(fixture::node("xid-79").root(), NOW, &["--no-record"]);
    assert_eq!(report_problems(&report), [p("gpu3", "XID_79", "drain")]);
    let f = &report["findings"].as_array().unwrap()[3];
    assert_eq!(f["action"], "repair");
    let (report, code) = s.run(fixture::node("xid-mig").root(), NOW, &["--no-record"]);
    assert_eq!((code, report_problems(&report)), (0, vec![]));
}

#[test]
fn a_relative_kmsg_file_replays_a_capture_from_this_machine() {
    let s = setup("");
    let capture = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture::nodes_dir().join("xid-48/dev/kmsg"),
        capture.path().join("node17.kmsg"),
    )
    .unwrap();
    let out = s
        .command(fixture::node("healthy").root())
        .current_dir(capture.path())
        .args(["run", "--checks", "xid", "--format", "json", "--no-record"])
        .args(["--kmsg-file", "node17.kmsg", "--now"])
        .arg(NOW.to_string())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report_problems(&report),
        [p("gpu5", "XID_48", "down"), p("gpu5", "XID_63", "drain")]
    );
}

#[test]
fn a_snapshot_replays_to_the_same_xid_findings() {
    let s = setup("");
    let node = fixture::node("xid-48");
    node.append(
        "/dev/kmsg",
        "4,69,36001000000,-;NVRM: Xid (PCI:0000:3a:00): oops, garbled\n",
    );
    let archive = s.dir.path().join("snap.tar.gz");
    let out = s
        .command(node.root())
        .arg("snapshot")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let unpacked = tempfile::tempdir().unwrap();
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap());
    tar::Archive::new(gz).unpack(unpacked.path()).unwrap();
    for captured in ["dev/kmsg", "proc/stat", "proc/sys/kernel/random/boot_id"] {
        assert!(unpacked.path().join(captured).is_file(), "{captured}");
    }

    let strip = |report: Value| -> Vec<Value> {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"] == "xid")
            .cloned()
            .collect()
    };
    let (live, _) = s.run(node.root(), NOW, &["--no-record"]);
    let (replayed, _) = s.run(unpacked.path(), NOW, &["--no-record"]);
    let (live, replayed) = (strip(live), strip(replayed));
    assert_eq!(live.len(), 9, "{live:#?}");
    assert!(live.iter().any(|f| f["code"] == "XID_PARSE_ERROR"));
    assert_eq!(live, replayed);
}

#[test]
fn a_kmsg_device_is_snapshotted_in_record_format_and_replays_as_a_file() {
    let device = Path::new("/dev/kmsg");
    let readable = std::fs::metadata(device)
        .map(|m| std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()))
        .unwrap_or(false)
        && std::fs::File::open(device).is_ok()
        && Path::new("/proc/sys/kernel/random/boot_id").is_file();
    // Root can always read its kernel log (the test suite runs as root to
    // start Slurm); a plain `cargo test` by a user skips, saying so, as the
    // real-Slurm tests do, and under scripts/test an unreadable log fails.
    if !readable && lemonade_tests::cluster::cannot_start().is_some() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: /dev/kmsg is not readable by this user; scripts/test runs it as root"
        );
        return;
    }
    assert!(
        readable,
        "/dev/kmsg is not readable: run the tests as root (scripts/test does)"
    );
    let config = Config::default();
    let live = CheckContext::standalone(
        "/",
        config.clone(),
        chrono::DateTime::from_timestamp(NOW, 0).unwrap(),
    );
    let files = Xid.snapshot_files(&live);
    assert_eq!(files.len(), 1);
    let (path, bytes) = &files[0];
    assert_eq!(path, Path::new("/dev/kmsg"));
    let text = String::from_utf8_lossy(bytes);
    assert!(text
        .lines()
        .next()
        .unwrap()
        .starts_with(|c: char| c.is_ascii_digit()));

    let replay = fixture::node("healthy");
    replay.write("/dev/kmsg", bytes);
    for copied in ["/proc/sys/kernel/random/boot_id", "/proc/stat"] {
        replay.write(copied, std::fs::read(copied).unwrap());
    }
    let replayed = run(&replay, &config, None, NOW);
    let state: XidState = serde_json::from_value(replayed.state.unwrap()).unwrap();
    let last = state.cursor.expect("records were replayed").seq;
    // Every record the device gave is a well-formed record of the file.
    assert!(replayed.findings.iter().all(|f| f.code != "KMSG_MALFORMED"));
    let first_line = text.lines().next().unwrap();
    let first_seq: u64 = first_line.split(',').nth(1).unwrap().parse().unwrap();
    assert!(last >= first_seq);
}

#[test]
fn healthcheck_list_names_the_edition_of_nvidias_xid_catalog() {
    let s = setup("");
    let node = fixture::node("healthy");
    let out = s.command(node.root()).arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("XID catalog: NVIDIA Xid Catalog"))
        .unwrap_or_else(|| panic!("no catalog line in:\n{text}"));
    assert!(
        line.contains("2025-10-29") && line.ends_with(" entries"),
        "{line}"
    );
}
