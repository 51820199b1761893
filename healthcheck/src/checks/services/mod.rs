//! `services`: daemons the node needs (`munged`, `sssd`, `slurmd`), found by
//! scanning `/proc`, never by running a shell or `pgrep`.
//!
//! [`procfs::gather`] reads `/proc/<pid>/comm` (and `stat` of the matches);
//! [`evaluate::evaluate`] names each expected process that is not running.

pub mod evaluate;
pub mod procfs;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, BACKGROUND_PROFILES,
};
use lemonade_config::Config;

pub use evaluate::evaluate;
pub use procfs::{gather, Running};

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "services";

/// The `services` check.
pub struct Services;

impl Check for Services {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "expected daemons (munged, sssd, ...) running, by a /proc scan"
    }
    /// Not in the prolog: a /proc scan reads one file per process (about
    /// 10 µs each, 15 ms on a node with 1,500 tasks), and a missing daemon
    /// is found by the next periodic run.
    fn profiles(&self) -> &'static [Profile] {
        BACKGROUND_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.services;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.services;
        if settings.expected.is_empty() {
            return Ok(CheckOutput::default());
        }
        let running = gather(&ctx.root, &settings.expected)?;
        Ok(CheckOutput::findings(evaluate(&running, settings)))
    }
}
