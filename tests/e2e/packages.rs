//! The Debian packages, installed into a fresh root: the binaries run, the
//! files an administrator expects are where Debian puts them, and the
//! installed SPANK plugin loads in the real test cluster.
//!
//! `scripts/test` builds the release packages first and names their folder
//! in `LEMONADE_DEBS`; otherwise this test packages the binaries of the
//! current build itself (`packaging/build-debs --no-build`).

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use lemonade_tests::slurm_root::SlurmRoot;
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
    lemonade_tests::skip_without_cluster!();
    let (_keep, dir) = debs();
    let node = deb(&dir, "lemonade-node");
    let head = deb(&dir, "lemonade-head");

    // Dependencies: Slurm of the series the plugin was built for (the
    // series the end-to-end tests run: LEMONADE_SLURM_SERIES or the host's),
    // and libc.
    let series_root = SlurmRoot::from_env();
    let series = series_root
        .as_ref()
        .map(|r| r.series().to_string())
        .unwrap_or_else(|| host_series_of_debs(&node));
    let depends = field(&node, "Depends");
    assert!(
        depends.contains(&format!("slurmd (>= {series})")) && depends.contains("slurmd (<< "),
        "{depends}"
    );
    assert!(
        field(&node, "Version").ends_with(&format!("+slurm{series}")),
        "{}",
        field(&node, "Version")
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
        "/lib/systemd/system/lemonade-sampler.service",
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
    // On another series, the node package is installed for real into that
    // series' root (the test's own, not the system): dpkg checks its
    // dependencies against that Slurm, and slurmd loads the plugin from
    // where the package put it. The host's packages are only unpacked: a
    // test never installs into the system.
    let _installed = series_root.as_ref().map(|root| Installed::new(root, &node));
    let plugin_dir = match &series_root {
        // The same path as in the unpacked package, inside the series' root.
        Some(_) => Path::new("/").join(plugin_dir.strip_prefix(root.path()).unwrap()),
        None => plugin_dir,
    };

    // The plugin, as installed, in a real cluster. `config=` points it at the
    // cluster's config, whose state directories are in the cluster's
    // temporary directory: without it the plugin would read the system's
    // /etc/lemonade and /var/lib/lemonade.
    let c = Cluster::start(ClusterOptions {
        nodes: 2,
        plugstack: vec![format!(
            "required {} default=quick allow_off=no config={{config}}",
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

    // Before any health-check run on the node, both variables are unset
    // (slurm-spank/README.md, "Environment").
    assert_eq!(task_sees_health(&c, "node1"), "unset unset");

    // After a run, a task sees its result and time.
    let before_run = unix_now();
    // Through the wrapper Slurm's HealthCheckProgram would run: the
    // cluster's config and node1's fixture root.
    let status = c
        .host_binary(&c.wrapper("healthcheck"))
        .env("SLURMD_NODENAME", "node1")
        .status()
        .unwrap();
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "healthcheck on the healthy node1: {status}"
    );
    let seen = task_sees_health(&c, "node1");
    let (health, checked_at) = seen.split_once(' ').unwrap();
    assert!(
        matches!(health, "ok" | "warning"),
        "LEMONADE_NODE_HEALTH={health:?}"
    );
    let checked_at: i64 = checked_at
        .parse()
        .unwrap_or_else(|_| panic!("LEMONADE_LAST_CHECK={checked_at:?}"));
    assert!(
        (before_run..=unix_now()).contains(&checked_at),
        "LEMONADE_LAST_CHECK={checked_at} is not the run's time (started at {before_run})"
    );
    // node2 has had no run: still nothing to report there.
    assert_eq!(task_sees_health(&c, "node2"), "unset unset");
    assert!(c.wait_until(Duration::from_secs(30), || {
        c.node_state("node1").is_ok_and(|(s, _)| s == "idle")
    }));
}

/// The Slurm series a host build of the packages is for: `22.05` from
/// `0.1.0+slurm22.05`.
fn host_series_of_debs(node: &Path) -> String {
    let version = field(node, "Version");
    let series = version.rsplit_once("+slurm").map(|(_, s)| s.to_string());
    series.unwrap_or_else(|| panic!("the node package's version {version} names no Slurm series"))
}

/// The node package installed into a series' root, purged again on drop.
struct Installed<'a>(&'a SlurmRoot);

impl<'a> Installed<'a> {
    fn new(root: &'a SlurmRoot, deb: &Path) -> Installed<'a> {
        let out = root
            .command(Path::new("/usr/bin/dpkg"))
            .arg("-i")
            .arg(deb)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dpkg -i {} in the Slurm {} root: {}{}",
            deb.display(),
            root.series(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Installed(root)
    }
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .command(Path::new("/usr/bin/dpkg"))
            .args(["--purge", "lemonade-node"])
            .output();
    }
}

/// `LEMONADE_NODE_HEALTH LEMONADE_LAST_CHECK` as a task on `node` sees them,
/// `unset` for a variable that is not set.
fn task_sees_health(c: &Cluster, node: &str) -> String {
    c.run(
        "srun",
        &[
            "-N1",
            "-w",
            node,
            "--health-check=quick",
            "sh",
            "-c",
            "echo ${LEMONADE_NODE_HEALTH-unset} ${LEMONADE_LAST_CHECK-unset}",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .trim()
    .to_string()
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
