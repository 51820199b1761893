//! Kernel and fabric faults found in the XID check's kernel-log pass (issue
//! 34): one fixture overlay per fault in its real log format, every text form
//! that `--kmsg-file` reads, and lines from before the current boot.

use healthcheck::check::{Check, CheckContext, CheckOutput};
use healthcheck::checks::xid::Xid;
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};

/// `btime` of the fixture node: 2026-11-20T00:00:00Z.
const BOOT: i64 = 1_795_132_800;
/// A day and a half after boot: after every fixture line in any time zone.
const NOW: i64 = BOOT + 36 * 3600;

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn run(node: &FixtureNode, config: Config, previous: Option<serde_json::Value>) -> CheckOutput {
    let ctx = CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config,
            chrono::DateTime::from_timestamp(NOW, 0).unwrap(),
        )
    };
    Xid.run(&ctx).expect("xid runs")
}

fn problems(findings: &[Finding]) -> Vec<(String, String, Severity)> {
    let mut bad: Vec<_> = findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
        .collect();
    bad.sort();
    bad
}

fn p(entity: &str, code: &str, severity: Severity) -> (String, String, Severity) {
    (entity.to_string(), code.to_string(), severity)
}

#[test]
fn each_kernel_fault_overlay_gives_its_code_entity_and_severity() {
    use Severity::*;
    for (fault, expected) in [
        (
            "kmsg-sxid",
            vec![
                // 12028 is in the catalog (drain); the 11012 single-bit ECC is not reported.
                p("nvswitch0", "SXID_20034", Drain),
                p("nvswitch3", "SXID_12028", Drain),
            ],
        ),
        (
            "kmsg-cper",
            // One corrected record is under the count: recorded, not reported.
            vec![p("node", "CPER_RECOVERABLE", Drain)],
        ),
        ("kmsg-hung-task", vec![p("python3", "HUNG_TASK", Warning)]),
        ("kmsg-soft-lockup", vec![p("cpu12", "SOFT_LOCKUP", Warning)]),
        ("kmsg-peermem", vec![p("node", "PEERMEM_ERROR", Warning)]),
        (
            "kmsg-gpu-off-bus",
            vec![p("gpu3", "GPU_FELL_OFF_BUS", Down)],
        ),
        ("kmsg-gsp-timeout", vec![p("node", "GSP_TIMEOUT", Drain)]),
    ] {
        let node = fixture::node(fault);
        let out = run(&node, config(), None);
        assert_eq!(problems(&out.findings), expected, "{fault}");
        assert!(
            !out.events.is_empty() && out.events.len() <= expected.len() + 2,
            "{fault}: one event per fault and entity, {:?}",
            out.events
        );
    }
}

#[test]
fn kernel_faults_can_be_turned_off_and_each_severity_can_be_changed() {
    let node = fixture::node("kmsg-hung-task");
    let mut quiet = config();
    quiet.checks.xid.kernel_faults.enabled = false;
    assert!(problems(&run(&node, quiet, None).findings).is_empty());
    let mut strict = config();
    strict.checks.xid.kernel_faults.hung_task_severity = Severity::Drain;
    assert_eq!(
        problems(&run(&node, strict, None).findings),
        [p("python3", "HUNG_TASK", Severity::Drain)]
    );
}

#[test]
fn enough_corrected_cper_records_in_the_window_warn() {
    let node = fixture::node("kmsg-cper");
    for seq in 78..88u64 {
        node.append(
            "/dev/kmsg",
            format!(
                "4,{seq},{},-;{{3}}[Hardware Error]: event severity: corrected\n",
                36_000_300_000u64 + seq * 1_000_000
            ),
        );
    }
    let found = problems(&run(&node, config(), None).findings);
    assert_eq!(
        found,
        [
            p("node", "CPER_CORRECTED", Severity::Warning),
            p("node", "CPER_RECOVERABLE", Severity::Drain),
        ]
    );
}

#[test]
fn a_gpu_off_the_bus_with_its_xid_79_is_one_finding_and_one_event() {
    let node = fixture::node("xid-79");
    let out = run(&node, config(), None);
    let codes: Vec<_> = problems(&out.findings)
        .into_iter()
        .map(|(_, code, _)| code)
        .collect();
    assert_eq!(codes, ["XID_79"]);
    assert_eq!(out.events.len(), 1, "{:?}", out.events);
}

/// The healthy node with a kernel log sample in one text form at `file`,
/// which the config names as the site's `kmsg_file`.
fn form_node(sample: &str, file: &str) -> (FixtureNode, Config) {
    let node = fixture::node("healthy");
    let text = std::fs::read(
        lemonade_tests::tests_dir()
            .join("fixtures/kernel-log-forms")
            .join(sample),
    )
    .unwrap();
    node.write(file, text);
    let mut config = config();
    config.checks.xid.kmsg_file = file.into();
    (node, config)
}

#[test]
fn every_text_form_of_the_kernel_log_gives_the_same_findings() {
    let expected = [
        p("gpu3", "XID_79", Severity::Down),
        p("nvswitch0", "SXID_20034", Severity::Drain),
    ];
    for (fault, file) in [
        ("dmesg.txt", "/var/log/dmesg"),
        ("dmesg-T.txt", "/var/log/dmesg"),
        ("dmesg-iso.txt", "/var/log/dmesg"),
        ("dmesg-x.txt", "/var/log/dmesg"),
        ("dmesg-x-T.txt", "/var/log/dmesg"),
        ("dmesg-x-iso.txt", "/var/log/dmesg"),
        ("journalctl-k-short-iso.txt", "/var/log/kernel.log"),
    ] {
        let (node, config) = form_node(fault, file);
        let out = run(&node, config, None);
        let found: Vec<_> = problems(&out.findings)
            .into_iter()
            .filter(|(_, code, _)| code != "KMSG_MALFORMED")
            .collect();
        assert_eq!(found, expected, "{fault}");
        let xid = out.events.iter().find(|e| e.code == "XID_79").unwrap();
        assert!(
            (BOOT..NOW).contains(&xid.occurred_at),
            "{fault}: the XID's time {} reads in the form's clock",
            xid.occurred_at
        );
    }
}

#[test]
fn unreadable_lines_are_counted_never_fatal() {
    let (node, config) = form_node("dmesg.txt", "/var/log/dmesg");
    let out = run(&node, config, None);
    let malformed: Vec<_> = out
        .findings
        .iter()
        .filter(|f| f.code == "KMSG_MALFORMED")
        .collect();
    assert_eq!(malformed.len(), 1, "{:#?}", out.findings);
    assert_eq!(malformed[0].severity, Severity::Unknown);
    assert!(
        malformed[0].message.contains("line 5"),
        "{}",
        malformed[0].message
    );
}

#[test]
fn a_dmesg_file_that_grows_is_read_from_where_the_last_run_stopped() {
    let (node, config) = form_node("dmesg.txt", "/var/log/dmesg");
    let first = run(&node, config.clone(), None);
    node.append(
        "/var/log/dmesg",
        "[36100.000000] INFO: task python3:2257218 blocked for more than 122 seconds.\n",
    );
    let second = run(&node, config, first.state);
    let codes: Vec<_> = second.events.iter().map(|e| e.code.as_str()).collect();
    assert_eq!(codes, ["HUNG_TASK"], "only the new line is new");
    assert!(problems(&second.findings).contains(&p("gpu3", "XID_79", Severity::Down)));
}

#[test]
fn kernel_events_from_before_this_boot_never_count_after_the_reboot() {
    // The journal file holds the previous boot too: an XID 79 on gpu0 and a
    // hung task the evening before; the node has rebooted since (btime).
    let (node, config) = form_node("journalctl-k-short-iso.txt", "/var/log/kernel.log");
    let out = run(&node, config, None);
    let found = problems(&out.findings);
    assert!(
        !found.iter().any(|(entity, _, _)| entity == "gpu0"),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|(_, code, _)| code == "HUNG_TASK"),
        "{found:?}"
    );
    assert!(
        out.events.iter().all(|e| e.occurred_at >= BOOT),
        "{:?}",
        out.events
    );
}

#[test]
fn the_books_checks_chapter_lists_every_kernel_fault_code() {
    use healthcheck::checks::xid::faults::*;
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/operate.md"),
    )
    .unwrap();
    let missing: Vec<_> = [
        "SXID_<n>",
        CPER_FATAL,
        CPER_RECOVERABLE,
        CPER_CORRECTED,
        HUNG_TASK,
        SOFT_LOCKUP,
        PEERMEM_ERROR,
        GPU_FELL_OFF_BUS,
        GSP_TIMEOUT,
    ]
    .into_iter()
    .filter(|code| !readme.contains(&format!("`{code}`")))
    .collect();
    assert!(
        missing.is_empty(),
        "docs/src/operate.md does not list: {missing:?}"
    );
}

#[test]
fn a_log_file_whose_clock_starts_over_counts_only_the_last_boot() {
    // A dmesg file kept across a reboot: gpu0 fell off the bus and CPU 3
    // locked up in the boot before; only the switch's SXid is this boot's.
    let (node, config) = form_node("dmesg-two-boots.txt", "/var/log/dmesg");
    let out = run(&node, config, None);
    assert_eq!(
        problems(&out.findings),
        [p("nvswitch0", "SXID_20034", Severity::Drain)]
    );
    let codes: Vec<_> = out.events.iter().map(|e| e.code.as_str()).collect();
    assert_eq!(codes, ["SXID_20034"]);
}

#[test]
fn a_dmesg_decode_log_in_each_time_format_reads_every_line_and_finds_the_xid() {
    for sample in ["dmesg-x-iso.txt", "dmesg-x-T.txt"] {
        let (node, config) = form_node(sample, "/var/log/dmesg");
        let out = run(&node, config, None);
        let found = problems(&out.findings);
        assert!(
            !found.iter().any(|(_, code, _)| code == "KMSG_MALFORMED"),
            "{sample}: {found:?}"
        );
        assert!(
            found.contains(&p("gpu3", "XID_79", Severity::Down)),
            "{sample}: {found:?}"
        );
    }
}
