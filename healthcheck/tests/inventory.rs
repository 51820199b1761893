//! The firmware versions a node exports for the head node: sent when first
//! seen or changed, once, by a recorded periodic run with a spool directory.

use lemonade_spool::Body;
use lemonade_tests::fixture;
use std::path::Path;
use std::process::Command;

/// Boot of every fixture node plus a day: the fixture's "now".
const NOW: i64 = 1_795_132_800 + 86_400;

/// `healthcheck run --checks firmware --apply-policy` on `root`, as the
/// periodic run does, recorded, exporting to `dir/spool`; dry run, and no
/// Slurm command to find.
fn run_firmware(dir: &Path, root: &Path, now: i64) {
    let mut text = std::fs::read_to_string(fixture::node_config()).unwrap();
    text.push_str(&format!(
        "\n[slurm]\nbin_dir = \"{d}/no-slurm\"\n\n[spool]\ndir = \"{d}/spool\"\n\n[[node]]\nhosts = \"invtest\"\nstore.path = \"{d}/state/node.db\"\n",
        d = dir.display()
    ));
    let config = dir.join("lemonade.toml");
    std::fs::write(&config, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .arg("--config")
        .arg(&config)
        .args(["--node", "invtest", "run", "--checks", "firmware"])
        .args(["--apply-policy", "--dry-run", "--use-store"])
        .arg(format!("--now={now}"))
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The versions exported so far, `entity=value` in order.
fn exported(dir: &Path) -> Vec<String> {
    let file = lemonade_spool::node_file(&dir.join("spool"), "invtest");
    let (records, errors) = lemonade_spool::read(&file).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    records
        .into_iter()
        .filter_map(|r| match r.body {
            Body::Inventory {
                check,
                entity,
                value,
            } => Some(format!("{check}/{entity}={value}")),
            _ => None,
        })
        .collect()
}

#[test]
fn firmware_versions_are_exported_once_and_again_when_one_changes() {
    let dir = tempfile::tempdir().unwrap();
    let healthy = fixture::node("healthy");
    run_firmware(dir.path(), healthy.root(), NOW);
    let first = exported(dir.path());
    assert!(
        first.iter().any(|v| v.starts_with("firmware/bios=")),
        "{first:?}"
    );
    assert!(
        first.iter().any(|v| v.starts_with("firmware/mlx5_")),
        "{first:?}"
    );
    run_firmware(dir.path(), healthy.root(), NOW + 300);
    assert_eq!(exported(dir.path()), first, "nothing changed, nothing sent");
    let old_bios = fixture::node("firmware-bios-old");
    run_firmware(dir.path(), old_bios.root(), NOW + 600);
    let after = exported(dir.path());
    assert_eq!(after.len(), first.len() + 1, "{after:?}");
    assert!(after.last().unwrap().starts_with("firmware/bios="));
    assert_ne!(
        after.last(),
        first.iter().find(|v| v.starts_with("firmware/bios="))
    );
}
