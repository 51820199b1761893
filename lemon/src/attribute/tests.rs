//! Tests of the attribution rule.

use super::*;
use crate::job_state::JobState;

fn users(names: &[&str]) -> UserStats {
    let mut u = UserStats::default();
    let mut idx = HashMap::new();
    for n in names {
        u.intern(&mut idx, n);
    }
    u
}

fn run(nodes: &[i64], exit: &str) -> FailedRun {
    let (code, signal) = exit.split_once(':').unwrap();
    FailedRun {
        row_id: 1,
        job_id_raw: 42,
        job_id: "42".into(),
        user: 0,
        state: JobState::Failed,
        start: Some(0),
        end: 10_000,
        exit_code: code.parse().ok(),
        exit_signal: signal.parse().ok(),
        nodes: nodes.to_vec(),
        log: None,
        trace: None,
    }
}

fn mark(at: i64, c: &str) -> Mark {
    Mark {
        at,
        category: c.to_string().into(),
        what: format!("finding {c}"),
    }
}

fn one(r: &FailedRun, ev: &Evidence, u: &UserStats) -> Attribution {
    let p = AttributionParams {
        user_error_exit_codes: vec![126, 127],
        own_job_name: None,
        without_texts: false,
    };
    attribute_all(std::slice::from_ref(r), ev, u, &HashMap::new(), &p).remove(0)
}

/// `r` weighed in a month where alice ran 400 jobs elsewhere without a
/// failure and nodes 1-3 each went NODE_FAIL twice (`r` runs two days).
fn among_failing_nodes(r: &FailedRun, ev: &Evidence, u: &UserStats) -> Attribution {
    let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
    let mut r = r.clone();
    r.start = Some(r.end - 2 * 86_400);
    let mut runs = vec![r];
    for n in 1..=3 {
        for end in [100_000, 900_000] {
            let mut nf = run(&[n], "0:0");
            nf.state = JobState::NodeFail;
            nf.end = end;
            nf.job_id_raw = 1_000 + n * 10 + end / 100_000;
            runs.push(nf);
        }
    }
    attribute_all(&runs, ev, u, &days, &AttributionParams::default()).remove(0)
}

fn clean_alice() -> UserStats {
    let mut u = users(&["alice"]);
    u.runs[0] = 400;
    u
}

#[test]
fn the_first_failing_task_says_where_and_the_weighing_says_whose() {
    let mut ev = Evidence::default();
    ev.task_fails_ms.insert(42, vec![(2, 5_000_000)]);
    // A clean user's job fails first on a node that already fails jobs.
    let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &clean_alice());
    assert_eq!(
        (a.node, a.rule, a.category.as_ref()),
        (Some(2), Rule::FirstTaskExit, "task_exit")
    );
    assert!(
        a.detail
            .starts_with("first failing task of 3 nodes on this node"),
        "{}",
        a.detail
    );
    // The same failure by a user whose jobs fail everywhere is theirs.
    let mut sloppy = clean_alice();
    sloppy.exits[0] = 120;
    let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &sloppy);
    assert_eq!((a.node, a.rule), (None, Rule::UserExit));
    assert!(
        a.detail.contains("first failing task of 3 nodes") && a.detail.contains("120 of 400"),
        "{}",
        a.detail
    );
    // So is a clean user's first failure on a node with no record.
    let a = one(
        &run(&[4, 5], "1:0"),
        &{
            let mut e = Evidence::default();
            e.task_fails_ms.insert(42, vec![(5, 5_000_000)]);
            e
        },
        &users(&["alice"]),
    );
    assert_eq!(a.node, None, "{a:?}");
}

#[test]
fn a_bug_is_weighed_by_the_chance_it_would_fail_first_on_that_node() {
    // Alice fails one run in ten elsewhere with an exit code.
    let mut sloppy = clean_alice();
    sloppy.exits[0] = 40;
    let mut ev = Evidence::default();
    ev.task_fails_ms.insert(42, vec![(2, 5_000_000)]);
    // Of 16 nodes, her bug would have failed first on node 2 one time
    // in 16: node 2's hardware, which already fails jobs, explains it.
    let wide: Vec<i64> = (1..=16).collect();
    let a = among_failing_nodes(&run(&wide, "1:0"), &ev, &sloppy);
    assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit), "{a:?}");
    // Of 3 nodes, one time in 3: her record explains it.
    let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &sloppy);
    assert_eq!((a.node, a.rule), (None, Rule::UserExit), "{a:?}");
}

#[test]
fn rank_zeros_node_takes_the_share_of_bugs_that_fail_there_first() {
    let nodes = [10, 11, 12, 13];
    assert!((chance_first_on(&nodes, 12, 0.0) - 0.25).abs() < 1e-12);
    // Half of the bugs fail on rank 0 first, the rest anywhere.
    assert!((chance_first_on(&nodes, 10, 0.5) - 0.625).abs() < 1e-12);
    // The other nodes keep at least the uniform chance (a bug elsewhere
    // is never judged rarer than by chance).
    assert!((chance_first_on(&nodes, 12, 0.5) - 0.25).abs() < 1e-12);

    // Estimated from the localized runs: all on rank 0's node...
    let runs: Vec<FailedRun> = (0..20).map(|_| run(&nodes, "1:0")).collect();
    let on = |node: i64| -> Vec<(usize, i64, String)> {
        (0..20).map(|i| (i, node, String::new())).collect()
    };
    assert!((first_node_excess(&runs, &on(10)) - 0.95).abs() < 1e-12);
    // ... none there ...
    assert_eq!(first_node_excess(&runs, &on(13)), 0.0);
    // ... spread evenly.
    let even: Vec<(usize, i64, String)> =
        (0..20).map(|i| (i, nodes[i % 4], String::new())).collect();
    assert!(first_node_excess(&runs, &even).abs() < 1e-12);
    // Too few multi-node runs to tell: no excess.
    assert_eq!(first_node_excess(&runs[..3], &on(10)[..3]), 0.0);
}

#[test]
fn finding_beats_event_beats_task_exit() {
    let u = clean_alice();
    let mut ev = Evidence::default();
    ev.task_fails_ms.insert(42, vec![(1, 5_000_000)]);
    let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &u);
    assert_eq!((a.node, a.rule), (Some(1), Rule::FirstTaskExit));
    ev.events.insert(2, vec![mark(10_100, "slurm")]);
    let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
    assert_eq!((a.node, a.rule), (Some(2), Rule::NodeEvent));
    ev.findings.insert(3, vec![mark(9_500, "pcie")]);
    let a = one(&run(&[1, 2, 3], "1:0"), &ev, &u);
    assert_eq!(
        (a.node, a.rule, a.category.as_ref()),
        (Some(3), Rule::Finding, "pcie")
    );
}

#[test]
fn window_is_ten_minutes_before_to_five_after() {
    let u = users(&["alice"]);
    let mut ev = Evidence::default();
    ev.findings.insert(1, vec![mark(10_000 - 601, "xid")]);
    ev.findings.insert(2, vec![mark(10_000 + 301, "xid")]);
    assert_eq!(one(&run(&[1, 2], "1:0"), &ev, &u).rule, Rule::Unattributed);
    ev.findings.insert(2, vec![mark(10_000 + 300, "ib")]);
    ev.sort();
    assert_eq!(one(&run(&[1, 2], "1:0"), &ev, &u).node, Some(2));
}

#[test]
fn an_exit_code_is_the_users_unless_the_node_shows_evidence() {
    let u = users(&["alice"]);
    let mut ev = Evidence::default();
    let a = one(&run(&[7], "1:0"), &ev, &u);
    assert_eq!((a.node, a.rule), (None, Rule::UserExit));
    ev.events.insert(7, vec![mark(9_900, "xid")]);
    let a = one(&run(&[7], "1:0"), &ev, &u);
    assert_eq!(
        (a.node, a.rule, a.category.as_ref()),
        (Some(7), Rule::NodeEvent, "xid")
    );
    // 127 (command not found) stays the user's even then.
    let a = one(&run(&[7], "127:0"), &ev, &u);
    assert_eq!((a.node, a.rule), (None, Rule::UserExit));
    let mut nf = run(&[7], "0:0");
    nf.state = JobState::NodeFail;
    assert_eq!(one(&nf, &Evidence::default(), &u).rule, Rule::NodeFail);
}

#[test]
fn a_signal_death_is_the_nodes_only_where_the_node_already_fails_jobs() {
    // alice ran 400 jobs elsewhere without a crash.
    let mut u = users(&["alice"]);
    u.runs[0] = 400;
    let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
    let p = AttributionParams::default();
    let crash = run(&[7], "0:7");
    // On a healthy node: one crash is no evidence.
    let a = attribute_all(
        std::slice::from_ref(&crash),
        &Evidence::default(),
        &u,
        &days,
        &p,
    );
    assert_eq!(a[0].rule, Rule::UserCrash);
    // On a node that went NODE_FAIL twice this month, it is the node's.
    let mut runs = vec![crash.clone()];
    for end in [100_000, 900_000] {
        let mut nf = run(&[7], "0:0");
        nf.state = JobState::NodeFail;
        nf.end = end;
        runs.push(nf);
    }
    let a = attribute_all(&runs, &Evidence::default(), &u, &days, &p);
    assert_eq!((a[0].node, a[0].rule), (Some(7), Rule::SignalDeath));
    assert!(
        a[0].detail
            .contains("alice died of this signal in 0 of 400 runs elsewhere"),
        "{}",
        a[0].detail
    );
}

#[test]
fn a_users_other_signals_count_half_towards_a_signals_rate() {
    let mut u = users(&["bob"]);
    u.add_run(0, Some(7));
    let mut crashes: Vec<FailedRun> = (0..40).map(|_| run(&[3], "0:11")).collect();
    crashes.push(run(&[7], "0:11"));
    for _ in 0..crashes.len() - 1 {
        u.add_run(0, Some(3));
    }
    for _ in 0..59 {
        u.add_run(0, Some(4));
    }
    u.add_failures(&crashes);
    let segv = u.elsewhere(0, &run(&[7], "0:11"));
    let bus = u.elsewhere(0, &run(&[7], "0:7"));
    assert_eq!((segv.runs, segv.fails, segv.related), (99, 40, 0));
    assert_eq!((bus.runs, bus.fails, bus.related), (99, 0, 40));
    assert!((bus.rate() - 20.5 / 100.0).abs() < 1e-12);
    assert!(bus.rate() < segv.rate() / 1.9);
}

#[test]
fn a_user_who_crashes_everywhere_says_nothing_about_the_node() {
    let mut u = users(&["bob"]);
    u.runs[0] = 100;
    u.crashes[0].insert(11, 40);
    let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
    let mut runs = vec![run(&[7], "0:11")];
    for end in [100_000, 900_000] {
        let mut nf = run(&[7], "0:0");
        nf.state = JobState::NodeFail;
        nf.end = end;
        runs.push(nf);
    }
    let a = attribute_all(
        &runs,
        &Evidence::default(),
        &u,
        &days,
        &AttributionParams::default(),
    );
    assert_eq!((a[0].node, a[0].rule), (None, Rule::UserCrash));
}

#[test]
fn a_burst_of_one_arrays_failures_on_one_node_is_the_users() {
    let mut u = users(&["carol"]);
    u.runs[0] = 1000;
    let runs: Vec<FailedRun> = (0..5)
        .map(|k| {
            let mut r = run(&[3], "0:11");
            r.end = 50_000 + k * 300;
            r.job_id = format!("77_{k}");
            r
        })
        .collect();
    let a = attribute_all(
        &runs,
        &Evidence::default(),
        &u,
        &HashMap::new(),
        &AttributionParams::default(),
    );
    assert!(a.iter().all(|a| a.rule == Rule::UserBurst), "{a:?}");
}

/// Two `NODE_FAIL`s of node 7 this month, and 100 nodes of 20 node-days.
fn node_7_failing() -> (Vec<FailedRun>, HashMap<i64, f64>) {
    let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
    let runs = [100_000, 900_000]
        .into_iter()
        .map(|end| {
            let mut nf = run(&[7], "0:0");
            nf.state = JobState::NodeFail;
            nf.end = end;
            nf.job_id_raw = end;
            nf
        })
        .collect();
    (runs, days)
}

#[test]
fn a_plain_exit_is_the_nodes_only_when_its_user_rarely_fails_that_way() {
    let mut u = users(&["alice", "bob"]);
    // alice: 400 runs elsewhere, 1 plain failure; bob: 1 in 10 fails.
    u.runs = vec![400, 400];
    u.exits = vec![1, 40];
    let (mut runs, days) = node_7_failing();
    let mut long = run(&[7], "1:0");
    long.start = Some(10_000 - 2 * 86_400);
    runs.push(long.clone());
    long.user = 1;
    runs.push(long);
    let a = attribute_all(
        &runs,
        &Evidence::default(),
        &u,
        &days,
        &AttributionParams::default(),
    );
    assert_eq!((a[2].node, a[2].rule), (Some(7), Rule::NodeExit), "{a:?}");
    assert!(
        a[2].detail
            .contains("alice failed with an exit code in 1 of 400 runs elsewhere"),
        "{}",
        a[2].detail
    );
    assert_eq!((a[3].node, a[3].rule), (None, Rule::UserExit));
    // On a node with no other failure, alice's exit is hers.
    let mut quiet = run(&[8], "1:0");
    quiet.start = Some(10_000 - 2 * 86_400);
    let a = attribute_all(
        &[quiet],
        &Evidence::default(),
        &u,
        &days,
        &AttributionParams::default(),
    );
    assert_eq!((a[0].node, a[0].rule), (None, Rule::UserExit));
}

#[test]
fn a_multi_node_failure_without_evidence_goes_to_a_node_that_already_fails_jobs() {
    let mut u = users(&["alice"]);
    u.runs[0] = 400;
    let (mut runs, days) = node_7_failing();
    let mut multi = run(&[5, 6, 7, 8], "0:7");
    multi.start = Some(10_000 - 86_400);
    runs.push(multi.clone());
    let a = attribute_all(
        &runs,
        &Evidence::default(),
        &u,
        &days,
        &AttributionParams::default(),
    );
    assert_eq!((a[2].node, a[2].rule), (Some(7), Rule::NodeHazard), "{a:?}");
    // Among healthy nodes it is nobody's.
    multi.nodes = vec![1, 2, 3, 4];
    runs[2] = multi;
    let a = attribute_all(
        &runs,
        &Evidence::default(),
        &u,
        &days,
        &AttributionParams::default(),
    );
    assert_eq!((a[2].node, a[2].rule), (None, Rule::Unattributed));
}

#[test]
fn a_crash_that_only_the_nodes_together_explain_is_hardware_of_no_one_node() {
    // Sixteen quiet nodes for two days: together more likely to have
    // killed the job than a user who never crashes in 400 runs, though
    // no one of them is.
    let u = clean_alice();
    let wide: Vec<i64> = (10..26).collect();
    let a = among_failing_nodes(&run(&wide, "0:7"), &Evidence::default(), &u);
    assert_eq!((a.node, a.rule), (None, Rule::AmongNodes), "{a:?}");
    assert_eq!(a.category, "multi_node");
    assert!(a.detail.contains("together explains it"), "{}", a.detail);
    // A plain exit code is the program's own decision: no one's.
    let a = among_failing_nodes(&run(&wide, "1:0"), &Evidence::default(), &u);
    assert_eq!((a.node, a.rule), (None, Rule::Unattributed), "{a:?}");
    // Two nodes do not outweigh alice's record.
    let a = among_failing_nodes(&run(&[10, 11], "0:7"), &Evidence::default(), &u);
    assert_eq!((a.node, a.rule), (None, Rule::Unattributed), "{a:?}");
}

#[test]
fn what_a_check_caught_is_marked_and_slurms_own_events_are_not() {
    let u = users(&["alice"]);
    let mut ev = Evidence::default();
    ev.events.insert(7, vec![mark(9_900, "xid")]);
    ev.events.insert(8, vec![mark(9_900, SLURM_CATEGORY)]);
    assert!(one(&run(&[7], "0:7"), &ev, &u).caught_by_check);
    let a = one(&run(&[8], "0:7"), &ev, &u);
    assert_eq!((a.node, a.caught_by_check), (Some(8), false));
}

#[test]
fn a_fault_a_job_log_names_is_still_caught_when_a_check_caught_it_on_that_node() {
    let u = users(&["alice"]);
    let mut ev = Evidence::default();
    ev.events.insert(7, vec![mark(9_900, "xid")]);
    ev.events.insert(8, vec![mark(9_900, SLURM_CATEGORY)]);
    let logged = |nodes: &[i64], on: i64| FailedRun {
        log: Some(job_log::LogVerdict {
            kind: job_log::LogKind::HardwareOn(on),
            evidence: "CUDA error: uncorrectable ECC error encountered".into(),
        }),
        ..run(nodes, "1:0")
    };
    // The log decides the node; the check's event says it was handled.
    let a = one(&logged(&[7, 9], 7), &ev, &u);
    assert_eq!(
        (a.node, a.rule, a.caught_by_check),
        (Some(7), Rule::JobLog, true)
    );
    // Slurm's own event is no check; another node's check is not this one's.
    let a = one(&logged(&[8, 9], 8), &ev, &u);
    assert_eq!((a.node, a.caught_by_check), (Some(8), false));
    let a = one(&logged(&[7, 9], 9), &ev, &u);
    assert_eq!((a.node, a.caught_by_check), (Some(9), false));
}

#[test]
fn reason_codes_give_categories() {
    assert_eq!(category_of_code("XID_79"), "xid");
    assert_eq!(category_of_code("MOUNT_HUNG"), "mounts");
    assert_eq!(category_of_code("ECC_VOLATILE_UNCORRECTED"), "ecc");
    assert_eq!(category_of_code("IB_PORT_DOWN"), "ib");
    assert_eq!(category_of_code("SITE_CHECK_FAILED"), "site");
    assert_eq!(category_of_code(""), "unknown");
}

#[test]
fn the_host_checks_codes_are_categories_of_their_own() {
    for (code, category) in [
        ("MEM_TOTAL_LOW", "memory"),
        ("EDAC_UE", "memory"),
        ("EDAC_CE_RATE", "memory"),
        ("EDAC_CE_LOGGED", "memory"),
        ("EDAC_UE_LOGGED", "memory"),
        ("MCE_HARDWARE_ERROR", "mce"),
        ("MCE_EVENTS_LOGGED", "mce"),
        ("CPU_OFFLINE", "cpus"),
        ("NVME_MISSING", "block"),
        ("NVME_SIZE_LOW", "block"),
        ("NVME_NOT_LIVE", "block"),
        ("BLOCK_READ_ONLY", "block"),
        ("BLOCK_IO_ERROR", "block"),
        ("FS_ERROR", "block"),
        ("NFS_NOT_RESPONDING", "mounts"),
        ("SERVICE_MISSING", "services"),
        ("FIRMWARE_MISMATCH", "firmware"),
        ("ROW_REMAP_FAILURE", "ecc"),
        ("GPU_LOST", "gpu"),
    ] {
        assert_eq!(category_of_code(code), category, "{code}");
    }
}

#[test]
fn the_first_failing_task_is_told_apart_within_a_second() {
    // Node 2's task failed at 5000.120 s, node 1's (killed by Slurm) at 5000.480 s.
    let mut ev = Evidence::default();
    ev.task_fails_ms
        .insert(42, vec![(1, 5_000_480), (2, 5_000_120), (3, 5_000_999)]);
    ev.sort();
    let a = among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &clean_alice());
    assert_eq!((a.node, a.rule), (Some(2), Rule::FirstTaskExit));
}

#[test]
fn task_exits_in_whole_seconds_still_count() {
    let mut ev = Evidence::default();
    ev.task_fails_ms
        .insert(42, vec![(3, 5_001_000), (2, 5_000_000), (1, 5_000_000)]);
    ev.sort();
    let u = clean_alice();
    assert_eq!(
        among_failing_nodes(&run(&[2, 3], "1:0"), &ev, &u).node,
        Some(2)
    );
    assert_eq!(
        among_failing_nodes(&run(&[1, 2, 3], "1:0"), &ev, &u).node,
        Some(1)
    );
}

#[test]
fn task_exit_window_covers_whole_seconds() {
    // The run starts at 4000 s here (among_failing_nodes moves it back).
    let u = clean_alice();
    let r = run(&[1, 2], "1:0");
    let within = |ev: &Evidence| {
        let days: HashMap<i64, f64> = (1..=100).map(|n| (n, 20.0)).collect();
        let mut r = r.clone();
        r.start = Some(4_000);
        attribute_all(
            std::slice::from_ref(&r),
            ev,
            &u,
            &days,
            &AttributionParams::default(),
        )
        .remove(0)
        .detail
        .contains("first failing task")
    };
    let mut ev = Evidence::default();
    ev.task_fails_ms
        .insert(42, vec![(1, 3_999_999), (2, 10_301_000)]);
    ev.sort();
    assert!(!within(&ev));
    ev.task_fails_ms
        .insert(42, vec![(1, 3_999_999), (2, 10_300_999)]);
    assert!(within(&ev));
}

#[test]
fn without_texts_every_verdict_is_the_same_and_says_nothing() {
    // A month of every rule: NODE_FAIL, a user's exit code, a finding, a
    // burst, a first failing task, the weighing of nodes alone and
    // together, and a run no rule decides.
    let mut u = users(&["alice", "carol"]);
    u.runs = vec![400, 1000];
    let (mut runs, days) = node_7_failing();
    let mut add = |nodes: &[i64], exit: &str, end: i64, job: &str, user: u32| {
        let mut r = run(nodes, exit);
        (r.end, r.job_id, r.user) = (end, job.into(), user);
        r.job_id_raw = end;
        r.start = Some(end - 2 * 86_400);
        runs.push(r);
    };
    add(&[7], "127:0", 200_000, "1", 0);
    add(&[8], "0:7", 300_000, "2", 0);
    add(&[7], "0:11", 400_000, "3", 0);
    for k in 0..5 {
        add(&[3], "0:11", 500_000 + k * 300, &format!("77_{k}"), 1);
    }
    add(&[1, 2, 9], "1:0", 600_000, "4", 0);
    add(&(10..26).collect::<Vec<_>>(), "0:7", 700_000, "5", 0);
    add(&[10, 11], "1:0", 800_000, "6", 0);
    let mut ev = Evidence::default();
    ev.findings.insert(8, vec![mark(299_900, "xid")]);
    ev.task_fails_ms.insert(600_000, vec![(9, 600_000_000)]);
    let with = AttributionParams {
        user_error_exit_codes: vec![127],
        ..AttributionParams::default()
    };
    let without = AttributionParams {
        without_texts: true,
        ..with.clone()
    };
    let told = attribute_all(&runs, &ev, &u, &days, &with);
    let untold = attribute_all(&runs, &ev, &u, &days, &without);
    let rules: std::collections::HashSet<Rule> = told.iter().map(|a| a.rule).collect();
    assert!(
        rules.len() >= 7,
        "the month covers too few rules: {rules:?}"
    );
    assert!(told.iter().all(|a| !a.detail.is_empty()), "{told:?}");
    assert!(untold.iter().all(|a| a.detail.is_empty()), "{untold:?}");
    for (a, b) in told.iter().zip(&untold) {
        let verdict = |a: &Attribution| (a.node, a.rule, a.category.clone(), a.caught_by_check);
        assert_eq!(verdict(a), verdict(b), "{a:?}");
    }
}
