use super::*;

fn history(seed: u64, logs: bool) -> (tempfile::TempDir, IndependentHistory) {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = IndependentHistorySpec::new(seed);
    spec.logs = logs;
    let h = generate(&spec, dir.path(), 4242).unwrap();
    (dir, h)
}

/// (node list, state) of every run of the dump.
fn runs(h: &IndependentHistory) -> Vec<Vec<String>> {
    let text = String::from_utf8(h.sacct.clone()).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_history_and_logs() {
    let (a_dir, a) = history(7, true);
    let (b_dir, b) = history(7, true);
    let text = |h: &IndependentHistory, dir: &tempfile::TempDir| {
        String::from_utf8(h.sacct.clone())
            .unwrap()
            .replace(dir.path().to_str().unwrap(), "LOGS")
    };
    assert!(text(&a, &a_dir) == text(&b, &b_dir), "same dump");
    assert_eq!(a.events, b.events);
    assert_eq!(a.failures, b.failures);
    let a_log = std::fs::read_dir(a_dir.path()).unwrap().count();
    assert!(a_log > 100, "{a_log} logs");
    for entry in std::fs::read_dir(a_dir.path()).unwrap().take(50) {
        let name = entry.unwrap().file_name();
        let a_text = std::fs::read(a_dir.path().join(&name)).unwrap();
        assert_eq!(a_text, std::fs::read(b_dir.path().join(&name)).unwrap());
    }
    let (_c_dir, c) = history(8, false);
    assert!(a.failures != c.failures && a.events != c.events);
}

#[test]
fn every_row_has_the_header_s_fields_and_names_its_log() {
    let (dir, h) = history(3, true);
    let text = String::from_utf8(h.sacct.clone()).unwrap();
    let header = text.lines().next().unwrap();
    assert_eq!(header, "JobIDRaw|JobID|NodeList|NNodes|State|ExitCode|DerivedExitCode|Submit|Start|End|ElapsedRaw|Partition|User|UID|AllocTRES|StdOut|StdErr");
    for row in runs(&h) {
        assert_eq!(row.len(), 17, "{row:?}");
        assert_eq!(row[13], "4242");
        assert!(row[15].starts_with(dir.path().to_str().unwrap()));
        let end: i64 = row[9].parse().unwrap();
        assert!(end <= h.end, "{row:?}");
    }
}

#[test]
fn about_a_fifth_of_the_jobs_fail_and_a_few_are_requeued() {
    let (_d, h) = history(11, false);
    let rows = runs(&h);
    let failed = rows
        .iter()
        .filter(|r| {
            !matches!(
                r[4].as_str(),
                "COMPLETED" | "TIMEOUT" | "REQUEUED" | "PREEMPTED"
            ) && !r[4].starts_with("CANCELLED")
        })
        .count();
    let share = failed as f64 / rows.len() as f64;
    assert!(
        (0.14..0.32).contains(&share),
        "{failed} of {} failed: {share:.3}",
        rows.len()
    );
    assert!(rows.iter().any(|r| r[4] == "REQUEUED"));
    assert!(rows.iter().any(|r| r[4] == "NODE_FAIL"));
    assert!(rows.iter().any(|r| r[2].contains('[')), "multi-node jobs");
    let ids: Vec<&String> = rows.iter().map(|r| &r[0]).collect();
    let distinct: BTreeSet<&&String> = ids.iter().collect();
    assert!(distinct.len() < ids.len(), "requeued jobs keep their id");
}

#[test]
fn every_lemon_fails_more_jobs_than_healthy_nodes_do() {
    for seed in 1..4 {
        let (_d, h) = history(seed, false);
        let planted: BTreeSet<&String> = h
            .lemons
            .iter()
            .chain([&h.long_repair])
            .chain(&h.confounder_nodes)
            .collect();
        let mut per_node = std::collections::BTreeMap::<&str, usize>::new();
        for f in &h.failures {
            *per_node.entry(f.node.as_str()).or_default() += 1;
        }
        let healthy: usize = per_node
            .iter()
            .filter(|(n, _)| !planted.iter().any(|p| p.as_str() == **n))
            .map(|(_, c)| c)
            .sum();
        let healthy_mean = healthy as f64 / (512 - planted.len()) as f64;
        for lemon in &h.lemons {
            let mine = per_node.get(lemon.as_str()).copied().unwrap_or(0);
            assert!(
                mine as f64 > 3.0 * healthy_mean,
                "seed {seed}: {lemon} {mine} vs {healthy_mean:.3}"
            );
        }
        assert_eq!(h.lemons.len(), 6);
        assert!(h.lemons.contains(&h.flapper));
    }
}

#[test]
fn the_flapper_is_out_three_times_and_the_long_repair_once() {
    let (_d, h) = history(5, false);
    let from = h.end - i64::from(h.window_days) * 86_400;
    let outs = |node: &str| -> Vec<(i64, i64)> {
        h.events
            .lines()
            .filter(|l| l.starts_with(&format!("{node}|")) && l.contains("|hc: "))
            .map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f[1].parse().unwrap(), f[2].parse().unwrap())
            })
            .filter(|(s, _)| *s >= from)
            .collect()
    };
    let flaps = outs(&h.flapper);
    assert!(flaps.len() >= 3, "{flaps:?}");
    assert!(flaps.iter().all(|(s, e)| e - s < 2 * 86_400 && *e < h.end));
    let repair = outs(&h.long_repair);
    assert_eq!(repair.len(), 1, "{repair:?}");
    assert!(repair[0].1 - repair[0].0 >= 8 * 86_400);
    assert!(h.reachable_lemons().contains(&h.flapper));
    assert!(!h.lemons.contains(&h.long_repair));
}

#[test]
fn some_hardware_logs_name_the_node_and_some_do_not() {
    let (dir, h) = history(9, true);
    let uncaught: Vec<&PlantedFailure> = h
        .failures
        .iter()
        .filter(|f| h.lemons.contains(&f.node) && !f.caught_by_check)
        .collect();
    assert!(uncaught.iter().any(|f| f.log_names_node));
    assert!(uncaught.iter().any(|f| !f.log_names_node));
    let text = String::from_utf8(h.sacct.clone()).unwrap();
    for f in uncaught.iter().filter(|f| f.log_names_node) {
        let row = text
            .lines()
            .find(|l| {
                l.starts_with(&format!("{}|", f.job_id_raw)) && l.contains(&format!("|{}|", f.end))
            })
            .unwrap();
        let log = std::fs::read_to_string(row.split('|').nth(15).unwrap()).unwrap();
        assert!(log.len() < 16_000, "{} bytes", log.len());
        let hosts: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("NCCL WARN")
                    || l.contains("CUDA error")
                    || l.contains("Bus error")
                    || l.contains("Illegal instruction")
            })
            .collect();
        assert!(!hosts.is_empty(), "{log}");
        assert!(dir.path().exists());
    }
}

#[test]
fn score_counts_reachable_lemons_confounders_and_the_long_repair() {
    let (_d, h) = history(2, false);
    let reachable = h.reachable_lemons();
    assert!(!reachable.is_empty());
    let mut flagged = reachable.clone();
    flagged.push(h.confounder_nodes[0].clone());
    flagged.push(h.long_repair.clone());
    let s = score(&h, &flagged);
    assert_eq!(s.recall, 1.0);
    assert_eq!(s.true_positives, reachable.len());
    assert_eq!(s.confounders_flagged, [h.confounder_nodes[0].clone()]);
    assert!(s.long_repair_flagged);
    assert!(s.precision < 1.0);
    assert_eq!(s.ceiling, reachable.len() as f64 / 6.0);
    let row = s.to_string();
    assert!(row.starts_with("| 2 | "), "{row}");
    let none = score(&h, &[]);
    assert_eq!((none.recall, none.precision), (0.0, 1.0));
    assert_eq!(HistoryScore::total(&[s.clone(), none]).flagged, s.flagged);
}

#[test]
fn hostlists_compress_runs_of_nodes() {
    assert_eq!(hostlist(&[6]), "gpu0007");
    assert_eq!(hostlist(&[0, 1, 2, 3, 9]), "gpu[0001-0004,0010]");
}

#[test]
#[ignore = "prints figures: cargo test -p lemonade-tests --lib independent_history_figures -- --ignored --nocapture"]
fn independent_history_figures() {
    for seed in 1..=5 {
        let t = std::time::Instant::now();
        let _ = history(seed, false);
        let bare = t.elapsed();
        let t = std::time::Instant::now();
        let (dir, h) = history(seed, true);
        let took = t.elapsed();
        let rows = runs(&h);
        let failed = rows.iter().filter(|r| r[4] != "COMPLETED").count();
        let logs: Vec<u64> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .collect();
        let uncaught = h.failures.iter().filter(|f| !f.caught_by_check).count();
        let named = h.failures.iter().filter(|f| f.log_names_node).count();
        println!(
            "seed {seed}: {took:.2?} ({bare:.2?} without logs), {} runs, {failed} not completed, {} logs (max {} B, mean {} B), {} hw failures ({uncaught} uncaught, {named} named), reachable {:?} of {:?}, flapper {}, events {}",
            rows.len(), logs.len(), logs.iter().max().unwrap(), logs.iter().sum::<u64>() / logs.len() as u64,
            h.failures.len(), h.reachable_lemons(), h.lemons, h.flapper, h.events.lines().count()
        );
    }
}

#[test]
#[ignore = "writes a history to $DUMP_DIR for reading by eye"]
fn dump_a_history() {
    let dir = std::path::PathBuf::from(std::env::var("DUMP_DIR").unwrap());
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let seed = std::env::var("DUMP_SEED").map_or(1, |s| s.parse().unwrap());
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let h = generate(&IndependentHistorySpec::new(seed), &dir.join("logs"), uid).unwrap();
    h.write_inputs(&dir).unwrap();
    std::fs::write(
        dir.join("failures.txt"),
        format!(
            "{:#?}\nlemons {:?}\nreachable {:?}\nflapper {}\nlong {}\nconf {:?}\nend {}",
            h.failures,
            h.lemons,
            h.reachable_lemons(),
            h.flapper,
            h.long_repair,
            h.confounder_nodes,
            h.end
        ),
    )
    .unwrap();
}
