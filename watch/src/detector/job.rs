//! The state of one running job: its nodes' recent samples, what was learned
//! in its warm-up, the current candidate, and the nodes already called.

use super::baseline::{self, MetricBaseline};
use super::near_peak::{Fit, NearPeak};
use super::peers::{self, MetricStep};
use super::rules::{Direction, MetricRule};
use super::small;
use super::stall;
use super::xid::{XidGauges, XidReading};
use crate::{Detection, Tier};
use lemonade_config::WatchSettings;
use std::collections::{HashMap, VecDeque};

use super::series::Series;

/// The evidence against a called node.
#[derive(Debug, Default)]
struct Evidence {
    /// The metrics against it, most sensitive first.
    metrics: Vec<String>,
    /// A primary metric is among them.
    primary: bool,
    /// A metric of the node's own work ([`MetricRule::own_work`]) is among them.
    own_work: bool,
    /// The combined distance over the metrics whose place of this node
    /// among its peers was learned in the warm-up.
    placed_score: f64,
    /// The combined distance over those of them that are of the node's own work.
    placed_own_work: f64,
    /// The combined distance over every metric (0 without a primary one).
    combined: f64,
    /// The node stopped while its peers wait for it (`stopped_fraction`).
    stopped: bool,
    /// One of its GPUs stopped while the node's others work
    /// (`stopped_gpu_metric`).
    gpu_stopped: bool,
    /// Its GPUs spin without work while its peers work (`spinning_metric`).
    spinning: bool,
    /// What the node's XID gauge says (`xid_metric`).
    xid: XidReading,
}

impl Evidence {
    /// The high-confidence bar, on the metrics whose normal for this node
    /// is known: the node stands apart by `drain_score`, and its own work
    /// alone by `threshold` (the network's counters, and a dip in its own
    /// work within noise beside them, cannot tell a node's link from
    /// another tenant's traffic under the same leaf). A node whose place
    /// was never learned (a gap in its warm-up, an offset that wobbled) may
    /// differ by design (a pipeline stage of its own), so it is reported;
    /// so is a node that stopped, unless its XID gauge names a hardware
    /// XID: its ranks may have died of the user's code; and a node whose
    /// GPUs spin while its fresh gauge names no hardware XID: the user's
    /// code may hang there, and a dead link the gauge cannot see (a NIC's)
    /// is still reported.
    fn drains(&self, cfg: &WatchSettings) -> bool {
        (!self.stopped || matches!(self.xid, XidReading::Hardware(_)))
            && !(self.spinning && self.xid == XidReading::NoHardware)
            && self.wait_s(cfg).is_some()
            && self.placed_own_work >= cfg.threshold
            && self.placed_score >= cfg.drain_score
    }

    /// The node stopped, or one of its GPUs did, or its GPUs spin, and
    /// its XID gauge names a hardware XID: the driver has said what broke.
    fn driver_named(&self) -> bool {
        driver_named((self.stopped, self.gpu_stopped, self.spinning), self.xid)
    }

    /// How long the node must stay stopped before it is called
    /// ([`stop_wait_s`]); `None`: never.
    fn wait_s(&self, cfg: &WatchSettings) -> Option<i64> {
        stop_wait_s((self.stopped, self.gpu_stopped), self.xid, cfg)
    }
}

/// One metric of one job.
#[derive(Debug)]
struct Metric {
    name: Box<str>,
    rule: MetricRule,
    baseline: Option<MetricBaseline>,
    /// The baseline of the job's warm-up before a restart, until the next is learned.
    before_restart: Option<MetricBaseline>,
    /// Warm-up steps of the baseline window, each the denoised value per
    /// node (NaN: missing); emptied once learned.
    warmup: Vec<Vec<f64>>,
    /// The job's level at the last step it was compared.
    last_level: f64,
    /// The job's highest level of this metric of its nodes' own work before
    /// its baseline was learned (NaN: another metric).
    peak_level: f64,
}

/// One job under watch.
#[derive(Debug)]
pub struct Job {
    pub id: Box<str>,
    start: i64,
    pub last_seen: i64,
    nodes: Vec<Box<str>>,
    node_index: HashMap<Box<str>, usize>,
    metrics: Vec<Metric>,
    metric_index: HashMap<Box<str>, usize>,
    /// `series[node][metric]`.
    series: Vec<Vec<Series>>,
    called: Vec<bool>,
    learned: bool,
    /// When the job's samples came back after a silence of `RESTART_GAP_S`
    /// or more: a requeued job is down for minutes.
    resumed_at: Option<i64>,
    /// A node joined as the job came back after a silence, its baseline
    /// learned: a replacement, and the job is learned again.
    joined_late: bool,
    /// The warm-up's first steps near the job's peak: what it learns from.
    near_peak: NearPeak,
    /// The node that stood alone at the last steps, and for how many.
    candidate: Option<(usize, u32)>,
    /// Steps left before candidates count again after a shared phase change.
    settling: u32,
    /// The levels of the learned metrics before the last phase change.
    edge_levels: Vec<f64>,
    /// The levels of the learned metrics at the last `phase_lag_s` of steps, newest last.
    recent_levels: VecDeque<Vec<f64>>,
    /// A node of this job was drained: what follows is the fault's wake.
    drained: bool,
    /// Small jobs: since when each node has been flagged without a break.
    flagged_since: Vec<Option<i64>>,
    /// Reported nodes watched for a drain: the steps in a row each has held
    /// the drain bar.
    held_bar: Vec<Option<u32>>,
    /// Reported nodes that held the drain bar and then left it: their next
    /// drain waits `continuity_steps` longer.
    left_bar: Vec<bool>,
    /// Each node's XID gauge, if exported.
    xids: XidGauges,
    /// The node whose hardware XID came as the job stalled, the steps in a
    /// row the stall has held, and when it began (x).
    stall_named: Option<(usize, u32, i64)>,
    /// `values[metric * nodes + node]` of the current step; NaN for called nodes.
    values: Vec<f64>,
    /// The same for called nodes only, judged against the others' levels.
    called_values: Vec<f64>,
}

/// A silence of the whole job this long is a restart, not missed scrapes:
/// no exporter is scraped less often than every 60 s. A node that joins
/// within as long after it is a replacement.
const RESTART_GAP_S: i64 = 120;

/// A drain needs a node to do less than this share of its job's nodes
/// (`1 / DRAIN_GROUP_SHARE`, at least one other) were learned to do by
/// design: pipelines run up to 8 stages.
const DRAIN_GROUP_SHARE: usize = 8;

/// Steps in a row a node whose driver named its hardware
/// ([`Evidence::driver_named`]) must stand alone before it is called and
/// drained at once: torchrun's agent may kill the job 90 s after a rank
/// dies, long before `continuity_steps`, and no role of the job's raises
/// a hardware XID.
const DRIVER_NAMED_STEPS: u32 = 3;

/// The steps of `interval_s` that `span_s` takes, at least one.
fn steps_of(span_s: i64, cfg: &WatchSettings) -> u32 {
    let steps = (span_s + cfg.interval_s - 1) / cfg.interval_s;
    u32::try_from(steps.max(1)).unwrap_or(u32::MAX)
}

/// How long a node that `stopped`, or one of whose GPUs stopped
/// (`gpu_stopped`), must stay so before it is called, in jobs of any
/// size. `None`: never, as its fresh XID gauge names no hardware XID, so
/// its job stopped it there: a rank stuck in the user's code idles its
/// GPU as a dead GPU would, and the driver says which. A stopped node with
/// no gauge to say why (`Unknown`) waits `unexplained_stop_s`: rank 0
/// writing a checkpoint alone while the others wait for it looks the same
/// for minutes. One idle GPU among busy ones is no whole node's crash:
/// without a gauge, the metrics judge it at once.
fn stop_wait_s(
    (stopped, gpu_stopped): (bool, bool),
    xid: XidReading,
    cfg: &WatchSettings,
) -> Option<i64> {
    match xid {
        XidReading::NoHardware if stopped || gpu_stopped => None,
        XidReading::Unknown if stopped => Some(cfg.unexplained_stop_s),
        _ => Some(0),
    }
}

/// Whether a node that `stopped`, or one of whose GPUs stopped, or whose
/// GPUs spin, has an XID gauge naming a hardware XID: the driver has said
/// what broke, in a job of any size.
fn driver_named((stopped, gpu_stopped, spinning): (bool, bool, bool), xid: XidReading) -> bool {
    (stopped || gpu_stopped || spinning) && matches!(xid, XidReading::Hardware(_))
}

/// Buffers shared by every job's steps.
#[derive(Debug, Default)]
pub struct StepScratch {
    peers: peers::Scratch,
    /// For judging reported nodes: buffers, and per metric the others' level, centre and spread.
    reference: peers::Scratch,
    references: Vec<Option<(f64, f64, f64)>>,
    drops: Vec<(usize, f64)>,
}

impl Job {
    pub fn new(id: &str, start: i64) -> Self {
        Self {
            id: id.into(),
            start,
            last_seen: start,
            nodes: Vec::new(),
            node_index: HashMap::new(),
            metrics: Vec::new(),
            metric_index: HashMap::new(),
            series: Vec::new(),
            called: Vec::new(),
            learned: false,
            resumed_at: None,
            joined_late: false,
            near_peak: NearPeak::default(),
            candidate: None,
            settling: 0,
            edge_levels: Vec::new(),
            recent_levels: VecDeque::new(),
            drained: false,
            flagged_since: Vec::new(),
            held_bar: Vec::new(),
            left_bar: Vec::new(),
            xids: XidGauges::default(),
            stall_named: None,
            values: Vec::new(),
            called_values: Vec::new(),
        }
    }

    /// Takes one finite sample; returns whether it was kept (the first
    /// sample after an exporter gap is not).
    pub fn push(
        &mut self,
        time: i64,
        node: &str,
        metric: &str,
        value: f64,
        cfg: &WatchSettings,
    ) -> bool {
        if time - self.last_seen >= RESTART_GAP_S {
            self.resumed_at = Some(time);
        }
        self.last_seen = time;
        let known = self.nodes.len();
        let node = self.node(node);
        self.joined_late |= node >= known
            && self.learned
            && self.resumed_at.is_some_and(|at| time - at <= RESTART_GAP_S);
        if !cfg.xid_metric.is_empty() && *metric == *cfg.xid_metric {
            self.xids.observe((node, time), value, &cfg.hardware_xids);
        }
        let metric = self.metric(metric, cfg);
        let row = &mut self.series[node];
        if row.len() <= metric {
            row.resize_with(metric + 1, Series::default);
        }
        row[metric].push(time, value, cfg.stale_s, cfg.denoise_samples)
    }

    fn node(&mut self, name: &str) -> usize {
        if let Some(&i) = self.node_index.get(name) {
            return i;
        }
        let i = self.nodes.len();
        self.nodes.push(name.into());
        self.node_index.insert(name.into(), i);
        self.series.push(Vec::new());
        self.called.push(false);
        self.flagged_since.push(None);
        self.held_bar.push(None);
        self.left_bar.push(false);
        i
    }

    fn metric(&mut self, name: &str, cfg: &WatchSettings) -> usize {
        if let Some(&i) = self.metric_index.get(name) {
            return i;
        }
        let i = self.metrics.len();
        self.metrics.push(Metric {
            name: name.into(),
            rule: MetricRule::of(name, cfg),
            baseline: None,
            before_restart: None,
            warmup: Vec::new(),
            last_level: f64::NAN,
            peak_level: f64::NAN,
        });
        self.metric_index.insert(name.into(), i);
        i
    }

    /// Closes the step that ends at `end` (exclusive); `trigger` is the time
    /// of the sample whose arrival closed it. Calls go to `out`.
    pub fn close_step(
        &mut self,
        end: i64,
        trigger: i64,
        cfg: &WatchSettings,
        scratch: &mut StepScratch,
        out: &mut Vec<Detection>,
    ) {
        if self.drained {
            return;
        }
        if self.joined_late {
            self.learn_again(end);
        }
        self.snapshot(end, cfg);
        if !self.learned && !self.warm_up(end, cfg) {
            return;
        }
        if self.stall_named_by_driver(end, trigger, cfg, out) {
            return;
        }
        if self.nodes.len() <= cfg.small_job_max_nodes {
            self.small_step(end, trigger, cfg, scratch, out);
        } else {
            self.peer_step(trigger, cfg, scratch, out);
        }
    }

    /// (x) Drains the node whose XID gauge alone named a hardware XID as the
    /// whole job stalled ([`stall::others_stalled`] on a metric of the
    /// nodes' own work), once the stall has held `DRIVER_NAMED_STEPS`: its
    /// rank hung and the others wait for it, so nothing else sets it apart.
    /// Returns whether it drained.
    fn stall_named_by_driver(
        &mut self,
        end: i64,
        trigger: i64,
        cfg: &WatchSettings,
        out: &mut Vec<Detection>,
    ) -> bool {
        let nodes = self.nodes.len();
        let stalled = self.xids.named_alone().and_then(|(node, _, xid_at)| {
            let metric = self.metrics.iter().enumerate().find_map(|(m, metric)| {
                let baseline = metric.baseline.as_ref()?;
                let values = &self.values[m * nodes..(m + 1) * nodes];
                stall::others_stalled(&metric.rule, baseline, values, node, cfg)
                    .then(|| metric.name.to_string())
            })?;
            Some((node, xid_at, metric))
        });
        let Some((node, xid_at, metric)) = stalled else {
            self.stall_named = None;
            return false;
        };
        let (steps, since) = match self.stall_named {
            Some((n, steps, since)) if n == node => (steps + 1, since),
            _ => (1, end),
        };
        self.stall_named = Some((node, steps, since));
        if steps < DRIVER_NAMED_STEPS || !stall::came_with(xid_at, since) {
            return false;
        }
        let metrics = vec![cfg.xid_metric.clone(), metric];
        self.call(node, trigger, (metrics, 0.0, Tier::Drain), out);
        true
    }

    /// Starts the warm-up over from `end`, forgetting any node's run towards
    /// a call but not the calls made, nor the places of the nodes that
    /// were learned before ([`MetricBaseline::keep_places`]): a node that
    /// joins as a job comes back from a silence is a replacement after a
    /// restart from a checkpoint (Slurm's requeue), and nothing about its
    /// place is known. Judged by the old baseline, a replacement whose
    /// exporter sums its GPUs differently, or that sits in another rack,
    /// stands apart for the rest of the job. A node that is merely late (an
    /// exporter gap at the start) joins no silence, and is judged,
    /// unplaced, as before.
    fn learn_again(&mut self, end: i64) {
        self.joined_late = false;
        self.learned = false;
        self.start = end;
        for metric in &mut self.metrics {
            metric.before_restart = metric.baseline.take().or(metric.before_restart.take());
            metric.warmup.clear();
            metric.last_level = f64::NAN;
            metric.peak_level = f64::NAN;
        }
        self.near_peak = NearPeak::default();
        self.candidate = None;
        self.settling = 0;
        self.edge_levels.clear();
        self.recent_levels.clear();
        self.flagged_since.fill(None);
        // A reported node still waits for its drain, from the start.
        for held in self.held_bar.iter_mut().flatten() {
            *held = 0;
        }
        self.left_bar.fill(false);
    }

    /// Fills `values` with each node's denoised value (NaN for missing or
    /// called nodes) and `called_values` with the called nodes'.
    fn snapshot(&mut self, end: i64, cfg: &WatchSettings) {
        let nodes = self.nodes.len();
        for buffer in [&mut self.values, &mut self.called_values] {
            buffer.clear();
            buffer.resize(self.metrics.len() * nodes, f64::NAN);
        }
        for (node, row) in self.series.iter().enumerate() {
            let into = if self.called[node] {
                &mut self.called_values
            } else {
                &mut self.values
            };
            for (metric, series) in row.iter().enumerate() {
                if let Some(v) = series.denoised(end, cfg.stale_s) {
                    into[metric * nodes + node] = v;
                }
            }
        }
    }

    /// Keeps the last `baseline_s` of steps for the baseline.
    fn remember_warmup(&mut self, cfg: &WatchSettings) {
        let nodes = self.nodes.len();
        let keep = (cfg.baseline_s / cfg.interval_s).max(1) as usize;
        for (m, metric) in self.metrics.iter_mut().enumerate() {
            if metric.warmup.len() >= keep {
                metric.warmup.remove(0);
            }
            metric
                .warmup
                .push(self.values[m * nodes..(m + 1) * nodes].to_vec());
        }
    }

    /// Takes one warm-up step; true once the baseline is learned: past
    /// `warmup_s`, once the job's level held over the last `baseline_s`, or
    /// at `warmup_max_s`.
    fn warm_up(&mut self, end: i64, cfg: &WatchSettings) -> bool {
        let levels = self.own_work_levels();
        for (metric, &level) in self.metrics.iter_mut().zip(&levels) {
            metric.peak_level = metric.peak_level.max(level);
        }
        // Other metrics' levels are NaN, and so are their peaks.
        let peaks: Vec<f64> = self.metrics.iter().map(|m| m.peak_level).collect();
        let fit = Fit {
            keep: (cfg.baseline_s / cfg.interval_s).max(1) as usize,
            floor_fraction: cfg.floor_fraction,
            tolerance: cfg.transition_change,
        };
        let nodes = self.nodes.len();
        self.near_peak
            .observe((&levels, &peaks), &self.values, nodes, fit);
        if end >= self.start + cfg.warmup_s - cfg.baseline_s {
            self.remember_warmup(cfg);
        }
        let due = self.start + cfg.warmup_s;
        if end < due || (end < self.start + cfg.warmup_max_s && !self.warmup_is_steady(cfg)) {
            return false;
        }
        let late = end >= due + cfg.interval_s;
        self.learn(late, cfg);
        true
    }

    /// The job's level (its median node) of each metric of its nodes' own
    /// work at this step; NaN for other metrics and where none reported.
    fn own_work_levels(&self) -> Vec<f64> {
        let nodes = self.nodes.len();
        let mut scratch = Vec::with_capacity(nodes);
        let mut levels = vec![f64::NAN; self.metrics.len()];
        for (m, metric) in self.metrics.iter().enumerate() {
            if !metric.rule.own_work() {
                continue;
            }
            scratch.clear();
            let values = &self.values[m * nodes..(m + 1) * nodes];
            scratch.extend(values.iter().copied().filter(|v| !v.is_nan()));
            levels[m] = crate::stats::median(&mut scratch).unwrap_or(f64::NAN);
        }
        levels
    }

    /// Whether the job's level of each metric of its nodes' own work held
    /// over the steps kept for the baseline: a start-up that outlasts
    /// `warmup_s` (a long model load, a compile, a slow ramp) would teach
    /// each node its place in the start-up, not in training.
    fn warmup_is_steady(&self, cfg: &WatchSettings) -> bool {
        self.metrics
            .iter()
            .filter(|metric| metric.rule.own_work())
            .all(|metric| {
                baseline::is_steady(&metric.warmup, cfg.floor_fraction, cfg.transition_change)
            })
    }

    /// Learns each metric's baseline: from the last `baseline_s` when the
    /// job was steady as the warm-up fell due, else (`late`:
    /// a checkpoint, an evaluation or a long start-up in the way) from the
    /// first steps it spent near its peak, if there were half a window of
    /// them: the last window may have started after a fault's onset, and
    /// the steps before it may be an evaluation phase.
    fn learn(&mut self, late: bool, cfg: &WatchSettings) {
        let enough = ((cfg.baseline_s / cfg.interval_s).max(1) as usize).div_ceil(2);
        for (m, metric) in self.metrics.iter_mut().enumerate() {
            let near_peak = late.then(|| self.near_peak.steps_of(m, enough)).flatten();
            let steps = near_peak.as_deref().unwrap_or(&metric.warmup);
            metric.baseline = MetricBaseline::learn(steps, cfg.floor_fraction);
            if let (Some(now), Some(before)) = (&mut metric.baseline, &metric.before_restart) {
                now.keep_places(before);
            }
            metric.before_restart = None;
            metric.warmup = Vec::new();
        }
        self.near_peak = NearPeak::default();
        self.learned = true;
    }

    fn peer_step(
        &mut self,
        trigger: i64,
        cfg: &WatchSettings,
        scratch: &mut StepScratch,
        out: &mut Vec<Detection>,
    ) {
        let nodes = self.nodes.len();
        let picked = {
            let steps: Vec<MetricStep<'_>> = self
                .metrics
                .iter()
                .enumerate()
                .filter_map(|(m, metric)| {
                    Some(MetricStep {
                        rule: &metric.rule,
                        baseline: metric.baseline.as_ref()?,
                        values: &self.values[m * nodes..(m + 1) * nodes],
                    })
                })
                .collect();
            peers::step(&steps, nodes, cfg, &mut scratch.peers)
        };
        self.note_phase(cfg, &scratch.peers.levels);
        let settling = self.settling > 0;
        self.settling = self.settling.saturating_sub(1);
        if !settling && self.escalate(trigger, cfg, scratch, out) {
            return;
        }
        // Across a shared phase edge, a node whose clock lags still shows
        // the level before it: it counts only if it stands out from that too.
        // Either way the edge neither makes nor breaks continuity. Nor does a
        // step that cannot judge: the job in a shared phase (a checkpoint
        // every few minutes would otherwise reset a dead node's count
        // before it reached `continuity_steps`), or the top node where the
        // whole job just was.
        let lagging = picked.is_some_and(|c| self.lags_the_job(c.node, cfg, &scratch.peers));
        let picked = picked.filter(|_| !lagging);
        let unjudged = lagging || !scratch.peers.judged;
        self.remember_levels(cfg, &scratch.peers.levels);
        let candidate = match picked {
            Some(c) if !settling || self.stands_out_from_edge(c.node, cfg, &scratch.peers) => c,
            _ if settling || unjudged => return,
            _ => {
                self.candidate = None;
                return;
            }
        };
        let count = match self.candidate {
            Some((node, count)) if node == candidate.node => count + 1,
            _ => 1,
        };
        self.candidate = Some((candidate.node, count));
        if count < cfg.continuity_steps.min(DRIVER_NAMED_STEPS) {
            return;
        }
        self.call_if_due(candidate, count, trigger, cfg, &scratch.peers, out);
    }

    /// Calls `candidate`, the node that has stood alone for `count` steps
    /// in a row, when its evidence at this `step` makes a call: a stopped
    /// node waits (`stop_wait_s`), and the network's counters alone wait
    /// `fabric_only_steps`. The call is reported, or drained at once when
    /// it clears the drain bar and `drain_after_s` is 0 or the driver named
    /// its hardware, which needs no `continuity_steps` either.
    fn call_if_due(
        &mut self,
        candidate: peers::Candidate,
        count: u32,
        trigger: i64,
        cfg: &WatchSettings,
        step: &peers::Scratch,
        out: &mut Vec<Detection>,
    ) {
        let evidence = self.evidence_at_step(candidate.node, cfg, step);
        let driver_named = evidence.driver_named();
        if count < cfg.continuity_steps && !driver_named {
            return;
        }
        // A stopped node: no call yet, while the count goes on in case an
        // XID follows or the stop outlasts a checkpoint. A node one of
        // whose GPUs stopped, with no hardware XID, is not called.
        if evidence
            .wait_s(cfg)
            .is_none_or(|wait| count < steps_of(wait, cfg))
        {
            return;
        }
        // Minder's metric priority: host load and metrics the detector does
        // not know say something is different about the node, not that its
        // share of the job failed, so alone they make no call. The network's
        // counters move with other tenants' traffic and incast too: without
        // a fall in the node's own work they must hold longer (a failing
        // link or a host that cannot drain its NIC does not let up).
        let fabric_only =
            !evidence.own_work && count < cfg.fabric_only_steps.max(cfg.continuity_steps);
        if !evidence.primary || fabric_only {
            return;
        }
        let drains = evidence.drains(cfg);
        let tier = if drains && (cfg.drain_after_s <= 0 || driver_named) {
            Tier::Drain
        } else {
            self.held_bar[candidate.node] = Some(u32::from(drains));
            Tier::Report
        };
        let metrics = evidence.metrics;
        self.call(
            candidate.node,
            trigger,
            (metrics, candidate.score, tier),
            out,
        );
    }

    /// The evidence against `node`, not yet called, at this step (`step`).
    fn evidence_at_step(
        &self,
        node: usize,
        cfg: &WatchSettings,
        step: &peers::Scratch,
    ) -> Evidence {
        let nodes = self.nodes.len();
        let reference = |i: usize| {
            Some((step.levels[i], step.centres[i], step.spreads[i])).filter(|r| !r.0.is_nan())
        };
        let mut evidence = self.evidence_of_node(
            node,
            |i| step.evidence[i * nodes + node],
            |i, e| self.drain_part(node, (i, e), &self.values, reference(i), cfg),
        );
        let level = |i: usize| step.levels.get(i).copied();
        self.note_stops(node, &self.values, cfg, level, &mut evidence);
        evidence
    }

    /// Judges the reported nodes against this step's levels of the others:
    /// one that has held the drain bar for `drain_after_s` is called again,
    /// with the drain tier, if it stands alone: while another reported node
    /// is at the bar within `uniqueness` of it, neither drains (a hung job's
    /// broken machine and a rank 0 whose role shows in the hang). A step
    /// with nothing to judge a node on (its samples missing, the job in a
    /// shared phase) neither counts nor breaks its run. Returns whether a
    /// node was drained.
    fn escalate(
        &mut self,
        trigger: i64,
        cfg: &WatchSettings,
        scratch: &mut StepScratch,
        out: &mut Vec<Detection>,
    ) -> bool {
        if self.held_bar.iter().all(Option::is_none) {
            return false;
        }
        let steps = |span_s: i64| i64::from(steps_of(span_s, cfg));
        self.references(cfg, scratch);
        let step = &scratch.references;
        // (node, steps in a row at the bar, evidence) of the nodes at it now.
        let mut at_bar: Vec<(usize, u32, Evidence)> = Vec::new();
        for node in 0..self.nodes.len() {
            let Some(held) = self.held_bar[node] else {
                continue;
            };
            let Some(evidence) = self.called_evidence(node, cfg, step) else {
                continue;
            };
            let held = if evidence.drains(cfg) {
                held + 1
            } else {
                self.left_bar[node] |= held > 0;
                0
            };
            self.held_bar[node] = Some(held);
            if held > 0 {
                at_bar.push((node, held, evidence));
            }
        }
        at_bar.sort_by(|a, b| b.2.combined.total_cmp(&a.2.combined));
        let mut at_bar = at_bar.into_iter();
        let Some((node, held, evidence)) = at_bar.next() else {
            return false;
        };
        let alone = at_bar
            .next()
            .is_none_or(|(_, _, second)| second.combined < cfg.uniqueness * evidence.combined);
        // A node that left the bar after its report came back in line: that
        // episode was a role (rank 0 writing a checkpoint), and the next one
        // must be as long as a first one, report and drain.
        let again = if self.left_bar[node] {
            i64::from(cfg.continuity_steps)
        } else {
            0
        };
        // The driver has named the hardware since the report: no role of
        // the job's raises a hardware XID, and torchrun may soon kill it.
        let due = if evidence.driver_named() {
            1
        } else {
            steps(self.drain_span(node, cfg)) + again
        };
        if !alone || i64::from(held) < due {
            return false;
        }
        let score = evidence.combined;
        self.call(node, trigger, (evidence.metrics, score, Tier::Drain), out);
        true
    }

    /// How long a reported node must hold the drain bar: `drain_after_s`,
    /// stretched by the square root of its scrape interval in steps where
    /// it is scraped less often than every step, so that a drain rests on
    /// more fresh samples (10 at 30 s rather than 6); asking for all 18
    /// cost a third of the drain recall for one healthy drain fewer.
    fn drain_span(&self, node: usize, cfg: &WatchSettings) -> i64 {
        let mut intervals: Vec<i64> = self.series[node]
            .iter()
            .filter_map(Series::usual_interval)
            .collect();
        intervals.sort_unstable();
        let Some(&usual) = intervals.get(intervals.len() / 2) else {
            return cfg.drain_after_s;
        };
        let stretch = (usual as f64 / cfg.interval_s as f64).max(1.0).sqrt();
        (cfg.drain_after_s as f64 * stretch).round() as i64
    }

    /// Each learned metric's level, centre and spread among the nodes not
    /// called, into `scratch.references`.
    fn references(&self, cfg: &WatchSettings, scratch: &mut StepScratch) {
        let nodes = self.nodes.len();
        scratch.references.clear();
        for (m, metric, baseline) in self.learned_metrics() {
            let step = MetricStep {
                rule: &metric.rule,
                baseline,
                values: &self.values[m * nodes..(m + 1) * nodes],
            };
            let r = peers::reference(&step, cfg, &mut scratch.reference);
            scratch.references.push(r);
        }
    }

    /// A called node's evidence against the others' `references` at this
    /// step, as [`peers::step`] weighs it; `None` when no metric of its own
    /// work can be compared.
    fn called_evidence(
        &self,
        node: usize,
        cfg: &WatchSettings,
        references: &[Option<(f64, f64, f64)>],
    ) -> Option<Evidence> {
        let nodes = self.nodes.len();
        let mut judged = false;
        let mut weighed = Vec::new();
        for (i, (m, metric, baseline)) in self.learned_metrics().enumerate() {
            let v = self.called_values[m * nodes + node];
            let Some((level, centre, spread)) = references[i].filter(|(level, ..)| {
                !v.is_nan() && !peers::in_shared_phase(&metric.rule, baseline, *level, cfg)
            }) else {
                weighed.push(0.0);
                continue;
            };
            judged |= metric.rule.own_work();
            let residual =
                peers::log_ratio(v, level, baseline.floor) - baseline.expected(node, level);
            let reference = (level, centre, spread);
            let rule = (&metric.rule, baseline);
            weighed.push(peers::weigh(rule, node, v, residual, reference, cfg));
        }
        let mut evidence = self.evidence_of_node(
            node,
            |i| weighed[i],
            |i, e| self.drain_part(node, (i, e), &self.called_values, references[i], cfg),
        );
        let level = |i: usize| references[i].map(|(level, ..)| level);
        self.note_stops(node, &self.called_values, cfg, level, &mut evidence);
        judged.then_some(evidence)
    }

    /// Notes in `evidence` whether `node` stopped, one of its GPUs did or
    /// its GPUs spin ([`Job::stopped`]), and what its XID gauge says, from
    /// this step's `values` (by metric and node) and the others' level of
    /// the `i`th learned metric (`level_of(i)`).
    fn note_stops(
        &self,
        node: usize,
        values: &[f64],
        cfg: &WatchSettings,
        level_of: impl Fn(usize) -> Option<f64>,
        evidence: &mut Evidence,
    ) {
        let stopped = |name: &str| self.stopped((node, name), values, cfg, &level_of);
        evidence.stopped = stopped(&cfg.stopped_metric);
        evidence.gpu_stopped = stopped(&cfg.stopped_gpu_metric);
        evidence.spinning = stopped(&cfg.spinning_metric);
        evidence.xid = self.xid_reading(node, values, cfg);
    }

    /// Whether `node` stopped, or one of its GPUs did: its metric `name`
    /// (`stopped_metric`, `stopped_gpu_metric`), or its GPUs spin without
    /// work (`spinning_metric`): that metric in `values` (this step's,
    /// by metric and node) is below `stopped_fraction` of the others' level
    /// (`level_of(i)` for the `i`th learned metric).
    fn stopped(
        &self,
        (node, name): (usize, &str),
        values: &[f64],
        cfg: &WatchSettings,
        level_of: impl Fn(usize) -> Option<f64>,
    ) -> bool {
        let nodes = self.nodes.len();
        self.learned_metrics()
            .enumerate()
            .find(|(_, (_, metric, _))| *metric.name == *name)
            .and_then(|(i, (m, ..))| Some((values[m * nodes + node], level_of(i)?)))
            .is_some_and(|(value, level)| value < cfg.stopped_fraction * level)
    }

    /// What `node`'s XID gauge says at this step: fresh when this step's
    /// `values` (by metric and node) hold its reading.
    fn xid_reading(&self, node: usize, values: &[f64], cfg: &WatchSettings) -> XidReading {
        let nodes = self.nodes.len();
        let fresh = self
            .metric_index
            .get(cfg.xid_metric.as_str())
            .is_some_and(|&m| values.get(m * nodes + node).is_some_and(|v| !v.is_nan()));
        self.xids.reading(node, fresh)
    }

    /// The `i`th learned metric's evidence `e` against `node` as it counts
    /// towards a drain: no more than its distance beyond where a group of
    /// its peers sits by design ([`peers::weigh_against_group`]), a group
    /// being an eighth of the job's nodes (a pipeline stage), at least one.
    /// `values` are this step's by metric and node; `reference` the
    /// others' level, centre and spread.
    fn drain_part(
        &self,
        node: usize,
        (i, e): (usize, f64),
        values: &[f64],
        reference: Option<(f64, f64, f64)>,
        cfg: &WatchSettings,
    ) -> f64 {
        let nodes = self.nodes.len();
        let (Some((m, metric, baseline)), Some(reference)) =
            (self.learned_metrics().nth(i), reference)
        else {
            return e;
        };
        if e <= 0.0 {
            return e;
        }
        let rule = (&metric.rule, baseline);
        let value = values[m * nodes + node];
        let group = nodes.div_ceil(DRAIN_GROUP_SHARE);
        e.min(peers::weigh_against_group(
            rule, node, value, reference, cfg, group,
        ))
        .min(peers::weigh_against_warmup(rule, value, reference.2, cfg))
    }

    /// What the evidence against `node` says, metric by metric: `evidence(i)`
    /// is its weighed distance on the `i`th learned metric, `drain_part(i,
    /// e)` how much of that distance `e` counts towards a drain.
    fn evidence_of_node(
        &self,
        node: usize,
        evidence: impl Fn(usize) -> f64,
        drain_part: impl Fn(usize, f64) -> f64,
    ) -> Evidence {
        let mut named: Vec<(usize, &str)> = Vec::new();
        let mut out = Evidence::default();
        for (i, (_, metric, baseline)) in self.learned_metrics().enumerate() {
            let e = evidence(i);
            if e <= 0.0 {
                continue;
            }
            out.combined += e * e;
            named.push((metric.rule.rank, &metric.name));
            out.primary |= metric.rule.weight >= 1.0;
            out.own_work |= metric.rule.own_work();
            if baseline.placed(node) {
                let d = drain_part(i, e);
                out.placed_score += d * d;
                if metric.rule.own_work() {
                    out.placed_own_work += d * d;
                }
            }
        }
        named.sort();
        out.metrics = named.into_iter().map(|(_, n)| n.to_string()).collect();
        out.placed_score = out.placed_score.sqrt();
        out.placed_own_work = out.placed_own_work.sqrt();
        out.combined = if out.primary {
            out.combined.sqrt()
        } else {
            0.0
        };
        out
    }

    /// Keeps this step's levels for [`Job::lags_the_job`].
    fn remember_levels(&mut self, cfg: &WatchSettings, levels: &[f64]) {
        let keep = (cfg.phase_lag_s / cfg.interval_s).max(0) as usize;
        if keep == 0 {
            return;
        }
        if self.recent_levels.len() >= keep {
            self.recent_levels.pop_front();
        }
        self.recent_levels.push_back(levels.to_vec());
    }

    /// Records each compared metric's level; a primary metric that falls
    /// with a fault and moved by more than `transition_change` since the
    /// last step is a shared phase edge, which lagging clocks cross late:
    /// the levels before it are kept and the job settles for a few steps.
    fn note_phase(&mut self, cfg: &WatchSettings, levels: &[f64]) {
        let mut changed = false;
        let mut before = Vec::with_capacity(levels.len());
        let learned = self.metrics.iter_mut().filter(|m| m.baseline.is_some());
        for (metric, &level) in learned.zip(levels) {
            let floor = metric.baseline.as_ref().map_or(0.0, |b| b.floor);
            let moved = peers::log_ratio(level, metric.last_level, floor).abs();
            let watched = metric.rule.weight >= 1.0 && metric.rule.direction == Direction::Falls;
            changed |= watched && moved > cfg.transition_change;
            before.push(metric.last_level);
            metric.last_level = level;
        }
        if changed {
            if self.settling == 0 {
                self.edge_levels = before;
            }
            self.settling = cfg.settle_steps + 1;
        }
    }

    /// The metrics with a learned baseline, in the order the step's
    /// per-metric buffers hold them, each with its index in `metrics`.
    fn learned_metrics(&self) -> impl Iterator<Item = (usize, &Metric, &MetricBaseline)> {
        self.metrics
            .iter()
            .enumerate()
            .filter_map(|(m, metric)| Some((m, metric, metric.baseline.as_ref()?)))
    }

    /// Whether `node` sits where the whole job was at some step of the last
    /// `phase_lag_s`, on every metric with evidence against it, while the
    /// job's level of a watched metric moved in that time: it is late into
    /// or out of a shared phase, so it is lagging the job, not failing.
    fn lags_the_job(&self, node: usize, cfg: &WatchSettings, step: &peers::Scratch) -> bool {
        let nodes = self.nodes.len();
        let learned = self.learned_metrics();
        let (mut moved, mut alarming) = (false, false);
        for (i, (m, metric, baseline)) in learned.enumerate() {
            let levels = self.recent_levels.iter().filter_map(|l| l.get(i).copied());
            let (lo, hi) = levels
                .filter(|l| !l.is_nan())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), l| {
                    (lo.min(l), hi.max(l))
                });
            let against = step
                .evidence
                .get(i * nodes + node)
                .is_some_and(|&e| e > 0.0);
            if lo > hi {
                if against {
                    return false;
                }
                continue;
            }
            let floor = baseline.floor;
            let watched = metric.rule.weight >= 1.0 && metric.rule.direction == Direction::Falls;
            moved |= watched && peers::log_ratio(hi, lo, floor) > cfg.transition_change;
            if !against {
                continue;
            }
            alarming = true;
            let v = self.values[m * nodes + node];
            let margin = cfg.evidence_z * step.spreads.get(i).copied().unwrap_or(0.0);
            let above_lowest =
                peers::log_ratio(v, lo, floor) - baseline.expected(node, lo) >= -margin;
            let below_highest =
                peers::log_ratio(v, hi, floor) - baseline.expected(node, hi) <= margin;
            let inside = match metric.rule.direction {
                Direction::Falls => above_lowest,
                Direction::Rises => below_highest,
                Direction::Either => above_lowest && below_highest,
            };
            if !inside {
                return false;
            }
        }
        moved && alarming
    }

    /// Whether `node` also stands out against the levels before the last
    /// phase edge (with this step's spreads).
    fn stands_out_from_edge(
        &self,
        node: usize,
        cfg: &WatchSettings,
        step: &peers::Scratch,
    ) -> bool {
        let nodes = self.nodes.len();
        let learned = self.learned_metrics();
        let mut combined = 0.0;
        for (i, (m, metric, baseline)) in learned.enumerate() {
            let (Some(&level), Some(&spread)) = (self.edge_levels.get(i), step.spreads.get(i))
            else {
                continue;
            };
            let residual = peers::log_ratio(self.values[m * nodes + node], level, baseline.floor)
                - baseline.expected(node, level);
            combined += metric
                .rule
                .evidence(residual / spread, cfg.evidence_z)
                .powi(2);
        }
        combined.sqrt() >= cfg.threshold
    }

    fn small_step(
        &mut self,
        end: i64,
        trigger: i64,
        cfg: &WatchSettings,
        scratch: &mut StepScratch,
        out: &mut Vec<Detection>,
    ) {
        let nodes = self.nodes.len();
        let mut worst: Vec<(f64, Vec<(usize, String)>)> = vec![(0.0, Vec::new()); nodes];
        let mut stopped = vec![false; nodes];
        let mut gpu_stopped = vec![false; nodes];
        let mut spinning = vec![false; nodes];
        for (m, metric) in self.metrics.iter().enumerate() {
            let Some(baseline) = &metric.baseline else {
                continue;
            };
            scratch.drops.clear();
            let values = &self.values[m * nodes..(m + 1) * nodes];

            small::drops(
                &metric.rule,
                baseline,
                values,
                (cfg.small_job_drop, cfg.shared_phase_fraction),
                &mut scratch.drops,
            );
            let stops = *metric.name == *cfg.stopped_metric && cfg.stopped_fraction > 0.0;
            let gpu_stops = *metric.name == *cfg.stopped_gpu_metric && cfg.stopped_fraction > 0.0;
            let spins = *metric.name == *cfg.spinning_metric && cfg.stopped_fraction > 0.0;
            for &(node, ratio) in &scratch.drops {
                let stopped_now = ratio * cfg.stopped_fraction >= 1.0;
                stopped[node] |= stops && stopped_now;
                gpu_stopped[node] |= gpu_stops && stopped_now;
                spinning[node] |= spins && stopped_now;
                worst[node].0 = worst[node].0.max(ratio);
                worst[node]
                    .1
                    .push((metric.rule.rank, metric.name.to_string()));
            }
        }
        for (node, (ratio, mut metrics)) in worst.into_iter().enumerate() {
            if metrics.is_empty() || self.called[node] {
                self.flagged_since[node] = None;
                continue;
            }
            let since = *self.flagged_since[node].get_or_insert(end);
            let xid = self.xid_reading(node, &self.values, cfg);
            let Some(wait) = stop_wait_s((stopped[node], gpu_stopped[node]), xid, cfg) else {
                continue;
            };
            // (y) With two or three machines the one that stands apart may
            // be waiting for a broken peer, unless its driver names its own
            // hardware: then it is called as soon as in a larger job.
            let named = driver_named((stopped[node], gpu_stopped[node], spinning[node]), xid);
            let due = if named {
                i64::from(DRIVER_NAMED_STEPS) * cfg.interval_s
            } else {
                cfg.small_job_sustain_s.max(wait)
            };
            if end - since >= due {
                metrics.sort();
                let names = metrics.into_iter().map(|(_, n)| n).collect();
                let hung_in_code = spinning[node] && xid == XidReading::NoHardware;
                let by_ratio =
                    !hung_in_code && cfg.small_job_drain_ratio.is_some_and(|bar| ratio >= bar);
                let tier = if named || by_ratio {
                    Tier::Drain
                } else {
                    Tier::Report
                };
                self.call(node, trigger, (names, ratio, tier), out);
            }
        }
    }

    fn call(
        &mut self,
        node: usize,
        trigger: i64,
        (metrics, score, tier): (Vec<String>, f64, Tier),
        out: &mut Vec<Detection>,
    ) {
        self.called[node] = true;
        self.drained |= tier == Tier::Drain;
        self.candidate = None;
        out.push(Detection {
            job: self.id.to_string(),
            node: self.nodes[node].to_string(),
            detected_at: trigger,
            metrics,
            score: (score * 100.0).round() / 100.0,
            tier,
        });
    }
}
