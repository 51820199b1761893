//! The replay file: rows gathered as small structs, sorted once by time,
//! formatted into one buffer without per-row allocation.

use super::metrics::{reported, value, NAMES};
use super::plan::JobPlan;
use super::rng::Rng;
use super::state::sample;
use std::io::Write;

const CHUNK: usize = 1 << 20;

/// One sample: a value in hundredths, so that formatting needs no floats.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    pub time: i64,
    /// Index of the (job, node) series' "job,node," prefix.
    pub series: u32,
    pub metric: u8,
    pub centi: i64,
}

/// Every row of one job; `prefixes` gets the job's "job,node," strings.
pub(crate) fn job_rows(
    job: &JobPlan,
    rng: &mut Rng,
    prefixes: &mut Vec<String>,
    rows: &mut Vec<Row>,
) {
    for (i, node) in job.nodes.iter().enumerate() {
        let series = prefixes.len() as u32;
        prefixes.push(format!("{},{},", job.id, node.name));
        let mut t = node.from.max(job.start) + node.phase;
        while t < node.until.min(job.end) {
            if let Some(s) = sample(job, i, t) {
                for id in reported(node.dcgm, node.extra, s.gpu) {
                    if node.drop_p > 0.0 && rng.chance(node.drop_p) {
                        continue;
                    }
                    let v = value(id, &s, &job.profile, rng);
                    rows.push(Row {
                        time: t + node.skew,
                        series,
                        metric: id as u8,
                        centi: (v * 100.0).round() as i64,
                    });
                }
            }
            t += node.interval;
        }
    }
}

fn push_int(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// A plain decimal: "12", "0.5", "-3.25".
fn push_centi(buf: &mut Vec<u8>, centi: i64) {
    if centi < 0 {
        buf.push(b'-');
    }
    let a = centi.unsigned_abs();
    push_int(buf, a / 100);
    let frac = a % 100;
    if frac != 0 {
        buf.push(b'.');
        buf.push(b'0' + (frac / 10) as u8);
        if !frac.is_multiple_of(10) {
            buf.push(b'0' + (frac % 10) as u8);
        }
    }
}

/// A stable counting sort on the whole-second times: linear, and rows of
/// one second keep their generation order (job, node, metric), so the file
/// is the same for a seed on every run.
fn by_time(rows: &[Row]) -> Vec<Row> {
    let (Some(lo), Some(hi)) = (
        rows.iter().map(|r| r.time).min(),
        rows.iter().map(|r| r.time).max(),
    ) else {
        return Vec::new();
    };
    let mut starts = vec![0usize; (hi - lo + 2) as usize];
    for r in rows {
        starts[(r.time - lo + 1) as usize] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut sorted = vec![rows[0]; rows.len()];
    for r in rows {
        let slot = &mut starts[(r.time - lo) as usize];
        sorted[*slot] = *r;
        *slot += 1;
    }
    sorted
}

/// Sorts the rows by time and writes the CSV.
pub(crate) fn write_rows(
    rows: &[Row],
    prefixes: &[String],
    out: &mut impl Write,
) -> std::io::Result<()> {
    let rows = by_time(rows);
    // Written in 1 MiB chunks: one 150 MB buffer costs more in page faults
    // and copies than the formatting itself.
    let mut buf = Vec::with_capacity(CHUNK + 256);
    buf.extend_from_slice(b"time,job,node,metric,value\n");
    for r in &rows {
        if r.time < 0 {
            buf.push(b'-');
        }
        push_int(&mut buf, r.time.unsigned_abs());
        buf.push(b',');
        buf.extend_from_slice(prefixes[r.series as usize].as_bytes());
        buf.extend_from_slice(NAMES[r.metric as usize].as_bytes());
        buf.push(b',');
        push_centi(&mut buf, r.centi);
        buf.push(b'\n');
        if buf.len() >= CHUNK {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}
