//! What the SPANK plugins add to a job that opts out: `srun -N1 true` with
//! `--health-check=off` on one-node clusters, each with one plugin in
//! plugstack.conf, against the same cluster without any.
//!
//! * `lemonade_spank.so`, the default plugin: limit 5 ms.
//! * `lemonade_spank_prolog.so`, the one with a job prolog/epilog: no limit,
//!   reported for the README's trade-off.
//! * A plugin that does nothing but export `slurm_spank_job_prolog`/`_epilog`:
//!   what Slurm itself charges any plugin with those callbacks (slurmd starts
//!   a `slurmstepd spank prolog` and `... epilog` for every job), so that the
//!   prolog plugin's cost splits into Slurm's share and ours.
//!
//! `cargo build --release -p lemonade-spank -p lemonade-spank-prolog -p lemonade-bench && target/release/spank`
//! (as root: it starts private Slurm clusters; needs `cc` for the null plugin).

use lemonade_bench::{measure, release_bin, report, Summary};
use lemonade_tests::cluster::{Cluster, ClusterOptions};
use std::time::Duration;

const RUNS: usize = 41;
const LIMIT: Duration = Duration::from_millis(5);
/// Lets the previous job's epilog finish, so that a run measures srun's
/// latency rather than waiting behind the last job's cleanup.
const PAUSE: Duration = Duration::from_millis(250);

fn up(plugstack: Option<&str>) -> Cluster {
    Cluster::start(ClusterOptions {
        nodes: 1,
        plugstack: plugstack.map(String::from).into_iter().collect(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// One cluster and the command measured on it.
struct Arm {
    name: &'static str,
    cluster: Cluster,
    args: &'static [&'static str],
    walls: Vec<Duration>,
    max_rss: u64,
}

impl Arm {
    fn new(name: &'static str, cluster: Cluster, args: &'static [&'static str]) -> Arm {
        Arm {
            name,
            cluster,
            args,
            walls: Vec::new(),
            max_rss: 0,
        }
    }
}

fn summarise(mut walls: Vec<Duration>, max_rss: u64) -> Summary {
    walls.sort();
    Summary {
        runs: walls.len(),
        median: walls[walls.len() / 2],
        worst: walls.last().copied().unwrap_or_default(),
        max_rss,
    }
}

/// Builds the do-nothing job-script plugin; None where there is no C compiler.
fn null_plugin(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let source = dir.join("null.c");
    std::fs::write(
        &source,
        "#include <slurm/spank.h>\n\
         SPANK_PLUGIN(null, 1);\n\
         int slurm_spank_job_prolog(spank_t sp, int ac, char **av) { return 0; }\n\
         int slurm_spank_job_epilog(spank_t sp, int ac, char **av) { return 0; }\n",
    )
    .ok()?;
    let out = dir.join("null.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .ok()?;
    built.success().then_some(out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let state = tempfile::tempdir().expect("temp dir");
    let config = state.path().join("lemonade.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = \"{}\"\n",
            state.path().join("node.db").display()
        ),
    )
    .expect("write config");
    let plugin_line = |file: &str| {
        format!(
            "required {} allow_off=yes config={} prolog=none epilog=none",
            release_bin(file).display(),
            config.display()
        )
    };
    let null = null_plugin(state.path()).map(|p| format!("required {}", p.display()));
    if null.is_none() {
        eprintln!("no C compiler: skipping the null-plugin comparison");
    }

    // The clusters run at once and the runs alternate, so that drift of the
    // machine (other builds, caches) falls on all alike.
    let plain: &'static [&'static str] = &["-N1", "true"];
    let off: &'static [&'static str] = &["-N1", "--health-check=off", "true"];
    let mut arms = vec![
        Arm::new("srun -N1 true, no plugin", up(None), plain),
        Arm::new(
            "srun -N1 --health-check=off true, lemonade_spank",
            up(Some(&plugin_line("liblemonade_spank.so"))),
            off,
        ),
        Arm::new(
            "  same, lemonade_spank_prolog",
            up(Some(&plugin_line("liblemonade_spank_prolog.so"))),
            off,
        ),
    ];
    if let Some(null) = &null {
        arms.push(Arm::new(
            "srun -N1 true, null job-script plugin",
            up(Some(null)),
            plain,
        ));
    }
    for round in 0..=RUNS {
        for arm in arms.iter_mut() {
            std::thread::sleep(PAUSE);
            let sample = measure(arm.cluster.command("srun").args(arm.args));
            assert_eq!(sample.exit_code, 0, "srun {:?} failed", arm.args);
            // The first round warms the clusters up.
            if round > 0 {
                arm.walls.push(sample.wall);
                arm.max_rss = arm.max_rss.max(sample.max_rss);
            }
        }
    }
    let summaries: Vec<(&str, Summary)> = arms
        .into_iter()
        .map(|arm| (arm.name, summarise(arm.walls, arm.max_rss)))
        .collect();
    for (name, summary) in &summaries {
        report(name, summary, None);
    }
    let median = |i: usize| summaries[i].1.median;
    let overhead = median(1).saturating_sub(median(0));
    let verdict = if overhead <= LIMIT { "met" } else { "MISSED" };
    println!(
        "{:<48} {:>8.2} ms  (limit {:.0} ms: {verdict})",
        "lemonade_spank overhead (median difference)",
        ms(overhead),
        ms(LIMIT)
    );
    println!(
        "{:<48} {:>8.2} ms",
        "lemonade_spank_prolog overhead",
        ms(median(2)) - ms(median(0))
    );
    if summaries.len() > 3 {
        println!(
            "{:<48} {:>8.2} ms",
            "  of which Slurm's job-script cost (null plugin)",
            ms(median(3)) - ms(median(0))
        );
        println!(
            "{:<48} {:>8.2} ms",
            "  of which ours (prolog plugin minus null plugin)",
            ms(median(2)) - ms(median(3))
        );
    }
}
