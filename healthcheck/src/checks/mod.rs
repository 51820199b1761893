//! The checks, one module each. [`all`] is the registry.

use crate::check::Check;
use std::sync::Arc;

pub mod block;
mod counters;
pub mod cpus;
pub mod dstate;
pub mod fabric;
pub mod firmware;
pub mod gpu;
pub mod ib;
pub mod imex;
pub mod memory;
pub mod modules;
pub mod mounts;
pub mod pcie;
pub mod pstore;
pub mod services;
pub mod versions;
pub mod xid;

/// Every check, in the order runs report them.
pub fn all() -> Vec<Arc<dyn Check>> {
    let mut checks: Vec<Arc<dyn Check>> = vec![
        Arc::new(xid::Xid),
        Arc::new(pcie::Pcie),
        Arc::new(ib::Ib),
        Arc::new(mounts::Mounts),
        Arc::new(memory::Memory),
        Arc::new(cpus::Cpus),
        Arc::new(block::Block),
        Arc::new(services::Services),
        Arc::new(firmware::Firmware),
        Arc::new(modules::Modules),
        Arc::new(pstore::Pstore),
        Arc::new(dstate::Dstate),
    ];
    checks.extend(gpu::checks());
    checks.push(Arc::new(fabric::Fabric));
    checks.push(Arc::new(imex::Imex));
    checks.push(Arc::new(versions::Versions));
    checks
}
