//! What a parser says when the output is not what it expects.

use thiserror::Error;

/// A parse failure. Line numbers count from 1; a truncated output names the
/// line after its last one.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ParseError {
    #[error("line {line}: expected {expected}, found {found:?}")]
    Unexpected {
        line: usize,
        expected: String,
        found: String,
    },
    #[error("line {line}: the output ends before {expected} (truncated?)")]
    Truncated { line: usize, expected: String },
    #[error("line {line}: invalid JSON: {message}")]
    Json { line: usize, message: String },
    #[error("the output is {size} bytes, over the {max}-byte cap")]
    TooLarge { size: usize, max: usize },
}

impl ParseError {
    /// The line the error names (0 for a size error, which names none).
    pub fn line(&self) -> usize {
        match self {
            ParseError::Unexpected { line, .. }
            | ParseError::Truncated { line, .. }
            | ParseError::Json { line, .. } => *line,
            ParseError::TooLarge { .. } => 0,
        }
    }

    pub(crate) fn unexpected(line: usize, expected: impl Into<String>, found: &str) -> Self {
        ParseError::Unexpected {
            line,
            expected: expected.into(),
            found: excerpt(found),
        }
    }

    pub(crate) fn truncated(line: usize, expected: impl Into<String>) -> Self {
        ParseError::Truncated {
            line,
            expected: expected.into(),
        }
    }
}

/// At most 120 characters of the offending text, so that a garbled
/// megabyte-long line does not become a megabyte-long message.
fn excerpt(found: &str) -> String {
    const MAX_CHARS: usize = 120;
    let trimmed = found.trim();
    match trimmed.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}
