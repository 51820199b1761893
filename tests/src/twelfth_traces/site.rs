//! The site: GB200 NVL72 racks, B200 HGX nodes, older H100 nodes, their
//! leaves and racks, and the site-wide events that touch every job on them.

use super::rng::Rng;

/// The hardware generation of a node; sets GPU count, power and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hw {
    /// A GB200 NVL72 compute tray: 4 GPUs, 18 trays per NVLink domain.
    Gb200,
    /// A B200 HGX node: 8 GPUs, 8x400G InfiniBand.
    B200,
    /// An older H100 HGX node: 8 GPUs, 8x400G InfiniBand.
    H100,
}

impl Hw {
    pub fn gpus(self) -> u32 {
        match self {
            Hw::Gb200 => 4,
            _ => 8,
        }
    }
    /// (idle W, board limit W) per GPU.
    pub fn power(self) -> (f64, f64) {
        match self {
            Hw::Gb200 => (160.0, 1200.0),
            Hw::B200 => (140.0, 1000.0),
            Hw::H100 => (75.0, 700.0),
        }
    }
    /// GPU memory per GPU in MiB.
    pub fn mem_mib(self) -> f64 {
        match self {
            Hw::Gb200 => 189_471.0,
            Hw::B200 => 183_359.0,
            Hw::H100 => 81_559.0,
        }
    }
    /// Busy SM clock in MHz.
    pub fn clock(self) -> f64 {
        match self {
            Hw::H100 => 1980.0,
            _ => 1965.0,
        }
    }
    /// Nominal per-node InfiniBand/RoCE bytes/s (all NICs).
    pub fn ib(self) -> f64 {
        match self {
            Hw::Gb200 => 4.0 * 50e9,
            _ => 8.0 * 50e9,
        }
    }
    /// Nominal NVLink bytes/s per node.
    pub fn nvl(self) -> f64 {
        match self {
            Hw::Gb200 => 4.0 * 900e9,
            Hw::B200 => 8.0 * 900e9,
            Hw::H100 => 8.0 * 450e9,
        }
    }
}

/// One host: its name, rack (NVLink domain for GB200) and leaf.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub rack: usize,
    pub leaf: usize,
}

/// A site-wide event, in absolute time; it touches the hosts it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    /// Demand response: every node in a few racks capped 10-25%.
    PowerCap,
    /// One NVL72 rack's cooling: all its trays throttle together.
    Cooling,
    /// Neighbours' traffic on a leaf: PFC pauses, CNPs, a few % slower.
    Congestion,
    /// A flapping spine link: short job-wide network dips.
    SpineFlap,
    /// An NVLink error (XID 74) on a tray of another job in this NVL72
    /// rack: the whole NVLink domain's traffic suffers until it is reset.
    NvlDomain,
}

#[derive(Debug, Clone)]
pub struct SiteEvent {
    pub kind: SiteKind,
    /// Racks (PowerCap, Cooling) or leaves (Congestion, SpineFlap).
    pub scope: Vec<usize>,
    pub t0: i64,
    pub t1: i64,
    pub x: f64,
    /// The job whose fault caused it (its own nodes feel the fault itself).
    pub owner: Option<String>,
}

impl SiteEvent {
    pub fn touches(&self, h: &Host) -> bool {
        match self.kind {
            SiteKind::PowerCap | SiteKind::Cooling | SiteKind::NvlDomain => {
                self.scope.contains(&h.rack)
            }
            SiteKind::Congestion | SiteKind::SpineFlap => self.scope.contains(&h.leaf),
        }
    }
}

/// The site's hosts (racks of GB200 trays, then B200, then H100).
pub struct Site {
    pub hosts: Vec<Host>,
    pub events: Vec<SiteEvent>,
    /// Next free host per hardware, so concurrent jobs never share nodes.
    next: [usize; 3],
    ranges: [(usize, usize); 3],
}

const GB_RACKS: usize = 40;
const B200_NODES: usize = 640;
const H100_NODES: usize = 480;

impl Site {
    pub fn new(rng: &mut Rng) -> Self {
        let mut hosts = Vec::new();
        for r in 0..GB_RACKS {
            for t in 1..=18 {
                // Rack numbers start mid-hall, like a real floor plan.
                let name = format!("gb200-r{:02}-t{:02}", r + 3, t);
                hosts.push(Host {
                    name,
                    rack: r,
                    leaf: r / 2,
                });
            }
        }
        let b0 = hosts.len();
        for i in 0..B200_NODES {
            let name = format!("b200-{:04}", 101 + i);
            hosts.push(Host {
                name,
                rack: GB_RACKS + i / 4,
                leaf: 20 + i / 32,
            });
        }
        let h0 = hosts.len();
        for i in 0..H100_NODES {
            let name = format!("h100-a{}-{:03}", 1 + i / 120, 1 + i % 120);
            let rack = GB_RACKS + B200_NODES / 4 + i / 4;
            hosts.push(Host {
                name,
                rack,
                leaf: 40 + i / 32,
            });
        }
        let ranges = [(0, b0), (b0, h0), (h0, hosts.len())];
        // Start at a random offset so seeds use different names.
        let next = [
            rng.int(0, 17 * 18) as usize,
            b0 + rng.int(0, 300) as usize,
            h0 + rng.int(0, 200) as usize,
        ];
        Site {
            hosts,
            events: Vec::new(),
            next,
            ranges,
        }
    }

    /// Allocates `n` consecutive hosts of one hardware (Slurm's topology
    /// plugin packs a job into few racks and leaves).
    pub fn alloc(&mut self, hw: Hw, n: usize) -> Vec<usize> {
        let k = match hw {
            Hw::Gb200 => 0,
            Hw::B200 => 1,
            Hw::H100 => 2,
        };
        let (lo, hi) = self.ranges[k];
        (0..n)
            .map(|_| {
                if self.next[k] >= hi {
                    self.next[k] = lo;
                }
                self.next[k] += 1;
                self.next[k] - 1
            })
            .collect()
    }

    /// Draws the site-wide events over the generation window; they fall
    /// where jobs run (`used`: hosts in use), as a real event would matter.
    pub fn draw_events(&mut self, rng: &mut Rng, t0: i64, span: i64, used: &[usize]) {
        let pick = |rng: &mut Rng| self.hosts[*rng.pick(used)].clone();
        let mut events = Vec::new();
        for _ in 0..rng.int(1, 2) {
            // Demand response caps a few racks of one row (8 racks a row).
            let first = pick(rng).rack / 8 * 8 + rng.int(0, 4) as usize;
            let scope = (first..first + rng.int(2, 4) as usize).collect();
            let s = t0 + rng.int(600, span);
            let t1 = s + rng.int(600, 1800);
            events.push(SiteEvent {
                kind: SiteKind::PowerCap,
                scope,
                t0: s,
                t1,
                x: rng.range(0.10, 0.25),
                owner: None,
            });
        }
        let gb: Vec<usize> = used
            .iter()
            .copied()
            .filter(|&h| self.hosts[h].rack < GB_RACKS)
            .collect();
        if !gb.is_empty() {
            let s = t0 + rng.int(300, span);
            let rack = self.hosts[*rng.pick(&gb)].rack;
            let t1 = s + rng.int(600, 1500);
            events.push(SiteEvent {
                kind: SiteKind::Cooling,
                scope: vec![rack],
                t0: s,
                t1,
                x: rng.range(0.12, 0.30),
                owner: None,
            });
        }
        for _ in 0..rng.int(1, 3) {
            let s = t0 + rng.int(0, span);
            let leaf = pick(rng).leaf;
            let t1 = s + rng.int(600, 2400);
            events.push(SiteEvent {
                kind: SiteKind::Congestion,
                scope: vec![leaf],
                t0: s,
                t1,
                x: rng.range(0.02, 0.07),
                owner: None,
            });
        }
        self.events.extend(events);
        // A spine link carries the cross-leaf traffic of a quarter of the leaves.
        let s = t0 + rng.int(0, span);
        let scope = (0..55).filter(|_| rng.chance(0.25)).collect();
        self.events.push(SiteEvent {
            kind: SiteKind::SpineFlap,
            scope,
            t0: s,
            t1: s + rng.int(300, 1200),
            x: rng.range(0.1, 0.4),
            owner: None,
        });
    }
}
