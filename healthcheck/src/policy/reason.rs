//! The reason text we give Slurm: `hc: <CODE> <entity>` first, because
//! `sinfo -R` shows 20 characters, then the other causes, within 254 bytes.

use crate::finding::Finding;
use lemonade_slurm::reason::{truncate, HEALTHCHECK_PREFIX};

/// The findings that take the node out, most severe first (`down` before
/// `drain`, then in the run's order, which is the checks' order).
pub fn causes(findings: &[Finding]) -> Vec<&Finding> {
    let mut out: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity.removes_node())
        .collect();
    // Stable: equal severities keep the run's order.
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
}

/// `hc: XID_79 gpu3`, then `; +N: CODE entity, ...` for the other causes.
pub fn text(causes: &[&Finding]) -> String {
    let Some(first) = causes.first() else {
        return HEALTHCHECK_PREFIX.to_string();
    };
    let mut s = format!("{HEALTHCHECK_PREFIX} {}", word(first));
    let rest: Vec<String> = causes[1..]
        .iter()
        .map(|f| word(f))
        .filter(|w| !s.contains(w.as_str()))
        .collect();
    if !rest.is_empty() {
        s.push_str(&format!("; +{}: {}", rest.len(), rest.join(", ")));
    }
    truncate(&s)
}

fn word(f: &Finding) -> String {
    if f.entity.is_empty() || f.entity == "node" {
        f.code.clone()
    } else {
        format!("{} {}", f.code, f.entity)
    }
}

/// The code a reason of ours names first (`XID_79` in `hc: XID_79 gpu3`).
pub fn code_of(reason: &str) -> Option<&str> {
    reason
        .strip_prefix(HEALTHCHECK_PREFIX)?
        .split_whitespace()
        .next()
        .map(|c| c.trim_end_matches(';'))
}

/// True when `current` is `reason`, or `reason` with one of the
/// remediation's remarks after it (`hc: XID_48 gpu3 human needed`).
pub fn is_ours_remarked(current: &str, reason: &str) -> bool {
    match current.strip_prefix(reason) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix(' ')
            .is_some_and(|remark| crate::repair::plan::REMARKS.contains(&remark)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    #[test]
    fn our_reason_with_a_remediation_remark_is_still_that_reason() {
        assert!(is_ours_remarked("hc: XID_48 gpu3", "hc: XID_48 gpu3"));
        assert!(is_ours_remarked(
            "hc: XID_48 gpu3 human needed",
            "hc: XID_48 gpu3"
        ));
        assert!(is_ours_remarked(
            "hc: XID_48 gpu3 reboot did not help",
            "hc: XID_48 gpu3"
        ));
        assert!(!is_ours_remarked(
            "hc: XID_48 gpu3; +1: XID_48 gpu4",
            "hc: XID_48 gpu3"
        ));
        assert!(!is_ours_remarked("hc: XID_48 gpu31", "hc: XID_48 gpu3"));
    }

    #[test]
    fn most_severe_first_within_twenty_chars_and_under_255_bytes() {
        let findings = vec![
            Finding::new("mounts", "/scratch", "MOUNT_MISSING", Severity::Drain),
            Finding::ok("pcie", "node"),
            Finding::new("xid", "gpu3", "XID_79", Severity::Down),
        ];
        let c = causes(&findings);
        let r = text(&c);
        assert!(r.starts_with("hc: XID_79 gpu3"), "{r}");
        assert!(r[..20].contains("XID_79 gpu3"));
        assert!(r.contains("MOUNT_MISSING /scratch"), "{r}");
        assert_eq!(code_of(&r), Some("XID_79"));

        let many: Vec<Finding> = (0..100)
            .map(|i| Finding::new("ib", format!("mlx5_{i}:1"), "IB_LINK_DOWN", Severity::Down))
            .collect();
        let r = text(&causes(&many));
        assert!(r.len() < 255, "{}", r.len());
        assert!(r.starts_with("hc: IB_LINK_DOWN mlx5_0:1"));
    }
}
