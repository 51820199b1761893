//! Grace C2C: NVIDIA's XID catalog names one C2C error, XID 121 `C2C_ERROR`
//! (Grace-Hopper, Grace-Blackwell: the CPU-GPU chip-to-chip link). Its
//! immediate action is `IGNORE`, which would leave it an event nobody sees;
//! our judgement (make_catalog.py `JUDGED`) makes it a named warning for a
//! human, never a drain.

use healthcheck::check::{Check, CheckContext};
use healthcheck::checks::xid::Xid;
use healthcheck::{Action, Config, Severity};
use lemonade_tests::fixture;

/// Boot of the fixture node (`btime`), and a day later.
const BOOT: i64 = 1_795_132_800;
const NOW: i64 = BOOT + 86_400;

/// The kernel's record of an XID 121 on the fixture's GPU 3, ten hours
/// after boot. The text after the XID number is not parsed; no public
/// capture of a 121 line was found, so it is kept minimal.
const C2C_LINE: &str =
    "4,67,36000123456,-;NVRM: Xid (PCI:0000:5d:00): 121, pid='<unknown>', name=<unknown>, C2C link error\n";

#[test]
fn a_c2c_xid_is_a_named_warning_for_a_human_never_a_drain() {
    let node = fixture::node("healthy");
    node.append("/dev/kmsg", C2C_LINE);
    let config = lemonade_config::load(&fixture::node_config(), Some("gpu001")).unwrap();
    let ctx = CheckContext::standalone(
        node.root(),
        config,
        chrono::DateTime::from_timestamp(NOW, 0).unwrap(),
    );
    let out = Xid.run(&ctx).expect("xid runs");
    let f = out
        .findings
        .iter()
        .find(|f| f.code == "XID_121")
        .unwrap_or_else(|| panic!("no XID_121 finding: {:#?}", out.findings));
    assert_eq!(
        (f.entity.as_str(), f.severity, f.action),
        ("gpu3", Severity::Warning, Action::Investigate)
    );
    assert!(f.message.contains("Grace C2C"), "{}", f.message);
    assert_eq!(out.events.len(), 1);
}

#[test]
fn the_catalogs_c2c_rule_is_a_warning_for_a_human() {
    let rule = healthcheck::checks::xid::catalog::rule(121, None, &Config::default().checks.xid);
    assert_eq!(
        (rule.severity, rule.action),
        (Severity::Warning, Action::Investigate)
    );
    assert!(
        rule.description.starts_with("Grace C2C"),
        "{}",
        rule.description
    );
}
