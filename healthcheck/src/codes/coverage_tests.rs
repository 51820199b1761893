//! The table covers every code the crate can emit: the crate's own sources
//! are scanned for code-shaped string literals (`"FABRIC_DOWN"`, and the
//! `"XID_{n}"` format strings and `"SXID_"` prefixes families are made
//! from), and each must have an entry. Scanning the source rather than
//! running the checks catches a code on a path no fixture reaches.

use super::{all, lookup, Code};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Literals shaped like codes that are not finding codes: NVML's error
/// names, AER field names, environment variables.
const NOT_CODES: &[&str] = &[
    "GPU_IS_LOST",
    "RESET_REQUIRED",
    "CORRUPTED_INFOROM",
    "NO_PERMISSION",
    "INVALID_ARGUMENT",
    "DRIVER_NOT_LOADED",
    "NOT_SUPPORTED",
    "NOT_READY",
    "TOTAL_ERR_FATAL",
    "TOTAL_ERR_NONFATAL",
    "TOTAL_ERR_COR",
    "LEMONADE_CONFIG",
    "SLURM_JOB_ID",
    "CARGO_PKG_VERSION",
];

/// Files whose code-shaped literals are not finding codes: NVIDIA's XID
/// catalog and its decode of XIDs 144-150, generated, and the test that reads
/// the catalog, whose mnemonics, unit names and actions name XIDs (an XID's
/// finding code is `XID_<n>`).
const NOT_CODE_FILES: &[&str] = &["catalog_table.rs", "catalog_source.rs", "nvlink5_table.rs"];

/// What the scan found: whole codes, and the fixed start of made codes.
#[derive(Default)]
struct Found {
    codes: BTreeSet<String>,
    prefixes: BTreeSet<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The part of a file that ships: up to its test module, test files skipped.
fn shipped(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name.ends_with("_tests.rs") || NOT_CODE_FILES.contains(&&*name) {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let end = text.find("\n#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `FABRIC_DOWN`: upper case words joined by `_`.
fn code_shaped(s: &str) -> bool {
    let words: Vec<&str> = s.split('_').collect();
    words.len() >= 2
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && words.iter().all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
}

fn scan_literal(literal: &str, found: &mut Found) {
    if code_shaped(literal) {
        found.codes.insert(literal.to_string());
    } else if let Some((head, _)) = literal.split_once('{') {
        // A format string that makes a code: `"XID_{xid}"`.
        if head.ends_with('_') && code_shaped(&format!("{head}X")) {
            found.prefixes.insert(head.to_string());
        }
    } else if let Some(head) = literal.strip_suffix('_') {
        // A prefix constant: `"SXID_"`.
        if code_shaped(&format!("{head}_X")) {
            found.prefixes.insert(literal.to_string());
        }
    }
}

/// The string literals of Rust source: plain (with escapes) and raw
/// (`r#"..."#`); char literals such as `'"'` are stepped over, lifetimes are
/// not mistaken for them.
fn string_literals(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\'' if chars.get(i + 1) == Some(&'\\') => {
                // '\n', '\'', '\u{..}': to the closing quote.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => i += 2,
            'r' if matches!(chars.get(i + 1), Some('#' | '"')) => {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                let open = i + 1 + hashes;
                if chars.get(open) != Some(&'"') {
                    i += 1;
                    continue;
                }
                let close: String = std::iter::once('"')
                    .chain("#".repeat(hashes).chars())
                    .collect();
                let rest: String = chars[open + 1..].iter().collect();
                let len = rest.find(&close).unwrap_or(rest.len());
                out.push(rest[..len].to_string());
                i = open + 1 + rest[..len].chars().count() + close.chars().count() - 1;
            }
            '"' => {
                let mut literal = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if let Some(c) = chars.get(i) {
                        literal.push(*c);
                    }
                    i += 1;
                }
                out.push(literal);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn scan(src: &Path) -> Found {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Found::default();
    for file in files {
        for literal in string_literals(&shipped(&file)) {
            scan_literal(&literal, &mut found);
        }
    }
    found
}

fn crate_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_literal_scanner_steps_over_char_literals_and_escapes() {
    let source = r##"let q = '"'; f(x, "A_B"); g::<'a>("s\"q", r#"R_"S"#, "XID_{n}")"##;
    assert_eq!(string_literals(source), ["A_B", "s\"q", "R_\"S", "XID_{n}"]);
}

#[test]
fn every_code_the_checks_emit_has_an_entry_in_the_table() {
    let found = scan(&crate_sources());
    assert!(
        found.codes.len() > 80,
        "the scan found only {:?}",
        found.codes
    );
    let missing: Vec<&String> = found
        .codes
        .iter()
        .filter(|c| !NOT_CODES.contains(&c.as_str()) && lookup(c).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "finding codes with no entry in healthcheck/src/codes: {missing:?}"
    );
}

#[test]
fn every_family_a_check_makes_codes_of_has_an_entry_in_the_table() {
    let found = scan(&crate_sources());
    let families: Vec<&str> = all()
        .filter_map(|e| match e.code {
            Code::Family { prefix, .. } => Some(prefix),
            Code::Exact(_) => None,
        })
        .collect();
    let missing: Vec<&String> = found
        .prefixes
        .iter()
        .filter(|p| !families.contains(&p.as_str()))
        .collect();
    assert!(found.prefixes.contains("XID_"), "{:?}", found.prefixes);
    assert!(
        missing.is_empty(),
        "code families with no entry: {missing:?}"
    );
}

#[test]
fn every_exact_entry_is_a_code_the_sources_still_hold() {
    let found = scan(&crate_sources());
    for entry in all() {
        if let Code::Exact(code) = entry.code {
            assert!(
                code == crate::finding::OK || found.codes.contains(code),
                "{code} has an entry but no source defines it"
            );
        }
    }
}

#[test]
fn a_literal_that_is_not_a_code_is_listed_as_such_only_while_it_exists() {
    let found = scan(&crate_sources());
    for literal in NOT_CODES {
        assert!(found.codes.contains(*literal), "{literal} is gone: drop it");
    }
}

#[test]
fn every_entry_says_what_it_means_and_how_to_silence_it() {
    for entry in all() {
        let code = entry.code.display();
        assert!(!entry.meaning.is_empty(), "{code}: no meaning");
        assert!(!entry.silence.is_empty(), "{code}: no way to silence");
        assert!(!entry.severities.is_empty(), "{code}: no severity");
        assert!(!entry.meaning.contains('\n'), "{code}: meaning is one line");
    }
}
