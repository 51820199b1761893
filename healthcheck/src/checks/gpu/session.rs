//! The NVML session the GPU checks share, and the plain-data view of NVML's
//! answers that their `evaluate` functions work on.
//!
//! NVML is loaded once per run (the first GPU check to ask loads it, the others
//! wait on [`Shared::nvml`](crate::check::Shared)). Errors are turned into
//! [`Failure`] right at the call, so nothing past gathering knows about NVML.

use crate::check::{CheckContext, CheckOutput};
use crate::finding::Finding;
use crate::nvml_handle::{self, InitFailure};
use lemonade_config::{Action, Severity};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::sync::Arc;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const GPU_LOST: &str = "GPU_LOST";
pub const GPU_RESET_REQUIRED: &str = "GPU_RESET_REQUIRED";

/// Code of the finding when NVML cannot be loaded or initialised.
pub const NVML_UNAVAILABLE: &str = "NVML_UNAVAILABLE";
/// Code of a dependent check's finding for a GPU that the `gpu` check reports lost.
pub const GPU_INACCESSIBLE: &str = "GPU_INACCESSIBLE";
/// Code of an NVML error nobody expects: the checker's problem, not the node's.
pub const NVML_ERROR: &str = "NVML_ERROR";

/// Why one NVML call did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// `GPU_IS_LOST`: the GPU fell off the bus.
    Lost,
    /// `RESET_REQUIRED`: the GPU needs a reset before it can be used.
    ResetRequired,
    /// The GPU or driver does not have this feature; not a fault.
    NotSupported,
    /// `CORRUPTED_INFOROM`.
    CorruptedInfoRom,
    /// Anything else, as NVML words it.
    Other(String),
}

impl From<NvmlError> for Failure {
    fn from(e: NvmlError) -> Self {
        match e {
            NvmlError::GpuLost => Failure::Lost,
            NvmlError::ResetRequired => Failure::ResetRequired,
            // Old drivers lack newer entry points: the feature is not there.
            NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) => Failure::NotSupported,
            NvmlError::CorruptedInfoROM => Failure::CorruptedInfoRom,
            other => Failure::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Lost => f.write_str("GPU is lost (fell off the bus)"),
            Failure::ResetRequired => f.write_str("GPU requires a reset"),
            Failure::NotSupported => f.write_str("not supported"),
            Failure::CorruptedInfoRom => f.write_str("InfoROM is corrupted"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

/// A reading that may be missing because the GPU does not support it.
pub fn optional<T>(r: Result<T, NvmlError>) -> Result<Option<T>, Failure> {
    match r.map_err(Failure::from) {
        Ok(v) => Ok(Some(v)),
        Err(Failure::NotSupported) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Who a GPU is: its NVML index, and its PCI bus id and UUID when NVML gave them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuId {
    pub index: u32,
    pub uuid: Option<String>,
    /// Normalised as the kernel writes it: `0000:18:00.0`.
    pub bus_id: Option<String>,
}

impl GpuId {
    /// The finding entity: `gpu3`.
    pub fn entity(&self) -> String {
        format!("gpu{}", self.index)
    }

    /// A finding about this GPU, tagged with its bus id and UUID.
    pub fn finding(&self, check: &str, code: &str, severity: Severity) -> Finding {
        let mut f = Finding::new(check, self.entity(), code, severity);
        f.pci_bus_id = self.bus_id.clone();
        f.uuid = self.uuid.clone();
        f
    }

    /// The healthy finding for this GPU.
    pub fn ok(&self, check: &str) -> Finding {
        self.finding(check, crate::finding::OK, Severity::Ok)
    }

    /// The key a GPU's counters are kept under between runs: the UUID, which
    /// survives index changes when a GPU disappears.
    pub fn state_key(&self) -> String {
        self.uuid.clone().unwrap_or_else(|| self.entity())
    }
}

/// One GPU's readings for one check, or why the GPU did not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuData<T> {
    pub id: GpuId,
    pub reading: Result<T, Failure>,
}

/// `00000000:18:00.0` (NVML) → `0000:18:00.0` (kernel, sysfs), lower case.
pub fn normalize_bus_id(bus_id: &str) -> String {
    let lower = bus_id.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => lower,
    }
}

/// False on nodes without GPUs (an explicit 0, or `auto` and none on the
/// PCI bus), where every GPU check is skipped quietly.
pub fn expects_gpus(ctx: &CheckContext) -> bool {
    super::count::expected(&ctx.config, &ctx.root) != Some(0)
}

/// The run's NVML session, initialised on first use.
pub fn nvml(ctx: &CheckContext) -> Result<Arc<Nvml>, InitFailure> {
    ctx.shared
        .nvml
        .get_or_init(|| nvml_handle::load(&ctx.config.checks.gpu.library_path))
        .clone()
}

/// A check other than `gpu` cannot reach NVML: `unknown`, because the `gpu`
/// check owns the verdict on a missing driver.
pub fn init_unknown(check: &str, failure: &InitFailure) -> Finding {
    Finding::unknown(check, "node", NVML_UNAVAILABLE, failure.message.clone())
}

/// The finding of a dependent check for a GPU that did not answer.
pub fn failure_unknown(check: &str, id: &GpuId, failure: &Failure) -> Finding {
    let code = match failure {
        Failure::Lost | Failure::ResetRequired => GPU_INACCESSIBLE,
        _ => NVML_ERROR,
    };
    id.finding(check, code, Severity::Unknown)
        .message(format!("{}: {failure}", id.entity()))
}

/// Every GPU NVML lists, with its identity and what `read` makes of it.
/// `Err` when NVML cannot even count the GPUs.
pub fn per_gpu<T>(
    nvml: &Nvml,
    mut read: impl FnMut(&Device<'_>) -> Result<T, Failure>,
) -> Result<Vec<GpuData<T>>, Failure> {
    let count = nvml.device_count().map_err(Failure::from)?;
    Ok((0..count)
        .map(|index| {
            let mut id = GpuId {
                index,
                ..GpuId::default()
            };
            let reading = open(nvml, &mut id).and_then(|device| read(&device));
            GpuData { id, reading }
        })
        .collect())
}

fn open<'n>(nvml: &'n Nvml, id: &mut GpuId) -> Result<Device<'n>, Failure> {
    let device = nvml.device_by_index(id.index).map_err(Failure::from)?;
    id.bus_id = Some(normalize_bus_id(
        &device.pci_info().map_err(Failure::from)?.bus_id,
    ));
    id.uuid = Some(device.uuid().map_err(Failure::from)?);
    Ok(device)
}

/// The findings for GPUs that did not answer, and the readings of those that did.
pub fn split<'a, T>(
    check: &str,
    gpus: &'a [GpuData<T>],
    findings: &mut Vec<Finding>,
) -> Vec<(&'a GpuId, &'a T)> {
    let mut ok = Vec::new();
    for gpu in gpus {
        match &gpu.reading {
            Ok(r) => ok.push((&gpu.id, r)),
            Err(f) => findings.push(failure_unknown(check, &gpu.id, f)),
        }
    }
    ok
}

/// The common start of a GPU check's `run`: `None` when the node has no GPUs
/// (skip quietly), the session, or the finding saying why there is none.
fn start(check: &str, ctx: &CheckContext) -> Option<Result<Arc<Nvml>, Finding>> {
    if !expects_gpus(ctx) {
        return None;
    }
    Some(nvml(ctx).map_err(|e| init_unknown(check, &e)))
}

/// The whole `run` of a GPU check but its evaluation: nothing on a node without
/// GPUs, the reason when there is no NVML, `NVML_ERROR` when the GPUs cannot
/// be listed, and otherwise `evaluate` on what `gather` read.
pub fn run<T>(
    check: &str,
    ctx: &CheckContext,
    gather: impl FnOnce(&Nvml) -> Result<T, Failure>,
    evaluate: impl FnOnce(T) -> CheckOutput,
) -> CheckOutput {
    match start(check, ctx) {
        None => CheckOutput::default(),
        Some(Err(finding)) => CheckOutput::findings(vec![finding]),
        Some(Ok(nvml)) => match gather(&nvml) {
            Ok(data) => evaluate(data),
            Err(e) => CheckOutput::findings(vec![node_unknown(check, &e)]),
        },
    }
}

/// `NVML_ERROR` about the node (counting GPUs failed).
pub fn node_unknown(check: &str, failure: &Failure) -> Finding {
    Finding::unknown(
        check,
        "node",
        NVML_ERROR,
        format!("cannot list GPUs: {failure}"),
    )
}

/// Findings for a GPU that is lost or needs a reset: the `gpu` check's verdict.
pub fn access_finding(check: &str, id: &GpuId, failure: &Failure) -> Finding {
    match failure {
        Failure::Lost => id
            .finding(check, GPU_LOST, Severity::Down)
            .expected("GPU answers NVML")
            .actual("GPU_IS_LOST")
            .action(Action::Reboot)
            .message(format!("{} has fallen off the bus", id.entity())),
        Failure::ResetRequired => id
            .finding(check, GPU_RESET_REQUIRED, Severity::Down)
            .expected("GPU answers NVML")
            .actual("RESET_REQUIRED")
            .action(Action::ResetGpu)
            .message(format!("{} needs a GPU reset", id.entity())),
        other => failure_unknown(check, id, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_are_normalised_to_the_kernel_form() {
        assert_eq!(normalize_bus_id("00000000:18:00.0"), "0000:18:00.0");
        assert_eq!(normalize_bus_id("00000000:9A:00.0"), "0000:9a:00.0");
        assert_eq!(normalize_bus_id("0000:c6:00.0"), "0000:c6:00.0");
    }

    #[test]
    fn lost_and_reset_are_the_gpu_checks_down_others_are_unknown() {
        let id = GpuId {
            index: 3,
            ..Default::default()
        };
        assert_eq!(
            access_finding("gpu", &id, &Failure::Lost).severity,
            Severity::Down
        );
        assert_eq!(
            access_finding("gpu", &id, &Failure::ResetRequired).action,
            Action::ResetGpu
        );
        let f = failure_unknown("ecc", &id, &Failure::Lost);
        assert_eq!(
            (f.severity, f.code.as_str()),
            (Severity::Unknown, GPU_INACCESSIBLE)
        );
    }
}
