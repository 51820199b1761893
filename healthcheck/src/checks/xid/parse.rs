//! The NVIDIA driver's kernel log lines that the XID check reads.
//!
//! * `NVRM: Xid (PCI:0000:c6:00): 79, pid=1101, name=proc, GPU has fallen off the bus.`
//!   with `pid=`/`name=` optional (`pid='<unknown>'` on newer drivers), a MIG
//!   instance inside the parentheses (`PCI:0000:c6:00 GPU-I:05`), and no
//!   `PCI:` on very old drivers (`Xid (0000:03:00): 13, ...`);
//! * `NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 ...)`,
//!   XIDs 144–150, whose words [`super::nvlink5`] decodes;
//! * `NVRM: GPU at PCI:0000:2b:00: GPU-<uuid>`, which names a bus id's GPU.

use super::nvlink5::{self, Nvlink5};
use serde::{Deserialize, Serialize};

/// What XID 154 says the GPU now needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recovery {
    None,
    Drain,
    Reset,
    Reboot,
}

/// One XID report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    /// Normalised bus id: `0000:c6:00` (domain, bus, device; no function).
    pub bus: String,
    /// MIG GPU instance (`05` of `GPU-I:05`).
    pub gpu_instance: Option<String>,
    pub xid: u32,
    pub pid: Option<String>,
    pub process: Option<String>,
    /// The driver's words after the number and `pid`/`name`.
    pub text: String,
    /// XID 154 only: the recovery action it changed to.
    pub recovery: Option<Recovery>,
    /// XIDs 144–150 only: NVIDIA's decode of the sub-code (boxed: most
    /// lines have none).
    pub nvlink5: Option<Box<Nvlink5>>,
}

/// A driver line the check cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nvrm {
    Xid(XidLine),
    /// `NVRM: GPU at PCI:<bus>: GPU-<uuid>`.
    GpuAt {
        bus: String,
        uuid: String,
    },
    /// An `NVRM: Xid` line that does not read as one.
    BadXid {
        bus: Option<String>,
        reason: String,
    },
    Other,
}

const XID_MARK: &str = "NVRM: Xid";
const GPU_AT_MARK: &str = "NVRM: GPU at ";

/// Reads one kernel log message.
pub fn parse(message: &str) -> Nvrm {
    if let Some(at) = message.find(XID_MARK) {
        let rest = &message[at + XID_MARK.len()..];
        if rest.is_empty() || rest.starts_with(' ') || rest.starts_with('(') {
            return parse_xid(rest.trim_start());
        }
    }
    if let Some(at) = message.find(GPU_AT_MARK) {
        if let Some(found) = parse_gpu_at(&message[at + GPU_AT_MARK.len()..]) {
            return found;
        }
    }
    Nvrm::Other
}

fn bad(bus: Option<String>, reason: impl Into<String>) -> Nvrm {
    Nvrm::BadXid {
        bus,
        reason: reason.into(),
    }
}

/// `(PCI:0000:c6:00 GPU-I:05): 79, pid=1101, name=proc, text`
fn parse_xid(rest: &str) -> Nvrm {
    let Some(inner) = rest.strip_prefix('(') else {
        return bad(None, "no `(` before the bus id");
    };
    let Some(close) = inner.find(')') else {
        return bad(None, "no `)` after the bus id");
    };
    let (location, after) = (&inner[..close], &inner[close + 1..]);
    let mut words = location.split_whitespace();
    let Some(bus_word) = words.next() else {
        return bad(None, "no bus id inside the parentheses");
    };
    let Some(bus) = normalize_bus(bus_word) else {
        return bad(None, format!("bus id `{bus_word}` is not a PCI address"));
    };
    let gpu_instance = words
        .find_map(|w| w.strip_prefix("GPU-I:"))
        .map(str::to_string);
    let Some(after) = after.strip_prefix(':') else {
        return bad(Some(bus), "no `:` after the bus id");
    };
    let (number, mut tail) = match after.split_once(',') {
        Some((n, t)) => (n.trim(), t.trim_start()),
        None => (after.trim(), ""),
    };
    if number.is_empty() {
        return bad(Some(bus), "no XID number");
    }
    let xid = match number.parse::<u32>() {
        Ok(x) if number.bytes().all(|b| b.is_ascii_digit()) => x,
        _ => return bad(Some(bus), format!("XID `{number}` is not a number")),
    };
    let (mut pid, mut process) = (None, None);
    loop {
        let (field, next) = tail.split_once(',').unwrap_or((tail, ""));
        if let Some(v) = field.strip_prefix("pid=") {
            pid = Some(unquote(v));
        } else if let Some(v) = field.strip_prefix("name=") {
            process = Some(unquote(v));
        } else {
            break;
        }
        tail = next.trim_start();
    }
    let text = tail.trim().to_string();
    let recovery = (xid == 154).then(|| recovery_of(&text)).flatten();
    let nvlink5 = nvlink5::decode(xid, &text).map(Box::new);
    Nvrm::Xid(XidLine {
        bus,
        gpu_instance,
        xid,
        pid,
        process,
        text,
        recovery,
        nvlink5,
    })
}

fn unquote(v: &str) -> String {
    v.trim().trim_matches('\'').to_string()
}

/// `GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)`:
/// the words after the last ` to ` name the new action.
fn recovery_of(text: &str) -> Option<Recovery> {
    let lower = text.to_ascii_lowercase();
    let target = lower.rsplit_once(" to ").map_or(lower.as_str(), |(_, t)| t);
    // "Drain and Reset" means drain now, reset when idle: drain wins over reset.
    if target.contains("reboot") {
        Some(Recovery::Reboot)
    } else if target.contains("drain") {
        Some(Recovery::Drain)
    } else if target.contains("reset") {
        Some(Recovery::Reset)
    } else if target.contains("none") {
        Some(Recovery::None)
    } else {
        None
    }
}

/// `PCI:0000:2b:00: GPU-5c2a...`
fn parse_gpu_at(rest: &str) -> Option<Nvrm> {
    let (bus_word, uuid) = rest.split_once(": GPU-")?;
    let bus = normalize_bus(bus_word)?;
    let uuid: String = uuid
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect();
    if uuid.is_empty() {
        return None;
    }
    Some(Nvrm::GpuAt {
        bus,
        uuid: format!("GPU-{uuid}"),
    })
}

/// `PCI:0000:C6:00`, `0000:c6:00.0`, `c6:00` → `0000:c6:00`: the form the
/// driver's lines and sysfs names share (the driver leaves out the function).
pub fn normalize_bus(word: &str) -> Option<String> {
    let word = word.trim();
    let word = word
        .strip_prefix("PCI:")
        .or_else(|| word.strip_prefix("pci:"))
        .unwrap_or(word);
    let word = match word.rsplit_once('.') {
        Some((w, function))
            if !function.is_empty() && function.bytes().all(|b| b.is_ascii_digit()) =>
        {
            w
        }
        Some(_) => return None,
        None => word,
    };
    let parts: Vec<&str> = word.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [d, b, dev] => (*d, *b, *dev),
        [b, dev] => ("0", *b, *dev),
        _ => return None,
    };
    let hex = |s: &str, max: usize| {
        (!s.is_empty() && s.len() <= max)
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}",
        hex(domain, 8)?,
        hex(bus, 2)?,
        hex(device, 2)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(message: &str) -> XidLine {
        match parse(message) {
            Nvrm::Xid(x) => x,
            other => panic!("`{message}` read as {other:?}"),
        }
    }

    fn reason(message: &str) -> String {
        match parse(message) {
            Nvrm::BadXid { reason, .. } => reason,
            other => panic!("`{message}` read as {other:?}"),
        }
    }

    #[test]
    fn the_full_form() {
        let x =
            xid("NVRM: Xid (PCI:0000:c6:00): 79, pid=1101, name=proc, GPU has fallen off the bus.");
        assert_eq!(
            x,
            XidLine {
                bus: "0000:c6:00".into(),
                gpu_instance: None,
                xid: 79,
                pid: Some("1101".into()),
                process: Some("proc".into()),
                text: "GPU has fallen off the bus.".into(),
                recovery: None,
                nvlink5: None,
            }
        );
    }

    #[test]
    fn pid_and_name_are_optional_and_may_be_quoted() {
        let x = xid("NVRM: Xid (PCI:0000:3B:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address");
        assert_eq!((x.xid, x.pid, x.process), (13, None, None));
        assert_eq!(x.bus, "0000:3b:00");
        assert!(x
            .text
            .starts_with("Graphics SM Warp Exception on (GPC 1, TPC 0"));

        let x = xid("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
        assert_eq!(x.pid.as_deref(), Some("<unknown>"));
        assert_eq!(x.process.as_deref(), Some("<unknown>"));
        assert_eq!(x.text, "GPU has fallen off the bus.");

        let x =
            xid("NVRM: Xid (PCI:0000:3b:00): 31, pid=2925, Ch 00000008, intr 10000000. MMU Fault");
        assert_eq!((x.pid.as_deref(), x.process), (Some("2925"), None));
        assert_eq!(x.text, "Ch 00000008, intr 10000000. MMU Fault");

        let x = xid("NVRM: Xid (PCI:0000:3b:00): 45");
        assert_eq!((x.xid, x.text.as_str()), (45, ""));
    }

    #[test]
    fn mig_instances_and_old_drivers() {
        let x = xid("NVRM: Xid (PCI:0000:9a:00 GPU-I:05): 31, pid=77, name=train, Ch 0000000a, intr 00000000. MMU Fault");
        assert_eq!(x.bus, "0000:9a:00");
        assert_eq!(x.gpu_instance.as_deref(), Some("05"));
        assert_eq!(x.process.as_deref(), Some("train"));

        let x =
            xid("NVRM: Xid (0000:03:00): 13, 0003 00000000 0000a097 00001b0c 1000f010 00000000");
        assert_eq!((x.bus.as_str(), x.xid), ("0000:03:00", 13));
        assert!(x.text.starts_with("0003 00000000"));
    }

    #[test]
    fn xid_154_carries_its_recovery_action() {
        let action = |to: &str| {
            xid(&format!(
                "NVRM: Xid (PCI:0000:c6:00): 154, GPU recovery action changed from 0x0 (None) to {to}"
            ))
            .recovery
        };
        assert_eq!(action("0x1 (GPU Reset Required)"), Some(Recovery::Reset));
        assert_eq!(action("0x2 (Node Reboot Required)"), Some(Recovery::Reboot));
        assert_eq!(action("0x3 (Drain P2P)"), Some(Recovery::Drain));
        assert_eq!(action("0x4 (Drain and Reset)"), Some(Recovery::Drain));
        assert_eq!(action("0x0 (None)"), Some(Recovery::None));
        assert_eq!(action("0x9 (Something New)"), None);
        assert_eq!(
            xid("NVRM: Xid (PCI:0000:c6:00): 79, pid=1, name=reset, to reboot").recovery,
            None,
            "only 154 has a recovery action"
        );
    }

    #[test]
    fn malformed_xid_lines_say_what_is_wrong() {
        assert!(reason("NVRM: Xid (PCI:0000:18:00): abc, pid=1, name=x, boom").contains("`abc`"));
        assert!(reason("NVRM: Xid (PCI:0000:18:00): -5, boom").contains("`-5`"));
        assert!(reason("NVRM: Xid (PCI:0000:18:00): 99999999999, boom").contains("not a number"));
        assert!(reason("NVRM: Xid (PCI:0000:18:00): , boom").contains("no XID number"));
        assert!(reason("NVRM: Xid (PCI:0000:18:00").contains("`)`"));
        assert!(reason("NVRM: Xid PCI:0000:18:00: 79").contains("`(`"));
        assert!(reason("NVRM: Xid (PCI:zz:qq:00): 79, boom").contains("`PCI:zz:qq:00`"));
        assert!(reason("NVRM: Xid (): 79").contains("no bus id"));
        match parse("NVRM: Xid (PCI:0000:18:00) 79") {
            Nvrm::BadXid { bus, .. } => assert_eq!(bus.as_deref(), Some("0000:18:00")),
            other => panic!("{other:?}"),
        }
        assert_eq!(reason("NVRM: Xid"), "no `(` before the bus id");
    }

    #[test]
    fn gpu_at_lines_name_uuids_and_other_lines_are_ignored() {
        assert_eq!(
            parse("NVRM: GPU at PCI:0000:2b:00: GPU-5c2a1e4f-8d3b-4c6a-9e1f-0a2b3c4d5e6f"),
            Nvrm::GpuAt {
                bus: "0000:2b:00".into(),
                uuid: "GPU-5c2a1e4f-8d3b-4c6a-9e1f-0a2b3c4d5e6f".into()
            }
        );
        assert_eq!(parse("NVRM: GPU Board Serial Number: 1234"), Nvrm::Other);
        assert_eq!(parse("NVRM: GPU at PCI:0000:2b:00: no uuid"), Nvrm::Other);
        assert_eq!(parse("NVRM: XidHandler started"), Nvrm::Other);
        assert_eq!(
            parse("nvidia-nvlink: Nvlink Core is being initialized"),
            Nvrm::Other
        );
    }

    #[test]
    fn bus_ids_normalise_to_the_drivers_form() {
        assert_eq!(
            normalize_bus("PCI:0000:C6:00").as_deref(),
            Some("0000:c6:00")
        );
        assert_eq!(normalize_bus("0000:c6:00.0").as_deref(), Some("0000:c6:00"));
        assert_eq!(normalize_bus("c6:00").as_deref(), Some("0000:c6:00"));
        assert_eq!(
            normalize_bus("10000:01:00.0").as_deref(),
            Some("10000:01:00")
        );
        assert_eq!(normalize_bus("0000:c6"), None);
        assert_eq!(normalize_bus("0000:c6:00.x"), None);
        assert_eq!(normalize_bus("0000:c6:100"), None);
        assert_eq!(normalize_bus(""), None);
    }
}

/// Random input: any message reads as something, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn any_message_reads_without_a_panic(text in any::<String>()) {
            let _ = parse(&text);
        }

        #[test]
        fn anything_after_the_xid_mark_reads_without_a_panic(rest in any::<String>()) {
            let _ = parse(&format!("NVRM: Xid{rest}"));
            let _ = parse(&format!("NVRM: Xid (PCI:0000:18:00): {rest}"));
            let _ = parse(&format!("NVRM: GPU at {rest}"));
        }

        #[test]
        fn a_driver_xid_line_gives_its_number_and_bus(
            bus in 0u8..=255,
            xid in 1u32..200,
            pid in 1u32..100_000,
            name in "[a-z_]{1,12}",
            text in "[A-Za-z0-9 :().,]{0,40}",
        ) {
            let line = format!("NVRM: Xid (PCI:0000:{bus:02x}:00): {xid}, pid={pid}, name={name}, {text}");
            match parse(&line) {
                Nvrm::Xid(x) => {
                    prop_assert_eq!(x.xid, xid);
                    prop_assert_eq!(x.bus, format!("0000:{bus:02x}:00"));
                    prop_assert_eq!(x.pid, Some(pid.to_string()));
                }
                other => prop_assert!(false, "{line}: {other:?}"),
            }
        }
    }
}
