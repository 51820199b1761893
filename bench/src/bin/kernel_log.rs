//! The kernel-log read as it happens on a node: `/dev/kmsg` is a character
//! device that gives one record per `read()` and cannot seek to a sequence
//! number, so every run of the XID check reads the whole ring buffer from its
//! oldest record and skips those up to its cursor.
//!
//! No test machine has a full ring (this one holds a few hundred records), so
//! a stand-in drives the check's own record loop (`kmsg::read_records`, the
//! code `read_device` runs) with a 16 MB ring: one `pread(2)` per record from
//! a file in the page cache, one system call per record as on the device. The
//! real device's cost per record is measured on this machine's own
//! `/dev/kmsg` (when readable) and shown beside it, since the kernel formats
//! each record it returns and the stand-in only copies it.
//!
//! `cargo run --release -p lemonade-bench --bin kernel_log`

use healthcheck::checks::xid::kmsg::{self, Cursor, Entry};
use lemonade_bench::kernel_log;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// A full ring buffer on a node booted with `log_buf_len=16M`.
const RING_BYTES: u64 = 16 * 1024 * 1024;
const RUNS: usize = 15;
/// A ceiling against regressions, not a target: the kernel's per-record
/// `read` is most of it (see the README), and a 16 MB ring is the far end of
/// what sites configure (the default is 128 KiB to a few MB).
const LIMIT: Duration = Duration::from_millis(250);

/// The device stand-in: one record per `read`, by one `pread(2)`.
struct Ring<'a> {
    file: &'a File,
    records: &'a [(u64, usize)],
    next: usize,
}

impl Read for Ring<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(&(offset, len)) = self.records.get(self.next) else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        self.next += 1;
        self.file.read_at(&mut buf[..len], offset)
    }
}

/// The same ring from memory: no system call, so what is left is our own
/// share of the cost (header parse, skip, filter).
struct InMemory<'a> {
    bytes: &'a [u8],
    records: &'a [(u64, usize)],
    next: usize,
}

impl Read for InMemory<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(&(offset, len)) = self.records.get(self.next) else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        self.next += 1;
        buf[..len].copy_from_slice(&self.bytes[offset as usize..offset as usize + len]);
        Ok(len)
    }
}

/// What the XID check does with each record: keep the driver's.
fn run(device: &mut dyn Read, cursor: Option<Cursor>) -> (Duration, u64, usize, Option<Cursor>) {
    let driver = memchr::memmem::Finder::new(b"NVRM:");
    let mut kept = 0usize;
    let start = Instant::now();
    let summary = kmsg::read_records(device, cursor, &mut |e: &Entry| {
        if driver.find(e.message).is_some() {
            kept += 1;
        }
    })
    .expect("read the ring");
    (start.elapsed(), summary.bytes_read, kept, summary.cursor)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("ring");
    let mut records = Vec::new();
    let mut offset = 0u64;
    let mut out = io::BufWriter::new(File::create(&path).expect("ring file"));
    kernel_log::write(&mut out, "", RING_BYTES, |r| {
        records.push((offset, r.len()));
        offset += r.len() as u64;
    })
    .expect("write the ring");
    drop(out);
    let file = File::open(&path).expect("ring file");
    let ring = || Ring {
        file: &file,
        records: &records,
        next: 0,
    };
    println!(
        "ring: {:.1} MB, {} records (stand-in: one pread(2) per record)",
        offset as f64 / 1e6,
        records.len()
    );

    // A first run (no cursor: every record is new) and the every-run case
    // (cursor at the newest record: every record is read and skipped).
    run(&mut ring(), None);
    let (_, _, _, last) = run(&mut ring(), None);
    let bytes = std::fs::read(&path).expect("ring file");
    let mut first = Vec::new();
    let mut current = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..RUNS {
        first.push(run(&mut ring(), None).0);
        current.push(run(&mut ring(), last).0);
        let mut memory = InMemory {
            bytes: &bytes,
            records: &records,
            next: 0,
        };
        ours.push(run(&mut memory, last).0);
    }
    let ours = median(ours);
    let per_record = |d: Duration| d.as_secs_f64() * 1e6 / records.len() as f64;
    let (first, current) = (median(first), median(current));
    let verdict = if current <= LIMIT { "met" } else { "MISSED" };
    println!(
        "{:<48} median {:>8.2} ms  ({:.2} us/record, {RUNS} runs)",
        "16 MB ring, no cursor (first run after boot)",
        first.as_secs_f64() * 1e3,
        per_record(first)
    );
    println!(
        "{:<48} median {:>8.2} ms  ({:.2} us/record, {RUNS} runs)  (limit {} ms: {verdict})",
        "16 MB ring, cursor current (every run)",
        current.as_secs_f64() * 1e3,
        per_record(current),
        LIMIT.as_millis()
    );
    println!(
        "    of which our own loop (same ring from memory, no system call): {:.2} ms ({:.2} us/record)",
        ours.as_secs_f64() * 1e3,
        per_record(ours)
    );
    real_device(records.len());
}

/// The same loop on this machine's own `/dev/kmsg`: the kernel's cost per
/// record, and what a 16 MB ring would cost at that rate.
fn real_device(ring_records: usize) {
    let path = Path::new("/dev/kmsg");
    if File::open(path).is_err() {
        println!("/dev/kmsg: not readable here; no figure for the real device");
        return;
    }
    let mut times = Vec::new();
    let mut count = 0u64;
    for _ in 0..RUNS * 10 {
        let start = Instant::now();
        let mut n = 0u64;
        kmsg::read_device(path, None, &mut |_| n += 1).expect("read /dev/kmsg");
        times.push(start.elapsed());
        count = n;
    }
    if count == 0 {
        println!("/dev/kmsg: empty here; no figure for the real device");
        return;
    }
    let t = median(times);
    let us = t.as_secs_f64() * 1e6 / count as f64;
    println!(
        "{:<48} median {:>8.2} ms  ({us:.2} us/record over its {count} records, open included)",
        "this machine's /dev/kmsg, no cursor",
        t.as_secs_f64() * 1e3,
    );
    println!(
        "    at that rate a 16 MB ring ({ring_records} records) costs about {:.0} ms per run",
        us * ring_records as f64 / 1e3
    );
}
