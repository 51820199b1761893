//! Our SPANK plugins on a test cluster, for the tests of both builds
//! (`slurm-spank/tests`, `slurm-spank/prolog/tests`).
//!
//! The plugin's arguments often name paths inside the cluster's directory,
//! known only once it runs: a test starts the cluster with a plain plugin
//! line (so that slurmd loads the plugin) and then rewrites plugstack.conf,
//! which srun, sbatch and every slurmstepd read afresh.

use crate::cluster::{Cluster, ClusterOptions};
use crate::slurm_root::SlurmRoot;
use std::path::PathBuf;

/// One of our plugins, as cargo built it for the running test binary.
pub struct Plugin(PathBuf);

impl Plugin {
    /// `file` (`liblemonade_spank.so`, ...) beside the test binary
    /// (`target/<profile>/deps/`), where cargo puts the crate's cdylib.
    /// On another Slurm series (`LEMONADE_SLURM_SERIES`) that build would not
    /// load: the one built from the series' headers is taken instead, from
    /// `target/slurm-<series>/<profile>/`, where `packaging/build-debs
    /// --slurm-series` builds it.
    pub fn built(file: &str) -> Plugin {
        if let Some(root) = SlurmRoot::from_env() {
            return Plugin::built_for(root.series(), file);
        }
        let path = std::env::current_exe()
            .expect("the test binary's path")
            .with_file_name(file);
        assert!(path.exists(), "{} missing", path.display());
        Plugin(path)
    }

    fn built_for(series: &str, file: &str) -> Plugin {
        let target = crate::target_bin_dir()
            .parent()
            .expect("the target directory")
            .join(format!("slurm-{series}"));
        let found = ["release", "debug"]
            .iter()
            .map(|profile| target.join(profile).join(file))
            .find(|p| p.exists());
        Plugin(found.unwrap_or_else(|| {
            panic!(
                "{file} for Slurm {series} is not built in {}: run `packaging/build-debs --slurm-series {series}`",
                target.display()
            )
        }))
    }

    /// A cluster of `nodes` with the plugin loaded (`args` on its line) and,
    /// with `programs`, `lemonade-prolog`/`-epilog` as slurm.conf's
    /// Prolog/Epilog.
    pub fn start(&self, nodes: usize, programs: bool, args: &str) -> Cluster {
        let cluster = Cluster::start(ClusterOptions {
            nodes,
            prolog: programs,
            epilog: programs,
            plugstack: vec![self.line(args)],
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        eprintln!("cluster up in {:.1} s", cluster.started_in.as_secs_f64());
        cluster
    }

    /// Replaces the plugin's line in the cluster's plugstack.conf.
    pub fn set_args(&self, cluster: &Cluster, args: &str) {
        let path = cluster.dir().join("etc/plugstack.conf");
        std::fs::write(&path, self.line(args) + "\n")
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// The plugin's plugstack.conf line with `args`.
    pub fn line(&self, args: &str) -> String {
        format!("required {} {args}", self.0.display())
            .trim_end()
            .to_string()
    }
}
