//! One job's plan: its parameters, its nodes' layout and biases, its
//! timeline (start-up, training, hang, restart), its events and its fault.

use super::plan::{
    metric_set, unknown_set, Act, After, FaultKind, FaultPlan, JobPlan, NodePlan, Role, Seg,
    Workload, CONFOUNDERS, TRAINING_ONLY,
};
use super::rng::Rng;
use super::IndependentSpec;

pub(crate) fn build_job(
    spec: &IndependentSpec,
    index: usize,
    workload: Workload,
    names: Vec<(String, usize, usize)>,
    kind: Option<FaultKind>,
    rng: &mut Rng,
) -> JobPlan {
    let n = names.len();
    let (lo, hi) = (spec.min_minutes * 60, spec.max_minutes * 60);
    let duration = match workload {
        Workload::EvalBench => rng.int(lo, lo + (hi - lo) / 4),
        _ => rng.int(lo, hi),
    };
    let mut confounders: Vec<&'static str> = CONFOUNDERS
        .iter()
        .filter(|(_, p)| rng.chance(*p))
        .map(|(name, _)| *name)
        .filter(|name| workload != Workload::EvalBench || !TRAINING_ONLY.contains(name))
        .collect();
    let mut job = base_job(spec, index, workload, duration, n, rng);
    job.confounders = confounders.clone();
    job.nodes = make_nodes(&job, names, rng);
    if groups(&mut job, rng) {
        confounders.push("layout_groups");
    }
    job.confounders = confounders;
    job.confounders
        .sort_by_key(|c| CONFOUNDERS.iter().position(|k| k.0 == *c));
    job.init_len = if job.has("warmup_ramp") {
        match workload {
            Workload::EvalBench => rng.int(60, 150),
            _ => rng.int(150, 420),
        }
    } else {
        0
    };
    job.skew_sd = match (job.has("data_skew"), workload) {
        (false, _) => 0.0,
        (true, Workload::Multimodal) => rng.range(0.04, 0.09),
        (true, _) => rng.range(0.02, 0.06),
    };
    job.bursts = if job.has("fabric_bursts") {
        rng.range(0.005, 0.03)
    } else {
        0.0
    };
    job.drop = if job.has("missing_rows") {
        rng.range(0.001, 0.01)
    } else {
        0.0
    };
    let after = kind.map(|k| (plan_fault(&mut job, k, rng), k));
    job.segs = timeline(&job, after.and_then(|a| a.0), rng);
    job.acts = acts(&job, rng);
    job.events = super::events::draw(&job, rng);
    job
}

fn base_job(
    spec: &IndependentSpec,
    index: usize,
    workload: Workload,
    duration: i64,
    n: usize,
    rng: &mut Rng,
) -> JobPlan {
    // kappa, intensity, memory bandwidth, comm share, IB, NVLink, CPU %, disk B/s
    let p: [f64; 8] = match workload {
        Workload::Pretrain3d => [0.6, 0.9, 0.45, 0.18, 0.25, 0.3, 8.0, 2e8],
        Workload::PretrainFsdp => [0.85, 0.85, 0.45, 0.25, 0.45, 0.15, 10.0, 3e8],
        Workload::Finetune => [0.85, 0.75, 0.4, 0.15, 0.2, 0.12, 12.0, 1.5e8],
        Workload::RlPost => [0.7, 0.8, 0.5, 0.2, 0.3, 0.2, 15.0, 5e7],
        Workload::Multimodal => [0.8, 0.8, 0.5, 0.12, 0.15, 0.08, 45.0, 1.5e9],
        Workload::EvalBench => [0.9, 0.6, 0.5, 0.1, 0.1, 0.1, 10.0, 2e8],
    };
    let interval = pick_interval(rng, n);
    let start = spec.start + rng.int(0, 40 * 60);
    let mut jit = [0.0; 8];
    for (k, x) in jit.iter_mut().enumerate() {
        *x = p[k] * rng.range(0.85, 1.15);
    }
    let j = |k: usize| jit[k];
    JobPlan {
        id: format!("{}", 7_000_000 + (spec.seed % 1000) * 1000 + index as u64),
        workload,
        start,
        duration,
        interval,
        nodes: Vec::new(),
        segs: Vec::new(),
        acts: Vec::new(),
        events: Vec::new(),
        fault: None,
        confounders: Vec::new(),
        details: vec![workload.name().to_string()],
        drop: 0.0,
        kappa: j(0).min(0.95),
        intensity: j(1).min(1.0),
        membw: j(2),
        comm: j(3),
        ib_frac: j(4),
        nvl_frac: j(5),
        cpu_base: j(6),
        disk_read: j(7),
        skew_sd: 0.0,
        skew_block: rng.int(60, 180),
        moe_amp: 0.0,
        bursts: 0.0,
        init_len: 0,
        seed: rng.next_u64(),
    }
}

/// Large jobs are scraped less often (Prometheus load grows with targets).
fn pick_interval(rng: &mut Rng, n: usize) -> i64 {
    let choices: &[i64] = match n {
        0..=15 => &[10, 10, 15, 15, 30],
        16..=63 => &[10, 15, 15, 30, 30, 60],
        _ => &[15, 30, 30, 60, 60],
    };
    rng.pick(choices)
}

fn make_nodes(job: &JobPlan, names: Vec<(String, usize, usize)>, rng: &mut Rng) -> Vec<NodePlan> {
    let n = names.len();
    let unknown = unknown_set(rng, job.has("unknown_metrics"));
    let fabric = rng.chance(0.85);
    let subset_share = if job.has("metric_subset") {
        rng.range(0.05, 0.3)
    } else {
        0.0
    };
    let forced_subset = rng.below(n);
    let mem = rng.range(250.0, 500.0);
    let skewed = job.has("clock_skew");
    let mut nodes: Vec<NodePlan> = names
        .into_iter()
        .enumerate()
        .map(|(i, (name, rack, leaf))| {
            let subset = subset_share > 0.0 && (i == forced_subset || rng.chance(subset_share));
            NodePlan {
                name,
                rack,
                leaf,
                role: Role::Worker,
                group: 0,
                level: 1.0,
                bubble: 0.0,
                ib_share: 1.0,
                nvl_share: 1.0,
                speed: 1.0 + (rng.normal() * 0.006).abs(),
                power: 1.0 + rng.normal() * 0.015,
                temp: rng.normal() * 1.5,
                clock: rng.normal() * 8.0,
                skew: if skewed {
                    (rng.normal() * 2.0).round().clamp(-8.0, 8.0) as i64
                } else {
                    0
                },
                phase: rng.int(0, job.interval - 1),
                metrics: metric_set(rng, unknown, fabric, subset),
                mem: mem + rng.normal() * 10.0,
                cpu: rng.normal() * 1.5,
            }
        })
        .collect();
    if job.has("lifelong_bias") {
        for _ in 0..(1 + n / 20).min(4) {
            let node = &mut nodes[rng.below(n)];
            node.speed *= rng.range(1.02, 1.05);
            let power = if rng.chance(0.5) {
                rng.range(0.94, 0.97)
            } else {
                rng.range(1.03, 1.06)
            };
            node.power *= power;
            node.temp += rng.range(3.0, 7.0);
            node.clock -= rng.range(0.0, 30.0);
        }
    }
    if job.has("rank0_extra") {
        nodes[0].cpu += rng.range(8.0, 25.0);
        nodes[0].mem += rng.range(30.0, 90.0);
        nodes[0].speed *= rng.range(1.0, 1.03);
    }
    nodes
}

/// Designed differences between groups of nodes; true when the job has any.
fn groups(job: &mut JobPlan, rng: &mut Rng) -> bool {
    let n = job.nodes.len();
    match job.workload {
        Workload::Pretrain3d => {
            pipeline(job, rng);
            true
        }
        Workload::RlPost => rl_roles(job, rng),
        Workload::Multimodal if rng.chance(0.7) => {
            let enc = (n / 6).max(1);
            let level = rng.range(0.75, 0.9);
            for node in job.nodes.iter_mut().rev().take(enc) {
                (node.group, node.level, node.ib_share, node.cpu) =
                    (1, level, 0.6, node.cpu + 10.0);
            }
            job.details.push(format!("vision_encoder_nodes={enc}"));
            true
        }
        Workload::EvalBench if n >= 3 && rng.chance(0.6) => {
            let prefill = (n / 3).max(1);
            for (i, node) in job.nodes.iter_mut().enumerate() {
                node.role = if i == n - 1 {
                    Role::Client
                } else if i < prefill {
                    Role::Prefill
                } else {
                    Role::Decode
                };
                node.group = node.role as usize;
            }
            job.details
                .push(format!("disaggregated_inference prefill={prefill}"));
            true
        }
        Workload::Finetune if rng.chance(0.35) => {
            let teachers = if n >= 8 { 2 } else { 1 };
            for node in job.nodes.iter_mut().rev().take(teachers) {
                (node.role, node.group) = (Role::Teacher, 1);
            }
            job.details
                .push(format!("distillation_teachers={teachers}"));
            true
        }
        _ => false,
    }
}

/// Megatron's rank order puts tensor parallelism inside a node and the
/// pipeline stages in contiguous blocks of nodes; first and last stages
/// carry the embedding and the loss, so their levels differ by design.
fn pipeline(job: &mut JobPlan, rng: &mut Rng) {
    let n = job.nodes.len();
    let stages: Vec<usize> = [2usize, 4, 8].into_iter().filter(|p| *p * 2 <= n).collect();
    let pp = if stages.is_empty() {
        1
    } else {
        rng.pick(&stages)
    };
    let micro = rng.pick(&[8.0, 16.0, 32.0]);
    let bubble = (pp as f64 - 1.0) / (micro + pp as f64 - 1.0);
    let uneven = rng.chance(0.25);
    let mut bounds: Vec<usize> = (0..=pp).map(|s| s * n / pp).collect();
    if uneven && pp > 1 {
        // An extra node for the heavy last stage (a vocabulary-parallel head).
        bounds[pp - 1] -= 1;
    }
    let levels: Vec<f64> = (0..pp)
        .map(|s| match s {
            0 => rng.range(0.88, 0.97),
            s if s == pp - 1 => rng.range(0.98, 1.1),
            _ => rng.range(0.97, 1.03),
        })
        .collect();
    let moe = rng.chance(0.4);
    if moe {
        job.moe_amp = rng.range(0.05, 0.15);
        job.ib_frac *= 1.6;
    }
    for s in 0..pp {
        let edge = pp > 1 && (s == 0 || s == pp - 1);
        for node in &mut job.nodes[bounds[s]..bounds[s + 1]] {
            node.group = s;
            node.level = levels[s];
            node.bubble = bubble;
            node.ib_share = if edge { 0.8 } else { 1.0 };
            node.nvl_share = levels[s];
        }
    }
    job.details.push(format!(
        "pp={pp}{} micro={micro}{}",
        if uneven { " uneven" } else { "" },
        if moe { " moe" } else { "" }
    ));
}

fn rl_roles(job: &mut JobPlan, rng: &mut Rng) -> bool {
    let n = job.nodes.len();
    let reward = n >= 4 && rng.chance(0.6);
    let colocated = rng.chance(0.4);
    let trainers = if colocated {
        n
    } else {
        (n as f64 * rng.range(0.4, 0.6)).round() as usize
    };
    for (i, node) in job.nodes.iter_mut().enumerate() {
        node.role = if reward && i == n - 1 {
            Role::Reward
        } else if colocated {
            Role::Worker
        } else if i < trainers {
            Role::Trainer
        } else {
            Role::Rollout
        };
        node.group = node.role as usize;
    }
    job.details.push(format!(
        "rl {}{}",
        if colocated {
            "colocated"
        } else {
            "disaggregated"
        },
        if reward { " reward_server" } else { "" }
    ));
    reward || !colocated
}

/// Draws the fault and returns what the job does after the hang.
fn plan_fault(job: &mut JobPlan, kind: FaultKind, rng: &mut Rng) -> Option<(i64, After)> {
    let d = job.duration;
    let onset = rng.int((job.init_len + 120).max(600), d - (d / 5).max(480));
    let node = rng.below(job.nodes.len());
    let (precursor, halts, severity) = match kind {
        FaultKind::Ecc => (
            if rng.chance(0.35) {
                rng.int(300, 1200)
            } else {
                0
            },
            true,
            rng.range(0.05, 0.15),
        ),
        FaultKind::PcieDowngrade => (0, false, rng.range(0.4, 0.65)),
        FaultKind::NicDropout => (
            if rng.chance(0.2) { rng.int(60, 300) } else { 0 },
            true,
            1.0,
        ),
        FaultKind::GpuCardDrop => (0, true, rng.range(0.0, 1.0)),
        FaultKind::NvlinkError => (
            if rng.chance(0.5) {
                rng.int(300, 900)
            } else {
                0
            },
            rng.chance(0.7),
            rng.range(0.3, 0.5),
        ),
        FaultKind::AocCable => (rng.int(300, 1500), rng.chance(0.6), rng.range(0.1, 0.3)),
        _ => (0, false, rng.range(0.08, 0.25)),
    };
    // A hang late in the job comes sooner: the precursor is cut to fit.
    let halt = halts.then_some((onset + precursor).min(d - 180).max(onset));
    job.fault = Some(FaultPlan {
        kind,
        node,
        onset,
        halt,
        severity,
    });
    job.details
        .push(format!("fault {} precursor={precursor}s", kind.name()));
    halt.map(|h| {
        let timeout = rng.pick(&[90, 300, 600, 600, 1200, 1800]);
        let after = if rng.chance(0.55) {
            After::Exit
        } else {
            After::Restart {
                healed: kind == FaultKind::Ecc && rng.chance(0.6),
            }
        };
        job.details
            .push(format!("halt at {h}s, timeout {timeout}s, then {after:?}"));
        (timeout, after)
    })
}

fn timeline(job: &JobPlan, after: Option<(i64, After)>, rng: &mut Rng) -> Vec<(i64, i64, Seg)> {
    let d = job.duration;
    let teardown = rng.int(20, 60);
    let mut segs = vec![(0, job.init_len, Seg::Init)];
    let halt = job.fault.as_ref().and_then(|f| f.halt);
    match (halt, after) {
        (Some(h), Some((timeout, after))) => {
            segs.push((job.init_len, h, Seg::Train));
            segs.push((h, h + timeout, Seg::Hung));
            let t = h + timeout;
            match after {
                After::Exit => segs.push((t, t + teardown, Seg::Idle)),
                After::Restart { healed } => {
                    let gap = rng.int(30, 90);
                    let init = rng.int(150, 300);
                    segs.push((t, t + gap, Seg::Idle));
                    segs.push((t + gap, t + gap + init, Seg::Init));
                    let u = t + gap + init;
                    if healed {
                        segs.push((u, d - teardown, Seg::Train));
                        segs.push((d - teardown, d, Seg::Idle));
                    } else {
                        segs.push((u, u + 300, Seg::InitHung));
                        segs.push((u + 300, u + 300 + teardown, Seg::Idle));
                    }
                }
            }
        }
        _ => {
            segs.push((job.init_len, d - teardown, Seg::Train));
            segs.push((d - teardown, d, Seg::Idle));
        }
    }
    // The Slurm time limit cuts whatever is left.
    segs.into_iter()
        .map(|(a, b, s)| (a.min(d), b.min(d), s))
        .filter(|(a, b, _)| b > a)
        .collect()
}

/// The phases of RL post-training and benchmark jobs (others just train).
fn acts(job: &JobPlan, rng: &mut Rng) -> Vec<(i64, i64, Act)> {
    let mut out = Vec::new();
    let mut t = job.init_len;
    let disaggregated = job.nodes.iter().any(|n| n.role == Role::Client);
    while t < job.duration {
        let steps: Vec<(Act, i64)> = match job.workload {
            Workload::RlPost => vec![
                (Act::Rollout, rng.int(120, 360)),
                (Act::Reward, rng.int(20, 60)),
                (Act::Train, rng.int(60, 240)),
                (Act::Sync, rng.int(10, 30)),
            ],
            Workload::EvalBench if disaggregated => {
                vec![
                    (Act::Infer, rng.int(180, 600)),
                    (Act::Pause, rng.int(20, 90)),
                ]
            }
            Workload::EvalBench => {
                let act = rng.pick(&[Act::Sweep, Act::Gemm, Act::Infer, Act::Infer]);
                vec![(act, rng.int(120, 500)), (Act::Pause, rng.int(20, 120))]
            }
            _ => return out,
        };
        for (act, len) in steps {
            out.push((t, t + len, act));
            t += len;
        }
    }
    out
}
