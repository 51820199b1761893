//! The GPU checks, through NVML (nvml-wrapper loads `libnvidia-ml.so.1` at run time).
//!
//! * [`presence`] (`gpu`): count, access, InfoROM, driver/VBIOS, persistence mode.
//! * [`ecc`] (`ecc`): ECC counters, retired pages, remapped rows.
//! * [`nvlink`] (`nvlink`): link state and error-counter growth.
//! * [`pcie`] (`gpu-pcie`): link generation/width and replay growth.
//! * [`clocks`] (`clocks`): throttle reasons and temperature.
//! * [`procs`] (`gpu-procs`): what a job left on its GPUs.
//! * [`fabric`]: each GPU's NVSwitch fabric registration, for the `fabric` check.
//! * [`recovery`]: the driver's recovery action per GPU, judged by `gpu`.
//! * [`c2c`]: a Grace superchip's CPU-GPU C2C links per GPU, judged by `gpu`.
//!
//! [`session`] loads NVML once per run and turns its answers into plain data;
//! [`scenario`] writes them in the fake NVML's format for snapshots. Every
//! check is skipped quietly on a node that expects no GPUs ([`count`]: the
//! configured number, or `auto`, the NVIDIA GPUs on the PCI bus).
//!
//! To replay a snapshot's GPU readings, point `[checks.gpu] library_path` at
//! the fake NVML built by `tests/` and set `LEMONADE_FAKE_NVML_SCENARIO` to
//! the snapshot's `.lemonade/nvml.json`.

use crate::check::Check;
use std::sync::Arc;

pub mod c2c;
pub mod clocks;
pub mod count;
pub mod ecc;
pub mod fabric;
pub mod field_values;
pub mod nvlink;
pub mod pcie;
pub mod presence;
pub mod procs;
pub mod recovery;
pub mod scenario;
pub mod session;

pub use procs::job_gpus_from_env;

/// The GPU checks, in the order runs report them.
pub fn checks() -> Vec<Arc<dyn Check>> {
    vec![
        Arc::new(presence::Gpu),
        Arc::new(ecc::Ecc),
        Arc::new(nvlink::Nvlink),
        Arc::new(pcie::GpuPcie),
        Arc::new(clocks::Clocks),
        Arc::new(procs::GpuProcs),
    ]
}
