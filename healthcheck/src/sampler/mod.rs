//! The node sampler (`healthcheck sample`, issue 33): every 10 s while a
//! job runs here, the detector's vocabulary for this node, sent to the head
//! node in small chunks through the spool export (`samples` records) for
//! `lemon watch`.
//!
//! * [`raw`]: one round's readings: gauges, counters, CPU jiffies.
//! * [`procfs`], [`infiniband`], [`gpu`]: the sources, through
//!   [`NodeRoot`] (so fixtures work) and the NVML handle of the checks.
//! * [`rates`]: counters to per-second rates, resets handled.
//! * [`service`]: the long-running loop: running jobs from the node
//!   database, chunks to the export, pruning after a job ends.

pub mod gpu;
pub mod infiniband;
pub mod procfs;
pub mod rates;
pub mod raw;
pub mod service;

use crate::root::NodeRoot;
use nvml_wrapper::Nvml;
use std::sync::Arc;

/// Reads the node and turns counters into rates, round after round.
pub struct Sampler {
    root: NodeRoot,
    /// `None` on a node without a driver: no GPU metrics, the rest as usual.
    nvml: Option<Arc<Nvml>>,
    rates: rates::Rates,
}

impl Sampler {
    pub fn new(root: NodeRoot, nvml: Option<Arc<Nvml>>) -> Sampler {
        Sampler {
            root,
            nvml,
            rates: rates::Rates::default(),
        }
    }

    /// Reads every source once: gauges always, rates from the second round
    /// on. `at` is seconds on a monotonic clock.
    pub fn round(&mut self, at: f64) -> Vec<(&'static str, f64)> {
        let mut raw = raw::Raw::default();
        procfs::cpu(&self.root, &mut raw);
        procfs::memory(&self.root, &mut raw);
        procfs::disks(&self.root, &mut raw);
        infiniband::ports(&self.root, &mut raw);
        if let Some(nvml) = &self.nvml {
            gpu::gpus(nvml, &mut raw);
        }
        self.rates.metrics(at, raw)
    }

    /// Forgets the previous round (no job ran for a while): the next round
    /// starts the rates afresh instead of averaging over the idle gap.
    pub fn forget(&mut self) {
        self.rates = rates::Rates::default();
    }
}
