//! Times as Slurm prints them: unix seconds (`SLURM_TIME_FORMAT=%s`, what
//! lemon asks for) or ISO wall-clock time, which sacct prints in the local
//! time zone of the machine it ran on. Reading a dump means knowing that zone.

use chrono::{FixedOffset, LocalResult, NaiveDate, NaiveDateTime, TimeZone};
use std::fmt;

/// The zone ISO times without an offset are read in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    /// This machine's zone (`TZ`, else `/etc/localtime`): right when the dump
    /// was made on this head node.
    Local,
    /// An IANA zone, e.g. `Europe/Berlin` or `UTC`.
    Named(chrono_tz::Tz),
    /// A fixed offset, e.g. `+02:00`.
    Fixed(FixedOffset),
}

impl Zone {
    /// `local`, an IANA name, or an offset `+HH:MM` / `-HH:MM`.
    pub fn parse(s: &str) -> Result<Zone, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        if let Some(secs) = parse_offset(s) {
            if let Some(off) = FixedOffset::east_opt(secs) {
                return Ok(Zone::Fixed(off));
            }
        }
        s.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
            format!(
                "time zone `{s}` is not an IANA name (e.g. Europe/Berlin, UTC), `local`, or an offset like +02:00"
            )
        })
    }

    /// The instants a wall-clock time names here: one; two in the hour a
    /// daylight-saving change repeats; none in the hour it skips.
    fn instants(&self, t: &NaiveDateTime) -> LocalResult<i64> {
        match self {
            Zone::Local => chrono::Local.from_local_datetime(t).map(|d| d.timestamp()),
            Zone::Named(tz) => tz.from_local_datetime(t).map(|d| d.timestamp()),
            Zone::Fixed(off) => off.from_local_datetime(t).map(|d| d.timestamp()),
        }
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Zone::Local => write!(f, "local time zone ({})", local_zone_name()),
            Zone::Named(tz) => write!(f, "{}", tz.name()),
            Zone::Fixed(off) => write!(f, "UTC{off}"),
        }
    }
}

/// What the local zone is called: `TZ` when set, else the system's zone name.
fn local_zone_name() -> String {
    match std::env::var("TZ") {
        Ok(tz) if !tz.trim().is_empty() => format!("TZ={tz}"),
        _ => iana_time_zone::get_timezone().unwrap_or_else(|_| "name unknown".into()),
    }
}

/// A time field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instant {
    Exact(i64),
    /// A wall-clock time inside the hour that a change back from daylight
    /// saving repeats: the earlier and the later reading.
    Ambiguous(i64, i64),
}

impl Instant {
    /// The earlier reading.
    pub fn earliest(self) -> i64 {
        match self {
            Instant::Exact(t) | Instant::Ambiguous(t, _) => t,
        }
    }

    /// Every reading, earliest first.
    pub fn readings(self) -> impl Iterator<Item = i64> {
        let (a, b) = match self {
            Instant::Exact(t) => (t, None),
            Instant::Ambiguous(a, b) => (a, Some(b)),
        };
        std::iter::once(a).chain(b)
    }
}

/// Parses a time as sacct or sacctmgr print it: unix seconds, or
/// `YYYY-MM-DDTHH:MM:SS` (a space for the `T` too) read in `zone` unless it
/// carries its own offset (`Z`, `+02:00`). `Unknown`, `None`, `N/A` and empty
/// are `Ok(None)`.
pub fn parse_time(s: &str, zone: &Zone) -> Result<Option<Instant>, String> {
    let s = s.trim();
    if s.is_empty() || s == "Unknown" || s == "None" || s == "N/A" {
        return Ok(None);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .map(|t| Some(Instant::Exact(t)))
            .map_err(|_| format!("time `{s}` out of range"));
    }
    let (wall, offset) = parse_iso(s)
        .ok_or_else(|| format!("time `{s}` is neither unix seconds nor YYYY-MM-DDTHH:MM:SS"))?;
    if let Some(secs) = offset {
        return Ok(Some(Instant::Exact(
            wall.and_utc().timestamp() - i64::from(secs),
        )));
    }
    match zone.instants(&wall) {
        LocalResult::Single(t) => Ok(Some(Instant::Exact(t))),
        LocalResult::Ambiguous(a, b) => Ok(Some(Instant::Ambiguous(a.min(b), a.max(b)))),
        LocalResult::None => Err(format!(
            "time `{s}` does not exist in {zone} (the hour a daylight-saving change skips)"
        )),
    }
}

/// `YYYY-MM-DD[T ]HH:MM:SS` with an optional `Z` or `±HH:MM`/`±HHMM`: the
/// wall-clock time and the offset in seconds east. Written out by hand: a
/// replay reads millions of these.
fn parse_iso(s: &str) -> Option<(NaiveDateTime, Option<i32>)> {
    let b = s.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        let digits = &b[from..to];
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(
            digits
                .iter()
                .fold(0u32, |n, d| n * 10 + u32::from(d - b'0')),
        )
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 7)?, num(8, 10)?)?;
    let wall = date.and_hms_opt(num(11, 13)?, num(14, 16)?, num(17, 19)?)?;
    let rest = &s[19..];
    let offset = match rest {
        "" => None,
        "Z" => Some(0),
        _ => Some(parse_offset(rest)?),
    };
    Some((wall, offset))
}

/// `+HH:MM`, `-HH:MM`, `+HHMM`, `-HHMM` → seconds east of UTC.
fn parse_offset(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: Vec<u8> = match b.len() {
        6 if b[3] == b':' => vec![b[1], b[2], b[4], b[5]],
        5 => b[1..].to_vec(),
        _ => return None,
    };
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let h = i32::from(digits[0] - b'0') * 10 + i32::from(digits[1] - b'0');
    let m = i32::from(digits[2] - b'0') * 10 + i32::from(digits[3] - b'0');
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_york() -> Zone {
        Zone::parse("America/New_York").unwrap()
    }

    #[test]
    fn epoch_seconds_and_unknown_need_no_zone() {
        let z = new_york();
        assert_eq!(
            parse_time("1700000000", &z),
            Ok(Some(Instant::Exact(1_700_000_000)))
        );
        for none in ["", "Unknown", "None", "N/A", "  "] {
            assert_eq!(parse_time(none, &z), Ok(None));
        }
        assert!(parse_time("yesterday", &z).is_err());
        assert!(parse_time("2021-13-01T00:00:00", &z).is_err());
        assert!(parse_time("2021-01-01T00:00:0x", &z).is_err());
    }

    #[test]
    fn iso_times_are_read_in_the_zone_given() {
        // 2021-01-15 12:00 in New York is 17:00 UTC (EST, UTC-5).
        let utc = 1_610_730_000;
        assert_eq!(
            parse_time("2021-01-15T12:00:00", &new_york()),
            Ok(Some(Instant::Exact(utc)))
        );
        assert_eq!(
            parse_time("2021-01-15 12:00:00", &new_york()),
            Ok(Some(Instant::Exact(utc)))
        );
        assert_eq!(
            parse_time("2021-01-15T17:00:00", &Zone::parse("UTC").unwrap()),
            Ok(Some(Instant::Exact(utc)))
        );
        assert_eq!(
            parse_time("2021-01-15T19:00:00", &Zone::parse("+02:00").unwrap()),
            Ok(Some(Instant::Exact(utc)))
        );
        // An explicit offset wins over the zone.
        assert_eq!(
            parse_time("2021-01-15T18:00:00+01:00", &new_york()),
            Ok(Some(Instant::Exact(utc)))
        );
        assert_eq!(
            parse_time("2021-01-15T17:00:00Z", &new_york()),
            Ok(Some(Instant::Exact(utc)))
        );
    }

    #[test]
    fn the_repeated_hour_has_two_readings_and_the_skipped_hour_none() {
        // 2021-11-07: New York falls back from 02:00 EDT to 01:00 EST.
        let t = parse_time("2021-11-07T01:30:00", &new_york())
            .unwrap()
            .unwrap();
        assert_eq!(t, Instant::Ambiguous(1_636_263_000, 1_636_266_600));
        assert_eq!(
            t.readings().collect::<Vec<_>>(),
            [1_636_263_000, 1_636_266_600]
        );
        // 2021-03-14: 02:00 EST jumps to 03:00 EDT; 02:30 never happens.
        let err = parse_time("2021-03-14T02:30:00", &new_york()).unwrap_err();
        assert!(err.contains("does not exist in America/New_York"), "{err}");
    }

    #[test]
    fn zones_are_named_or_refused() {
        assert_eq!(Zone::parse("local"), Ok(Zone::Local));
        assert_eq!(new_york().to_string(), "America/New_York");
        assert_eq!(Zone::parse("-05:00").unwrap().to_string(), "UTC-05:00");
        let err = Zone::parse("Mars/Olympus").unwrap_err();
        assert!(err.contains("Mars/Olympus"), "{err}");
        assert!(Zone::parse("+25:00").is_err());
    }
}
