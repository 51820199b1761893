//! Draws the whole set of jobs: kinds, sizes, start times, the row cap,
//! then which jobs get a fault or a user error, then their confounders.

use super::plan::{self, Kind, Plan};
use super::rng::Rng;
use super::site::{Hw, Site, SiteEvent, SiteKind};
use super::{confounders, faults, users, IndependentSpec};

/// A job's shape before it is placed: (kind, nodes, start, duration, sweep id).
type Shape = (Kind, usize, i64, i64);

/// The job mix (weights per kind; a sweep submits several small jobs).
const KINDS: [(Kind, f64); 8] = [
    (Kind::Pretrain, 20.0),
    (Kind::LongCtx, 12.0),
    (Kind::Moe, 12.0),
    (Kind::RlColo, 8.0),
    (Kind::RlDisagg, 8.0),
    (Kind::Inference, 12.0),
    (Kind::Sweep, 4.0),
    (Kind::Elastic, 6.0),
];

fn shapes(rng: &mut Rng, spec: &IndependentSpec, t0: i64) -> Vec<Shape> {
    let w: Vec<f64> = KINDS.iter().map(|k| k.1).collect();
    let mut out = Vec::new();
    while out.len() < spec.jobs {
        let kind = KINDS[rng.weighted(&w)].0;
        let start = t0 + rng.int(0, spec.window_s.max(1));
        let trials = if kind == Kind::Sweep {
            rng.int(3, 6)
        } else {
            1
        };
        for _ in 0..trials.min((spec.jobs - out.len()) as i64) {
            let s = start
                + if kind == Kind::Sweep {
                    rng.int(0, 600)
                } else {
                    0
                };
            let dur = if kind == Kind::Sweep {
                rng.int(1800, 3600)
            } else {
                rng.int(1800, 7200)
            };
            out.push((kind, plan::draw_nodes(rng, kind), s, dur));
        }
    }
    // A few large jobs every time (at least two of 64+ nodes) before the cap.
    while out.iter().filter(|s| s.1 >= 64).count() < 2 && out.iter().any(|s| s.0 != Kind::Sweep) {
        let k = rng.int(0, out.len() as i64 - 1) as usize;
        if out[k].0 != Kind::Sweep {
            out[k].1 = *rng.pick(&[64, 128, 256]);
        }
    }
    cap_rows(&mut out, spec.max_rows);
    out.sort_by_key(|s| s.2);
    out
}

/// Shrinks the largest jobs until the estimated rows fit under the cap.
fn cap_rows(shapes: &mut [Shape], max_rows: i64) {
    // ~17 rows per scrape, a scrape every ~16 s, plus requeue/halt slack.
    let est = |s: &Shape| s.1 as i64 * (s.3 + 600) / 16 * 17;
    while shapes.iter().map(est).sum::<i64>() > max_rows {
        let big = (0..shapes.len())
            .max_by_key(|&k| est(&shapes[k]))
            .unwrap_or(0);
        let s = &mut shapes[big];
        if s.1 > 2 {
            s.1 = s.1 * 2 / 3;
        } else if s.3 > 1800 {
            s.3 = (s.3 * 3 / 4).max(1800);
        } else {
            break;
        }
    }
}

/// Draws every job's plan.
pub fn draw_all(rng: &mut Rng, site: &mut Site, spec: &IndependentSpec, t0: i64) -> Vec<Plan> {
    let shapes = shapes(rng, spec, t0);
    let mut id = 7_340_000 + rng.int(0, 60_000);
    let mut plans: Vec<Plan> = shapes
        .iter()
        .map(|&(kind, n, start, dur)| {
            id += rng.int(1, 40);
            plan::skeleton(rng, site, id.to_string(), kind, n, start, dur)
        })
        .collect();
    let (faulty, user, bad) = assign(rng, &plans, spec);
    for (k, p) in plans.iter_mut().enumerate() {
        confounders::draw(rng, site, p);
        if faulty.contains(&k) {
            faults::plant(rng, p);
            nvlink_domain(site, p);
        } else if user.contains(&k) {
            users::plant(rng, p, bad.contains(&k));
        }
    }
    let used: Vec<usize> = plans.iter().flat_map(|p| p.hosts.iter().copied()).collect();
    site.draw_events(rng, t0, spec.window_s + 3600, &used);
    // After every fault is planted: a job may be hit by a later job's fault.
    for p in plans.iter_mut() {
        confounders::label_site(site, p);
    }
    plans
}

/// An NVLink error on a GB200 tray degrades its whole NVL72 domain, other
/// tenants' trays in that rack included, until the rack is serviced.
fn nvlink_domain(site: &mut Site, p: &Plan) {
    let Some(f) = p
        .fault
        .as_ref()
        .filter(|f| f.kind == faults::FaultKind::NvLink && p.hw == Hw::Gb200)
    else {
        return;
    };
    site.events.push(SiteEvent {
        kind: SiteKind::NvlDomain,
        scope: vec![site.hosts[p.hosts[f.node]].rack],
        t0: f.onset,
        t1: f.onset + 3600,
        x: 0.15 + 0.1 * (f.x - 1.0),
        owner: Some(p.id.clone()),
    });
}

/// Chooses the faulty jobs (at least 2 nodes), the user-error jobs (from
/// the rest) and the bad user's 2-3 jobs among those.
fn assign(
    rng: &mut Rng,
    plans: &[Plan],
    spec: &IndependentSpec,
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let n = plans.len();
    let mut order: Vec<usize> = (0..n).collect();
    for k in (1..n).rev() {
        order.swap(k, rng.int(0, k as i64) as usize);
    }
    let want_f = (spec.fault_share * n as f64).round() as usize;
    let faulty: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&k| plans[k].n() >= 2)
        .take(want_f)
        .collect();
    let want_u = (spec.user_share * n as f64).round() as usize;
    let user: Vec<usize> = order
        .iter()
        .copied()
        .filter(|k| !faulty.contains(k))
        .take(want_u)
        .collect();
    let bad = if user.len() >= 4 && rng.chance(0.7) {
        let cand: Vec<usize> = user
            .iter()
            .copied()
            .filter(|&k| plans[k].kind.synchronous())
            .collect();
        cand.into_iter().take(rng.int(2, 3) as usize).collect()
    } else {
        Vec::new()
    };
    (faulty, user, bad)
}
