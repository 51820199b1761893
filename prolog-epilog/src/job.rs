//! The body of both programs: record the job, run the profile, apply the
//! policy, export, all under a watchdog.

use crate::env::{parse_exit_code2, SlurmEnv};
use clap::Parser;
use healthcheck::check::Profile;
use healthcheck::checks;
use healthcheck::checks::imex::channel as imex_channel;
use healthcheck::pipeline::{self, JobRecord, Request};
use healthcheck::record::{RunOptions, Trigger};
use healthcheck::root::NodeRoot;
use healthcheck::session::StoreUse;
use lemonade_config::spank::{self, Choice, Settings};
use lemonade_config::Config;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Which program this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Prolog,
    Epilog,
}

/// The command line: Slurm passes none; these are for people and tests.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "Lemonade's Slurm Prolog/Epilog: health checks around every job."
)]
pub struct Args {
    /// Config file.
    #[arg(long, env = "LEMONADE_CONFIG", default_value = lemonade_config::DEFAULT_PATH)]
    pub config: PathBuf,
    /// Root directory the checks read from (`/` on a node).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Print the scontrol commands instead of running them.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--root` other than `/`: use the configured node database all
    /// the same (tests, benchmarks); without it a replay records nothing.
    #[arg(long)]
    pub use_store: bool,
}

/// `main` of `lemonade-prolog` / `lemonade-epilog`.
pub fn main(phase: Phase) -> ExitCode {
    let name = match phase {
        Phase::Prolog => "lemonade-prolog",
        Phase::Epilog => "lemonade-epilog",
    };
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            // A usage error is ours: never fail the job for it.
            return ExitCode::SUCCESS;
        }
    };
    let env = SlurmEnv::from_process();
    let host = lemonade_slurm::node_name::host_name();
    let Some(node) = lemonade_slurm::node_name::resolve(None, env.node.as_deref(), host.as_deref())
    else {
        eprintln!("{name}: cannot tell which Slurm node this is (no SLURMD_NODENAME, no host name); no checks");
        // Ours, not the node's: never fail the job for it.
        return ExitCode::SUCCESS;
    };
    let mut config = lemonade_config::load(&args.config, Some(&node));
    let deadline = match (&config, phase) {
        (Ok(c), Phase::Prolog) => c.engine.prolog_deadline_s,
        (Ok(c), Phase::Epilog) => c.engine.epilog_deadline_s,
        (Err(_), _) => 10.0,
    }
    .max(0.5);
    start_watchdog(name, Duration::from_secs_f64(deadline));
    if let Ok(c) = config.as_mut() {
        fit_in(c, deadline);
    }
    let code = run(phase, &args, &env, &node, config);
    ExitCode::from(code)
}

/// The checks get most of the time; each Slurm call a slice, so that checks
/// plus the three calls of a drain end before the watchdog.
fn fit_in(config: &mut Config, deadline: f64) {
    config.engine.run_deadline_s = config.engine.run_deadline_s.min(deadline * 0.5);
    config.slurm.command_timeout_s = config.slurm.command_timeout_s.min(deadline * 0.12);
}

fn start_watchdog(name: &'static str, deadline: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        eprintln!(
            "{name}: did not finish within {:.1} s; giving up (the job is not failed for our delay)",
            deadline.as_secs_f64()
        );
        std::process::exit(0);
    });
}

fn run(
    phase: Phase,
    args: &Args,
    env: &SlurmEnv,
    node: &str,
    config: Result<Config, lemonade_config::ConfigError>,
) -> u8 {
    let now = chrono::Utc::now();
    let job = env.job();
    let job_record = job.as_ref().map(|j| job_record(phase, env, &j.job_id));
    if let (Ok(c), Some(j), Some(record)) = (&config, &job, &job_record) {
        let marker = c.store.spank_marker_path(&j.job_id);
        if !env.from_spank() && marker.exists() {
            // The SPANK plugin runs this job's checks: running them twice would
            // double the prolog's latency and the epilog's counter deltas.
            if phase == Phase::Epilog {
                let _ = std::fs::remove_file(&marker);
            }
            let _ = pipeline::record_job_only(c, node, record, now);
            return 0;
        }
    }
    let profile = match phase {
        Phase::Prolog => match prolog_choice(env, || node_spank_settings(env)) {
            Some(profile) => profile,
            None => {
                // The user said `--health-check=off` and the site allowed it.
                if let (Ok(c), Some(record)) = (&config, &job_record) {
                    let _ = pipeline::record_job_only(c, node, record, now);
                }
                println!(
                    "off {}: no checks (--health-check=off)",
                    job.as_ref().map_or("-", |j| j.job_id.as_str())
                );
                return 0;
            }
        },
        Phase::Epilog => Profile::Epilog,
    };
    let trigger = match (env.from_spank(), phase) {
        (true, _) => Trigger::Spank,
        (false, Phase::Prolog) => Trigger::Prolog,
        (false, Phase::Epilog) => Trigger::Epilog,
    };
    let root = Arc::new(NodeRoot::new(&args.root));
    if let (Ok(c), Phase::Prolog) = (&config, phase) {
        // NVIDIA's IMEX guide: channel devices do not survive a reboot, and
        // the prolog recreates them before the job (and the checks) look.
        if let Some(line) = imex_channel::for_prolog(&c.checks.imex, &root, args.dry_run) {
            eprintln!("{line}");
        }
    }
    let request = Request {
        store: StoreUse::for_run(true, root.is_live(), args.use_store),
        run: RunOptions {
            node: node.to_string(),
            root,
            profile,
            only: None,
            trigger,
            job,
            now,
        },
        apply_policy: true,
        dry_run: args.dry_run,
        job_record,
        recheck: Vec::new(),
    };
    let outcome = match pipeline::run(config, &checks::all(), &request) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("healthcheck: {e}");
            return 0;
        }
    };
    for line in outcome.stderr_lines() {
        eprintln!("{line}");
    }
    println!(
        "{} {}: worst {}, {} findings, {:.0} ms",
        profile.as_str(),
        request.run.job.as_ref().map_or("-", |j| j.job_id.as_str()),
        outcome.report.worst,
        outcome.report.findings.len(),
        outcome.report.duration_ms
    );
    // Only the prolog fails for a bad node: Slurm then requeues the job, and
    // our reason is already on the node. A failing epilog would only add
    // Slurm's `Epilog error` drain on top of ours.
    u8::from(phase == Phase::Prolog && outcome.took_node_out())
}

/// The prolog's profile, `None` for `off`.
///
/// Run by `lemonade_spank_prolog.so`: the profile it chose. Run by slurm.conf:
/// the job's `--health-check` as the submitting command resolved it, judged
/// again under this node's plugstack line (`node`, read only when needed):
/// its `default` for jobs without a choice (submitted where the plugin is not
/// loaded, or through slurmrestd), and `off` only where it says
/// `allow_off=yes`. Without a line to judge by, `off` is not honoured and the
/// default is the quick profile: a missing check costs more than a quick one.
fn prolog_choice(env: &SlurmEnv, node: impl FnOnce() -> Option<Settings>) -> Option<Profile> {
    if env.from_spank() {
        return match env.profile.as_deref() {
            Some("full") => Some(Profile::Full),
            _ => Some(Profile::Quick),
        };
    }
    let asked: Option<Choice> = env.job_choice.as_deref().and_then(|c| c.parse().ok());
    let choice = match asked {
        Some(Choice::Quick | Choice::Full) => asked,
        // `off` the node's line forbids gets that line's default.
        Some(Choice::Off) | None => node().map(|site| site.resolve(asked).unwrap_or(site.default)),
    };
    match choice.unwrap_or(Choice::Quick) {
        Choice::Quick => Some(Profile::Quick),
        Choice::Full => Some(Profile::Full),
        Choice::Off => None,
    }
}

/// The arguments on this node's plugstack.conf line of our plugin, if any.
/// Trouble reading it is reported and counts as no line.
fn node_spank_settings(env: &SlurmEnv) -> Option<Settings> {
    // Run by hand, outside Slurm: the usual place, if there is one.
    let slurm_conf = match &env.slurm_conf {
        Some(path) => PathBuf::from(path),
        None => Some(PathBuf::from("/etc/slurm/slurm.conf")).filter(|p| p.exists())?,
    };
    let found = spank::plugin_args(&slurm_conf)
        .map_err(|e| e.to_string())
        .and_then(|args| match args {
            Some(args) => Settings::parse(args.iter().map(String::as_str))
                .map(Some)
                .map_err(|e| format!("plugstack.conf: our plugin's line: {e}")),
            None => Ok(None),
        });
    found.unwrap_or_else(|e| {
        eprintln!("lemonade-prolog: {e}; judging --health-check without it");
        None
    })
}

/// The job's start (prolog) or end (epilog, with how it ended).
fn job_record(phase: Phase, env: &SlurmEnv, job_id: &str) -> JobRecord {
    match phase {
        Phase::Prolog => JobRecord::Started {
            job_id: job_id.to_string(),
            user: env.user.clone(),
        },
        Phase::Epilog => {
            let (exit_code, signal) = env
                .exit_code2
                .as_deref()
                .map(parse_exit_code2)
                .unwrap_or((None, None));
            JobRecord::Ended {
                job_id: job_id.to_string(),
                exit_code,
                signal,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(trigger: Option<&str>, profile: Option<&str>, job_choice: Option<&str>) -> SlurmEnv {
        SlurmEnv {
            trigger: trigger.map(String::from),
            profile: profile.map(String::from),
            job_choice: job_choice.map(String::from),
            ..Default::default()
        }
    }

    fn site(args: &[&str]) -> Option<Settings> {
        Some(Settings::parse(args.iter().copied()).unwrap())
    }

    #[test]
    fn the_jobs_choice_picks_the_prolog_profile() {
        let lenient = || site(&["allow_off=yes"]);
        let choice = |c: Option<&str>| prolog_choice(&env(None, None, c), lenient);
        assert_eq!(choice(None), Some(Profile::Quick));
        assert_eq!(choice(Some("quick")), Some(Profile::Quick));
        assert_eq!(choice(Some("full")), Some(Profile::Full));
        assert_eq!(choice(Some("off")), None);
        // Anything else is not ours to guess at: the node's default.
        assert_eq!(choice(Some("bogus")), Some(Profile::Quick));
    }

    #[test]
    fn the_nodes_plugstack_line_judges_off_and_gives_the_default() {
        let e = |c: Option<&str>| env(None, None, c);
        // allow_off=no on the node: off from a client that thought otherwise
        // gets the node's default.
        let strict = || site(&["default=full", "allow_off=no"]);
        assert_eq!(prolog_choice(&e(Some("off")), strict), Some(Profile::Full));
        assert_eq!(prolog_choice(&e(None), strict), Some(Profile::Full));
        assert_eq!(
            prolog_choice(&e(Some("quick")), strict),
            Some(Profile::Quick)
        );
        // No line found: off is not honoured, the default is quick.
        assert_eq!(
            prolog_choice(&e(Some("off")), || None),
            Some(Profile::Quick)
        );
        assert_eq!(prolog_choice(&e(None), || None), Some(Profile::Quick));
        assert_eq!(
            prolog_choice(&e(Some("full")), || None),
            Some(Profile::Full)
        );
    }

    #[test]
    fn run_by_the_plugin_its_profile_wins() {
        let e = env(Some("spank"), Some("full"), Some("quick"));
        assert_eq!(prolog_choice(&e, || None), Some(Profile::Full));
        let e = env(Some("spank"), Some("quick"), Some("full"));
        assert_eq!(prolog_choice(&e, || None), Some(Profile::Quick));
    }

    #[test]
    fn the_line_is_found_from_slurm_conf() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=x\n").unwrap();
        std::fs::write(
            dir.path().join("plugstack.conf"),
            "required /x/lemonade_spank.so default=full allow_off=yes\n",
        )
        .unwrap();
        let mut e = env(None, None, None);
        e.slurm_conf = Some(conf.display().to_string());
        let found = node_spank_settings(&e).unwrap();
        assert_eq!((found.default, found.allow_off), (Choice::Full, true));
        // A typo on the line is reported and counts as no line.
        std::fs::write(
            dir.path().join("plugstack.conf"),
            "required /x/lemonade_spank.so alow_off=yes\n",
        )
        .unwrap();
        assert!(node_spank_settings(&e).is_none());
    }
}
