//! Numbered lines, and the one rule every text parser shares: the closing
//! line of an output counts only if its newline was printed too, since a cut
//! inside `# Avg bus bandwidth    : 70.742` would otherwise read as 70.7.

/// The lines of `text` with their 1-based numbers, and whether each ended
/// with a newline (only the last one may not).
pub(crate) fn numbered(text: &str) -> impl Iterator<Item = Line<'_>> {
    let ends_with_newline = text.ends_with('\n');
    let count = text.lines().count();
    text.lines().enumerate().map(move |(index, content)| Line {
        number: index + 1,
        content,
        complete: index + 1 < count || ends_with_newline,
    })
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub number: usize,
    pub content: &'a str,
    /// False only for a last line without its newline.
    pub complete: bool,
}

/// The number a truncation error names: the line after the last one.
pub(crate) fn after_last(text: &str) -> usize {
    text.lines().count() + 1
}

/// A decimal number as the tools print it; `inf`, `nan` and the like are
/// refused, since no benchmark prints them as a measurement.
pub(crate) fn number(token: &str) -> Option<f64> {
    let value: f64 = token.parse().ok()?;
    value.is_finite().then_some(value)
}
