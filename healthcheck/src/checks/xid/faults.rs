//! Kernel and fabric faults in the kernel log: NVSwitch SXids, `[Hardware
//! Error]` CPER records by severity, hung tasks, soft lockups, GPUDirect RDMA
//! peer-memory errors, and the driver's "fallen off the bus" and GSP timeout
//! lines that come without an XID.
//!
//! Matched in the XID check's one pass (same cursor, same records), folded
//! into a since-boot tally per (code, entity) kept in the XID state, and
//! judged with the XIDs' windows. Corrected CPER records count only when
//! enough of them come inside a window.

use super::gpus::gpu_of;
use super::kmsg::KmsgRecord;
use super::parse::normalize_bus;
use super::sxid;
use super::tally::{self, clip, MAX_TEXT};
use crate::check::Event;
use crate::finding::Finding;
use lemonade_config::{Action, KernelFaultSettings, Severity, WindowsBySeverity};
use serde::{Deserialize, Serialize};

pub const CPER_FATAL: &str = "CPER_FATAL";
pub const CPER_RECOVERABLE: &str = "CPER_RECOVERABLE";
pub const CPER_CORRECTED: &str = "CPER_CORRECTED";
pub const HUNG_TASK: &str = "HUNG_TASK";
pub const SOFT_LOCKUP: &str = "SOFT_LOCKUP";
pub const PEERMEM_ERROR: &str = "PEERMEM_ERROR";
pub const GPU_FELL_OFF_BUS: &str = "GPU_FELL_OFF_BUS";
pub const GSP_TIMEOUT: &str = "GSP_TIMEOUT";
/// SXid codes are `SXID_<number>`.
pub const SXID_PREFIX: &str = "SXID_";

/// Tallies kept at most (the oldest go first).
const MAX_TALLIES: usize = 256;

/// What one line says: the finding's code and entity, and for SXids the
/// driver's word on fatality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: String,
    pub entity: String,
    pub fatal: Option<bool>,
}

impl Fault {
    fn of(code: &str, entity: impl Into<String>) -> Fault {
        Fault {
            code: code.to_string(),
            entity: entity.into(),
            fatal: None,
        }
    }
}

/// Cheap test run on every record before [`classify`].
pub struct Prefilter {
    needles: Vec<memchr::memmem::Finder<'static>>,
}

impl Default for Prefilter {
    fn default() -> Self {
        let words: [&'static [u8]; 7] = [
            b"SXid (",
            b"[Hardware Error]",
            b"blocked for more than",
            b"soft lockup",
            b"peer",
            b"fallen off the bus",
            b"GSP",
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

/// Reads one kernel log message (without its time stamp); GPU entities
/// are named from `gpus` (sysfs bus ids in order).
pub fn classify(message: &str, gpus: &[String]) -> Option<Fault> {
    let m = message.trim();
    if let Some(s) = sxid::parse(m) {
        return Some(Fault {
            code: format!("{SXID_PREFIX}{}", s.sxid),
            entity: s.switch,
            fatal: s.fatal,
        });
    }
    cper(m)
        .or_else(|| hung_task(m))
        .or_else(|| soft_lockup(m))
        .or_else(|| peermem(m))
        .or_else(|| nvrm(m, gpus))
}

/// `{1}[Hardware Error]: event severity: corrected` (GHES; not the `mce:` lines).
fn cper(m: &str) -> Option<Fault> {
    let at = m.find("[Hardware Error]:")?;
    if m[..at].ends_with("mce: ") {
        return None;
    }
    let severity = m[at..].split_once("event severity: ")?.1.trim();
    let code = match severity {
        "fatal" => CPER_FATAL,
        "recoverable" => CPER_RECOVERABLE,
        "corrected" => CPER_CORRECTED,
        _ => return None,
    };
    Some(Fault::of(code, "node"))
}

/// `INFO: task kworker/u16:3:4567 blocked for more than 122 seconds.`: entity is the command.
fn hung_task(m: &str) -> Option<Fault> {
    let (head, _) = m.split_once(" blocked for more than ")?;
    let task = head.rsplit_once("task ")?.1;
    let (command, pid) = task.rsplit_once(':')?;
    (!command.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| Fault::of(HUNG_TASK, command))
}

/// `watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python3:2257218]`.
fn soft_lockup(m: &str) -> Option<Fault> {
    let rest = m.split_once("soft lockup - CPU#")?.1;
    let cpu: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!cpu.is_empty()).then(|| Fault::of(SOFT_LOCKUP, format!("cpu{cpu}")))
}

/// `nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, ...`,
/// `nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)`,
/// `nv_peer_mem: ... failed`. The module's unsigned-module taint note is no error.
fn peermem(m: &str) -> Option<Fault> {
    let ours = ["nvidia-peermem", "nvidia_peermem", "nv_peer_mem"]
        .iter()
        .any(|name| m.starts_with(name));
    if !ours || m.contains("module verification failed") {
        return None;
    }
    let bad = [
        "ERROR",
        "error",
        "failed",
        "Unknown symbol",
        "disagrees about version",
    ]
    .iter()
    .any(|w| m.contains(w));
    bad.then(|| Fault::of(PEERMEM_ERROR, "node"))
}

/// `NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.` and the GSP RPC
/// timeouts (`NVRM: Timeout waiting for RPC from GPU0 GSP!`, `... GSP RM
/// heartbeat timed out`); `NVRM: Xid` lines are the XID catalog's.
fn nvrm(m: &str, gpus: &[String]) -> Option<Fault> {
    let rest = m.strip_prefix("NVRM: ")?;
    if rest.starts_with("Xid") {
        return None;
    }
    if rest.contains("fallen off the bus") {
        let bus = rest
            .strip_prefix("GPU ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|word| normalize_bus(word.trim_end_matches(':')));
        let entity = bus.map_or_else(|| "node".to_string(), |b| gpu_of(&b, gpus).entity);
        return Some(Fault::of(GPU_FELL_OFF_BUS, entity));
    }
    let gsp = (rest.contains("Timeout waiting for RPC from") && rest.contains("GSP"))
        || rest.contains("GSP RM heartbeat timed out");
    gsp.then(|| Fault::of(GSP_TIMEOUT, "node"))
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatal: Option<bool>,
    /// Corrected CPER records: the latest times, as many as the count needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<i64>,
    /// When `recent` last reached the count inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_at: Option<i64>,
}

/// Severity and action the settings give a tally's code.
pub fn rule_of(code: &str, fatal: Option<bool>, s: &KernelFaultSettings) -> (Severity, Action) {
    if let Some(number) = code.strip_prefix(SXID_PREFIX).and_then(|n| n.parse().ok()) {
        return sxid::rule(number, fatal, s);
    }
    match code {
        CPER_FATAL => (s.cper_fatal_severity, Action::Repair),
        CPER_RECOVERABLE => (s.cper_recoverable_severity, Action::Repair),
        CPER_CORRECTED => (s.cper_corrected_severity, Action::Investigate),
        HUNG_TASK => (s.hung_task_severity, Action::Investigate),
        SOFT_LOCKUP => (s.soft_lockup_severity, Action::Investigate),
        PEERMEM_ERROR => (s.peermem_severity, Action::Investigate),
        GPU_FELL_OFF_BUS => (s.fell_off_bus_severity, Action::Reboot),
        GSP_TIMEOUT => (s.gsp_timeout_severity, Action::ResetGpu),
        _ => (Severity::Warning, Action::Investigate),
    }
}

/// Folds one record into the tallies. Returns the event to record the first
/// time a (code, entity) shows up since boot, so that a task hung for hours
/// or a switch that repeats its SXid writes one event, not thousands.
pub fn fold(
    tallies: &mut Vec<Tally>,
    fault: Fault,
    record: &KmsgRecord,
    at: i64,
    boot_id: &str,
    s: &KernelFaultSettings,
) -> Option<Event> {
    let line = record.message.trim();
    let index = tallies
        .iter()
        .position(|t| t.code == fault.code && t.entity == fault.entity);
    let first = index.is_none();
    let index = index.unwrap_or_else(|| {
        tallies.push(Tally {
            code: fault.code.clone(),
            entity: fault.entity.clone(),
            count: 0,
            first_at: at,
            last_at: at,
            text: String::new(),
            fatal: fault.fatal,
            recent: Vec::new(),
            reached_at: None,
        });
        tallies.len() - 1
    });
    let t = &mut tallies[index];
    t.count += 1;
    t.last_at = t.last_at.max(at);
    // A line that repeats (a task hung for hours) costs no new text.
    if t.text != line {
        t.text = clip(line, MAX_TEXT);
    }
    let detail = first.then(|| t.text.clone());
    t.fatal = fault.fatal.or(t.fatal);
    if t.code == CPER_CORRECTED {
        count_in_window(t, at, s);
    }
    if tallies.len() > MAX_TALLIES {
        tallies.sort_by_key(|t| std::cmp::Reverse(t.last_at));
        tallies.truncate(MAX_TALLIES);
    }
    let detail = detail?;
    Some(Event {
        severity: rule_of(&fault.code, fault.fatal, s).0,
        entity: fault.entity,
        code: fault.code,
        occurred_at: at,
        boot_id: boot_id.to_string(),
        seq: record.seq as i64,
        detail,
    })
}

fn count_in_window(t: &mut Tally, at: i64, s: &KernelFaultSettings) {
    let needed = s.cper_corrected_count.clamp(1, 10_000) as usize;
    t.recent.push(at);
    if t.recent.len() > needed {
        t.recent.drain(..t.recent.len() - needed);
    }
    if t.recent.len() >= needed && at - t.recent[0] <= s.cper_corrected_window_s as i64 {
        t.reached_at = Some(at);
    }
}

/// Findings for the tallies that still count: `down` until reboot, the others
/// for their severity's window from the last line (corrected CPER records:
/// from when their count was last reached). A GPU that fell off the bus with
/// an XID 79 already has its finding (`xid79_entities`).
pub fn findings(
    tallies: &[Tally],
    s: &KernelFaultSettings,
    windows: &WindowsBySeverity,
    xid79_entities: &[String],
    now: i64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in tallies {
        let (severity, action) = rule_of(&t.code, t.fatal, s);
        let since = if t.code == CPER_CORRECTED {
            match t.reached_at {
                Some(at) => at,
                None => continue,
            }
        } else {
            t.last_at
        };
        let told = t.code == GPU_FELL_OFF_BUS && xid79_entities.contains(&t.entity);
        if !tally::still_counts(severity, since, windows, now) || told {
            continue;
        }
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

    fn code_entity(line: &str) -> Option<(String, String)> {
        classify(line, &["0000:91:00.0".to_string()]).map(|f| (f.code, f.entity))
    }

    #[test]
    fn each_kind_of_fault_line_has_its_code_and_entity() {
        let cases = [
            ("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)", "SXID_12028", "nvswitch3"),
            ("{1}[Hardware Error]: event severity: fatal", CPER_FATAL, "node"),
            ("{2}[Hardware Error]: event severity: recoverable", CPER_RECOVERABLE, "node"),
            ("[Hardware Error]: event severity: corrected", CPER_CORRECTED, "node"),
            ("INFO: task kworker/u16:3:4567 blocked for more than 122 seconds.", HUNG_TASK, "kworker/u16:3"),
            ("INFO: task python3:2257218 blocked for more than 241 seconds.", HUNG_TASK, "python3"),
            ("watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python3:2257218]", SOFT_LOCKUP, "cpu12"),
            ("nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing", PEERMEM_ERROR, "node"),
            ("nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)", PEERMEM_ERROR, "node"),
            ("NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.", GPU_FELL_OFF_BUS, "gpu0"),
            ("NVRM: Timeout waiting for RPC from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x8).", GSP_TIMEOUT, "node"),
        ];
        let prefilter = Prefilter::default();
        for (line, code, entity) in cases {
            assert!(prefilter.might_match(line.as_bytes()), "{line}");
            assert_eq!(
                code_entity(line),
                Some((code.to_string(), entity.to_string())),
                "{line}"
            );
        }
    }

    #[test]
    fn harmless_lines_are_not_faults() {
        for line in [
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
            "{1}[Hardware Error]:  Error 0, type: corrected",
            "mce: [Hardware Error]: Machine check events logged",
            "nvidia_peermem: module verification failed: signature and/or required key missing - tainting kernel",
            "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
            "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.",
            "",
        ] {
            assert_eq!(code_entity(line), None, "{line}");
        }
    }

    fn record(seq: u64, message: &str) -> KmsgRecord {
        KmsgRecord {
            seq,
            ts_usec: 0,
            line: None,
            wall_s: None,
            message: message.into(),
        }
    }

    #[test]
    fn corrected_cper_records_count_only_when_enough_come_inside_the_window() {
        let s = KernelFaultSettings {
            cper_corrected_count: 3,
            cper_corrected_window_s: 100,
            ..Default::default()
        };
        let windows = WindowsBySeverity::default();
        let line = "{1}[Hardware Error]: event severity: corrected";
        let mut tallies = Vec::new();
        let feed = |at: i64, tallies: &mut Vec<Tally>| {
            let fault = classify(line, &[]).unwrap();
            fold(tallies, fault, &record(at as u64, line), at, "b", &s)
        };
        assert!(feed(0, &mut tallies).is_some(), "the first is an event");
        assert!(feed(200, &mut tallies).is_none(), "the rest are not");
        feed(250, &mut tallies);
        assert!(
            findings(&tallies, &s, &windows, &[], 260).is_empty(),
            "3 in 250 s"
        );
        feed(290, &mut tallies);
        let found = findings(&tallies, &s, &windows, &[], 300);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].code.as_str(), found[0].severity),
            (CPER_CORRECTED, Severity::Warning)
        );
        assert!(
            findings(&tallies, &s, &windows, &[], 290 + 3601).is_empty(),
            "the warning window passed"
        );
    }

    #[test]
    fn a_gpu_off_the_bus_with_an_xid_79_is_told_once() {
        let s = KernelFaultSettings::default();
        let line = "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.";
        let mut tallies = Vec::new();
        let fault = classify(line, &["0000:91:00.0".into()]).unwrap();
        fold(&mut tallies, fault, &record(1, line), 10, "b", &s);
        let windows = WindowsBySeverity::default();
        let alone = findings(&tallies, &s, &windows, &[], 1_000_000);
        assert_eq!(alone.len(), 1, "down until reboot");
        assert_eq!(alone[0].severity, Severity::Down);
        assert!(findings(&tallies, &s, &windows, &["gpu0".into()], 20).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn classifying_never_panics(text in "\\PC{0,120}") {
            let _ = Prefilter::default().might_match(text.as_bytes());
            let _ = classify(&text, &[]);
        }
    }
}
