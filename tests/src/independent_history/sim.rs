//! The cluster's month: users submit, nodes run one job at a time, faults
//! hit the job on the node (or the node idle), checks catch some of them.

use super::logs::{Cause, Ending, Launcher, CAUSES};
use super::rng::Rng;
use super::{IndependentHistorySpec, PlantedFailure};

/// A planted hardware fault: the node fails the job it runs at `at`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub at: i64,
    pub cause: Cause,
    /// A check sees it and takes the node out for `repair` seconds.
    pub caught: bool,
    pub repair: i64,
}

#[derive(Default)]
pub struct Node {
    pub free_at: i64,
    /// Out of service: [start, end).
    pub blocks: Vec<(i64, i64)>,
    /// Uncaught faults not yet met by a job, earliest first.
    pub pending: Vec<Fault>,
    pub caught: Vec<Fault>,
}

pub struct User {
    pub name: String,
    pub fail: f64,
    pub pinned: Option<usize>,
}

/// One run as sacct lists it.
pub struct Run {
    pub job_id_raw: i64,
    pub job_id: String,
    pub nodes: Vec<usize>,
    pub state: String,
    pub exit: &'static str,
    pub submit: i64,
    pub start: i64,
    pub end: i64,
    pub user: usize,
    pub launcher: Launcher,
    pub ending: Ending,
    /// The run whose log the job's file holds (a requeued run's is overwritten).
    pub keeps_log: bool,
}

/// What a job asks for.
#[derive(Clone)]
pub struct Request {
    pub job_id_raw: i64,
    pub job_id: String,
    pub user: usize,
    pub size: usize,
    pub duration: i64,
    pub pinned: Option<usize>,
    /// Forced user failure after this many seconds (a burst's crashing task).
    pub crash_after: Option<i64>,
}

pub struct Sim {
    pub rng: Rng,
    pub t0: i64,
    pub end: i64,
    pub nodes: Vec<Node>,
    pub users: Vec<User>,
    pub runs: Vec<Run>,
    pub events: Vec<String>,
    pub failures: Vec<PlantedFailure>,
    pub bad_hour: (i64, i64),
    pub next_id: i64,
}

pub fn node_name(i: usize) -> String {
    format!("gpu{:04}", i + 1)
}

impl Sim {
    pub fn new(spec: &IndependentHistorySpec, t0: i64) -> Sim {
        let mut rng = Rng::new(spec.seed);
        let end = t0 + i64::from(spec.days) * 86_400;
        let bad_start = rng.range(t0 + 3 * 86_400, end - 2 * 86_400) / 3600 * 3600;
        Sim {
            rng,
            t0,
            end,
            nodes: (0..spec.nodes).map(|_| Node::default()).collect(),
            users: Vec::new(),
            runs: Vec::new(),
            events: Vec::new(),
            failures: Vec::new(),
            bad_hour: (bad_start, bad_start + 3600),
            next_id: 4_100_000 + (spec.seed % 1000) as i64 * 10_000,
        }
    }

    pub fn cause(&mut self) -> Cause {
        let w: Vec<f64> = CAUSES.iter().map(|c| c.1).collect();
        CAUSES[self.rng.weighted(&w)].0
    }

    /// Plants a fault; a caught one takes the node out whether or not a job
    /// runs there.
    pub fn plant(&mut self, node: usize, fault: Fault) {
        if fault.caught {
            let (reason, state) = hc_reason(fault.cause, &mut self.rng);
            let (a, b) = (fault.at, fault.at + fault.repair);
            self.events
                .push(format!("{}|{a}|{b}|{state}|{reason}|root", node_name(node)));
            self.nodes[node].blocks.push((a, b));
            self.nodes[node].caught.push(fault);
        } else {
            let pending = &mut self.nodes[node].pending;
            pending.push(fault);
            pending.sort_by_key(|f| f.at);
        }
    }

    /// An administrator's maintenance: drains the node; jobs on it finish.
    pub fn maintenance(&mut self, node: usize, at: i64, hours: i64) {
        let b = at + hours * 3600;
        let why = self
            .rng
            .pick(&[
                "firmware update CHG-2291",
                "reseat cables, ticket 8812",
                "kernel upgrade",
            ])
            .to_string();
        self.events
            .push(format!("{}|{at}|{b}|DRAIN|{why}|admin", node_name(node)));
        self.nodes[node].blocks.push((at, b));
    }

    fn usable_at(&self, node: usize) -> i64 {
        let n = &self.nodes[node];
        let mut t = n.free_at;
        // Blocks may chain; a few passes settle it.
        for _ in 0..4 {
            for &(a, b) in &n.blocks {
                if a <= t && t < b {
                    t = b;
                }
            }
        }
        t
    }

    /// Picks nodes for a job submitted at `submit`: free ones at random, else
    /// the ones that free up first. Returns the start and the nodes, sorted.
    pub fn place(&mut self, size: usize, submit: i64, pinned: Option<usize>) -> (i64, Vec<usize>) {
        if let Some(n) = pinned {
            return (self.usable_at(n).max(submit), vec![n]);
        }
        let mut when: Vec<(i64, usize)> = (0..self.nodes.len())
            .map(|i| (self.usable_at(i).max(submit), i))
            .collect();
        let free = when.iter().filter(|w| w.0 == submit).count();
        if free >= size {
            when.retain(|w| w.0 == submit);
            for i in 0..size {
                let j = i + self.rng.below(when.len() - i);
                when.swap(i, j);
            }
        } else {
            when.select_nth_unstable(size - 1);
        }
        let mut chosen: Vec<usize> = when[..size].iter().map(|w| w.1).collect();
        let start = when[..size].iter().map(|w| w.0).max().unwrap_or(submit);
        chosen.sort_unstable();
        (start, chosen)
    }

    pub fn new_id(&mut self) -> i64 {
        self.next_id += 1 + self.rng.range(0, 3);
        self.next_id
    }
}

/// A check's reason for a cause, and the state it sets.
fn hc_reason(cause: Cause, rng: &mut Rng) -> (String, &'static str) {
    let gpu = rng.below(8);
    let hca = rng.below(4);
    match cause {
        Cause::Gpu => (
            format!(
                "hc: {} gpu{gpu}",
                rng.pick(&["ECC_VOLATILE_UNCORRECTED", "XID_48", "ROW_REMAP_FAILURE"])
            ),
            "DOWN",
        ),
        Cause::Eud => (format!("hc: NVLINK_DOWN gpu{gpu}"), "DOWN"),
        Cause::Pcie => (
            format!(
                "hc: {} gpu{gpu}",
                rng.pick(&["XID_79", "PCIE_WIDTH_DEGRADED"])
            ),
            "DOWN",
        ),
        Cause::Nic | Cause::Optics => (format!("hc: IB_PORT_DOWN mlx5_{hca}:1"), "DOWN"),
        Cause::Dimm => ("hc: MEMORY_UE mc0".to_string(), "DRAIN"),
        Cause::Cpu => ("hc: CPU_COUNT_MISMATCH cpus".to_string(), "DRAIN"),
        Cause::Bios => ("hc: FIRMWARE_MISMATCH bios".to_string(), "DRAIN"),
        Cause::Psu => ("hc: PSU_FAULT psu1".to_string(), "DOWN"),
    }
}

/// A user's own failure: its state, exit code and log.
pub fn user_failure(rng: &mut Rng) -> (&'static str, &'static str, Ending) {
    let kind = rng.below(6) as u8;
    match rng.weighted(&[70.0, 12.0, 10.0, 8.0]) {
        0 => ("FAILED", "1:0", Ending::UserBug(kind)),
        1 => ("OUT_OF_MEMORY", "0:125", Ending::CgroupOom),
        // A CUDA OOM or a missing file is the user's whatever the signal.
        2 => ("FAILED", "1:0", Ending::UserBug(1)),
        _ => ("FAILED", "2:0", Ending::UserBug(0)),
    }
}
