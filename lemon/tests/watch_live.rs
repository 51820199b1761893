//! `lemon watch --live --once` against a real Prometheus (Debian's
//! `/usr/bin/prometheus`, on a free loopback port in a temporary directory)
//! scraping a test exporter of 3 nodes × 4 GPUs every second, with stand-in
//! Slurm commands (shell scripts in `[slurm] bin_dir`) that list the 3-node
//! job and log what lemon asks of scontrol.
//!
//! The exporter's nodes are healthy for [`HEALTHY_S`] seconds; then either
//! node2's GPU utilisation and SM clock collapse, or every node's
//! utilisation drops together (a checkpoint).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Seconds of healthy samples before the fault: past the detector's warm-up.
const HEALTHY_S: u64 = 16;
/// Seconds of the fault before lemon polls: past `small_job_sustain_s`.
const FAULT_S: u64 = 12;

/// True when the test may run; false (after a loud message) when it must skip.
fn prometheus_present(test: &str) -> bool {
    if Path::new(PROMETHEUS).exists() {
        return true;
    }
    if std::env::var_os("LEMONADE_REQUIRE_CLUSTER").is_some() {
        panic!("{test}: {PROMETHEUS} is missing and LEMONADE_REQUIRE_CLUSTER is set: run scripts/install-deps");
    }
    eprintln!(
        "\n!!!!! SKIPPED {test}: {PROMETHEUS} is missing (apt-get install prometheus) !!!!!\n"
    );
    false
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    Node2Collapses,
    AllDropTogether,
}

/// The exposition text, `faulty` or not; `tick` varies the jitter.
fn exposition(fault: Fault, faulty: bool, tick: u64) -> String {
    let mut text = String::from("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n");
    for node in 1..=3 {
        for gpu in 0..4 {
            let jitter = ((node * 7 + gpu * 3 + tick as usize) % 5) as f64 * 0.4;
            let (mut util, mut clock, mut power) = (94.0 + jitter, 1980.0 - jitter, 650.0 + jitter);
            match fault {
                Fault::Node2Collapses if faulty && node == 2 => {
                    (util, clock, power) = (4.0, 345.0, 90.0)
                }
                Fault::AllDropTogether if faulty => (util, power) = (3.0, 80.0),
                _ => {}
            }
            let labels = format!("gpu=\"{gpu}\",Hostname=\"node{node}\"");
            text += &format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}\n");
            text += &format!("DCGM_FI_DEV_SM_CLOCK{{{labels}}} {clock}\n");
            text += &format!("DCGM_FI_DEV_POWER_USAGE{{{labels}}} {power}\n");
        }
    }
    text
}

/// Serves [`exposition`] on `listener` forever (the test process ends it),
/// faulty from the instant `fault_from` is set to.
fn serve_exporter(listener: TcpListener, fault: Fault, fault_from: Arc<OnceLock<Instant>>) {
    let start = Instant::now();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let faulty = fault_from.get().is_some_and(|t| Instant::now() >= *t);
            let text = exposition(fault, faulty, start.elapsed().as_secs());
            let _ = answer(stream, &text);
        }
    });
}

fn answer(mut stream: TcpStream, body: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 65536 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server, killed on drop.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prometheus(dir: &Path, target: u16) -> Prometheus {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let prometheus = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let ready = format!("{}/-/ready", prometheus.url);
    let deadline = Instant::now() + Duration::from_secs(30);
    while ureq::get(&ready).call().is_err() {
        assert!(
            Instant::now() < deadline,
            "prometheus did not start: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    prometheus
}

/// Stand-in Slurm: squeue lists `squeue.txt`, sinfo `sinfo.txt`, scontrol logs its argv.
fn stand_in_slurm(dir: &Path, job: &str) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(dir.join("squeue.txt"), format!("{job}|3|node[1-3]\n")).unwrap();
    set_sinfo(dir, "");
    let d = dir.display();
    for (name, body) in [
        ("squeue", format!("cat {d}/squeue.txt")),
        ("sinfo", format!("cat {d}/sinfo.txt")),
        (
            "scontrol",
            format!("for a in \"$@\"; do printf '%s\\n' \"$a\" >> {d}/scontrol.log; done\necho -- >> {d}/scontrol.log"),
        ),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Every node allocated; `node2_reason` non-empty: node2 drained by an administrator.
fn set_sinfo(dir: &Path, node2_reason: &str) {
    let mut text = String::new();
    for n in 1..=3 {
        if n == 2 && !node2_reason.is_empty() {
            text += &format!("node2|drained|{node2_reason}|root|2026-01-01T00:00:00\n");
        } else {
            text += &format!("node{n}|allocated|none|Unknown|Unknown\n");
        }
    }
    std::fs::write(dir.join("sinfo.txt"), text).unwrap();
}

fn write_config(dir: &Path, url: &str) -> PathBuf {
    let d = dir.display();
    let config = dir.join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            r#"[slurm]
bin_dir = "{d}/bin"

[lemon]
db_path = "{d}/lemon.db"

[watch]
source = "prometheus"
prometheus_url = "{url}"
interval_s = 1
stale_s = 3
warmup_s = 8
baseline_s = 5
# Time runs about 30 times faster than on a cluster: 6 steps of 1 s for 18 of 10 s.
continuity_steps = 6
small_job_sustain_s = 5
# A stopped node with no XID gauge waits 300 s on a cluster; here no longer
# than small_job_sustain_s, as the fault lasts only FAULT_S.
unexplained_stop_s = 5
# The 3-node job's call drains only where the site opts in.
small_job_drain_ratio = 3.0

[watch.prometheus]
delay_s = 1
timeout_s = 5

[[watch.prometheus.metrics]]
name = "gpu_util"
selector = "DCGM_FI_DEV_GPU_UTIL"
label = "Hostname"

[[watch.prometheus.metrics]]
name = "gpu_sm_clock"
selector = "DCGM_FI_DEV_SM_CLOCK"
label = "Hostname"

[[watch.prometheus.metrics]]
name = "gpu_power"
selector = "DCGM_FI_DEV_POWER_USAGE"
label = "Hostname"

[watch.service]
drain = true
lookback_s = 120
"#
        ),
    )
    .unwrap();
    config
}

fn lemon(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("LEMONADE_CONFIG")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Starts the exporter and Prometheus and waits until the fault has lasted [`FAULT_S`].
fn cluster(fault: Fault, job: &str) -> (tempfile::TempDir, Prometheus, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let exporter = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = exporter.local_addr().unwrap().port();
    let fault_from = Arc::new(OnceLock::new());
    serve_exporter(exporter, fault, fault_from.clone());
    let prometheus = start_prometheus(dir.path(), target);
    // The healthy time counts from a ready server, however slow its start.
    fault_from
        .set(Instant::now() + Duration::from_secs(HEALTHY_S))
        .unwrap();
    stand_in_slurm(dir.path(), job);
    let config = write_config(dir.path(), &prometheus.url);
    std::thread::sleep(Duration::from_secs(HEALTHY_S + FAULT_S));
    (dir, prometheus, config)
}

#[test]
fn prometheus_shows_node2_collapsing_and_lemon_watch_drains_it_alone_but_never_an_administrators_node(
) {
    if !prometheus_present("watch_live node2") {
        return;
    }
    let (dir, _prometheus, config) = cluster(Fault::Node2Collapses, "77");
    let out = lemon(&config, &["watch", "--live", "--once", "--dry-run"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("would_drain job 77 node2: lemon: j77 ")
            && stdout.contains(" OUTLIER gpu_"),
        "{all}"
    );
    assert!(
        !stdout.contains("node1") && !stdout.contains("node3"),
        "{all}"
    );
    assert!(
        !dir.path().join("scontrol.log").exists(),
        "a dry run ran scontrol: {all}"
    );
    let conn = lemon::db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    let rows = lemon::db::detections::recent(&conn, 10).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            rows[0].node.as_str(),
            rows[0].action.as_str(),
            rows[0].dry_run
        ),
        ("node2", "would_drain", true)
    );
    assert!(
        rows[0].evidence.contains("peers_median"),
        "{}",
        rows[0].evidence
    );

    // An administrator drained node2 meanwhile: left alone, scontrol not run.
    set_sinfo(dir.path(), "bad fan, ticket 42");
    let out = lemon(&config, &["watch", "--live", "--once"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("skipped_out_of_service job 77 node2"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("scontrol.log").exists(), "{}", text(&out));

    // Another job on the same nodes, node2 in service: drained for real,
    // and the job requeued since the config asks for it.
    set_sinfo(dir.path(), "");
    std::fs::write(dir.path().join("squeue.txt"), "78|3|node[1-3]\n").unwrap();
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml += "requeue = true\n"; // [watch.service] is the config's last table
    std::fs::write(&config, toml).unwrap();
    let out = lemon(&config, &["watch", "--live", "--once"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let log = std::fs::read_to_string(dir.path().join("scontrol.log")).unwrap();
    let argv: Vec<&str> = log.lines().collect();
    assert_eq!(
        &argv[..3],
        ["update", "NodeName=node2", "State=DRAIN"],
        "{log}"
    );
    assert!(
        argv[3].starts_with("Reason=lemon: j78 ") && argv[3].contains(" OUTLIER gpu_"),
        "{log}"
    );
    assert_eq!(
        &argv[4..],
        ["--", "requeue", "78", "--"],
        "drain, then requeue: {log}"
    );

    let out = lemon(&config, &["report"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("Outliers in running jobs"),
        "{}",
        text(&out)
    );
    let line = report
        .lines()
        .find(|l| l.contains("78") && l.contains("node2"))
        .unwrap_or_default();
    assert!(
        line.contains("drained") && line.contains("gpu_"),
        "{report}"
    );
}

#[test]
fn every_node_dropping_together_is_a_checkpoint_and_drains_nothing() {
    if !prometheus_present("watch_live checkpoint") {
        return;
    }
    let (dir, _prometheus, config) = cluster(Fault::AllDropTogether, "91");
    let out = lemon(&config, &["watch", "--live", "--once", "--dry-run"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "{all}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 jobs") && !stderr.contains(" 0 samples"),
        "{all}"
    );
    assert!(!dir.path().join("scontrol.log").exists(), "{all}");
}

#[test]
fn an_unreachable_prometheus_or_slurm_skips_the_poll_and_drains_nothing() {
    let dir = tempfile::tempdir().unwrap();
    stand_in_slurm(dir.path(), "77");
    let closed = free_port();
    let config = write_config(dir.path(), &format!("http://127.0.0.1:{closed}"));
    let out = lemon(&config, &["watch", "--live", "--once"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("unreachable") && all.contains("poll skipped"),
        "{all}"
    );
    assert!(!dir.path().join("scontrol.log").exists(), "{all}");

    std::fs::write(
        dir.path().join("bin/squeue"),
        "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n",
    )
    .unwrap();
    let out = lemon(&config, &["watch", "--live", "--once"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("squeue failed, poll skipped"), "{all}");
}
