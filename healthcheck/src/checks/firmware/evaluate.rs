//! Judging firmware versions: a pure function of gathered data and config.

use super::sysfs::{FirmwareData, Hca, DMI_DIR};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, FirmwareSettings, Severity};
use std::collections::BTreeMap;

pub const FIRMWARE_MISMATCH: &str = "FIRMWARE_MISMATCH";
pub const FIRMWARE_UNREADABLE: &str = "FIRMWARE_UNREADABLE";

/// Findings for BIOS and board (where expected) and every HCA not excluded
/// (`exclude` is `[checks.ib] exclude`: management NICs run firmware of their own).
pub fn evaluate(
    data: &FirmwareData,
    settings: &FirmwareSettings,
    exclude: &[String],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (entity, file, want, have) in [
        (
            "bios",
            "bios_version",
            &settings.bios_version,
            &data.bios_version,
        ),
        (
            "board",
            "board_name",
            &settings.board_name,
            &data.board_name,
        ),
    ] {
        let Some(want) = want else {
            // Nothing to judge, but the version is worth knowing (the
            // export sends it; the lemon report shows it for lemons).
            if let Some(have) = have {
                findings.push(Finding::ok(NAME, entity).actual(have));
            }
            continue;
        };
        findings.push(match have {
            None => Finding::unknown(
                NAME,
                entity,
                FIRMWARE_UNREADABLE,
                format!("{DMI_DIR}/{file}: not present, but [checks.firmware] {file} is set"),
            ),
            Some(have) if have == want => Finding::ok(NAME, entity).actual(have),
            Some(have) => mismatch(entity, want, have, settings.mismatch_severity)
                .message(format!("{file} is {have}, expected {want}")),
        });
    }
    let hcas: Vec<&Hca> = data
        .hcas
        .iter()
        .filter(|h| !exclude.iter().any(|x| x == &h.device))
        .collect();
    findings.extend(judge_hcas(&hcas, settings));
    findings
}

fn mismatch(entity: &str, want: &str, have: &str, severity: Severity) -> Finding {
    Finding::new(NAME, entity, FIRMWARE_MISMATCH, severity)
        .expected(want)
        .actual(have)
        .action(Action::Investigate)
}

/// Each HCA against `hca_fw_ver`, or else against the version most HCAs of its
/// type run here. Without a clear majority (as many on one version as on
/// another), every HCA of the type is flagged: which one is odd is unknowable.
fn judge_hcas(hcas: &[&Hca], settings: &FirmwareSettings) -> Vec<Finding> {
    let mut by_type: BTreeMap<&str, Vec<&Hca>> = BTreeMap::new();
    for hca in hcas {
        by_type
            .entry(hca.hca_type.as_deref().unwrap_or(""))
            .or_default()
            .push(hca);
    }
    let mut findings = Vec::new();
    for (hca_type, group) in by_type {
        let reference = match &settings.hca_fw_ver {
            Some(v) => Some((v.clone(), "expected")),
            None => majority(&group).map(|v| (v, "the majority of this node's HCAs")),
        };
        for hca in group.iter() {
            let device = &hca.device;
            findings.push(match &reference {
                Some((want, _)) if *want == hca.fw_ver => {
                    Finding::ok(NAME, device).actual(&hca.fw_ver)
                }
                Some((want, source)) => {
                    mismatch(device, want, &hca.fw_ver, settings.mismatch_severity).message(
                        format!(
                            "{device} {hca_type} runs firmware {}, {source} {want}",
                            hca.fw_ver
                        ),
                    )
                }
                None => mismatch(
                    device,
                    "one version",
                    &hca.fw_ver,
                    settings.mismatch_severity,
                )
                .message(format!(
                    "{hca_type} HCAs run different firmware with no majority; {device} runs {}",
                    hca.fw_ver
                )),
            });
        }
    }
    findings
}

/// The version more HCAs run than any other; `None` on a tie.
fn majority(group: &[&Hca]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for hca in group {
        *counts.entry(hca.fw_ver.as_str()).or_default() += 1;
    }
    let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
    ranked.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    match ranked.as_slice() {
        [(_, n), (_, m), ..] if n == m => None,
        [(top, _), ..] => Some(top.to_string()),
        [] => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hca(device: &str, fw: &str) -> Hca {
        Hca {
            device: device.into(),
            hca_type: Some("MT4129".into()),
            fw_ver: fw.into(),
        }
    }

    fn problems(f: &[Finding]) -> Vec<(String, String, Severity)> {
        f.iter()
            .filter(|f| !f.is_ok())
            .map(|f| (f.entity.clone(), f.code.clone(), f.severity))
            .collect()
    }

    fn data(hcas: Vec<Hca>) -> FirmwareData {
        FirmwareData {
            bios_version: Some("1.6.7".into()),
            board_name: Some("DGXH100".into()),
            hcas,
        }
    }

    #[test]
    fn the_odd_hca_out_is_a_warning_against_the_majority() {
        let d = data(vec![
            hca("mlx5_0", "28.39.1002"),
            hca("mlx5_1", "28.38.1002"),
            hca("mlx5_2", "28.39.1002"),
        ]);
        let findings = evaluate(&d, &FirmwareSettings::default(), &[]);
        assert_eq!(
            problems(&findings),
            [("mlx5_1".into(), FIRMWARE_MISMATCH.into(), Severity::Warning)]
        );
        let odd = findings.iter().find(|f| f.entity == "mlx5_1").unwrap();
        assert_eq!(odd.expected.as_deref(), Some("28.39.1002"));
    }

    #[test]
    fn an_expected_version_wins_over_the_majority_and_excluded_devices_are_skipped() {
        let d = data(vec![
            hca("mlx5_0", "28.38.1002"),
            hca("mlx5_1", "28.38.1002"),
            hca("mlx5_8", "22.1"),
        ]);
        let s = FirmwareSettings {
            hca_fw_ver: Some("28.39.1002".into()),
            ..FirmwareSettings::default()
        };
        let found = problems(&evaluate(&d, &s, &["mlx5_8".into()]));
        assert_eq!(
            found.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
            ["mlx5_0", "mlx5_1"]
        );
    }

    #[test]
    fn hcas_are_held_to_the_majority_of_their_own_type() {
        let mut eth = hca("mlx5_8", "22.36.1010");
        eth.hca_type = Some("MT4125".into());
        let d = data(vec![
            hca("mlx5_0", "28.39.1002"),
            hca("mlx5_1", "28.39.1002"),
            eth,
        ]);
        assert!(problems(&evaluate(&d, &FirmwareSettings::default(), &[])).is_empty());
    }

    #[test]
    fn a_tie_flags_every_hca_of_the_type() {
        let d = data(vec![hca("mlx5_0", "a"), hca("mlx5_1", "b")]);
        assert_eq!(
            problems(&evaluate(&d, &FirmwareSettings::default(), &[])).len(),
            2
        );
    }

    #[test]
    fn bios_and_board_are_judged_only_where_expected_and_missing_dmi_is_unknown() {
        let s = FirmwareSettings {
            bios_version: Some("1.6.7".into()),
            board_name: Some("DGXH200".into()),
            mismatch_severity: Severity::Drain,
            ..FirmwareSettings::default()
        };
        assert_eq!(
            problems(&evaluate(&data(vec![]), &s, &[])),
            [("board".into(), FIRMWARE_MISMATCH.into(), Severity::Drain)]
        );
        let unjudged = evaluate(&data(vec![]), &FirmwareSettings::default(), &[]);
        assert!(problems(&unjudged).is_empty());
        assert!(unjudged.iter().all(|f| f.is_ok() && f.actual.is_some()));
        let no_dmi = FirmwareData::default();
        let found = evaluate(&no_dmi, &s, &[]);
        assert_eq!(found[0].severity, Severity::Unknown);
        assert!(found[0].message.contains("/sys/class/dmi/id/bios_version"));
    }
}
