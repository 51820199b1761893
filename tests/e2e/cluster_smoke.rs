//! The test cluster itself: it starts, runs a job with accounting, and leaves
//! no daemon behind when dropped.

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::time::Duration;

#[test]
fn cluster_starts_runs_a_job_and_tears_down() {
    lemonade_tests::skip_without_cluster!();
    let cluster = Cluster::start(ClusterOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cluster up in {:.1} s", cluster.started_in.as_secs_f64());
    assert_eq!(cluster.nodes().len(), 4);
    // The daemons and clients are the series asked for (LEMONADE_SLURM_SERIES).
    let series = cluster.slurm_series();
    assert!(!series.is_empty(), "no Slurm series found");
    let config = cluster.run("scontrol", &["show", "config"]).unwrap();
    let daemon_version = config
        .lines()
        .find_map(|l| l.strip_prefix("SLURM_VERSION"))
        .map(|v| v.trim_start_matches([' ', '=']).to_string())
        .unwrap_or_else(|| panic!("no SLURM_VERSION in scontrol show config:\n{config}"));
    assert!(
        daemon_version.starts_with(&format!("{series}.")),
        "slurmctld is {daemon_version}, the cluster was to run {series}"
    );
    let client = cluster.run("sinfo", &["-V"]).unwrap();
    assert!(
        client.contains(&format!(" {series}.")),
        "sinfo is {client:?}, the cluster was to run {series}"
    );
    let job = cluster.sbatch(&["--wrap", "true"]).unwrap();
    assert!(cluster.wait_until(Duration::from_secs(30), || {
        cluster
            .run("sacct", &["-X", "-n", "-P", "-j", &job, "-o", "State"])
            .is_ok_and(|s| s.trim() == "COMPLETED")
    }));
    cluster.stop_slurmctld();
    assert!(cluster.run("sinfo", &[]).is_err(), "slurmctld is gone");
    let t = std::time::Instant::now();
    let restarted = cluster.start_slurmctld();
    eprintln!(
        "restart: {restarted:?} after {:.1} s; {:?}",
        t.elapsed().as_secs_f64(),
        cluster.run("sinfo", &["-N", "-h", "-o", "%N %T %E"])
    );
    restarted.unwrap();
    let dir = cluster.dir().to_path_buf();
    let pid_file = dir.join("state/slurmctld.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    drop(cluster);
    assert!(!dir.exists(), "the directory is removed");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z")),
        "slurmctld is stopped"
    );
}
