//! Property tests of the sacct and node-event parsers: whatever the input,
//! an error and never a panic, and the good records around bad ones still
//! count. Bounded case counts keep CI fast.

use lemon::db;
use lemon::ingest::events;
use lemon::ingest::sacct::reader::{NumberedLine, Reader, Stop};
use lemon::ingest::sacct::{Line, LIVE_FIELDS};
use lemon::ingest::time_zone::Zone;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;

/// Pieces of real sacct and sacctmgr output, and things that break them.
const TOKENS: &[&str] = &[
    "|",
    "|",
    "|",
    "\n",
    "\r\n",
    " ",
    "gpu",
    "001",
    "[001-004]",
    "gpu[1-",
    "]",
    ",",
    "FAILED",
    "NODE_FAIL",
    "CANCELLED by ",
    "RUNNING",
    "Unknown",
    "None assigned",
    "2021-11-07T01:30:00",
    "2021-03-14T02:30:00",
    "9999-99-99T99:99:99",
    "-",
    ":",
    "1:0",
    ".batch",
    ".extern",
    "_",
    "+",
    "'",
    "\"",
    "\t",
    "\u{fffd}",
    "日本",
    "x",
    "DOWN",
    "DRAIN",
    "Not responding",
];

/// Garbage that has no header names and no valid job id or time in it.
const GARBAGE: &[&str] = &[
    "|",
    "|",
    "|",
    " ",
    "gpu",
    "[1-",
    "]",
    ",",
    "FAILED",
    "Unknown",
    "None assigned",
    "-",
    ":",
    "x:y",
    ".batch",
    "_",
    "'",
    "\"",
    "\t",
    "\u{fffd}",
    "日本",
    "x",
    "DOWN",
    "9999-99-99T99:99:99",
];

fn soup(tokens: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(tokens), 0..max).prop_map(|t| t.concat())
}

/// Every record of `bytes`, or where the read stopped; must not panic.
fn read_all(bytes: &[u8]) -> (Vec<NumberedLine>, Option<String>) {
    let mut r = Reader::new(bytes, Zone::parse("America/New_York").unwrap());
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(item)) => out.push(item),
            Ok(None) => return (out, None),
            Err(Stop::Format(m)) => return (out, Some(m)),
            Err(Stop::Io(e)) => panic!("reading a slice: {e}"),
        }
    }
}

/// The layouts good rows are written in: the fixed list (no header), what
/// the live ingest asks for (JobName last), and a dump with free text in
/// the middle.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Fixed,
    Live,
    Dump,
}

fn header(shape: Shape) -> String {
    match shape {
        Shape::Fixed => String::new(),
        Shape::Live => format!("{}\n", LIVE_FIELDS.replace(',', "|")),
        Shape::Dump => "JobIDRaw|JobName|NodeList|State|End|ElapsedRaw|SubmitLine|User\n".into(),
    }
}

fn good_row(shape: Shape, id: u32, name: &str) -> String {
    let (end, node) = (1_600_000_000 + id, format!("gpu{:03}", id % 50));
    match shape {
        Shape::Fixed => {
            format!(
                "{id}|{id}|{node}|1|FAILED|1:0|0:0|{}|{}|{end}|60|batch|alice|gres/gpu=8",
                end - 100,
                end - 60
            )
        }
        Shape::Live => format!(
            "{id}|{id}|{node}|1|NODE_FAIL|0:0|0:0|{}|{}|{end}|60|batch|bob|gres/gpu=8|{name}",
            end - 100,
            end - 60
        ),
        Shape::Dump => {
            format!("{id}|{name}|{node}|COMPLETED|{end}|60|sbatch --wrap '{name}'|carol")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sacct_text_of_any_shape_gives_records_or_errors_never_a_panic(
        head in soup(TOKENS, 6),
        body in soup(TOKENS, 80),
        with_header in any::<bool>(),
        raw in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = Vec::new();
        if with_header {
            bytes.extend_from_slice(b"JobIDRaw|JobName|NodeList|State|End|Start|SubmitLine|User\n");
        }
        bytes.extend_from_slice(head.as_bytes());
        bytes.extend_from_slice(&raw);
        bytes.extend_from_slice(body.as_bytes());
        let (records, stop) = read_all(&bytes);
        if with_header {
            // A header with every needed field never stops the read by itself.
            prop_assert!(records.len() + usize::from(stop.is_some()) >= 1);
        }
        for (line, _) in &records {
            prop_assert!(*line >= 1 && *line <= bytes.split(|&b| b == b'\n').count());
        }
    }

    #[test]
    fn good_sacct_rows_around_bad_lines_all_count(
        shape in prop::sample::select(vec![Shape::Fixed, Shape::Live, Shape::Dump]),
        plan in prop::collection::vec(
            prop_oneof![3 => Just(None), 1 => soup(GARBAGE, 12).prop_map(Some)],
            1..40,
        ),
        name in soup(&["a", "b", " ", "-", "x"], 6),
    ) {
        let mut text = header(shape);
        let mut good = BTreeSet::new();
        let mut garbage_lines = BTreeSet::new();
        let mut line = text.lines().count();
        for (i, item) in plan.iter().enumerate() {
            line += 1;
            match item {
                None => {
                    let id = 100 + i as u32;
                    good.insert(i64::from(id));
                    text.push_str(&good_row(shape, id, &name));
                }
                Some(g) => {
                    garbage_lines.insert(line);
                    text.push_str(g);
                }
            }
            text.push('\n');
        }
        let (records, stop) = read_all(text.as_bytes());
        prop_assert!(stop.is_none(), "{stop:?}");
        let mut found = BTreeSet::new();
        for (at, parsed) in &records {
            match parsed {
                Ok(Line::Finished(r)) => prop_assert!(found.insert(r.job_id_raw), "twice: {}", r.job_id_raw),
                // Only bad lines are malformed, and each is reported where it is.
                Err(e) => prop_assert!(garbage_lines.contains(at), "line {at}: {e}\n{text}"),
                Ok(_) => {}
            }
        }
        prop_assert_eq!(&found, &good, "{}", text);
    }

    #[test]
    fn event_lines_of_any_shape_give_events_or_errors_never_a_panic(
        line in soup(TOKENS, 40),
        raw in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let zone = Zone::parse("America/New_York").unwrap();
        let _ = events::parse_line_in(&line, &zone);
        let _ = events::parse_line_in(&String::from_utf8_lossy(&raw), &zone);
    }
}

proptest! {
    // Each case opens a database: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn good_events_around_bad_lines_all_count(
        plan in prop::collection::vec(
            prop_oneof![3 => Just(None), 1 => soup(GARBAGE, 12).prop_map(Some)],
            1..30,
        ),
        invalid in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut bytes = Vec::new();
        let mut good = 0;
        let mut garbage_lines = BTreeSet::new();
        for (i, item) in plan.iter().enumerate() {
            match item {
                None => {
                    good += 1;
                    bytes.extend_from_slice(
                        format!("gpu{i:03}|{}|Unknown|DRAIN|hc: XID_79 gpu3|root\n", 1_600_000_000 + i).as_bytes(),
                    );
                }
                Some(g) => {
                    garbage_lines.insert(i + 1);
                    bytes.extend_from_slice(g.as_bytes());
                    bytes.extend_from_slice(&invalid.iter().map(|b| b | 0x80).collect::<Vec<u8>>());
                    bytes.push(b'\n');
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(5)).unwrap();
        let zone = Zone::parse("UTC").unwrap();
        let stats = events::ingest_bytes(&mut conn, &bytes, "events", &zone).unwrap();
        prop_assert_eq!(stats.inserted, good);
        for line in &stats.malformed_lines {
            prop_assert!(garbage_lines.contains(line), "line {}", line);
        }
    }
}
