//! The pure half of the XID check: new kernel log lines + the since-boot
//! history kept in the state + settings + now → findings, events, new state.
//!
//! The history is a tally per (bus id, XID), so it stays small however many
//! times an XID repeats. Severities are worked out from it on every run, so a
//! change of the catalog in the config applies to XIDs already seen.

use super::catalog::{self, Reading, Rule};
use super::faults;
use super::gpus::{gpu_at, gpu_of, Gpu};
use super::kernel_log;
use super::kmsg::{Cursor, KmsgRecord, ReadSummary};
use super::nvlink5::{self, Nvlink5};
use super::parse::{self, Nvrm, Recovery, XidLine};
use super::tally::{clip, MAX_TEXT};
use crate::check::Event;
use crate::finding::Finding;
use lemonade_config::{Severity, XidSettings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Code of an `NVRM: Xid` line that does not read as one.
pub const XID_PARSE_ERROR: &str = "XID_PARSE_ERROR";
/// An XID's finding code is this and the XID's number: `XID_79`.
pub const XID_PREFIX: &str = "XID_";
/// Code of lines of the kernel log source that are not kmsg records.
pub const KMSG_MALFORMED: &str = "KMSG_MALFORMED";
/// Code of kernel log records overwritten before this check could read them.
pub const KMSG_RECORDS_LOST: &str = "KMSG_RECORDS_LOST";

/// Tallies kept at most; past this the oldest that no longer matter go first.
const MAX_TALLIES: usize = 512;
/// Unreadable lines remembered at most.
const MAX_PROBLEMS: usize = 16;

/// Everything `gather` read.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub boot_id: String,
    /// Unix seconds of boot (`btime` in `/proc/stat`).
    pub btime: i64,
    /// The kernel log source as the node names it, for messages.
    pub source_name: String,
    /// The source's identity, keying the cursor: a new source starts over.
    pub source_key: String,
    /// NVIDIA display/3D functions in sysfs, in bus order.
    pub gpus: Vec<String>,
    /// Driver (`NVRM:`) lines after the cursor, in log order.
    pub records: Vec<KmsgRecord>,
    pub read: ReadSummary,
    /// True when this read went on from the previous state's boot and source.
    pub continued: bool,
}

/// The check's state between runs: cursor and since-boot history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XidState {
    pub boot_id: String,
    pub source: String,
    pub cursor: Option<Cursor>,
    /// Bus id → UUID, from `NVRM: GPU at` lines (printed once, at driver load).
    #[serde(default)]
    pub uuids: BTreeMap<String, String>,
    #[serde(default)]
    pub tallies: Vec<Tally>,
    #[serde(default)]
    pub problems: Vec<Problem>,
    /// Host hardware errors matched in the same pass, per (code, entity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_log: Vec<kernel_log::Tally>,
    /// Kernel and fabric faults (SXid, CPER, hung tasks, ...), per (code, entity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_faults: Vec<faults::Tally>,
}

/// One XID on one GPU since boot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub bus: String,
    pub xid: u32,
    pub count: u64,
    pub first_at: i64,
    pub last_at: i64,
    pub last_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    pub text: String,
    /// XID 154: the latest recovery action, which replaces earlier ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// XIDs 144–150: the worst decoded sub-code since boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink5: Option<Nvlink5>,
    /// Times of the latest occurrences, as many as repeat detection needs.
    #[serde(default)]
    pub recent: Vec<i64>,
    /// When the repeats last reached `repeat_count` inside `repeat_window_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<i64>,
}

/// A line the check could not read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub code: String,
    pub at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    pub message: String,
}

/// What one evaluation gives back.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    pub findings: Vec<Finding>,
    pub events: Vec<Event>,
    pub state: XidState,
}

/// Folds the new lines into the history and works out the findings.
pub fn evaluate(
    gathered: &Gathered,
    settings: &XidSettings,
    previous: XidState,
    now: i64,
) -> Evaluation {
    let mut state = if gathered.continued {
        previous
    } else {
        // A reboot (or another source) starts the history over.
        XidState::default()
    };
    state.boot_id = gathered.boot_id.clone();
    state.source = gathered.source_key.clone();
    state.cursor = gathered.read.cursor;

    let mut events = Vec::new();
    for record in &gathered.records {
        events.extend(fold_record(&mut state, gathered, record, settings));
    }
    state.problems.extend(malformed_lines(gathered, now));
    bound(&mut state, settings);

    let mut findings = findings(gathered, settings, &state, now);
    findings.extend(host_findings(gathered, settings, &state, now));
    if gathered.read.lost > 0 {
        findings.push(Finding::unknown(
            "xid",
            "node",
            KMSG_RECORDS_LOST,
            format!(
                "{}: {} kernel log records were overwritten before they could be read; XIDs among them are missed",
                gathered.source_name, gathered.read.lost
            ),
        ));
    }
    Evaluation {
        findings,
        events,
        state,
    }
}

/// One record into the state: a GPU's UUID, an XID (an event and its
/// tally), an unreadable XID line, or a host error for the kernel log tallies.
fn fold_record(
    state: &mut XidState,
    gathered: &Gathered,
    record: &KmsgRecord,
    settings: &XidSettings,
) -> Vec<Event> {
    let at = record
        .wall_s
        .unwrap_or(gathered.btime + (record.ts_usec / 1_000_000) as i64);
    match parse::parse(&record.message) {
        Nvrm::GpuAt { bus, uuid } => {
            state.uuids.insert(bus, uuid);
            Vec::new()
        }
        Nvrm::Xid(x) => {
            let rule = catalog::rule_of(
                x.xid,
                reading_of(x.recovery, x.nvlink5.as_deref()),
                settings,
            );
            let event = Event {
                entity: gpu_of(&x.bus, &gathered.gpus).entity,
                code: code_of(x.xid),
                severity: rule.severity,
                occurred_at: at,
                boot_id: gathered.boot_id.clone(),
                seq: record.seq as i64,
                detail: clip(record.message.trim(), MAX_TEXT),
            };
            fold(&mut state.tallies, x, at, record.seq, settings);
            vec![event]
        }
        Nvrm::BadXid { bus, reason } => {
            state.problems.push(Problem {
                code: XID_PARSE_ERROR.to_string(),
                at,
                message: format!(
                    "{} {}: unreadable XID line ({reason}): `{}`",
                    gathered.source_name,
                    place(record),
                    clip(record.message.trim(), 160)
                ),
                bus,
            });
            Vec::new()
        }
        Nvrm::Other => fold_host_line(state, gathered, record, at, settings)
            .into_iter()
            .collect(),
    }
}

/// A line that is no XID: a kernel or fabric fault, else a host hardware error.
fn fold_host_line(
    state: &mut XidState,
    gathered: &Gathered,
    record: &KmsgRecord,
    at: i64,
    settings: &XidSettings,
) -> Option<Event> {
    let faults_on = settings.kernel_faults.enabled;
    if let Some(fault) = faults_on
        .then(|| faults::classify(&record.message, &gathered.gpus))
        .flatten()
    {
        // The driver prints this after its XID 79 line, which says it already.
        let told = fault.code == faults::GPU_FELL_OFF_BUS
            && xid79_entities(state, gathered).contains(&fault.entity);
        if told {
            return None;
        }
        return faults::fold(
            &mut state.kernel_faults,
            fault,
            record,
            at,
            &gathered.boot_id,
            &settings.kernel_faults,
        );
    }
    if !settings.kernel_log.enabled {
        return None;
    }
    kernel_log::fold(
        &mut state.kernel_log,
        record,
        at,
        &gathered.boot_id,
        &settings.kernel_log,
    )
}

/// The host's findings from the same pass: hardware errors, then kernel and
/// fabric faults.
fn host_findings(g: &Gathered, s: &XidSettings, state: &XidState, now: i64) -> Vec<Finding> {
    let mut out = Vec::new();
    if s.kernel_log.enabled {
        out.extend(kernel_log::findings(
            &state.kernel_log,
            &s.kernel_log,
            &s.window_s,
            now,
        ));
    }
    if s.kernel_faults.enabled {
        out.extend(faults::findings(
            &state.kernel_faults,
            &s.kernel_faults,
            &s.window_s,
            &xid79_entities(state, g),
            now,
        ));
    }
    out
}

/// The GPUs with an XID 79 ("fallen off the bus") since boot.
fn xid79_entities(state: &XidState, g: &Gathered) -> Vec<String> {
    state
        .tallies
        .iter()
        .filter(|t| t.xid == 79)
        .map(|t| gpu_of(&t.bus, &g.gpus).entity)
        .collect()
}

/// Lines of the source that are not kmsg records: the first, and how many more.
fn malformed_lines(gathered: &Gathered, now: i64) -> Option<Problem> {
    let first = gathered.read.bad.first()?;
    let more = gathered.read.bad_count.saturating_sub(1);
    Some(Problem {
        code: KMSG_MALFORMED.to_string(),
        at: now,
        bus: None,
        message: format!(
            "{} line {}: not a kernel log line ({}): `{}`{}",
            gathered.source_name,
            first.line,
            first.reason,
            first.text,
            if more > 0 {
                format!("; {more} more such lines")
            } else {
                String::new()
            }
        ),
    })
}

fn code_of(xid: u32) -> String {
    format!("{XID_PREFIX}{xid}")
}

fn place(record: &KmsgRecord) -> String {
    match record.line {
        Some(line) => format!("line {line} (seq {})", record.seq),
        None => format!("seq {}", record.seq),
    }
}

fn reading_of(recovery: Option<Recovery>, nvlink5: Option<&Nvlink5>) -> Reading<'_> {
    Reading { recovery, nvlink5 }
}

fn fold(tallies: &mut Vec<Tally>, x: XidLine, at: i64, seq: u64, s: &XidSettings) {
    let index = match tallies
        .iter()
        .position(|t| t.bus == x.bus && t.xid == x.xid)
    {
        Some(i) => i,
        None => {
            tallies.push(Tally {
                bus: x.bus.clone(),
                xid: x.xid,
                count: 0,
                first_at: at,
                last_at: at,
                last_seq: seq,
                gpu_instance: None,
                pid: None,
                process: None,
                text: String::new(),
                recovery: None,
                nvlink5: None,
                recent: Vec::new(),
                escalated_at: None,
            });
            tallies.len() - 1
        }
    };
    let t = &mut tallies[index];
    t.count += 1;
    t.last_at = t.last_at.max(at);
    t.last_seq = seq;
    t.gpu_instance = x.gpu_instance;
    t.pid = x.pid;
    t.process = x.process;
    t.text = clip(&x.text, MAX_TEXT);
    t.recovery = x.recovery;
    t.nvlink5 = nvlink5::worse(t.nvlink5.take(), x.nvlink5.map(|d| *d));
    t.recent.push(at);
    let kept = times_needed(t.xid, s);
    if t.recent.len() > kept {
        t.recent.drain(..t.recent.len() - kept);
    }
    let needed = s.repeat_count.clamp(1, 1000) as usize;
    if s.repeat_count > 0 && s.repeat_xids.contains(&t.xid) && t.recent.len() >= needed {
        let oldest = t.recent[t.recent.len() - needed];
        if at - oldest <= s.repeat_window_s as i64 {
            t.escalated_at = Some(at);
        }
    }
}

/// Keeps the history bounded: `down` XIDs must outlive everything else, so
/// the oldest of the rest go first.
fn bound(state: &mut XidState, s: &XidSettings) {
    if state.tallies.len() > MAX_TALLIES {
        let mut order: Vec<usize> = (0..state.tallies.len()).collect();
        order.sort_by_key(|&i| {
            let t = &state.tallies[i];
            let down = catalog::rule_of(t.xid, reading_of(t.recovery, t.nvlink5.as_ref()), s)
                .severity
                == Severity::Down;
            (down, t.last_at)
        });
        let mut keep = vec![true; state.tallies.len()];
        for &i in &order[..state.tallies.len() - MAX_TALLIES] {
            keep[i] = false;
        }
        let mut kept = keep.into_iter();
        state.tallies.retain(|_| kept.next().unwrap_or(true));
    }
    if state.problems.len() > MAX_PROBLEMS {
        let excess = state.problems.len() - MAX_PROBLEMS;
        state.problems.drain(..excess);
    }
}

/// After a GPU reset that left the GPU's own checks clean (see
/// `crate::repair`), the XIDs seen on it up to `at` are history: a `down`
/// XID holds its GPU until a reboot or such a reset, not beyond.
pub fn forget_before_reset(state: &mut XidState, pci: &str, at: i64) {
    let bus = parse::normalize_bus(pci).unwrap_or_else(|| pci.to_ascii_lowercase());
    state.tallies.retain(|t| !(t.bus == bus && t.last_at <= at));
}

/// Why an XID counts now.
enum Why {
    UntilReboot,
    Window(u64),
    Repeated,
    /// `[[checks.xid.rule]]` number `.0` reached its count.
    SiteRule(usize),
}

/// The severity a tally holds the GPU at now, if any.
fn status(t: &Tally, rule: &Rule, s: &XidSettings, now: i64) -> Option<(Severity, Why)> {
    let holds = |severity: Severity, since: i64| -> Option<Why> {
        let within = |window: u64| (now - since <= window as i64).then_some(Why::Window(window));
        match severity {
            Severity::Ok => None,
            Severity::Down => Some(Why::UntilReboot),
            Severity::Drain => within(s.window_s.drain),
            Severity::Warning | Severity::Unknown => within(s.window_s.warning),
        }
    };
    let mut best = holds(rule.severity, t.last_at).map(|why| (rule.severity, why));
    if let Some(at) = t.escalated_at.filter(|_| s.repeat_xids.contains(&t.xid)) {
        let escalated = rule.severity.max(s.repeat_severity);
        let stronger = match &best {
            Some((severity, _)) => escalated > *severity,
            None => true,
        };
        if stronger && holds(escalated, at).is_some() {
            best = Some((escalated, Why::Repeated));
        }
    }
    for (i, site) in s.rule.iter().enumerate() {
        if !site.codes.contains(&t.xid) {
            continue;
        }
        let Some(at) = count_reached_at(&t.recent, site.count, site.window) else {
            continue;
        };
        let stronger = match &best {
            Some((severity, _)) => site.severity > *severity,
            None => true,
        };
        if stronger && holds(site.severity, at).is_some() {
            best = Some((site.severity, Why::SiteRule(i)));
        }
    }
    best
}

/// The latest of `recent` (ascending times) at which `count` of them fell
/// inside `window` seconds.
fn count_reached_at(recent: &[i64], count: u32, window: u64) -> Option<i64> {
    let n = count.max(1) as usize;
    if recent.len() < n {
        return None;
    }
    (n - 1..recent.len())
        .rev()
        .find(|&end| recent[end] - recent[end + 1 - n] <= window as i64)
        .map(|end| recent[end])
}

/// How many of a tally's latest times the repeat setting and the site rules need.
fn times_needed(xid: u32, s: &XidSettings) -> usize {
    let rules = s.rule.iter().filter(|r| r.codes.contains(&xid));
    let most = rules.map(|r| r.count).max().unwrap_or(0);
    most.max(s.repeat_count).clamp(1, 1000) as usize
}

fn time(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| at.to_string())
}

/// `90 s`, `10 min`, `6 h`, `7 d`: windows as an operator would say them.
fn span(seconds: u64) -> String {
    match seconds {
        s if s % 86_400 == 0 && s >= 86_400 => format!("{} d", s / 86_400),
        s if s % 3600 == 0 && s >= 3600 => format!("{} h", s / 3600),
        s if s % 60 == 0 && s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

fn describe(t: &Tally) -> String {
    let mut who = String::new();
    if let Some(gi) = &t.gpu_instance {
        who.push_str(&format!(" GPU-I:{gi}"));
    }
    if let Some(pid) = &t.pid {
        who.push_str(&format!(" pid={pid}"));
    }
    if let Some(name) = &t.process {
        who.push_str(&format!(" name={name}"));
    }
    let times = if t.count == 1 {
        format!("at {}", time(t.last_at))
    } else {
        format!(
            "x{} since {}, last at {}",
            t.count,
            time(t.first_at),
            time(t.last_at)
        )
    };
    let text = if t.text.is_empty() {
        String::new()
    } else {
        format!(": {}", t.text)
    };
    format!("XID {} {times}{who}{text}", t.xid)
}

/// Findings per GPU in bus order (ok for a GPU with nothing that counts
/// now), then the node's own.
fn findings(g: &Gathered, s: &XidSettings, state: &XidState, now: i64) -> Vec<Finding> {
    // Every sysfs GPU gets a line, and so does every other bus id with history.
    let mut by_gpu: BTreeMap<Gpu, Vec<Finding>> = (0..g.gpus.len())
        .map(|i| (gpu_at(i, &g.gpus), Vec::new()))
        .collect();
    let mut quiet: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut tallies: Vec<&Tally> = state.tallies.iter().collect();
    tallies.sort_by_key(|t| (t.bus.clone(), t.xid));
    for t in tallies {
        let gpu = gpu_of(&t.bus, &g.gpus);
        match tally_finding(t, &gpu, s, state, now) {
            Some(f) => by_gpu.entry(gpu).or_default().push(f),
            None => {
                quiet
                    .entry(gpu.entity.clone())
                    .or_default()
                    .push(format!("XID {} x{}", t.xid, t.count));
                by_gpu.entry(gpu).or_default();
            }
        }
    }
    let node_findings = problem_findings(g, s, state, now, &mut by_gpu);
    let mut out = Vec::new();
    for (gpu, found) in by_gpu {
        if found.is_empty() {
            out.push(quiet_gpu(&gpu, quiet.get(&gpu.entity), state));
        } else {
            out.extend(found);
        }
    }
    out.extend(node_findings);
    if out.is_empty() {
        out.push(Finding::ok("xid", "node").message(format!(
            "no NVIDIA GPU in sysfs and no XID in {}",
            g.source_name
        )));
    }
    out
}

/// The finding of one XID on one GPU, if it still counts now.
fn tally_finding(
    t: &Tally,
    gpu: &Gpu,
    s: &XidSettings,
    state: &XidState,
    now: i64,
) -> Option<Finding> {
    let rule = catalog::rule_of(t.xid, reading_of(t.recovery, t.nvlink5.as_ref()), s);
    let (severity, why) = status(t, &rule, s, now)?;
    let why_rule = match why {
        Why::SiteRule(i) => Some(i),
        _ => None,
    };
    let why = match why {
        Why::UntilReboot => "stays until reboot".to_string(),
        Why::Window(w) => format!("counts for {} after it was seen", span(w)),
        Why::Repeated => format!(
            "repeated {} times within {}",
            s.repeat_count,
            span(s.repeat_window_s)
        ),
        Why::SiteRule(i) => format!(
            "seen {} times within {} (site rule)",
            s.rule[i].count,
            span(s.rule[i].window)
        ),
    };
    let action = match why_rule {
        Some(i) => s.rule[i].action,
        None => rule.action,
    };
    let mut f = Finding::new("xid", gpu.entity.clone(), code_of(t.xid), severity)
        .expected("no XID")
        .actual(describe(t))
        .action(action)
        .message(format!(
            "XID {} ({}) on {}: {why}",
            t.xid, rule.description, gpu.entity
        ))
        .pci(gpu.pci.clone());
    if let Some(uuid) = state.uuids.get(&t.bus) {
        f = f.uuid(uuid.clone());
    }
    Some(f)
}

/// Recent unreadable lines as `unknown`s: a GPU's go to `by_gpu`, the
/// node's come back.
fn problem_findings(
    g: &Gathered,
    s: &XidSettings,
    state: &XidState,
    now: i64,
    by_gpu: &mut BTreeMap<Gpu, Vec<Finding>>,
) -> Vec<Finding> {
    let mut node_findings = Vec::new();
    for p in &state.problems {
        // As long as a warning XID: long enough to be seen, not until reboot.
        if now - p.at > s.window_s.warning as i64 {
            continue;
        }
        match &p.bus {
            Some(bus) => {
                let gpu = gpu_of(bus, &g.gpus);
                let f = Finding::unknown("xid", gpu.entity.clone(), &p.code, p.message.clone())
                    .pci(gpu.pci.clone());
                by_gpu.entry(gpu).or_default().push(f);
            }
            None => node_findings.push(Finding::unknown("xid", "node", &p.code, p.message.clone())),
        }
    }
    node_findings
}

/// A GPU with no XID that counts now; `seen` are those that no longer do.
fn quiet_gpu(gpu: &Gpu, seen: Option<&Vec<String>>, state: &XidState) -> Finding {
    let bus = parse::normalize_bus(&gpu.pci).unwrap_or_default();
    let message = match seen {
        Some(seen) => format!(
            "recorded since boot, no longer counting: {}",
            seen.join(", ")
        ),
        None => "no XID since boot".to_string(),
    };
    let mut f = Finding::ok("xid", gpu.entity.clone())
        .pci(gpu.pci.clone())
        .message(message);
    if let Some(uuid) = state.uuids.get(&bus) {
        f = f.uuid(uuid.clone());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::{Action, XidRule};

    const BTIME: i64 = 1_800_000_000;
    const GPUS: [&str; 2] = ["0000:18:00.0", "0000:2a:00.0"];

    fn gathered(lines: &[(u64, u64, &str)]) -> Gathered {
        Gathered {
            boot_id: "boot-a".into(),
            btime: BTIME,
            source_name: "/dev/kmsg".into(),
            source_key: "/dev/kmsg".into(),
            gpus: GPUS.iter().map(|s| s.to_string()).collect(),
            records: lines
                .iter()
                .map(|&(seq, secs, message)| KmsgRecord {
                    seq,
                    ts_usec: secs * 1_000_000,
                    line: Some(seq + 1),
                    wall_s: None,
                    message: message.into(),
                })
                .collect(),
            read: ReadSummary {
                cursor: lines.last().map(|&(seq, ..)| Cursor {
                    seq,
                    offset: None,
                    line: None,
                }),
                ..Default::default()
            },
            continued: true,
        }
    }

    fn xid_line(bus: &str, xid: u32) -> String {
        format!("NVRM: Xid (PCI:{bus}): {xid}, pid=42, name=python, something happened")
    }

    fn worst_of(findings: &[Finding], entity: &str) -> (String, Severity) {
        findings
            .iter()
            .filter(|f| f.entity == entity)
            .max_by_key(|f| f.severity)
            .map(|f| (f.code.clone(), f.severity))
            .unwrap_or_else(|| panic!("no finding for {entity}: {findings:#?}"))
    }

    #[test]
    fn a_quiet_log_gives_ok_for_every_gpu() {
        let s = XidSettings::default();
        let e = evaluate(
            &gathered(&[(0, 1, "Linux version 6.8")]),
            &s,
            XidState::default(),
            BTIME + 10,
        );
        assert_eq!(e.findings.len(), 2);
        assert!(e.findings.iter().all(|f| f.is_ok()));
        assert_eq!(e.findings[0].entity, "gpu0");
        assert_eq!(e.findings[0].pci_bus_id.as_deref(), Some("0000:18:00.0"));
        assert!(e.events.is_empty());
    }

    #[test]
    fn an_xid_is_an_event_and_a_finding_with_pci_and_uuid() {
        let s = XidSettings::default();
        let g = gathered(&[
            (1, 2, "NVRM: GPU at PCI:0000:2a:00: GPU-aaaa-bbbb"),
            (2, 100, &xid_line("0000:2a:00", 79)),
        ]);
        let e = evaluate(&g, &s, XidState::default(), BTIME + 200);
        let f = e.findings.iter().find(|f| f.code == "XID_79").unwrap();
        assert_eq!((f.entity.as_str(), f.severity), ("gpu1", Severity::Down));
        assert_eq!(f.pci_bus_id.as_deref(), Some("0000:2a:00.0"));
        assert_eq!(f.uuid.as_deref(), Some("GPU-aaaa-bbbb"));
        assert_eq!(f.action, Action::Reboot);
        assert!(f.actual.as_deref().unwrap().contains("pid=42 name=python"));
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Ok);
        assert_eq!(e.events.len(), 1);
        assert_eq!(e.events[0].occurred_at, BTIME + 100);
        assert_eq!((e.events[0].seq, e.events[0].code.as_str()), (2, "XID_79"));
    }

    #[test]
    fn a_gpu_reset_forgets_that_gpus_xids_up_to_the_reset_only() {
        let s = XidSettings::default();
        let g = gathered(&[
            (1, 10, &xid_line("0000:18:00", 48)),
            (2, 10, &xid_line("0000:2a:00", 48)),
        ]);
        let mut state = evaluate(&g, &s, XidState::default(), BTIME + 20).state;
        forget_before_reset(&mut state, "00000000:18:00.0", BTIME + 100);
        let after = evaluate(&gathered(&[]), &s, state.clone(), BTIME + 200);
        assert_eq!(worst_of(&after.findings, "gpu0").1, Severity::Ok);
        assert_eq!(
            worst_of(&after.findings, "gpu1"),
            ("XID_48".into(), Severity::Down)
        );
        // An XID after the reset is not forgotten by it.
        forget_before_reset(&mut state, "0000:2a:00.0", BTIME + 5);
        let after = evaluate(&gathered(&[]), &s, state, BTIME + 200);
        assert_eq!(worst_of(&after.findings, "gpu1").1, Severity::Down);
    }

    #[test]
    fn down_stays_until_reboot_and_warnings_expire() {
        let s = XidSettings::default();
        let g = gathered(&[
            (1, 10, &xid_line("0000:18:00", 48)),
            (2, 10, &xid_line("0000:2a:00", 13)),
        ]);
        let first = evaluate(&g, &s, XidState::default(), BTIME + 20);
        assert_eq!(worst_of(&first.findings, "gpu1").1, Severity::Warning);
        let later = evaluate(&gathered(&[]), &s, first.state.clone(), BTIME + 30 * 86400);
        assert_eq!(
            worst_of(&later.findings, "gpu0"),
            ("XID_48".into(), Severity::Down)
        );
        let ok = worst_of(&later.findings, "gpu1");
        assert_eq!(ok.1, Severity::Ok);
        assert!(later.findings[1].message.contains("XID 13 x1"));
        assert!(later.events.is_empty());

        let mut rebooted = gathered(&[]);
        rebooted.boot_id = "boot-b".into();
        rebooted.continued = false;
        let after = evaluate(&rebooted, &s, later.state, BTIME + 30 * 86400);
        assert!(after.findings.iter().all(|f| f.is_ok()));
        assert!(after.state.tallies.is_empty());
    }

    #[test]
    fn windows_follow_the_settings() {
        let mut s = XidSettings::default();
        s.window_s.drain = 100;
        let g = gathered(&[(1, 10, &xid_line("0000:18:00", 63))]);
        let e = evaluate(&g, &s, XidState::default(), BTIME + 110);
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Drain);
        let e = evaluate(&gathered(&[]), &s, e.state, BTIME + 111);
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Ok);
    }

    #[test]
    fn repeats_of_13_escalate_but_spread_out_ones_do_not() {
        let s = XidSettings::default();
        let bus = "0000:18:00";
        let spread = gathered(&[
            (1, 0, &xid_line(bus, 13)),
            (2, 4000, &xid_line(bus, 13)),
            (3, 8000, &xid_line(bus, 13)),
        ]);
        let e = evaluate(&spread, &s, XidState::default(), BTIME + 8001);
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Warning);

        let burst = gathered(&[
            (1, 0, &xid_line(bus, 13)),
            (2, 60, &xid_line(bus, 13)),
            (3, 120, &xid_line(bus, 13)),
        ]);
        let e = evaluate(&burst, &s, XidState::default(), BTIME + 121);
        let f = e.findings.iter().find(|f| f.entity == "gpu0").unwrap();
        assert_eq!((f.code.as_str(), f.severity), ("XID_13", Severity::Drain));
        assert!(
            f.message.contains("repeated 3 times within 1 h"),
            "{}",
            f.message
        );
        assert!(f.actual.as_deref().unwrap().contains("x3"));
        assert_eq!(e.events.len(), 3);
        // The escalation lasts as long as a drain does.
        let e = evaluate(&gathered(&[]), &s, e.state, BTIME + 120 + 6 * 86400);
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Drain);
    }

    #[test]
    fn repeats_count_across_runs() {
        let s = XidSettings::default();
        let bus = "0000:2a:00";
        let mut state = XidState::default();
        for (seq, at) in [(1, 10), (2, 20), (3, 30)] {
            let e = evaluate(
                &gathered(&[(seq, at, &xid_line(bus, 31))]),
                &s,
                state,
                BTIME + at as i64,
            );
            state = e.state;
            let expected = if seq < 3 {
                Severity::Warning
            } else {
                Severity::Drain
            };
            assert_eq!(worst_of(&e.findings, "gpu1").1, expected, "after {seq}");
        }
    }

    #[test]
    fn xid_154_follows_the_latest_recovery_action() {
        let s = XidSettings::default();
        let line = |to: &str| {
            format!("NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to {to}")
        };
        let reset = line("0x1 (GPU Reset Required)");
        let e = evaluate(
            &gathered(&[(1, 5, &reset)]),
            &s,
            XidState::default(),
            BTIME + 6,
        );
        let f = e.findings.iter().find(|f| f.code == "XID_154").unwrap();
        assert_eq!((f.severity, f.action), (Severity::Down, Action::ResetGpu));
        let none = line("0x0 (None)");
        let e = evaluate(&gathered(&[(2, 50, &none)]), &s, e.state, BTIME + 51);
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Ok);
        assert_eq!(e.events[0].severity, Severity::Ok);
    }

    #[test]
    fn an_nvlink5_sub_code_names_its_unit_and_a_fatal_one_outlives_a_milder_one() {
        let s = XidSettings::default();
        let line = |words: &str| {
            format!("NVRM: Xid (PCI:0000:18:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 ({words} 0x00000000 0x00000000)")
        };
        let mild = line("0x00000001 0x00000008");
        let e = evaluate(
            &gathered(&[(1, 5, &mild)]),
            &s,
            XidState::default(),
            BTIME + 6,
        );
        let f = e.findings.iter().find(|f| f.code == "XID_144").unwrap();
        assert_eq!(
            (f.severity, f.action),
            (Severity::Warning, Action::Investigate)
        );
        assert!(
            f.message.contains("NVLink5 SAW_MVB link 0"),
            "{}",
            f.message
        );
        assert!(f.message.contains("NVIDIA Non-fatal (HW)"), "{}", f.message);
        assert_eq!(e.events[0].severity, Severity::Warning);

        let fatal = line("0x00000001 0x00000002");
        let e = evaluate(&gathered(&[(2, 7, &fatal)]), &s, e.state, BTIME + 8);
        let e = evaluate(&gathered(&[(3, 9, &mild)]), &s, e.state, BTIME + 10);
        let f = e.findings.iter().find(|f| f.code == "XID_144").unwrap();
        assert_eq!((f.severity, f.action), (Severity::Down, Action::ResetGpu));
        assert!(f.message.contains("NVIDIA Fatal"), "{}", f.message);
        assert_eq!(
            e.events[0].severity,
            Severity::Warning,
            "the event is the line's own"
        );
    }

    #[test]
    fn an_nvlink5_line_that_does_not_decode_keeps_the_catalog_rule() {
        let s = XidSettings::default();
        let odd =
            "NVRM: Xid (PCI:0000:18:00): 149, NETIR Fatal XC0 i0 Link 1 (0x0000007f 0x00000000)";
        let e = evaluate(
            &gathered(&[(1, 5, odd)]),
            &s,
            XidState::default(),
            BTIME + 6,
        );
        let f = e.findings.iter().find(|f| f.code == "XID_149").unwrap();
        assert_eq!((f.severity, f.action), (Severity::Down, Action::ResetGpu));
    }

    #[test]
    fn config_overrides_apply_to_history_too() {
        let mut s = XidSettings::default();
        let e = evaluate(
            &gathered(&[(1, 5, &xid_line("0000:18:00", 79))]),
            &s,
            XidState::default(),
            BTIME + 6,
        );
        s.catalog.insert(
            79,
            XidRule {
                severity: Severity::Warning,
                action: Action::Investigate,
                description: Some("lab GPU".into()),
            },
        );
        let e = evaluate(&gathered(&[]), &s, e.state, BTIME + 7);
        let f = e.findings.iter().find(|f| f.code == "XID_79").unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.message.contains("lab GPU"));
    }

    #[test]
    fn unknown_buses_and_unreadable_lines() {
        let s = XidSettings::default();
        let g = gathered(&[
            (1, 5, &xid_line("0000:c6:00", 79)),
            (
                2,
                6,
                "NVRM: Xid (PCI:0000:2a:00): x79, pid=1, name=a, broken",
            ),
            (3, 7, "NVRM: Xid (PCI:0000:18:00"),
        ]);
        let e = evaluate(&g, &s, XidState::default(), BTIME + 8);
        let stray = e
            .findings
            .iter()
            .find(|f| f.entity == "pci:0000:c6:00")
            .unwrap();
        assert_eq!(
            (stray.code.as_str(), stray.severity),
            ("XID_79", Severity::Down)
        );
        assert_eq!(stray.pci_bus_id.as_deref(), Some("0000:c6:00"));
        let bad = e.findings.iter().find(|f| f.entity == "gpu1").unwrap();
        assert_eq!(
            (bad.code.as_str(), bad.severity),
            (XID_PARSE_ERROR, Severity::Unknown)
        );
        assert!(bad.message.contains("line 3 (seq 2)"), "{}", bad.message);
        assert!(bad.message.contains("`x79`"), "{}", bad.message);
        let node = e.findings.iter().find(|f| f.entity == "node").unwrap();
        assert_eq!(node.code, XID_PARSE_ERROR);
        assert_eq!(e.events.len(), 1, "unreadable lines are not events");
        // They stay for the warning window, then go.
        let e = evaluate(&gathered(&[]), &s, e.state, BTIME + 8 + 3601);
        assert!(e.findings.iter().all(|f| f.code != XID_PARSE_ERROR));
    }

    #[test]
    fn history_stays_bounded_and_keeps_down_xids() {
        let s = XidSettings::default();
        let mut lines = vec![(0u64, 1u64, xid_line("0000:18:00", 79))];
        for i in 0..(MAX_TALLIES as u64 + 50) {
            lines.push((i + 1, 2 + i, xid_line("0000:2a:00", 1000 + i as u32)));
        }
        let borrowed: Vec<(u64, u64, &str)> =
            lines.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
        let e = evaluate(&gathered(&borrowed), &s, XidState::default(), BTIME + 10);
        assert_eq!(e.state.tallies.len(), MAX_TALLIES);
        assert!(e.state.tallies.iter().any(|t| t.xid == 79));
        assert_eq!(worst_of(&e.findings, "gpu0").1, Severity::Down);
    }
}
