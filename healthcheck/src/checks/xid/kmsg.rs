//! Reading the kernel log in `/dev/kmsg` record format, from where the last
//! run stopped.
//!
//! A record is `pri,seq,ts_usec,flags[,...];message` followed by optional
//! continuation lines that start with a space (` SUBSYSTEM=pci`). Two sources:
//!
//! * the character device `/dev/kmsg`: one record per `read()`, `EAGAIN` at
//!   the end, `EPIPE` when the kernel overwrote the record we were about to
//!   read. It cannot seek to a sequence number, so records up to the cursor
//!   are read and skipped (the ring buffer is small);
//! * a regular file (replay, fixtures, snapshots): streamed line by line, and
//!   resumed at the byte offset of the cursor's record, so a run whose cursor
//!   is current reads only the new bytes of a large log.

use super::forms::{self, Stamp};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Where the last run stopped: the last record it consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Sequence number of the last record consumed.
    pub seq: u64,
    /// Files only: byte offset of that record's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Files only: its 1-based line number, to name lines in messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// A record the check keeps (a driver line or a host hardware error), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord {
    pub seq: u64,
    pub ts_usec: u64,
    /// Line number in a file source.
    pub line: Option<u64>,
    /// Unix seconds, for forms that print wall time (see [`super::forms`]).
    pub wall_s: Option<i64>,
    pub message: String,
}

/// One record as read.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub seq: u64,
    /// Microseconds since boot (monotonic clock).
    pub ts_usec: u64,
    /// The text after `;`, without continuation lines.
    pub message: &'a [u8],
    /// The whole record in record format, continuation lines included
    /// (devices), or its first line (files).
    pub raw: &'a [u8],
    /// Files only: 1-based line number.
    pub line: Option<u64>,
    /// Unix seconds, for file forms that print wall time instead of
    /// `ts_usec` (then 0).
    pub wall_s: Option<i64>,
}

/// A line that is not a kmsg record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRecord {
    /// 1-based line number (files) or the index of the read (devices).
    pub line: u64,
    pub reason: String,
    /// The start of the line, for the message.
    pub text: String,
}

/// What a read found besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// The cursor after this read; the previous one if nothing new was read.
    pub cursor: Option<Cursor>,
    /// Lines that are not records (the first few).
    pub bad: Vec<BadRecord>,
    pub bad_count: u64,
    /// Records after the cursor that the kernel overwrote before we read them.
    pub lost: u64,
    /// Files: whether the read started at the cursor's offset rather than
    /// rescanning from the start.
    pub resumed: bool,
    pub bytes_read: u64,
}

/// How many bad lines are kept for messages; the rest are only counted.
const BAD_KEPT: usize = 8;

/// The kind of a kernel log source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Device,
    File,
}

/// Whether `path` is the kmsg device or a file in its format.
pub fn kind_of(path: &Path) -> io::Result<SourceKind> {
    let meta = std::fs::metadata(path)?;
    Ok(if meta.file_type().is_char_device() {
        SourceKind::Device
    } else {
        SourceKind::File
    })
}

/// Why a line is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError(pub &'static str);

/// Splits a record's first line into sequence number, timestamp and message.
pub fn parse_header(line: &[u8]) -> Result<(u64, u64, &[u8]), HeaderError> {
    let semi = memchr::memchr(b';', line).ok_or(HeaderError("no `;` after the header"))?;
    let (header, message) = (&line[..semi], &line[semi + 1..]);
    let mut fields = header.split(|&b| b == b',');
    let mut number = |what: &'static str| -> Result<u64, HeaderError> {
        let field = fields.next().ok_or(HeaderError(what))?;
        parse_u64(field).ok_or(HeaderError(what))
    };
    number("priority is not a number")?;
    let seq = number("sequence number is not a number")?;
    let ts = number("timestamp is not a number")?;
    Ok((seq, ts, message))
}

fn parse_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 19 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        field
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')),
    )
}

/// Reads the records after `cursor` from `path`, calling `visit` for each.
pub fn read(
    path: &Path,
    cursor: Option<Cursor>,
    visit: &mut dyn FnMut(&Entry),
) -> io::Result<ReadSummary> {
    match kind_of(path)? {
        SourceKind::Device => read_device(path, cursor, visit),
        SourceKind::File => read_file(path, cursor, visit),
    }
}

/// Reads the kmsg character device until `EAGAIN`.
pub fn read_device(
    path: &Path,
    cursor: Option<Cursor>,
    visit: &mut dyn FnMut(&Entry),
) -> io::Result<ReadSummary> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    read_records(&mut file, cursor, visit)
}

/// The device's record loop, apart from the device so that a stand-in with
/// the same semantics (one record per `read`, `EAGAIN` or 0 at the end,
/// `EPIPE` for a record overwritten under us) can drive it: the benchmark
/// feeds it a full 16 MB ring buffer, which no test machine's kernel has.
///
/// The device cannot seek to a sequence number, so every run reads the ring
/// from its oldest record and skips those up to the cursor; a skipped record
/// costs one `read` and a header parse, nothing more.
pub fn read_records(
    device: &mut dyn Read,
    cursor: Option<Cursor>,
    visit: &mut dyn FnMut(&Entry),
) -> io::Result<ReadSummary> {
    let mut summary = ReadSummary {
        cursor,
        ..Default::default()
    };
    let after = cursor.map(|c| c.seq);
    // The kernel refuses (EINVAL) a buffer shorter than the record; records
    // are at most 8 KiB with their dictionary.
    let mut buf = vec![0u8; 16 * 1024];
    let mut reads = 0u64;
    let mut expected_next = after.map(|s| s + 1);
    loop {
        let n = match device.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Overwritten under us; the next read returns the oldest record left.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(e),
        };
        reads += 1;
        summary.bytes_read += n as u64;
        let raw = &buf[..n];
        let first = &raw[..memchr::memchr(b'\n', raw).unwrap_or(n)];
        match parse_header(first) {
            Ok((seq, ts_usec, message)) => {
                if after.is_some_and(|a| seq <= a) {
                    continue;
                }
                if let Some(next) = expected_next {
                    summary.lost += seq.saturating_sub(next);
                }
                expected_next = Some(seq + 1);
                summary.cursor = Some(Cursor {
                    seq,
                    offset: None,
                    line: None,
                });
                visit(&Entry {
                    seq,
                    ts_usec,
                    message,
                    raw,
                    line: None,
                    wall_s: None,
                });
            }
            Err(e) => note_bad(&mut summary, reads, e, first),
        }
    }
    Ok(summary)
}

fn note_bad(summary: &mut ReadSummary, line: u64, e: HeaderError, text: &[u8]) {
    summary.bad_count += 1;
    if summary.bad.len() < BAD_KEPT {
        let text = String::from_utf8_lossy(&text[..text.len().min(120)]).into_owned();
        summary.bad.push(BadRecord {
            line,
            reason: e.0.to_string(),
            text,
        });
    }
}

/// Reads a regular file in record format, resuming at the cursor's offset
/// when the record there is still the cursor's record.
pub fn read_file(
    path: &Path,
    cursor: Option<Cursor>,
    visit: &mut dyn FnMut(&Entry),
) -> io::Result<ReadSummary> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if let Some(
        c @ Cursor {
            offset: Some(offset),
            line: Some(line),
            ..
        },
    ) = cursor
    {
        if offset < len {
            file.seek(SeekFrom::Start(offset))?;
            let mut summary = ReadSummary {
                cursor,
                resumed: true,
                ..Default::default()
            };
            let mut scanner = Lines::new(&mut file, offset, line);
            // The cursor's own record must be first, or the file was replaced
            // or rewritten: then rescan it all, skipping what was seen.
            let same = match scanner.next_line()? {
                Some((_, line_no, first)) => forms::detect(first)
                    .and_then(|form| forms::parse(form, first, line_no).ok())
                    .is_some_and(|l| l.seq == c.seq),
                None => false,
            };
            if same {
                scan(&mut scanner, Some(c.seq), &mut summary, visit)?;
                summary.bytes_read = scanner.position - offset;
                return Ok(summary);
            }
            file.seek(SeekFrom::Start(0))?;
        }
    }
    let mut summary = ReadSummary {
        cursor,
        ..Default::default()
    };
    let mut scanner = Lines::new(&mut file, 0, 1);
    scan(&mut scanner, cursor.map(|c| c.seq), &mut summary, visit)?;
    summary.bytes_read = scanner.position;
    Ok(summary)
}

fn scan(
    lines: &mut Lines<'_>,
    after: Option<u64>,
    summary: &mut ReadSummary,
    visit: &mut dyn FnMut(&Entry),
) -> io::Result<()> {
    // The first line that names a form decides it for the file.
    let mut form = None;
    while let Some((offset, line_no, line)) = lines.next_line()? {
        if forms::is_comment(line) || line[0] == b' ' {
            // Journal notes; a record's continuation lines.
            continue;
        }
        let Some(this_form) = form.or_else(|| forms::detect(line)) else {
            note_bad(summary, line_no, HeaderError("no kernel log form"), line);
            continue;
        };
        form = Some(this_form);
        match forms::parse(this_form, line, line_no) {
            Ok(parsed) => {
                summary.cursor = Some(Cursor {
                    seq: parsed.seq,
                    offset: Some(offset),
                    line: Some(line_no),
                });
                if after.is_some_and(|a| parsed.seq <= a) {
                    continue;
                }
                let (ts_usec, wall_s) = match parsed.stamp {
                    Stamp::SinceBoot(us) => (us, None),
                    Stamp::Wall(s) => (0, Some(s)),
                };
                visit(&Entry {
                    seq: parsed.seq,
                    ts_usec,
                    message: parsed.message,
                    raw: line,
                    line: Some(line_no),
                    wall_s,
                });
            }
            Err(e) => note_bad(summary, line_no, HeaderError(e.0), line),
        }
    }
    Ok(())
}

/// Complete lines of a file, with their byte offsets and line numbers. A
/// last line without its newline is still being written and is not returned.
struct Lines<'f> {
    file: &'f mut File,
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    start: usize,
    /// End of the valid part of `buf`.
    end: usize,
    /// File offset of `buf[start]`.
    position: u64,
    line: u64,
    eof: bool,
}

const CHUNK: usize = 1 << 20;

impl<'f> Lines<'f> {
    fn new(file: &'f mut File, position: u64, line: u64) -> Lines<'f> {
        Lines {
            file,
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            position,
            line,
            eof: false,
        }
    }

    /// The next complete line (without its newline): offset, line number, bytes.
    fn next_line(&mut self) -> io::Result<Option<(u64, u64, &[u8])>> {
        loop {
            if let Some(nl) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let (from, offset, line) = (self.start, self.position, self.line);
                self.start += nl + 1;
                self.position += nl as u64 + 1;
                self.line += 1;
                return Ok(Some((offset, line, &self.buf[from..from + nl])));
            }
            if self.eof {
                return Ok(None);
            }
            self.refill()?;
        }
    }

    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.buf.len() {
            // One line longer than the buffer: grow rather than split it.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn collect(path: &Path, cursor: Option<Cursor>) -> (Vec<(u64, String)>, ReadSummary) {
        let mut seen = Vec::new();
        let summary = read(path, cursor, &mut |e| {
            seen.push((e.seq, String::from_utf8_lossy(e.message).into_owned()))
        })
        .unwrap();
        (seen, summary)
    }

    #[test]
    fn headers_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_header(b"6,12,3456,-;NVRM: hello").unwrap(),
            (12, 3456, &b"NVRM: hello"[..])
        );
        assert_eq!(
            parse_header(b"4,7,9,c,caller=T12;text").unwrap(),
            (7, 9, &b"text"[..])
        );
        assert_eq!(parse_header(b"6,12,3456,-;").unwrap().2, b"");
        assert!(parse_header(b"[  12.3] plain dmesg").is_err());
        assert_eq!(
            parse_header(b"6,x,3456,-;m").unwrap_err().0,
            "sequence number is not a number"
        );
        assert!(parse_header(b"6,1;m").is_err());
    }

    #[test]
    fn files_skip_continuations_and_resume_at_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        std::fs::write(
            &path,
            "6,1,10,-;first\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n6,2,20,-;second\n",
        )
        .unwrap();
        let (seen, summary) = collect(&path, None);
        assert_eq!(seen, vec![(1, "first".into()), (2, "second".into())]);
        let cursor = summary.cursor.unwrap();
        let second_at = "6,1,10,-;first\n SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n".len() as u64;
        assert_eq!(
            cursor,
            Cursor {
                seq: 2,
                offset: Some(second_at),
                line: Some(4)
            }
        );
        assert_eq!(summary.bad_count, 0);

        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"6,3,30,-;third\n6,4,40,-;fourth, still being writ")
            .unwrap();
        let (seen, summary) = collect(&path, Some(cursor));
        assert!(summary.resumed);
        assert_eq!(seen, vec![(3, "third".into())], "an unfinished line waits");
        assert_eq!(summary.bytes_read, 16 + 15);
        assert_eq!(summary.cursor.unwrap().line, Some(5));

        let (seen, summary) = collect(&path, summary.cursor);
        assert!(seen.is_empty());
        assert_eq!(summary.cursor.unwrap().seq, 3);
    }

    #[test]
    fn a_rewritten_file_is_rescanned_skipping_what_was_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        std::fs::write(&path, "6,1,10,-;a\n6,2,20,-;b\n6,3,30,-;c\n").unwrap();
        let stale = Cursor {
            seq: 2,
            offset: Some(3),
            line: Some(1),
        };
        let (seen, summary) = collect(&path, Some(stale));
        assert!(!summary.resumed);
        assert_eq!(seen, vec![(3, "c".into())]);
        assert_eq!(summary.cursor.unwrap().offset, Some(22));

        let beyond = Cursor {
            seq: 2,
            offset: Some(1 << 30),
            line: Some(99),
        };
        let (seen, _) = collect(&path, Some(beyond));
        assert_eq!(seen, vec![(3, "c".into())]);
    }

    #[test]
    fn lines_that_are_not_records_are_counted_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        std::fs::write(&path, "6,1,10,-;a\n[ 12.5] not kmsg\n\n6,2,20,-;b\n").unwrap();
        let (seen, summary) = collect(&path, None);
        assert_eq!(seen.len(), 2);
        assert_eq!(summary.bad_count, 1);
        assert_eq!(summary.bad[0].line, 2);
        assert!(summary.bad[0].reason.contains(';'));
    }

    #[test]
    fn lines_longer_than_the_buffer_are_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        let long = "x".repeat(CHUNK * 2 + 17);
        std::fs::write(&path, format!("6,1,10,-;{long}\n6,2,20,-;b\n")).unwrap();
        let (seen, _) = collect(&path, None);
        assert_eq!(seen[0].1.len(), long.len());
        assert_eq!(seen[1], (2, "b".into()));
    }

    /// One record per `read`, as the device gives them; `EPIPE` where the
    /// kernel overwrote records, `EAGAIN` at the end.
    struct Device(std::collections::VecDeque<io::Result<Vec<u8>>>);

    impl Read for Device {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                None => Err(io::ErrorKind::WouldBlock.into()),
                Some(Err(e)) => Err(e),
                Some(Ok(record)) => {
                    buf[..record.len()].copy_from_slice(&record);
                    Ok(record.len())
                }
            }
        }
    }

    #[test]
    fn the_device_loop_skips_to_the_cursor_counts_lost_records_and_names_bad_reads() {
        let record =
            |seq: u64| Ok(format!("6,{seq},{},-;m{seq}\n SUBSYSTEM=pci\n", seq * 10).into_bytes());
        let mut device = Device(
            [
                record(3),
                record(4),
                record(5),
                Err(io::Error::from_raw_os_error(libc::EPIPE)),
                record(8),
                Ok(b"garbage\n".to_vec()),
                record(9),
            ]
            .into(),
        );
        let mut seen = Vec::new();
        let cursor = Cursor {
            seq: 4,
            offset: None,
            line: None,
        };
        let summary = read_records(&mut device, Some(cursor), &mut |e: &Entry| {
            seen.push((e.seq, String::from_utf8_lossy(e.message).into_owned()));
            assert!(
                e.raw.ends_with(b" SUBSYSTEM=pci\n"),
                "the whole record is kept"
            );
        })
        .unwrap();
        assert_eq!(seen, [(5, "m5".into()), (8, "m8".into()), (9, "m9".into())]);
        assert_eq!(summary.cursor.unwrap().seq, 9);
        assert_eq!(summary.lost, 2, "6 and 7 were overwritten");
        assert_eq!(summary.bad_count, 1);
        assert_eq!(summary.bad[0].line, 5, "the fifth read");
    }

    #[test]
    fn the_real_device_reads_to_its_end_when_readable() {
        // Only where this machine lets us read its kernel log.
        let path = Path::new("/dev/kmsg");
        if kind_of(path).ok() != Some(SourceKind::Device) || File::open(path).is_err() {
            return;
        }
        let (seen, summary) = collect(path, None);
        assert!(!seen.is_empty());
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
        let last = summary.cursor.unwrap();
        assert_eq!(last.offset, None);
        let (again, _) = collect(path, Some(last));
        assert!(again.iter().all(|(seq, _)| *seq > last.seq));
    }
}

/// Random input: an error or a record, never a panic, and the good records
/// around bad lines all count. A bounded number of cases, so CI runs them.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    /// (true: a record, false: a line that is not one) and the message text.
    fn layout() -> impl Strategy<Value = Vec<(bool, String)>> {
        proptest::collection::vec((any::<bool>(), "[a-zA-Z0-9 .:=()-]{0,40}"), 0..40)
    }

    /// The file's text and the sequence numbers of its records.
    fn write(layout: &[(bool, String)]) -> (String, Vec<u64>) {
        let mut text = String::new();
        let mut seqs = Vec::new();
        for (i, (good, message)) in layout.iter().enumerate() {
            if *good {
                let seq = 100 + i as u64;
                text.push_str(&format!("6,{seq},{},-;{message}\n", 1000 * i));
                seqs.push(seq);
            } else {
                // No `;` and no leading space: not a record, not a continuation.
                text.push_str(&format!("x{message}\n"));
            }
        }
        (text, seqs)
    }

    fn read_all(text: &[u8], cursor: Option<Cursor>) -> io::Result<(Vec<u64>, ReadSummary)> {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text).unwrap();
        let mut seen = Vec::new();
        let summary = read_file(file.path(), cursor, &mut |e| seen.push(e.seq))?;
        Ok((seen, summary))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_bytes_are_a_header_or_an_error(line in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_header(&line);
        }

        #[test]
        fn a_file_of_any_bytes_reads_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = read_all(&bytes, None);
        }

        #[test]
        fn every_record_around_bad_lines_is_read_and_each_bad_line_counted(layout in layout()) {
            let (text, seqs) = write(&layout);
            let (seen, summary) = read_all(text.as_bytes(), None).unwrap();
            prop_assert_eq!(&seen, &seqs);
            let bad: Vec<u64> = layout
                .iter()
                .enumerate()
                .filter(|(_, (good, _))| !good)
                .map(|(i, _)| i as u64 + 1)
                .collect();
            prop_assert_eq!(summary.bad_count, bad.len() as u64);
            let named: Vec<u64> = summary.bad.iter().map(|b| b.line).collect();
            prop_assert_eq!(&named[..], &bad[..named.len()]);
        }

        #[test]
        fn a_cursor_resumes_after_its_record(layout in layout(), pick in any::<prop::sample::Index>()) {
            let (text, seqs) = write(&layout);
            prop_assume!(!seqs.is_empty());
            let (_, first) = read_all(text.as_bytes(), None).unwrap();
            let k = pick.index(seqs.len());
            // The cursor as a run would have left it at record k.
            let line = layout.iter().enumerate().filter(|(_, (g, _))| *g).nth(k).unwrap().0;
            let offset: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
            let cursor = Cursor { seq: seqs[k], offset: Some(offset as u64), line: Some(line as u64 + 1) };
            let (seen, again) = read_all(text.as_bytes(), Some(cursor)).unwrap();
            prop_assert_eq!(&seen[..], &seqs[k + 1..]);
            prop_assert!(again.resumed);
            prop_assert_eq!(again.cursor.map(|c| c.seq), first.cursor.map(|c| c.seq));
        }
    }
}
