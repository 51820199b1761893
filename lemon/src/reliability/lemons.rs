//! The lemon section: the current lemon list and each signal's distribution
//! over the fleet (a CDF, as the paper's Figure 11) with its threshold.

use super::{LemonEntry, SignalValues};
use crate::stats::quantile_sorted;
use serde::Serialize;

/// One signal over the fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalDistribution {
    pub name: String,
    pub threshold: Option<f64>,
    pub nodes: u64,
    /// Nodes at or above the threshold.
    pub at_or_above_threshold: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// The values, ascending: the CDF's steps.
    pub sorted_values: Vec<f64>,
}

/// The lemon section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LemonSection {
    pub lemons: Vec<LemonEntry>,
    pub signals: Vec<SignalDistribution>,
}

/// Builds the lemon section.
pub fn lemon_section(lemons: &[LemonEntry], signals: &[SignalValues]) -> LemonSection {
    let signals = signals
        .iter()
        .map(|s| {
            let mut v: Vec<f64> = s.values.iter().copied().filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            SignalDistribution {
                name: s.name.clone(),
                threshold: s.threshold,
                nodes: v.len() as u64,
                at_or_above_threshold: s
                    .threshold
                    .map_or(0, |t| v.iter().filter(|&&x| x >= t).count() as u64),
                p50: quantile_sorted(&v, 0.5),
                p90: quantile_sorted(&v, 0.9),
                p99: quantile_sorted(&v, 0.99),
                max: v.last().copied().unwrap_or(0.0),
                sorted_values: v,
            }
        })
        .collect();
    LemonSection {
        lemons: lemons.to_vec(),
        signals,
    }
}
