//! The Debian packages, installed into a fresh root: the binaries run, the
//! files an administrator expects are where Debian puts them, and the
//! installed SPANK plugin loads in the real test cluster.
//!
//! `scripts/test` builds the release packages first and names their folder
//! in `LEMONADE_DEBS`; otherwise this test packages the binaries of the
//! current build itself (`packaging/build-debs --no-build`).

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn debs() -> (Option<tempfile::TempDir>, PathBuf) {
    if let Some(dir) = std::env::var_os("LEMONADE_DEBS") {
        return (None, PathBuf::from(dir));
    }
    let out = tempfile::tempdir().unwrap();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let status = Command::new(lemonade_tests::repo_root().join("packaging/build-debs"))
        .args(["--no-build", "--profile", profile])
        .arg(out.path())
        .status()
        .expect("run packaging/build-debs");
    assert!(status.success(), "packaging/build-debs failed");
    let path = out.path().to_path_buf();
    (Some(out), path)
}

fn deb(dir: &Path, package: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_")))
        })
        .unwrap_or_else(|| panic!("no {package} .deb in {}", dir.display()))
}

fn field(deb: &Path, name: &str) -> String {
    let out = Command::new("dpkg-deb")
        .arg("-f")
        .arg(deb)
        .arg(name)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn packages_install_into_a_fresh_root_and_the_installed_plugin_loads() {
    let (_keep, dir) = debs();
    let node = deb(&dir, "lemonade-node");
    let head = deb(&dir, "lemonade-head");

    // Dependencies: Slurm of the series the plugin was built for, and libc.
    let depends = field(&node, "Depends");
    assert!(
        depends.contains("slurmd (>= ") && depends.contains("slurmd (<< "),
        "{depends}"
    );
    assert!(depends.contains("libc6"), "{depends}");
    assert!(field(&head, "Depends").contains("slurm-client"));
    let conffiles = Command::new("dpkg-deb")
        .arg("--info")
        .arg(&node)
        .arg("conffiles")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&conffiles.stdout).trim(),
        "/etc/lemonade/lemonade.toml"
    );

    let root = tempfile::tempdir().unwrap();
    for package in [&node, &head] {
        let status = Command::new("dpkg")
            .arg("-x")
            .arg(package)
            .arg(root.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
    let r = |p: &str| root.path().join(p.trim_start_matches('/'));

    let version = stdout(Command::new(r("/usr/bin/healthcheck")).arg("--version"));
    assert!(version.starts_with("healthcheck "), "{version}");
    assert!(stdout(Command::new(r("/usr/bin/lemon")).arg("--version")).starts_with("lemon "));
    // The installed config is valid for a GPU node.
    let list = stdout(
        Command::new(r("/usr/bin/healthcheck"))
            .arg("--config")
            .arg(r("/etc/lemonade/lemonade.toml"))
            .arg("list"),
    );
    assert!(!list.contains("config error"), "{list}");
    for file in [
        "/lib/systemd/system/lemonade-healthcheck.service",
        "/lib/systemd/system/lemonade-healthcheck.timer",
        "/etc/cron.d/lemonade",
        "/etc/logrotate.d/lemonade",
        "/usr/share/man/man1/healthcheck.1.gz",
        "/usr/share/man/man1/lemon.1.gz",
        "/usr/share/man/man1/lemonade-prolog.1.gz",
        "/usr/share/bash-completion/completions/healthcheck",
        "/usr/share/bash-completion/completions/lemon",
    ] {
        assert!(r(file).is_file(), "{file} missing from the packages");
    }
    let plugin_dir = std::fs::read_dir(r("/usr/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("slurm-wlm"))
        .find(|p| p.join("lemonade_spank.so").is_file())
        .expect("the SPANK plugin in Slurm's plugin directory");
    assert!(
        plugin_dir.join("lemonade_spank_prolog.so").is_file(),
        "the job-prolog plugin is missing beside lemonade_spank.so"
    );

    // The plugin, as installed, in a real cluster.
    let c = Cluster::start(ClusterOptions {
        nodes: 2,
        plugstack: vec![format!(
            "required {} default=quick allow_off=no",
            plugin_dir.join("lemonade_spank.so").display()
        )],
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let help = c.run("srun", &["--help"]).unwrap();
    assert!(
        help.contains("--health-check"),
        "srun --help does not list the option:\n{help}"
    );
    let out = c.run(
        "srun",
        &[
            "-N1",
            "-w",
            "node1",
            "--health-check=quick",
            "printenv",
            "LEMONADE_NODE_HEALTH",
        ],
    );
    let health = out.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(health.trim(), "ok" | "warning"),
        "LEMONADE_NODE_HEALTH={health:?}"
    );
    assert!(c.wait_until(Duration::from_secs(30), || {
        c.node_state("node1").is_ok_and(|(s, _)| s == "idle")
    }));
}
