//! The `pcie` check on the fixture node: healthy, one overlay per fault, AER
//! deltas across runs, config expectations, malformed sysfs values.

use healthcheck::check::{Check, CheckContext};
use healthcheck::checks::pcie::Pcie;
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};

const T0: i64 = 1_763_600_000;
const GPU0: &str = "/sys/bus/pci/devices/0000:18:00.0";

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn run(
    node: &FixtureNode,
    config: &Config,
    previous: Option<serde_json::Value>,
    now: i64,
) -> (Vec<Finding>, Option<serde_json::Value>) {
    let ctx = CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config.clone(),
            chrono::DateTime::from_timestamp(now, 0).unwrap(),
        )
    };
    let out = Pcie.run(&ctx).expect("pcie runs");
    (out.findings, out.state)
}

fn problems(findings: &[Finding]) -> Vec<&Finding> {
    findings.iter().filter(|f| !f.is_ok()).collect()
}

fn aer(total_name: &str, total: u64) -> String {
    format!("Undefined 0\nDLP {total}\nSDES 0\nTLP 0\n{total_name} {total}\n")
}

#[test]
fn healthy_node_is_all_ok() {
    let node = fixture::node("healthy");
    let (findings, _) = run(&node, &config(), None, T0);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    // 8 GPUs, 8 HCAs, the management NIC, and the two expectations; the
    // Intel root ports are not watched.
    assert_eq!(findings.len(), 19, "{findings:#?}");
    let gpu0 = findings
        .iter()
        .find(|f| f.entity == "0000:18:00.0")
        .unwrap();
    assert_eq!(gpu0.pci_bus_id.as_deref(), Some("0000:18:00.0"));
    assert!(findings.iter().any(|f| f.entity == "gpu"));
    assert!(!findings.iter().any(|f| f.entity.starts_with("0000:17:")));
}

#[test]
fn each_fault_overlay_gives_its_code_severity_and_entity() {
    for (fault, code, severity, entity) in [
        (
            "pcie-gpu-missing",
            "PCIE_DEVICE_MISSING",
            Severity::Down,
            "gpu",
        ),
        (
            "pcie-width-degraded",
            "PCIE_WIDTH_DEGRADED",
            Severity::Drain,
            "0000:5d:00.0",
        ),
        (
            "pcie-speed-degraded",
            "PCIE_SPEED_DEGRADED",
            Severity::Drain,
            "0000:9a:00.0",
        ),
        (
            "pcie-max-degraded",
            "PCIE_SPEED_DEGRADED",
            Severity::Drain,
            "0000:ab:00.0",
        ),
        (
            "pcie-link-down",
            "PCIE_LINK_DOWN",
            Severity::Down,
            "0000:2b:00.0",
        ),
    ] {
        let node = fixture::node(fault);
        let (findings, _) = run(&node, &config(), None, T0);
        let bad = problems(&findings);
        assert_eq!(bad.len(), 1, "{fault}: {bad:#?}");
        assert_eq!(
            (
                bad[0].code.as_str(),
                bad[0].severity,
                bad[0].entity.as_str()
            ),
            (code, severity, entity),
            "{fault}"
        );
    }
}

#[test]
fn a_lower_max_is_caught_only_by_the_config_expectation() {
    let node = fixture::node("pcie-max-degraded");
    let mut config = config();
    for e in &mut config.checks.pcie.expect {
        e.speed_gts = None;
    }
    let (findings, _) = run(&node, &config, None, T0);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    assert!(
        findings.iter().any(|f| f.entity == "0000:ab:00.0"),
        "the degraded device was judged (and found as it is expected to be): {findings:#?}"
    );
    let (with_expectation, _) = run(&node, &self::config(), None, T0);
    assert_eq!(
        problems(&with_expectation)
            .iter()
            .map(|f| (f.code.as_str(), f.entity.as_str()))
            .collect::<Vec<_>>(),
        [("PCIE_SPEED_DEGRADED", "0000:ab:00.0")],
        "the config's expected speed catches it"
    );
}

#[test]
fn expected_counts_come_from_config() {
    let node = fixture::node("healthy");
    let mut config = config();
    config.checks.pcie.expect[0].count = 9;
    let (findings, _) = run(&node, &config, None, T0);
    let bad = problems(&findings);
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert_eq!(bad[0].code, "PCIE_DEVICE_MISSING");
    assert_eq!(bad[0].expected.as_deref(), Some("9"));
    assert_eq!(bad[0].actual.as_deref(), Some("8"));
}

#[test]
fn skip_speed_leaves_idle_gpus_alone_but_not_their_width() {
    let mut config = config();
    config.checks.pcie.skip_speed = vec!["0x10de:0x0302".into()];
    let (findings, _) = run(&fixture::node("pcie-speed-degraded"), &config, None, T0);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    let (findings, _) = run(&fixture::node("pcie-width-degraded"), &config, None, T0);
    assert_eq!(problems(&findings)[0].code, "PCIE_WIDTH_DEGRADED");
}

#[test]
fn aer_growth_between_runs_is_judged_and_resets_are_not() {
    let node = fixture::node("healthy");
    let config = config();
    // Errors from before the first run are a baseline, not news.
    node.write(
        &format!("{GPU0}/aer_dev_nonfatal"),
        aer("TOTAL_ERR_NONFATAL", 4),
    );
    let (first, state) = run(&node, &config, None, T0);
    assert!(problems(&first).is_empty(), "{first:#?}");

    node.write(&format!("{GPU0}/aer_dev_fatal"), aer("TOTAL_ERR_FATAL", 1));
    node.write(
        "/sys/bus/pci/devices/0000:2a:00.0/aer_dev_nonfatal",
        aer("TOTAL_ERR_NONFATAL", 2),
    );
    node.write(
        "/sys/bus/pci/devices/0000:db:00.0/aer_dev_correctable",
        aer("TOTAL_ERR_COR", 5000),
    );
    let (second, state) = run(&node, &config, state, T0 + 300);
    let mut bad: Vec<_> = problems(&second)
        .into_iter()
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity))
        .collect();
    bad.sort();
    assert_eq!(
        bad,
        [
            ("0000:18:00.0", "PCIE_AER_FATAL", Severity::Drain),
            ("0000:2a:00.0", "PCIE_AER_NONFATAL", Severity::Warning),
            ("0000:db:00.0", "PCIE_AER_CORRECTABLE", Severity::Warning),
        ]
    );

    // No new fatal errors: the fatal finding clears. Then the counter goes
    // down (the driver was reloaded): not negative growth, not a finding.
    let (third, state) = run(&node, &config, state, T0 + 600);
    assert!(!third.iter().any(|f| f.code == "PCIE_AER_FATAL"));
    node.write(&format!("{GPU0}/aer_dev_fatal"), aer("TOTAL_ERR_FATAL", 0));
    let (fourth, _) = run(&node, &config, state, T0 + 900);
    assert!(
        !fourth
            .iter()
            .any(|f| f.entity == "0000:18:00.0" && !f.is_ok()),
        "{fourth:#?}"
    );
}

#[test]
fn correctable_rate_falls_out_of_the_window() {
    let node = fixture::node("healthy");
    let config = config();
    let (_, state) = run(&node, &config, None, T0);
    node.write(
        "/sys/bus/pci/devices/0000:db:00.0/aer_dev_correctable",
        aer("TOTAL_ERR_COR", 5000),
    );
    let (_, state) = run(&node, &config, state, T0 + 300);
    let (later, _) = run(&node, &config, state, T0 + 300 + 3700);
    assert!(problems(&later).is_empty(), "{later:#?}");
}

#[test]
fn a_malformed_value_names_the_file_and_other_devices_are_still_judged() {
    let node = fixture::node("pcie-width-degraded");
    node.write(&format!("{GPU0}/current_link_width"), "garbage\n");
    let (findings, _) = run(&node, &config(), None, T0);
    let unknown: Vec<_> = findings
        .iter()
        .filter(|f| f.severity == Severity::Unknown)
        .collect();
    assert_eq!(unknown.len(), 1, "{findings:#?}");
    assert_eq!(unknown[0].entity, "0000:18:00.0");
    assert!(
        unknown[0]
            .message
            .contains("/sys/bus/pci/devices/0000:18:00.0/current_link_width"),
        "{}",
        unknown[0].message
    );
    assert!(unknown[0].message.contains("garbage"));
    assert!(findings.iter().any(|f| f.code == "PCIE_WIDTH_DEGRADED"));
}

#[test]
fn virtual_functions_are_not_judged() {
    let node = fixture::node("healthy");
    // An SR-IOV VF of the first HCA: no link of its own, so width 0.
    let vf = "/sys/bus/pci/devices/0000:19:00.1";
    for (file, value) in [
        ("vendor", "0x15b3"),
        ("device", "0x101e"),
        ("class", "0x020700"),
        ("current_link_speed", "Unknown"),
        ("max_link_speed", "Unknown"),
        ("current_link_width", "0"),
        ("max_link_width", "0"),
    ] {
        node.write(&format!("{vf}/{file}"), format!("{value}\n"));
    }
    std::os::unix::fs::symlink("../0000:19:00.0", node.path(&format!("{vf}/physfn"))).unwrap();
    let (findings, _) = run(&node, &config(), None, T0);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    assert!(!findings.iter().any(|f| f.entity == "0000:19:00.1"));
}
