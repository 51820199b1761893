//! The exit status of a run, in the Nagios convention so that existing
//! monitoring can run the binaries: 0 ok, 1 warning, 2 drain or down, 3 unknown.

use lemonade_config::Severity;
use serde::{Serialize, Serializer};

/// What a run exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Ok,
    Warning,
    /// `drain` or `down`: the node is (or is about to be) out of service.
    Critical,
    /// The checker could not tell: our own failure, never the node's.
    Unknown,
}

impl ExitStatus {
    /// The status of a run whose checks' worst finding is `worst`.
    pub fn of(worst: Severity) -> ExitStatus {
        match worst {
            Severity::Ok => ExitStatus::Ok,
            Severity::Warning => ExitStatus::Warning,
            Severity::Drain | Severity::Down => ExitStatus::Critical,
            Severity::Unknown => ExitStatus::Unknown,
        }
    }

    /// With a warning of the policy's own (an unknown streak) on top: it
    /// counts as a check's warning would, over ok and over unknown.
    pub fn with_policy_warning(self) -> ExitStatus {
        match self {
            ExitStatus::Ok | ExitStatus::Unknown => ExitStatus::Warning,
            other => other,
        }
    }

    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Ok => 0,
            ExitStatus::Warning => 1,
            ExitStatus::Critical => 2,
            ExitStatus::Unknown => 3,
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// As the number, in JSON output and in the node database.
impl Serialize for ExitStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.code())
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(status: ExitStatus) -> Self {
        std::process::ExitCode::from(status.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_severity_gives_the_nagios_code() {
        let code = |s| ExitStatus::of(s).code();
        assert_eq!(
            [
                Severity::Ok,
                Severity::Warning,
                Severity::Drain,
                Severity::Down,
                Severity::Unknown
            ]
            .map(code),
            [0, 1, 2, 2, 3]
        );
    }

    #[test]
    fn a_policy_warning_raises_ok_and_unknown_but_not_critical() {
        assert_eq!(ExitStatus::Ok.with_policy_warning(), ExitStatus::Warning);
        assert_eq!(
            ExitStatus::Unknown.with_policy_warning(),
            ExitStatus::Warning
        );
        assert_eq!(
            ExitStatus::Critical.with_policy_warning(),
            ExitStatus::Critical
        );
    }
}
