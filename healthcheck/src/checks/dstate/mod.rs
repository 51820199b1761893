//! `dstate`: processes stuck in uninterruptible sleep (`D`), the mark of a
//! hung filesystem, device or driver, which no kill can end.
//!
//! One run looks twice: [`procfs::blocked`] lists the tasks in `D`; when
//! there are any, the check waits `threshold_s` and looks at those tasks
//! again; [`evaluate::stuck`] keeps the ones still in `D` that never ran in
//! between. A node with no task in `D` (the usual case) costs one pass over
//! `/proc` and no wait. On a replayed snapshot (`--root`), nothing can change
//! between the looks, so there is no wait either.

pub mod evaluate;
pub mod procfs;

use crate::check::{Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView};
use lemonade_config::Config;
use std::time::Duration;

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "dstate";

/// The `dstate` check.
pub struct Dstate;

/// Periodic runs only: the second look can wait seconds, which a job's
/// prolog or epilog should not.
const PROFILES: &[Profile] = &[Profile::Periodic, Profile::Full];

impl Check for Dstate {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "processes stuck in uninterruptible sleep (D), two looks threshold_s apart"
    }
    fn profiles(&self) -> &'static [Profile] {
        PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.dstate;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let s = &ctx.config.checks.dstate;
        let first = procfs::blocked(&ctx.root)?;
        if first.is_empty() {
            return Ok(CheckOutput::findings(evaluate::evaluate(&[], 0.0, s)));
        }
        if ctx.root.is_live() {
            std::thread::sleep(Duration::from_secs_f64(s.threshold_s.max(0.0)));
        }
        let mut second = Vec::new();
        for task in &first {
            second.extend(procfs::look(&ctx.root, task.pid)?);
        }
        let stuck = evaluate::stuck(&first, &second);
        Ok(CheckOutput::findings(evaluate::evaluate(
            &stuck,
            s.threshold_s,
            s,
        )))
    }
}
