//! Site rules for XIDs (issue 34, item 5): `[[checks.xid.rule]]` counts an
//! XID's occurrences on one GPU across runs (the check's state in the node
//! database) and sets the severity once the count is reached in the window.

use healthcheck::check::{Check, CheckContext, CheckOutput};
use healthcheck::checks::xid::Xid;
use healthcheck::{Config, Severity};
use lemonade_tests::fixture::{self, FixtureNode};

/// `btime` of the fixture node: 2026-11-20T00:00:00Z.
const BOOT: i64 = 1_795_132_800;

fn config(rules: &str) -> Config {
    let mut config =
        lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config");
    let site: Config = lemonade_config::load_str(rules, std::path::Path::new("site.toml"), None)
        .expect("site rules");
    config.checks.xid.rule = site.checks.xid.rule;
    config
}

fn run(node: &FixtureNode, config: &Config, previous: Option<serde_json::Value>) -> CheckOutput {
    let now = BOOT + 12 * 3600;
    let ctx = CheckContext {
        previous,
        ..CheckContext::standalone(
            node.root(),
            config.clone(),
            chrono::DateTime::from_timestamp(now, 0).unwrap(),
        )
    };
    Xid.run(&ctx).expect("xid runs")
}

/// An XID 43 (a channel reset, `ok` in the catalog) on gpu1 at `secs` after boot.
fn xid43(node: &FixtureNode, seq: u64, secs: u64) {
    node.append(
        "/dev/kmsg",
        format!(
            "4,{seq},{},-;NVRM: Xid (PCI:0000:2a:00): 43, pid=5120, name=train.py, Ch 00000010\n",
            secs * 1_000_000
        ),
    );
}

fn gpu1(out: &CheckOutput) -> (Severity, String) {
    let f = out.findings.iter().find(|f| f.entity == "gpu1").unwrap();
    (f.severity, f.message.clone())
}

const RULE: &str = "[[checks.xid.rule]]\ncodes = [31, 43]\ncount = 3\nwindow = \"1h\"\nseverity = \"drain\"\naction = \"reset-gpu\"\n";

#[test]
fn a_site_rule_counts_an_xid_across_runs_and_drains_at_its_count() {
    let node = fixture::node("healthy");
    let config = config(RULE);
    xid43(&node, 67, 36_000);
    xid43(&node, 68, 36_600);
    let first = run(&node, &config, None);
    assert_eq!(gpu1(&first).0, Severity::Ok, "twice is the user's");

    xid43(&node, 69, 37_200);
    let second = run(&node, &config, first.state);
    let (severity, message) = gpu1(&second);
    assert_eq!(severity, Severity::Drain, "{message}");
    assert!(
        message.contains("3 times within 1 h (site rule)"),
        "{message}"
    );
    let f = second.findings.iter().find(|f| f.entity == "gpu1").unwrap();
    assert_eq!(f.action.as_str(), "reset-gpu");
}

#[test]
fn occurrences_spread_wider_than_the_window_do_not_reach_the_count() {
    let node = fixture::node("healthy");
    let config = config(RULE);
    for (seq, secs) in [(67, 30_000), (68, 33_000), (69, 37_000)] {
        xid43(&node, seq, secs);
    }
    assert_eq!(gpu1(&run(&node, &config, None)).0, Severity::Ok);
}

#[test]
fn without_site_rules_the_catalog_decides_as_before() {
    let node = fixture::node("healthy");
    for seq in 67..77 {
        xid43(&node, seq, 36_000 + seq);
    }
    assert_eq!(gpu1(&run(&node, &config(""), None)).0, Severity::Ok);
    // The built-in repeat rule for 13 and 31 still applies.
    let repeated = fixture::node("xid-13-repeated");
    let out = run(&repeated, &config(""), None);
    assert_eq!(gpu1(&out).0, Severity::Drain);
}
