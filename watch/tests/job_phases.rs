//! What the detector takes for the job's own behaviour rather than a
//! machine's fault (issue 45): a node late out of a job-wide phase, the
//! lowest node while the whole job sits far below its level, congestion
//! counters that burst and stop, and what follows a drain. Each trace is
//! built here, step by step, so that each test isolates one rule: remove
//! the rule and its test fails.

use lemonade_watch::{Config, Detection, Detector, Sample, Tier};

const START: i64 = 1_760_000_000;
const NODES: usize = 8;

/// Runs the default detector over `minutes` of 10 s samples of `metrics`
/// for one 8-node job; `value(node, seconds since start, metric)` gives
/// each sample, with a small wobble added so peers never agree exactly.
fn calls(
    minutes: i64,
    metrics: &[&str],
    value: impl Fn(usize, i64, &str) -> f64,
) -> Vec<Detection> {
    calls_of(NODES, minutes, metrics, value)
}

/// [`calls`] for a job of `nodes` nodes.
fn calls_of(
    nodes: usize,
    minutes: i64,
    metrics: &[&str],
    value: impl Fn(usize, i64, &str) -> f64,
) -> Vec<Detection> {
    calls_with(Config::default(), nodes, minutes, 10, metrics, value)
}

/// [`calls_of`] with the detector's settings `config`, for nodes scraped
/// every `scrape_s` seconds (a multiple of 10), each at its own phase.
fn calls_with(
    config: Config,
    nodes: usize,
    minutes: i64,
    scrape_s: i64,
    metrics: &[&str],
    value: impl Fn(usize, i64, &str) -> f64,
) -> Vec<Detection> {
    let mut detector = Detector::new(config);
    let names: Vec<String> = (0..nodes).map(|n| format!("node{n:02}")).collect();
    let mut out = Vec::new();
    for t in (0..minutes * 60).step_by(10) {
        for (node, name) in names.iter().enumerate() {
            if (t + 10 * node as i64) % scrape_s != 0 {
                continue;
            }
            for metric in metrics {
                // An XID gauge reads whole numbers.
                let wobble = if metric.ends_with("XID_ERRORS") {
                    1.0
                } else {
                    1.0 + 0.01 * (((node * 7) as i64 + t / 10) % 5 - 2) as f64
                };
                let sample = Sample {
                    time: START + t,
                    job: "4242",
                    node: name,
                    metric,
                    value: value(node, t, metric) * wobble,
                };
                out.extend(detector.push(sample).expect("in time order"));
            }
        }
    }
    out
}

/// A job-wide checkpoint every 5 minutes from minute 10: 60 s in which
/// every node's `gpu_util` sits at 5 instead of 80.
fn in_checkpoint(t: i64) -> bool {
    t >= 600 && (t - 600) % 300 < 60
}

#[test]
fn a_node_that_leaves_every_job_wide_checkpoint_90_s_late_is_not_called() {
    // Rank 0 writes the checkpoint: it stays in it 90 s after the others.
    let late = |node: usize, t: i64, _: &str| {
        let lagging = node == 0 && t >= 600 && (t - 600) % 300 < 150;
        if in_checkpoint(t) || lagging {
            5.0
        } else {
            80.0
        }
    };
    let got = calls(30, &["gpu_util"], late);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_node_that_stops_long_after_the_last_checkpoint_is_still_called() {
    let stops = |node: usize, t: i64, _: &str| {
        if in_checkpoint(t) || (node == 3 && t >= 1_260) {
            5.0
        } else {
            80.0
        }
    };
    let got = calls(40, &["gpu_util"], stops);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    // Its GPUs stopped while its peers' did not: reported, and its own
    // checks judge its hardware (`stopped_fraction`).
    assert_eq!(called, [("node03", Tier::Report)], "{got:?}");
}

#[test]
fn while_the_whole_job_sits_far_below_its_level_its_lowest_node_is_not_called() {
    // A 5-minute evaluation: every node at 10, node 3 the lowest at 2.
    let eval = |node: usize, t: i64, _: &str| match (node, (600..900).contains(&t)) {
        (3, true) => 2.0,
        (_, true) => 10.0,
        _ => 80.0,
    };
    let got = calls(20, &["gpu_util"], eval);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn congestion_counters_alone_are_called_only_when_they_hold() {
    let metrics = ["gpu_util", "pfc_pause"];
    // Node 5's pause frames climb a hundredfold for `seconds` from minute 8.
    let burst = |seconds: i64| {
        move |node: usize, t: i64, metric: &str| match metric {
            "pfc_pause" if node == 5 && (480..480 + seconds).contains(&t) => 5_000.0,
            "pfc_pause" => 50.0,
            _ => 80.0,
        }
    };
    let short = calls(20, &metrics, burst(90));
    assert!(short.is_empty(), "a 90 s burst: {short:?}");
    let held = calls(20, &metrics, burst(600));
    assert_eq!(held.len(), 1, "ten minutes: {held:?}");
    assert_eq!(held[0].node, "node05");
    let onset = START + 480;
    assert!(
        held[0].detected_at - onset >= 10 * i64::from(Config::default().fabric_only_steps),
        "called after {} s",
        held[0].detected_at - onset
    );
}

#[test]
fn a_node_whose_pcie_and_network_traffic_fall_together_is_reported_not_drained() {
    // Congestion under node 6's leaf switch: GPUDirect RDMA carries its
    // network traffic over PCIe, so both fall to a tenth while its GPUs
    // keep working. The network is shared: this is told, never drained.
    let metrics = ["gpu_util", "pcie_tx", "ib_tx"];
    let congested = |node: usize, t: i64, metric: &str| match metric {
        "pcie_tx" | "ib_tx" if node == 6 && t >= 480 => 8.0,
        _ => 80.0,
    };
    let got = calls(25, &metrics, congested);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].node.as_str(), got[0].tier),
        ("node06", Tier::Report)
    );
}

#[test]
fn after_a_drain_the_job_makes_no_further_call() {
    // Node 2 slows to a quarter at minute 8; node 4 stops at minute 12
    // (the fault's wake).
    let wake = |node: usize, t: i64, _: &str| match node {
        2 if t >= 480 => 20.0,
        4 if t >= 720 => 0.0,
        _ => 80.0,
    };
    let got = calls(20, &["gpu_util"], wake);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node02", Tier::Report), ("node02", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn in_a_four_node_job_the_reported_node_is_judged_against_the_three_left_and_drained() {
    let slows = |node: usize, t: i64, _: &str| if node == 2 && t >= 480 { 20.0 } else { 80.0 };
    let got = calls_of(4, 20, &["gpu_util"], slows);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node02", Tier::Report), ("node02", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_node_that_slows_in_a_job_scraped_every_30_s_is_reported_then_drained_on_more_fresh_samples() {
    // Each node's exporter is scraped every 30 s at its own phase: between
    // two scrapes a node is not missing, and each scrape is no gap.
    let slows = |node: usize, t: i64, _: &str| if node == 2 && t >= 600 { 20.0 } else { 80.0 };
    let got = calls_with(
        Config::default(),
        8,
        25,
        30,
        &["gpu_util", "gpu_power"],
        slows,
    );
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node02", Tier::Report), ("node02", Tier::Drain)],
        "{got:?}"
    );
    // The drain rests on more than 6 fresh samples: the 180 s of
    // `drain_after_s` stretch by the square root of 3 intervals a sample.
    let held = got[1].detected_at - got[0].detected_at;
    assert!((310..=350).contains(&held), "held the bar for {held} s");
    let healthy = calls_with(
        Config::default(),
        8,
        25,
        30,
        &["gpu_util", "gpu_power"],
        |_, _, _| 80.0,
    );
    assert!(healthy.is_empty(), "{healthy:?}");
}

#[test]
fn a_node_that_stands_apart_4_minutes_at_every_checkpoint_is_reported_once_and_never_drained() {
    // Rank 0 writes every checkpoint alone for 4 minutes (its GPUs at 15%,
    // not stopped, its peers at the barrier): reported at the first, back
    // in line after each. Every episode is longer than `drain_after_s`,
    // none as long as a report and a drain together.
    let writes = |node: usize, t: i64, _: &str| {
        if node == 0 && t >= 600 && (t - 600) % 600 < 240 {
            12.0
        } else {
            80.0
        }
    };
    let got = calls_with(Config::default(), NODES, 45, 10, &["gpu_util"], writes);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node00", Tier::Report)], "{got:?}");
    // A node that stays slow after such an episode is drained.
    let dies = |node: usize, t: i64, m: &str| {
        if node == 0 && t >= 1800 {
            20.0
        } else {
            writes(node, t, m)
        }
    };
    let got = calls_with(Config::default(), NODES, 45, 10, &["gpu_util"], dies);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node00", Tier::Report), ("node00", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn of_two_reported_nodes_at_the_drain_bar_together_neither_is_drained() {
    // Node 2 dies at minute 8; once it is reported, node 5 falls almost as
    // far, and is reported while node 2 still waits for its drain (made
    // long here): two machines apart together are not one faulty machine.
    let both = |node: usize, t: i64, _: &str| match node {
        2 if t >= 480 => 0.0,
        5 if t >= 780 => 4.0,
        _ => 80.0,
    };
    let patient = Config {
        drain_after_s: 900,
        ..Config::default()
    };
    let got = calls_with(patient, NODES, 30, 10, &["gpu_util"], both);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node02", Tier::Report), ("node05", Tier::Report)],
        "{got:?}"
    );
}

#[test]
fn a_node_whose_place_was_never_learned_is_reported_not_drained() {
    // Node 3's exporter is silent through the whole learning window (the
    // last 2 minutes of the warm-up), so its normal is unknown: it may be a
    // pipeline stage of its own. Its later collapse is told, not drained.
    let mut detector = Detector::new(Config::default());
    let mut got = Vec::new();
    for t in (0..1_200).step_by(10) {
        for node in 0..NODES {
            if node == 3 && (150..320).contains(&t) {
                continue;
            }
            let value = if node == 3 && t >= 600 { 5.0 } else { 80.0 };
            let wobble = 1.0 + 0.01 * (((node * 7) as i64 + t / 10) % 5 - 2) as f64;
            let sample = Sample {
                time: START + t,
                job: "4242",
                node: &format!("node{node:02}"),
                metric: "gpu_util",
                value: value * wobble,
            };
            got.extend(detector.push(sample).expect("in time order"));
        }
    }
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].node.as_str(), got[0].tier),
        ("node03", Tier::Report)
    );
}

#[test]
fn a_node_that_worked_harder_than_its_peers_through_the_warm_up_and_then_like_them_is_not_called() {
    // Node 3 hosts the hot experts for the first 7 minutes (the baseline
    // window included): 30% more power and traffic. Then the hot experts
    // move elsewhere and it works like its peers: it left its learned
    // offset, but it does no less than any of them.
    let hot = |node: usize, t: i64, _: &str| if node == 3 && t < 420 { 390.0 } else { 300.0 };
    let got = calls(40, &["gpu_power", "ib_tx"], hot);
    assert!(got.is_empty(), "{got:?}");
    // The same node that then loses half its power and traffic is called
    // and drained.
    let dies = |node: usize, t: i64, m: &str| {
        if node == 3 && t >= 1200 {
            150.0
        } else {
            hot(node, t, m)
        }
    };
    let got = calls(40, &["gpu_power", "ib_tx"], dies);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node03", Tier::Report), ("node03", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_node_that_ran_above_its_pipeline_stage_and_falls_to_its_stages_level_is_reported_not_drained()
{
    // Two pipeline stages: nodes 0-3 do 60% of the others' work by design.
    // Node 3 ran a third above its stage through the warm-up (its stage's
    // rank 0), and from minute 15 works exactly like its stage. It left
    // its place and does less than the typical node, as a throttled GPU
    // would, but a whole stage was learned to work there: reported only.
    let stage = |node: usize| if node < 4 { 60.0 } else { 100.0 };
    let joins = |node: usize, t: i64, _: &str| {
        if node == 3 && t < 900 {
            80.0
        } else {
            stage(node)
        }
    };
    let got = calls_of(16, 40, &["gpu_util", "gpu_power"], joins);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node03", Tier::Report)], "{got:?}");
    // The same node falling below every stage is drained.
    let falls = |node: usize, t: i64, m: &str| {
        if node == 3 && t >= 900 {
            40.0
        } else {
            joins(node, t, m)
        }
    };
    let got = calls_of(16, 40, &["gpu_util", "gpu_power"], falls);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node03", Tier::Report), ("node03", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_node_that_falls_to_where_the_typical_node_worked_in_the_warm_up_while_its_peers_rise_is_reported_not_drained(
) {
    // An RL job: node 0 trains (the learner), the others generate
    // rollouts, which keeps their GPUs less busy. At minute 15 the roles
    // swap: node 0 now works as the others did through the warm-up, and
    // they as node 0 did. Node 0 left its place and does less than the
    // typical node now, as a throttled node would, but no less than the
    // typical node did when the job was learned: reported only.
    let role = |learner: bool| {
        if learner {
            (97.0, 4000.0)
        } else {
            (80.0, 3000.0)
        }
    };
    let swaps = |node: usize, t: i64, m: &str| {
        let (util, power) = role((node == 0) != (t >= 900));
        if m == "gpu_util" {
            util
        } else {
            power
        }
    };
    let got = calls(40, &["gpu_util", "gpu_power"], swaps);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node00", Tier::Report)], "{got:?}");
    // The same node falling below where the typical node worked then is
    // drained.
    let falls = |node: usize, t: i64, m: &str| match (node, t >= 900, m) {
        (0, true, "gpu_util") => 55.0,
        (0, true, _) => 2000.0,
        _ => swaps(node, t, m),
    };
    let got = calls(40, &["gpu_util", "gpu_power"], falls);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node00", Tier::Report), ("node00", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_node_whose_role_shows_only_once_a_long_start_up_is_over_is_learned_in_training_not_called() {
    // Seven minutes of model loading and compiling (every node's GPUs in
    // bursts, together), then training, in which node 3 (a reward server)
    // runs at half its peers' level by design. Its place is learned once
    // the job's level has held, after the start-up, not at the usual end
    // of the warm-up.
    let role = |node: usize, t: i64, _: &str| match (t < 420, node) {
        (true, _) => 10.0 + 25.0 * ((t / 30) % 2) as f64,
        (false, 3) => 40.0,
        (false, _) => 80.0,
    };
    let got = calls(40, &["gpu_util", "gpu_power"], role);
    assert!(got.is_empty(), "{got:?}");
    // The same node, slowed to a third of its role's level, is called
    // and drained.
    let dies = |node: usize, t: i64, m: &str| {
        if node == 3 && t >= 1200 {
            13.0
        } else {
            role(node, t, m)
        }
    };
    let got = calls(40, &["gpu_util", "gpu_power"], dies);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node03", Tier::Report), ("node03", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_baseline_is_not_learned_in_an_evaluation_phase_that_follows_a_checkpoint() {
    // A checkpoint from minute 3 leaves the first windows unsteady; the
    // evaluation phase from minute 5.5 to 9.5 is steady, but at two thirds
    // of the training level. Node 3 (rank 0, busy elsewhere) trains at
    // 60% of its peers by design, and evaluates like them: learned there,
    // its place would be its peers', and training would look like a fault.
    let phases = |node: usize, t: i64, _: &str| match (t, node) {
        (180..=269, _) => 5.0,
        (330..=569, _) => 55.0,
        (_, 3) => 48.0,
        _ => 80.0,
    };
    let got = calls(40, &["gpu_util", "gpu_power"], phases);
    assert!(got.is_empty(), "{got:?}");
    // The same node, slowed to a third of its training level, is called
    // and drained.
    let dies = |node: usize, t: i64, m: &str| {
        if node == 3 && t >= 1500 {
            16.0
        } else {
            phases(node, t, m)
        }
    };
    let got = calls(40, &["gpu_util", "gpu_power"], dies);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node03", Tier::Report), ("node03", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn pause_frames_that_rise_for_five_minutes_are_not_called_and_ones_that_stay_up_are() {
    // Another tenant's burst pauses node 3's port from minute 10 to 15;
    // node 5's link degrades at minute 20 and its pause frames stay up.
    // Neither node's GPUs lose any work.
    let paused = |node: usize, t: i64, m: &str| {
        let hit = (node == 3 && (600..900).contains(&t)) || (node == 5 && t >= 1_200);
        match (m, hit) {
            ("pfc_pause" | "cnp", true) => 1000.0,
            ("pfc_pause" | "cnp", false) => 100.0,
            _ => 80.0,
        }
    };
    let metrics = ["gpu_util", "pfc_pause", "cnp"];
    let got = calls(40, &metrics, paused);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node05", Tier::Report)], "{got:?}");
    // After `fabric_only_steps` (36 steps: 6 minutes).
    assert!(got[0].detected_at >= START + 1_200 + 360, "{got:?}");
    let config = Config {
        fabric_only_steps: 12,
        ..Config::default()
    };
    let got = calls_with(config, NODES, 40, 10, &metrics, paused);
    let called: Vec<&str> = got.iter().map(|d| d.node.as_str()).collect();
    assert_eq!(called, ["node03", "node05"], "{got:?}");
}

#[test]
fn a_node_under_congestion_whose_own_work_dips_within_noise_is_reported_not_drained() {
    // From minute 10 node 3's port sees ten times the pause frames and
    // congestion notifications (another tenant on its leaf), and its GPUs
    // lose 10%: far apart on the network's counters, barely on its own work.
    let congested = |node: usize, t: i64, m: &str| {
        let hit = node == 3 && t >= 600;
        match (m, hit) {
            ("pfc_pause" | "cnp", true) => 1000.0,
            ("pfc_pause" | "cnp", false) => 100.0,
            (_, true) => 72.0,
            _ => 80.0,
        }
    };
    let got = calls(40, &["gpu_util", "pfc_pause", "cnp"], congested);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node03", Tier::Report)], "{got:?}");
}

#[test]
fn a_fault_that_starts_as_training_resumes_after_an_evaluation_is_not_learned_as_the_nodes_place() {
    // Training from minute 1, a checkpoint from minute 3.5 to 5, training
    // to minute 5.5, then an evaluation at two thirds of the level until
    // minute 9.5. Node 5's GPUs lose 40% at minute 9.3. A baseline that
    // waited for a window steady at the training level (minute 11.5) and
    // learned from it would take that loss for node 5's place (a rule
    // tried on 2026-11-29 did); learned from the first steps of training,
    // it is a fault.
    let job = |node: usize, t: i64, _: &str| {
        let level = match t {
            0..=59 => 10.0,
            210..=299 => 5.0,
            330..=569 => 55.0,
            _ => 80.0,
        };
        if node == 5 && t >= 560 {
            level * 0.6
        } else {
            level
        }
    };
    let got = calls(30, &["gpu_util", "gpu_power"], job);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node05", Tier::Report), ("node05", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_node_whose_gpus_stop_while_its_peers_wait_is_reported_and_left_to_its_own_checks() {
    // From minute 12 node 4's ranks have exited (a user's exception, or a
    // GPU that fell off the bus: the metrics cannot tell) and the others
    // spin in the collective at full utilisation and a third of the power.
    let hang = |node: usize, t: i64, m: &str| match (m, node == 4, t >= 720) {
        ("gpu_util", true, true) => 1.0,
        ("gpu_power", true, true) => 600.0,
        ("gpu_power", false, true) => 1500.0,
        ("gpu_power", _, false) => 4000.0,
        _ => 97.0,
    };
    let got = calls(30, &["gpu_util", "gpu_power"], hang);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node04", Tier::Report)], "{got:?}");
    // With `stopped_fraction = 0` it is drained like any other call.
    let config = Config {
        stopped_fraction: 0.0,
        ..Config::default()
    };
    let got = calls_with(config, NODES, 30, 10, &["gpu_util", "gpu_power"], hang);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node04", Tier::Report), ("node04", Tier::Drain)],
        "{got:?}"
    );
}

#[test]
fn a_stopped_node_is_drained_when_its_xid_gauge_names_a_dead_gpu_and_not_called_when_it_names_none()
{
    // As above: from minute 12 node 4's ranks have exited and the others
    // spin. The exporter also gives each node's last XID.
    let metrics = ["gpu_util", "gpu_power", "DCGM_FI_DEV_XID_ERRORS"];
    let hang = |xid_at_stop: f64| {
        move |node: usize, t: i64, m: &str| match (m, node == 4, t >= 720) {
            ("DCGM_FI_DEV_XID_ERRORS", true, true) => xid_at_stop,
            // An old XID from an earlier job stays on another node's gauge.
            ("DCGM_FI_DEV_XID_ERRORS", _, _) if node == 2 => 79.0,
            ("DCGM_FI_DEV_XID_ERRORS", _, _) => 0.0,
            ("gpu_util", true, true) => 1.0,
            ("gpu_power", true, true) => 600.0,
            ("gpu_power", false, true) => 1500.0,
            ("gpu_power", _, false) => 4000.0,
            _ => 97.0,
        }
    };
    let run = |xid: f64| {
        let got = calls(30, &metrics, hang(xid));
        got.iter()
            .map(|d| (d.node.clone(), d.tier))
            .collect::<Vec<_>>()
    };
    let node04 = "node04".to_string();
    // XID 79: the GPU fell off the bus. The metrics found the node; the
    // driver says it is the hardware, so it is drained at once.
    assert_eq!(run(79.0), [(node04.clone(), Tier::Drain)]);
    // Within a minute: torchrun's agent may kill the job 90 s after a
    // rank dies, and the node is drained before its rows stop at 14
    // minutes, where `continuity_steps` alone would wait 3.
    let got = calls(14, &metrics, hang(79.0));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].node.as_str(), got[0].tier), ("node04", Tier::Drain));
    assert!(got[0].detected_at - (START + 720) <= 60, "{got:?}");
    // No new XID, or an application's (43: the GPU stopped processing
    // the user's work): the job stopped itself there.
    assert_eq!(run(0.0), []);
    assert_eq!(run(43.0), []);
    // `xid_metric = ""`: the gauge is not read, and the call is reported as
    // for a node without one.
    let config = Config {
        xid_metric: String::new(),
        ..Config::default()
    };
    let got = calls_with(config, NODES, 30, 10, &metrics, hang(79.0));
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node04", Tier::Report)], "{got:?}");
}

#[test]
fn a_node_one_of_whose_gpus_stops_is_not_called_when_its_fresh_xid_gauge_names_none() {
    // From minute 12 one GPU of node 4 idles while its other seven, and
    // every other node's, spin in the collective: a rank stuck in the
    // user's barrier, or a GPU that fell off the bus. Only the node's
    // least busy GPU (`gpu_util_min`) and a little of its power show it.
    let metrics = [
        "gpu_util",
        "gpu_util_min",
        "gpu_power",
        "DCGM_FI_DEV_XID_ERRORS",
    ];
    let one_gpu = |xid_at_stop: f64| {
        move |node: usize, t: i64, m: &str| match (m, node == 4 && t >= 720) {
            ("DCGM_FI_DEV_XID_ERRORS", true) => xid_at_stop,
            ("DCGM_FI_DEV_XID_ERRORS", false) => 0.0,
            ("gpu_util_min", true) => 0.5,
            ("gpu_util", true) => 86.0,
            ("gpu_power", true) => 3600.0,
            ("gpu_power", false) => 4000.0,
            _ => 97.0,
        }
    };
    let run_on = |metrics: &[&str], config: Config, xid: f64| {
        let got = calls_with(config, NODES, 30, 10, metrics, one_gpu(xid));
        got.iter()
            .map(|d| (d.node.clone(), d.tier))
            .collect::<Vec<_>>()
    };
    let run = |config: Config, xid: f64| run_on(&metrics, config, xid);
    let node04 = "node04".to_string();
    // XID 79 on its gauge: the GPU fell off the bus, and the node drains
    // at once.
    assert_eq!(
        run(Config::default(), 79.0),
        [(node04.clone(), Tier::Drain)]
    );
    // A fresh gauge with no XID: the user's rank stopped there.
    assert_eq!(run(Config::default(), 0.0), []);
    // Without the rule (`stopped_gpu_metric = ""`) the user's stuck rank drains.
    let unread = Config {
        stopped_gpu_metric: String::new(),
        ..Config::default()
    };
    let drained = [(node04.clone(), Tier::Report), (node04, Tier::Drain)];
    assert_eq!(run(unread, 0.0), drained);
    // Without a gauge the metrics judge it, as before: one idle GPU among
    // seven busy ones is no whole node's crash.
    assert_eq!(run_on(&metrics[..3], Config::default(), 0.0), drained);
}

/// The metrics of [`node_4_spins`]: utilisation, memory traffic, power
/// and the XID gauge.
const SPINNING_METRICS: [&str; 4] = [
    "gpu_util",
    "gpu_mem_util",
    "gpu_power",
    "DCGM_FI_DEV_XID_ERRORS",
];

/// From minute 12 node 4's GPUs spin: full utilisation, no memory
/// traffic, a quarter of the power, while the other nodes go on working.
/// Its XID gauge then reads `xid(seconds since start)`; every other
/// gauge, and its own before, reads 0.
fn node_4_spins(xid: impl Fn(i64) -> f64) -> impl Fn(usize, i64, &str) -> f64 {
    move |node, t, m| match (m, node == 4 && t >= 720) {
        ("DCGM_FI_DEV_XID_ERRORS", true) => xid(t),
        ("DCGM_FI_DEV_XID_ERRORS", false) => 0.0,
        ("gpu_util", true) => 100.0,
        ("gpu_mem_util", true) => 0.5,
        ("gpu_mem_util", false) => 40.0,
        ("gpu_power", true) => 1000.0,
        ("gpu_power", false) => 4000.0,
        _ => 97.0,
    }
}

#[test]
fn a_node_whose_gpus_spin_while_its_peers_work_is_reported_not_drained_when_its_fresh_xid_gauge_names_none(
) {
    // From minute 12 node 4's GPUs spin: full utilisation, no memory
    // traffic, a quarter of the power, while the other nodes go on
    // working. A replica of an inference sweep hung in the user's code,
    // or one whose NVLink broke; only the driver's XID tells them apart.
    let metrics = SPINNING_METRICS;
    let run_on = |metrics: &[&str], config: Config, xid: f64| {
        let got = calls_with(config, NODES, 30, 10, metrics, node_4_spins(move |_| xid));
        got.iter()
            .map(|d| (d.node.clone(), d.tier))
            .collect::<Vec<_>>()
    };
    let run = |config: Config, xid: f64| run_on(&metrics, config, xid);
    let node04 = "node04".to_string();
    let drained = [
        (node04.clone(), Tier::Report),
        (node04.clone(), Tier::Drain),
    ];
    // XID 74 on its gauge: an NVLink error hung it, and the node drains
    // at once.
    assert_eq!(
        run(Config::default(), 74.0),
        [(node04.clone(), Tier::Drain)]
    );
    // A fresh gauge with no XID: the user's code may hang there, or a NIC
    // the gauge cannot see may have failed; it is reported.
    assert_eq!(
        run(Config::default(), 0.0),
        [(node04.clone(), Tier::Report)]
    );
    // Without the rule (`spinning_metric = ""`) the hung replica drains.
    let unread = Config {
        spinning_metric: String::new(),
        ..Config::default()
    };
    assert_eq!(run(unread, 0.0), drained);
    // Without a gauge the metrics judge it, as before.
    assert_eq!(run_on(&metrics[..3], Config::default(), 0.0), drained);
}

#[test]
fn a_reported_node_is_drained_within_a_minute_once_its_xid_gauge_names_the_hardware() {
    // As above, node 4's GPUs spin from minute 12 with a clean gauge, so
    // it is reported; at minute 20 the driver logs XID 74 for the NVLink
    // that hung it. The drain must not wait `drain_after_s` again: the
    // job may be killed before that.
    let xid_at = 1200;
    let xid = |t: i64| if t >= xid_at { 74.0 } else { 0.0 };
    let got = calls(30, &SPINNING_METRICS, node_4_spins(xid));
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(
        called,
        [("node04", Tier::Report), ("node04", Tier::Drain)],
        "{got:?}"
    );
    assert!(got[0].detected_at < START + xid_at, "{got:?}");
    assert!(got[1].detected_at - (START + xid_at) <= 60, "{got:?}");
}

#[test]
fn a_job_that_stalls_as_one_nodes_driver_names_its_hardware_drains_that_node_within_a_minute() {
    // From minute 12 the whole job hangs: node 4's rank hung on an
    // uncontained ECC error and the others wait for it in the collective.
    // Every node spins alike, at full utilisation and under half the
    // power; only node 4's XID gauge says why.
    let metrics = ["gpu_util", "gpu_power", "DCGM_FI_DEV_XID_ERRORS"];
    let stall_at = 720;
    let run = |xid_of: &dyn Fn(usize, i64) -> f64| {
        calls(30, &metrics, |node, t, m| match m {
            "DCGM_FI_DEV_XID_ERRORS" => xid_of(node, t),
            "gpu_power" if t >= stall_at => 1900.0,
            "gpu_power" => 4400.0,
            _ => 97.0,
        })
    };
    let named_at =
        |at: i64| move |node: usize, t: i64| if node == 4 && t >= at { 95.0 } else { 0.0 };
    let got = run(&named_at(stall_at));
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node04", Tier::Drain)], "{got:?}");
    assert!(got[0].detected_at - (START + stall_at) <= 60, "{got:?}");
    assert_eq!(got[0].metrics, ["DCGM_FI_DEV_XID_ERRORS", "gpu_power"]);
    // No XID: a job-wide phase (or the user's deadlock) names no node.
    assert_eq!(run(&|_, _| 0.0), []);
    // The XID came 7 minutes before the stall: it did not cause it.
    assert_eq!(run(&named_at(300)), []);
    // Two nodes' drivers named their hardware: the stall does not say which.
    let two = |node: usize, t: i64| {
        if (node == 4 || node == 6) && t >= stall_at {
            79.0
        } else {
            0.0
        }
    };
    assert_eq!(run(&two), []);
}

#[test]
fn in_a_three_node_job_a_stopped_node_whose_xid_gauge_names_a_dead_gpu_is_drained_within_a_minute()
{
    // Node 2's GPU fell off the bus at minute 12: its ranks exited, and
    // the other two spin in the collective at three quarters of their
    // power (not a stall of the whole job: (x) has no say).
    let metrics = ["gpu_util", "gpu_power", "DCGM_FI_DEV_XID_ERRORS"];
    let run = |xid: f64| {
        calls_of(3, 30, &metrics, |node, t, m| {
            match (m, node == 2, t >= 720) {
                ("DCGM_FI_DEV_XID_ERRORS", true, true) => xid,
                ("DCGM_FI_DEV_XID_ERRORS", _, _) => 0.0,
                ("gpu_util", true, true) => 1.0,
                ("gpu_power", true, true) => 600.0,
                ("gpu_power", false, true) => 3000.0,
                ("gpu_power", _, false) => 4000.0,
                _ => 97.0,
            }
        })
    };
    // The driver names the dead GPU: no peer can be the one that broke.
    let got = run(79.0);
    let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
    assert_eq!(called, [("node02", Tier::Drain)], "{got:?}");
    assert!(got[0].detected_at - (START + 720) <= 60, "{got:?}");
    // A fresh gauge with no XID: the user's ranks exited there.
    assert_eq!(run(0.0), []);
}

#[test]
fn a_node_that_stops_while_rank_0_writes_a_checkpoint_is_not_called_and_one_that_stays_stopped_is()
{
    // No XID gauge. From minute 12 to 16 node 0 writes a checkpoint alone
    // (its GPUs idle) while the others wait at a barrier, spinning at full
    // utilisation and a third of the power; from minute 30 node 2's ranks
    // have stopped for good and the others wait in the collective.
    let job = |node: usize, t: i64, m: &str| {
        let stops = (node == 0 && (720..960).contains(&t)) || (node == 2 && t >= 1_800);
        let others_wait = (720..960).contains(&t) || t >= 1_800;
        match (m, stops, others_wait) {
            ("gpu_util", true, _) => 1.0,
            ("gpu_power", true, _) => 600.0,
            ("gpu_power", false, true) => 1_500.0,
            ("gpu_power", false, false) => 4_000.0,
            _ => 97.0,
        }
    };
    let metrics = ["gpu_util", "gpu_power"];
    for nodes in [NODES, 3] {
        let got = calls_of(nodes, 45, &metrics, job);
        let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
        assert_eq!(called, [("node02", Tier::Report)], "{nodes} nodes: {got:?}");
        // Reported once stopped for `unexplained_stop_s` (5 minutes).
        assert!(got[0].detected_at >= START + 1_800 + 300, "{got:?}");
        // Judged on `continuity_steps` alone, the checkpoint is called.
        let config = Config {
            unexplained_stop_s: 0,
            ..Config::default()
        };
        let got = calls_with(config, nodes, 45, 10, &metrics, job);
        let called: Vec<&str> = got.iter().map(|d| d.node.as_str()).collect();
        assert_eq!(called, ["node00", "node02"], "{nodes} nodes: {got:?}");
    }
}

/// The calls of a default detector on an 8-node job requeued at minute 15:
/// silent for 3 minutes, back with node 7 replaced by `node08`, whose
/// exporter reports per-GPU averages of power where the others report
/// node sums (an eighth). `slow_after` minutes in, node 3's work falls by
/// a third.
fn requeued_with_a_replacement(slow_after: Option<i64>) -> Vec<Detection> {
    let mut detector = Detector::new(Config::default());
    let mut out = Vec::new();
    for t in (0..45 * 60).step_by(10) {
        if (900..1_080).contains(&t) {
            continue;
        }
        for node in 0..NODES {
            let (name, per_gpu) = match (node, t >= 1_080) {
                (7, true) => ("node08".to_string(), true),
                _ => (format!("node{node:02}"), false),
            };
            let slow = node == 3 && slow_after.is_some_and(|m| t >= m * 60);
            for metric in ["gpu_util", "gpu_power"] {
                let wobble = 1.0 + 0.01 * (((node * 7) as i64 + t / 10) % 5 - 2) as f64;
                let work = if slow { 0.66 } else { 1.0 };
                let value = match metric {
                    "gpu_util" => 95.0 * work,
                    _ if per_gpu => 600.0 * work,
                    _ => 4_800.0 * work,
                };
                let sample = Sample {
                    time: START + t,
                    job: "4242",
                    node: &name,
                    metric,
                    value: value * wobble,
                };
                out.extend(detector.push(sample).expect("in time order"));
            }
        }
    }
    out
}

#[test]
fn a_replacement_that_joins_a_requeued_job_is_learned_anew_not_called_for_its_exporters_units() {
    let got = requeued_with_a_replacement(None);
    assert!(got.is_empty(), "{got:?}");
    // Node 3 slows before the requeue (reported before it, drained once
    // the job is learned again), just before it (its place from the first
    // warm-up is kept: learned anew, its slowness would be its place), or
    // long after it.
    for slow_after in [10, 12, 30] {
        let got = requeued_with_a_replacement(Some(slow_after));
        let called: Vec<(&str, Tier)> = got.iter().map(|d| (d.node.as_str(), d.tier)).collect();
        assert_eq!(
            called,
            [("node03", Tier::Report), ("node03", Tier::Drain)],
            "slow from minute {slow_after}: {got:?}"
        );
        let report_at = got[0].detected_at - START;
        assert_eq!(
            report_at < 900,
            slow_after == 10,
            "reported at {report_at} s"
        );
    }
}
