//! `gpu-procs` judges only the job's GPUs, as the prolog/epilog give them in
//! `JobContext.gpus`. In-process (the fake reads one scenario per process, so
//! this file holds one test).

use healthcheck::check::{CheckContext, JobContext, Profile, Shared};
use healthcheck::checks::gpu::{self, job_gpus_from_env};
use healthcheck::root::NodeRoot;
use healthcheck::{Config, Severity};
use lemonade_tests::fake_nvml;
use std::sync::Arc;

#[test]
fn stray_processes_count_only_on_the_jobs_gpus() {
    // Set before NVML is loaded, which is when the fake reads it.
    std::env::set_var(
        fake_nvml::SCENARIO_ENV,
        fake_nvml::scenario("stray-processes"),
    );
    let mut config = Config::default();
    config.checks.gpu.expected_count = lemonade_config::GpuCount::Exactly(8);
    config.checks.gpu.library_path = fake_nvml::library();
    let config = Arc::new(config);
    let shared = Arc::new(Shared::default());
    let procs = gpu::checks()
        .into_iter()
        .find(|c| c.name() == "gpu-procs")
        .unwrap();
    assert_eq!(procs.profiles(), [Profile::Quick, Profile::Epilog]);

    let run = |slurm_job_gpus: &str| {
        let job = JobContext {
            job_id: "4242".into(),
            user: None,
            gpus: job_gpus_from_env(Some(slurm_job_gpus), None),
        };
        let ctx = CheckContext {
            root: Arc::new(NodeRoot::new("/")),
            config: Arc::clone(&config),
            previous: None,
            now: chrono::Utc::now(),
            profile: Profile::Epilog,
            job: Some(Arc::new(job)),
            shared: Arc::clone(&shared),
        };
        procs.run(&ctx).unwrap().findings
    };

    // The strays sit on GPU 1: a job on GPUs 0 and 2 left nothing behind.
    let other_job = run("0,2");
    assert_eq!(other_job.len(), 2);
    assert!(other_job.iter().all(|f| f.is_ok()));

    let their_job = run("1-3");
    let faults: Vec<_> = their_job.iter().filter(|f| !f.is_ok()).collect();
    assert_eq!(faults.len(), 1);
    assert_eq!(
        (
            faults[0].code.as_str(),
            faults[0].severity,
            faults[0].entity.as_str()
        ),
        ("GPU_STRAY_PROCESSES", Severity::Drain, "gpu1")
    );
    assert_eq!(faults[0].actual.as_deref(), Some("pids 48213, 48214"));
}
