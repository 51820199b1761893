//! Drawing one job from the seed: nodes, layout, life, events, fault.

use super::design::{
    draw_fault_kind, draw_interval, draw_size, EvKind, Event, Fault, JobDesign, Layout, Life,
    NodeDesign,
};
use super::rng::Rng;
use super::{IndependentSpec, METRICS};

/// Where the next job's nodes come from in the fleet (jobs get disjoint
/// nodes, so concurrent jobs never share a name).
pub(super) struct Fleet {
    pub cursor: usize,
}

impl Fleet {
    fn take(&mut self) -> (String, usize) {
        let k = self.cursor;
        self.cursor += 1;
        let row = (b'a' + ((k / 640) % 26) as u8) as char;
        let name = format!("dgx-{row}{}-{:03}", (k / 128) % 5 + 1, k % 128 + 1);
        (name, k)
    }
}

const HOUR_BASE: i64 = 1_785_000_000;

pub(super) fn draw_job(spec: &IndependentSpec, index: usize, fleet: &mut Fleet) -> JobDesign {
    let mut rng = Rng::new(spec.seed.wrapping_mul(1_000_003).wrapping_add(index as u64));
    let n = draw_size(&mut rng, spec.max_nodes);
    let start = HOUR_BASE + rng.int(0, spec.start_spread_s);
    let minutes = rng.int(spec.min_minutes, spec.max_minutes);
    let mut job = JobDesign {
        id: format!("9{:02}{:04}", spec.seed % 100, index + 1),
        nodes: Vec::with_capacity(n + 1),
        layout: Layout::Ddp,
        moe: false,
        stages: 1,
        stage_work: vec![1.0],
        stage_busy: vec![1.0],
        step: 4.0,
        compute_frac: 0.75,
        overlap: 0.3,
        busy: 0.96,
        sm: 0.75,
        ib_avg: 1.0e10,
        nvl_avg: 3.0e10,
        pcie_avg: 1.5e9,
        life: Life {
            start,
            end: start + minutes * 60,
            ..Life::default()
        },
        events: Vec::new(),
        drop_rate: 0.0,
        fault: None,
        confounders: Vec::new(),
    };
    let interval = draw_interval(&mut rng, n);
    for _ in 0..n {
        let node = draw_node(&mut rng, fleet, interval, start);
        job.nodes.push(node);
    }
    draw_layout(&mut rng, &mut job);
    draw_hardware(&mut rng, &mut job);
    draw_exporters(&mut rng, &mut job);
    draw_life(&mut rng, &mut job, spec);
    draw_job_events(&mut rng, &mut job);
    draw_fleet_events(&mut rng, &mut job);
    draw_roles(&mut rng, &mut job);
    for node in &mut job.nodes {
        node.until = node.until.min(job.life.end);
    }
    job
}

fn draw_node(rng: &mut Rng, fleet: &mut Fleet, interval: i64, start: i64) -> NodeDesign {
    let (name, k) = fleet.take();
    NodeDesign {
        name,
        gpus: 8.0,
        nic_frac: 1.0,
        work: 1.0 + 0.008 * rng.normal().clamp(-2.5, 2.5),
        power_f: 1.0 + 0.015 * rng.normal().clamp(-2.5, 2.5),
        cap_w: 700.0,
        clock_max: 1980.0,
        temp_off: 2.0 * rng.normal(),
        stage: 0,
        cp_mult: 1.0,
        rack: k / 4,
        leaf: k / 16,
        interval,
        offset: rng.int(0, interval - 1),
        skew: 0,
        mask: (1u32 << METRICS.len()) - 1,
        join: rng.int(0, 15),
        from: start,
        until: i64::MAX,
        rank0: false,
        last: false,
        loader_host: false,
        fw_change: None,
        cpu_base: rng.range(9.0, 26.0),
        mem_gib: rng.range(380.0, 700.0),
    }
}

fn draw_layout(rng: &mut Rng, job: &mut JobDesign) {
    let n = job.nodes.len();
    job.layout = rng.pick(&[
        (Layout::Megatron, 0.55),
        (Layout::Fsdp, 0.27),
        (Layout::Ddp, 0.18),
    ]);
    job.moe = rng.chance(0.55);
    let micro = rng.range(0.5, 5.0);
    let accum = rng.pick(&[(1.0, 2.0), (2.0, 2.0), (4.0, 2.0), (8.0, 1.5), (16.0, 0.7)]);
    job.step = (micro * accum).clamp(2.0, 40.0);
    if rng.chance(0.2) {
        job.step = rng.range(18.0, 40.0);
        job.add("long_steps");
    }
    job.add("step_beats");
    job.busy = rng.range(0.9, 0.99);
    job.sm = rng.range(0.6, 0.85);
    job.pcie_avg = rng.range(0.6e9, 3.0e9);
    let (cf, ov, ib, nvl) = match job.layout {
        Layout::Ddp => (
            rng.range(0.6, 0.8),
            0.15,
            rng.range(6e9, 2.5e10),
            rng.range(1.5e10, 4e10),
        ),
        Layout::Fsdp => (
            rng.range(0.7, 0.9),
            0.7,
            rng.range(2e10, 6e10),
            rng.range(3e10, 8e10),
        ),
        Layout::Megatron => (
            rng.range(0.65, 0.85),
            0.35,
            rng.range(5e9, 2.5e10),
            rng.range(8e10, 2.2e11),
        ),
    };
    job.compute_frac = cf;
    job.overlap = ov;
    job.ib_avg = if job.moe {
        ib * rng.range(1.3, 2.2)
    } else {
        ib
    };
    job.nvl_avg = nvl;
    if job.moe {
        job.add("moe_imbalance");
    }
    if job.layout == Layout::Megatron {
        let pp = [2usize, 2, 3, 4, 4, 8][rng.int(0, 5) as usize].min(n);
        draw_stages(rng, job, pp);
        job.add("pipeline_stages");
    }
}

/// Uneven stages: a random cut of the node list, each stage at least one
/// node; first and last stage carry embedding and loss, so they differ.
fn draw_stages(rng: &mut Rng, job: &mut JobDesign, pp: usize) {
    let n = job.nodes.len();
    let mut cuts: Vec<usize> = (1..n).collect();
    for i in 0..cuts.len() {
        let j = rng.int(i as i64, cuts.len() as i64 - 1) as usize;
        cuts.swap(i, j);
    }
    let mut cuts: Vec<usize> = cuts.into_iter().take(pp - 1).collect();
    if rng.chance(0.5) && (n / pp) * pp == n {
        cuts = (1..pp).map(|s| s * n / pp).collect();
    }
    cuts.sort_unstable();
    for (i, node) in job.nodes.iter_mut().enumerate() {
        node.stage = cuts.iter().filter(|&&c| c <= i).count();
    }
    job.stages = pp;
    job.stage_work = (0..pp).map(|_| rng.range(0.88, 1.0)).collect();
    let bottleneck = rng.int(0, pp as i64 - 1) as usize;
    job.stage_work[bottleneck] = 1.0;
    let bubble = (pp as f64 - 1.0) / (rng.range(8.0, 32.0) + pp as f64 - 1.0);
    job.stage_busy = (0..pp)
        .map(|_| (1.0 - bubble) * rng.range(0.93, 1.0))
        .collect();
}

fn draw_hardware(rng: &mut Rng, job: &mut JobDesign) {
    let n = job.nodes.len();
    if rng.chance(0.6) {
        job.add("hetero_hw");
        let count = ((n as f64 * rng.range(0.05, 0.15)).round() as usize).max(1);
        for _ in 0..count {
            let node = &mut job.nodes[rng.int(0, n as i64 - 1) as usize];
            match rng.int(0, 2) {
                0 => {
                    node.cap_w = rng.pick(&[(500.0, 1.0), (600.0, 1.0)]);
                    node.clock_max = rng.pick(&[(1755.0, 1.0), (1830.0, 1.0)]);
                    node.work *= rng.range(1.02, 1.07);
                }
                1 => node.gpus = 4.0,
                _ => node.nic_frac = rng.pick(&[(0.5, 2.0), (0.25, 1.0)]),
            }
        }
    }
    if rng.chance(0.7) {
        job.add("slow_node_lifelong");
        for _ in 0..rng.int(1, 3) {
            let node = &mut job.nodes[rng.int(0, n as i64 - 1) as usize];
            node.work *= rng.range(1.02, 1.06);
            node.power_f *= rng.range(0.92, 1.10);
            node.temp_off += rng.range(3.0, 9.0);
        }
    }
    if rng.chance(0.55) {
        job.add("context_parallel");
        let group = rng.int(2, 4) as usize;
        let mut mult = 1.0;
        for (i, node) in job.nodes.iter_mut().enumerate() {
            if i % group == 0 {
                mult = rng.range(0.8, 1.5);
            }
            node.cp_mult = mult;
        }
    }
}

/// Metric groups a node's exporter may lack.
const SUBSETS: [&[&str]; 4] = [
    &["pfc_pause", "cnp"],
    &["nvlink_tx"],
    &["gpu_util_min", "gpu_mem_util"],
    &["pcie_tx", "disk_io"],
];

fn draw_exporters(rng: &mut Rng, job: &mut JobDesign) {
    let subset = rng.chance(0.7);
    let skew = rng.chance(0.8);
    let unknown = rng.chance(0.85);
    let mixed = rng.chance(0.4);
    let known = METRICS
        .iter()
        .position(|m| *m == "gpu_temp")
        .unwrap_or(METRICS.len());
    for node in &mut job.nodes {
        if !unknown {
            node.mask &= (1u32 << known) - 1;
        }
        if subset && rng.chance(0.3) {
            for metric in SUBSETS[rng.int(0, 3) as usize].iter() {
                let bit = METRICS.iter().position(|m| m == metric).unwrap_or(0);
                node.mask &= !(1u32 << bit);
            }
        }
        if skew {
            node.skew = rng.int(-5, 5);
        }
        if mixed && rng.chance(0.12) {
            node.interval = rng.pick(&[(10, 1.0), (15, 1.0), (30, 1.0), (60, 1.0)]);
            node.offset = rng.int(0, node.interval - 1);
        }
    }
    if subset {
        job.add("metric_subset");
    }
    if skew {
        job.add("clock_skew");
    }
    if unknown {
        job.add("unknown_metrics");
    }
    if mixed {
        job.add("scrape_mix");
    }
}

fn draw_roles(rng: &mut Rng, job: &mut JobDesign) {
    let n = job.nodes.len();
    if rng.chance(0.8) {
        job.add("rank0_extra");
        job.nodes[0].rank0 = true;
        job.nodes[0].cpu_base += rng.range(8.0, 25.0);
        job.nodes[0].mem_gib += rng.range(30.0, 90.0);
        job.nodes[0].work *= rng.range(1.0, 1.02);
        if rng.chance(0.5) {
            job.nodes[n - 1].last = true;
            job.nodes[n - 1].cpu_base += rng.range(4.0, 15.0);
        }
    }
    if rng.chance(0.55) {
        job.add("loader_host");
        for _ in 0..(n / 32).max(1) {
            let k = rng.int(0, n as i64 - 1) as usize;
            job.nodes[k].loader_host = true;
            job.nodes[k].cpu_base += rng.range(25.0, 45.0);
        }
    }
    if rng.chance(0.55) {
        job.add("firmware_rollout");
        for _ in 0..rng.int(1, 2) {
            let k = rng.int(0, n as i64 - 1) as usize;
            let at = rng.int(job.life.start + 300, job.life.end - 300);
            let clock = rng.pick(&[(-60.0, 1.0), (45.0, 1.0), (-105.0, 1.0)]);
            job.nodes[k].fw_change = Some((at, rng.range(0.9, 1.1), clock));
        }
    }
}

pub(super) fn event(kind: EvKind, start: i64, end: i64, mag: f64, nodes: Vec<usize>) -> Event {
    Event {
        kind,
        start,
        end,
        mag,
        nodes,
        stagger: 0,
        id: 0,
    }
}

fn first_train(job: &JobDesign) -> i64 {
    job.life.inits.first().map_or(job.life.start, |w| w.1)
}

fn draw_job_events(rng: &mut Rng, job: &mut JobDesign) {
    let train = first_train(job);
    let end = job.life.end;
    if rng.chance(0.85) {
        job.add("checkpoint");
        let (kind, lo, hi) = rng.pick(&[
            ((EvKind::CkptSharded, 30, 180), 0.45),
            ((EvKind::CkptRank0, 20, 120), 0.35),
            ((EvKind::CkptAsync, 60, 240), 0.2),
        ]);
        let every = rng.int(8 * 60, 25 * 60);
        let len = rng.int(lo, hi);
        let mut t = train + every;
        while t + len < end {
            let mut e = event(
                kind,
                t,
                t + len + rng.int(-5, 15),
                rng.range(1e9, 5e9),
                vec![],
            );
            e.stagger = rng.int(3, 30);
            job.events.push(e);
            t += every + rng.int(-30, 30);
        }
    }
    if rng.chance(0.7) {
        job.add("eval");
        let every = rng.int(15 * 60, 40 * 60);
        let len = rng.int(60, 300);
        let mut t = train + every + rng.int(0, 120);
        while t + len < end {
            let mut e = event(EvKind::Eval, t, t + len, rng.range(0.6, 0.8), vec![]);
            e.stagger = rng.int(3, 20);
            job.events.push(e);
            t += every;
        }
    }
    draw_stalls(rng, job, train, end);
}

/// Loader stalls, batch-size steps and the moving MoE hot spot.
fn draw_stalls(rng: &mut Rng, job: &mut JobDesign, train: i64, end: i64) {
    if rng.chance(0.7) {
        job.add("loader_stall");
        for _ in 0..rng.int(1, 5) {
            let t = rng.int(train, end - 120);
            let starved = if rng.chance(0.5) {
                rng.int(0, job.nodes.len() as i64 - 1) as f64
            } else {
                -1.0
            };
            let mut e = event(EvKind::LoaderStall, t, t + rng.int(10, 90), starved, vec![]);
            e.stagger = rng.int(1, 10);
            job.events.push(e);
        }
    }
    if rng.chance(0.55) {
        job.add("lr_batch_change");
        let mut t = train;
        for _ in 0..rng.int(1, 2) {
            t = rng.int(t + 300, (t + 1800).min(end - 60).max(t + 301));
            job.events.push(event(
                EvKind::BatchChange,
                t,
                end,
                rng.range(1.3, 2.0),
                vec![],
            ));
        }
    }
    if job.moe {
        let mut t = train;
        while t < end {
            let len = rng.int(120, 480);
            let hot = rng.int(0, job.nodes.len() as i64 - 1) as usize;
            job.events.push(event(
                EvKind::MoeHot,
                t,
                t + len,
                rng.range(0.06, 0.3),
                vec![hot],
            ));
            t += len;
        }
    }
}

/// The nodes of `nodes` whose `key` (rack, leaf) equals that of a random one.
fn group_of(rng: &mut Rng, nodes: &[NodeDesign], key: fn(&NodeDesign) -> usize) -> Vec<usize> {
    let pick = key(&nodes[rng.int(0, nodes.len() as i64 - 1) as usize]);
    (0..nodes.len())
        .filter(|&i| key(&nodes[i]) == pick)
        .collect()
}

fn draw_fleet_events(rng: &mut Rng, job: &mut JobDesign) {
    let (train, end) = (first_train(job), job.life.end);
    let window = |rng: &mut Rng, lo: i64, hi: i64| {
        let len = rng.int(lo, hi);
        let t = rng.int(train, (end - len).max(train + 1));
        (t, t + len)
    };
    let rack = |n: &NodeDesign| n.rack;
    let leaf = |n: &NodeDesign| n.leaf;
    let specs: [(&str, f64, EvKind, i64, i64, f64, f64); 4] = [
        (
            "leaf_congestion",
            0.55,
            EvKind::LeafCongestion,
            120,
            1200,
            0.03,
            0.15,
        ),
        (
            "rack_throttle",
            0.55,
            EvKind::RackThrottle,
            300,
            1200,
            0.8,
            0.92,
        ),
        (
            "rack_power_cap",
            0.55,
            EvKind::RackPowerCap,
            180,
            900,
            0.7,
            0.85,
        ),
        ("role_switch", 0.6, EvKind::RoleSwitch, 180, 720, 1.01, 1.04),
    ];
    for (name, p, kind, lo, hi, mlo, mhi) in specs {
        if !rng.chance(p) {
            continue;
        }
        job.add(name);
        for _ in 0..rng.int(1, 2) {
            let (s, e) = window(rng, lo, hi);
            let nodes = match kind {
                EvKind::LeafCongestion => group_of(rng, &job.nodes, leaf),
                EvKind::RoleSwitch => vec![rng.int(0, job.nodes.len() as i64 - 1) as usize],
                _ => group_of(rng, &job.nodes, rack),
            };
            let mut ev = event(kind, s, e, rng.range(mlo, mhi), nodes);
            ev.stagger = rng.int(0, 20);
            job.events.push(ev);
        }
    }
    if rng.chance(0.55) {
        job.add("fs_slowdown");
        let (s, _) = window(rng, 600, 600);
        let mut ev = event(
            EvKind::FsSlow,
            s,
            s + rng.int(60, 240),
            rng.range(0.1, 0.3),
            vec![],
        );
        ev.stagger = rng.int(60, 300);
        job.events.push(ev);
    }
    draw_exporter_events(rng, job, train, end);
}

fn draw_exporter_events(rng: &mut Rng, job: &mut JobDesign, train: i64, end: i64) {
    let n = job.nodes.len() as i64;
    let many = |rng: &mut Rng| rng.int(1, 3 + n / 64);
    if rng.chance(0.6) {
        job.add("exporter_restart");
        for _ in 0..many(rng) {
            let t = rng.int(job.life.start, end - 60);
            let k = rng.int(0, n - 1) as usize;
            job.events.push(event(
                EvKind::ExporterRestart,
                t,
                t + rng.int(20, 90),
                0.0,
                vec![k],
            ));
        }
    }
    if rng.chance(0.7) {
        job.add("exporter_gap");
        for _ in 0..many(rng) {
            let t = rng.int(train, end - 60);
            let k = rng.int(0, n - 1) as usize;
            job.events.push(event(
                EvKind::ExporterGap,
                t,
                t + rng.int(60, 300),
                0.0,
                vec![k],
            ));
        }
    }
    if rng.chance(0.75) {
        job.add("pfc_bursts");
        job.events.push(event(
            EvKind::PfcBurst,
            job.life.start,
            end,
            rng.range(0.005, 0.03),
            vec![],
        ));
    }
    if rng.chance(0.8) {
        job.add("missing_rows");
        job.drop_rate = rng.range(0.003, 0.02);
    }
    for (id, ev) in job.events.iter_mut().enumerate() {
        ev.id = (job.life.start as u64) << 12 | (id as u64 + 1);
    }
}

fn draw_life(rng: &mut Rng, job: &mut JobDesign, spec: &IndependentSpec) {
    let start = job.life.start;
    let long = rng.chance(0.6);
    let init = if long {
        rng.int(60, 900)
    } else {
        rng.int(20, 90)
    };
    if long {
        job.add("long_init");
        for node in &mut job.nodes {
            node.join = rng.int(0, (init as f64 * 0.6) as i64);
        }
    }
    job.life.inits.push((start, start + init));
    job.life.ramp = if rng.chance(0.9) {
        job.add("warmup_ramp");
        rng.int(120, 600)
    } else {
        20
    };
    let train = start + init;
    let faulty = rng.chance(spec.fault_rate);
    if faulty {
        draw_fault(rng, job, train);
    }
    let crashed = job.fault.as_ref().is_some_and(|f| f.crash_at.is_some());
    if !crashed && rng.chance(0.68) {
        job.add("job_restart");
        draw_app_restart(rng, job, train);
    }
    if rng.chance(0.55) {
        job.add("early_end");
        let stop = job.life.end;
        for node in &mut job.nodes {
            node.until = node.until.min(stop - rng.int(0, 20));
        }
    } else {
        let tail = rng.int(30, 120);
        job.life.downs.push((job.life.end - tail, job.life.end));
    }
}

/// A crash with no hardware behind it: a Python exception on one rank, or
/// a bad sample. Either every rank exits at once, or one node's ranks exit
/// first and the rest hang until the collective times out.
fn draw_app_restart(rng: &mut Rng, job: &mut JobDesign, train: i64) {
    let end = job.life.end;
    let lo = train + 600;
    let hi = end - 900;
    if hi <= lo {
        return;
    }
    let at = rng.int(lo, hi);
    let hang = if rng.chance(0.6) {
        job.life.app_exit = Some((at, rng.int(0, job.nodes.len() as i64 - 1) as usize));
        rng.int(120, 600)
    } else {
        0
    };
    restart(rng, job, at, hang);
}

/// A hang from `at` for `hang` seconds, then every rank exits, a short gap,
/// a new init window and a new warm-up.
pub(super) fn restart(rng: &mut Rng, job: &mut JobDesign, at: i64, hang: i64) {
    let down = at + hang;
    let back = down + rng.int(20, 60);
    let init_end = back + rng.int(60, 240);
    if hang > 0 {
        job.life.hangs.push((at, down));
    }
    job.life.downs.push((down, back));
    job.life.inits.push((back, init_end));
}

fn draw_fault(rng: &mut Rng, job: &mut JobDesign, train: i64) {
    let kind = draw_fault_kind(rng);
    let end = job.life.end;
    let onset = rng.int((job.life.start + 600).max(train + 240), end - 600);
    let node = rng.int(0, job.nodes.len() as i64 - 1) as usize;
    let mut fault = Fault {
        kind,
        node,
        onset,
        degrade_end: end,
        crash_at: None,
        vanish: false,
        mag: 0.0,
        relapse: None,
        period: 0,
        duty: 0,
        variant: 0,
    };
    super::faults::shape(rng, &mut fault, end);
    if let Some(crash) = fault.crash_at {
        let timeout = rng.int(180, 900);
        match rng.pick(&[(0, 0.4), (1, 0.3), (2, 0.3)]) {
            0 => {
                job.life.hangs.push((crash, crash + timeout));
                job.life.end = (crash + timeout + rng.int(5, 30)).min(end);
            }
            outcome => {
                restart(rng, job, crash, timeout);
                job.nodes[node].until = crash + timeout;
                if outcome == 2 {
                    // Spares sit in their own row of the fleet.
                    let mut fleet = Fleet {
                        cursor: 25 * 640 + rng.int(0, 639) as usize,
                    };
                    let mut fresh =
                        draw_node(rng, &mut fleet, job.nodes[node].interval, crash + timeout);
                    fresh.stage = job.nodes[node].stage;
                    job.nodes.push(fresh);
                }
                job.add(if outcome == 1 {
                    "elastic_shrink"
                } else {
                    "elastic_replace"
                });
            }
        }
    }
    job.fault = Some(fault);
}
