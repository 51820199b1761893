//! Host hardware errors in the kernel log: machine checks, EDAC lines,
//! block-layer I/O errors, filesystem errors, NFS servers not responding.
//!
//! They are matched in the XID check's one pass over the kernel log (same
//! cursor, same records), folded into a since-boot tally per (code, entity)
//! kept in the XID state, and judged with the XIDs' windows.

use super::kmsg::KmsgRecord;
use super::tally::{self, clip, MAX_TEXT};
use crate::check::Event;
use crate::finding::Finding;
use lemonade_config::{Action, KernelLogSettings, Severity, WindowsBySeverity};
use serde::{Deserialize, Serialize};

pub const MCE_HARDWARE_ERROR: &str = "MCE_HARDWARE_ERROR";
pub const MCE_EVENTS_LOGGED: &str = "MCE_EVENTS_LOGGED";
pub const EDAC_CE_LOGGED: &str = "EDAC_CE_LOGGED";
pub const EDAC_UE_LOGGED: &str = "EDAC_UE_LOGGED";
pub const BLOCK_IO_ERROR: &str = "BLOCK_IO_ERROR";
pub const FS_ERROR: &str = "FS_ERROR";
pub const NFS_NOT_RESPONDING: &str = "NFS_NOT_RESPONDING";

/// Tallies kept at most (the oldest go first).
const MAX_TALLIES: usize = 256;

/// What one kernel log line says, if anything we watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// A problem: (code, entity).
    Problem(&'static str, String),
    /// `nfs: server X OK`: the server answers again.
    NfsBack(String),
}

/// Cheap test run on every record before [`classify`]: most lines hold none
/// of these byte strings, so the first pass over a long log stays fast.
pub struct Prefilter {
    needles: Vec<memchr::memmem::Finder<'static>>,
}

impl Default for Prefilter {
    fn default() -> Self {
        let words: [&'static [u8]; 6] = [
            b"rror",
            b"EDAC",
            b"nfs: server",
            b"Machine check",
            b"Corruption",
            b"hutting down",
        ];
        Prefilter {
            needles: words
                .iter()
                .map(|w| memchr::memmem::Finder::new(*w))
                .collect(),
        }
    }
}

impl Prefilter {
    pub fn might_match(&self, message: &[u8]) -> bool {
        self.needles.iter().any(|n| n.find(message).is_some())
    }
}

/// [`Prefilter::might_match`] with a prefilter of its own (tests).
pub fn might_match(message: &[u8]) -> bool {
    Prefilter::default().might_match(message)
}

/// True when [`classify`] reads the raw message as one we watch: the gather
/// keeps only those, not every line with "error" in it.
pub fn matches(message: &[u8]) -> bool {
    classify(&String::from_utf8_lossy(message)).is_some()
}

/// Reads one kernel log message (without the kmsg header).
pub fn classify(message: &str) -> Option<Match> {
    let m = message.trim();
    // The kernel prints this one with the `[Hardware Error]` prefix too
    // (`mce: [Hardware Error]: Machine check events logged`): test it first.
    if m.contains("Machine check events logged") {
        return Some(Match::Problem(MCE_EVENTS_LOGGED, "node".into()));
    }
    if m.contains("mce: [Hardware Error]") {
        return Some(Match::Problem(MCE_HARDWARE_ERROR, "node".into()));
    }
    if let Some(rest) = m.strip_prefix("nfs: server ") {
        let server = rest.split_whitespace().next()?.to_string();
        let after = rest[server.len()..].trim_start();
        if after.starts_with("not responding") {
            return Some(Match::Problem(NFS_NOT_RESPONDING, server));
        }
        if after.starts_with("OK") {
            return Some(Match::NfsBack(server));
        }
        return None;
    }
    if let Some(found) = edac(m) {
        return Some(found);
    }
    for marker in ["I/O error, dev ", "Buffer I/O error on dev "] {
        if let Some(i) = m.find(marker) {
            let device = device_word(&m[i + marker.len()..])?;
            let ignored = ["sr", "loop", "fd", "ram", "zram"]
                .iter()
                .any(|p| device.starts_with(p));
            return (!ignored).then_some(Match::Problem(BLOCK_IO_ERROR, device));
        }
    }
    fs_error(m)
}

/// `EDAC MC0: 1 CE memory read error on ...` (also `EDAC skx MC0: ...`).
fn edac(m: &str) -> Option<Match> {
    let rest = m.strip_prefix("EDAC ")?;
    let (head, tail) = rest.split_once(": ")?;
    let mc = head.split_whitespace().last()?;
    let number = mc.strip_prefix("MC")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut words = tail.split_whitespace();
    words.next()?.parse::<u64>().ok()?;
    let code = match words.next()? {
        "CE" => EDAC_CE_LOGGED,
        "UE" => EDAC_UE_LOGGED,
        _ => return None,
    };
    Some(Match::Problem(code, format!("mc{number}")))
}

/// `EXT4-fs error (device md126): ...`, `BTRFS error (device sda1): ...`,
/// `XFS (md126): Corruption ...` / `... metadata I/O error ...` / `... Shutting down filesystem`.
fn fs_error(m: &str) -> Option<Match> {
    for prefix in [
        "EXT4-fs error (device ",
        "BTRFS error (device ",
        "BTRFS critical (device ",
    ] {
        if let Some(rest) = m.strip_prefix(prefix) {
            let device = rest.split([')', ':']).next()?.trim();
            return (!device.is_empty()).then(|| Match::Problem(FS_ERROR, device.to_string()));
        }
    }
    let rest = m.strip_prefix("XFS (")?;
    let (device, text) = rest.split_once("):")?;
    let bad =
        text.contains("error") || text.contains("Corruption") || text.contains("hutting down");
    (bad && !device.is_empty()).then(|| Match::Problem(FS_ERROR, device.to_string()))
}

/// The device name before the next `,` or space.
fn device_word(text: &str) -> Option<String> {
    let word = text.split([',', ' ']).next()?.trim();
    (!word.is_empty()).then(|| word.to_string())
}

/// One (code, entity) since boot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub code: String,
    pub entity: String,
    pub count: u64,
    pub first_at: i64,
    pub last_at: i64,
    pub text: String,
}

/// The severity config gives a code.
pub fn severity_of(code: &str, s: &KernelLogSettings) -> Severity {
    match code {
        MCE_HARDWARE_ERROR => s.mce_severity,
        MCE_EVENTS_LOGGED => s.mce_logged_severity,
        EDAC_CE_LOGGED => s.edac_ce_severity,
        EDAC_UE_LOGGED => s.edac_ue_severity,
        BLOCK_IO_ERROR => s.io_error_severity,
        FS_ERROR => s.fs_error_severity,
        NFS_NOT_RESPONDING => s.nfs_severity,
        _ => Severity::Warning,
    }
}

/// Folds one record into the tallies. Returns the event to record the first
/// time a (code, entity) shows up since boot: a disk that logs an I/O error
/// per sector must not write thousands of events a run. NFS servers that
/// stop answering are the server's fault, not the node's: no event.
pub fn fold(
    tallies: &mut Vec<Tally>,
    record: &KmsgRecord,
    at: i64,
    boot_id: &str,
    settings: &KernelLogSettings,
) -> Option<Event> {
    match classify(&record.message)? {
        Match::NfsBack(server) => {
            tallies.retain(|t| !(t.code == NFS_NOT_RESPONDING && t.entity == server));
            None
        }
        Match::Problem(code, entity) => {
            let text = clip(record.message.trim(), MAX_TEXT);
            match tallies
                .iter_mut()
                .find(|t| t.code == code && t.entity == entity)
            {
                Some(t) => {
                    t.count += 1;
                    t.last_at = t.last_at.max(at);
                    t.text = text;
                    return None;
                }
                None => tallies.push(Tally {
                    code: code.to_string(),
                    entity: entity.clone(),
                    count: 1,
                    first_at: at,
                    last_at: at,
                    text: text.clone(),
                }),
            }
            if tallies.len() > MAX_TALLIES {
                tallies.sort_by_key(|t| std::cmp::Reverse(t.last_at));
                tallies.truncate(MAX_TALLIES);
            }
            if code == NFS_NOT_RESPONDING {
                return None;
            }
            Some(Event {
                entity,
                code: code.to_string(),
                severity: severity_of(code, settings),
                occurred_at: at,
                boot_id: boot_id.to_string(),
                seq: record.seq as i64,
                detail: text,
            })
        }
    }
}

/// Findings for the tallies that still count: `down` until reboot, the others
/// for their severity's window.
pub fn findings(
    tallies: &[Tally],
    settings: &KernelLogSettings,
    windows: &WindowsBySeverity,
    now: i64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in tallies {
        let severity = severity_of(&t.code, settings);
        if !tally::still_counts(severity, t.last_at, windows, now) {
            continue;
        }
        let action = if t.code == NFS_NOT_RESPONDING {
            Action::Investigate
        } else {
            Action::Repair
        };
        out.push(tally::finding(
            &t.entity, &t.code, severity, action, t.count, &t.text,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn problem(line: &str) -> Option<(&'static str, String)> {
        match classify(line) {
            Some(Match::Problem(code, entity)) => Some((code, entity)),
            _ => None,
        }
    }

    #[test]
    fn each_kind_of_line_has_its_code_and_entity() {
        let cases = [
            ("mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 4: be00000000800400", MCE_HARDWARE_ERROR, "node"),
            ("mce: [Hardware Error]: Machine check events logged", MCE_EVENTS_LOGGED, "node"),
            ("EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1a2b3 offset:0x0 grain:32)", EDAC_CE_LOGGED, "mc0"),
            ("EDAC skx MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#0_DIMM#0", EDAC_UE_LOGGED, "mc1"),
            ("blk_update_request: I/O error, dev nvme3n1, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0", BLOCK_IO_ERROR, "nvme3n1"),
            ("I/O error, dev sda, sector 17 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2", BLOCK_IO_ERROR, "sda"),
            ("Buffer I/O error on dev md126, logical block 0, async page read", BLOCK_IO_ERROR, "md126"),
            ("EXT4-fs error (device nvme0n1p2): ext4_find_entry:1683: inode #2: comm ls: reading directory lblock 0", FS_ERROR, "nvme0n1p2"),
            ("XFS (md126): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x130/0x150. Shutting down filesystem.", FS_ERROR, "md126"),
            ("XFS (md126): metadata I/O error in \"xfs_imap_to_bp+0x5d/0x80\" at daddr 0x2a block 0x2a len 32 error 5", FS_ERROR, "md126"),
            ("BTRFS error (device sdb1): bdev /dev/sdb1 errs: wr 1, rd 0, flush 0", FS_ERROR, "sdb1"),
            ("nfs: server nfs01.cluster not responding, still trying", NFS_NOT_RESPONDING, "nfs01.cluster"),
            ("nfs: server 10.1.0.6 not responding, timed out", NFS_NOT_RESPONDING, "10.1.0.6"),
        ];
        for (line, code, entity) in cases {
            assert!(might_match(line.as_bytes()), "{line}");
            assert_eq!(problem(line), Some((code, entity.to_string())), "{line}");
        }
    }

    #[test]
    fn harmless_lines_and_virtual_devices_are_not_problems() {
        for line in [
            "I/O error, dev sr0, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2",
            "I/O error, dev loop3, sector 0 op 0x0:(READ)",
            "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0",
            "EDAC sbridge: Seeking for: PCI ID 8086:2fa0",
            "XFS (md126): Mounting V5 Filesystem",
            "XFS (md126): Ending clean mount",
            "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.",
            "nfs: server nfs01.cluster is slow",
            "",
        ] {
            assert_eq!(problem(line), None, "{line}");
        }
        assert_eq!(
            classify("nfs: server nfs01.cluster OK"),
            Some(Match::NfsBack("nfs01.cluster".into()))
        );
    }

    #[test]
    fn an_nfs_server_that_answers_again_clears_its_tally() {
        let record = |seq: u64, message: &str| KmsgRecord {
            seq,
            ts_usec: 0,
            line: None,
            wall_s: None,
            message: message.into(),
        };
        let s = KernelLogSettings::default();
        let mut tallies = Vec::new();
        let event = fold(
            &mut tallies,
            &record(1, "nfs: server nfs02 not responding, still trying"),
            10,
            "b",
            &s,
        );
        assert_eq!(
            event, None,
            "an NFS server's silence is no event of the node"
        );
        fold(
            &mut tallies,
            &record(2, "nfs: server nfs02 not responding, still trying"),
            20,
            "b",
            &s,
        );
        assert_eq!(tallies[0].count, 2);
        fold(
            &mut tallies,
            &record(3, "nfs: server nfs02 OK"),
            30,
            "b",
            &s,
        );
        assert!(tallies.is_empty());
    }

    #[test]
    fn matches_count_for_their_severity_window_and_down_until_reboot() {
        let tally = |code: &str, last_at| Tally {
            code: code.into(),
            entity: "node".into(),
            count: 1,
            first_at: last_at,
            last_at,
            text: String::new(),
        };
        let windows = WindowsBySeverity {
            warning: 100,
            drain: 1000,
        };
        let s = KernelLogSettings::default();
        let tallies = [
            tally(MCE_EVENTS_LOGGED, 0),
            tally(MCE_HARDWARE_ERROR, 0),
            tally(EDAC_UE_LOGGED, 0),
        ];
        let codes = |now| {
            findings(&tallies, &s, &windows, now)
                .into_iter()
                .map(|f| f.code)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            codes(50),
            [MCE_EVENTS_LOGGED, MCE_HARDWARE_ERROR, EDAC_UE_LOGGED]
        );
        assert_eq!(codes(500), [MCE_HARDWARE_ERROR, EDAC_UE_LOGGED]);
        assert_eq!(codes(5000), [EDAC_UE_LOGGED]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn classifying_never_panics(text in "\\PC{0,120}") {
            let _ = might_match(text.as_bytes());
            let _ = classify(&text);
        }

        #[test]
        fn every_io_error_line_names_its_device(dev in "(nvme[0-9]n[0-9]|sd[a-z]|md12[0-9])", sector in any::<u64>()) {
            let line = format!("I/O error, dev {dev}, sector {sector} op 0x1:(WRITE) flags 0x0");
            prop_assert!(might_match(line.as_bytes()));
            prop_assert_eq!(classify(&line), Some(Match::Problem(BLOCK_IO_ERROR, dev)));
        }
    }
}
