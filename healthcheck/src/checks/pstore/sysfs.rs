//! The crash logs in `/sys/fs/pstore`: what the kernel kept of its last
//! moments (`dmesg-efi-*`, `dmesg-ramoops-*`, `dmesg-erst-*`, ...).

use crate::check::CheckError;
use crate::root::NodeRoot;

pub const PSTORE: &str = "/sys/fs/pstore";

/// One pstore entry: its file name and the lines worth quoting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub panic: Vec<String>,
}

/// Every entry, with the first `lines` lines of its panic. Only new entries
/// are read whole: `seen` says which are known.
pub fn gather(
    root: &NodeRoot,
    seen: &dyn Fn(&str) -> bool,
    lines: usize,
) -> Result<(Vec<String>, Vec<Entry>), CheckError> {
    let names = root.list_dir(PSTORE)?;
    let mut new = Vec::new();
    for name in names.iter().filter(|n| !seen(n)) {
        let path = format!("{PSTORE}/{name}");
        let text = match root.read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        new.push(Entry {
            name: name.clone(),
            panic: panic_lines(&text, lines),
        });
    }
    Ok((names, new))
}

/// Pure: the first `n` lines of the panic: from the first line that names
/// one (`Kernel panic`, `BUG:`, `Oops`, a hardware error) if any, else from
/// the start, past pstore's own `Panic#1 Part1` header; log-level and time
/// prefixes (`<0>[ 1234.5]`) dropped.
pub fn panic_lines(text: &str, n: usize) -> Vec<String> {
    const MARKS: [&str; 6] = [
        "Kernel panic",
        "BUG:",
        "Oops",
        "general protection fault",
        "Hardware Error",
        "watchdog:",
    ];
    let lines: Vec<&str> = text
        .lines()
        .map(strip_prefix)
        .filter(|l| !l.is_empty() && !l.starts_with("Panic#") && !l.starts_with("Oops#"))
        .collect();
    let start = lines
        .iter()
        .position(|l| MARKS.iter().any(|m| l.contains(m)))
        .unwrap_or(0);
    lines[start..]
        .iter()
        .take(n)
        .map(|l| l.to_string())
        .collect()
}

/// `<4>[  123.456789] text` → `text`.
fn strip_prefix(line: &str) -> &str {
    let mut l = line.trim();
    if l.starts_with('<') {
        if let Some(i) = l.find('>') {
            l = l[i + 1..].trim_start();
        }
    }
    if l.starts_with('[') {
        if let Some(i) = l.find(']') {
            l = l[i + 1..].trim_start();
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    const DMESG: &str = "\
Panic#1 Part1
<6>[ 8731.442105] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error
<0>[ 8731.559201] Kernel panic - not syncing: Fatal hardware error!
<4>[ 8731.559210] CPU: 17 PID: 0 Comm: swapper/17 Tainted: P           OE     5.15.0-105-generic #115-Ubuntu
<4>[ 8731.559214] Hardware name: NVIDIA DGXH100/DGXH100, BIOS 1.6.7 03/28/2024
<4>[ 8731.559216] Call Trace:
<4>[ 8731.559218]  <NMI>
";

    #[test]
    fn the_quote_starts_at_the_panic_without_prefixes() {
        assert_eq!(
            panic_lines(DMESG, 3),
            [
                "Kernel panic - not syncing: Fatal hardware error!",
                "CPU: 17 PID: 0 Comm: swapper/17 Tainted: P           OE     5.15.0-105-generic #115-Ubuntu",
                "Hardware name: NVIDIA DGXH100/DGXH100, BIOS 1.6.7 03/28/2024",
            ]
        );
        assert_eq!(
            panic_lines("Panic#1 Part1\nplain text\n", 2),
            ["plain text"]
        );
        assert!(panic_lines("", 4).is_empty());
    }
}
