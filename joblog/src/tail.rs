//! A log's tail as the classifier sees it: the last bytes of the file, cut
//! to whole lines, each line at most [`Limits::max_line_bytes`] long and at
//! most [`Limits::max_lines`] of them. Pure data: [`crate::read_tail`] fills
//! it from a file, tests and the benchmark from memory.

use std::time::Duration;

/// Bounds on what is read from one log file. The defaults suit `lemon
/// ingest`: 256 KiB of tail, 4 KiB lines, 20,000 lines, 3 s per file,
/// 8 files at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// How much of the end of the file to read. Clamped to
    /// [`Limits::MIN_TAIL_BYTES`]..=[`Limits::MAX_TAIL_BYTES`]: a job's last
    /// words are near the end, and a log is never read whole.
    pub tail_bytes: u64,
    /// A longer line keeps only its first bytes (the part that names the
    /// error); the rest is cut.
    pub max_line_bytes: usize,
    /// Only the last lines are kept (per file; a job has one or two files).
    pub max_lines: usize,
    /// The time one file may take, open and read together. A hung NFS mount
    /// costs this once per stuck file, then [`Limits::max_stalled`] applies.
    pub timeout: Duration,
    /// How many reads that ran past their time may still be hanging (their
    /// threads abandoned) before further files are skipped without trying.
    pub max_stalled: usize,
    /// How many logs [`crate::read_tails`] reads at once.
    pub parallel_reads: usize,
}

impl Limits {
    /// The least tail read: issue 36's floor.
    pub const MIN_TAIL_BYTES: u64 = 256 * 1024;
    /// The most tail read: issue 36's ceiling.
    pub const MAX_TAIL_BYTES: u64 = 1024 * 1024;

    /// [`Limits::tail_bytes`] within its bounds.
    pub fn effective_tail_bytes(&self) -> u64 {
        self.tail_bytes
            .clamp(Self::MIN_TAIL_BYTES, Self::MAX_TAIL_BYTES)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            tail_bytes: Self::MIN_TAIL_BYTES,
            max_line_bytes: 4096,
            max_lines: 20_000,
            timeout: Duration::from_secs(3),
            max_stalled: 4,
            parallel_reads: 8,
        }
    }
}

/// The end of one log file, cut to the [`Limits`]. Bytes, not text: logs
/// hold progress bars, colour codes and binary junk, and only the lines a
/// signature matches are ever turned into (sanitised) text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogTail {
    bytes: Vec<u8>,
    bytes_read: u64,
}

impl LogTail {
    /// A tail from bytes already in memory, cut as [`crate::read_tail`] cuts
    /// a file's. `starts_mid_file` says the bytes begin somewhere inside a
    /// file, so that their first, partial line is dropped.
    pub fn from_bytes(bytes: &[u8], starts_mid_file: bool, limits: &Limits) -> LogTail {
        let mut start = 0;
        if starts_mid_file {
            // A file of one endless line keeps its (cut) last part rather than nothing.
            if let Some(nl) = memchr::memchr(b'\n', bytes) {
                start = nl + 1;
            }
        }
        let kept = last_lines(&bytes[start..], limits.max_lines);
        LogTail {
            bytes: cut_long_lines(kept, limits.max_line_bytes.max(1)),
            bytes_read: bytes.len() as u64,
        }
    }

    /// The kept text: whole lines separated by `\n`.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many bytes were read from the file (before cutting).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The kept lines, without their `\n`.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty())
    }
}

/// The suffix of `bytes` that holds at most `max_lines` lines.
fn last_lines(bytes: &[u8], max_lines: usize) -> &[u8] {
    // A final line without `\n` counts as a line; a final `\n` does not start one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    // The common case, a tail of fewer lines than the cap, by a vector count.
    if memchr::memchr_iter(b'\n', body).count() < max_lines {
        return bytes;
    }
    match memchr::memrchr_iter(b'\n', body).nth(max_lines.saturating_sub(1)) {
        Some(nl) if max_lines > 0 => &bytes[nl + 1..],
        Some(_) => &[],
        None if max_lines == 0 => &[],
        None => bytes,
    }
}

/// `bytes` with every line longer than `max` cut to its first `max` bytes.
fn cut_long_lines(bytes: &[u8], max: usize) -> Vec<u8> {
    if !has_long_line(bytes, max) {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len())) {
        if start > bytes.len() {
            break;
        }
        let line = &bytes[start..end];
        out.extend_from_slice(&line[..line.len().min(max)]);
        if end < bytes.len() {
            out.push(b'\n');
        }
        start = end + 1;
    }
    out
}

/// Whether a line of `bytes` is longer than `max`: one backward search per
/// window of `max` bytes, not one step per line.
fn has_long_line(bytes: &[u8], max: usize) -> bool {
    let mut start = 0;
    while bytes.len() - start > max {
        match memchr::memrchr(b'\n', &bytes[start..=start + max]) {
            Some(nl) => start += nl + 1,
            None => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_line_bytes: usize, max_lines: usize) -> Limits {
        Limits {
            max_line_bytes,
            max_lines,
            ..Limits::default()
        }
    }

    #[test]
    fn a_tail_that_starts_mid_file_drops_its_partial_first_line() {
        let t = LogTail::from_bytes(b"tial line\nwhole\nlast\n", true, &Limits::default());
        assert_eq!(t.bytes(), b"whole\nlast\n");
        let t = LogTail::from_bytes(b"first\nlast", false, &Limits::default());
        assert_eq!(t.bytes(), b"first\nlast");
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        let t = LogTail::from_bytes(b"a\nb\nc\nd\n", false, &limits(100, 2));
        assert_eq!(t.bytes(), b"c\nd\n");
        let t = LogTail::from_bytes(b"a\nb\nc\nd", false, &limits(100, 2));
        assert_eq!(t.bytes(), b"c\nd");
        let t = LogTail::from_bytes(b"a\nb\n", false, &limits(100, 5));
        assert_eq!(t.bytes(), b"a\nb\n");
        let t = LogTail::from_bytes(b"a\nb\n", false, &limits(100, 0));
        assert_eq!(t.bytes(), b"");
    }

    #[test]
    fn a_long_line_keeps_only_its_first_bytes() {
        let t = LogTail::from_bytes(b"short\n0123456789\nend\n", false, &limits(4, 100));
        assert_eq!(t.bytes(), b"shor\n0123\nend\n");
        assert_eq!(t.lines().count(), 3);
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_not_long_and_one_byte_more_is() {
        assert!(!has_long_line(b"abcd\nabcd", 4));
        assert!(!has_long_line(b"abcd\nabcd\n", 4));
        assert!(has_long_line(b"abcd\nabcde\nab", 4));
        assert!(has_long_line(b"abcde", 4));
        assert!(!has_long_line(b"", 4));
    }

    #[test]
    fn the_tail_bytes_stay_within_the_issues_bounds() {
        let asking = |tail_bytes| Limits {
            tail_bytes,
            ..Limits::default()
        };
        assert_eq!(asking(1).effective_tail_bytes(), 256 * 1024);
        assert_eq!(asking(10 << 30).effective_tail_bytes(), 1024 * 1024);
    }
}
