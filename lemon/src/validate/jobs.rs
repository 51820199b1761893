//! The validation job in Slurm (issue 31 part 4): its `sbatch` argv, which
//! nodes have one queued or running already (`squeue`), and which nodes the
//! repair loop parked in their own reservation to be validated before they
//! return (`scontrol show reservation`). Every command goes through the
//! slurm crate's [`SlurmCommands`]: argv only, under a deadline; the one
//! shell line is `--wrap`'s fixed `<healthcheck> validate`.

use lemonade_config::ValidateSettings;
use lemonade_slurm::command::{CommandError, SlurmCommands};
use lemonade_slurm::hostlist;
use std::collections::{BTreeMap, BTreeSet};

/// The per-node reservation the node's repair loop puts a rebooted or
/// repaired node in (Users=root, MAINT): only the validation job runs
/// there. Its name's owner is the slurm crate's `node_state`.
pub use lemonade_slurm::node_state::validation_reservation as reservation_of;

/// `sbatch`'s arguments for validating `node`; `reservation` is the node's
/// own for a node returning from repair, else the configured one.
pub fn sbatch_args(
    settings: &ValidateSettings,
    node: &str,
    reservation: Option<&str>,
) -> Vec<String> {
    let mut args = vec![
        "--parsable".to_string(),
        "--exclusive".into(),
        "-w".into(),
        node.into(),
        format!("--job-name={}", settings.job_name),
    ];
    args.extend(
        settings
            .partition
            .iter()
            .map(|p| format!("--partition={p}")),
    );
    args.extend(settings.qos.iter().map(|q| format!("--qos={q}")));
    args.extend(reservation.map(|r| format!("--reservation={r}")));
    args.extend([
        format!("--time={}", settings.time_limit_minutes),
        // The job runs on the node: lemon's working directory may not exist
        // there, /tmp does.
        "--chdir=/tmp".into(),
        "--output=/tmp/%x-%j.out".into(),
        "--wrap".into(),
        format!("{} validate", settings.healthcheck_path.display()),
    ]);
    args
}

/// Submits one validation job; returns its id (`--parsable`: `ID` or
/// `ID;cluster`).
pub fn submit(slurm: &SlurmCommands, args: &[String]) -> Result<String, CommandError> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = slurm.run("sbatch", &argv)?;
    let line = out.stdout.lines().next().unwrap_or_default();
    Ok(line
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string())
}

/// `%i|%n|%N`: the job id, the nodes it asked for (`-w`), the nodes it has.
pub const QUEUE_FORMAT: &str = "%i|%n|%N";

/// The nodes with a validation job (named `job_name`) pending or running.
pub fn queued(slurm: &SlurmCommands, job_name: &str) -> Result<BTreeSet<String>, CommandError> {
    let out = slurm.run("squeue", &["-h", "--name", job_name, "-o", QUEUE_FORMAT])?;
    Ok(parse_queued(&out.stdout))
}

/// Parses [`QUEUE_FORMAT`] lines: a running job's nodes, else a pending
/// job's requested ones. A line that does not parse names no node.
pub fn parse_queued(text: &str) -> BTreeSet<String> {
    let mut nodes = BTreeSet::new();
    for line in text.lines() {
        let mut fields = line.trim().splitn(3, '|');
        let (Some(_id), Some(asked), Some(has)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let list = [has.trim(), asked.trim()]
            .into_iter()
            .find(|l| !l.is_empty() && *l != "(null)");
        if let Some(expanded) = list.and_then(|l| hostlist::expand(l).ok()) {
            nodes.extend(expanded);
        }
    }
    nodes
}

/// The nodes parked in their validation reservation, with its start (unix
/// seconds; `None` when Slurm's time did not parse).
pub fn reservations(slurm: &SlurmCommands) -> Result<BTreeMap<String, Option<i64>>, CommandError> {
    let out = slurm.run_with_env(
        "scontrol",
        &["show", "reservation", "-o"],
        &[("SLURM_TIME_FORMAT", "%s")],
    )?;
    Ok(parse_reservations(&out.stdout))
}

/// Parses `scontrol show reservation -o` (one reservation a line, `Key=Value`
/// words): only ours, by name.
pub fn parse_reservations(text: &str) -> BTreeMap<String, Option<i64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        };
        let prefix = reservation_of("");
        let Some(node) = field("ReservationName").and_then(|n| n.strip_prefix(prefix.as_str()))
        else {
            continue;
        };
        if node.is_empty() {
            continue;
        }
        let start = field("StartTime").and_then(|t| crate::db::parse_time(t).ok().flatten());
        out.insert(node.to_string(), start);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sbatch_argv_holds_every_configured_option_and_one_fixed_wrap_line() {
        let mut s = ValidateSettings::default();
        assert_eq!(
            sbatch_args(&s, "gpu002", Some("lemonade_validate_gpu002")),
            [
                "--parsable",
                "--exclusive",
                "-w",
                "gpu002",
                "--job-name=lemonade-validate",
                "--reservation=lemonade_validate_gpu002",
                "--time=120",
                "--chdir=/tmp",
                "--output=/tmp/%x-%j.out",
                "--wrap",
                "/usr/bin/healthcheck validate",
            ]
        );
        s.partition = Some("gpu".into());
        s.qos = Some("maint".into());
        let args = sbatch_args(&s, "gpu003", None);
        assert_eq!(args[5..7], ["--partition=gpu", "--qos=maint"]);
        assert!(!args.iter().any(|a| a.starts_with("--reservation")));
    }

    #[test]
    fn queued_jobs_name_their_running_nodes_or_the_nodes_they_asked_for() {
        let text = "101|gpu002|gpu002\n102|gpu[003-004]|\n103||(null)\nnot a line\n";
        let nodes: Vec<String> = parse_queued(text).into_iter().collect();
        assert_eq!(nodes, ["gpu002", "gpu003", "gpu004"]);
    }

    #[test]
    fn only_our_reservations_count_and_their_start_is_read() {
        let text = "ReservationName=lemonade_validate_gpu002 StartTime=1700000000 EndTime=1700086400 Nodes=gpu002 Flags=MAINT Users=root\n\
                    ReservationName=pm_window StartTime=1700000000 Nodes=gpu[001-004]\n\
                    ReservationName=lemonade_validate_gpu005 StartTime=2026-11-24T10:00:00 Nodes=gpu005\n\
                    ReservationName=lemonade_validate_gpu006 StartTime=soon Nodes=gpu006\n";
        let parsed = parse_reservations(text);
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed["gpu002"], Some(1_700_000_000));
        assert_eq!(parsed["gpu005"], Some(1_795_514_400));
        assert_eq!(parsed["gpu006"], None);
        assert!(parse_reservations("No reservations in the system\n").is_empty());
    }
}
