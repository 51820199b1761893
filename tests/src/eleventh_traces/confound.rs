//! A job's own confounders: the things that make one node, or all of them,
//! look different while the hardware is fine. Site-wide ones (storage,
//! fabric, racks) are in `site`.

use super::jobs::{host_name, SITE_SLOTS};
use super::plan::{JobKind, JobPlan, Phase, Span};
use super::rng::Rng;

fn span(start: i64, end: i64, phase: Phase) -> Span {
    Span { start, end, phase }
}

/// Warm-up: NCCL init, torch.compile, data-loader workers filling; nodes
/// finish at different times. One job in five is slow and uneven at it.
fn warmup(job: &mut JobPlan, rng: &mut Rng) {
    let slow = rng.chance(0.2);
    let len = if slow {
        rng.int(360, 600)
    } else {
        rng.int(120, 300)
    };
    if slow {
        job.confounders.insert("slow_warmup");
        for n in &mut job.nodes {
            n.warm_lag = rng.int(0, 180);
        }
    }
    job.spans
        .push(span(job.start, job.start + len, Phase::Warmup));
}

/// Periodic checkpoints: job-wide (every node, a few seconds apart), or
/// written by rank 0 alone while the others wait at a barrier.
fn checkpoints(job: &mut JobPlan, rng: &mut Rng) {
    if job.kind == JobKind::Inference || !rng.chance(0.6) {
        return;
    }
    let rank0 = rng.chance(0.3);
    let every = rng.int(8, 20) * 60;
    let len = if rank0 {
        rng.int(60, 180)
    } else {
        rng.int(30, 120)
    };
    let phase = if rank0 {
        job.confounders.insert("rank0_checkpoint");
        Phase::Rank0Ckpt
    } else {
        job.confounders.insert("checkpoint");
        Phase::Checkpoint
    };
    let mut t = job.start + every;
    while t + len < job.end {
        job.spans.push(span(t, t + len, phase));
        t += every + rng.int(-30, 30);
    }
}

/// Evaluation phases, learning-rate / batch-size changes, data-loader stalls.
fn phases(job: &mut JobPlan, rng: &mut Rng) {
    let long = job.end - job.start;
    if job.kind != JobKind::Inference && rng.chance(0.3) {
        job.confounders.insert("eval_phase");
        let every = rng.int(15, 30) * 60;
        let mut t = job.start + every;
        while t + 240 < job.end {
            job.spans.push(span(t, t + rng.int(90, 240), Phase::Eval));
            t += every;
        }
    }
    if rng.chance(0.2) {
        job.confounders.insert("batch_change");
        let at = job.start + rng.int(long / 4, long * 3 / 4);
        job.batch_change = Some((at, rng.range(0.85, 1.12)));
    }
    if rng.chance(0.25) {
        let one = rng.chance(0.5);
        job.confounders.insert(if one {
            "dataloader_stall_one_node"
        } else {
            "dataloader_stall"
        });
        for _ in 0..rng.int(1, 3) {
            let at = job.start + rng.int(long / 5, long - 300);
            let phase = if one {
                Phase::NodeStall(rng.below(job.nodes.len()))
            } else {
                Phase::Stall
            };
            job.spans.push(span(at, at + rng.int(30, 150), phase));
        }
    }
}

/// Levels by design: pipeline stages, rank 0's extra work, RL roles, MoE
/// hot experts, a node slower for its life.
fn levels(job: &mut JobPlan, rng: &mut Rng) {
    let n = job.nodes.len();
    if job.kind == JobKind::Pretrain && n >= 4 && rng.chance(0.7) {
        // The first stage also embeds, the last computes the loss head: both
        // do less matmul per micro-batch and idle in the pipeline bubble.
        job.confounders.insert("pipeline_stages");
        let stages = rng.pick(&[2usize, 4, 8]).min(n);
        for (i, node) in job.nodes.iter_mut().enumerate() {
            let stage = i * stages / n;
            node.group = stage as u8;
            node.level = match stage {
                0 => 0.88,
                s if s + 1 == stages => 0.82,
                _ => 1.0,
            };
        }
    }
    if job.kind == JobKind::Rl {
        job.confounders.insert("role_switch");
        job.role_switch = Some(rng.int(3, 8) * 60);
        let learners = (n / 3).max(1);
        for (i, node) in job.nodes.iter_mut().enumerate() {
            node.group = u8::from(i < learners);
        }
    }
    if job.kind == JobKind::Moe {
        job.confounders.insert("moe_hot_expert");
        job.hot_expert = Some(rng.int(3, 8) * 60);
    }
    if rng.chance(0.3) {
        job.confounders.insert("rank0_extra");
        job.nodes[0].level *= 0.93;
    }
    if n >= 3 && rng.chance(0.2) {
        job.confounders.insert("slow_node_for_life");
        let k = rng.below(n);
        job.nodes[k].speed = rng.range(1.03, 1.07);
        job.life_max = job.nodes.iter().map(|x| x.speed).fold(1.0, f64::max);
    }
}

/// Exporters: gaps and restarts, dropped rows, skewed clocks, stale XIDs.
fn exporters(job: &mut JobPlan, rng: &mut Rng) {
    let n = job.nodes.len();
    let long = job.end - job.start;
    if rng.chance(0.2) {
        job.confounders.insert("exporter_gap");
        let k = rng.below(n);
        for _ in 0..rng.int(1, 2) {
            let at = job.start + rng.int(long / 6, long - 400);
            job.nodes[k].gaps.push((at, at + rng.int(60, 300)));
        }
    }
    if rng.chance(0.2) {
        job.confounders.insert("dropped_rows");
        for _ in 0..rng.int(1, 3.min(n as i64)) {
            let k = rng.below(n);
            job.nodes[k].drop_p = rng.range(0.01, 0.06);
        }
    }
    if rng.chance(0.15) {
        job.confounders.insert("clock_skew");
        for _ in 0..rng.int(1, 2) {
            let k = rng.below(n);
            job.nodes[k].skew = rng.int(5, 45) * if rng.chance(0.5) { 1 } else { -1 };
        }
    }
    if rng.chance(0.08) {
        // DCGM's XID field holds the last XID until a restart: an earlier
        // tenant's bad kernel is still on the gauge when this job starts.
        job.confounders.insert("stale_xid");
        let k = rng.below(n);
        job.nodes[k].stale_xid = rng.pick(&[13, 31, 43, 45]);
    }
}

/// Requeue: the job vanishes for minutes and returns under the same id,
/// sometimes with a replacement node; it warms up again.
fn requeue(job: &mut JobPlan, rng: &mut Rng, spare: usize) {
    let long = job.end - job.start;
    if long < 3000 || !rng.chance(0.1) {
        return;
    }
    job.confounders.insert("requeue");
    let at = job.start + rng.int(600, long / 3);
    let back = at + rng.int(180, 600);
    job.spans.push(span(at, back, Phase::Gap));
    job.spans
        .push(span(back, back + rng.int(120, 300), Phase::Warmup));
    if rng.chance(0.5) {
        let k = rng.below(job.nodes.len());
        let mut fresh = job.nodes[k].clone();
        job.nodes[k].until = at;
        fresh.gid = spare;
        fresh.name = host_name(spare);
        fresh.from = back;
        fresh.stale_xid = 0;
        fresh.gaps.clear();
        job.nodes.push(fresh);
    }
}

/// Every per-job confounder; `spare` is a free slot for a replacement.
pub(crate) fn confound(job: &mut JobPlan, rng: &mut Rng, spare: usize) {
    warmup(job, rng);
    checkpoints(job, rng);
    phases(job, rng);
    levels(job, rng);
    exporters(job, rng);
    requeue(job, rng, spare % SITE_SLOTS);
    if job.nodes.iter().any(|n| !n.dcgm) {
        job.confounders.insert("metric_subset");
    }
    if job.nodes.iter().any(|n| n.extra) {
        job.confounders.insert("unknown_metrics");
    }
    if job.nodes.iter().any(|n| n.interval != 10) {
        job.confounders.insert("slow_scrape");
    }
}
