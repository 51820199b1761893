//! The plugin's arguments: the words after its path on its `plugstack.conf`
//! line (one line; plugstack.conf has no continuation lines), e.g.
//!
//! ```text
//! required lemonade_spank.so default=quick allow_off=no timeout=60
//! ```
//!
//! An argument the plugin does not know is an error that names it: a typo in
//! `plugstack.conf` must not silently change what runs around every job.

use super::{Choice, Recorder};
use std::path::PathBuf;
use std::time::Duration;

/// Parsed plugstack arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// What a job gets when the user says nothing.
    pub default: Choice,
    /// Whether users may say `--health-check=off`.
    pub allow_off: bool,
    /// Program run by `slurm_spank_job_prolog`; `None` (`prolog=none`) runs nothing.
    pub prolog: Option<PathBuf>,
    /// Program run by `slurm_spank_job_epilog`; `None` (`epilog=none`) runs nothing.
    pub epilog: Option<PathBuf>,
    /// `lemonade.toml`, passed on as `LEMONADE_CONFIG` and read for the state directory.
    pub config: PathBuf,
    /// Deadline of one prolog or epilog program; past it the program is killed.
    pub timeout: Duration,
    /// The NCCL flight recorder for jobs whose user says nothing (issue 32).
    pub flight_recorder: Recorder,
    /// Its ring: entries kept per rank (`TORCH_NCCL_TRACE_BUFFER_SIZE`).
    pub flight_recorder_buffer: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default: Choice::Quick,
            allow_off: false,
            prolog: Some(PathBuf::from("/usr/bin/lemonade-prolog")),
            epilog: Some(PathBuf::from("/usr/bin/lemonade-epilog")),
            config: PathBuf::from(crate::DEFAULT_PATH),
            timeout: Duration::from_secs(60),
            flight_recorder: Recorder::Off,
            flight_recorder_buffer: DEFAULT_RECORDER_BUFFER,
        }
    }
}

impl Settings {
    /// Parses `key=value` words; the first bad one is the error.
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Settings, String> {
        let mut s = Settings::default();
        for arg in args {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("argument `{arg}` is not key=value"))?;
            match key {
                "default" => {
                    s.default = value
                        .parse()
                        .map_err(|e| format!("argument `{arg}`: {e}"))?
                }
                "allow_off" => s.allow_off = parse_bool(value).ok_or_else(|| {
                    format!("argument `{arg}`: expected yes or no")
                })?,
                "prolog" => s.prolog = program(value),
                "epilog" => s.epilog = program(value),
                "config" => s.config = PathBuf::from(value),
                "timeout" => {
                    let seconds: f64 = value
                        .parse()
                        .ok()
                        .filter(|t: &f64| t.is_finite() && *t > 0.0)
                        .ok_or_else(|| {
                            format!("argument `{arg}`: expected a positive number of seconds")
                        })?;
                    s.timeout = Duration::from_secs_f64(seconds);
                }
                "flight_recorder" => {
                    s.flight_recorder = value
                        .parse()
                        .map_err(|e| format!("argument `{arg}`: {e}"))?
                }
                "flight_recorder_buffer" => {
                    s.flight_recorder_buffer = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_RECORDER_BUFFER).contains(n))
                        .ok_or_else(|| {
                            format!("argument `{arg}`: expected 1 to {MAX_RECORDER_BUFFER} entries")
                        })?
                }
                _ => {
                    return Err(format!(
                        "unknown argument `{arg}` (known: default, allow_off, prolog, epilog, config, timeout, flight_recorder, flight_recorder_buffer)"
                    ))
                }
            }
        }
        if s.default == Choice::Off && !s.allow_off {
            return Err("`default=off` needs `allow_off=yes`".to_string());
        }
        Ok(s)
    }

    /// The flight recorder a job gets: the user's choice, else the site's.
    /// Users may turn it on or off either way: it changes only their job.
    pub fn resolve_recorder(&self, user: Option<Recorder>) -> Recorder {
        user.unwrap_or(self.flight_recorder)
    }

    /// The choice that applies to a job: the user's, else the site default.
    /// `off` where the site forbids it is an error (srun and sbatch refuse it
    /// before submission; here it is checked again for the prolog).
    pub fn resolve(&self, user: Option<Choice>) -> Result<Choice, String> {
        match user {
            None => Ok(self.default),
            Some(Choice::Off) if !self.allow_off => Err(
                "`off` is not allowed on this cluster (plugstack.conf: allow_off=no)".to_string(),
            ),
            Some(c) => Ok(c),
        }
    }
}

/// PyTorch's own default ring size (`FlightRecorder.hpp`: 2000 entries).
pub const DEFAULT_RECORDER_BUFFER: u32 = 2000;
/// A ring this large would make each dump tens of MiB, past the reader's cap.
pub const MAX_RECORDER_BUFFER: u32 = 100_000;

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Some(true),
        "no" | "false" | "0" | "off" => Some(false),
        _ => None,
    }
}

fn program(value: &str) -> Option<PathBuf> {
    (!value.is_empty() && value != "none").then(|| PathBuf::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_every_argument() {
        assert_eq!(Settings::parse([]).unwrap(), Settings::default());
        let s = Settings::parse([
            "default=full",
            "allow_off=yes",
            "prolog=/opt/l/lemonade-prolog",
            "epilog=none",
            "config=/tmp/l.toml",
            "timeout=2.5",
        ])
        .unwrap();
        assert_eq!(s.default, Choice::Full);
        assert!(s.allow_off);
        assert_eq!(s.prolog, Some(PathBuf::from("/opt/l/lemonade-prolog")));
        assert_eq!(s.epilog, None);
        assert_eq!(s.config, PathBuf::from("/tmp/l.toml"));
        assert_eq!(s.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn the_flight_recorder_is_off_unless_the_site_or_the_user_turns_it_on() {
        let s = Settings::default();
        assert_eq!(s.resolve_recorder(None), Recorder::Off);
        assert_eq!(s.resolve_recorder(Some(Recorder::Timing)), Recorder::Timing);
        let s = Settings::parse(["flight_recorder=on", "flight_recorder_buffer=4000"]).unwrap();
        assert_eq!(s.resolve_recorder(None), Recorder::On);
        assert_eq!(s.resolve_recorder(Some(Recorder::Off)), Recorder::Off);
        assert_eq!(s.flight_recorder_buffer, 4000);
        let e = Settings::parse(["flight_recorder_buffer=0"]).unwrap_err();
        assert!(e.contains("`flight_recorder_buffer=0`"), "{e}");
        let e = Settings::parse(["flight_recorder=loud"]).unwrap_err();
        assert!(e.contains("`flight_recorder=loud`"), "{e}");
    }

    #[test]
    fn unknown_and_malformed_arguments_are_named() {
        let e = Settings::parse(["default=quick", "alow_off=no"]).unwrap_err();
        assert!(e.contains("unknown argument `alow_off=no`"), "{e}");
        let e = Settings::parse(["verbose"]).unwrap_err();
        assert!(e.contains("`verbose`"), "{e}");
        let e = Settings::parse(["timeout=-1"]).unwrap_err();
        assert!(e.contains("`timeout=-1`"), "{e}");
        let e = Settings::parse(["default=fast"]).unwrap_err();
        assert!(e.contains("`default=fast`"), "{e}");
        assert!(Settings::parse(["default=off"]).is_err());
        assert!(Settings::parse(["default=off", "allow_off=yes"]).is_ok());
    }

    #[test]
    fn off_is_refused_unless_allowed() {
        let strict = Settings::default();
        assert_eq!(strict.resolve(None), Ok(Choice::Quick));
        assert_eq!(strict.resolve(Some(Choice::Full)), Ok(Choice::Full));
        assert!(strict
            .resolve(Some(Choice::Off))
            .unwrap_err()
            .contains("allow_off=no"));
        let lenient = Settings::parse(["allow_off=yes"]).unwrap();
        assert_eq!(lenient.resolve(Some(Choice::Off)), Ok(Choice::Off));
    }
}
