//! The `mounts` check on the fixture node: healthy, one overlay per fault,
//! the hung-mount deadline (a probe that never answers), snapshot replay.

use healthcheck::check::{Check, CheckContext, CheckError};
use healthcheck::checks::mounts::{Mounts, STATFS_FILE};
use healthcheck::finding::Finding;
use healthcheck::{Config, Severity};
use lemonade_config::MountProbe;
use lemonade_tests::fixture::{self, FixtureNode};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config() -> Config {
    lemonade_config::load(&fixture::node_config(), Some("gpu001")).expect("fixture config")
}

fn context(root: &Path, config: &Config) -> CheckContext {
    CheckContext::standalone(root, config.clone(), chrono::Utc::now())
}

fn run(node: &FixtureNode, config: &Config) -> Vec<Finding> {
    Mounts
        .run(&context(node.root(), config))
        .expect("mounts runs")
        .findings
}

fn problems(findings: &[Finding]) -> Vec<(&str, &str, Severity)> {
    findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity))
        .collect()
}

/// The node with its recorded statfs results removed: the check probes the
/// fixture's directories, which live on this machine's disk.
fn probing_live(fault: &str) -> FixtureNode {
    let node = fixture::node(fault);
    std::fs::remove_file(node.path(STATFS_FILE)).expect("the fixture records statfs results");
    node
}

/// Live probes measure this machine's disk: free-space limits would judge
/// it, not the fixture (a CI disk 95 % full made the node "low on space").
fn without_space_limits(mut config: Config) -> Config {
    for expect in &mut config.checks.mounts.expect {
        expect.min_free_percent = None;
        expect.min_free_inodes_percent = None;
    }
    config
}

#[test]
fn healthy_node_is_all_ok_with_its_recorded_statfs_results() {
    let node = fixture::node("healthy");
    let findings = run(&node, &config());
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    let entities: Vec<&str> = findings.iter().map(|f| f.entity.as_str()).collect();
    assert_eq!(
        entities,
        ["/home", "/checkpoint", "/apps", "/datasets", "/scratch"],
        "every expected mount was judged"
    );
}

#[test]
fn healthy_node_is_all_ok_with_real_statfs_probes() {
    let node = probing_live("healthy");
    let config = without_space_limits(config());
    let findings = run(&node, &config);
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    let entities: Vec<&str> = findings.iter().map(|f| f.entity.as_str()).collect();
    assert_eq!(
        entities,
        ["/home", "/checkpoint", "/apps", "/datasets", "/scratch"]
    );
}

#[test]
fn each_fault_overlay_gives_its_code_severity_and_entity() {
    for (fault, expected) in [
        (
            "mount-missing",
            ("/checkpoint", "MOUNT_MISSING", Severity::Down),
        ),
        (
            "mount-readonly",
            ("/scratch", "MOUNT_READONLY", Severity::Drain),
        ),
        (
            "mount-wrong-fstype",
            ("/datasets", "MOUNT_WRONG_FSTYPE", Severity::Drain),
        ),
        (
            "mount-low-space",
            ("/scratch", "MOUNT_LOW_SPACE", Severity::Warning),
        ),
        (
            "mount-low-inodes",
            ("/datasets", "MOUNT_LOW_INODES", Severity::Warning),
        ),
        // A snapshot of a node whose /checkpoint hung replays as hung.
        ("mount-hung", ("/checkpoint", "MOUNT_HUNG", Severity::Down)),
    ] {
        let node = fixture::node(fault);
        let findings = run(&node, &config());
        assert_eq!(problems(&findings), [expected], "{fault}");
    }
}

#[test]
fn a_missing_option_is_a_warning() {
    let node = fixture::node("healthy");
    let mut config = config();
    config.checks.mounts.expect[0].options = vec!["rw".into(), "noatime".into()];
    assert_eq!(
        problems(&run(&node, &config)),
        [("/home", "MOUNT_OPTION_MISSING", Severity::Warning)]
    );
}

#[test]
fn a_hung_mount_is_down_and_the_check_ends_at_its_deadline() {
    let node = probing_live("healthy");
    let mut config = without_space_limits(config());
    config.checks.mounts.statfs_timeout_s = 0.3;
    config.checks.mounts.expect[1].probe = MountProbe::BlockForever;
    let started = Instant::now();
    let findings = run(&node, &config);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        problems(&findings),
        [("/checkpoint", "MOUNT_HUNG", Severity::Down)]
    );
    assert_eq!(findings.len(), 5, "the other mounts are still judged");
}

#[test]
fn the_binary_exits_on_time_with_a_hung_mount() {
    let node = probing_live("healthy");
    let text = std::fs::read_to_string(fixture::node_config())
        .unwrap()
        .replacen(
            "path = \"/checkpoint\"\n",
            "path = \"/checkpoint\"\nprobe = \"block-forever\"\n",
            1,
        );
    let store = node.root().join("var-lib-lemonade.db");
    let config_path = node.root().join("lemonade.toml");
    std::fs::write(
        &config_path,
        format!(
            "{text}\n[[node]]\nhosts = \"gpu001\"\nstore.path = \"{}\"\nchecks.mounts.statfs_timeout_s = 1\n",
            store.display()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_healthcheck"))
        .args(["--config", config_path.to_str().unwrap()])
        .args(["--root", node.root().to_str().unwrap(), "--node", "gpu001"])
        .args(["run", "--checks", "mounts", "--format", "json"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("MOUNT_HUNG"), "{stdout}");
}

#[test]
fn a_snapshot_replays_free_space_without_probing() {
    let node = fixture::node("healthy");
    let config = config();
    let files = Mounts.snapshot_files(&context(node.root(), &config));
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].0, Path::new(STATFS_FILE));

    // The unpacked snapshot has no mount points to probe: only the recorded results.
    let replay = tempfile::tempdir().unwrap();
    for (path, bytes) in [
        (
            Path::new("/proc/self/mountinfo").to_path_buf(),
            std::fs::read(node.path("/proc/self/mountinfo")).unwrap(),
        ),
        files[0].clone(),
    ] {
        let real = replay.path().join(path.strip_prefix("/").unwrap());
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(real, bytes).unwrap();
    }
    let findings = Mounts
        .run(&context(replay.path(), &config))
        .unwrap()
        .findings;
    assert!(problems(&findings).is_empty(), "{findings:#?}");
    assert_eq!(findings.len(), 5);
}

#[test]
fn malformed_mountinfo_is_an_error_naming_the_file() {
    let node = fixture::node("healthy");
    node.append("/proc/self/mountinfo", "99 22 0:77 /\n");
    let Err(err) = Mounts.run(&context(node.root(), &config())) else {
        panic!("malformed mountinfo must be an error");
    };
    assert!(matches!(err, CheckError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("/proc/self/mountinfo"), "{err}");
}

#[test]
fn a_snapshot_of_the_host_checks_replays_to_the_same_findings() {
    use healthcheck::checks::{ib::Ib, pcie::Pcie};
    let node = fixture::node("mount-readonly");
    node.write(
        "/sys/bus/pci/devices/0000:5d:00.0/current_link_width",
        "4\n",
    );
    node.write("/sys/class/infiniband/mlx5_3/ports/1/state", "1: DOWN\n");
    let scratch = tempfile::tempdir().unwrap();
    let mut config = config();
    config.store.path = scratch.path().join("node.db");
    let registry: Vec<Arc<dyn healthcheck::check::Check>> =
        vec![Arc::new(Pcie), Arc::new(Ib), Arc::new(Mounts)];
    let archive = scratch.path().join("snap.tar.gz");
    let captured =
        healthcheck::snapshot::capture(&config, &registry, node.root(), "gpu001", &archive)
            .unwrap();

    let unpacked = scratch.path().join("replay");
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap());
    tar::Archive::new(gz).unpack(&unpacked).unwrap();
    let mut replayed = Vec::new();
    for check in &registry {
        replayed.extend(check.run(&context(&unpacked, &config)).unwrap().findings);
    }
    assert_eq!(captured.findings, replayed);
    let codes: Vec<&str> = replayed
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| f.code.as_str())
        .collect();
    assert_eq!(
        codes,
        ["PCIE_WIDTH_DEGRADED", "IB_PORT_DOWN", "MOUNT_READONLY"]
    );
    assert!(replayed
        .iter()
        .any(|f| f.pci_bus_id.as_deref() == Some("0000:5e:00.0")));
}
