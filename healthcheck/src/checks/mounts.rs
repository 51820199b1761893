//! PLACEHOLDER: being written.

use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use lemonade_config::Config;

pub struct Mounts;

impl Check for Mounts {
    fn name(&self) -> &'static str {
        "mounts"
    }
    fn summary(&self) -> &'static str {
        "not written yet"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.mounts;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, _ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        Err(CheckError::Other("not implemented yet".into()))
    }
}
