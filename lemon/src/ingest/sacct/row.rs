//! One sacct record (a line, or several put back together) → one job run.
//!
//! Splitting comes first: a record with more `|` than the layout has fields
//! carries them inside free text, and one with line breaks carries those
//! inside free text too. Every way of placing them that the layout allows is
//! a *reading*; a record is taken when every reading that parses gives the
//! same run, and is malformed when they disagree.

use super::layout::{Column, Layout};
use super::{JobRow, Line};
use crate::time_zone::{self, Instant, Zone};
use lemonade_slurm::hostlist;

/// More readings than this and a record is malformed rather than tried.
const MAX_READINGS: usize = 256;

/// Parses one record with `layout`, reading ISO times in `zone`.
pub fn parse_record(text: &str, layout: &Layout, zone: &Zone) -> Result<Line, String> {
    if text.trim().is_empty() {
        return Ok(Line::Ignored);
    }
    match readings(text, layout)? {
        Readings::One(fields) => parse_fields(&fields, layout, zone),
        Readings::Several(all) => {
            let mut lines = Vec::new();
            let mut first_err = None;
            for fields in &all {
                match parse_fields(fields, layout, zone) {
                    Ok(line) => lines.push(line),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if lines.is_empty() {
                return Err(first_err.unwrap_or_default());
            }
            // Readings that put free text into a user or partition name
            // (spaces, quotes) are not what sacct wrote: `sbatch --wrap 'a | b'`.
            if !agree(&lines) {
                lines.retain(plausible);
            }
            match lines.first() {
                Some(line) if agree(&lines) => Ok(line.clone()),
                _ => Err(format!(
                    "{} fields where the header has {}: a `|` inside free text that could \
                     belong to more than one field",
                    count_fields(text),
                    layout.width
                )),
            }
        }
    }
}

fn agree(lines: &[Line]) -> bool {
    lines.windows(2).all(|w| w[0] == w[1])
}

/// False when a name field holds what only free text holds.
fn plausible(line: &Line) -> bool {
    let Line::Finished(r) = line else {
        return true;
    };
    let name = |s: &str| !s.contains(|c: char| c.is_whitespace() || "'\"|;(){}<>".contains(c));
    name(&r.user) && name(&r.partition) && name(&r.alloc_tres)
}

/// True when `text` splits into the layout's fields in at least one way:
/// what decides whether lines following a short one belong to its record.
pub fn fits(text: &str, layout: &Layout) -> bool {
    readings(text, layout).is_ok()
}

/// True when `line` starts a record: its job id field holds a job id. Lines
/// that go on with a field of the record before (a script's next line) do not.
pub fn starts_record(line: &str, layout: &Layout) -> bool {
    let Some(at) = layout.at(Column::JobIdRaw).or(layout.at(Column::JobId)) else {
        return false;
    };
    let Some(id) = line.split('|').nth(at) else {
        return false;
    };
    id.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+[]-,.".contains(&b))
}

/// Fields of `text` (`|`-separated), counting the last even when empty.
pub fn count_fields(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'|').count() + 1
}

enum Readings<'a> {
    One(Vec<&'a str>),
    Several(Vec<Vec<&'a str>>),
}

/// The ways `text` splits into `layout.width` fields with every surplus `|`
/// and every line break inside a free-text field.
fn readings<'a>(text: &'a str, layout: &Layout) -> Result<Readings<'a>, String> {
    let mut raw: Vec<&str> = text.split('|').collect();
    // `sacct -p` ends every line with `|`: one empty field too many.
    if raw.len() == layout.width + 1
        && raw.last() == Some(&"")
        && !layout.is_free_text(layout.width - 1)
    {
        raw.pop();
    }
    let multi_line = text.contains('\n');
    if raw.len() == layout.width && !multi_line {
        return Ok(Readings::One(raw));
    }
    let wrong_count = || {
        format!(
            "{} fields, expected {}{}",
            raw.len(),
            layout.width,
            if layout.from_header {
                " (the header's)".to_string()
            } else {
                format!(" ({})", super::layout::FIXED_FIELDS)
            }
        )
    };
    if raw.len() < layout.width {
        return Err(wrong_count());
    }
    let surplus = raw.len() - layout.width;
    if surplus > 0 && layout.free_text.is_empty() {
        return Err(wrong_count());
    }
    let mut all = Vec::new();
    let mut shares = vec![0usize; layout.free_text.len()];
    let mut too_many = false;
    distribute(surplus, 0, &mut shares, &mut |shares| {
        if all.len() >= MAX_READINGS {
            too_many = true;
            return;
        }
        if let Some(fields) = reading(text, &raw, layout, shares) {
            all.push(fields);
        }
    });
    if too_many {
        return Err(format!(
            "{} fields where {} are expected: too many `|` in free text to place",
            raw.len(),
            layout.width
        ));
    }
    match all.len() {
        0 if multi_line => Err("a line break outside any free-text field".into()),
        0 => Err(wrong_count()),
        1 => Ok(Readings::One(all.pop().expect("one"))),
        _ => Ok(Readings::Several(all)),
    }
}

/// Calls `f` with every way of sharing `left` surplus fields among the
/// free-text columns from `from` on.
fn distribute(left: usize, from: usize, shares: &mut [usize], f: &mut impl FnMut(&[usize])) {
    if from + 1 >= shares.len() {
        if let Some(last) = shares.last_mut() {
            *last = left;
        }
        f(shares);
        return;
    }
    for n in 0..=left {
        shares[from] = n;
        distribute(left - n, from + 1, shares, f);
    }
}

/// One reading: free-text column k takes `shares[k]` more raw fields, joined
/// back with their `|`. None when a line break lands outside free text.
fn reading<'a>(
    text: &'a str,
    raw: &[&'a str],
    layout: &Layout,
    shares: &[usize],
) -> Option<Vec<&'a str>> {
    let mut fields = Vec::with_capacity(layout.width);
    let mut next = 0;
    let mut share = shares.iter();
    for col in 0..layout.width {
        let extra = if layout.is_free_text(col) {
            *share.next().unwrap_or(&0)
        } else {
            0
        };
        let (first, last) = (raw[next], raw[next + extra]);
        // Raw fields are slices of `text`: the joined field runs from the
        // first one's start to the last one's end.
        let start = first.as_ptr() as usize - text.as_ptr() as usize;
        let end = last.as_ptr() as usize - text.as_ptr() as usize + last.len();
        let field = &text[start..end];
        if !layout.is_free_text(col) && field.contains('\n') {
            return None;
        }
        fields.push(field);
        next += extra + 1;
    }
    Some(fields)
}

/// Parses the fields of one record.
pub fn parse_fields(f: &[&str], layout: &Layout, zone: &Zone) -> Result<Line, String> {
    let get = |c| layout.get(f, c).map(str::trim);
    let raw_field = get(Column::JobIdRaw);
    let job_id = get(Column::JobId);
    let id = raw_field.or(job_id).unwrap_or("");
    // `123.batch`, `123.extern`, `123.0`, `123_4.0`: steps, not allocations.
    if id.contains('.') {
        return Ok(Line::Step);
    }
    let job_id_raw = match (raw_field, job_id) {
        (Some(r), _) => r
            .parse::<i64>()
            .map_err(|_| format!("JobIDRaw `{r}` is not a number"))?,
        (None, Some(j)) => id_from_job_id(j)?,
        (None, None) => return Err("no job id".into()),
    };
    let (state, cancelled_by) = parse_state(get(Column::State).unwrap_or(""))?;
    let end = time(get(Column::End), zone).map_err(|e| format!("End: {e}"))?;
    let Some(end) = end else {
        return Ok(Line::Unfinished);
    };
    if matches!(state, "RUNNING" | "PENDING" | "SUSPENDED" | "RESIZING") {
        return Ok(Line::Unfinished);
    }
    let submit = time(get(Column::Submit), zone).map_err(|e| format!("Submit: {e}"))?;
    let start = time(get(Column::Start), zone).map_err(|e| format!("Start: {e}"))?;
    let elapsed_field = match (get(Column::ElapsedRaw), get(Column::Elapsed)) {
        (Some(s), _) if !s.is_empty() => Some(
            s.parse::<i64>()
                .map_err(|_| format!("ElapsedRaw `{s}` is not a number"))?,
        ),
        (_, Some(s)) if !s.is_empty() => Some(parse_elapsed(s)?),
        _ => None,
    };
    let (start, end) = resolve(start, end, elapsed_field);
    if let Some(s) = start {
        if s > end {
            return Err(format!("Start {s} is after End {end}"));
        }
    }
    let elapsed = elapsed_field.or(start.map(|s| end - s));
    let nodelist = get(Column::NodeList).unwrap_or("");
    let nodes = nodes_of(nodelist)?;
    let nnodes = match get(Column::NNodes) {
        Some(n) => n
            .parse::<i64>()
            .map_err(|_| format!("NNodes `{n}` is not a number"))?,
        None => nodes.len() as i64,
    };
    let tres = get(Column::AllocTres).unwrap_or("");
    Ok(Line::Finished(Box::new(JobRow {
        job_id_raw,
        job_id: job_id.or(raw_field).unwrap_or("").to_string(),
        nodelist: nodelist.to_string(),
        nodes,
        nnodes,
        state: state.to_string(),
        cancelled_by,
        exit: parse_exit(get(Column::ExitCode).unwrap_or(""))
            .map_err(|e| format!("ExitCode: {e}"))?,
        derived: parse_exit(get(Column::DerivedExitCode).unwrap_or(""))
            .map_err(|e| format!("DerivedExitCode: {e}"))?,
        submit: submit.map(Instant::earliest),
        start,
        end,
        elapsed,
        partition: get(Column::Partition).unwrap_or("").to_string(),
        user: get(Column::User).unwrap_or("").to_string(),
        gpus: gpus_of(tres),
        alloc_tres: tres.to_string(),
        // Untrimmed: a job's name is what its user wrote.
        job_name: layout.get(f, Column::JobName).map(str::to_string),
        std_out: log_path(layout.get(f, Column::StdOut)),
        std_err: log_path(layout.get(f, Column::StdErr)),
        uid: get(Column::Uid).and_then(|u| u.parse().ok()),
    })))
}

/// The nodes of sacct's NodeList.
fn nodes_of(nodelist: &str) -> Result<Vec<String>, String> {
    match nodelist {
        // The common case, one plain node, without the hostlist machinery.
        one if !one.is_empty()
            && one != "None assigned"
            && one != "(null)"
            && !one.contains(['[', ']', ',']) =>
        {
            Ok(vec![one.to_string()])
        }
        list => hostlist::expand(list).map_err(|e| format!("NodeList: {e}")),
    }
}

/// A StdOut or StdErr field: `None` when empty. Untrimmed past its line
/// end: a path may hold spaces.
fn log_path(field: Option<&str>) -> Option<String> {
    field
        .map(|p| p.trim_end_matches(['\r', '\n']))
        .filter(|p| !p.trim().is_empty())
        .map(str::to_string)
}

fn time(field: Option<&str>, zone: &Zone) -> Result<Option<Instant>, String> {
    match field {
        Some(s) => time_zone::parse_time(s, zone),
        None => Ok(None),
    }
}

/// Start and End as instants. A wall-clock time in the hour that a
/// daylight-saving change repeats has two readings; the pair kept is the one
/// that agrees with Elapsed, else the shortest run that does not end before
/// it starts.
fn resolve(start: Option<Instant>, end: Instant, elapsed: Option<i64>) -> (Option<i64>, i64) {
    let Some(start) = start else {
        return (None, end.earliest());
    };
    let mut best: Option<(i64, i64, i64)> = None;
    for s in start.readings() {
        for e in end.readings() {
            let cost = match elapsed {
                Some(el) => (e - s - el).abs(),
                None if e >= s => e - s,
                None => continue,
            };
            let better = match best {
                None => true,
                Some((c, _, _)) => cost < c,
            };
            if better {
                best = Some((cost, s, e));
            }
        }
    }
    match best {
        Some((_, s, e)) => (Some(s), e),
        None => (Some(start.earliest()), end.earliest()),
    }
}

/// A job id for a file without JobIDRaw: the number itself, or for an array
/// task or heterogeneous component (`123_4`, `123+1`), which only JobIDRaw
/// numbers, a stable negative id from its text, so that distinct tasks stay
/// distinct jobs and never collide with a real id.
fn id_from_job_id(j: &str) -> Result<i64, String> {
    if let Ok(n) = j.parse::<i64>() {
        return Ok(n);
    }
    let well_formed = !j.is_empty()
        && j.as_bytes()[0].is_ascii_digit()
        && j.bytes()
            .all(|b| b.is_ascii_digit() || b"_+[]-,".contains(&b));
    if !well_formed {
        return Err(format!("JobID `{j}` is not a Slurm job id"));
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in j.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Ok(-((h >> 1) as i64) - 1)
}

/// `[D-]HH:MM:SS`, `MM:SS` or `MM:SS.mmm` (sacct's Elapsed) → seconds.
fn parse_elapsed(s: &str) -> Result<i64, String> {
    let bad = || format!("Elapsed `{s}` is not [D-]HH:MM:SS");
    let (days, clock) = match s.split_once('-') {
        Some((d, rest)) => (d.parse::<i64>().map_err(|_| bad())?, rest),
        None => (0, s),
    };
    let clock = clock.split('.').next().unwrap_or(clock);
    let mut secs = 0i64;
    let parts: Vec<&str> = clock.split(':').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(bad());
    }
    for p in parts {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 9 {
            return Err(bad());
        }
        secs = secs * 60 + p.parse::<i64>().map_err(|_| bad())?;
    }
    Ok(days.checked_mul(86_400).ok_or_else(bad)? + secs)
}

/// `CANCELLED by 1234` → (`CANCELLED`, Some(1234)).
fn parse_state(s: &str) -> Result<(&str, Option<i64>), String> {
    let s = s.trim();
    let (word, by) = match s.split_once(" by ") {
        Some((w, uid)) => (
            w.trim(),
            Some(
                uid.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("State `{s}`: uid is not a number"))?,
            ),
        ),
        None => (s, None),
    };
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Err(format!("State `{s}` is not a Slurm job state"));
    }
    Ok((word, by))
}

/// `exit:signal`, e.g. `1:0`; empty is unknown.
fn parse_exit(s: &str) -> Result<Option<(i64, i64)>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not N:M"))?;
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => Ok(Some((a, b))),
        _ => Err(format!("`{s}` is not N:M")),
    }
}

/// GPUs of the allocation from AllocTRES (`...,gres/gpu=8,...`). The plain
/// `gres/gpu` entry is the total; typed ones (`gres/gpu:a100=8`) only when it is missing.
pub fn gpus_of(tres: &str) -> Option<i64> {
    let mut typed = None;
    for item in tres.split(',') {
        let Some((k, v)) = item.trim().split_once('=') else {
            continue;
        };
        if k == "gres/gpu" {
            return v.parse().ok();
        }
        if k.starts_with("gres/gpu:") && typed.is_none() {
            typed = v.parse().ok();
        }
    }
    typed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(line: &str) -> Result<Line, String> {
        parse_record(line, &Layout::fixed(), &Zone::Local)
    }

    fn row(line: &str) -> JobRow {
        match fixed(line).unwrap() {
            Line::Finished(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    fn with_header(header: &str, record: &str) -> Result<Line, String> {
        let zone = Zone::parse("UTC").unwrap();
        parse_record(record, &Layout::from_header(header).unwrap(), &zone)
    }

    #[test]
    fn parses_a_multi_node_failure() {
        let r = row("1234|1234|gpu[001-002,010]|3|FAILED|1:0|0:0|100|200|900|700|batch|alice|billing=24,cpu=24,gres/gpu=24,node=3");
        assert_eq!(r.nodes, ["gpu001", "gpu002", "gpu010"]);
        assert_eq!(r.state, "FAILED");
        assert_eq!(r.exit, Some((1, 0)));
        assert_eq!((r.submit, r.start, r.end), (Some(100), Some(200), 900));
        assert_eq!(r.gpus, Some(24));
        assert_eq!(r.job_name, None);
    }

    #[test]
    fn cancelled_by_none_assigned_and_unknown_start() {
        let r =
            row("77|70_7|None assigned|1|CANCELLED by 1001|0:0|0:0|100|Unknown|150|0|batch|bob|");
        assert!(r.nodes.is_empty());
        assert_eq!(
            (r.state.as_str(), r.cancelled_by),
            ("CANCELLED", Some(1001))
        );
        assert_eq!(r.start, None);
        assert_eq!(r.job_id, "70_7");
        assert_eq!(r.gpus, None);
    }

    #[test]
    fn running_jobs_wait_for_a_later_window() {
        assert_eq!(
            fixed("5|5|gpu001|1|RUNNING|0:0|0:0|100|200|Unknown|50|b|u|").unwrap(),
            Line::Unfinished
        );
        assert_eq!(fixed("").unwrap(), Line::Ignored);
    }

    #[test]
    fn malformed_rows_say_why() {
        assert!(fixed("1|1|gpu1").unwrap_err().contains("fields"));
        assert!(fixed("x|1|gpu1|1|FAILED|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("JobIDRaw"));
        assert!(fixed("1|1|gpu[1-|1|FAILED|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("NodeList"));
        assert!(fixed("1|1|gpu1|1|failed!|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("State"));
        assert!(fixed("1|1|gpu1|1|FAILED|1:0|0:0|1|9|3|1|b|u|")
            .unwrap_err()
            .contains("after End"));
        // Without free text, a surplus `|` has nowhere to go.
        assert!(fixed("1|1|gpu1|1|FAILED|1:0|0:0|1|2|3|1|b|u|x|y")
            .unwrap_err()
            .contains("15 fields, expected 14"));
    }

    #[test]
    fn a_trailing_pipe_of_sacct_dash_p_is_dropped() {
        let r = row("1|1|gpu1|1|FAILED|1:0|0:0|1|2|3|1|b|u|gres/gpu=8|");
        assert_eq!(r.gpus, Some(8));
    }

    #[test]
    fn steps_are_told_apart_from_allocations() {
        let h = "JobID|JobIDRaw|NodeList|State|End|ElapsedRaw";
        for step in ["7.batch|7.batch", "7.extern|7.extern", "7_2.0|9.0"] {
            let rec = format!("{step}|gpu1|COMPLETED|100|5");
            assert_eq!(with_header(h, &rec), Ok(Line::Step), "{rec}");
        }
        assert!(matches!(
            with_header(h, "7_2|9|gpu1|COMPLETED|100|5"),
            Ok(Line::Finished(_))
        ));
    }

    #[test]
    fn a_header_needs_only_what_lemon_reads() {
        let h = "State|End|Start|NodeList|JobID";
        let Ok(Line::Finished(r)) = with_header(
            h,
            "NODE_FAIL|2021-01-01T01:00:00|2021-01-01T00:00:00|gpu[1-2]|42",
        ) else {
            panic!()
        };
        assert_eq!((r.job_id_raw, r.job_id.as_str()), (42, "42"));
        assert_eq!((r.nnodes, r.elapsed), (2, Some(3600)));
        assert_eq!((r.exit, r.gpus, r.user.as_str()), (None, None, ""));
    }

    #[test]
    fn array_tasks_without_job_id_raw_stay_distinct() {
        let h = "JobID|NodeList|State|End|ElapsedRaw";
        let id = |j: &str| match with_header(h, &format!("{j}|gpu1|FAILED|100|5")) {
            Ok(Line::Finished(r)) => r.job_id_raw,
            other => panic!("{other:?}"),
        };
        assert_eq!(id("70"), 70);
        assert!(id("70_7") < 0);
        assert_ne!(id("70_7"), id("70_8"));
        assert_eq!(id("70_7"), id("70_7"));
        assert!(with_header(h, "abc|gpu1|FAILED|100|5").is_err());
    }

    #[test]
    fn elapsed_in_clock_form_is_read_when_elapsed_raw_is_absent() {
        assert_eq!(parse_elapsed("1-02:03:04"), Ok(93_784));
        assert_eq!(parse_elapsed("05:06"), Ok(306));
        assert_eq!(parse_elapsed("00:00:07.123"), Ok(7));
        assert!(parse_elapsed("1-x").is_err());
        assert!(parse_elapsed("1:2:3:4").is_err());
        let Ok(Line::Finished(r)) = with_header(
            "JobID|NodeList|State|End|Elapsed",
            "3|gpu1|TIMEOUT|1000|00:10:00",
        ) else {
            panic!()
        };
        assert_eq!((r.start, r.elapsed), (None, Some(600)));
    }

    #[test]
    fn a_pipe_in_the_only_free_text_field_is_put_back() {
        let h = "JobIDRaw|JobName|NodeList|State|End|ElapsedRaw";
        let Ok(Line::Finished(r)) = with_header(h, "5|a|b|c|gpu1|FAILED|100|5") else {
            panic!()
        };
        assert_eq!(r.job_name.as_deref(), Some("a|b|c"));
        assert_eq!(r.nodes, ["gpu1"]);
    }

    #[test]
    fn pipes_in_free_text_are_placed_when_every_placement_reads_the_same() {
        // Comment and WorkDir both come after everything lemon reads.
        let h = "JobIDRaw|NodeList|State|End|ElapsedRaw|Comment|WorkDir";
        assert!(matches!(
            with_header(h, "5|gpu1|FAILED|100|5|x|y|/home/a"),
            Ok(Line::Finished(_))
        ));
        // With User between them, `x|y|/home/a` could be Comment `x`, User `y`
        // or Comment `x|y`, User `/home/a`... : malformed.
        let h = "JobIDRaw|NodeList|State|End|ElapsedRaw|Comment|User|WorkDir";
        let err = with_header(h, "5|gpu1|FAILED|100|5|x|y|alice|/home/a").unwrap_err();
        assert!(err.contains("more than one field"), "{err}");
    }

    #[test]
    fn line_breaks_belong_in_free_text_only() {
        let h = "JobIDRaw|NodeList|State|End|ElapsedRaw|SubmitLine";
        let Ok(Line::Finished(r)) = with_header(h, "5|gpu1|FAILED|100|5|sbatch --wrap 'a\nb'")
        else {
            panic!()
        };
        assert_eq!(r.nodes, ["gpu1"]);
        assert!(fits(
            "5|gpu1|FAILED|100|5|sbatch\nx",
            &Layout::from_header(h).unwrap()
        ));
        assert!(!fits(
            "5|gpu1\n|FAILED|100|5|x",
            &Layout::from_header(h).unwrap()
        ));
    }

    #[test]
    fn gpus_prefer_the_untyped_total() {
        assert_eq!(gpus_of("cpu=8,gres/gpu:a100=4,gres/gpu=4"), Some(4));
        assert_eq!(gpus_of("cpu=8,gres/gpu:a100=2"), Some(2));
        assert_eq!(gpus_of("cpu=8"), None);
    }
}
