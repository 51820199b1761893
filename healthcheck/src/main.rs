//! `healthcheck`: see `healthcheck --help`.

use anyhow::{Context, Result};
use clap::Parser;
use healthcheck::check::{JobContext, Profile};
use healthcheck::cli::{parse_check_words, parse_since, Cli, Command, GlobalArgs, RunArgs};
use healthcheck::output::Format;
use healthcheck::pipeline::{self, Request};
use healthcheck::record::{RunOptions, Trigger};
use healthcheck::root::NodeRoot;
use healthcheck::session::StoreUse;
use healthcheck::{baseline, checks, history, output, snapshot, validate};
use std::process::ExitCode;
use std::sync::Arc;

/// Nagios's "unknown": our own failure is never reported as a node problem.
const EXIT_UNKNOWN: u8 = 3;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap exits 2 on usage errors, which would read as "drain".
            return ExitCode::from(if e.use_stderr() { EXIT_UNKNOWN } else { 0 });
        }
    };
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => match e.downcast_ref::<clap::Error>() {
            // A check's own usage error (or its --help) reads as clap's.
            Some(usage) => {
                let _ = usage.print();
                ExitCode::from(if usage.use_stderr() { EXIT_UNKNOWN } else { 0 })
            }
            None => {
                eprintln!("healthcheck: {e:#}");
                ExitCode::from(EXIT_UNKNOWN)
            }
        },
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    let global = cli.global;
    match cli.command {
        None => run(&global, periodic_args(), Trigger::Periodic),
        Some(Command::Run(args)) => run(&global, args, Trigger::Manual),
        Some(Command::Check(words)) => {
            // `healthcheck xid --format json` is `healthcheck run --checks xid --format json`.
            let (global, args) = parse_check_words(&words, &global)?;
            run(&global, args, Trigger::Manual)
        }
        Some(Command::List) => list(&global),
        Some(Command::Validate(args)) if args.parse.is_empty() => validate_node(&global, args),
        Some(Command::Validate(args)) => {
            let [kind, file] = args.parse.as_slice() else {
                anyhow::bail!("--parse takes KIND FILE");
            };
            let kind: ::validate::Kind = kind.parse()?;
            let metrics = validate::parse_saved(kind, std::path::Path::new(file))?;
            print!("{}", validate::render(kind, &metrics, args.format));
            Ok(0)
        }
        Some(Command::Baseline { hosts }) => {
            let root = NodeRoot::new(&global.root);
            let node = baseline::read(&root)
                .with_context(|| format!("cannot read the node below {}", global.root.display()))?;
            print!("{}", node.to_toml(hosts.as_deref()));
            Ok(0)
        }
        Some(Command::History(args)) => {
            let config =
                load_config(&global, &node_name(&global)?).context("cannot read the config")?;
            let since = parse_since(&args.since, chrono::Utc::now())?;
            // Reading the history creates and changes nothing, like `--no-record`.
            let store = lemonade_sql::node::NodeStore::open_read_only(
                &config.store.path,
                std::time::Duration::from_millis(config.store.lock_wait_ms),
            )?;
            match store {
                Some(store) => print!(
                    "{}",
                    history::render(&store, since.timestamp(), args.all, args.limit, args.format)?
                ),
                None => print!(
                    "{}",
                    history::render_no_database(&config.store.path, args.format)
                ),
            }
            Ok(0)
        }
        Some(Command::Sample(args)) => sample(&global, &args),
        Some(Command::Snapshot { out }) => {
            let node = node_name(&global)?;
            let config = load_config(&global, &node).context("cannot read the config")?;
            let report = snapshot::capture(&config, &checks::all(), &global.root, &node, &out)?;
            eprintln!(
                "wrote {} ({} findings, worst {})",
                out.display(),
                report.findings.len(),
                report.worst
            );
            Ok(0)
        }
    }
}

/// Set by SIGTERM and SIGINT: the sampler exports what is pending and exits.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// `healthcheck sample`: the node sampler, until SIGTERM or `--rounds`.
fn sample(global: &GlobalArgs, args: &healthcheck::cli::SampleArgs) -> Result<u8> {
    use healthcheck::sampler::service::{Service, Settings};
    use nix::sys::signal::{signal, SigHandler, Signal};
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let node = node_name(global)?;
    let config = load_config(global, &node).context("cannot read the config")?;
    // One NVML session for the service's life; a node without a driver
    // still gets its CPU, memory, disk and InfiniBand metrics.
    let nvml = match healthcheck::nvml_handle::load(&config.checks.gpu.library_path) {
        Ok(nvml) => Some(nvml),
        Err(e) => {
            eprintln!("healthcheck sample: no GPU metrics: {}", e.message);
            None
        }
    };
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { signal(sig, SigHandler::Handler(on_stop)) }.context("cannot handle signals")?;
    }
    let settings = Settings {
        interval: Duration::from_secs(args.interval),
        flush_every: args.flush_every,
        prune_after: Duration::from_secs(args.prune_after),
        ..Settings::default()
    };
    let sampler = healthcheck::sampler::Sampler::new(NodeRoot::new(&global.root), nvml);
    let mut service = Service::new(config, node, settings, sampler);
    service.run(args.rounds, &|| STOP.load(Ordering::SeqCst));
    Ok(0)
}

/// What a bare `healthcheck` runs: the periodic profile, recorded.
fn periodic_args() -> RunArgs {
    RunArgs {
        checks: None,
        profile: Profile::Periodic,
        format: Format::Human,
        no_record: false,
        kmsg_file: None,
        prometheus_textfile: None,
        apply_policy: true,
        now: None,
    }
}

/// `healthcheck validate` without `--parse`: the suite on this node.
fn validate_node(global: &GlobalArgs, args: healthcheck::cli::ValidateArgs) -> Result<u8> {
    let node = node_name(global)?;
    let config = load_config(global, &node).context("cannot read the config")?;
    config
        .validate
        .check()
        .map_err(|e| anyhow::anyhow!("{}: {e}", global.config.display()))?;
    let root = NodeRoot::new(&global.root);
    let live = global.root == std::path::Path::new("/");
    let request = validate::run::Request {
        config: &config,
        root: &root,
        node: &node,
        job_id: args.job_id,
        dry_run: global.dry_run || config.policy.dry_run,
        record: live || global.use_store,
        now: chrono::Utc::now().timestamp(),
    };
    let report = validate::run::run(&request);
    print!("{}", validate::run::render(&report, args.format));
    Ok(report.exit_code())
}

fn load_config(
    global: &GlobalArgs,
    node: &str,
) -> Result<lemonade_config::Config, lemonade_config::ConfigError> {
    lemonade_config::load(&global.config, Some(node))
}

/// This very program with this run's config, root and node: the checks run
/// again in a fresh process after a GPU reset (see `healthcheck::repair`).
fn recheck_argv(global: &GlobalArgs, node: &str) -> Vec<String> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    vec![
        path(&exe),
        "--config".into(),
        path(&global.config),
        "--root".into(),
        path(&global.root),
        "--node".into(),
        node.to_string(),
    ]
}

/// `--node`, else `$SLURMD_NODENAME`, else the short host name.
fn node_name(global: &GlobalArgs) -> Result<String> {
    lemonade_slurm::node_name::of_this_process(global.node.as_deref()).context(
        "cannot tell which Slurm node this is (no host name): pass --node or set SLURMD_NODENAME",
    )
}

fn run(global: &GlobalArgs, args: RunArgs, trigger: Trigger) -> Result<u8> {
    let node = node_name(global)?;
    let mut config = load_config(global, &node);
    if let (Ok(c), Some(kmsg)) = (config.as_mut(), &args.kmsg_file) {
        c.checks.xid.kmsg_file = kmsg.clone();
    }
    let now = match args.now {
        Some(t) => chrono::DateTime::from_timestamp(t, 0).context("--now is out of range")?,
        None => chrono::Utc::now(),
    };
    let root = Arc::new(NodeRoot::new(&global.root));
    let request_node = node.clone();
    let request = Request {
        store: StoreUse::for_run(!args.no_record, root.is_live(), global.use_store),
        run: RunOptions {
            node,
            root,
            profile: args.profile,
            only: args.checks.clone(),
            trigger,
            job: None::<JobContext>,
            now,
        },
        apply_policy: args.apply_policy,
        dry_run: global.dry_run,
        job_record: None,
        recheck: recheck_argv(global, &request_node),
    };
    let outcome = pipeline::run(config, &checks::all(), &request)?;
    for line in outcome.stderr_lines() {
        eprintln!("{line}");
    }
    let report = &outcome.report;
    match args.format {
        Format::Human => print!("{}", output::human(report)),
        Format::Json => println!("{}", output::json(report)),
    }
    if let Some(path) = &args.prometheus_textfile {
        lemonade_spool::atomic::write_atomically(path, output::prometheus(report).as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(outcome.exit().code())
}

fn list(global: &GlobalArgs) -> Result<u8> {
    let config = load_config(global, &node_name(global)?);
    let mut config_ok = config.as_ref().ok().cloned().unwrap_or_default();
    // `expected_count = "auto"` shows as the number this node would check.
    healthcheck::checks::gpu::count::resolve(&mut config_ok, &NodeRoot::new(&global.root));
    if let Err(e) = &config {
        println!("config error (every check would be unknown): {e}\n");
    }
    println!(
        "{:<10} {:<8} {:<28} {:<9} SUMMARY",
        "CHECK", "ENABLED", "PROFILES", "DEADLINE"
    );
    for check in checks::all() {
        let settings = check.settings(&config_ok);
        let profiles: Vec<&str> = check.profiles().iter().map(|p| p.as_str()).collect();
        let deadline = settings
            .deadline
            .unwrap_or(std::time::Duration::from_secs_f64(
                config_ok.engine.check_deadline_s,
            ));
        println!(
            "{:<10} {:<8} {:<28} {:<9} {}",
            check.name(),
            if settings.enabled { "yes" } else { "no" },
            profiles.join(","),
            format!("{:.1}s", deadline.as_secs_f64()),
            check.summary()
        );
        println!("           settings: {}", settings.all);
    }
    println!("\n{}", healthcheck::checks::xid::catalog::edition());
    Ok(0)
}
