//! The test cluster itself: it starts, runs a job with accounting, and leaves
//! no daemon behind when dropped.

use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::time::Duration;

#[test]
fn cluster_starts_runs_a_job_and_tears_down() {
    let cluster = Cluster::start(ClusterOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cluster up in {:.1} s", cluster.started_in.as_secs_f64());
    assert_eq!(cluster.nodes().len(), 4);
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
