//! Judging the expected services: a pure function of the scan and config.

use super::procfs::{comm_name, Running};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, ServicesSettings};

pub const SERVICE_MISSING: &str = "SERVICE_MISSING";

/// One finding per expected service.
pub fn evaluate(running: &Running, settings: &ServicesSettings) -> Vec<Finding> {
    settings
        .expected
        .iter()
        .map(|name| match running.0.get(comm_name(name)) {
            Some(pid) => Finding::ok(NAME, name).actual(format!("pid {pid}")),
            None => Finding::new(NAME, name, SERVICE_MISSING, settings.missing_severity)
                .expected("running")
                .actual("not running")
                .action(Action::Repair)
                .message(format!("no {name} process is running")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    #[test]
    fn each_expected_service_is_ok_when_running_and_missing_otherwise() {
        let settings = ServicesSettings {
            expected: vec!["munged".into(), "sssd".into(), "nvidia-persistenced".into()],
            ..ServicesSettings::default()
        };
        let running = Running(
            [
                ("munged".to_string(), 812),
                ("nvidia-persiste".to_string(), 99),
            ]
            .into(),
        );
        let findings = evaluate(&running, &settings);
        let found: Vec<(&str, &str, Severity)> = findings
            .iter()
            .map(|f| (f.entity.as_str(), f.code.as_str(), f.severity))
            .collect();
        assert_eq!(
            found,
            [
                ("munged", "OK", Severity::Ok),
                ("sssd", SERVICE_MISSING, Severity::Drain),
                ("nvidia-persistenced", "OK", Severity::Ok),
            ]
        );
    }
}
