//! Precision and recall of the lemon test over many generated histories:
//! the README's table (seeds 1-20). For each multiplier of the lemons'
//! hardware hazard it prints the lemons found, the nodes flagged, the
//! confounders flagged, and what an oracle that knew every hardware failure
//! no check caught would find with the same gate (3 failures, or 2 that
//! Slurm saw, on 2 days in the 28-day window): the ceiling of any detector
//! on these histories. Last, the reliability report's hardware-failure
//! count over the same 28 days as a share of the failures planted in them
//! (lowest and highest seed).
//!
//! Each multiplier runs twice: on sacct and sacctmgr events alone, and with
//! the SPANK plugin's task exits in a shared spool.
//!
//!     cargo run --release -p lemonade-bench --bin blame [SEEDS]

use lemon::reliability::{load::load_jobs, TimeRange};
use lemon::{app, db, ingest};
use lemonade_config::Config;
use lemonade_sql::rusqlite::Connection;
use lemonade_tests::history::{generate, spool_records, HistorySpec, HistoryTruth};
use std::collections::BTreeSet;
use std::time::Duration;

/// Lemons with at least 3 hardware failures no check caught (or 2 that
/// Slurm saw), on 2 days, in the window that ends at `until`.
fn oracle(truth: &HistoryTruth, until: i64) -> usize {
    let since = until - 28 * 86_400;
    truth
        .lemons
        .iter()
        .filter(|lemon| {
            let uncaught: Vec<_> = truth
                .hardware
                .iter()
                .filter(|h| &h.node == *lemon && !h.caught && h.end >= since)
                .collect();
            let seen = uncaught.iter().filter(|h| h.slurm_saw).count();
            let days: BTreeSet<i64> = uncaught.iter().map(|h| h.end / 86_400).collect();
            (uncaught.len() >= 3 || seen >= 2) && days.len() >= 2
        })
        .count()
}

/// The reliability report's hardware failures over its last 28 days, as a
/// share of the failures planted in them.
fn reported_share(conn: &Connection, config: &Config, truth: &HistoryTruth) -> f64 {
    let until = chrono::DateTime::from_timestamp(truth.end + 1, 0).expect("a valid time");
    let range = TimeRange::last_days(until, 28);
    let params = app::attribution_params(config);
    let loaded = load_jobs(conn, range, None, &params).expect("reliability jobs");
    let found = loaded
        .jobs
        .iter()
        .filter(|j| j.is_hardware_failure())
        .count();
    let planted = truth.hardware_between(range.since.timestamp(), range.until.timestamp());
    found as f64 / planted.max(1) as f64
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SEEDS: a number of seeds"))
        .unwrap_or(20);
    let config = Config::default();
    println!("seeds 1-{seeds}, default [lemon] settings");
    for (factor, task_exits) in [3.0, 10.0, 30.0, 80.0]
        .into_iter()
        .flat_map(|f| [(f, false), (f, true)])
    {
        let (mut found, mut flagged, mut planted, mut confounders, mut best) = (0, 0, 0, 0, 0);
        let (mut report_low, mut report_high) = (f64::INFINITY, 0.0f64);
        for seed in 1..=seeds {
            let dir = tempfile::tempdir().expect("temporary directory");
            let mut conn =
                db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).expect("lemon.db");
            let (mut jobs, mut events) = (Vec::new(), Vec::new());
            let spec = HistorySpec {
                task_exits,
                ..HistorySpec::realistic(seed, factor)
            };
            let truth = generate(&spec, &mut jobs, &mut events).expect("generate");
            ingest::sacct::ingest_reader(&conn, &jobs[..], "jobs", truth.end).expect("ingest");
            let events = String::from_utf8(events).expect("events are text");
            ingest::events::ingest_text(&mut conn, &events, "events").expect("ingest events");
            let mut nodes = db::NodeIds::load(&conn).expect("nodes");
            for records in spool_records(&truth).values() {
                ingest::spool::ingest_records(&mut conn, &mut nodes, records).expect("spool");
            }
            let now = truth.end + 60;
            let scores = app::score(&conn, &config, now).expect("score");
            for v in scores.flagged() {
                flagged += 1;
                let node = &v.signals.node;
                if truth.lemons.contains(node) {
                    found += 1;
                } else if truth.confounder_nodes.contains(node) {
                    confounders += 1;
                }
            }
            planted += truth.lemons.len();
            best += oracle(&truth, now);
            let share = reported_share(&conn, &config, &truth);
            report_low = report_low.min(share);
            report_high = report_high.max(share);
        }
        let precision = if flagged == 0 {
            "n/a".to_string()
        } else {
            format!("{:.2}", found as f64 / flagged as f64)
        };
        let source = if task_exits {
            "+ task exits"
        } else {
            "sacct, events"
        };
        println!(
            "{factor:>3}x {source:<13}: found {found} of {planted} lemons (recall {:.2}), flagged {flagged} (precision {precision}), confounders flagged {confounders}, oracle {best} ({:.2}); reliability report: {report_low:.2}-{report_high:.2} of the planted hardware failures",
            found as f64 / planted as f64,
            best as f64 / planted as f64
        );
    }
}
