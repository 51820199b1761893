//! `ecc`: uncorrected and corrected ECC errors, retired pages, remapped rows.

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView, ALL_PROFILES,
};
use crate::finding::Finding;
use lemonade_config::{Action, Config, EccSettings, Severity};
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, MemoryLocation, RetirementCause,
};
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};

const NAME: &str = "ecc";

/// The `ecc` check.
pub struct Ecc;

/// One GPU's memory-error readings; `None` where the GPU does not support it
/// (H100 has no page retirement, older GPUs have no row remapping).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EccReadings {
    pub volatile_uncorrected_dram: Option<u64>,
    pub volatile_uncorrected_sram: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
    pub volatile_corrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub retired_single_bit: Option<u64>,
    pub retired_double_bit: Option<u64>,
    pub retired_pending: Option<bool>,
    pub remapped: Option<RemappedRows>,
}

/// `nvmlDeviceGetRemappedRows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemappedRows {
    pub corrected: u32,
    pub uncorrected: u32,
    pub pending: bool,
    pub failure: bool,
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml) -> Result<Vec<GpuData<EccReadings>>, Failure> {
    session::per_gpu(nvml, |d| {
        use session::optional as opt;
        let unc = MemoryError::Uncorrected;
        let cor = MemoryError::Corrected;
        Ok(EccReadings {
            volatile_uncorrected_dram: opt(d.memory_error_counter(
                unc,
                EccCounter::Volatile,
                MemoryLocation::Device,
            ))?,
            volatile_uncorrected_sram: opt(d.memory_error_counter(
                unc,
                EccCounter::Volatile,
                MemoryLocation::SRAM,
            ))?,
            aggregate_uncorrected: opt(d.total_ecc_errors(unc, EccCounter::Aggregate))?,
            volatile_corrected: opt(d.total_ecc_errors(cor, EccCounter::Volatile))?,
            aggregate_corrected: opt(d.total_ecc_errors(cor, EccCounter::Aggregate))?,
            retired_single_bit: opt(d.retired_pages(RetirementCause::MultipleSingleBitEccErrors))?
                .map(|p| p.len() as u64),
            retired_double_bit: opt(d.retired_pages(RetirementCause::DoubleBitEccError))?
                .map(|p| p.len() as u64),
            retired_pending: opt(d.are_pages_pending_retired())?,
            remapped: opt(remapped_rows(nvml, d))?,
        })
    })
}

/// nvml-wrapper has no safe call for remapped rows: this calls the symbol
/// through the library handle it loaded.
pub fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<RemappedRows, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corrected, mut uncorrected, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: the handle comes from this NVML session, and the four
    // out-pointers are valid `unsigned int`s, as nvml.h declares them.
    unsafe {
        nvml_try(sym(
            device.handle(),
            &mut corrected,
            &mut uncorrected,
            &mut pending,
            &mut failure,
        ))?;
    }
    Ok(RemappedRows {
        corrected,
        uncorrected,
        pending: pending != 0,
        failure: failure != 0,
    })
}

/// Pure: readings and settings to findings.
pub fn evaluate(gpus: &[GpuData<EccReadings>], s: &EccSettings) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (id, r) in session::split(NAME, gpus, &mut findings) {
        let before = findings.len();
        judge(id, r, s, &mut findings);
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
    }
    findings
}

fn judge(id: &GpuId, r: &EccReadings, s: &EccSettings, out: &mut Vec<Finding>) {
    let gpu = id.entity();
    let dram = r.volatile_uncorrected_dram.unwrap_or(0);
    let sram = r.volatile_uncorrected_sram.unwrap_or(0);
    if dram + sram > 0 {
        out.push(
            id.finding(NAME, "ECC_VOLATILE_UNCORRECTED", Severity::Down)
                .expected(0)
                .actual(format!("dram {dram}, sram {sram}"))
                .action(Action::ResetGpu)
                .message(format!("{gpu}: uncorrected ECC errors since the driver loaded (DRAM {dram}, SRAM {sram})")),
        );
    }
    // The aggregate counter includes the volatile one: one finding per fault.
    let aggregate = r.aggregate_uncorrected.filter(|_| dram + sram == 0);
    if let Some(n) = aggregate.filter(|n| *n > s.aggregate_uncorrected_max) {
        out.push(
            id.finding(NAME, "ECC_AGGREGATE_UNCORRECTED", Severity::Drain)
                .expected(format!("<= {}", s.aggregate_uncorrected_max))
                .actual(n)
                .action(Action::Repair)
                .message(format!(
                    "{gpu}: {n} uncorrected ECC errors over its lifetime"
                )),
        );
    }
    if let Some(n) = r
        .volatile_corrected
        .filter(|n| *n > s.volatile_corrected_max)
    {
        out.push(
            id.finding(NAME, "ECC_VOLATILE_CORRECTED", Severity::Warning)
                .expected(format!("<= {}", s.volatile_corrected_max))
                .actual(n)
                .message(format!(
                    "{gpu}: {n} corrected ECC errors since the driver loaded"
                )),
        );
    }
    if let Some(n) = r
        .aggregate_corrected
        .filter(|n| *n > s.aggregate_corrected_max)
    {
        out.push(
            id.finding(NAME, "ECC_AGGREGATE_CORRECTED", Severity::Warning)
                .expected(format!("<= {}", s.aggregate_corrected_max))
                .actual(n)
                .message(format!("{gpu}: {n} corrected ECC errors over its lifetime")),
        );
    }
    if r.retired_pending == Some(true) {
        out.push(
            id.finding(NAME, "RETIRED_PAGES_PENDING", Severity::Drain)
                .expected("none pending")
                .actual("pending")
                .action(Action::ResetGpu)
                .message(format!(
                    "{gpu}: pages wait for retirement; a GPU reset completes it"
                )),
        );
    }
    let retired = r.retired_single_bit.unwrap_or(0) + r.retired_double_bit.unwrap_or(0);
    if retired >= s.retired_pages_max
        && (r.retired_single_bit.is_some() || r.retired_double_bit.is_some())
    {
        out.push(
            id.finding(NAME, "RETIRED_PAGES_LIMIT", Severity::Drain)
                .expected(format!("< {}", s.retired_pages_max))
                .actual(retired)
                .action(Action::Repair)
                .message(format!("{gpu}: {retired} retired pages")),
        );
    }
    if let Some(rows) = r.remapped {
        if rows.failure {
            out.push(
                id.finding(NAME, "ROW_REMAP_FAILURE", Severity::Down)
                    .expected("remaps succeed")
                    .actual("a remap failed")
                    .action(Action::Repair)
                    .message(format!(
                        "{gpu}: a row remap failed; the GPU is out of spare rows"
                    )),
            );
        }
        if rows.pending {
            out.push(
                id.finding(NAME, "ROW_REMAP_PENDING", Severity::Drain)
                    .expected("no remap pending")
                    .actual("remap pending")
                    .action(Action::ResetGpu)
                    .message(format!("{gpu}: a row remap waits for a GPU reset")),
            );
        }
        let total = u64::from(rows.corrected) + u64::from(rows.uncorrected);
        if total > s.remapped_rows_max {
            out.push(
                id.finding(NAME, "ROWS_REMAPPED_HIGH", Severity::Warning)
                    .expected(format!("<= {}", s.remapped_rows_max))
                    .actual(total)
                    .message(format!(
                        "{gpu}: {total} rows remapped ({} corrected, {} uncorrected); such GPUs tend to regress",
                        rows.corrected, rows.uncorrected
                    )),
            );
        }
    }
}

impl Check for Ecc {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "ECC errors (volatile, aggregate), retired pages, remapped rows (NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        ALL_PROFILES
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.ecc;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        Ok(session::run(NAME, ctx, gather, |gpus| {
            CheckOutput::findings(evaluate(&gpus, &ctx.config.checks.ecc))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(r: EccReadings) -> Vec<Finding> {
        let gpus = vec![GpuData {
            id: GpuId::default(),
            reading: Ok(r),
        }];
        evaluate(&gpus, &EccSettings::default())
    }

    #[test]
    fn sixty_three_retired_pages_drain_sixty_two_do_not() {
        let at = |n| EccReadings {
            retired_single_bit: Some(n),
            retired_double_bit: Some(0),
            ..Default::default()
        };
        assert_eq!(one(at(63))[0].code, "RETIRED_PAGES_LIMIT");
        assert!(one(at(62))[0].is_ok());
    }

    #[test]
    fn eleven_remapped_rows_warn_ten_do_not() {
        let at = |corrected| EccReadings {
            remapped: Some(RemappedRows {
                corrected,
                uncorrected: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(one(at(10))[0].code, "ROWS_REMAPPED_HIGH");
        assert!(one(at(9))[0].is_ok());
    }
}
