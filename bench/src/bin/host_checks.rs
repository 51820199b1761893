//! The host-check figures of the README: a node with 8 GPUs, 8 HCAs, 20
//! mounts and a 50 MB kernel log.
//!
//! (a) the first run over the whole log with a fresh store (< 1 s);
//! (b) repeated full host-check runs once the kmsg cursor is current
//!     (< 20 ms wall, < 15 MB peak RSS);
//! (c) `healthcheck --help` and a no-op run (< 5 ms each).
//!
//! `cargo build --release -p healthcheck && cargo run --release -p lemonade-bench --bin host_checks`
//! (`LEMONADE_BENCH_KEEP=1` keeps the generated node for profiling).

use lemonade_bench::{kernel_log, measure, release_bin, repeat, report, Summary};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const NODE: &str = "bench001";
const KMSG_BYTES: u64 = 50 * 1000 * 1000;
const HOST_CHECKS: [&str; 4] = ["xid", "pcie", "ib", "mounts"];
const RSS_LIMIT: u64 = 15 * 1000 * 1000;

/// The 15 mounts added to the fixture's 5: (mount point, fstype, source).
const EXTRA_MOUNTS: [(&str, &str, &str); 15] = [
    (
        "/projects/team01",
        "nfs4",
        "nfs03.cluster:/export/projects/team01",
    ),
    (
        "/projects/team02",
        "nfs4",
        "nfs03.cluster:/export/projects/team02",
    ),
    (
        "/projects/team03",
        "nfs4",
        "nfs03.cluster:/export/projects/team03",
    ),
    (
        "/projects/team04",
        "nfs4",
        "nfs03.cluster:/export/projects/team04",
    ),
    (
        "/projects/team05",
        "nfs4",
        "nfs04.cluster:/export/projects/team05",
    ),
    (
        "/projects/team06",
        "nfs4",
        "nfs04.cluster:/export/projects/team06",
    ),
    (
        "/projects/team07",
        "nfs4",
        "nfs04.cluster:/export/projects/team07",
    ),
    (
        "/projects/team08",
        "nfs4",
        "nfs04.cluster:/export/projects/team08",
    ),
    ("/models", "lustre", "10.1.0.10@o2ib:10.1.0.11@o2ib:/models"),
    ("/results", "nfs4", "nfs02.cluster:/export/results"),
    ("/archive", "nfs4", "nfs05.cluster:/export/archive"),
    ("/opt/slurm", "nfs4", "nfs01.cluster:/export/slurm"),
    ("/raid", "ext4", "/dev/md127"),
    ("/tmp", "xfs", "/dev/md125"),
    ("/boot/efi", "vfat", "/dev/nvme0n1p1"),
];

fn main() {
    let bin = release_bin("healthcheck");
    let dir = tempfile::Builder::new()
        .prefix("lemonade-bench-host-")
        .tempdir()
        .expect("temporary directory");
    let root = dir.path().join("node");
    std::fs::create_dir_all(&root).unwrap();
    lemonade_tests::fixture::compose("healthy", &root).expect("compose the fixture node");
    // Probe every mount in a child as on a node, not the fixture's recorded results.
    std::fs::remove_file(root.join(".lemonade/statfs.json")).expect("recorded statfs results");
    add_mounts(&root);
    let log_bytes = write_kmsg(&root.join("dev/kmsg"));
    let store = dir.path().join("node.db");
    let config = write_config(dir.path(), &store);
    let noop_config = write_noop_config(dir.path(), &store);

    let registered = registered_checks(&bin, &config);
    let checks: Vec<&str> = HOST_CHECKS
        .into_iter()
        .filter(|c| registered.iter().any(|r| r == c))
        .collect();
    let checks = checks.join(",");
    println!(
        "node: 8 GPUs, 8 HCAs, 20 mounts, {:.1} MB kernel log; checks: {checks}",
        log_bytes as f64 / 1e6
    );
    let _kept;
    if std::env::var_os("LEMONADE_BENCH_KEEP").is_some() {
        _kept = dir.keep();
        println!("keeping {} (LEMONADE_BENCH_KEEP)", _kept.display());
    }

    let run = |record: bool| {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(&config)
            .arg("--root")
            .arg(&root)
            .args(["--use-store", "--node", NODE, "run", "--checks", &checks]);
        if !record {
            cmd.arg("--no-record");
        }
        cmd
    };

    let first = repeat(5, || {
        remove_store(&store);
        run(true)
    });
    report(
        "(a) first run, whole 50 MB log, fresh store",
        &first,
        Some(Duration::from_secs(1)),
    );

    remove_store(&store);
    let primed = measure(&mut run(true));
    let current = repeat(30, || run(true));
    report(
        "(b) host checks, cursor current",
        &current,
        Some(Duration::from_millis(20)),
    );
    rss_verdict(&current);
    let unrecorded = repeat(30, || run(false));
    report(
        "    the same with --no-record (no store write)",
        &unrecorded,
        None,
    );
    println!(
        "    exit code of a host-check run: {} (the log's XID 13/31 lines)",
        primed.exit_code
    );

    let help = repeat(30, || {
        let mut cmd = Command::new(&bin);
        cmd.arg("--help");
        cmd
    });
    report(
        "(c) healthcheck --help",
        &help,
        Some(Duration::from_millis(5)),
    );
    let noop = repeat(30, || {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(&noop_config)
            .arg("--root")
            .arg(&root)
            .args(["--node", NODE, "run", "--no-record"]);
        cmd
    });
    report(
        "(c) no-op run (every check disabled)",
        &noop,
        Some(Duration::from_millis(5)),
    );
}

fn rss_verdict(s: &Summary) {
    println!(
        "    peak RSS {:.1} MB (limit {:.0} MB: {})",
        s.max_rss as f64 / 1e6,
        RSS_LIMIT as f64 / 1e6,
        if s.max_rss <= RSS_LIMIT {
            "met"
        } else {
            "MISSED"
        }
    );
}

fn remove_store(store: &Path) {
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut p = store.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// The check names `healthcheck list` shows: the bench runs whichever host checks exist.
fn registered_checks(bin: &Path, config: &Path) -> Vec<String> {
    let out = Command::new(bin)
        .arg("--config")
        .arg(config)
        .arg("list")
        .output()
        .expect("healthcheck list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn add_mounts(root: &Path) {
    let mountinfo = root.join("proc/self/mountinfo");
    let mut text = std::fs::read_to_string(&mountinfo).unwrap();
    for (i, (path, fstype, source)) in EXTRA_MOUNTS.iter().enumerate() {
        std::fs::create_dir_all(root.join(path.trim_start_matches('/'))).unwrap();
        if text.contains(&format!(" {path} ")) {
            continue;
        }
        let options = match *fstype {
            "nfs4" => "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.1.0.17,local_lock=none,addr=10.1.0.7",
            "lustre" => "rw,flock,lazystatfs,encrypt",
            _ => "rw,attr2,inode64,noquota",
        };
        writeln!(
            text,
            "{} 22 0:{} / {path} rw,nosuid,nodev,relatime shared:{} - {fstype} {source} {options}",
            100 + i,
            60 + i,
            60 + i
        )
        .unwrap();
    }
    std::fs::write(&mountinfo, text).unwrap();
}

/// The fixture's config, with the store in the temporary directory and all 20 mounts expected.
fn write_config(dir: &Path, store: &Path) -> PathBuf {
    let base = std::fs::read_to_string(lemonade_tests::fixture::node_config()).unwrap();
    let mut expect = String::from(
        "{ path = \"/home\", fstype = \"nfs4\" }, \
         { path = \"/checkpoint\", fstype = \"nfs4\", options = [\"rw\", \"hard\"] }, \
         { path = \"/apps\", fstype = \"nfs4\", options = [\"ro\"] }, \
         { path = \"/datasets\", fstype = \"lustre\", min_free_percent = 1.0 }, \
         { path = \"/scratch\", fstype = \"xfs\", min_free_percent = 1.0, min_free_inodes_percent = 1.0 }",
    );
    for (path, fstype, _) in EXTRA_MOUNTS {
        write!(expect, ", {{ path = \"{path}\", fstype = \"{fstype}\" }}").unwrap();
    }
    let text = format!(
        "{base}\n[[node]]\nhosts = \"{NODE}\"\nstore.path = \"{}\"\nchecks.mounts.expect = [{expect}]\n",
        store.display()
    );
    let path = dir.join("lemonade.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A config in which every check the schema knows is disabled.
fn write_noop_config(dir: &Path, store: &Path) -> PathBuf {
    let defaults = serde_json::to_value(lemonade_config::Config::default()).unwrap();
    let mut text = format!("[store]\npath = \"{}\"\n", store.display());
    if let Some(checks) = defaults["checks"].as_object() {
        for (name, section) in checks {
            if section.get("enabled").is_some() {
                writeln!(text, "[checks.{name}]\nenabled = false").unwrap();
            }
        }
    }
    let path = dir.join("noop.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The fixture's boot log, then driver chatter until the file is 50 MB.
fn write_kmsg(path: &Path) -> u64 {
    let boot = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let written = kernel_log::write(&mut out, &boot, KMSG_BYTES, |_| {}).unwrap();
    out.flush().unwrap();
    written
}
