//! The GPUs' gauges from NVML, through the run's NVML handle
//! ([`crate::nvml_handle`]), as raw readings per node:
//! `gpu_util` (mean %), `gpu_util_min` (lowest GPU's %), `gpu_power` (sum of
//! watts: a GPU gone from the bus lowers it), `gpu_sm_clock` (mean MHz),
//! `gpu_mem_util` (mean %), `pcie_tx`/`pcie_rx` (sum of bytes per second),
//! and the volatile ECC counts `gpu_ecc_unc`/`gpu_ecc_cor` (sums since the
//! driver loaded, as gauges); and per GPU the NVLink data sent, a counter
//! (`nvlink_tx`, bytes per second once a rate). A value NVML does not give
//! on a GPU is left out of that metric; a metric no GPU gives is not recorded.

use super::raw::{Counter, Raw};
use crate::checks::gpu::field_values::{self, FieldValue};
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, PcieUtilCounter};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;

/// Reads every GPU NVML counts.
pub fn gpus(nvml: &Nvml, raw: &mut Raw) {
    let count = nvml.device_count().unwrap_or(0);
    let mut per_gpu = PerGpu::default();
    for index in 0..count {
        let Ok(d) = nvml.device_by_index(index) else {
            continue;
        };
        if let Ok(u) = d.utilization_rates() {
            per_gpu.util.push(f64::from(u.gpu));
            per_gpu.mem_util.push(f64::from(u.memory));
        }
        push(
            &mut per_gpu.power,
            d.power_usage().map(|mw| f64::from(mw) / 1000.0),
        );
        push(&mut per_gpu.clock, d.clock_info(Clock::SM).map(f64::from));
        let kb = |c| d.pcie_throughput(c).map(|k| f64::from(k) * 1024.0);
        push(&mut per_gpu.pcie_tx, kb(PcieUtilCounter::Send));
        push(&mut per_gpu.pcie_rx, kb(PcieUtilCounter::Receive));
        let ecc = |e| {
            d.total_ecc_errors(e, EccCounter::Volatile)
                .map(|n| n as f64)
        };
        push(&mut per_gpu.ecc_unc, ecc(MemoryError::Uncorrected));
        push(&mut per_gpu.ecc_cor, ecc(MemoryError::Corrected));
        if let Some(kib) = nvlink_tx_kib(nvml, &d) {
            raw.counter(Counter {
                metric: "nvlink_tx",
                source: format!("gpu{index}"),
                value: kib,
                scale: 1024.0,
            });
        }
    }
    per_gpu.into_gauges(raw);
}

/// The KiB of data the GPU sent over all its NVLinks since the driver
/// loaded: `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` with the scope of every
/// link (the per-link utilisation counters are deprecated). `None` where
/// the driver lacks the field (no NVLink, an old driver) or the symbol.
fn nvlink_tx_kib(nvml: &Nvml, device: &Device) -> Option<u64> {
    let field = (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, u32::MAX);
    match field_values::read(nvml, device, &[field]).ok()?.ok()?[..] {
        [FieldValue::Read(kib)] => Some(kib),
        _ => None,
    }
}

fn push<E>(into: &mut Vec<f64>, value: Result<f64, E>) {
    if let Ok(v) = value {
        into.push(v);
    }
}

#[derive(Default)]
struct PerGpu {
    util: Vec<f64>,
    mem_util: Vec<f64>,
    power: Vec<f64>,
    clock: Vec<f64>,
    pcie_tx: Vec<f64>,
    pcie_rx: Vec<f64>,
    ecc_unc: Vec<f64>,
    ecc_cor: Vec<f64>,
}

impl PerGpu {
    fn into_gauges(self, raw: &mut Raw) {
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let sum = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>());
        let min = |v: &[f64]| v.iter().copied().reduce(f64::min);
        let all = [
            ("gpu_util", mean(&self.util)),
            ("gpu_util_min", min(&self.util)),
            ("gpu_power", sum(&self.power)),
            ("gpu_sm_clock", mean(&self.clock)),
            ("gpu_mem_util", mean(&self.mem_util)),
            ("pcie_tx", sum(&self.pcie_tx)),
            ("pcie_rx", sum(&self.pcie_rx)),
            ("gpu_ecc_unc", sum(&self.ecc_unc)),
            ("gpu_ecc_cor", sum(&self.ecc_cor)),
        ];
        for (metric, value) in all {
            if let Some(v) = value {
                raw.gauge(metric, v);
            }
        }
    }
}
