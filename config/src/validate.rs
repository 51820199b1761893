//! `[validate]`: proactive validation (issue 31, after Microsoft's Anubis):
//! how `lemon` learns pass/fail criteria for benchmark metrics from the
//! fleet's own results, the site's static floors for SKUs with too few
//! results to learn from, and the selector's budget.
//!
//! ```toml
//! [validate]
//! min_results = 8
//! spread_k = 4.0
//! min_gap = 0.02
//!
//! [[validate.floor]]
//! metric = "avg_busbw"
//! sku = "H100x8"
//! min = 350.0
//! ```

use serde::{Deserialize, Serialize};

/// `[validate]`: criteria and selection settings.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ValidateSettings {
    /// A SKU's metric needs results from at least this many nodes (the
    /// judged one included) before a band is learned from them; below it the
    /// static floors apply, and the output says so.
    pub min_results: usize,
    /// The band's half-width in robust standard deviations of the peers on
    /// the failing side (1.4826 x the median absolute deviation of the peers
    /// below the median, for a higher-is-better metric).
    pub spread_k: f64,
    /// The band's smallest half-width, as a fraction of the peers' median:
    /// peers that agree to the last digit do not make a 0.5% dip a fault.
    pub min_gap: f64,
    /// Metric name patterns (`*` matches any run of characters) whose higher
    /// values are better: bandwidths, Gflop/s, message rates.
    pub higher_is_better: Vec<String>,
    /// Patterns of metrics whose lower values are better: times, latencies.
    pub lower_is_better: Vec<String>,
    /// Patterns of counts that must be 0 on every node (wrong results,
    /// faulty GPUs), whatever the fleet does.
    pub must_be_zero: Vec<String>,
    /// The site's static floors: they apply to every node of the SKU, and
    /// they are the only rule while the SKU has fewer than `min_results`.
    pub floor: Vec<FloorRule>,
    /// The selector's budget: at most this fraction of the fleet's
    /// node-hours per day goes to validation (0.02 = 2%).
    pub budget_fraction: f64,
    /// A node never validated counts as last validated this many days ago.
    pub never_validated_days: f64,
    /// `lemon run` learns the criteria, publishes them to the spool
    /// directory and submits validation jobs. Off by default: a site turns
    /// it on once its nodes run `healthcheck validate`.
    pub enabled: bool,
    /// The criteria are learned from the passed results of the last this
    /// many days, each node's latest only.
    pub window_days: u32,
    /// The validation job's name: how `lemon` finds its own jobs in
    /// `squeue` and `sacct`, and how the site sees them.
    pub job_name: String,
    /// `sbatch --partition`, when set.
    pub partition: Option<String>,
    /// `sbatch --qos`, when set.
    pub qos: Option<String>,
    /// `sbatch --reservation` for nodes picked by risk, when set. A node
    /// returning from repair uses its own `lemonade_validate_<node>`.
    pub reservation: Option<String>,
    /// The job's time limit, in minutes (`sbatch --time`), and what one
    /// validation is charged to the budget.
    pub time_limit_minutes: u32,
    /// The node-side program the job runs (`<path> validate`).
    pub healthcheck_path: std::path::PathBuf,
    /// A node first seen this many days ago or less, never validated,
    /// counts as new.
    pub new_node_days: u32,
    /// The metric the HTML report charts per SKU (its first learned metric
    /// where a SKU has no result of this one).
    pub report_metric: String,
    /// The suite `healthcheck validate` runs on a node. Empty: the default
    /// suite ([`default_suite`]), whose tools a node may lack; a missing
    /// tool is reported as not run, never as a pass.
    pub benchmark: Vec<Benchmark>,
    /// After a clean check following a repair's reboot, the node is resumed
    /// inside a reservation of ours and takes no user job until it passes
    /// validation. Default: on when `[[validate.benchmark]]` is configured.
    pub after_repair: Option<bool>,
    /// How long that reservation holds the node (minutes): the validation
    /// job must run within it; past it the node takes jobs again.
    pub reservation_minutes: u64,
    /// Who may run jobs in that reservation (`Users=`): the account lemon
    /// submits the validation job as.
    pub reservation_users: String,
    /// A criteria file (`validate-criteria.json` in the spool directory)
    /// older than this (hours) is ignored, and the run says so.
    pub criteria_max_age_hours: f64,
    /// The node's SKU, when the one computed from its GPU and HCA models
    /// (`validate::sku`, e.g. `H100x8+ConnectX-7x8`) does not suit: set it
    /// in a node's override to group nodes the names would split.
    pub sku: Option<String>,
}

/// `[[validate.benchmark]]`: one program of the suite and how to read it.
///
/// In `argv`, `{gpus}` stands for the node's GPU count and `{hca}` for the
/// HCA of a `per_hca` entry.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Benchmark {
    /// Its name in the output and the node database (`all_reduce`).
    pub name: String,
    /// The program and its arguments, never a shell string.
    pub argv: Vec<String>,
    /// The parser of its output: `nccl-tests`, `nvbandwidth`, `perftest`,
    /// `dcgmi-diag` or `gpu-burn`.
    pub parser: String,
    /// Killed (with everything it started) past this many seconds.
    pub timeout_s: u64,
    /// Environment set for it, on top of ours.
    pub env: std::collections::BTreeMap<String, String>,
    /// Appended to each metric's name after a dot, for a second benchmark
    /// with the same parser (`avg_busbw.all_gather`).
    pub suffix: Option<String>,
    /// Run once per RDMA device (`{hca}`), each metric's name ending in
    /// `.<hca>`.
    pub per_hca: bool,
    /// A server started before `argv` and waited for after it (perftest's
    /// loopback: `ib_write_bw -d {hca}` then `ib_write_bw -d {hca} localhost`).
    pub server_argv: Vec<String>,
}

/// The suite when none is configured: the tools GPU sites run.
pub fn default_suite() -> Vec<Benchmark> {
    let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect();
    let nccl = |program: &str| argv(&[program, "-b", "8", "-e", "8G", "-f", "2", "-g", "{gpus}"]);
    let bench = |name: &str, argv: Vec<String>, parser: &str, timeout_s| Benchmark {
        name: name.into(),
        argv,
        parser: parser.into(),
        timeout_s,
        ..Benchmark::default()
    };
    let perftest = ["ib_write_bw", "-d", "{hca}", "--report_gbits", "-F"];
    let mut client: Vec<String> = argv(&perftest);
    client.push("localhost".into());
    vec![
        bench(
            "dcgmi_diag",
            argv(&["dcgmi", "diag", "-r", "2", "-j"]),
            "dcgmi-diag",
            900,
        ),
        bench("all_reduce", nccl("all_reduce_perf"), "nccl-tests", 600),
        Benchmark {
            suffix: Some("all_gather".into()),
            ..bench("all_gather", nccl("all_gather_perf"), "nccl-tests", 600)
        },
        bench("nvbandwidth", argv(&["nvbandwidth"]), "nvbandwidth", 600),
        Benchmark {
            per_hca: true,
            server_argv: argv(&perftest),
            ..bench("ib_write_bw", client, "perftest", 120)
        },
        bench("gpu_burn", argv(&["gpu_burn", "60"]), "gpu-burn", 300),
    ]
}

/// `[[validate.floor]]`: a fixed bound on one metric, for one SKU or all.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct FloorRule {
    /// The metric name, exactly as the parsers name it (`avg_busbw`).
    pub metric: String,
    /// The SKU it applies to; absent: every SKU.
    pub sku: Option<String>,
    /// A value below this fails.
    pub min: Option<f64>,
    /// A value above this fails.
    pub max: Option<f64>,
}

impl Default for ValidateSettings {
    fn default() -> Self {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        Self {
            min_results: 8,
            spread_k: 4.0,
            min_gap: 0.02,
            // Names from the `validate` crate's parsers: nccl-tests, perftest,
            // gpu-burn, nvbandwidth (its test names end in `_ce`/`_sm`).
            higher_is_better: names(&[
                "avg_busbw",
                "avg_busbw.*",
                "busbw.*",
                "bw_peak.*",
                "bw_average.*",
                "msg_rate.*",
                "gflops.*",
                "*memcpy*",
                "*_bw*",
                "device_local_copy*",
            ]),
            lower_is_better: names(&["*latency*", "time.*", "*_time*"]),
            must_be_zero: names(&[
                "wrong_total",
                "wrong_total.*",
                "wrong.*",
                "out_of_bounds",
                "out_of_bounds.*",
                "tests_failed",
                "gpus_faulty",
                "faulty.*",
                "errors.*",
                "runtime_error",
                // SuperBench's `<benchmark>/return_code`: 0 when it ran.
                "return_code",
                "*/return_code",
                "*:return_code",
            ]),
            floor: Vec::new(),
            budget_fraction: 0.02,
            never_validated_days: 30.0,
            enabled: false,
            window_days: 30,
            job_name: "lemonade-validate".into(),
            partition: None,
            qos: None,
            reservation: None,
            time_limit_minutes: 120,
            healthcheck_path: "/usr/bin/healthcheck".into(),
            new_node_days: 7,
            report_metric: "avg_busbw".into(),
            benchmark: Vec::new(),
            after_repair: None,
            reservation_minutes: 240,
            reservation_users: "root".into(),
            criteria_max_age_hours: 48.0,
            sku: None,
        }
    }
}

impl ValidateSettings {
    /// The suite a node runs: the configured one, else [`default_suite`].
    pub fn suite(&self) -> Vec<Benchmark> {
        if self.benchmark.is_empty() {
            default_suite()
        } else {
            self.benchmark.clone()
        }
    }

    /// Whether a repaired node waits for validation before user jobs.
    pub fn gates_repair(&self) -> bool {
        self.after_repair.unwrap_or(!self.benchmark.is_empty())
    }

    /// The settings' own consistency, for `lemon` to refuse before judging.
    pub fn check(&self) -> Result<(), String> {
        self.check_criteria()?;
        self.check_job()?;
        self.check_node()
    }

    /// The criteria's and the budget's numbers.
    fn check_criteria(&self) -> Result<(), String> {
        if self.min_results < 2 {
            return Err(format!(
                "[validate] min_results = {}: at least 2 (a node and a peer)",
                self.min_results
            ));
        }
        if !(self.spread_k.is_finite() && self.spread_k > 0.0) {
            return Err(format!(
                "[validate] spread_k = {}: a positive number",
                self.spread_k
            ));
        }
        if !(self.min_gap.is_finite() && (0.0..1.0).contains(&self.min_gap)) {
            return Err(format!(
                "[validate] min_gap = {}: a fraction in [0, 1)",
                self.min_gap
            ));
        }
        if !(self.budget_fraction.is_finite() && (0.0..=1.0).contains(&self.budget_fraction)) {
            return Err(format!(
                "[validate] budget_fraction = {}: a fraction in [0, 1]",
                self.budget_fraction
            ));
        }
        if !(self.never_validated_days.is_finite() && self.never_validated_days >= 0.0) {
            return Err(format!(
                "[validate] never_validated_days = {}: not negative",
                self.never_validated_days
            ));
        }
        if !(self.criteria_max_age_hours.is_finite() && self.criteria_max_age_hours > 0.0) {
            return Err(format!(
                "[validate] criteria_max_age_hours = {}: a positive number",
                self.criteria_max_age_hours
            ));
        }
        for f in &self.floor {
            if f.metric.is_empty() || (f.min.is_none() && f.max.is_none()) {
                return Err(format!(
                    "[[validate.floor]] metric = {:?}: needs a metric and a min or max",
                    f.metric
                ));
            }
        }
        Ok(())
    }

    /// What `lemon run` puts on sbatch's command line.
    fn check_job(&self) -> Result<(), String> {
        if self.window_days == 0 || self.time_limit_minutes == 0 {
            return Err("[validate] window_days and time_limit_minutes: at least 1".into());
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let names = [
            Some(&self.job_name),
            self.partition.as_ref(),
            self.qos.as_ref(),
        ];
        for name in names.into_iter().flatten().chain(self.reservation.as_ref()) {
            if !plain(name) {
                return Err(format!(
                    "[validate] {name:?}: job name, partition, qos and reservation are letters, digits, - _ ."
                ));
            }
        }
        // The path goes into `sbatch --wrap`'s shell line: plain characters only.
        let path = self.healthcheck_path.to_string_lossy();
        let plain_path = path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        if !self.healthcheck_path.is_absolute() || !plain_path {
            return Err(format!(
                "[validate] healthcheck_path = {:?}: an absolute path of letters, digits, - _ . /",
                self.healthcheck_path
            ));
        }
        Ok(())
    }

    /// The node's side: its SKU, its suite and its reservation.
    fn check_node(&self) -> Result<(), String> {
        if let Some(sku) = &self.sku {
            if sku.is_empty() || sku.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!(
                    "[validate] sku = {sku:?}: one word, no blanks (it goes into drain reasons)"
                ));
            }
        }
        for b in &self.benchmark {
            if b.name.is_empty() || b.argv.is_empty() || b.parser.is_empty() || b.timeout_s == 0 {
                return Err(format!(
                    "[[validate.benchmark]] name = {:?}: needs a name, an argv, a parser and a \
                     timeout_s above 0",
                    b.name
                ));
            }
        }
        let users = &self.reservation_users;
        if users.is_empty() || users.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "[validate] reservation_users = {users:?}: Slurm user names, comma-separated"
            ));
        }
        if self.reservation_minutes == 0 {
            return Err("[validate] reservation_minutes = 0: at least 1".to_string());
        }
        Ok(())
    }
}

/// A metric name pattern of `[validate]`: `*` matches any run of
/// characters (none included); the rest literally.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl ValidateSettings {
    /// Whether `metric` is a count that must be 0 whatever the fleet does.
    pub fn is_must_be_zero(&self, metric: &str) -> bool {
        self.must_be_zero.iter().any(|p| glob_match(p, metric))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_validate_section_with_floors_reads_and_checks() {
        let text = r#"
            [validate]
            min_results = 10
            [[validate.floor]]
            metric = "avg_busbw"
            sku = "H100x8"
            min = 350.0
        "#;
        let cfg: crate::Config = toml::from_str(text).unwrap();
        assert_eq!(cfg.validate.min_results, 10);
        assert_eq!(cfg.validate.floor[0].min, Some(350.0));
        assert_eq!(cfg.validate.spread_k, 4.0);
        cfg.validate.check().unwrap();
    }

    #[test]
    fn a_configured_suite_replaces_the_defaults_and_gates_repairs() {
        let text = r#"
            [[validate.benchmark]]
            name = "all_reduce"
            argv = ["/opt/nccl-tests/all_reduce_perf", "-g", "{gpus}"]
            parser = "nccl-tests"
            timeout_s = 300
            env = { NCCL_DEBUG = "WARN" }
        "#;
        let cfg: crate::Config = toml::from_str(text).unwrap();
        cfg.validate.check().unwrap();
        assert_eq!(cfg.validate.suite().len(), 1);
        assert!(cfg.validate.gates_repair());
        let none = super::ValidateSettings::default();
        assert!(
            !none.gates_repair(),
            "the default suite does not gate repairs"
        );
        let names: Vec<String> = none.suite().into_iter().map(|b| b.name).collect();
        assert_eq!(
            names,
            [
                "dcgmi_diag",
                "all_reduce",
                "all_gather",
                "nvbandwidth",
                "ib_write_bw",
                "gpu_burn"
            ]
        );
        let bad: crate::Config =
            toml::from_str("[[validate.benchmark]]\nname = \"x\"\nargv = []\n").unwrap();
        assert!(bad
            .validate
            .check()
            .unwrap_err()
            .contains("needs a name, an argv"));
    }

    #[test]
    fn a_sku_override_reads_and_one_with_a_blank_is_refused() {
        let cfg: crate::Config = toml::from_str("[validate]\nsku = \"H100x8\"\n").unwrap();
        assert_eq!(cfg.validate.sku.as_deref(), Some("H100x8"));
        cfg.validate.check().unwrap();
        let cfg: crate::Config = toml::from_str("[validate]\nsku = \"H100 x8\"\n").unwrap();
        assert!(cfg.validate.check().unwrap_err().contains("no blanks"));
    }

    #[test]
    fn a_floor_without_bounds_and_an_unknown_key_are_refused() {
        let cfg: crate::Config =
            toml::from_str("[[validate.floor]]\nmetric = \"avg_busbw\"\n").unwrap();
        assert!(cfg.validate.check().unwrap_err().contains("min or max"));
        assert!(toml::from_str::<crate::Config>("[validate]\nmin_gap_pct = 2\n").is_err());
    }

    #[test]
    fn names_and_the_path_that_reach_sbatch_must_be_plain_words() {
        let check = |text: &str| {
            let cfg: crate::Config = toml::from_str(text).unwrap();
            cfg.validate.check()
        };
        check("[validate]\nenabled = true\npartition = \"gpu\"\nqos = \"maint\"\n").unwrap();
        assert!(check("[validate]\npartition = \"gpu; rm -rf /\"\n").is_err());
        assert!(check("[validate]\njob_name = \"\"\n").is_err());
        let err = check("[validate]\nhealthcheck_path = \"/usr/bin/hc $(id)\"\n").unwrap_err();
        assert!(err.contains("healthcheck_path"), "{err}");
        assert!(check("[validate]\nhealthcheck_path = \"healthcheck\"\n").is_err());
    }
}
