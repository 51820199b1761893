//! Reading `/proc/meminfo` and the EDAC counters, in the formats the kernel writes.

use crate::check::CheckError;
use crate::root::NodeRoot;
use thiserror::Error;

pub const MEMINFO: &str = "/proc/meminfo";
/// One directory per memory controller (`mc0`, `mc1`, ...).
pub const EDAC_DIR: &str = "/sys/devices/system/edac/mc";

/// What gather found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryData {
    /// `MemTotal` in KiB, when it was asked for.
    pub total_kib: Option<u64>,
    /// One per DIMM where the kernel lists them, else one per controller.
    pub counters: Vec<EdacCounter>,
    /// (entity, message naming the file) of counters that could not be read.
    pub unreadable: Vec<(String, String)>,
}

/// The error counts of one DIMM (`mc0/dimm3`) or one controller (`mc0`).
#[derive(Debug, Clone, PartialEq)]
pub struct EdacCounter {
    pub entity: String,
    /// The DIMM's slot label (`CPU_SrcID#0_MC#0_Chan#1_DIMM#0`), when known.
    pub label: Option<String>,
    /// Corrected errors since boot (or since `reset_counters`).
    pub corrected: u64,
    /// Uncorrected errors since boot (or since `reset_counters`).
    pub uncorrected: u64,
}

/// Reads `MemTotal` (when `with_total`) and every EDAC counter.
pub fn gather(root: &NodeRoot, with_total: bool) -> Result<MemoryData, CheckError> {
    let mut data = MemoryData::default();
    if with_total {
        let text = root.read_to_string(MEMINFO)?;
        data.total_kib = Some(
            parse_mem_total(&text).map_err(|e| CheckError::malformed(MEMINFO, e.to_string()))?,
        );
    }
    for mc in root.list_dir(EDAC_DIR)? {
        if !is_numbered(&mc, "mc") {
            continue;
        }
        let dir = format!("{EDAC_DIR}/{mc}");
        let dimms: Vec<String> = root
            .list_dir(&dir)?
            .into_iter()
            .filter(|n| is_numbered(n, "dimm") || is_numbered(n, "rank"))
            .collect();
        if dimms.is_empty() {
            match read_counter(root, &dir, &mc, "", None) {
                Ok(c) => data.counters.push(c),
                Err(e) => data.unreadable.push((mc.clone(), e.to_string())),
            }
        }
        if !dimms.is_empty() {
            // Errors the driver could not place on a DIMM count only here.
            match read_noinfo(root, &dir, &mc) {
                Ok(Some(c)) => data.counters.push(c),
                Ok(None) => {}
                Err(e) => data.unreadable.push((mc.clone(), e.to_string())),
            }
        }
        for dimm in dimms {
            let entity = format!("{mc}/{dimm}");
            let dimm_dir = format!("{dir}/{dimm}");
            let label = root
                .read_value_opt(format!("{dimm_dir}/dimm_label"))
                .ok()
                .flatten()
                .filter(|l| !l.trim().is_empty());
            match read_counter(root, &dimm_dir, &entity, "dimm_", label) {
                Ok(c) => data.counters.push(c),
                Err(e) => data.unreadable.push((entity, e.to_string())),
            }
        }
    }
    Ok(data)
}

fn read_counter(
    root: &NodeRoot,
    dir: &str,
    entity: &str,
    prefix: &str,
    label: Option<String>,
) -> Result<EdacCounter, CheckError> {
    let count = |name: &str| -> Result<u64, CheckError> {
        let path = format!("{dir}/{prefix}{name}");
        let text = root.read_value(&path)?;
        parse_count(&text).map_err(|m| CheckError::malformed(path, m))
    };
    Ok(EdacCounter {
        entity: entity.to_string(),
        label,
        corrected: count("ce_count")?,
        uncorrected: count("ue_count")?,
    })
}

/// A controller's errors not attributed to any DIMM (`ce_noinfo_count`,
/// `ue_noinfo_count`), where the kernel has them.
fn read_noinfo(root: &NodeRoot, dir: &str, mc: &str) -> Result<Option<EdacCounter>, CheckError> {
    let count = |name: &str| -> Result<Option<u64>, CheckError> {
        let path = format!("{dir}/{name}");
        match root.read_value_opt(&path)? {
            Some(text) => parse_count(&text)
                .map(Some)
                .map_err(|m| CheckError::malformed(path, m)),
            None => Ok(None),
        }
    };
    let (Some(corrected), Some(uncorrected)) =
        (count("ce_noinfo_count")?, count("ue_noinfo_count")?)
    else {
        return Ok(None);
    };
    Ok(Some(EdacCounter {
        entity: mc.to_string(),
        label: Some("not attributed to a DIMM".into()),
        corrected,
        uncorrected,
    }))
}

/// `mc0`, `dimm12`: the prefix followed by digits only.
fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A counter file's value: a decimal number.
fn parse_count(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse()
        .map_err(|_| format!("expected a count, found {t:?}"))
}

/// Why `/proc/meminfo` gave no `MemTotal`; each names the field.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum MemTotalError {
    #[error("no MemTotal line")]
    NoLine,
    #[error("MemTotal: no value")]
    NoValue,
    #[error("MemTotal: expected a number, found {0:?}")]
    NotANumber(String),
    /// The word after the number, if any, where the kernel writes `kB`.
    #[error("MemTotal: expected the unit kB, found {0:?}")]
    WrongUnit(Option<String>),
}

/// `MemTotal:       2113225816 kB` from `/proc/meminfo`, in KiB.
pub fn parse_mem_total(meminfo: &str) -> Result<u64, MemTotalError> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .ok_or(MemTotalError::NoLine)?;
    let mut words = line.split_whitespace();
    let value = words.next().ok_or(MemTotalError::NoValue)?;
    let kib: u64 = value
        .parse()
        .map_err(|_| MemTotalError::NotANumber(value.to_string()))?;
    match words.next() {
        Some("kB") => Ok(kib),
        other => Err(MemTotalError::WrongUnit(other.map(str::to_string))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mem_total_is_read_in_kib_among_the_other_lines() {
        let text = "MemTotal:       2113225816 kB\nMemFree:        2000000000 kB\n";
        assert_eq!(parse_mem_total(text), Ok(2_113_225_816));
        let later = "MemFree: 1 kB\nMemTotal: 42 kB\n";
        assert_eq!(parse_mem_total(later), Ok(42));
    }

    #[test]
    fn a_meminfo_without_mem_total_or_with_garbage_is_an_error_naming_the_field() {
        let error = |text| parse_mem_total(text).unwrap_err().to_string();
        assert_eq!(error("MemFree: 1 kB\n"), "no MemTotal line");
        assert_eq!(
            error("MemTotal: lots kB\n"),
            "MemTotal: expected a number, found \"lots\""
        );
        assert_eq!(
            error("MemTotal: 12 MB\n"),
            "MemTotal: expected the unit kB, found Some(\"MB\")"
        );
    }

    #[test]
    fn counters_are_decimal_with_a_newline() {
        assert_eq!(parse_count("17\n"), Ok(17));
        assert!(parse_count("-1").is_err());
        assert!(parse_count("").is_err());
    }

    #[test]
    fn only_numbered_entries_are_controllers_or_dimms() {
        assert!(is_numbered("mc0", "mc"));
        assert!(is_numbered("dimm15", "dimm"));
        assert!(!is_numbered("mc", "mc"));
        assert!(!is_numbered("mc_name", "mc"));
        assert!(!is_numbered("power", "mc"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn meminfo_parsing_never_panics(text in "\\PC{0,200}") {
            let _ = parse_mem_total(&text);
            let _ = parse_count(&text);
        }

        #[test]
        fn any_mem_total_line_round_trips(kib in any::<u64>(), pad in 1usize..12) {
            let text = format!("MemFree: 3 kB\nMemTotal:{}{kib} kB\n", " ".repeat(pad));
            prop_assert_eq!(parse_mem_total(&text), Ok(kib));
        }
    }
}
