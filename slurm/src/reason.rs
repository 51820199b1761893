//! Node reasons that Lemonade sets, and how to recognise them.
//!
//! Every reason we set starts with our prefix, so we can tell it from an
//! administrator's reason and never overwrite or clear the latter.

/// Prefix of reasons set by the node health checks.
pub const HEALTHCHECK_PREFIX: &str = "hc:";
/// Prefix of reasons set by the head node's lemon job.
pub const LEMON_PREFIX: &str = "lemon:";
/// slurmdbd truncates reasons; stay below its limit.
pub const MAX_REASON_BYTES: usize = 254;

/// Who set a node's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonOwner {
    HealthCheck,
    Lemon,
    /// Slurm itself: `Not responding`, `Prolog error`, `Kill task failed`, ...
    Slurm,
    /// Anything else: an administrator's words, which we must leave alone.
    Administrator,
    /// No reason at all.
    None,
}

/// Reasons that slurmctld or slurmd set on their own.
const SLURM_REASONS: &[&str] = &[
    "Not responding",
    "Prolog error",
    "Epilog error",
    "Kill task failed",
    "Node unexpectedly rebooted",
    "Low RealMemory",
    "Low socket*core*thread count",
    "Low CPUs",
    "Low TmpDisk",
    "NO NETWORK ADDRESS FOUND",
    "batch job complete failure",
    "Job credential expired",
    "Duplicate jobid",
    "Reboot ASAP",
    "reboot requested",
    "reboot issued",
    "Node silently failed and came back",
    "gres/gpu count reported lower than configured",
    "SlurmdSpoolDir is full",
    "health check failed",
];

/// Classifies a reason by its prefix.
pub fn owner(reason: &str) -> ReasonOwner {
    let r = reason.trim();
    if r.is_empty() || r == "none" || r == "(null)" {
        ReasonOwner::None
    } else if r.starts_with(HEALTHCHECK_PREFIX) {
        ReasonOwner::HealthCheck
    } else if r.starts_with(LEMON_PREFIX) {
        ReasonOwner::Lemon
    } else if SLURM_REASONS.iter().any(|s| r.starts_with(s)) {
        ReasonOwner::Slurm
    } else {
        ReasonOwner::Administrator
    }
}

/// Cuts a reason to [`MAX_REASON_BYTES`] on a character boundary.
pub fn truncate(reason: &str) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason.to_string();
    }
    let mut end = MAX_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_reasons_by_prefix() {
        assert_eq!(owner("hc: XID_79 gpu3"), ReasonOwner::HealthCheck);
        assert_eq!(owner("lemon: 6 fails/28d"), ReasonOwner::Lemon);
        assert_eq!(owner("Not responding"), ReasonOwner::Slurm);
        assert_eq!(owner("Prolog error"), ReasonOwner::Slurm);
        assert_eq!(owner("bad fan"), ReasonOwner::Administrator);
        assert_eq!(owner(""), ReasonOwner::None);
    }

    #[test]
    fn truncates_on_char_boundary() {
        let long = "é".repeat(200);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_REASON_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
