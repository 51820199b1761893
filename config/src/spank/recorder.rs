//! The flight-recorder setting (issue 32): whether a job's PyTorch ranks run
//! with the NCCL flight recorder on, so that a hang leaves a dump of every
//! rank's last collectives for `lemon trace`. The site sets the default in
//! plugstack.conf (`flight_recorder=off|on|timing`, off unless set); a user
//! overrides it per job with `--flight-recorder[=on|timing|off]`.

use std::fmt;

/// What a job's tasks get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorder {
    /// Nothing changed in the tasks' environment.
    Off,
    /// The ring buffer and a dump on timeout: hangs can be localized.
    On,
    /// Also CUDA-event timing of every collective: stragglers too.
    Timing,
}

impl Recorder {
    pub fn as_str(self) -> &'static str {
        match self {
            Recorder::Off => "off",
            Recorder::On => "on",
            Recorder::Timing => "timing",
        }
    }

    /// Parses an option value; a bare `--flight-recorder` (nothing, `""` or
    /// `"(null)"` from Slurm) means `on`.
    pub fn parse_option(value: Option<&str>) -> Result<Recorder, String> {
        match value.map(str::trim) {
            None | Some("") | Some("(null)") => Ok(Recorder::On),
            Some(v) => v.parse(),
        }
    }
}

impl std::str::FromStr for Recorder {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "no" => Ok(Recorder::Off),
            "on" | "yes" => Ok(Recorder::On),
            "timing" => Ok(Recorder::Timing),
            _ => Err(format!("`{s}` is not one of on, timing, off")),
        }
    }
}

impl fmt::Display for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_option_means_on_and_bad_values_are_named() {
        assert_eq!(Recorder::parse_option(None), Ok(Recorder::On));
        assert_eq!(Recorder::parse_option(Some("(null)")), Ok(Recorder::On));
        assert_eq!(Recorder::parse_option(Some("Timing")), Ok(Recorder::Timing));
        assert_eq!(Recorder::parse_option(Some("off")), Ok(Recorder::Off));
        let e = Recorder::parse_option(Some("verbose")).unwrap_err();
        assert!(
            e.contains("`verbose`") && e.contains("on, timing, off"),
            "{e}"
        );
    }
}
