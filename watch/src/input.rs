//! The replay file: `time,job,node,metric,value` rows, read as a stream.
//!
//! Nothing is slurped: rows are parsed one by one from a buffered reader,
//! and a line longer than [`MAX_LINE`] is an error before it can fill memory.

use crate::Sample;
use std::io::{self, Read};
use thiserror::Error;

/// The header every replay file starts with.
pub const HEADER: [&str; 5] = ["time", "job", "node", "metric", "value"];

/// The longest line accepted, in bytes (a real row is under 200).
pub const MAX_LINE: usize = 64 * 1024;

/// Why a replay file cannot be read. Every row error names its 1-based line.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("cannot read the input: {0}")]
    Io(#[from] io::Error),
    #[error("line 1: the header must be `time,job,node,metric,value`, found `{found}`")]
    Header { found: String },
    #[error("line {line}: malformed row: {reason}")]
    Malformed { line: u64, reason: String },
    #[error("line {line}: time `{text}` is not whole unix seconds")]
    BadTime { line: u64, text: String },
    #[error("line {line}: value `{text}` is not a number")]
    BadValue { line: u64, text: String },
    #[error("line {line}: longer than {MAX_LINE} bytes")]
    LineTooLong { line: u64 },
}

/// Rows of a replay file, one at a time.
pub struct Rows<R: Read> {
    reader: csv::Reader<LineCap<R>>,
    record: csv::ByteRecord,
}

impl<R: Read> Rows<R> {
    /// Reads and checks the header.
    pub fn new(input: R) -> Result<Self, InputError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .buffer_capacity(256 * 1024)
            .from_reader(LineCap::new(input));
        let mut record = csv::ByteRecord::new();
        let found = reader.read_byte_record(&mut record).map_err(csv_error)?;
        let header: Vec<&[u8]> = record.iter().collect();
        let expected: Vec<&[u8]> = HEADER.iter().map(|h| h.as_bytes()).collect();
        if !found || header != expected {
            let fields: Vec<_> = record.iter().map(String::from_utf8_lossy).collect();
            let found = fields.join(",");
            return Err(InputError::Header { found });
        }
        Ok(Self { reader, record })
    }

    /// The next row and its line, or `None` at the end of the input.
    pub fn next_row(&mut self) -> Result<Option<(u64, Sample<'_>)>, InputError> {
        if !self
            .reader
            .read_byte_record(&mut self.record)
            .map_err(csv_error)?
        {
            return Ok(None);
        }
        let line = self.record.position().map_or(0, |p| p.line());
        let fields = self.record.len();
        if fields != HEADER.len() {
            let reason = format!("{fields} fields, expected 5 (time,job,node,metric,value)");
            return Err(InputError::Malformed { line, reason });
        }
        let text = |i: usize| -> Result<&str, InputError> {
            let raw = &self.record[i];
            let s = std::str::from_utf8(raw).map_err(|_| InputError::Malformed {
                line,
                reason: format!("{} is not UTF-8", HEADER[i]),
            })?;
            if s.is_empty() {
                let reason = format!("{} is empty", HEADER[i]);
                return Err(InputError::Malformed { line, reason });
            }
            Ok(s)
        };
        let (time, job, node, metric, value) = (text(0)?, text(1)?, text(2)?, text(3)?, text(4)?);
        let time = time.parse::<i64>().map_err(|_| InputError::BadTime {
            line,
            text: time.to_string(),
        })?;
        let value = value.parse::<f64>().map_err(|_| InputError::BadValue {
            line,
            text: value.to_string(),
        })?;
        let sample = Sample {
            time,
            job,
            node,
            metric,
            value,
        };
        Ok(Some((line, sample)))
    }
}

fn csv_error(e: csv::Error) -> InputError {
    let line = e.position().map_or(0, |p| p.line());
    match e.into_kind() {
        csv::ErrorKind::Io(io) => match io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TooLong>())
        {
            Some(too_long) => InputError::LineTooLong {
                line: too_long.line,
            },
            None => InputError::Io(io),
        },
        other => InputError::Malformed {
            line,
            reason: format!("{other:?}"),
        },
    }
}

/// The marker error of a line over [`MAX_LINE`].
#[derive(Debug, Error)]
#[error("line {line} is longer than {MAX_LINE} bytes")]
struct TooLong {
    line: u64,
}

/// A reader that fails on a line longer than [`MAX_LINE`], so a file without
/// newlines cannot grow the parser's record without bound.
struct LineCap<R> {
    inner: R,
    line: u64,
    current: usize,
}

impl<R> LineCap<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            line: 1,
            current: 0,
        }
    }
}

impl<R: Read> Read for LineCap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b == b'\n' {
                self.line += 1;
                self.current = 0;
            } else {
                self.current += 1;
                if self.current > MAX_LINE {
                    let line = self.line;
                    return Err(io::Error::new(io::ErrorKind::InvalidData, TooLong { line }));
                }
            }
        }
        Ok(n)
    }
}
