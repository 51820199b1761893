//! `xid`: NVIDIA XID errors in the kernel log.
//!
//! Each run reads the kernel log from where the previous run stopped (the
//! cursor in the check's state: boot id, sequence number, byte offset for
//! files), records every XID line once as an event, and reports per GPU the
//! XIDs since boot that still count: `down` ones until reboot, the others for
//! their severity's window, repeats of 13/31 escalated.
//!
//! * [`kmsg`]: the kernel log reader (device or file, from a cursor);
//! * [`forms`]: the text forms of a kernel log file (kmsg records, `dmesg`,
//!   `dmesg -T`, `dmesg --time-format iso`, `journalctl -k -o short-iso`);
//! * [`kernel_log`]: host hardware errors matched in the same pass (MCE,
//!   EDAC, block I/O, filesystem, NFS);
//! * [`faults`] and [`sxid`]: kernel and fabric faults matched in the same
//!   pass (NVSwitch SXids, CPER records, hung tasks, soft lockups, peer
//!   memory, NVRM lines without an XID);
//! * [`parse`]: the driver's line formats;
//! * [`catalog`]: severity and action per XID, from [`catalog_table`],
//!   generated from NVIDIA's catalog in `nvidia/`;
//! * [`nvlink5`]: the sub-codes of XIDs 144–150, from [`nvlink5_table`],
//!   generated from NVIDIA's decode sheet in `nvidia/`;
//! * [`gpus`]: bus id → `gpuN`;
//! * [`evaluate`]: the pure step and the state.

pub mod catalog;
#[cfg(test)]
mod catalog_source;
// Generated; its long rows stay one per XID.
#[rustfmt::skip]
pub mod catalog_table;
pub mod evaluate;
pub mod faults;
pub mod forms;
pub mod gpus;
pub mod kernel_log;
pub mod kmsg;
pub mod nvlink5;
// Generated; its long rows stay one per sub-code.
#[rustfmt::skip]
pub mod nvlink5_table;
pub mod parse;
pub mod sxid;
pub mod tally;

use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::root::{NodeRoot, ReadError};
use evaluate::{Gathered, XidState};
use kmsg::KmsgRecord;
use lemonade_config::{Config, XidSettings};
use std::path::{Path, PathBuf};

/// Changes on every boot; a new one starts the cursor and the history over.
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// Its `btime` line turns kernel timestamps (since boot) into wall time.
pub const PROC_STAT: &str = "/proc/stat";

/// The XID check.
pub struct Xid;

impl Check for Xid {
    fn name(&self) -> &'static str {
        "xid"
    }
    fn summary(&self) -> &'static str {
        "NVIDIA XID errors in the kernel log since boot, per GPU; in the same pass NVSwitch SXids, CPER records, hung tasks, soft lockups, peer-memory errors, MCE, EDAC, block I/O, filesystem and NFS errors"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.xid;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let settings = &ctx.config.checks.xid;
        let previous: XidState = previous_state(ctx);
        let gathered = gather(&ctx.root, settings, &previous)?;
        let e = evaluate::evaluate(&gathered, settings, previous, ctx.now.timestamp());
        Ok(CheckOutput {
            findings: e.findings,
            state: serde_json::to_value(&e.state).ok(),
            events: e.events,
        })
    }

    /// The records of a kmsg device, in record format, at the configured
    /// path: replaying the snapshot reads them back as a regular file. A
    /// regular file source is captured as a file the check read.
    fn snapshot_files(&self, ctx: &CheckContext) -> Vec<(PathBuf, Vec<u8>)> {
        let configured = &ctx.config.checks.xid.kmsg_file;
        let source = Source::of(&ctx.root, configured);
        let Some(node_path) = source.node_path else {
            return Vec::new();
        };
        if kmsg::kind_of(&source.real).ok() != Some(kmsg::SourceKind::Device) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let read = kmsg::read_device(&source.real, None, &mut |e| {
            out.extend_from_slice(e.raw);
            if !e.raw.ends_with(b"\n") {
                out.push(b'\n');
            }
        });
        match read {
            Ok(_) => vec![(node_path, out)],
            Err(_) => Vec::new(),
        }
    }
}

/// Where the kernel log comes from.
struct Source {
    /// As messages name it.
    name: String,
    /// The path to open on this machine.
    real: PathBuf,
    /// The node path, for a source under the root.
    node_path: Option<PathBuf>,
}

impl Source {
    /// An absolute path is a node path (under `--root`); a relative one is a
    /// file of this machine, for replaying a capture.
    fn of(root: &NodeRoot, configured: &Path) -> Source {
        if configured.is_absolute() {
            Source {
                name: configured.display().to_string(),
                real: root.path(configured),
                node_path: Some(configured.to_path_buf()),
            }
        } else {
            Source {
                name: configured.display().to_string(),
                real: configured.to_path_buf(),
                node_path: None,
            }
        }
    }
}

/// Reads what evaluation needs: boot id, boot time, the GPUs in sysfs and
/// the driver's kernel log lines after the previous run's cursor.
pub fn gather(
    root: &NodeRoot,
    settings: &XidSettings,
    previous: &XidState,
) -> Result<Gathered, CheckError> {
    let boot_id = root.read_value(BOOT_ID)?;
    let btime = read_btime(root)?;
    let gpus = gpus::nvidia_gpus(root)?;
    let source = Source::of(root, &settings.kmsg_file);
    let read_error = |source: std::io::Error| {
        CheckError::Read(ReadError {
            path: settings.kmsg_file.display().to_string(),
            source,
        })
    };
    let kind = kmsg::kind_of(&source.real).map_err(read_error)?;
    // Replays (another root, another file) must not continue a live cursor.
    let source_key = source.real.display().to_string();
    let continued = previous.boot_id == boot_id && previous.source == source_key;
    let cursor = if continued { previous.cursor } else { None };

    let mut keep = Keep::new(settings, btime, &gpus);
    let mut visit = |e: &kmsg::Entry| keep.entry(e);
    let read = match kind {
        kmsg::SourceKind::Device => kmsg::read_device(&source.real, cursor, &mut visit),
        kmsg::SourceKind::File => {
            if let Some(p) = &source.node_path {
                root.note(p);
            }
            kmsg::read_file(&source.real, cursor, &mut visit)
        }
    }
    .map_err(read_error)?;
    Ok(Gathered {
        boot_id,
        btime,
        source_name: source.name,
        source_key,
        records: keep.records,
        gpus,
        read,
        continued,
    })
}

/// Picks, in one pass, the records the check reads: the driver's lines, the
/// host's hardware errors, the kernel and fabric faults; never a line from an
/// earlier boot.
struct Keep<'g> {
    btime: i64,
    gpus: &'g [String],
    driver: memchr::memmem::Finder<'static>,
    host_lines: Option<kernel_log::Prefilter>,
    fault_lines: Option<faults::Prefilter>,
    /// The latest since-boot time seen: a file whose times start over went
    /// on into a later boot.
    last_ts: u64,
    records: Vec<KmsgRecord>,
}

impl<'g> Keep<'g> {
    fn new(settings: &XidSettings, btime: i64, gpus: &'g [String]) -> Keep<'g> {
        Keep {
            btime,
            gpus,
            driver: memchr::memmem::Finder::new(b"NVRM:"),
            host_lines: settings
                .kernel_log
                .enabled
                .then(kernel_log::Prefilter::default),
            fault_lines: settings
                .kernel_faults
                .enabled
                .then(faults::Prefilter::default),
            last_ts: 0,
            records: Vec::new(),
        }
    }

    fn entry(&mut self, e: &kmsg::Entry) {
        // A file's lines from an earlier boot are history the reboot ended:
        // by wall time, or by the since-boot clock starting over.
        if e.wall_s.is_some_and(|at| at < self.btime) {
            return;
        }
        if e.wall_s.is_none() {
            if e.ts_usec < self.last_ts {
                self.records.clear();
            }
            self.last_ts = e.ts_usec;
        }
        if self.wanted(e.message) {
            self.records.push(KmsgRecord {
                seq: e.seq,
                ts_usec: e.ts_usec,
                line: e.line,
                wall_s: e.wall_s,
                message: String::from_utf8_lossy(e.message).into_owned(),
            });
        }
    }

    fn wanted(&self, message: &[u8]) -> bool {
        self.driver.find(message).is_some()
            || self
                .host_lines
                .as_ref()
                .is_some_and(|p| p.might_match(message) && kernel_log::matches(message))
            || self.fault_lines.as_ref().is_some_and(|p| {
                p.might_match(message)
                    && faults::classify(&String::from_utf8_lossy(message), self.gpus).is_some()
            })
    }
}

fn read_btime(root: &NodeRoot) -> Result<i64, CheckError> {
    let stat = root.read_to_string(PROC_STAT)?;
    let line = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .ok_or_else(|| CheckError::malformed(PROC_STAT, "no `btime` line"))?;
    line.trim().parse().map_err(|_| {
        CheckError::malformed(
            PROC_STAT,
            format!("btime `{}` is not a number", line.trim()),
        )
    })
}
