//! `ecc`: uncorrected and corrected ECC errors, retired pages, remapped rows,
//! judged as the driver counts them (see [`evaluate`]).

use super::session::{self, Failure, GpuData, GpuId};
use crate::check::{
    previous_state, Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView,
    ALL_PROFILES,
};
use crate::finding::Finding;
use lemonade_config::{Action, Config, EccSettings, Severity};
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, MemoryLocation, RetirementCause,
};
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const ROW_REMAP_PENDING: &str = "ROW_REMAP_PENDING";
pub const ROW_REMAP_FAILURE: &str = "ROW_REMAP_FAILURE";
pub const RETIRED_PAGES_PENDING: &str = "RETIRED_PAGES_PENDING";
pub const ECC_VOLATILE_UNCORRECTED: &str = "ECC_VOLATILE_UNCORRECTED";
pub const ECC_AGGREGATE_GROWTH: &str = "ECC_AGGREGATE_GROWTH";
pub const RETIRED_PAGES_LIMIT: &str = "RETIRED_PAGES_LIMIT";
pub const ECC_AGGREGATE_UNCORRECTED: &str = "ECC_AGGREGATE_UNCORRECTED";
pub const ECC_VOLATILE_CORRECTED: &str = "ECC_VOLATILE_CORRECTED";
pub const ECC_AGGREGATE_CORRECTED: &str = "ECC_AGGREGATE_CORRECTED";
pub const ROWS_REMAPPED_HIGH: &str = "ROWS_REMAPPED_HIGH";

pub const NAME: &str = "ecc";

/// The `ecc` check.
pub struct Ecc;

/// One GPU's memory-error readings; `None` where the GPU does not support it
/// (H100 has no page retirement, older GPUs have no row remapping).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EccReadings {
    /// `nvmlDeviceGetTotalEccErrors(uncorrected, volatile)`: every location
    /// the driver counts (DRAM, SRAM, and on older GPUs L1, L2, register
    /// file, texture), the authority for "an error now".
    pub volatile_uncorrected: Option<u64>,
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
            volatile_uncorrected: opt(d.total_ecc_errors(unc, EccCounter::Volatile))?,
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

/// The aggregate uncorrected count of the previous run, per GPU (UUID): the
/// baseline its growth is measured from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EccState {
    pub aggregate_uncorrected: BTreeMap<String, u64>,
}

/// Pure: readings, settings and the previous run's counters to findings and
/// the counters for the next run.
///
/// The rule (NVIDIA, "NVML API Reference: nvmlEccCounterType_t" and "GPU
/// Memory Error Management: row remapping"): the volatile counter counts
/// since the driver loaded (every boot with persistence mode, every job
/// without it) or the GPU was last reset, the aggregate counter lives in the
/// InfoROM and counts for the GPU's whole life, and a row remap pending at
/// the error is applied by the next reset. So a volatile error or
/// a pending remap means "now", a reset; a failed remap (or a full page
/// retirement table) means repair; aggregate growth since the last run is a
/// fresh error whose volatile count a reset or reboot already cleared; and a
/// steady aggregate count with healthy remapping is history, shown in the ok
/// finding, never a fault unless the site sets a limit.
pub fn evaluate(
    gpus: &[GpuData<EccReadings>],
    s: &EccSettings,
    previous: &EccState,
) -> (Vec<Finding>, EccState) {
    let mut findings = Vec::new();
    let mut state = EccState::default();
    // A GPU that did not answer keeps its baseline for its next answer.
    for gpu in gpus.iter().filter(|g| g.reading.is_err()) {
        let key = gpu.id.state_key();
        if let Some(&n) = previous.aggregate_uncorrected.get(&key) {
            state.aggregate_uncorrected.insert(key, n);
        }
    }
    for (id, r) in session::split(NAME, gpus, &mut findings) {
        let key = id.state_key();
        let before = findings.len();
        // No baseline (a node's first run, a new GPU): nothing to compare.
        // Lower than before: the site cleared the InfoROM counts (nvidia-smi -p 1).
        let grown = r
            .aggregate_uncorrected
            .zip(previous.aggregate_uncorrected.get(&key))
            .map_or(0, |(now, was)| now.saturating_sub(*was));
        judge_now(id, r, grown, &mut findings);
        judge_limits(id, r, s, &mut findings);
        if findings.len() == before {
            findings.push(history(id, r));
        }
        if let Some(n) = r.aggregate_uncorrected {
            state.aggregate_uncorrected.insert(key, n);
        }
    }
    (findings, state)
}

/// The counters that mean "now": what a reset repairs, and what it cannot.
fn judge_now(id: &GpuId, r: &EccReadings, grown: u64, out: &mut Vec<Finding>) {
    let gpu = id.entity();
    let rows = r.remapped.unwrap_or_default();
    match fresh_error(id, r, grown, rows.pending) {
        Some(fresh) => out.push(fresh),
        None if rows.pending => out.push(
            id.finding(NAME, ROW_REMAP_PENDING, Severity::Drain)
                .expected("no remap pending")
                .actual("remap pending")
                .action(Action::ResetGpu)
                .message(format!("{gpu}: a row remap waits for a GPU reset")),
        ),
        None => {}
    }
    if rows.failure {
        out.push(
            id.finding(NAME, ROW_REMAP_FAILURE, Severity::Down)
                .expected("remaps succeed")
                .actual("a remap failed")
                .action(Action::Repair)
                .message(format!(
                    "{gpu}: a row remap failed; the GPU is out of spare rows"
                )),
        );
    }
    if r.retired_pending == Some(true) {
        out.push(
            id.finding(NAME, RETIRED_PAGES_PENDING, Severity::Drain)
                .expected("none pending")
                .actual("pending")
                .action(Action::ResetGpu)
                .message(format!(
                    "{gpu}: pages wait for retirement; a GPU reset completes it"
                )),
        );
    }
}

/// A fresh uncorrected error, seen in the volatile count or, when a reset or
/// reboot already cleared that, in the aggregate count's growth. The row
/// remap such an error leaves pending is the same fault, applied by the same
/// reset: it is said in the finding, not a finding of its own.
///
/// The volatile total decides; the DRAM and SRAM locations only say where.
/// A Volta-era driver has no SRAM location and counts L1, L2, register file
/// and texture errors instead: an error there is in the total and in
/// neither location, and it is as fresh as a DRAM one.
fn fresh_error(id: &GpuId, r: &EccReadings, grown: u64, pending: bool) -> Option<Finding> {
    let gpu = id.entity();
    let dram = r.volatile_uncorrected_dram.unwrap_or(0);
    let sram = r.volatile_uncorrected_sram.unwrap_or(0);
    let located = dram.saturating_add(sram);
    // A driver without the total still counts by location.
    let total = r.volatile_uncorrected.unwrap_or(0).max(located);
    let remap = if pending { "; row remap pending" } else { "" };
    if total > 0 {
        let elsewhere = match total - located {
            0 => String::new(),
            n => format!(", elsewhere (L1, L2, register file, texture) {n}"),
        };
        // The aggregate count grew by the same errors: one finding per fault.
        return Some(
            id.finding(NAME, ECC_VOLATILE_UNCORRECTED, Severity::Down)
                .expected(0)
                .actual(format!("dram {dram}, sram {sram}{elsewhere}{remap}"))
                .action(Action::ResetGpu)
                .message(format!("{gpu}: {total} uncorrected ECC errors since the driver loaded (DRAM {dram}, SRAM {sram}{elsewhere}){remap}")),
        );
    }
    // The aggregate counter grew while the volatile one reads 0: the error
    // came before a reset or reboot. Judged like a fresh one, and never as
    // counter growth in the boot-grace sense: an uncorrectable error is
    // unambiguous, and the next run no longer sees the growth.
    (grown > 0).then(|| {
        id.finding(NAME, ECC_AGGREGATE_GROWTH, Severity::Down)
            .expected("no new uncorrected errors")
            .actual(format!("+{grown} since the last run, 0 since the driver loaded{remap}"))
            .action(Action::ResetGpu)
            .message(format!(
                "{gpu}: {grown} new uncorrected ECC errors since the last run, before a reset or reboot{remap}; a reset, then the remap state decides"
            ))
    })
}

/// Limits on totals: the page retirement table (pre-A100 GPUs, which have
/// no row remapping) and what the site configured.
fn judge_limits(id: &GpuId, r: &EccReadings, s: &EccSettings, out: &mut Vec<Finding>) {
    let gpu = id.entity();
    let retired = r.retired_single_bit.unwrap_or(0) + r.retired_double_bit.unwrap_or(0);
    let retires = r.retired_single_bit.is_some() || r.retired_double_bit.is_some();
    if retires && retired >= s.retired_pages_max {
        out.push(
            id.finding(NAME, RETIRED_PAGES_LIMIT, Severity::Drain)
                .expected(format!("< {}", s.retired_pages_max))
                .actual(retired)
                .action(Action::Repair)
                .message(format!(
                    "{gpu}: {retired} retired pages: the retirement table is nearly full"
                )),
        );
    }
    let over = |n: Option<u64>, max: Option<u64>| n.zip(max).filter(|(n, max)| n > max);
    if let Some((n, max)) = over(r.aggregate_uncorrected, s.aggregate_uncorrected_max) {
        out.push(
            id.finding(NAME, ECC_AGGREGATE_UNCORRECTED, Severity::Drain)
                .expected(format!("<= {max} (site limit)"))
                .actual(n)
                .action(Action::Repair)
                .message(format!(
                    "{gpu}: {n} uncorrected ECC errors over its lifetime, over the site's limit"
                )),
        );
    }
    if let Some(n) = r
        .volatile_corrected
        .filter(|n| *n > s.volatile_corrected_max)
    {
        out.push(
            id.finding(NAME, ECC_VOLATILE_CORRECTED, Severity::Warning)
                .expected(format!("<= {}", s.volatile_corrected_max))
                .actual(n)
                .message(format!(
                    "{gpu}: {n} corrected ECC errors since the driver loaded"
                )),
        );
    }
    if let Some((n, max)) = over(r.aggregate_corrected, s.aggregate_corrected_max) {
        out.push(
            id.finding(NAME, ECC_AGGREGATE_CORRECTED, Severity::Warning)
                .expected(format!("<= {max} (site limit)"))
                .actual(n)
                .message(format!("{gpu}: {n} corrected ECC errors over its lifetime")),
        );
    }
    let rows = r
        .remapped
        .map(|r| u64::from(r.corrected) + u64::from(r.uncorrected));
    if let Some((total, max)) = over(rows, s.remapped_rows_max) {
        out.push(
            id.finding(NAME, ROWS_REMAPPED_HIGH, Severity::Warning)
                .expected(format!("<= {max} (site limit)"))
                .actual(total)
                .message(format!("{gpu}: {total} rows remapped over its lifetime")),
        );
    }
}

/// The ok finding; for a GPU with a past, repaired error it carries the
/// lifetime counts in `actual`, so history and the export show them.
fn history(id: &GpuId, r: &EccReadings) -> Finding {
    let mut past = Vec::new();
    if let Some(n) = r.aggregate_uncorrected.filter(|n| *n > 0) {
        past.push(format!("{n} uncorrected ECC errors in its lifetime"));
    }
    if let Some(rows) = r.remapped.filter(|r| r.corrected + r.uncorrected > 0) {
        past.push(format!(
            "rows remapped: {} for uncorrected, {} for corrected errors",
            rows.uncorrected, rows.corrected
        ));
    }
    let retired = r.retired_single_bit.unwrap_or(0) + r.retired_double_bit.unwrap_or(0);
    if retired > 0 {
        past.push(format!("{retired} retired pages"));
    }
    if past.is_empty() {
        return id.ok(NAME);
    }
    let past = past.join("; ");
    id.ok(NAME)
        .actual(&past)
        .message(format!("{}: healthy; history: {past}", id.entity()))
}

impl Check for Ecc {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "ECC errors as the driver counts them (volatile, aggregate growth), retired pages, remapped rows (NVML)"
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
            let previous: EccState = previous_state(ctx);
            let (findings, state) = evaluate(&gpus, &ctx.config.checks.ecc, &previous);
            CheckOutput::with_state(findings, &state)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(r: EccReadings) -> Vec<GpuData<EccReadings>> {
        vec![GpuData {
            id: GpuId {
                index: 5,
                uuid: Some("GPU-5".into()),
                bus_id: None,
            },
            reading: Ok(r),
        }]
    }

    fn one(r: EccReadings) -> Vec<Finding> {
        evaluate(&gpu(r), &EccSettings::default(), &EccState::default()).0
    }

    fn codes(findings: &[Finding]) -> Vec<(&str, Severity, Action)> {
        findings
            .iter()
            .map(|f| (f.code.as_str(), f.severity, f.action))
            .collect()
    }

    /// An H100 as the driver counts: `volatile` errors since the last reset,
    /// `aggregate` over its life, `pending` a remap waiting for the reset.
    fn h100(volatile: u64, aggregate: u64, remapped: u32, pending: bool) -> EccReadings {
        EccReadings {
            volatile_uncorrected_dram: Some(volatile),
            volatile_uncorrected_sram: Some(0),
            aggregate_uncorrected: Some(aggregate),
            volatile_corrected: Some(0),
            aggregate_corrected: Some(0),
            remapped: Some(RemappedRows {
                uncorrected: remapped,
                pending,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn after(previous_aggregate: u64) -> EccState {
        EccState {
            aggregate_uncorrected: [("GPU-5".to_string(), previous_aggregate)].into(),
        }
    }

    #[test]
    fn an_error_only_in_the_volatile_total_is_fresh_and_down_on_a_first_run() {
        // A Volta-era driver: an L2 error, no SRAM location, nothing in DRAM.
        let volta = EccReadings {
            volatile_uncorrected: Some(1),
            volatile_uncorrected_dram: Some(0),
            volatile_uncorrected_sram: None,
            aggregate_uncorrected: Some(1),
            ..Default::default()
        };
        let found = one(volta);
        assert_eq!(
            codes(&found),
            [("ECC_VOLATILE_UNCORRECTED", Severity::Down, Action::ResetGpu)]
        );
        assert_eq!(
            found[0].actual.as_deref(),
            Some("dram 0, sram 0, elsewhere (L1, L2, register file, texture) 1")
        );
    }

    #[test]
    fn a_past_remapped_error_is_ok_and_shown_as_history() {
        let (found, state) = evaluate(
            &gpu(h100(0, 2, 2, false)),
            &EccSettings::default(),
            &after(2),
        );
        assert_eq!(codes(&found), [("OK", Severity::Ok, Action::None)]);
        let shown = found[0].actual.as_deref().unwrap();
        assert!(
            shown.contains("2 uncorrected ECC errors in its lifetime"),
            "{shown}"
        );
        assert!(
            shown.contains("rows remapped: 2 for uncorrected"),
            "{shown}"
        );
        assert_eq!(state, after(2));
        // The first run of a node has no baseline: the count is history too.
        assert!(one(h100(0, 2, 2, false))[0].is_ok());
    }

    #[test]
    fn a_fresh_error_with_its_remap_pending_asks_for_a_reset() {
        let found = evaluate(
            &gpu(h100(2, 2, 2, true)),
            &EccSettings::default(),
            &after(0),
        )
        .0;
        assert_eq!(
            codes(&found),
            [("ECC_VOLATILE_UNCORRECTED", Severity::Down, Action::ResetGpu)]
        );
        // The remap the error left pending is the same fault, said in it.
        assert_eq!(
            found[0].actual.as_deref(),
            Some("dram 2, sram 0; row remap pending")
        );
        // Without a fresh error, a pending remap (for corrected errors) is its own.
        let found = evaluate(
            &gpu(h100(0, 2, 2, true)),
            &EccSettings::default(),
            &after(2),
        )
        .0;
        assert_eq!(
            codes(&found),
            [("ROW_REMAP_PENDING", Severity::Drain, Action::ResetGpu)]
        );
    }

    #[test]
    fn a_remap_failure_asks_for_a_repair() {
        let mut r = h100(0, 3, 2, false);
        r.remapped.as_mut().unwrap().failure = true;
        let found = evaluate(&gpu(r), &EccSettings::default(), &after(3)).0;
        assert_eq!(
            codes(&found),
            [("ROW_REMAP_FAILURE", Severity::Down, Action::Repair)]
        );
    }

    #[test]
    fn aggregate_growth_after_a_reboot_asks_for_a_reset_and_is_then_judged_by_the_remap_state() {
        let s = EccSettings::default();
        // The reboot cleared the volatile count and applied the remap.
        let (found, state) = evaluate(&gpu(h100(0, 2, 2, false)), &s, &after(0));
        assert_eq!(
            codes(&found),
            [("ECC_AGGREGATE_GROWTH", Severity::Down, Action::ResetGpu)]
        );
        assert!(
            !found[0].counter_growth,
            "no boot grace for an uncorrectable error"
        );
        // The checks after the reset compare with this run's count: healthy.
        assert!(evaluate(&gpu(h100(0, 2, 2, false)), &s, &state).0[0].is_ok());
        // A remap that failed is a repair however the growth is judged.
        let mut failed = h100(0, 2, 2, false);
        failed.remapped.as_mut().unwrap().failure = true;
        assert_eq!(
            codes(&evaluate(&gpu(failed), &s, &state).0),
            [("ROW_REMAP_FAILURE", Severity::Down, Action::Repair)]
        );
    }

    #[test]
    fn a_cleared_inforom_count_is_not_growth() {
        let found = evaluate(
            &gpu(h100(0, 0, 0, false)),
            &EccSettings::default(),
            &after(4),
        )
        .0;
        assert!(found[0].is_ok(), "{found:?}");
    }

    #[test]
    fn lifetime_counts_count_against_a_gpu_only_over_a_limit_the_site_set() {
        let mut r = h100(0, 2, 12, false);
        r.aggregate_corrected = Some(200_000);
        assert!(one(r.clone())[0].is_ok());
        let s = EccSettings {
            aggregate_uncorrected_max: Some(1),
            aggregate_corrected_max: Some(100_000),
            remapped_rows_max: Some(10),
            ..Default::default()
        };
        let found = evaluate(&gpu(r), &s, &after(2)).0;
        assert_eq!(
            codes(&found),
            [
                ("ECC_AGGREGATE_UNCORRECTED", Severity::Drain, Action::Repair),
                (
                    "ECC_AGGREGATE_CORRECTED",
                    Severity::Warning,
                    Action::Investigate
                ),
                ("ROWS_REMAPPED_HIGH", Severity::Warning, Action::Investigate),
            ]
        );
    }

    #[test]
    fn sixty_three_retired_pages_drain_for_repair_sixty_two_are_history() {
        let at = |n| EccReadings {
            retired_single_bit: Some(n),
            retired_double_bit: Some(0),
            ..Default::default()
        };
        assert_eq!(
            codes(&one(at(63))),
            [("RETIRED_PAGES_LIMIT", Severity::Drain, Action::Repair)]
        );
        let below = one(at(62));
        assert!(below[0].is_ok());
        assert_eq!(below[0].actual.as_deref(), Some("62 retired pages"));
    }

    #[test]
    fn a_gpu_that_does_not_answer_keeps_its_baseline() {
        let gpus = vec![GpuData {
            id: GpuId {
                index: 5,
                uuid: Some("GPU-5".into()),
                bus_id: None,
            },
            reading: Err(Failure::Lost),
        }];
        let (_, state) = evaluate(&gpus, &EccSettings::default(), &after(2));
        assert_eq!(state, after(2));
    }
}
