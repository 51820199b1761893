//! `imex`: the IMEX daemon of a multi-node NVLink domain (GB200/GB300
//! NVL72), on a node configured as part of one (`[checks.imex] enabled`).
//!
//! [`gather::gather`] finds the daemon in `/proc`, looks at the channel
//! device without following symlinks, and asks `nvidia-imex-ctl -N` (under
//! `ctl_timeout_s`, through the one bounded runner) how the domain stands;
//! [`ctl::parse`] reads its table; [`evaluate::evaluate`] judges. A ctl that
//! hangs, fails or prints what we cannot read is `unknown`, never ok and
//! never a drain; a snapshot carries its output in [`gather::CTL_FILE`],
//! which a replay reads instead. [`channel::ensure`] recreates a missing channel device
//! (the prolog, and the `restart-imex` rung).

pub mod channel;
pub mod ctl;
pub mod evaluate;
pub mod gather;

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use lemonade_config::Config;
use std::path::PathBuf;

pub use evaluate::evaluate;
pub use gather::gather;

/// Name of the check, in findings and on the command line.
pub const NAME: &str = "imex";

/// The `imex` check.
pub struct Imex;

impl Check for Imex {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "IMEX daemon running and READY, its NVLink-domain peers connected (nvidia-imex-ctl -N), channel device present"
    }
    /// In the prolog too: a job on a tray whose IMEX domain is broken
    /// starts and fails.
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.imex;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.imex;
        let data = gather(&ctx.root, settings)?;
        Ok(CheckOutput::findings(evaluate(&data, settings)))
    }
    /// What the ctl printed, so that a replay judges the node's domain
    /// and not the replaying machine's.
    fn snapshot_files(&self, ctx: &CheckContext) -> Vec<(PathBuf, Vec<u8>)> {
        match gather::ctl_output(&ctx.config.checks.imex) {
            Ok((text, _)) => vec![(PathBuf::from(gather::CTL_FILE), text.into_bytes())],
            Err(_) => Vec::new(),
        }
    }
}
