//! A twelfth generator of per-node metric traces of multi-node GPU jobs with
//! planted faulty nodes, and its scorer; written blind from a brief, without
//! reading the detector (`lemon watch`) or the other generators (issue 45).
//!
//! # The site
//! A 2026 neo-cloud rented to many tenants: 40 GB200 NVL72 racks
//! (`gb200-r12-t07`: a 4-GPU compute tray, 18 trays per NVLink domain), 640
//! B200 HGX nodes (`b200-0413`: 8 GPUs, 8x400G InfiniBand) and 480 older H100
//! nodes (`h100-a3-017`). Slurm packs a job onto consecutive hosts (few
//! racks, few leaves). Every node is scraped every 10, 15 or 30 s with
//! ±1 s jitter; each row is a node-level aggregate (util means, power sums).
//!
//! # Jobs (`spec.jobs`, default 40, started over `window_s` = 90 min)
//! 30-120 minutes of trace; 2-96 nodes log-normal around 8, 7% large
//! (64/128/256). Mix: 3D-parallel pretraining 20 (pipeline: first and last
//! stage lighter), long-context FSDP 12, MoE 12 (hot experts move every
//! 3 min), colocated RL 8 (all nodes generate, long-tail nodes idle, then
//! train), disaggregated RL 8 (rollout nodes decode; learners train then wait
//! for the slowest rollout), inference sweeps 12 (independent replicas),
//! hyper-parameter sweeps 4 (3-6 jobs of 1-2 nodes each), elastic 6 (loses a
//! node, re-rendezvous, gains one). Synchronous jobs share one step time:
//! the slowest node's compute plus communication slowed by the worst link;
//! the others spin in NCCL (util stays, power and traffic fall).
//!
//! # Confounders (healthy; each job draws its own)
//! Synchronous checkpoints 45% (staggered seconds apart) or asynchronous
//! ones ~20% (one writer per 8 nodes, slightly slower); evaluation phases
//! 30%; job-wide data-loader stalls 25%; one-node stalls 30%; unsynchronised
//! GC pauses 35%; one-rank long sequences 30% (80% in long-context jobs);
//! rank 0 extra work 50%; silicon lottery (1-3 nodes 2-6% slower for life)
//! 40%; warm-up/compile of 2-12 min, nodes done at different times (label
//! `warmup_long` over 7 min); batch-size change 20%; exporter gaps with
//! counter resets 25%; clock skew up to 45 s 30%; mixed scrape intervals 30%;
//! missing metrics 35%; unknown extra metrics 30%; requeue 12% (silent
//! 3-10 min, restart, 40% with one node replaced); stale XID 13/31/43/45
//! from an earlier tenant 12%. Site events hit every job on their hosts:
//! 1-2 power caps (2-4 racks of a row, 10-25%, 10-30 min), one NVL72
//! rack's cooling event, 1-3 leaf congestions (PFC, CNP, a few % slower), a
//! flapping spine link (a quarter of the leaves, 20 s dips every 90 s), all
//! placed where jobs run; and an NVLink error of another tenant's tray in an
//! NVL72 rack degrades the whole domain (`site_nvlink_domain_error`). Labels start with
//! `job:` for the job kind, `site_` for site events, `user_` for user errors.
//!
//! # User errors (`user_share`, default 30% of jobs; healthy hardware)
//! CUDA OOM, Python exception and application XID 13/31/43 on one rank (it
//! exits, peers spin until torchrun's agent kills the job in 1.5-3 min);
//! NaN loss (all exit together); deadlock (all spin until the NCCL watchdog
//! at 10 min or PyTorch's 30 min default); one rank stuck before a barrier
//! (its GPUs idle, peers spin); a hung inference replica (100% util, low
//! power, others serve on); scancel; and in 70% of seeds a bad user whose
//! 2-3 jobs crash the same way (OOM) on rank 0.
//!
//! # Faults (`fault_share`, default 40%; one node, onset >= 5 min after steady)
//! Weights after Minder's mix: ECC uncorrectable 17 (XID 48/63/64/94/95;
//! 60% crash, 40% hang), GPU fell off the bus 9 (XID 79; its power and
//! memory vanish from the sums; the job hangs, killed by torchrun), GSP hang
//! 6 (XID 119/120; 60% DCGM stops answering, else util pinned at low power),
//! NVLink error 11 (XID 74; in an NVL72 rack every tray's NVLink traffic
//! drops, the culprit's most; half crash), PCIe downgrade 10 (no XID; PCIe
//! traffic halves or quarters, a little slower), NIC down/flapping 15 (its
//! own IB traffic lower, PFC/CNP up, everyone slower), thermal 8 and power
//! brake 5 (clocks drop, may cycle), one slow GPU 6 (node mean clock barely
//! moves, the job slows), host CPU/memory trouble 7 (machine-check bursts
//! starve its GPUs while peers spin), machine unreachable 6 (all its rows
//! stop). 15% are subtle: a 4-25% slowdown with no halt. The reported onset
//! is in the faulty node's own clock (its skew added).

mod confounders;
mod emit;
mod faults;
mod jobs;
mod phases;
mod plan;
mod rng;
mod score;
mod sim;
mod site;
mod users;

#[cfg(test)]
mod tests;

pub use score::{score, Call, Score, Tally, TierPair};

use emit::{NodeState, Row};
use plan::{Ev, Plan};
use rng::{h01, mix, Rng};
use sim::Sim;
use site::Site;
use std::io::{self, Write};

/// 2026-06-09, a Tuesday morning: the first job may start here.
const T0: i64 = 1_781_000_000;

#[derive(Debug, Clone)]
pub struct IndependentSpec {
    pub seed: u64,
    pub jobs: usize,
    pub fault_share: f64,
    pub user_share: f64,
    pub max_rows: i64,
    pub window_s: i64,
}

impl IndependentSpec {
    pub fn new(seed: u64) -> Self {
        IndependentSpec {
            seed,
            jobs: 40,
            fault_share: 0.4,
            user_share: 0.3,
            max_rows: 3_500_000,
            window_s: 5400,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedFault {
    pub kind: String,
    pub node: String,
    pub onset: i64,
    pub subtle: bool,
}

#[derive(Debug, Clone)]
pub struct IndependentJob {
    pub job: String,
    pub nodes: Vec<String>,
    pub fault: Option<PlantedFault>,
    pub confounders: Vec<String>,
}

/// Writes the traces of `spec` as CSV to `out` and returns the truth.
pub fn generate(spec: &IndependentSpec, out: &mut impl Write) -> io::Result<Vec<IndependentJob>> {
    let (site, plans) = draw(spec);
    let mut rows = Vec::new();
    for (k, p) in plans.iter().enumerate() {
        let sim = Sim::new(p, &site, mix(spec.seed ^ (k as u64 + 1) << 32));
        for i in 0..p.n() {
            node_rows(&sim, k as u16, i, &mut rows);
        }
    }
    // The scraper appends rows as they arrive: in time order.
    rows.sort_unstable_by_key(|r| (r.t, r.job, r.host, r.metric));
    let mut w = io::BufWriter::with_capacity(1 << 20, out);
    writeln!(w, "time,job,node,metric,value")?;
    for r in &rows {
        emit::write_row(
            &mut w,
            r,
            &plans[r.job as usize].id,
            &site.hosts[r.host as usize].name,
        )?;
    }
    w.flush()?;
    Ok(plans.iter().map(|p| truth(&site, p)).collect())
}

/// The site and the jobs' plans for a spec (no rows).
fn draw(spec: &IndependentSpec) -> (Site, Vec<Plan>) {
    let mut rng = Rng::new(spec.seed);
    let mut site = Site::new(&mut rng);
    let plans = jobs::draw_all(&mut rng, &mut site, spec, T0);
    (site, plans)
}

/// Every scrape of node `i`: a fixed grid with ±1 s jitter, minus gaps.
fn node_rows(sim: &Sim, job: u16, i: usize, rows: &mut Vec<Row>) {
    let p = sim.p;
    let (a, b) = p.present[i];
    let iv = p.interval[i];
    let first = a + (h01(sim.key, i as u64, 5) * iv as f64) as i64;
    let mut st = NodeState::default();
    for k in 0.. {
        let jitter = (h01(sim.key, i as u64, 6 + k as u64) * 3.0) as i64 - 1;
        let t = first + k * iv + jitter;
        if t >= b.min(p.end) {
            break;
        }
        if p.events
            .iter()
            .any(|e| e.ev == Ev::ExporterGap && e.active(i, t))
        {
            continue;
        }
        emit::scrape(sim, job, i, t, &mut st, rows);
    }
}

fn truth(site: &Site, p: &Plan) -> IndependentJob {
    let name = |i: usize| site.hosts[p.hosts[i]].name.clone();
    IndependentJob {
        job: p.id.clone(),
        nodes: (0..p.n()).map(name).collect(),
        fault: p.fault.as_ref().map(|f| PlantedFault {
            kind: f.kind.name().to_string(),
            node: name(f.node),
            onset: f.onset + p.skew[f.node],
            subtle: f.subtle,
        }),
        confounders: p.labels.clone(),
    }
}
