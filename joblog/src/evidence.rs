//! A matched line made safe to store and show: valid UTF-8, no control
//! characters or terminal escapes (a log can hold any byte, and the line
//! ends up in a database and on an administrator's terminal), at most
//! [`EVIDENCE_CHARS`] characters.

/// The longest evidence line kept, in characters.
pub const EVIDENCE_CHARS: usize = 200;

/// `raw` as a short, printable line.
pub fn evidence_line(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len().min(EVIDENCE_CHARS * 4));
    let mut chars = text.chars().peekable();
    let mut kept = 0;
    while let Some(c) = chars.next() {
        if kept == EVIDENCE_CHARS {
            break;
        }
        if c == '\u{1b}' {
            skip_escape(&mut chars);
            continue;
        }
        let c = match c {
            '\t' => ' ',
            c if c.is_control() || is_invisible_format(c) => continue,
            c => c,
        };
        out.push(c);
        kept += 1;
    }
    out.trim().to_string()
}

/// Skips the rest of an escape sequence: `ESC [ params final` (CSI, colours
/// and cursor moves) or `ESC ] ... BEL` (OSC, window titles), else one char.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            for c in chars.by_ref() {
                if c == '\u{7}' || c == '\u{9c}' {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// Zero-width and bidirectional-override characters: invisible, and able to
/// make a stored line read differently from what it holds.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_terminal_escapes_are_stripped() {
        let raw = b"\x1b[31mRuntimeError\x1b[0m: CUDA\terror\x07 \x1b]0;title\x07x\r";
        assert_eq!(evidence_line(raw), "RuntimeError: CUDA error x");
    }

    #[test]
    fn invalid_utf8_and_bidi_overrides_do_not_survive() {
        assert_eq!(evidence_line(b"\xff\xfeok"), "\u{fffd}\u{fffd}ok");
        assert_eq!(evidence_line("a\u{202e}b\u{200b}c".as_bytes()), "abc");
    }

    #[test]
    fn a_long_line_is_cut_to_the_evidence_length() {
        let line = "é".repeat(1000);
        assert_eq!(
            evidence_line(line.as_bytes()).chars().count(),
            EVIDENCE_CHARS
        );
    }
}
