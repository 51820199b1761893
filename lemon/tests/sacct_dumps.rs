//! `lemon ingest --sacct-file` on dumps in the shapes administrators have:
//! a header with the full field list, steps, fields over several lines or
//! holding `|`, invalid UTF-8, jobs across daylight-saving changes. The
//! fixtures are `tests/fixtures/sacct/` (written by its `generate.py`); each
//! test checks the jobs that land in lemon.db.

use lemon::db;
use lemon::ingest::sacct;
use lemon::ingest::time_zone::Zone;
use lemon::ingest::IngestStats;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sacct")
        .join(name)
}

/// A stored run, as the tests compare it.
#[derive(Debug, PartialEq)]
struct Job {
    id: String,
    nodes: Vec<String>,
    state: String,
    start: Option<i64>,
    end: i64,
    elapsed: Option<i64>,
    name: Option<String>,
}

/// Ingests one fixture with ISO times in `zone`; the stats and the stored runs by end.
fn ingest(name: &str, zone: &str) -> (IngestStats, Vec<Job>) {
    let dir = tempfile::tempdir().unwrap();
    let conn = db::open(&dir.path().join("lemon.db"), Duration::from_secs(5)).unwrap();
    let file = std::fs::File::open(fixture(name)).unwrap();
    let stats = sacct::ingest_reader_in(
        &conn,
        std::io::BufReader::new(file),
        name,
        0,
        &Zone::parse(zone).unwrap(),
    )
    .unwrap();
    (stats, jobs(&conn))
}

fn jobs(conn: &lemonade_sql::rusqlite::Connection) -> Vec<Job> {
    let mut stmt = conn
        .prepare(
            "SELECT j.job_id, j.state, j.start_time, j.end_time, j.elapsed_s, j.job_name,
                    (SELECT group_concat(name, ',') FROM
                        (SELECT n.name FROM job_nodes_all a JOIN nodes n ON n.id = a.node
                         WHERE a.job = j.id ORDER BY n.name))
             FROM jobs j ORDER BY j.end_time, j.job_id_raw",
        )
        .unwrap();
    stmt.query_map([], |r| {
        let nodes: Option<String> = r.get(6)?;
        Ok(Job {
            id: r.get(0)?,
            state: r.get(1)?,
            start: r.get(2)?,
            end: r.get(3)?,
            elapsed: r.get(4)?,
            name: r.get(5)?,
            nodes: nodes
                .map(|n| n.split(',').map(String::from).collect())
                .unwrap_or_default(),
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Unix seconds of a UTC wall-clock time.
fn utc(s: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp()
}

fn job(id: &str, nodes: &[&str], state: &str, start: &str, end: &str, elapsed: i64) -> Job {
    Job {
        id: id.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        state: state.into(),
        start: Some(utc(start)),
        end: utc(end),
        elapsed: Some(elapsed),
        name: None,
    }
}

fn named(mut j: Job, name: &str) -> Job {
    j.name = Some(name.into());
    j
}

#[test]
fn a_full_header_dump_is_read_by_field_name() {
    // 109 fields as `sacct -P -o ALL` prints them; April in New York is UTC-4.
    let (stats, jobs) = ingest("full_header.txt", "America/New_York");
    assert_eq!(
        jobs,
        [
            named(
                job(
                    "1001",
                    &["gpu001"],
                    "COMPLETED",
                    "2021-04-05T06:07:20",
                    "2021-04-05T07:07:20",
                    3600
                ),
                "train"
            ),
            named(
                job(
                    "1002",
                    &["gpu002", "gpu003"],
                    "FAILED",
                    "2021-04-05T08:00:05",
                    "2021-04-05T08:10:05",
                    600
                ),
                "allreduce"
            ),
            named(
                job(
                    "1003",
                    &["gpu004"],
                    "NODE_FAIL",
                    "2021-04-05T09:00:00",
                    "2021-04-05T09:30:00",
                    1800
                ),
                "eval"
            ),
            named(
                job(
                    "1004_3",
                    &["gpu005"],
                    "CANCELLED",
                    "2021-04-05T10:00:00",
                    "2021-04-05T10:02:00",
                    120
                ),
                "sweep"
            ),
            // Across local midnight.
            named(
                job(
                    "1005",
                    &["gpu001"],
                    "TIMEOUT",
                    "2021-04-06T03:30:00",
                    "2021-04-06T04:30:00",
                    3600
                ),
                "nightly"
            ),
        ]
    );
    assert_eq!(
        (
            stats.rows_read,
            stats.allocations,
            stats.inserted,
            stats.unfinished
        ),
        (7, 5, 5, 2)
    );
    assert_eq!((stats.skipped, stats.steps_skipped), (0, 0));
    assert_eq!(stats.read_as.as_deref(), Some("the header's 109 fields"));
    assert_eq!(stats.time_zone.as_deref(), Some("America/New_York"));
}

#[test]
fn steps_are_skipped_and_counted_not_malformed() {
    // Without -X: .batch, .extern, .0, .1 rows after each allocation; Elapsed, no ElapsedRaw.
    let (stats, jobs) = ingest("with_steps.txt", "America/New_York");
    assert_eq!(
        jobs,
        [
            named(
                job(
                    "6539485",
                    &["gpu010", "gpu011"],
                    "COMPLETED",
                    "2021-04-05T14:00:00",
                    "2021-04-05T16:00:00",
                    7200
                ),
                "bert"
            ),
            named(
                job(
                    "6539486",
                    &["gpu012"],
                    "FAILED",
                    "2021-04-05T17:00:00",
                    "2021-04-05T17:05:00",
                    300
                ),
                "bert"
            ),
            named(
                job(
                    "6539490_1",
                    &["gpu013"],
                    "NODE_FAIL",
                    "2021-04-06T13:00:00",
                    "2021-04-07T14:30:00",
                    91_800
                ),
                "sweep"
            ),
        ]
    );
    assert_eq!(
        (stats.rows_read, stats.allocations, stats.steps_skipped),
        (12, 3, 9)
    );
    assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
}

#[test]
fn line_breaks_and_pipes_in_free_text_are_put_back_or_counted() {
    let (stats, jobs) = ingest("multiline.txt", "America/New_York");
    assert_eq!(
        jobs,
        [
            // A `--wrap` script over three lines.
            named(
                job(
                    "2001",
                    &["gpu020"],
                    "COMPLETED",
                    "2021-06-01T12:00:00",
                    "2021-06-01T12:10:00",
                    600
                ),
                "prep"
            ),
            // A shell pipe in SubmitLine: only there does the rest read as names.
            named(
                job(
                    "2002",
                    &["gpu021"],
                    "FAILED",
                    "2021-06-01T13:00:00",
                    "2021-06-01T13:01:00",
                    60
                ),
                "grep"
            ),
            // A `|` in the job name.
            named(
                job(
                    "2003",
                    &["gpu022", "gpu023"],
                    "NODE_FAIL",
                    "2021-06-01T14:00:00",
                    "2021-06-01T15:00:00",
                    3600
                ),
                "a|b"
            ),
            // A pipe and a line break.
            named(
                job(
                    "2004",
                    &["gpu024"],
                    "OUT_OF_MEMORY",
                    "2021-06-01T16:00:00",
                    "2021-06-01T16:30:00",
                    1800
                ),
                "etl"
            ),
            named(
                job(
                    "2007",
                    &["gpu027"],
                    "COMPLETED",
                    "2021-06-01T18:00:00",
                    "2021-06-01T18:00:30",
                    30
                ),
                "ok"
            ),
        ]
    );
    // 2005: `x|y` in Comment before User could be either; 2006: cut short.
    assert_eq!(stats.malformed_lines, [9, 10], "{:?}", stats.errors);
    assert!(
        stats.errors[0].1.contains("more than one field"),
        "{:?}",
        stats.errors
    );
    assert!(
        stats.errors[1].1.contains("fields, expected 13"),
        "{:?}",
        stats.errors
    );
    assert_eq!((stats.rows_read, stats.reassembled), (7, 2));
}

#[test]
fn invalid_utf8_is_replaced_counted_and_the_jobs_kept() {
    let (stats, jobs) = ingest("invalid_utf8.txt", "America/New_York");
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["3001", "3002", "3003", "3004"]);
    assert_eq!(jobs[0].name.as_deref(), Some("caf\u{fffd}-run"));
    assert!(jobs[2].name.as_deref().unwrap().contains('\u{fffd}'));
    assert_eq!(jobs[2].state, "NODE_FAIL");
    assert_eq!(jobs[2].nodes, ["gpu032"]);
    assert_eq!(jobs[2].elapsed, Some(40));
    assert_eq!(jobs[3].name.as_deref(), Some("日本語"));
    assert_eq!((stats.invalid_utf8, stats.skipped), (2, 0));
}

#[test]
fn jobs_across_daylight_saving_changes_keep_their_real_duration() {
    // New York: 2021-03-14 02:00 EST → 03:00 EDT; 2021-11-07 02:00 EDT → 01:00 EST.
    let (stats, jobs) = ingest("dst.txt", "America/New_York");
    assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
    assert_eq!(
        jobs,
        [
            // 01:50 EST to 03:10 EDT: 20 minutes, not 80.
            job(
                "4001",
                &["gpu040"],
                "FAILED",
                "2021-03-14T06:50:00",
                "2021-03-14T07:10:00",
                1200
            ),
            // 00:50 EDT to 01:10, the first one (ElapsedRaw 1200) ...
            job(
                "4002",
                &["gpu041"],
                "COMPLETED",
                "2021-11-07T04:50:00",
                "2021-11-07T05:10:00",
                1200
            ),
            // ... or the second one (ElapsedRaw 4800).
            job(
                "4003",
                &["gpu042"],
                "NODE_FAIL",
                "2021-11-07T04:50:00",
                "2021-11-07T06:10:00",
                4800
            ),
            // Started at the second 01:30 (EST), ended at 02:30 EST.
            job(
                "4004",
                &["gpu043"],
                "FAILED",
                "2021-11-07T06:30:00",
                "2021-11-07T07:30:00",
                3600
            ),
        ]
    );
}

#[test]
fn without_elapsed_the_duration_comes_from_start_and_end_across_the_change() {
    let (stats, jobs) = ingest("dst_no_elapsed.txt", "America/New_York");
    assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
    let got: Vec<(&str, Option<i64>, i64, Option<i64>)> = jobs
        .iter()
        .map(|j| (j.id.as_str(), j.start, j.end, j.elapsed))
        .collect();
    assert_eq!(
        got,
        [
            (
                "4001",
                Some(utc("2021-03-14T06:50:00")),
                utc("2021-03-14T07:10:00"),
                Some(1200)
            ),
            // Without Elapsed, a repeated 01:10 is read as the shorter run.
            (
                "4002",
                Some(utc("2021-11-07T04:50:00")),
                utc("2021-11-07T05:10:00"),
                Some(1200)
            ),
            (
                "4003",
                Some(utc("2021-11-07T04:50:00")),
                utc("2021-11-07T05:10:00"),
                Some(1200)
            ),
            (
                "4004",
                Some(utc("2021-11-07T06:30:00")),
                utc("2021-11-07T07:30:00"),
                Some(3600)
            ),
        ]
    );
    assert!(jobs.iter().all(|j| j.name.is_none()));
}

#[test]
fn the_same_dump_read_in_another_zone_moves_by_the_offset() {
    let (_, ny) = ingest("with_steps.txt", "America/New_York");
    let (_, utc_jobs) = ingest("with_steps.txt", "UTC");
    for (a, b) in ny.iter().zip(&utc_jobs) {
        assert_eq!(a.end - b.end, 4 * 3600, "{a:?} {b:?}");
        assert_eq!(a.elapsed, b.elapsed);
    }
}

// ---- through the binary: the summary, the flag, the config, the default ----

fn lemon(dir: &Path, config: &str, args: &[&str], tz: Option<&str>) -> (i32, String, String) {
    std::fs::write(dir.join("lemonade.toml"), config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lemon"));
    cmd.arg("--config")
        .arg(dir.join("lemonade.toml"))
        .arg("--db")
        .arg(dir.join("lemon.db"))
        .args(["ingest", "--no-slurm"])
        .args(args);
    match tz {
        Some(tz) => cmd.env("TZ", tz),
        None => cmd.env_remove("TZ"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stored_ends(dir: &Path) -> Vec<i64> {
    let conn = db::open(&dir.join("lemon.db"), Duration::from_secs(5)).unwrap();
    jobs(&conn).iter().map(|j| j.end).collect()
}

#[test]
fn ingest_prints_one_summary_with_counts_lines_and_the_zone() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("multiline.txt");
    let (code, out, err) = lemon(
        dir.path(),
        "",
        &[
            "--sacct-file",
            file.to_str().unwrap(),
            "--time-zone",
            "America/New_York",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "7 rows read: 5 allocations ingested (5 new), 0 steps skipped, 2 malformed (lines 9, 10); \
             times in America/New_York"
        ),
        "{out}"
    );
    assert!(out.contains("read with the header's 13 fields"), "{out}");
    assert!(
        out.contains("2 records put back together from several lines"),
        "{out}"
    );
    assert!(out.contains("no AllocTRES (GPU counts)"), "{out}");
    assert!(out.contains("multiline.txt:9: "), "{out}");

    let steps = fixture("with_steps.txt");
    let (code, out, _) = lemon(
        dir.path(),
        "",
        &[
            "--sacct-file",
            steps.to_str().unwrap(),
            "--time-zone",
            "UTC",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("12 rows read: 3 allocations ingested (3 new), 9 steps skipped, 0 malformed; times in UTC"),
        "{out}"
    );
}

#[test]
fn the_zone_comes_from_the_config_when_no_flag_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("dst.txt");
    let (code, out, _) = lemon(
        dir.path(),
        "[lemon]\ntime_zone = \"America/New_York\"\n",
        &["--sacct-file", file.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("times in America/New_York"), "{out}");
    assert_eq!(stored_ends(dir.path())[0], utc("2021-03-14T07:10:00"));

    // A wrong name is one clear error, before anything is read.
    let other = tempfile::tempdir().unwrap();
    let (code, out, err) = lemon(
        other.path(),
        "[lemon]\ntime_zone = \"America/Gotham\"\n",
        &["--sacct-file", file.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("[lemon] time_zone") && err.contains("America/Gotham"),
        "{err}"
    );
}

#[test]
fn by_default_iso_times_are_local_time() {
    // A POSIX TZ rule for New York: no zoneinfo file needed.
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("dst.txt");
    let (code, out, _) = lemon(
        dir.path(),
        "",
        &["--sacct-file", file.to_str().unwrap()],
        Some("EST5EDT,M3.2.0,M11.1.0"),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("times in local time zone (TZ=EST5EDT,M3.2.0,M11.1.0)"),
        "{out}"
    );
    assert_eq!(
        stored_ends(dir.path()),
        [
            utc("2021-03-14T07:10:00"),
            utc("2021-11-07T05:10:00"),
            utc("2021-11-07T06:10:00"),
            utc("2021-11-07T07:30:00"),
        ]
    );
}

#[test]
fn a_header_without_a_needed_field_is_one_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("no_end.txt");
    let (code, out, _) = lemon(
        dir.path(),
        "",
        &["--sacct-file", file.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{out}");
    let failures: Vec<&str> = out.lines().filter(|l| l.contains("FAILED")).collect();
    assert_eq!(failures.len(), 1, "{out}");
    assert!(
        failures[0].contains("no_end.txt: the header has no End field"),
        "{out}"
    );
    assert!(stored_ends(dir.path()).is_empty());
}
