//! The boot grace period: for `[policy] boot_grace_s` after a boot, a
//! finding judged from counter growth (error rates, non-fatal AER, NVLink
//! replays) stays a warning. Links train while a node comes up and their
//! counters jump; what keeps growing after the grace is judged as usual.
//! Unambiguous findings (a lost GPU, an uncorrectable ECC error, a fatal
//! AER error) act at once.

use crate::finding::Finding;
use crate::record::RunReport;
use lemonade_config::Severity;

/// The run's counter-growth findings that would take the node out, as
/// warnings, when the node booted less than `grace_s` seconds ago.
pub fn waiting(grace_s: u64, report: &RunReport) -> Vec<Finding> {
    let Some(uptime) = report.uptime_s.filter(|&u| u < grace_s as f64) else {
        return Vec::new();
    };
    report
        .findings
        .iter()
        .filter(|f| f.counter_growth && f.severity.removes_node())
        .map(|f| {
            let mut w = f.clone();
            w.message = format!(
                "{} (up {uptime:.0} s: counter growth within the {grace_s} s after boot \
                 is not judged; {} after that)",
                f.message, f.severity
            );
            w.severity = Severity::Warning;
            w
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::report;

    fn crc_rate() -> Finding {
        Finding::new("nvlink", "gpu0", "NVLINK_CRC_RATE", Severity::Drain).from_counter_growth()
    }

    fn booted(uptime_s: Option<f64>, findings: Vec<Finding>) -> RunReport {
        let mut r = report(findings);
        r.uptime_s = uptime_s;
        r
    }

    #[test]
    fn counter_growth_right_after_boot_is_a_warning() {
        let waits = waiting(600, &booted(Some(90.0), vec![crc_rate()]));
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].severity, Severity::Warning);
        assert!(waits[0].message.contains("up 90 s"), "{}", waits[0].message);
    }

    #[test]
    fn counter_growth_after_the_grace_is_judged() {
        assert!(waiting(600, &booted(Some(601.0), vec![crc_rate()])).is_empty());
        assert!(waiting(0, &booted(Some(5.0), vec![crc_rate()])).is_empty());
        // Without an uptime there is no boot to be graceful about.
        assert!(waiting(600, &booted(None, vec![crc_rate()])).is_empty());
    }

    #[test]
    fn unambiguous_findings_act_at_once_even_right_after_boot() {
        let lost = Finding::new("gpu", "gpu3", "GPU_MISSING", Severity::Down);
        let fatal = Finding::new("pcie", "0000:17:00.0", "PCIE_AER_FATAL", Severity::Down);
        assert!(waiting(600, &booted(Some(30.0), vec![lost, fatal])).is_empty());
    }
}
