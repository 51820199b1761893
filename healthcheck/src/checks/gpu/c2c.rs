//! Grace C2C: the chip-to-chip links between the Grace CPU and the GPU of a
//! Grace-Hopper or Grace-Blackwell superchip, read through NVML by the `gpu`
//! check for every GPU on every run (periodic and prolog).
//!
//! The field ids and their meanings are NVIDIA's NVML API reference, "Field
//! Value Enums" (docs.nvidia.com/deploy/nvml-api, group__nvmlFieldValueEnums),
//! and the same numbers in nvml-wrapper-sys 0.10's bindings of nvml.h:
//!
//! * 170 `NVML_FI_DEV_C2C_LINK_COUNT`: "Number of C2C Links present on the device";
//! * 171 `NVML_FI_DEV_C2C_LINK_GET_STATUS`: "C2C Link Status 0=INACTIVE 1=ACTIVE",
//!   per link (the link number in `scopeId`, as NCCL and UCX read it);
//! * 231 `NVML_FI_DEV_C2C_LINK_ERROR_INTR`: "C2C Link CRC Error Counter";
//! * 232 `NVML_FI_DEV_C2C_LINK_ERROR_REPLAY`: "C2C Link Replay Error Counter";
//! * 233 `NVML_FI_DEV_C2C_LINK_ERROR_REPLAY_B2B`: "C2C Link Back to Back Replay
//!   Error Counter".
//!
//! 172 (`_GET_MAX_BW`, the speed of an active link) has no documented
//! expected value, so it is not judged. The reference does not say whether
//! the error counters are per link; they are read with the link as scope,
//! like the status, and kept per link.
//!
//! A link that is not active drains and asks a human: NVIDIA's XID catalog
//! says "contact support" for the C2C error (XID 121) and names no repair.
//! Counters that grow are a warning, as XID 121 is. [`read`] is the NVML
//! half, [`evaluate`] the pure judgement.

use super::field_values;
use super::session::{Failure, GpuId};
use crate::checks::counters;
use crate::finding::Finding;
use lemonade_config::{Action, Severity};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::{
    NVML_FI_DEV_C2C_LINK_COUNT, NVML_FI_DEV_C2C_LINK_ERROR_INTR, NVML_FI_DEV_C2C_LINK_ERROR_REPLAY,
    NVML_FI_DEV_C2C_LINK_ERROR_REPLAY_B2B, NVML_FI_DEV_C2C_LINK_GET_STATUS,
};
use std::collections::BTreeMap;

// Finding codes; `crate::codes` gives each its meaning, severity, repair and
// how to silence it.
pub const C2C_LINK_DOWN: &str = "C2C_LINK_DOWN";
pub const C2C_LINK_ERRORS: &str = "C2C_LINK_ERRORS";
pub const C2C_UNAVAILABLE: &str = "C2C_UNAVAILABLE";

/// A GH200 has one C2C link and a GB200 GPU few more; a driver that answers
/// more is not believed beyond this.
const MAX_LINKS: u32 = 16;

/// The error counters, in field order, with the words a finding uses.
const COUNTERS: [(u32, &str); 3] = [
    (NVML_FI_DEV_C2C_LINK_ERROR_INTR, "CRC"),
    (NVML_FI_DEV_C2C_LINK_ERROR_REPLAY, "replay"),
    (NVML_FI_DEV_C2C_LINK_ERROR_REPLAY_B2B, "back-to-back replay"),
];

/// One field as NVML answered it for one link.
pub use super::field_values::FieldValue as Value;

/// One C2C link of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkReading {
    pub link: u32,
    pub status: Value,
    /// CRC, replay and back-to-back replay counters.
    pub counters: [Value; 3],
}

/// What the driver answered for one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reading {
    /// No C2C link (a GPU on a PCIe host), or a driver without the field.
    #[default]
    NoC2c,
    Links(Vec<LinkReading>),
    /// The link count cannot be read: why.
    Unavailable(String),
}

/// Counters from the previous run, per link: `None` where not read.
pub type Counters = BTreeMap<u32, [Option<u64>; 3]>;

/// The C2C links of `device`. `Err` only for a GPU that is lost or needs a
/// reset (the `gpu` check's own verdict).
pub fn read(nvml: &Nvml, device: &Device<'_>) -> Result<Reading, Failure> {
    let links = match field_values::read(nvml, device, &[(NVML_FI_DEV_C2C_LINK_COUNT, 0)])? {
        Ok(count) => match &count[0] {
            Value::Read(0) | Value::NotSupported => return Ok(Reading::NoC2c),
            Value::Read(n) => (*n).min(u64::from(MAX_LINKS)) as u32,
            Value::Failed(why) => return Ok(Reading::Unavailable(why.clone())),
        },
        // A driver without field values has no C2C fields either.
        Err(Failure::NotSupported) => return Ok(Reading::NoC2c),
        Err(why) => return Ok(Reading::Unavailable(why.to_string())),
    };
    let fields = [NVML_FI_DEV_C2C_LINK_GET_STATUS]
        .into_iter()
        .chain(COUNTERS.map(|c| c.0));
    let requests: Vec<(u32, u32)> = (0..links)
        .flat_map(|link| fields.clone().map(move |f| (f, link)))
        .collect();
    let answered = field_values::read(nvml, device, &requests)?;
    Ok(Reading::Links(
        (0..links)
            .map(|link| {
                let value = |i: usize| match &answered {
                    Ok(values) => values[link as usize * 4 + i].clone(),
                    Err(why) => Value::Failed(why.to_string()),
                };
                LinkReading {
                    link,
                    status: value(0),
                    counters: [value(1), value(2), value(3)],
                }
            })
            .collect(),
    ))
}

/// Pure: the findings for one GPU's C2C links, and the counters to keep for
/// the next run. `previous` is what the last run kept for this GPU; a
/// counter seen for the first time is only a baseline. A reading that fails
/// is `unknown`, never a drain; a counter the driver lacks is not judged.
pub fn evaluate(
    check: &str,
    id: &GpuId,
    reading: &Reading,
    previous: Option<&Counters>,
) -> (Vec<Finding>, Option<Counters>) {
    let links = match reading {
        Reading::NoC2c => return (Vec::new(), None),
        Reading::Unavailable(why) => {
            let f = unavailable(check, id, &format!("link count: {why}"));
            return (vec![f], previous.cloned());
        }
        Reading::Links(links) => links,
    };
    let mut findings = Vec::new();
    let mut down = Vec::new();
    let mut unread = Vec::new();
    let mut grown = Vec::new();
    let mut kept = Counters::new();
    for l in links {
        let old = previous.and_then(|p| p.get(&l.link));
        let now = judge_link(l, old, &mut down, &mut grown, &mut unread);
        kept.insert(l.link, now);
    }
    if !down.is_empty() {
        findings.push(
            id.finding(check, C2C_LINK_DOWN, Severity::Drain)
                .expected("every C2C link active")
                .actual(down.join(", "))
                .action(Action::Investigate)
                .message(format!(
                    "{}: Grace C2C (CPU-GPU chip-to-chip) link not active: {}",
                    id.entity(),
                    down.join(", ")
                )),
        );
    }
    if !grown.is_empty() {
        findings.push(
            id.finding(check, C2C_LINK_ERRORS, Severity::Warning)
                .expected("no growth")
                .actual(grown.join(", "))
                .action(Action::Investigate)
                .message(format!(
                    "{}: Grace C2C error counters grew since the last run: {}",
                    id.entity(),
                    grown.join(", ")
                )),
        );
    }
    if !unread.is_empty() {
        findings.push(unavailable(check, id, &unread.join(", ")));
    }
    (findings, Some(kept))
}

/// One link's status and counters into the words of the findings; the
/// counters to keep (the old one where a read failed, so the next run still
/// sees growth).
fn judge_link(
    l: &LinkReading,
    old: Option<&[Option<u64>; 3]>,
    down: &mut Vec<String>,
    grown: &mut Vec<String>,
    unread: &mut Vec<String>,
) -> [Option<u64>; 3] {
    match &l.status {
        Value::Read(1) => {}
        Value::Read(s) => down.push(format!("link {} status {s}", l.link)),
        Value::NotSupported => unread.push(format!("link {} status: not supported", l.link)),
        Value::Failed(why) => unread.push(format!("link {} status: {why}", l.link)),
    }
    let mut now = [None; 3];
    for (i, ((_, name), value)) in COUNTERS.iter().zip(&l.counters).enumerate() {
        let was = old.and_then(|o| o[i]);
        now[i] = match value {
            Value::Read(n) => {
                let growth = was.map_or(0, |w| counters::growth(Some(w), *n));
                if growth > 0 {
                    grown.push(format!("link {} {name} +{growth}", l.link));
                }
                Some(*n)
            }
            Value::NotSupported => None,
            Value::Failed(why) => {
                unread.push(format!("link {} {name} counter: {why}", l.link));
                was
            }
        };
    }
    now
}

fn unavailable(check: &str, id: &GpuId, why: &str) -> Finding {
    id.finding(check, C2C_UNAVAILABLE, Severity::Unknown)
        .expected("the C2C link readings")
        .actual(why)
        .message(format!(
            "{}: the Grace C2C links cannot be read: {why}",
            id.entity()
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> GpuId {
        GpuId {
            index: 1,
            uuid: Some("GPU-1".into()),
            bus_id: Some("00000009:01:00.0".into()),
        }
    }

    fn link(link: u32, status: u64, counters: [u64; 3]) -> LinkReading {
        LinkReading {
            link,
            status: Value::Read(status),
            counters: counters.map(Value::Read),
        }
    }

    fn codes(findings: &[Finding]) -> Vec<(&str, Severity, Action)> {
        findings
            .iter()
            .map(|f| (f.code.as_str(), f.severity, f.action))
            .collect()
    }

    #[test]
    fn a_gpu_without_c2c_reports_nothing_and_keeps_nothing() {
        assert_eq!(
            evaluate("gpu", &gpu(), &Reading::NoC2c, None),
            (vec![], None)
        );
    }

    #[test]
    fn an_inactive_link_drains_and_asks_a_human() {
        let r = Reading::Links(vec![link(0, 1, [0; 3]), link(1, 0, [0; 3])]);
        let (f, _) = evaluate("gpu", &gpu(), &r, None);
        assert_eq!(
            codes(&f),
            [(C2C_LINK_DOWN, Severity::Drain, Action::Investigate)]
        );
        assert_eq!(f[0].actual.as_deref(), Some("link 1 status 0"));
    }

    #[test]
    fn counters_warn_only_when_they_grow_since_the_previous_run() {
        let first = Reading::Links(vec![link(0, 1, [3, 5, 0])]);
        let (f, kept) = evaluate("gpu", &gpu(), &first, None);
        assert!(f.is_empty(), "the first reading is a baseline: {f:?}");
        let (f, kept) = evaluate("gpu", &gpu(), &first, kept.as_ref());
        assert!(f.is_empty(), "{f:?}");
        let grew = Reading::Links(vec![link(0, 1, [3, 9, 2])]);
        let (f, _) = evaluate("gpu", &gpu(), &grew, kept.as_ref());
        assert_eq!(
            codes(&f),
            [(C2C_LINK_ERRORS, Severity::Warning, Action::Investigate)]
        );
        assert_eq!(
            f[0].actual.as_deref(),
            Some("link 0 replay +4, link 0 back-to-back replay +2")
        );
    }

    #[test]
    fn a_failed_read_is_unknown_and_keeps_the_old_count_for_the_next_run() {
        let mut l = link(0, 1, [7, 0, 0]);
        l.counters[0] = Value::Failed("timeout".into());
        let previous: Counters = [(0, [Some(7), Some(0), Some(0)])].into();
        let (f, kept) = evaluate("gpu", &gpu(), &Reading::Links(vec![l]), Some(&previous));
        assert_eq!(
            codes(&f),
            [(C2C_UNAVAILABLE, Severity::Unknown, Action::Investigate)]
        );
        assert_eq!(f[0].actual.as_deref(), Some("link 0 CRC counter: timeout"));
        assert_eq!(kept, Some(previous));
        let (f, _) = evaluate("gpu", &gpu(), &Reading::Unavailable("timeout".into()), None);
        assert_eq!(f[0].severity, Severity::Unknown);
    }

    #[test]
    fn counters_the_driver_lacks_are_not_judged() {
        let mut l = link(0, 1, [0; 3]);
        l.counters = [
            Value::NotSupported,
            Value::NotSupported,
            Value::NotSupported,
        ];
        let (f, kept) = evaluate("gpu", &gpu(), &Reading::Links(vec![l]), None);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(kept, Some([(0, [None; 3])].into()));
    }
}
