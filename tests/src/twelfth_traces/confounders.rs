//! Healthy confounders: checkpoints, evaluations, stalls, stragglers,
//! exporter quirks, requeues, elastic changes and the site's events.

use super::plan::{Ev, Event, Kind, Plan};
use super::rng::Rng;
use super::site::{Site, SiteKind};

/// Draws the job's own confounders (each with its own frequency).
pub fn draw(rng: &mut Rng, site: &mut Site, p: &mut Plan) {
    if p.kind.synchronous() {
        training_phases(rng, p);
    }
    stragglers(rng, p);
    exporter_quirks(rng, p);
    if p.kind == Kind::Elastic {
        elastic(rng, site, p);
    } else if p.kind.synchronous() && p.kind != Kind::Sweep && rng.chance(0.12) {
        requeue(rng, site, p);
    }
    if p.steady - p.warmups[0].0 > 540 {
        p.label("warmup_long");
    }
}

/// Repeating job-wide phases of a training job.
fn training_phases(rng: &mut Rng, p: &mut Plan) {
    let every = |rng: &mut Rng,
                 p: &mut Plan,
                 ev,
                 period: (i64, i64),
                 len: (i64, i64),
                 node: Option<usize>| {
        let per = rng.int(period.0, period.1);
        let mut t = p.steady + rng.int(per / 3, per);
        while t < p.end - 60 {
            let x = rng.range(0.0, 1.0);
            p.events.push(Event {
                ev,
                node,
                t0: t,
                t1: t + rng.int(len.0, len.1),
                x,
            });
            t += per;
        }
    };
    if rng.chance(0.45) {
        every(rng, p, Ev::SyncCkpt, (900, 1800), (20, 120), None);
        p.label("checkpoint_sync");
    } else if rng.chance(0.35) {
        // One writer per group of 8 ranks' nodes; the others go on.
        for g in (0..p.n()).step_by(8) {
            every(rng, p, Ev::AsyncCkpt, (600, 1200), (60, 180), Some(g));
        }
        p.label("checkpoint_async");
    }
    if rng.chance(0.3) {
        every(rng, p, Ev::Eval, (1200, 2400), (60, 240), None);
        p.label("eval_phase");
    }
    if rng.chance(0.25) {
        for _ in 0..rng.int(1, 4) {
            let t = rng.int(p.steady, p.end - 120);
            p.events.push(Event {
                ev: Ev::StallJob,
                node: None,
                t0: t,
                t1: t + rng.int(20, 120),
                x: 1.0,
            });
        }
        p.label("dataloader_stall_job");
    }
    if rng.chance(0.2) {
        let t = rng.int(p.steady + 300, p.end - 60);
        p.events.push(Event {
            ev: Ev::BatchChange,
            node: None,
            t0: t,
            t1: p.end + 3600,
            x: rng.range(0.75, 1.3),
        });
        p.label("batch_size_change");
    }
    if rng.chance(0.5) {
        p.label("rank0_extra_work");
    } else {
        p.rank0_extra = false;
    }
}

/// Node-level healthy stragglers: stalls, GC, long sequences, slow silicon.
fn stragglers(rng: &mut Rng, p: &mut Plan) {
    let n = p.n() as i64;
    if rng.chance(0.3) {
        for _ in 0..rng.int(1, 5) {
            let (node, t) = (rng.int(0, n - 1) as usize, rng.int(p.steady, p.end - 90));
            let x = rng.range(0.3, 1.0);
            p.events.push(Event {
                ev: Ev::StallNode,
                node: Some(node),
                t0: t,
                t1: t + rng.int(15, 90),
                x,
            });
        }
        p.label("dataloader_stall_node");
    }
    if rng.chance(0.35) {
        p.gc_pauses = true;
        p.label("gc_pauses");
    }
    let seq = if p.kind == Kind::LongCtx { 0.8 } else { 0.3 };
    if p.kind.synchronous() && n > 1 && rng.chance(seq) {
        for _ in 0..rng.int(3, 15) {
            let (node, t) = (rng.int(0, n - 1) as usize, rng.int(p.steady, p.end - 60));
            let x = rng.range(1.1, 1.6);
            p.events.push(Event {
                ev: Ev::LongSeq,
                node: Some(node),
                t0: t,
                t1: t + rng.int(10, 40),
                x,
            });
        }
        p.label("variable_seq_len");
    }
    if rng.chance(0.4) {
        for _ in 0..rng.int(1, 3) {
            let i = rng.int(0, n - 1) as usize;
            p.lottery[i] = rng.range(1.02, 1.06);
        }
        p.label("silicon_lottery");
    }
}

/// Exporter-side quirks: gaps with counter resets, clock skew, mixed
/// scrape intervals, missing and unknown metrics, a stale XID.
fn exporter_quirks(rng: &mut Rng, p: &mut Plan) {
    let n = p.n() as i64;
    if rng.chance(0.25) {
        for _ in 0..rng.int(1, 2) {
            let (node, t) = (
                rng.int(0, n - 1) as usize,
                rng.int(p.start + 60, p.end - 400),
            );
            p.events.push(Event {
                ev: Ev::ExporterGap,
                node: Some(node),
                t0: t,
                t1: t + rng.int(60, 300),
                x: 0.0,
            });
        }
        p.label("exporter_gap_restart");
    }
    if rng.chance(0.3) {
        for _ in 0..rng.int(1, 3) {
            let i = rng.int(0, n - 1) as usize;
            p.skew[i] = rng.int(10, 45) * if rng.chance(0.5) { 1 } else { -1 };
        }
        p.label("clock_skew");
    }
    if rng.chance(0.3) {
        for iv in p.interval.iter_mut() {
            if rng.chance(0.35) {
                *iv = *rng.pick(&[10, 15, 30]);
            }
        }
        p.label("mixed_scrape_intervals");
    }
    if rng.chance(0.35) {
        for m in p.missing.iter_mut() {
            if rng.chance(0.4) {
                // Metrics a node's exporter may lack: util_min, mem_util,
                // nvlink, pcie, pfc, cnp, disk (bits are metric indices).
                *m = [1u32 << 1, 1 << 3, 1 << 7, 1 << 8, 1 << 11, 1 << 12, 1 << 15]
                    .iter()
                    .filter(|_| rng.chance(0.4))
                    .fold(0, |a, b| a | b);
            }
        }
        p.label("missing_metrics");
    }
    if rng.chance(0.3) {
        p.extra_metrics = true;
        p.label("unknown_metrics");
    }
    if rng.chance(0.12) {
        p.stale_xid = Some((rng.int(0, n - 1) as usize, *rng.pick(&[13, 31, 43, 45])));
        p.label("stale_xid");
    }
}

/// A requeue: silent for minutes, then a restart (sometimes on a new node).
fn requeue(rng: &mut Rng, site: &mut Site, p: &mut Plan) {
    let t = p.steady + rng.int(60, 900);
    let gap = rng.int(180, 600);
    let restart = t + gap;
    p.set_end(p.end + gap);
    p.events.push(Event {
        ev: Ev::Requeue,
        node: None,
        t0: t,
        t1: restart,
        x: 0.0,
    });
    if p.n() > 2 && rng.chance(0.4) {
        let k = rng.int(1, p.n() as i64 - 1) as usize;
        p.present[k].1 = t;
        let h = site.alloc(p.hw, 1)[0];
        p.add_node(h, restart, rng);
        p.label("requeue_node_replaced");
    }
    p.steady = restart + rng.int(120, 400);
    p.warmups.push((restart, p.steady));
    p.label("requeue");
}

/// Elastic training: a node leaves (preempted), later one joins.
fn elastic(rng: &mut Rng, site: &mut Site, p: &mut Plan) {
    let k = rng.int(1, p.n() as i64 - 1) as usize;
    let tl = p.steady + rng.int(300, 1200);
    p.present[k].1 = tl;
    let rdv = rng.int(60, 150);
    p.events.push(Event {
        ev: Ev::Rendezvous,
        node: None,
        t0: tl,
        t1: tl + rdv,
        x: 0.0,
    });
    p.warmups.push((tl + rdv, tl + rdv + rng.int(30, 90)));
    let tg = tl + rdv + rng.int(600, 1200);
    let h = site.alloc(p.hw, 1)[0];
    p.add_node(h, tg, rng);
    let rdv = rng.int(60, 150);
    p.events.push(Event {
        ev: Ev::Rendezvous,
        node: None,
        t0: tg,
        t1: tg + rdv,
        x: 0.0,
    });
    p.steady = tg + rdv + rng.int(60, 200);
    p.warmups.push((tg + rdv, p.steady));
    p.label("elastic_shrink_grow");
}

/// Labels the job with each site event that touched one of its nodes.
pub fn label_site(site: &Site, p: &mut Plan) {
    for e in &site.events {
        let hit = p
            .hosts
            .iter()
            .zip(&p.present)
            .any(|(h, pr)| e.touches(&site.hosts[*h]) && e.t0 < pr.1.min(p.end) && e.t1 > pr.0);
        if hit {
            p.label(match e.kind {
                SiteKind::PowerCap => "site_power_cap",
                SiteKind::Cooling => "site_rack_cooling",
                SiteKind::Congestion => "site_leaf_congestion",
                SiteKind::SpineFlap => "site_spine_flap",
                SiteKind::NvlDomain => "site_nvlink_domain_error",
            });
        }
    }
}
