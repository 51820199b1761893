//! sacct text → records: physical lines put back together where a field
//! held a line break, the layout switched at every header line, invalid
//! UTF-8 replaced and counted.
//!
//! A line with fewer fields than the layout starts a record that may go on
//! over the next lines. They are joined while the fields are still short,
//! never across a line that is a whole record by itself, and kept only when
//! every line break then falls inside a free-text field; otherwise the short
//! line is malformed by itself and the lines after it are read on their own.

use super::layout::Layout;
use super::row;
use super::Line;
use crate::time_zone::Zone;
use std::collections::VecDeque;
use std::io::BufRead;

/// At most this many lines make one record (a long `--wrap` script).
const MAX_RECORD_LINES: usize = 200;

/// A record: the number of its first line, and the run it is or why it is malformed.
pub type NumberedLine = (usize, Result<Line, String>);

/// Why reading stopped before the end.
#[derive(Debug)]
pub enum Stop {
    Io(std::io::Error),
    /// The input cannot be read at all: a header without a field lemon
    /// needs, or output without `-P`. Said once, not once per row.
    Format(String),
}

/// Reads records from sacct text.
pub struct Reader<R> {
    input: R,
    zone: Zone,
    layout: Layout,
    /// Lines read but not yet used: looked at to complete a record.
    ahead: VecDeque<(usize, String)>,
    lines: usize,
    seen_data: bool,
    bytes: Vec<u8>,
    spare: String,
    /// Lines whose invalid UTF-8 was replaced by U+FFFD.
    pub invalid_utf8: u64,
    /// Records that spanned several lines.
    pub reassembled: u64,
}

impl<R> Reader<R> {
    /// The layout in force (the last header's, or the fixed list).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

impl<R: BufRead> Reader<R> {
    /// A reader that takes `input` as the fixed field list until it meets a header.
    pub fn new(input: R, zone: Zone) -> Reader<R> {
        Reader {
            input,
            zone,
            layout: Layout::fixed(),
            ahead: VecDeque::new(),
            lines: 0,
            seen_data: false,
            bytes: Vec::with_capacity(512),
            spare: String::new(),
            invalid_utf8: 0,
            reassembled: 0,
        }
    }

    /// The next record: its first line's number and what it is.
    pub fn next_record(&mut self) -> Result<Option<NumberedLine>, Stop> {
        let (number, text) = match self.ahead.pop_front() {
            Some(line) => line,
            None => {
                let spare = std::mem::take(&mut self.spare);
                match self.read_line(spare)? {
                    Some(line) => line,
                    None => return Ok(None),
                }
            }
        };
        let parsed = self.record(&text);
        self.spare = text;
        Ok(Some((number, parsed?)))
    }

    /// What the record starting with `first` is; may take lines from `ahead`.
    fn record(&mut self, first: &str) -> Result<Result<Line, String>, Stop> {
        if first.trim().is_empty() {
            return Ok(Ok(Line::Ignored));
        }
        if Layout::is_header(first) {
            self.layout = Layout::from_header(first).map_err(Stop::Format)?;
            self.seen_data = true;
            return Ok(Ok(Line::Ignored));
        }
        if !self.seen_data {
            self.seen_data = true;
            if !first.contains('|') && first.to_ascii_lowercase().contains("jobid") {
                return Err(Stop::Format(
                    "this is sacct output without -P (fields separated by spaces); \
                     export it with `sacct -P`"
                        .into(),
                ));
            }
        }
        if self.layout.free_text.is_empty() {
            return Ok(row::parse_record(first, &self.layout, &self.zone));
        }
        // A free-text field may go on over the next lines: take them while
        // they do not start a record of their own, and keep the longest
        // joined record that reads as a run with every line break inside
        // free text. A line that would spoil the record before it is left
        // to be read (and reported) on its own.
        let width = self.layout.width;
        let mut fields = row::count_fields(first);
        // Built only once a next line continues the record: most records are one line.
        let mut joined = String::new();
        let mut best: Option<(usize, Line)> = None; // (lines taken, the run)
        for k in 0..MAX_RECORD_LINES {
            if k == self.ahead.len() {
                // The previous record's buffer: no allocation per line.
                let spare = std::mem::take(&mut self.spare);
                match self.read_line(spare)? {
                    Some(line) => self.ahead.push_back(line),
                    None => break,
                }
            }
            let next = &self.ahead[k].1;
            let more = row::count_fields(next);
            if more >= width || Layout::is_header(next) || row::starts_record(next, &self.layout) {
                break;
            }
            fields += more - 1;
            if joined.is_empty() {
                joined.push_str(first);
            }
            joined.push('\n');
            joined.push_str(next);
            if fields < width || next.trim().is_empty() {
                continue;
            }
            if !row::fits(&joined, &self.layout) {
                break;
            }
            if let Ok(line) = row::parse_record(&joined, &self.layout, &self.zone) {
                best = Some((k + 1, line));
            }
        }
        match best {
            Some((lines, line)) => {
                self.ahead.drain(..lines);
                self.reassembled += 1;
                Ok(Ok(line))
            }
            None => Ok(row::parse_record(first, &self.layout, &self.zone)),
        }
    }

    /// One physical line, without its line end, into `into`'s buffer.
    fn read_line(&mut self, mut into: String) -> Result<Option<(usize, String)>, Stop> {
        self.bytes.clear();
        if self
            .input
            .read_until(b'\n', &mut self.bytes)
            .map_err(Stop::Io)?
            == 0
        {
            return Ok(None);
        }
        self.lines += 1;
        let mut end = self.bytes.len();
        while end > 0 && matches!(self.bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let text = String::from_utf8_lossy(&self.bytes[..end]);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            self.invalid_utf8 += 1;
        }
        into.clear();
        into.push_str(&text);
        Ok(Some((self.lines, into)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &[u8]) -> (Vec<NumberedLine>, Reader<&[u8]>) {
        let mut r = Reader::new(text, Zone::parse("UTC").unwrap());
        let mut out = Vec::new();
        while let Some(item) = r.next_record().unwrap() {
            if item.1 != Ok(Line::Ignored) {
                out.push(item);
            }
        }
        (out, r)
    }

    fn finished(item: &NumberedLine) -> &super::super::JobRow {
        match &item.1 {
            Ok(Line::Finished(r)) => r,
            other => panic!("line {}: {other:?}", item.0),
        }
    }

    #[test]
    fn a_field_broken_over_lines_is_put_back_together() {
        let text = b"JobIDRaw|NodeList|State|End|ElapsedRaw|SubmitLine|User\n\
            1|gpu1|FAILED|100|5|sbatch --wrap 'a\n\
            b\n\
            c'|alice\n\
            2|gpu2|COMPLETED|100|5|sbatch x|bob\n";
        let (items, r) = read_all(text);
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].0, items[1].0), (2, 5));
        assert_eq!(finished(&items[0]).user, "alice");
        assert_eq!(finished(&items[1]).nodes, ["gpu2"]);
        assert_eq!(r.reassembled, 1);
    }

    #[test]
    fn a_short_line_that_cannot_be_completed_is_malformed_alone() {
        let text = b"JobIDRaw|NodeList|State|End|ElapsedRaw|SubmitLine\n\
            1|gpu1|FAILED\n\
            2|gpu2|COMPLETED|100|5|x\n\
            3|gpu3\n\
            |FAILED|100|5|y\n";
        let (items, _) = read_all(text);
        assert!(items[0].1.is_err());
        assert_eq!(finished(&items[1]).nodes, ["gpu2"]);
        // `gpu3\n` would put a line break into NodeList: not a record.
        assert_eq!(items.len(), 4, "{items:?}");
        assert!(items[2].1.is_err() && items[3].1.is_err());
        assert_eq!((items[2].0, items[3].0), (4, 5));
    }

    #[test]
    fn invalid_utf8_is_replaced_and_counted() {
        let text = b"JobIDRaw|JobName|NodeList|State|End|ElapsedRaw\n\
            1|caf\xe9|gpu1|FAILED|100|5\n";
        let (items, r) = read_all(text);
        assert_eq!(finished(&items[0]).job_name.as_deref(), Some("caf\u{fffd}"));
        assert_eq!(r.invalid_utf8, 1);
    }

    #[test]
    fn every_header_sets_the_layout_from_there_on() {
        let text = b"1|1|gpu1|1|FAILED|1:0|0:0|1|2|3|1|b|u|\n\
            State|NodeList|JobIDRaw|End|Start\n\
            COMPLETED|gpu9|2|50|40\n";
        let (items, r) = read_all(text);
        assert_eq!(finished(&items[0]).nodes, ["gpu1"]);
        assert_eq!(finished(&items[1]).nodes, ["gpu9"]);
        assert_eq!(finished(&items[1]).elapsed, Some(10));
        assert!(r.layout().from_header);
    }

    #[test]
    fn a_header_without_a_needed_field_stops_the_read() {
        let mut r = Reader::new(
            &b"JobIDRaw|NodeList|State\n1|gpu1|FAILED\n"[..],
            Zone::Local,
        );
        match r.next_record() {
            Err(Stop::Format(m)) => assert!(m.contains("no End or ElapsedRaw"), "{m}"),
            other => panic!("{other:?}"),
        }
        let mut r = Reader::new(&b"JobID    State\n------- -----\n"[..], Zone::Local);
        assert!(matches!(r.next_record(), Err(Stop::Format(m)) if m.contains("-P")));
    }
}
