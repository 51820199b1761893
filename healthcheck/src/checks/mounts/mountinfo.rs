//! Parsing `/proc/self/mountinfo` (proc(5)).
//!
//! ```text
//! 36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//! ```

use crate::check::CheckError;
use std::path::PathBuf;

/// Where the kernel lists the mounts our process sees.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// One mount.
#[derive(Debug, Clone, PartialEq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// Per-mount options (`rw,nosuid,relatime`).
    pub options: Vec<String>,
    /// Superblock options (`rw,vers=4.2,...` for NFS).
    pub super_options: Vec<String>,
}

impl MountEntry {
    /// True if the mount is read-only, per mount or for the whole superblock.
    pub fn read_only(&self) -> bool {
        self.options
            .iter()
            .chain(&self.super_options)
            .any(|o| o == "ro")
    }

    /// True if `option` is set per mount or on the superblock.
    pub fn has_option(&self, option: &str) -> bool {
        self.options
            .iter()
            .chain(&self.super_options)
            .any(|o| o == option)
    }
}

/// Parses the whole file; a line that is not in the kernel's format is an
/// error naming it. Unlike the kernel log, the good lines are not used
/// without it: the bad line could be a mount the config expects, and reading
/// it as missing would take the node down for our own failure (`unknown` instead).
pub fn parse(text: &str) -> Result<Vec<MountEntry>, CheckError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            parse_line(line).ok_or_else(|| {
                CheckError::malformed(
                    MOUNTINFO,
                    format!("line {}: not in mountinfo format: `{line}`", i + 1),
                )
            })
        })
        .collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let mut words = line.split(' ');
    // mount id, parent id, major:minor, root
    for _ in 0..4 {
        words.next()?;
    }
    let mount_point = unescape(words.next()?);
    let options = split_options(words.next()?);
    // Optional fields (`shared:1`, `master:2`) run up to the lone `-`.
    loop {
        if words.next()? == "-" {
            break;
        }
    }
    let fstype = words.next()?.to_string();
    let source = unescape(words.next()?);
    let super_options = split_options(words.next().unwrap_or(""));
    Some(MountEntry {
        mount_point: PathBuf::from(mount_point),
        fstype,
        source,
        options,
        super_options,
    })
}

fn split_options(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .collect()
}

/// Undoes the kernel's octal escapes of space, tab, newline and backslash
/// (`\040`). Only `\000` to `\377` are escapes (a byte); `\400` and above
/// are not something the kernel writes, and are kept as written.
fn unescape(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .filter(|d| d[0] <= b'3');
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_above_a_byte_are_kept_as_written() {
        assert_eq!(unescape("/a\\134b"), "/a\\b");
        assert_eq!(unescape("/a\\377"), "/a\u{fffd}", "a byte, not UTF-8");
        assert_eq!(unescape("/a\\400b"), "/a\\400b");
        assert_eq!(unescape("/a\\777"), "/a\\777");
    }

    #[test]
    fn parses_optional_fields_and_escapes() {
        let text = "36 35 98:0 /mnt1 /mnt/my\\040dir rw,noatime master:1 shared:2 - ext3 /dev/root ro,errors=continue\n\
                    40 1 0:50 / /home rw,relatime - nfs4 fs:/home rw,vers=4.2\n";
        let m = parse(text).unwrap();
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/my dir"));
        assert_eq!(m[0].fstype, "ext3");
        assert!(m[0].read_only());
        assert!(!m[1].read_only());
        assert!(m[1].has_option("vers=4.2"));
        let err = parse("garbage\n").unwrap_err().to_string();
        assert!(
            err.contains("/proc/self/mountinfo") && err.contains("line 1"),
            "{err}"
        );
    }
}

/// Random input: entries or an error naming the line, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// The kernel's escaping of a path: space, tab, newline and backslash as octal.
    fn escape(path: &str) -> String {
        path.chars()
            .map(|c| match c {
                ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", c as u32),
                c => c.to_string(),
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn any_text_gives_entries_or_an_error(text in any::<String>()) {
            let _ = parse(&text);
        }

        #[test]
        fn backslashes_and_digits_never_overflow(text in "[\\\\0-9a ]{0,40}") {
            let _ = unescape(&text);
        }

        #[test]
        fn mount_points_come_back_as_the_kernel_escaped_them(
            mounts in proptest::collection::vec(("/[a-z \\t\\\\]{0,20}", "[a-z0-9]{1,8}", any::<bool>()), 1..20),
        ) {
            let text: String = mounts
                .iter()
                .enumerate()
                .map(|(i, (path, fstype, ro))| {
                    let opt = if *ro { "ro" } else { "rw" };
                    format!("{} 1 0:{i} / {} {opt},relatime shared:{i} - {fstype} src{i} rw\n", 20 + i, escape(path))
                })
                .collect();
            let parsed = parse(&text).unwrap();
            prop_assert_eq!(parsed.len(), mounts.len());
            for (entry, (path, fstype, ro)) in parsed.iter().zip(&mounts) {
                prop_assert_eq!(&entry.mount_point, &PathBuf::from(path));
                prop_assert_eq!(&entry.fstype, fstype);
                prop_assert_eq!(entry.read_only(), *ro);
            }
        }

        #[test]
        fn a_bad_line_among_good_ones_is_named(good in 0usize..10, bad in "[a-z]{1,10}") {
            let mut text: String = (0..good)
                .map(|i| format!("{i} 1 0:1 / /m{i} rw - ext4 /dev/x rw\n"))
                .collect();
            text.push_str(&bad);
            text.push('\n');
            let err = parse(&text).unwrap_err().to_string();
            let named = format!("line {}", good + 1);
            prop_assert!(err.contains(&named), "{}", err);
        }
    }
}
