//! One run as every entry point does it: run the checks, apply the policy,
//! export for the head node. `healthcheck` (periodic), `lemonade-prolog` and
//! `lemonade-epilog` differ only in the profile, the job and the extra records.

use super::{apply, PolicyResult};
use crate::check::Check;
use crate::export;
use crate::finding::worst;
use crate::record::{self, RunOptions, RunReport};
use lemonade_config::{Config, ConfigError, Severity};
use lemonade_spool::Body;
use std::sync::Arc;

/// A run, what the policy did after it, and how the export went.
pub struct Applied {
    pub report: RunReport,
    pub policy: PolicyResult,
    /// What was exported, or why nothing was.
    pub exported: Result<export::Exported, String>,
}

/// Runs, applies the policy (when the config could be read: a checker that
/// cannot read its config never touches Slurm) and exports `extra` records
/// (job starts and ends) beside the run's own.
pub fn run_apply_export(
    config: Result<Config, ConfigError>,
    registry: &[Arc<dyn Check>],
    opts: &RunOptions,
    dry_run: bool,
    extra: Vec<Body>,
) -> Result<Applied, String> {
    let usable = config.as_ref().ok().cloned();
    let mut report = record::execute(config, registry, opts)?;
    let Some(config) = usable else {
        return Ok(Applied {
            report,
            policy: PolicyResult::default(),
            exported: Err("config error: no policy, no export".into()),
        });
    };
    let policy = apply(&config, &report, dry_run);
    report.findings.extend(policy.findings.iter().cloned());
    // The policy's warnings (an unknown streak) count as a warning would;
    // its unknowns (Slurm unreachable) are our own failure and stay out.
    let policy_warns = policy
        .findings
        .iter()
        .any(|f| f.severity == Severity::Warning);
    if policy_warns && matches!(report.exit_code, 0 | 3) {
        report.exit_code = Severity::Warning.exit_code();
    }
    report.worst = worst(&report.findings);
    let mut bodies = extra;
    bodies.extend(export::bodies_of_run(&report, &policy.changes));
    let exported = if opts.record {
        export::export(&config, &opts.node, opts.now.timestamp(), bodies).map_err(|e| e.to_string())
    } else {
        Ok(export::Exported::default())
    };
    Ok(Applied {
        report,
        policy,
        exported,
    })
}
