//! The text forms a site keeps its kernel log in, told apart by content.
//!
//! * `/dev/kmsg` records: `6,1234,5678901,-;NVRM: ...`;
//! * plain `dmesg`: `[ 1234.567890] NVRM: ...` (seconds since boot);
//! * `dmesg -T`: `[Tue Nov 24 18:00:00 2026] NVRM: ...` (local time, no zone);
//! * `dmesg --time-format iso`: `2026-11-24T18:00:00,123456+00:00 NVRM: ...`;
//! * `journalctl -k -o short-iso`: `2026-11-24T18:00:00+0000 gpu01 kernel: NVRM: ...`
//!   (`short-iso-precise` adds `.123456`), with `-- Boot ... --` and
//!   `-- No entries --` lines of its own.
//!
//! * `dmesg -x` (`--decode`) puts the facility and level before each of the
//!   dmesg forms: `kern  :warn  : [ 1234.567890] NVRM: ...`,
//!   `kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: ...`,
//!   `kern  :warn  : [Tue Jan 21 04:41:44 2025] NVRM: ...`; the prefix is
//!   read past and the rest is the form it carries. `--time-format reltime`
//!   (`[Jan21 04:41]`, then `[  +0.000123]`) and `delta` (`[<    0.000123>]`)
//!   give no full time on each line and are not read: their lines are
//!   counted as malformed, never taken as an empty log.
//!
//! The forms other than kmsg records have no sequence number: the line number
//! stands in for it, which keeps the cursor working on a file that grows.

use chrono::{DateTime, Local, NaiveDateTime, TimeZone};

/// One of the forms above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Kmsg,
    Dmesg,
    DmesgCtime,
    DmesgIso,
    JournalIso,
}

/// When a line was logged, in the clock its form uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// Microseconds since boot.
    SinceBoot(u64),
    /// Unix seconds.
    Wall(i64),
}

/// One parsed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub seq: u64,
    pub stamp: Stamp,
    pub message: &'a [u8],
}

/// Why a line does not read in its file's form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormError(pub &'static str);

/// The form of a line, from its first bytes; `None` for lines that name no
/// form (blank, journal comments).
pub fn detect(line: &[u8]) -> Option<Form> {
    if is_comment(line) {
        return None;
    }
    let line = strip_decoded(line);
    if super::kmsg::parse_header(line).is_ok() {
        return Some(Form::Kmsg);
    }
    let text = std::str::from_utf8(line).ok()?;
    if let Some(inner) = text.strip_prefix('[') {
        let stamp = inner.split(']').next()?;
        return if stamp.trim().parse::<f64>().is_ok() {
            Some(Form::Dmesg)
        } else {
            ctime(stamp).map(|_| Form::DmesgCtime)
        };
    }
    let (stamp, rest) = text.split_once(' ')?;
    iso(stamp)?;
    Some(if journal_message(rest).is_some() {
        Form::JournalIso
    } else {
        Form::DmesgIso
    })
}

/// Lines no form counts: blank ones and journalctl's `-- ... --` notes.
pub fn is_comment(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace) || line.starts_with(b"-- ")
}

/// Reads one line in `form`; `line_no` stands in for a sequence number.
pub fn parse(form: Form, line: &[u8], line_no: u64) -> Result<Line<'_>, FormError> {
    if form == Form::Kmsg {
        let (seq, ts, message) = super::kmsg::parse_header(line).map_err(|e| FormError(e.0))?;
        return Ok(Line {
            seq,
            stamp: Stamp::SinceBoot(ts),
            message,
        });
    }
    let text = std::str::from_utf8(strip_decoded(line)).map_err(|_| FormError("not UTF-8"))?;
    let (stamp, message) = match form {
        Form::Kmsg => unreachable!("handled above"),
        Form::Dmesg => bracketed(text, since_boot)?,
        Form::DmesgCtime => bracketed(text, |s| ctime(s).map(Stamp::Wall))?,
        Form::DmesgIso => {
            let (stamp, rest) = text.split_once(' ').ok_or(FormError("no time stamp"))?;
            (
                iso(stamp).ok_or(FormError("time stamp is not ISO 8601"))?,
                rest,
            )
        }
        Form::JournalIso => {
            let (stamp, rest) = text.split_once(' ').ok_or(FormError("no time stamp"))?;
            let at = iso(stamp).ok_or(FormError("time stamp is not ISO 8601"))?;
            let message =
                journal_message(rest).ok_or(FormError("no `HOST kernel:` after the time"))?;
            (at, message)
        }
    };
    let message = message.as_bytes();
    Ok(Line {
        seq: line_no,
        stamp,
        message,
    })
}

/// syslog's facility names, as `dmesg -x` prints them.
const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
    "ftp", "res0", "res1", "res2", "res3", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// syslog's level names, as `dmesg -x` prints them.
const LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug",
];

/// The line after `dmesg -x`'s `facility:level : ` (each name padded to six
/// columns), or the line itself when it has no such prefix. Only the
/// syslog names count, so a message that starts `NVRM: ...` is not taken
/// for one.
fn strip_decoded(line: &[u8]) -> &[u8] {
    let named = |field: &[u8], names: &[&str]| {
        let name = field.trim_ascii_end();
        names.iter().any(|n| n.as_bytes() == name)
    };
    let Some(first) = line.iter().position(|&b| b == b':') else {
        return line;
    };
    let rest = &line[first + 1..];
    let Some(second) = rest.iter().position(|&b| b == b':') else {
        return line;
    };
    if !named(&line[..first], FACILITIES) || !named(&rest[..second], LEVELS) {
        return line;
    }
    let after = &rest[second + 1..];
    after.strip_prefix(b" ").unwrap_or(after)
}

/// `[stamp] message`, with the stamp read by `read`.
fn bracketed(text: &str, read: impl Fn(&str) -> Option<Stamp>) -> Result<(Stamp, &str), FormError> {
    let inner = text
        .strip_prefix('[')
        .ok_or(FormError("no `[` before the time"))?;
    let (stamp, rest) = inner
        .split_once(']')
        .ok_or(FormError("no `]` after the time"))?;
    let at = read(stamp).ok_or(FormError("time stamp does not read"))?;
    Ok((at, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// `  1234.567890` → microseconds since boot.
fn since_boot(stamp: &str) -> Option<Stamp> {
    let (secs, micros) = stamp.trim().split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    let digits = micros.get(..micros.len().min(6))?;
    let scale = 10u64.pow(6 - digits.len() as u32);
    let micros: u64 = digits.parse().ok()?;
    Some(Stamp::SinceBoot(secs * 1_000_000 + micros * scale))
}

/// `Tue Nov 24 18:00:00 2026`, in the local zone as `dmesg -T` prints it.
fn ctime(stamp: &str) -> Option<i64> {
    let words: Vec<&str> = stamp.split_whitespace().collect();
    let naive = NaiveDateTime::parse_from_str(&words.join(" "), "%a %b %d %H:%M:%S %Y").ok()?;
    Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp())
}

/// `2026-11-24T18:00:00,123456+00:00`, `...+0000`, `....123456+0000`.
fn iso(stamp: &str) -> Option<Stamp> {
    let stamp = stamp.replacen(',', ".", 1);
    ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M:%S%.f%z"]
        .iter()
        .find_map(|f| DateTime::parse_from_str(&stamp, f).ok())
        .map(|t| Stamp::Wall(t.timestamp()))
}

/// `gpu01 kernel: message` → `message`.
fn journal_message(rest: &str) -> Option<&str> {
    let (_host, after) = rest.split_once(' ')?;
    after.strip_prefix("kernel: ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> (Form, Stamp, String) {
        let form = detect(line.as_bytes()).expect("a form");
        let parsed = parse(form, line.as_bytes(), 7).expect("parses");
        let message = String::from_utf8_lossy(parsed.message).into_owned();
        (form, parsed.stamp, message)
    }

    #[test]
    fn each_form_is_told_from_its_first_bytes_and_gives_time_and_message() {
        let fell = "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
        let (form, stamp, message) = read(&format!("3,812,6781741548779,-;{fell}"));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::Kmsg, Stamp::SinceBoot(6_781_741_548_779), fell)
        );
        let (form, stamp, message) = read(&format!("[6781741.548779] {fell}"));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::Dmesg, Stamp::SinceBoot(6_781_741_548_779), fell)
        );
        let (form, stamp, _) = read("[    5.1] short fraction");
        assert_eq!((form, stamp), (Form::Dmesg, Stamp::SinceBoot(5_100_000)));
        let (form, stamp, message) = read(&format!("2024-09-19T02:29:46,123456+00:00 {fell}"));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::DmesgIso, Stamp::Wall(1_726_712_986), fell)
        );
        let (form, stamp, message) =
            read(&format!("2024-09-19T04:29:46+0200 gpu01 kernel: {fell}"));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::JournalIso, Stamp::Wall(1_726_712_986), fell)
        );
        let (form, stamp, _) = read(&format!(
            "2024-09-19T02:29:46.000123+0000 gpu01 kernel: {fell}"
        ));
        assert_eq!(
            (form, stamp),
            (Form::JournalIso, Stamp::Wall(1_726_712_986))
        );
        let (form, stamp, message) = read(&format!("[Thu Sep 19 02:29:46 2024] {fell}"));
        let local = Local
            .with_ymd_and_hms(2024, 9, 19, 2, 29, 46)
            .earliest()
            .unwrap();
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::DmesgCtime, Stamp::Wall(local.timestamp()), fell)
        );
    }

    #[test]
    fn dmesg_decode_lines_read_past_facility_and_level_in_each_time_format() {
        let xid = "NVRM: Xid (PCI:0000:38:00): 13, pid=1234, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address";
        let (form, stamp, message) = read(&format!(
            "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 {xid}"
        ));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::DmesgIso, Stamp::Wall(1_737_434_504), xid)
        );
        let (form, stamp, message) = read(&format!("kern  :warn  : [ 6781.548779] {xid}"));
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::Dmesg, Stamp::SinceBoot(6_781_548_779), xid)
        );
        let (form, stamp, message) =
            read(&format!("kern  :err   : [Tue Jan 21 04:41:44 2025] {xid}"));
        let local = Local
            .with_ymd_and_hms(2025, 1, 21, 4, 41, 44)
            .earliest()
            .unwrap();
        assert_eq!(
            (form, stamp, message.as_str()),
            (Form::DmesgCtime, Stamp::Wall(local.timestamp()), xid)
        );
        let (_, _, message) = read("daemon:notice: [   1.000000] systemd[1]: started");
        assert_eq!(message, "systemd[1]: started");
        // A message that only looks like the prefix keeps its words.
        assert_eq!(strip_decoded(b"NVRM: GPU: x"), b"NVRM: GPU: x");
        // reltime and delta carry no full time: no form, counted malformed.
        assert_eq!(detect(b"kern  :warn  : [Jan21 04:41] NVRM: x"), None);
        assert_eq!(detect(b"kern  :warn  : [<    0.000123>] NVRM: x"), None);
    }

    #[test]
    fn dmesg_t_pads_a_one_digit_day_with_a_space() {
        let (form, stamp, message) = read("[Fri Nov  6 16:00:00 2026] NVRM: loading");
        let local = Local
            .with_ymd_and_hms(2026, 11, 6, 16, 0, 0)
            .earliest()
            .unwrap();
        assert_eq!(
            (form, stamp, message.as_str()),
            (
                Form::DmesgCtime,
                Stamp::Wall(local.timestamp()),
                "NVRM: loading"
            )
        );
    }

    #[test]
    fn journal_notes_and_blank_lines_name_no_form_and_other_lines_say_why_they_fail() {
        for note in [
            "-- Boot 1a2b3c4d5e6f --",
            "-- No entries --",
            "-- Logs begin at Mon 2024-09-16 08:00:01 UTC, end at Thu 2024-09-19 02:30:00 UTC. --",
            "",
            "   ",
        ] {
            assert_eq!(detect(note.as_bytes()), None, "{note}");
            assert!(is_comment(note.as_bytes()), "{note}");
        }
        assert_eq!(detect(b"garbage without a stamp"), None);
        assert!(parse(Form::Dmesg, b"no bracket", 1).is_err());
        assert!(parse(Form::Dmesg, b"[abc] x", 1).is_err());
        assert!(parse(
            Form::JournalIso,
            b"2024-09-19T02:29:46+0000 gpu01 sshd[1]: x",
            1
        )
        .is_err());
        assert!(parse(Form::Kmsg, b"[ 1.0] x", 1).is_err());
    }

    #[test]
    fn lines_without_a_sequence_number_take_their_line_number() {
        let parsed = parse(Form::Dmesg, b"[ 1.000000] hello", 42).unwrap();
        assert_eq!(parsed.seq, 42);
    }
}
