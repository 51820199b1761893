//! One metric sample, as a replay file's row or a live sampler gives it.

/// One value of one metric of one node of one job at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'a> {
    /// Unix seconds, by the node's own clock.
    pub time: i64,
    /// The Slurm job id, as written (`4419021_7` for an array task).
    pub job: &'a str,
    /// The Slurm node name.
    pub node: &'a str,
    /// The metric name (`gpu_util`, `ib_tx`, ... or any other).
    pub metric: &'a str,
    /// The value; NaN and infinities are skipped and counted, never compared.
    pub value: f64,
}
