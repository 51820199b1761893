//! Which findings our reason names, most severe first. The text itself
//! (`hc: <CODE> <entity>` first, because `sinfo -R` shows 20 characters,
//! then the other causes, within 254 bytes) and its parse are
//! [`lemonade_slurm::reason`]'s.

use crate::finding::Finding;
use lemonade_slurm::reason;

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

/// `hc: XID_79 gpu3`, then `; +N: CODE entity, ...` for the other causes,
/// as [`lemonade_slurm::reason::healthcheck`] lays it out.
pub fn text(causes: &[&Finding]) -> String {
    let causes: Vec<reason::Cause> = causes
        .iter()
        .map(|f| reason::Cause {
            code: &f.code,
            entity: &f.entity,
        })
        .collect();
    reason::healthcheck(&causes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

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
        assert_eq!(reason::code_of(&r), Some("XID_79"));

        let many: Vec<Finding> = (0..100)
            .map(|i| Finding::new("ib", format!("mlx5_{i}:1"), "IB_LINK_DOWN", Severity::Down))
            .collect();
        let r = text(&causes(&many));
        assert!(r.len() < 255, "{}", r.len());
        assert!(r.starts_with("hc: IB_LINK_DOWN mlx5_0:1"));
    }
}
