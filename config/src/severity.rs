//! The severity model of DESIGN.md, shared by the checks, the policy, the store and lemon.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How bad a finding is. The order is the ranking: the worst finding of a run
/// wins, and `unknown` ranks below `warning`.
///
/// The wire form (JSON, the spool export, the databases' columns) is the
/// lowercase name: `ok`, `unknown`, `warning`, `drain`, `down`.
#[derive(
    Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Healthy.
    #[default]
    Ok,
    /// The check could not run: recorded only, never drains by itself.
    Unknown,
    /// Degraded or suspicious; jobs can run. Recorded only.
    Warning,
    /// Repair once the running jobs end.
    Drain,
    /// Unusable now: out of service, jobs requeued.
    Down,
}

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::Ok,
        Severity::Unknown,
        Severity::Warning,
        Severity::Drain,
        Severity::Down,
    ];

    /// Nagios-style exit code, so existing monitoring can run the binaries.
    pub fn exit_code(self) -> i32 {
        match self {
            Severity::Ok => 0,
            Severity::Warning => 1,
            Severity::Drain | Severity::Down => 2,
            Severity::Unknown => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Unknown => "unknown",
            Severity::Warning => "warning",
            Severity::Drain => "drain",
            Severity::Down => "down",
        }
    }

    /// 0 (ok) to 4 (down): the value of the Prometheus gauge.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// True for severities that take the node out of service.
    pub fn removes_node(self) -> bool {
        matches!(self, Severity::Drain | Severity::Down)
    }
}

/// Honours width and alignment (`{:<8}`), for the tables people read.
impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// `severity == "down"`: compares with the wire form.
impl PartialEq<&str> for Severity {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Severity::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                format!("unknown severity `{s}` (expected ok, unknown, warning, drain or down)")
            })
    }
}

/// What an administrator (or the policy) should do about a finding.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    None,
    RestartApp,
    ResetGpu,
    /// Restart the IMEX daemon, then check again; a reboot if that fails.
    RestartImex,
    Reboot,
    Repair,
    Investigate,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::RestartApp => "restart-app",
            Action::ResetGpu => "reset-gpu",
            Action::RestartImex => "restart-imex",
            Action::Reboot => "reboot",
            Action::Repair => "repair",
            Action::Investigate => "investigate",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_ranks_below_warning_and_exit_codes_follow_nagios() {
        assert!(Severity::Unknown < Severity::Warning);
        assert!(Severity::Ok < Severity::Unknown);
        assert_eq!(
            [Severity::Ok, Severity::Unknown]
                .into_iter()
                .max()
                .unwrap()
                .exit_code(),
            3
        );
        assert_eq!(
            [Severity::Unknown, Severity::Warning]
                .into_iter()
                .max()
                .unwrap()
                .exit_code(),
            1
        );
        assert_eq!(Severity::Down.exit_code(), 2);
        assert_eq!(Severity::Drain.exit_code(), 2);
        assert_eq!("drain".parse::<Severity>().unwrap(), Severity::Drain);
    }

    #[test]
    fn the_wire_form_is_the_lowercase_name_and_nothing_else_parses() {
        for s in Severity::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<Severity>(&json).unwrap(), s);
            assert_eq!(s.as_str().parse::<Severity>().unwrap(), s);
            assert!(s == s.as_str());
        }
        assert!("Down".parse::<Severity>().is_err());
        assert!("critical".parse::<Severity>().is_err());
        assert!(serde_json::from_str::<Severity>("\"DOWN\"").is_err());
        assert_eq!(Severity::default(), Severity::Ok);
        assert_eq!(format!("[{:<8}]", Severity::Down), "[down    ]");
    }
}
