//! What Slurm tells a prolog or epilog through its environment.

use healthcheck::check::JobContext;
use healthcheck::checks::gpu::procs::job_gpus_from_env;

/// The environment the programs read, captured once (tests build it by hand).
#[derive(Debug, Clone, Default)]
pub struct SlurmEnv {
    pub node: Option<String>,
    pub job_id: Option<String>,
    pub user: Option<String>,
    pub job_gpus: Option<String>,
    pub cuda_visible: Option<String>,
    /// `SLURM_JOB_EXIT_CODE2`: `exit:signal`.
    pub exit_code2: Option<String>,
    /// Set by the SPANK plugin when it runs us: `spank`.
    pub trigger: Option<String>,
    /// Set by the SPANK plugin: `quick` or `full`.
    pub profile: Option<String>,
    /// The job's `--health-check` (`quick`, `full` or `off`), resolved by
    /// the SPANK plugin in the command that created the job and handed over
    /// through the job control environment.
    pub job_choice: Option<String>,
    /// The slurm.conf slurmd uses (`SLURM_CONF`, set for prologs since 20.11).
    pub slurm_conf: Option<String>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl SlurmEnv {
    pub fn from_process() -> SlurmEnv {
        SlurmEnv {
            node: var("SLURMD_NODENAME"),
            job_id: var("SLURM_JOB_ID"),
            user: var("SLURM_JOB_USER"),
            job_gpus: var("SLURM_JOB_GPUS"),
            cuda_visible: var("CUDA_VISIBLE_DEVICES"),
            exit_code2: var("SLURM_JOB_EXIT_CODE2"),
            trigger: var("LEMONADE_TRIGGER"),
            profile: var("LEMONADE_PROFILE"),
            job_choice: var("SPANK_LEMONADE_HEALTH_CHECK"),
            slurm_conf: var("SLURM_CONF"),
        }
    }

    /// The job as the checks see it.
    pub fn job(&self) -> Option<JobContext> {
        Some(JobContext {
            job_id: self.job_id.clone()?,
            user: self.user.clone(),
            gpus: job_gpus_from_env(self.job_gpus.as_deref(), self.cuda_visible.as_deref()),
        })
    }

    /// True when the SPANK plugin runs us (rather than slurm.conf's Prolog/Epilog).
    pub fn from_spank(&self) -> bool {
        self.trigger.as_deref() == Some("spank")
    }
}

/// `SLURM_JOB_EXIT_CODE2` (`exit:signal`, e.g. `0:0`, `1:0`, `0:9`) into
/// exit code and signal; a signal of 0 is none.
pub fn parse_exit_code2(text: &str) -> (Option<i32>, Option<i32>) {
    let (exit, signal) = match text.trim().split_once(':') {
        Some((e, s)) => (e.parse().ok(), s.parse().ok()),
        None => (text.trim().parse().ok(), None),
    };
    (exit, signal.filter(|s| *s != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code2_splits_exit_and_signal() {
        assert_eq!(parse_exit_code2("0:0"), (Some(0), None));
        assert_eq!(parse_exit_code2("1:0"), (Some(1), None));
        assert_eq!(parse_exit_code2("0:9"), (Some(0), Some(9)));
        assert_eq!(parse_exit_code2("junk"), (None, None));
    }

    #[test]
    fn gpus_come_from_slurm_job_gpus_then_cuda_visible_devices() {
        let env = SlurmEnv {
            job_id: Some("5".into()),
            job_gpus: Some("0,2".into()),
            cuda_visible: Some("0,1".into()),
            ..Default::default()
        };
        assert_eq!(env.job().unwrap().gpus, Some(vec![0, 2]));
        let env = SlurmEnv {
            job_id: Some("5".into()),
            cuda_visible: Some("3".into()),
            ..Default::default()
        };
        assert_eq!(env.job().unwrap().gpus, Some(vec![3]));
    }
}
