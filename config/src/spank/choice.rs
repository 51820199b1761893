//! The user's `--health-check[=quick|full|off]` value.

use std::fmt;

/// What health checks a job asks for before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The prolog's fast checks.
    Quick,
    /// The complete suite: for large, expensive jobs.
    Full,
    /// No checks around this job (only if the site allows it).
    Off,
}

impl Choice {
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Quick => "quick",
            Choice::Full => "full",
            Choice::Off => "off",
        }
    }

    /// Parses an option value. A bare `--health-check` (no value, which Slurm
    /// hands over as nothing, `""` or `"(null)"`) asks for the full suite:
    /// a user who bothers to name the option wants more than the default.
    pub fn parse_option(value: Option<&str>) -> Result<Choice, String> {
        match value.map(str::trim) {
            None | Some("") | Some("(null)") => Ok(Choice::Full),
            Some(v) => v.parse(),
        }
    }
}

impl std::str::FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "quick" => Ok(Choice::Quick),
            "full" => Ok(Choice::Full),
            "off" => Ok(Choice::Off),
            _ => Err(format!("`{s}` is not one of quick, full, off")),
        }
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_a_bare_option() {
        assert_eq!(Choice::parse_option(Some("quick")), Ok(Choice::Quick));
        assert_eq!(Choice::parse_option(Some("FULL")), Ok(Choice::Full));
        assert_eq!(Choice::parse_option(Some("off")), Ok(Choice::Off));
        assert_eq!(Choice::parse_option(None), Ok(Choice::Full));
        assert_eq!(Choice::parse_option(Some("(null)")), Ok(Choice::Full));
        let err = Choice::parse_option(Some("fast")).unwrap_err();
        assert!(
            err.contains("`fast`") && err.contains("quick, full, off"),
            "{err}"
        );
    }
}
