//! The host checks (memory, cpus, block, services, firmware) on the fixture
//! node: healthy, and one overlay per fault with its code, entity and severity.

use healthcheck::check::{Check, CheckContext};
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};

const T0: i64 = 1_763_600_000;

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn run(
    check: &dyn Check,
    node: &FixtureNode,
    previous: Option<serde_json::Value>,
    now: i64,
) -> (Vec<Finding>, Option<serde_json::Value>) {
    let ctx = CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config(),
            chrono::DateTime::from_timestamp(now, 0).unwrap(),
        )
    };
    let out = check
        .run(&ctx)
        .unwrap_or_else(|e| panic!("{} runs: {e}", check.name()));
    (out.findings, out.state)
}

fn problems(findings: &[Finding]) -> Vec<(&str, &str, Severity)> {
    let mut bad: Vec<_> = findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity))
        .collect();
    bad.sort();
    bad
}

/// Each host check by name, as the registry has it.
fn check(name: &str) -> std::sync::Arc<dyn Check> {
    healthcheck::checks::all()
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no check {name}"))
}

#[test]
fn the_healthy_node_is_all_ok_for_every_host_check() {
    let node = fixture::node("healthy");
    for name in ["memory", "cpus", "block", "services", "firmware"] {
        let (findings, _) = run(&*check(name), &node, None, T0);
        assert!(!findings.is_empty(), "{name} judged nothing");
        assert!(problems(&findings).is_empty(), "{name}: {findings:#?}");
    }
}

#[test]
fn each_host_fault_overlay_gives_its_code_entity_and_severity() {
    for (fault, name, expected) in [
        (
            "memory-dimm-mapped-out",
            "memory",
            ("memory", "MEM_TOTAL_LOW", Severity::Drain),
        ),
        (
            "memory-edac-ue",
            "memory",
            ("mc1/dimm5", "EDAC_UE", Severity::Down),
        ),
        (
            "cpu-offline",
            "cpus",
            ("cpus", "CPU_OFFLINE", Severity::Drain),
        ),
        (
            "block-nvme-missing",
            "block",
            ("nvme", "NVME_MISSING", Severity::Drain),
        ),
        (
            "block-nvme-readonly",
            "block",
            ("nvme4n1", "BLOCK_READ_ONLY", Severity::Drain),
        ),
        (
            "block-nvme-dead",
            "block",
            ("nvme7n1", "NVME_NOT_LIVE", Severity::Drain),
        ),
        (
            "services-munged-missing",
            "services",
            ("munged", "SERVICE_MISSING", Severity::Drain),
        ),
        (
            "services-slurmd-zombie",
            "services",
            ("slurmd", "SERVICE_MISSING", Severity::Drain),
        ),
        (
            "firmware-bios-old",
            "firmware",
            ("bios", "FIRMWARE_MISMATCH", Severity::Warning),
        ),
        (
            "firmware-hca-odd",
            "firmware",
            ("mlx5_5", "FIRMWARE_MISMATCH", Severity::Warning),
        ),
    ] {
        let node = fixture::node(fault);
        let (findings, _) = run(&*check(name), &node, None, T0);
        assert_eq!(problems(&findings), [expected], "{fault}");
    }
}

#[test]
fn corrected_memory_errors_between_runs_warn() {
    let node = fixture::node("healthy");
    let memory = check("memory");
    let (_, state) = run(&*memory, &node, None, T0);
    let dimm = "/sys/devices/system/edac/mc/mc0/dimm3/dimm_ce_count";
    node.write(dimm, "400\n");
    let (findings, _) = run(&*memory, &node, state, T0 + 300);
    assert_eq!(
        problems(&findings),
        [("mc0/dimm3", "EDAC_CE_RATE", Severity::Warning)]
    );
}

#[test]
fn a_garbled_edac_counter_is_unknown_and_names_its_file() {
    let node = fixture::node("healthy");
    node.write(
        "/sys/devices/system/edac/mc/mc0/dimm1/dimm_ue_count",
        "n/a\n",
    );
    let (findings, _) = run(&*check("memory"), &node, None, T0);
    let bad = findings.iter().find(|f| !f.is_ok()).expect("a finding");
    assert_eq!(
        (bad.entity.as_str(), bad.severity),
        ("mc0/dimm1", Severity::Unknown)
    );
    assert!(
        bad.message
            .contains("/sys/devices/system/edac/mc/mc0/dimm1/dimm_ue_count"),
        "{}",
        bad.message
    );
}

#[test]
fn a_garbled_cpu_list_is_unknown_and_names_its_file() {
    let node = fixture::node("healthy");
    node.write("/sys/devices/system/cpu/online", "0-abc\n");
    let ctx = CheckContext::standalone(
        node.root(),
        config(),
        chrono::DateTime::from_timestamp(T0, 0).unwrap(),
    );
    let err = check("cpus").run(&ctx).unwrap_err().to_string();
    assert!(err.contains("/sys/devices/system/cpu/online"), "{err}");
}

#[test]
fn an_uncorrected_error_no_dimm_is_blamed_for_is_reported_on_its_controller() {
    let node = fixture::node("healthy");
    node.write("/sys/devices/system/edac/mc/mc0/ue_noinfo_count", "1\n");
    let (findings, _) = run(&*check("memory"), &node, None, T0);
    assert_eq!(problems(&findings), [("mc0", "EDAC_UE", Severity::Down)]);
}

#[test]
fn the_books_checks_chapter_lists_every_check_and_every_host_code() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/operate.md"
    ))
    .expect("docs/src/operate.md");
    let mut missing: Vec<String> = healthcheck::checks::all()
        .iter()
        .map(|c| format!("| `{}` |", c.name()))
        .filter(|row| !readme.contains(row.as_str()))
        .collect();
    use healthcheck::checks::{block, cpus, firmware, memory, services, xid};
    for code in [
        memory::evaluate::MEM_TOTAL_LOW,
        memory::evaluate::EDAC_UE,
        memory::evaluate::EDAC_CE_RATE,
        memory::evaluate::EDAC_UNREADABLE,
        cpus::evaluate::CPU_OFFLINE,
        block::evaluate::NVME_MISSING,
        block::evaluate::NVME_SIZE_LOW,
        block::evaluate::NVME_NOT_LIVE,
        block::evaluate::BLOCK_READ_ONLY,
        block::evaluate::BLOCK_UNREADABLE,
        services::evaluate::SERVICE_MISSING,
        firmware::evaluate::FIRMWARE_MISMATCH,
        firmware::evaluate::FIRMWARE_UNREADABLE,
        xid::kernel_log::MCE_HARDWARE_ERROR,
        xid::kernel_log::MCE_EVENTS_LOGGED,
        xid::kernel_log::EDAC_CE_LOGGED,
        xid::kernel_log::EDAC_UE_LOGGED,
        xid::kernel_log::BLOCK_IO_ERROR,
        xid::kernel_log::FS_ERROR,
        xid::kernel_log::NFS_NOT_RESPONDING,
    ] {
        if !readme.contains(&format!("`{code}`")) {
            missing.push(code.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "docs/src/operate.md does not list: {missing:?}"
    );
}

#[test]
fn kernel_log_overlays_give_their_codes_from_the_xid_pass() {
    for (fault, expected) in [
        (
            "kmsg-mce",
            vec![
                ("node", "MCE_EVENTS_LOGGED", Severity::Warning),
                ("node", "MCE_HARDWARE_ERROR", Severity::Drain),
            ],
        ),
        (
            "kmsg-edac-ce",
            vec![("mc0", "EDAC_CE_LOGGED", Severity::Warning)],
        ),
        (
            "kmsg-nvme-io-error",
            vec![("nvme4n1", "BLOCK_IO_ERROR", Severity::Drain)],
        ),
        (
            "kmsg-xfs-shutdown",
            vec![("md126", "FS_ERROR", Severity::Drain)],
        ),
        (
            // nfs01 came back; nfs02 did not.
            "kmsg-nfs-not-responding",
            vec![("nfs02.cluster", "NFS_NOT_RESPONDING", Severity::Warning)],
        ),
    ] {
        let node = fixture::node(fault);
        let (findings, _) = run(&*check("xid"), &node, None, T0);
        assert_eq!(problems(&findings), expected, "{fault}");
    }
}

#[test]
fn one_kernel_log_pass_serves_xids_and_host_errors_and_the_cursor_keeps_them() {
    let node = fixture::node("xid-79");
    node.append(
        "/dev/kmsg",
        "3,71,36000300000,-;blk_update_request: I/O error, dev nvme2n1, sector 8 op 0x0:(READ) flags 0x0\n",
    );
    let xid = check("xid");
    let ctx = CheckContext::standalone(
        node.root(),
        config(),
        chrono::DateTime::from_timestamp(T0, 0).unwrap(),
    );
    let first = xid.run(&ctx).expect("xid runs");
    let codes = |f: &[Finding]| {
        let mut c: Vec<String> = f
            .iter()
            .filter(|f| !f.is_ok())
            .map(|f| f.code.clone())
            .collect();
        c.sort();
        c
    };
    assert_eq!(codes(&first.findings), ["BLOCK_IO_ERROR", "XID_79"]);
    let mut event_codes: Vec<&str> = first.events.iter().map(|e| e.code.as_str()).collect();
    event_codes.sort();
    assert_eq!(event_codes, ["BLOCK_IO_ERROR", "XID_79"]);

    // The next run reads nothing new (one cursor) and still reports both.
    let second = xid
        .run(&CheckContext {
            previous: first.state.clone(),
            ..ctx
        })
        .expect("xid runs");
    assert!(second.events.is_empty(), "{:?}", second.events);
    assert_eq!(codes(&second.findings), ["BLOCK_IO_ERROR", "XID_79"]);
}

#[test]
fn kernel_log_matchers_can_be_turned_off() {
    let node = fixture::node("kmsg-mce");
    let run = |enabled: bool| {
        let mut config = config();
        config.checks.xid.kernel_log.enabled = enabled;
        let ctx = CheckContext::standalone(
            node.root(),
            config,
            chrono::DateTime::from_timestamp(T0, 0).unwrap(),
        );
        check("xid").run(&ctx).expect("xid runs").findings
    };
    let on = run(true);
    assert!(
        !problems(&on).is_empty(),
        "the fixture's MCE is found while the matchers are on: {on:#?}"
    );
    let off = run(false);
    assert!(problems(&off).is_empty(), "{off:#?}");
    assert!(
        !off.is_empty() && off.iter().all(|f| f.check == "xid"),
        "the XID check still ran and reported: {off:#?}"
    );
}
