//! Job evidence (issue 36): failed jobs' logs read at ingest from a headed
//! sacct dump with StdOut, StdErr and UID, their verdicts stored, and blame
//! that follows them.

use lemon::{db, ingest, signals};
use lemonade_sql::rusqlite::Connection;
use std::path::Path;
use std::time::Duration;

const HEADER: &str = "JobIDRaw|JobID|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|UID|AllocTRES|StdOut|StdErr";

fn my_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// One dump row of a run of `nodes` that failed with `state`, ending at
/// `end`, its output in `out` (also its StdErr).
fn row(id: i64, nodes: &str, n: usize, state: &str, end: i64, out: &Path) -> String {
    format!(
        "{id}|{id}|{nodes}|{n}|{state}|1:0|0:0|{s}|{s}|{end}|100|gpu|alice|{uid}|cpu=8,gres/gpu={g},node={n}|{p}|{p}",
        s = end - 100,
        uid = my_uid(),
        g = 8 * n,
        p = out.display()
    )
}

fn open(dir: &Path) -> Connection {
    db::open(&dir.join("lemon.db"), Duration::from_secs(5)).unwrap()
}

fn verdicts(conn: &Connection) -> Vec<(i64, String, Option<String>, Option<String>)> {
    let mut s = conn
        .prepare("SELECT j.job_id_raw, e.verdict, e.node, e.evidence1 FROM job_evidence e JOIN jobs j ON j.id = e.job ORDER BY 1")
        .unwrap();
    let rows = s
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn the_issue_s_dump_header_is_read_and_failed_runs_get_verdicts_from_their_logs() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let ecc = logs.join("slurm-1.out");
    std::fs::write(
        &ecc,
        "[rank9]: step 100 loss 2.31\n[rank9]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    )
    .unwrap();
    let bug = logs.join("slurm-2.out");
    std::fs::write(
        &bug,
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    import flash_attn\nModuleNotFoundError: No module named 'flash_attn'\n",
    )
    .unwrap();
    let dump = [
        HEADER.to_string(),
        row(1, "gpu[001-002]", 2, "FAILED", 10_000, &ecc),
        row(2, "gpu003", 1, "FAILED", 10_100, &bug),
        row(3, "gpu004", 1, "COMPLETED", 10_200, &bug),
        row(4, "gpu004", 1, "FAILED", 10_300, &logs.join("missing.out")),
    ]
    .join("\n");
    let conn = open(dir.path());
    let stats = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(
        (stats.inserted, stats.skipped),
        (4, 0),
        "{:?}",
        stats.errors
    );
    let got = verdicts(&conn);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0].1.as_str(), got[0].2.as_deref()),
        ("hardware", Some("gpu002"))
    );
    assert!(got[0].3.as_deref().unwrap().contains("uncorrectable ECC"));
    assert_eq!(got[1].1, "user");
    assert!(got[1].3.as_deref().unwrap().contains("ModuleNotFoundError"));
    assert_eq!(stats.job_logs.skipped.get("no_log"), Some(&1));
    let summary = ingest::IngestReport {
        sources: vec![("jobs".into(), stats)],
        failures: vec![],
    }
    .text();
    assert!(
        summary.contains("job logs of 3 failed runs") && summary.contains("1 no_log"),
        "{summary}"
    );
}

#[test]
fn a_hardware_line_blames_its_node_only_and_a_traceback_blames_none() {
    let dir = tempfile::tempdir().unwrap();
    let ecc = dir.path().join("a.out");
    std::fs::write(
        &ecc,
        "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    )
    .unwrap();
    let bug = dir.path().join("b.out");
    std::fs::write(&bug, "Traceback (most recent call last):\nKeyError: 'lr'\n").unwrap();
    let dump = [
        HEADER.to_string(),
        row(1, "gpu[001-004]", 4, "FAILED", 10_000, &ecc),
        row(2, "gpu005", 1, "FAILED", 10_100, &bug),
    ]
    .join("\n");
    let conn = open(dir.path());
    ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    let w = signals::attribute_range(&conn, 0, 20_000, &Default::default(), &|_| i64::MIN).unwrap();
    let names = db::node_names(&conn).unwrap();
    let by_job: Vec<(i64, Option<&str>, &str, &str)> = w
        .runs
        .iter()
        .zip(&w.attributions)
        .map(|(r, a)| {
            (
                r.job_id_raw,
                a.node.map(|n| names[&n].as_str()),
                a.rule.as_str(),
                a.detail.as_str(),
            )
        })
        .collect();
    assert_eq!(by_job[0].1, Some("gpu001"), "{by_job:?}");
    assert_eq!(by_job[0].2, "job_log");
    assert!(
        by_job[0].3.contains("job log: hardware on gpu001")
            && by_job[0].3.contains("uncorrectable ECC"),
        "{by_job:?}"
    );
    assert_eq!((by_job[1].1, by_job[1].2), (None, "job_log_user"));
    assert!(w.attributions[0].is_hardware() && !w.attributions[1].is_hardware());
}

#[test]
fn a_symlinked_log_is_skipped_and_its_text_never_reaches_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(
        &secret,
        "[rank0]: RuntimeError: CUDA error: uncorrectable ECC error encountered SECRET-TEXT\n",
    )
    .unwrap();
    let link = dir.path().join("slurm-1.out");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let dump = [
        HEADER.to_string(),
        row(1, "gpu001", 1, "FAILED", 10_000, &link),
    ]
    .join("\n");
    let conn = open(dir.path());
    let stats = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(stats.job_logs.skipped.get("symlink"), Some(&1), "{stats:?}");
    assert!(verdicts(&conn).is_empty());
    drop(conn);
    let bytes = std::fs::read(dir.path().join("lemon.db")).unwrap();
    assert!(!bytes.windows(11).any(|w| w == b"SECRET-TEXT"));
}

#[test]
fn a_fifo_as_log_is_skipped_without_blocking_the_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slurm-1.out");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let dump = [
        HEADER.to_string(),
        row(1, "gpu001", 1, "FAILED", 10_000, &fifo),
    ]
    .join("\n");
    let conn = open(dir.path());
    let stats = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(
        stats.job_logs.skipped.get("not_regular"),
        Some(&1),
        "{stats:?}"
    );
    assert_eq!(stats.inserted, 1);
}

#[test]
fn re_ingesting_the_same_dump_reads_no_log_twice() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.out");
    std::fs::write(&out, "Traceback (most recent call last):\nKeyError: 'lr'\n").unwrap();
    let dump = [
        HEADER.to_string(),
        row(1, "gpu001", 1, "FAILED", 10_000, &out),
    ]
    .join("\n");
    let conn = open(dir.path());
    let first = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    let again = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(first.job_logs.runs_with_logs, 1);
    assert_eq!(again.job_logs.runs_with_logs, 0);
    assert_eq!(verdicts(&conn).len(), 1);
}

#[test]
fn a_log_owned_by_another_uid_than_the_jobs_is_skipped_as_wrong_owner() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.out");
    std::fs::write(
        &out,
        "[rank0]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
    )
    .unwrap();
    let other = my_uid() + 1;
    let dump = [
        HEADER.to_string(),
        row(1, "gpu001", 1, "FAILED", 10_000, &out).replace(
            &format!("|alice|{}|", my_uid()),
            &format!("|alice|{other}|"),
        ),
    ]
    .join("\n");
    let conn = open(dir.path());
    let stats = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(
        stats.job_logs.skipped.get("wrong_owner"),
        Some(&1),
        "{stats:?}"
    );
    assert!(verdicts(&conn).is_empty());
    assert!(stats
        .job_logs
        .summary()
        .unwrap()
        .contains("logs skipped: 1 wrong_owner"));
}

#[test]
fn a_log_of_a_user_with_no_uid_anywhere_is_skipped_as_unknown_user() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.out");
    std::fs::write(&out, "Traceback (most recent call last):\nKeyError: 'lr'\n").unwrap();
    // No UID column, and a user the passwd database does not know: whose
    // file the log should be is unknown, so it is not read.
    let dump = [
        HEADER.replace("|UID", ""),
        row(1, "gpu001", 1, "FAILED", 10_000, &out).replace(
            &format!("|alice|{}|", my_uid()),
            "|no-such-user-lemonade-test|",
        ),
    ]
    .join("\n");
    let conn = open(dir.path());
    let stats = ingest::sacct::ingest_reader(&conn, dump.as_bytes(), "dump", 20_000).unwrap();
    assert_eq!(stats.inserted, 1, "{:?}", stats.errors);
    assert_eq!(
        stats.job_logs.skipped.get("unknown_user"),
        Some(&1),
        "{stats:?}"
    );
    assert!(verdicts(&conn).is_empty());
}

// ---- Paths from slurmctld when sacct names none (Slurm before 23.02) -----

mod held_jobs {
    use super::*;
    use lemonade_slurm::command::SlurmCommands;
    use std::os::unix::fs::PermissionsExt;

    /// A Slurm 22.05 as lemon sees it: sacct refuses StdOut, squeue lists
    /// the held jobs (`squeue.txt`, or fails when `squeue.fail` exists),
    /// scontrol prints `show-JOB.txt` for a held job and logs its argv.
    fn slurm(dir: &Path, rows: &[String]) -> SlurmCommands {
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let header = "JobIDRaw|JobID|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|AllocTRES|JobName";
        std::fs::write(
            dir.join("sacct.txt"),
            format!("{header}\n{}\n", rows.join("\n")),
        )
        .unwrap();
        let d = dir.display();
        for (name, body) in [
            (
                "sacct",
                format!("case \"$*\" in *StdOut*) echo 'sacct: error: Invalid field requested: \"StdOut\"' >&2; exit 1;; esac\ncat {d}/sacct.txt"),
            ),
            ("squeue", format!("[ -e {d}/squeue.fail ] && {{ echo 'squeue: error: Socket timed out' >&2; exit 1; }}\ncat {d}/squeue.txt")),
            (
                "scontrol",
                format!("echo \"$*\" >> {d}/scontrol.log\ncat {d}/show-$3.txt 2>/dev/null || {{ echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; }}"),
            ),
        ] {
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        SlurmCommands::new(bin, None, Duration::from_secs(10))
    }

    fn me() -> String {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .unwrap()
            .unwrap()
            .name
    }

    fn failed(id: i64, nodes: &str, n: usize) -> String {
        format!(
            "{id}|{id}|{nodes}|{n}|FAILED|1:0|0:0|98900|98900|99000|100|gpu|{}|cpu=2,node={n}|train",
            me()
        )
    }

    fn show_job(dir: &Path, id: i64, std_out: &str) {
        std::fs::write(
            dir.join(format!("show-{id}.txt")),
            format!("JobId={id} JobName=train\n   UserId={u}(0) GroupId={u}(0)\n   StdErr={std_out}\n   StdIn=/dev/null\n   StdOut={std_out}\n   Power=\n\n", u = me()),
        )
        .unwrap();
    }

    #[test]
    fn a_held_jobs_log_is_found_through_scontrol_and_its_patterns_expanded_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Job 5: `%N` left by scontrol is the allocation's first node.
        std::fs::write(
            d.join("gpu001-5.out"),
            "[rank0]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
        )
        .unwrap();
        show_job(d, 5, &format!("{}/%N-5.out", d.display()));
        // Job 6: a per-task pattern names no one file: refused, not guessed.
        show_job(d, 6, &format!("{}/%t.out", d.display()));
        // Job 7 is no longer held (purged after MinJobAge): never asked.
        std::fs::write(d.join("squeue.txt"), "5\n6\n").unwrap();
        let slurm = slurm(
            d,
            &[
                failed(5, "gpu[001-002]", 2),
                failed(6, "gpu003", 1),
                failed(7, "gpu004", 1),
            ],
        );
        let conn = open(d);
        let stats =
            ingest::sacct::ingest_from_slurm(&conn, &slurm, 100_000, 1, 1000, None).unwrap();
        assert_eq!(stats.inserted, 3, "{stats:?}");
        let logs = &stats.job_logs;
        assert_eq!(
            (logs.runs_with_logs, logs.named_by_scontrol),
            (1, 1),
            "{logs:?}"
        );
        assert_eq!(logs.skipped.get("unknown_pattern"), Some(&1), "{logs:?}");
        assert!(logs.summary().unwrap().contains("(1 named by scontrol)"));
        let got = verdicts(&conn);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (got[0].0, got[0].1.as_str(), got[0].2.as_deref()),
            (5, "hardware", Some("gpu001"))
        );
        let asked = std::fs::read_to_string(d.join("scontrol.log")).unwrap();
        assert_eq!(asked, "show job 5\nshow job 6\n");
    }

    #[test]
    fn a_slurmctld_that_does_not_answer_costs_one_try_and_is_named_in_the_summary() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("squeue.fail"), "").unwrap();
        let slurm = slurm(d, &[failed(5, "gpu001", 1), failed(6, "gpu002", 1)]);
        let conn = open(d);
        let stats =
            ingest::sacct::ingest_from_slurm(&conn, &slurm, 100_000, 1, 1000, None).unwrap();
        assert_eq!(stats.inserted, 2, "{stats:?}");
        let summary = stats.job_logs.summary().unwrap_or_default();
        assert!(
            summary.contains("slurmctld not asked for paths")
                && summary.contains("Socket timed out"),
            "{summary}"
        );
        assert!(!d.join("scontrol.log").exists());
        assert!(verdicts(&conn).is_empty());
    }
}

// ---- Detection on generated histories with logs -------------------------

mod detection {
    use super::*;
    use lemon::app;
    use lemonade_config::Config;
    use lemonade_tests::history::{generate, spool_records, Detection, HistorySpec, HistoryTruth};
    use lemonade_tests::job_logs::with_job_logs;

    struct Fixture {
        _dir: tempfile::TempDir,
        conn: Connection,
        truth: HistoryTruth,
    }

    /// How a history's jobs are given to ingest.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Logs {
        /// The fixed fields, as before issue 36.
        NoColumns,
        /// A headed dump with StdOut and StdErr, whose files are gone.
        Deleted,
        /// A headed dump with StdOut and StdErr and the files.
        Written,
    }

    /// The history of `spec` ingested as `logs` says.
    fn load(spec: &HistorySpec, logs: Logs) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(dir.path());
        let (mut jobs, mut events) = (Vec::new(), Vec::new());
        let truth = generate(spec, &mut jobs, &mut events).unwrap();
        let log_dir = dir.path().join("logs");
        if logs != Logs::NoColumns {
            std::fs::create_dir(&log_dir).unwrap();
            let (dump, planted) =
                with_job_logs(&jobs, &truth, &log_dir, my_uid(), spec.seed).unwrap();
            eprintln!("seed {}: logs {planted:?}", spec.seed);
            jobs = dump;
        }
        if logs == Logs::Deleted {
            std::fs::remove_dir_all(&log_dir).unwrap();
        }
        let stats = ingest::sacct::ingest_reader(&conn, &jobs[..], "jobs", truth.end).unwrap();
        assert_eq!(stats.skipped, 0, "{:?}", stats.errors);
        eprintln!("seed {}: {:?}", spec.seed, stats.job_logs.summary());
        match logs {
            Logs::Written => assert!(stats.job_logs.verdicts.contains_key("hardware")),
            _ => assert!(stats.job_logs.verdicts.is_empty()),
        }
        ingest::events::ingest_text(&mut conn, &String::from_utf8(events).unwrap(), "events")
            .unwrap();
        let mut nodes = db::NodeIds::load(&conn).unwrap();
        for records in spool_records(&truth).values() {
            ingest::spool::ingest_records(&mut conn, &mut nodes, records).unwrap();
        }
        Fixture {
            _dir: dir,
            conn,
            truth,
        }
    }

    const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

    fn flagged(f: &Fixture) -> Vec<String> {
        let scores = app::score(&f.conn, &Config::default(), f.truth.end + 60).unwrap();
        scores.flagged().map(|v| v.signals.node.clone()).collect()
    }

    /// (lemons flagged, nodes flagged, lemons planted, confounders flagged).
    fn detection(factor: f64, logs: Logs) -> (usize, usize, usize, Vec<String>) {
        let mut d = Detection::default();
        for seed in SEEDS {
            let f = load(&HistorySpec::realistic(seed, factor), logs);
            let got = flagged(&f);
            d.add(seed, &f.truth, &got);
            eprintln!(
                "{factor}x seed {seed} logs {logs:?}: flagged {got:?}, lemons {:?}",
                f.truth.lemons
            );
        }
        let Detection {
            hits,
            flagged: flagged_all,
            planted,
            confounded,
        } = d;
        eprintln!(
            "{factor}x logs {logs:?}: {hits} of {planted} lemons found, {flagged_all} flagged"
        );
        (hits, flagged_all, planted, confounded)
    }

    #[test]
    fn with_job_logs_at_thirty_times_the_background_more_lemons_are_found_and_nothing_else() {
        // Issue 36 asks for recall 0.8 at precision 0.9. Over seeds 1-10
        // (2026-11-25): 49 of 59 lemons, nothing else flagged (0.83 at
        // 1.0); an oracle that knows every uncaught hardware failure in the
        // window finds 55 with the same gate. Before a log-named fault that
        // a check had also caught counted as caught, healthy nodes carried
        // 282 such faults as "uncaught" and the count could not tell a
        // 2-failure lemon from them: 37 of 59 (0.63). Seeds 11-20
        // (2026-11-27): 45 of 62, one healthy node flagged, so 1-20 give
        // 94 of 121 at 0.99 (recall 0.78); 13 of those 62 lemons had at
        // most one uncaught failure in the window (ceiling 0.79 there,
        // 0.86 over 1-20). The README's job-evidence section has the rest.
        let (hits, flagged, planted, confounded) = detection(30.0, Logs::Written);
        let precision = if flagged == 0 {
            1.0
        } else {
            hits as f64 / flagged as f64
        };
        let recall = hits as f64 / planted as f64;
        eprintln!("30x with logs: recall {recall:.2}, precision {precision:.2}");
        assert!(confounded.is_empty(), "confounders flagged: {confounded:?}");
        assert!(precision >= 0.9, "{hits} of {flagged} flagged are lemons");
        assert!(recall >= 0.8, "recall {recall:.2}: {hits} of {planted}");
    }

    #[test]
    fn a_dump_whose_logs_are_gone_flags_exactly_what_the_dump_without_log_columns_flags() {
        // Sites that keep no logs lose nothing: every failed run is `no_log`
        // and blame is the exit-code model's.
        for seed in [1, 3] {
            let spec = HistorySpec::realistic(seed, 30.0);
            let without = flagged(&load(&spec, Logs::NoColumns));
            let gone = flagged(&load(&spec, Logs::Deleted));
            assert_eq!(gone, without, "seed {seed}");
        }
    }

    #[test]
    fn with_job_logs_the_reliability_report_counts_the_planted_hardware_failures_within_15_percent()
    {
        use lemon::reliability::{load::load_jobs, TimeRange};
        for seed in SEEDS {
            let f = load(&HistorySpec::realistic(seed, 30.0), Logs::Written);
            let until = chrono::DateTime::from_timestamp(f.truth.end + 1, 0).unwrap();
            let range = TimeRange::last_days(until, 28);
            let params = app::attribution_params(&Config::default());
            let loaded = load_jobs(&f.conn, range, None, &params).unwrap();
            let found = loaded
                .jobs
                .iter()
                .filter(|j| j.is_hardware_failure())
                .count();
            let planted = f
                .truth
                .hardware_between(range.since.timestamp(), range.until.timestamp());
            eprintln!("seed {seed}: {found} hardware failures reported, {planted} planted");
            assert!(
                found * 100 <= planted * 115 && found * 100 >= planted * 85,
                "seed {seed}: {found} reported, {planted} planted"
            );
        }
    }

    /// Issue 47's figures over some seeds: what was flagged against the
    /// lemons a count can reach.
    #[derive(Debug, Default)]
    struct Evaluation {
        detection: Detection,
        /// Lemons with at least two uncaught failures on two days in the window.
        reachable: usize,
        reachable_hits: usize,
    }

    impl Evaluation {
        fn precision(&self) -> f64 {
            let d = &self.detection;
            if d.flagged == 0 {
                1.0
            } else {
                d.hits as f64 / d.flagged as f64
            }
        }

        fn recall_of_reachable(&self) -> f64 {
            self.reachable_hits as f64 / self.reachable.max(1) as f64
        }

        fn ceiling(&self) -> f64 {
            self.reachable as f64 / self.detection.planted.max(1) as f64
        }
    }

    /// The lemons of `truth` with at least two uncaught hardware failures
    /// on at least two UTC days that ended after `since`.
    fn reachable(truth: &HistoryTruth, since: i64) -> Vec<String> {
        truth
            .lemons
            .iter()
            .filter(|l| {
                let days: std::collections::BTreeSet<i64> = truth
                    .hardware
                    .iter()
                    .filter(|h| &h.node == *l && !h.caught && h.end > since)
                    .map(|h| h.end.div_euclid(86_400))
                    .collect();
                let fails = truth
                    .hardware
                    .iter()
                    .filter(|h| &h.node == *l && !h.caught && h.end > since)
                    .count();
                fails >= 2 && days.len() >= 2
            })
            .cloned()
            .collect()
    }

    fn evaluate(seeds: impl IntoIterator<Item = u64>, logs: Logs) -> Evaluation {
        evaluate_with(seeds, logs, &Config::default())
    }

    fn evaluate_with(seeds: impl IntoIterator<Item = u64>, logs: Logs, cfg: &Config) -> Evaluation {
        let mut e = Evaluation::default();
        for seed in seeds {
            let f = load(&HistorySpec::realistic(seed, 30.0), logs);
            let scores = app::score(&f.conn, cfg, f.truth.end + 60).unwrap();
            let got: Vec<String> = scores.flagged().map(|v| v.signals.node.clone()).collect();
            for v in scores
                .flagged()
                .filter(|v| !f.truth.lemons.contains(&v.signals.node))
            {
                eprintln!(
                    "seed {seed}: healthy {} flagged: {}",
                    v.signals.node,
                    lemon::decide::reason(v, 28)
                );
            }
            eprintln!(
                "seed {seed}: per 1000 node-days {:.3} uncaught, {:.3} log-witnessed; watch list {}",
                scores.uncaught_rate_per_1000_node_days,
                scores.log_rate_per_1000_node_days,
                scores.watch_list().count()
            );
            let since = f.truth.end + 60 - 28 * 86_400;
            let reach = reachable(&f.truth, since);
            e.reachable += reach.len();
            e.reachable_hits += got.iter().filter(|n| reach.contains(n)).count();
            e.detection.add(seed, &f.truth, &got);
            eprintln!(
                "seed {seed} logs {logs:?}: flagged {got:?}, lemons {:?}, reachable {reach:?}",
                f.truth.lemons
            );
        }
        let d = &e.detection;
        eprintln!(
            "logs {logs:?}: precision {:.2} ({} of {} flagged), recall of reachable {:.2} ({} of {}), all lemons {} of {}, ceiling {:.2}, confounders flagged {:?}",
            e.precision(),
            d.hits,
            d.flagged,
            e.recall_of_reachable(),
            e.reachable_hits,
            e.reachable,
            d.hits,
            d.planted,
            e.ceiling(),
            d.confounded
        );
        e
    }

    #[test]
    fn with_job_logs_three_seeds_meet_issue_47s_precision_and_reachable_recall() {
        let e = evaluate([1, 2, 3], Logs::Written);
        assert!(
            e.detection.confounded.is_empty(),
            "{:?}",
            e.detection.confounded
        );
        assert!(e.precision() >= 0.95, "{e:?}");
        assert!(e.recall_of_reachable() >= 0.9, "{e:?}");
    }

    /// Issue 47's evaluation on the first generator: 20 seeds with and
    /// without logs. Slow; run it in release mode:
    /// `cargo test --release -p lemon --test job_evidence issue_47 -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn issue_47_evaluation_over_twenty_seeds_with_and_without_logs() {
        let with = evaluate(1..=20, Logs::Written);
        let without = evaluate(1..=20, Logs::NoColumns);
        // Today's rules (before issue 47): no log tier, no repeat offenders.
        let mut before = Config::default();
        (before.lemon.log_min_jobs, before.lemon.repeat_out_count) = (0, 0);
        let without_before = evaluate_with(1..=20, Logs::NoColumns, &before);
        for e in [&with, &without] {
            assert!(
                e.detection.confounded.is_empty(),
                "{:?}",
                e.detection.confounded
            );
            assert!(e.precision() >= 0.95, "{e:?}");
        }
        assert!(with.recall_of_reachable() >= 0.9, "{with:?}");
        assert!(without.detection.hits >= without_before.detection.hits);
    }
}
