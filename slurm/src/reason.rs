//! Node reasons that Lemonade sets: their format, how to read them back,
//! and how to recognise them. Format and parse sit together so that a
//! change to one is a change to the other.
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

/// What the remediation adds to our reason, after a space
/// (`hc: XID_48 gpu3 human needed`): what is under way, or why a human is called.
pub const REMARKS: &[&str] = &[
    "reset",
    "restart-imex",
    "reboot",
    "human needed",
    "reboot did not help",
];

/// One cause a health-check reason names: a finding's code and entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause<'a> {
    pub code: &'a str,
    /// `gpu3`, `mlx5_2:1`, `/scratch`; empty or `node` for the whole node.
    pub entity: &'a str,
}

impl Cause<'_> {
    /// `XID_79 gpu3`, or `XID_79` alone for the whole node.
    fn words(&self) -> String {
        if self.entity.is_empty() || self.entity == "node" {
            self.code.to_string()
        } else {
            format!("{} {}", self.code, self.entity)
        }
    }
}

/// `hc: XID_79 gpu3`, then `; +N: CODE entity, ...` for the other causes
/// (most important first: `sinfo -R` shows 20 characters), within
/// [`MAX_REASON_BYTES`].
pub fn healthcheck(causes: &[Cause]) -> String {
    let Some(first) = causes.first() else {
        return HEALTHCHECK_PREFIX.to_string();
    };
    let mut s = format!("{HEALTHCHECK_PREFIX} {}", first.words());
    let rest: Vec<String> = causes[1..]
        .iter()
        .map(Cause::words)
        .filter(|w| !s.contains(w.as_str()))
        .collect();
    if !rest.is_empty() {
        s.push_str(&format!("; +{}: {}", rest.len(), rest.join(", ")));
    }
    truncate(&s)
}

/// `lemon: 5 fails/28d ...` from the words after the prefix, within [`MAX_REASON_BYTES`].
pub fn lemon(words: &str) -> String {
    truncate(&format!("{LEMON_PREFIX} {words}"))
}

/// The words of an in-job outlier's reason (`lemon watch`).
pub const OUTLIER_CODE: &str = "OUTLIER";

/// A metric's name in at most 4 characters, for the 20 that `sinfo -R`
/// shows: `gmin` for `gpu_util_min`; a name we do not know keeps its first 4.
pub fn short_metric(metric: &str) -> &str {
    match metric {
        "gpu_util" => "gpu",
        "gpu_util_min" => "gmin",
        "gpu_power" => "pwr",
        "gpu_sm_clock" => "clk",
        "gpu_mem_util" => "gmem",
        "gpu_mem_used" => "fb",
        "nvlink_tx" => "nvl",
        "pcie_tx" => "pcie",
        "ib_tx" => "ibtx",
        "ib_rx" => "ibrx",
        "pfc_pause" => "pfc",
        "cnp" => "cnp",
        "cpu_util" => "cpu",
        "mem_used" => "mem",
        "disk_io" => "disk",
        "DCGM_FI_DEV_XID_ERRORS" => "xid",
        other => {
            let mut end = other.len().min(4);
            while !other.is_char_boundary(end) {
                end -= 1;
            }
            &other[..end]
        }
    }
}

/// `lemon: j4419021 gmin OUTLIER gpu_util_min`: the job and the short
/// metric first (`sinfo -R` shows 20 characters), the full metric name
/// after. Within [`MAX_REASON_BYTES`].
pub fn outlier(job: &str, metric: &str) -> String {
    lemon(&format!(
        "j{job} {} {OUTLIER_CODE} {metric}",
        short_metric(metric)
    ))
}

/// Our reason with one of [`REMARKS`] after it (`hc: XID_48 gpu3 reboot`).
/// Not cut: the reason before the remark must stay whole for
/// [`is_ours_remarked`] to recognise it.
pub fn with_remark(reason: &str, remark: &str) -> String {
    format!("{reason} {remark}")
}

/// True when `current` is `reason`, or `reason` with one of [`REMARKS`]
/// after it (`hc: XID_48 gpu3 human needed`).
pub fn is_ours_remarked(current: &str, reason: &str) -> bool {
    match current.strip_prefix(reason) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix(' ')
            .is_some_and(|remark| REMARKS.contains(&remark)),
        None => false,
    }
}

/// The code of a drain for a failed validation (issue 31).
pub const VALIDATE_CODE: &str = "VALIDATE";

/// `hc: VALIDATE avg_busbw 312<371 (learned)`, then `; +N more` for the
/// other failures: the first failing metric starts within the 20
/// characters `sinfo -R` shows. Within [`MAX_REASON_BYTES`].
pub fn validate(failing: &[String]) -> String {
    let Some(first) = failing.first() else {
        return format!("{HEALTHCHECK_PREFIX} {VALIDATE_CODE}");
    };
    let mut s = format!("{HEALTHCHECK_PREFIX} {VALIDATE_CODE} {first}");
    if failing.len() > 1 {
        s.push_str(&format!("; +{} more", failing.len() - 1));
    }
    truncate(&s)
}

/// Whether `reason` is a failed validation's drain ([`validate`]).
pub fn is_validate(reason: &str) -> bool {
    let parsed = parse(reason);
    parsed.owner == ReasonOwner::HealthCheck && parsed.code == Some(VALIDATE_CODE)
}

/// A reason read back: who set it and, for ours, what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub owner: ReasonOwner,
    /// The first cause's code (`XID_79`); health-check reasons only.
    pub code: Option<&'a str>,
    /// The first cause's entity (`gpu3`); none for a whole-node cause.
    pub entity: Option<&'a str>,
    /// The remediation's remark at the end (`reboot`), one of [`REMARKS`].
    pub remark: Option<&'a str>,
    /// The words after our prefix (`5 fails/28d` of a lemon reason); the
    /// whole reason when it is not ours.
    pub body: &'a str,
}

/// Reads a reason back: the one place that knows how [`healthcheck`],
/// [`lemon`] and [`with_remark`] lay their words out.
pub fn parse(reason: &str) -> Parsed<'_> {
    let r = reason.trim();
    let owner = owner(r);
    let body = match owner {
        ReasonOwner::HealthCheck => &r[HEALTHCHECK_PREFIX.len()..],
        ReasonOwner::Lemon => &r[LEMON_PREFIX.len()..],
        _ => r,
    }
    .trim_start();
    let mut parsed = Parsed {
        owner,
        code: None,
        entity: None,
        remark: None,
        body,
    };
    if owner != ReasonOwner::HealthCheck {
        return parsed;
    }
    // The longest remark first: `reboot did not help` also ends in words of `reboot`'s.
    let mut by_length = REMARKS.to_vec();
    by_length.sort_by_key(|m| std::cmp::Reverse(m.len()));
    let mut head = body;
    if let Some(m) = by_length
        .iter()
        .find(|m| body.strip_suffix(**m).is_some_and(|b| b.ends_with(' ')))
    {
        parsed.remark = Some(m);
        head = body[..body.len() - m.len()].trim_end();
    }
    let mut words = head.split_whitespace();
    parsed.code = words.next().map(|c| c.trim_end_matches(';'));
    parsed.entity = words
        .next()
        .filter(|w| !w.starts_with('+') && !w.is_empty() && *w != ";")
        .map(|e| e.trim_end_matches(';'));
    parsed
}

/// The code a reason of ours names first (`XID_79` in `hc: XID_79 gpu3`).
pub fn code_of(reason: &str) -> Option<&str> {
    parse(reason).code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_validation_reason_names_the_first_failure_within_20_characters() {
        let failing = vec![
            "avg_busbw 312<371 (learned)".to_string(),
            "gpus_faulty 1 (must be 0)".to_string(),
        ];
        let reason = validate(&failing);
        assert_eq!(reason, "hc: VALIDATE avg_busbw 312<371 (learned); +1 more");
        assert!(reason[..20].contains("avg_bus"));
        assert!(is_validate(&reason));
        assert!(!is_validate("hc: XID_79 gpu3") && !is_validate("VALIDATE by hand"));
        let long = validate(&["x".repeat(400)]);
        assert!(long.len() <= MAX_REASON_BYTES && is_validate(&long));
    }

    /// What `sinfo -R` shows of a reason.
    fn shown(reason: &str) -> &str {
        &reason[..reason.len().min(20)]
    }

    #[test]
    fn every_reason_we_set_shows_its_key_words_in_the_20_characters_of_sinfo() {
        let job = "4419021";
        let cases: Vec<(String, Vec<&str>)> = vec![
            (outlier(job, "gpu_util_min"), vec![job, "gmin"]),
            (outlier(job, "ib_rx"), vec![job, "ibrx"]),
            (outlier(job, "gpu_power"), vec![job, "pwr"]),
            (outlier(job, "DCGM_FI_DEV_XID_ERRORS"), vec![job, "xid"]),
            (outlier(job, "some_exporter_metric"), vec![job, "some"]),
            (healthcheck(&[cause("XID_79", "gpu3")]), vec!["XID_79 gpu3"]),
            (
                healthcheck(&[cause("IB_LINK_DOWN", "mlx5_2:1")]),
                vec!["IB_LINK_DOWN"],
            ),
            (
                validate(&["avg_busbw 312<371".into()]),
                vec!["VALIDATE", "avg_b"],
            ),
            (lemon("5 fails/28d p=1e-4"), vec!["5 fails/28d"]),
        ];
        for (reason, words) in cases {
            for w in words {
                assert!(
                    shown(&reason).contains(w),
                    "`{}` lacks `{w}`",
                    shown(&reason)
                );
            }
        }
        let r = outlier(job, "gpu_util_min");
        assert_eq!(r, "lemon: j4419021 gmin OUTLIER gpu_util_min");
        assert_eq!(owner(&r), ReasonOwner::Lemon);
        assert_eq!(short_metric("éééé"), "éé");
    }

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
    fn cause<'a>(code: &'a str, entity: &'a str) -> Cause<'a> {
        Cause { code, entity }
    }

    #[test]
    fn a_healthcheck_reason_puts_its_first_cause_within_twenty_chars() {
        let r = healthcheck(&[
            cause("XID_79", "gpu3"),
            cause("MOUNT_MISSING", "/scratch"),
            cause("XID_79", "gpu3"),
        ]);
        assert_eq!(r, "hc: XID_79 gpu3; +1: MOUNT_MISSING /scratch");
        assert!(r[..20].contains("XID_79 gpu3"));
        assert_eq!(healthcheck(&[cause("MEM_LOW", "node")]), "hc: MEM_LOW");
        assert_eq!(healthcheck(&[]), "hc:");
    }

    #[test]
    fn a_reason_of_many_causes_stays_under_255_bytes() {
        let names: Vec<String> = (0..100).map(|i| format!("mlx5_{i}:1")).collect();
        let causes: Vec<Cause> = names.iter().map(|e| cause("IB_LINK_DOWN", e)).collect();
        let r = healthcheck(&causes);
        assert!(r.len() < 255, "{}", r.len());
        assert!(r.starts_with("hc: IB_LINK_DOWN mlx5_0:1"), "{r}");
        assert!(lemon(&"x".repeat(400)).len() < 255);
    }

    #[test]
    fn a_healthcheck_reason_parses_back_to_its_code_entity_and_remark() {
        for (code, entity) in [
            ("XID_79", "gpu3"),
            ("MOUNT_HUNG", "/checkpoint"),
            ("IB_PORT_DOWN", "mlx5_2:1"),
        ] {
            let r = healthcheck(&[cause(code, entity), cause("PCIE_WIDTH_DEGRADED", "gpu0")]);
            let p = parse(&r);
            assert_eq!(p.owner, ReasonOwner::HealthCheck);
            assert_eq!(
                (p.code, p.entity, p.remark),
                (Some(code), Some(entity), None),
                "{r}"
            );
            for remark in REMARKS {
                let marked = with_remark(&r, remark);
                let p = parse(&marked);
                assert_eq!(
                    (p.code, p.entity, p.remark),
                    (Some(code), Some(entity), Some(*remark))
                );
            }
        }
        let marked = with_remark(
            &healthcheck(&[cause("MEM_LOW", "node")]),
            "reboot did not help",
        );
        let p = parse(&marked);
        assert_eq!(
            (p.code, p.entity, p.remark),
            (Some("MEM_LOW"), None, Some("reboot did not help"))
        );
        let two = healthcheck(&[cause("MEM_LOW", ""), cause("XID_79", "gpu1")]);
        let p = parse(&two);
        assert_eq!((p.code, p.entity), (Some("MEM_LOW"), None));
        assert_eq!(code_of("hc: XID_79 gpu3"), Some("XID_79"));
        assert_eq!(code_of("hc:"), None);
    }

    #[test]
    fn a_lemon_reason_parses_back_to_its_words_and_others_are_left_whole() {
        let r = lemon("5 fails/28d p=1e-4");
        let p = parse(&r);
        assert_eq!(p.owner, ReasonOwner::Lemon);
        assert_eq!(p.body, "5 fails/28d p=1e-4");
        assert_eq!(p.code, None);
        let p = parse("bad fan, ticket 42");
        assert_eq!(p.owner, ReasonOwner::Administrator);
        assert_eq!((p.body, p.code), ("bad fan, ticket 42", None));
        assert_eq!(code_of("Not responding"), None);
    }

    #[test]
    fn our_reason_with_a_remediation_remark_is_still_that_reason() {
        assert!(is_ours_remarked("hc: XID_48 gpu3", "hc: XID_48 gpu3"));
        assert!(is_ours_remarked(
            "hc: XID_48 gpu3 human needed",
            "hc: XID_48 gpu3"
        ));
        assert!(is_ours_remarked(
            &with_remark("hc: XID_48 gpu3", "reboot did not help"),
            "hc: XID_48 gpu3"
        ));
        assert!(!is_ours_remarked(
            "hc: XID_48 gpu3; +1: XID_48 gpu4",
            "hc: XID_48 gpu3"
        ));
        assert!(!is_ours_remarked("hc: XID_48 gpu31", "hc: XID_48 gpu3"));
        assert!(!is_ours_remarked(
            "hc: XID_48 gpu3 fixed",
            "hc: XID_48 gpu3"
        ));
    }
}
