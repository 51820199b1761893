//! The `ib` check on the fixture node: healthy, one overlay per fault,
//! counter deltas across runs, excluded ports, config expectations.

use healthcheck::check::{Check, CheckContext};
use healthcheck::checks::ib::Ib;
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};

const T0: i64 = 1_763_600_000;

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
    let out = Ib.run(&ctx).expect("ib runs");
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

fn counter(node: &FixtureNode, device: &str, name: &str, value: u64) {
    node.write(
        &format!("/sys/class/infiniband/{device}/ports/1/counters/{name}"),
        format!("{value}\n"),
    );
}

#[test]
fn healthy_node_is_all_ok_and_skips_the_management_port() {
    let node = fixture::node("healthy");
    let (findings, _) = run(&node, &config(), None, T0);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    assert_eq!(
        findings.len(),
        9,
        "8 ports and the HCA count: {findings:#?}"
    );
    assert!(!findings.iter().any(|f| f.entity.starts_with("mlx5_8")));
    let port0 = findings.iter().find(|f| f.entity == "mlx5_0:1").unwrap();
    assert_eq!(port0.pci_bus_id.as_deref(), Some("0000:19:00.0"));
}

#[test]
fn each_fault_overlay_gives_its_code_severity_and_entity() {
    for (fault, expected) in [
        ("ib-port-down", ("mlx5_3:1", "IB_PORT_DOWN", Severity::Down)),
        (
            "ib-rate-degraded",
            ("mlx5_5:1", "IB_RATE_DEGRADED", Severity::Drain),
        ),
        ("ib-hca-missing", ("hcas", "IB_HCA_MISSING", Severity::Down)),
    ] {
        let node = fixture::node(fault);
        let (findings, _) = run(&node, &config(), None, T0);
        assert_eq!(problems(&findings), [expected], "{fault}");
    }
}

#[test]
fn excluded_and_ethernet_ports_are_skipped() {
    let node = fixture::node("healthy");
    node.write("/sys/class/infiniband/mlx5_8/ports/1/state", "1: DOWN\n");
    let mut config = config();
    let (findings, _) = run(&node, &config, None, T0);
    assert!(problems(&findings).is_empty(), "excluded by name");

    config.checks.ib.exclude.clear();
    let (findings, _) = run(&node, &config, None, T0);
    assert!(problems(&findings).is_empty(), "skipped as Ethernet");

    config.checks.ib.skip_ethernet = false;
    let (findings, _) = run(&node, &config, None, T0);
    assert_eq!(
        problems(&findings),
        [("mlx5_8:1", "IB_PORT_DOWN", Severity::Down)]
    );

    config.checks.ib.exclude = vec!["mlx5_8:1".into()];
    let (findings, _) = run(&node, &config, None, T0);
    assert!(problems(&findings).is_empty(), "excluded as device:port");
}

#[test]
fn expected_rate_and_hca_count_come_from_config() {
    let node = fixture::node("healthy");
    let mut config = config();
    config.checks.ib.expected_rate_gbps = Some(800.0);
    config.checks.ib.expected_hcas = Some(9);
    let (findings, _) = run(&node, &config, None, T0);
    let bad = problems(&findings);
    assert_eq!(bad.len(), 9, "{bad:#?}");
    assert!(bad.contains(&("hcas", "IB_HCA_MISSING", Severity::Down)));
    assert!(bad.contains(&("mlx5_7:1", "IB_RATE_DEGRADED", Severity::Drain)));
}

#[test]
fn counter_growth_between_runs_is_judged_per_hour() {
    let node = fixture::node("healthy");
    let config = config();
    // Counts from before the first run are a baseline.
    counter(&node, "mlx5_1", "symbol_error", 40_000);
    let (first, state) = run(&node, &config, None, T0);
    assert!(problems(&first).is_empty(), "{first:#?}");

    counter(&node, "mlx5_1", "symbol_error", 40_500); // +500: above 100/h
    counter(&node, "mlx5_2", "link_downed", 5); // above 3/h
    counter(&node, "mlx5_4", "port_rcv_errors", 20); // below 100/h
    let (second, state) = run(&node, &config, state, T0 + 300);
    assert_eq!(
        problems(&second),
        [
            ("mlx5_1:1", "IB_SYMBOL_ERROR_RATE", Severity::Warning),
            ("mlx5_2:1", "IB_LINK_DOWNED_RATE", Severity::Drain),
        ]
    );

    // An hour later with no new errors, the rates are back to zero.
    let (later, _) = run(&node, &config, state, T0 + 300 + 3700);
    assert!(problems(&later).is_empty(), "{later:#?}");
}

#[test]
fn a_counter_reset_is_not_negative_growth() {
    let node = fixture::node("healthy");
    let config = config();
    counter(&node, "mlx5_6", "symbol_error", 65_535);
    let (_, state) = run(&node, &config, None, T0);
    // The driver was reloaded: the counter starts again from zero.
    counter(&node, "mlx5_6", "symbol_error", 3);
    let (findings, state) = run(&node, &config, state, T0 + 300);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    let last = &state.unwrap()["ports"]["mlx5_6:1"]["last"]["symbol_error"];
    assert_eq!(last, 3);
}

#[test]
fn a_malformed_counter_names_the_file_and_other_ports_are_still_judged() {
    let node = fixture::node("ib-rate-degraded");
    counter(&node, "mlx5_0", "symbol_error", 0);
    node.write(
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error",
        "lots\n",
    );
    let (findings, _) = run(&node, &config(), None, T0);
    let unknown = findings
        .iter()
        .find(|f| f.severity == Severity::Unknown)
        .expect("an unknown finding");
    assert_eq!(unknown.entity, "mlx5_0:1");
    assert!(
        unknown
            .message
            .contains("/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"),
        "{}",
        unknown.message
    );
    assert!(findings.iter().any(|f| f.code == "IB_RATE_DEGRADED"));
}
