//! Per-metric rules from `[watch]`: how much a metric weighs and which way
//! it moves when a machine is at fault (metric priority).

use lemonade_config::WatchSettings;

/// Which deviation from the peers counts as a fault sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Throughput and activity: a faulty machine does less (`gpu_util`, `ib_tx`).
    Falls,
    /// Congestion counters: a faulty machine's rise (`pfc_pause`, `cnp`).
    Rises,
    /// Metrics the config does not name: either way.
    Either,
}

/// The rule of one metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRule {
    pub weight: f64,
    pub direction: Direction,
    /// Place in the priority order (lower is more sensitive); unknown metrics
    /// come after every named one.
    pub rank: usize,
    /// The shared network moves it too (`[watch] fabric`).
    pub fabric: bool,
}

impl MetricRule {
    /// The rule for `name` under `settings`.
    pub fn of(name: &str, settings: &WatchSettings) -> Self {
        let named = |list: &[String]| list.iter().position(|m| m == name);
        let direction = if named(&settings.rising).is_some() {
            Direction::Rises
        } else if named(&settings.primary).is_some() || named(&settings.secondary).is_some() {
            Direction::Falls
        } else {
            Direction::Either
        };
        let (weight, rank) = match (named(&settings.primary), named(&settings.secondary)) {
            (Some(rank), _) => (1.0, rank),
            (None, Some(rank)) => (settings.secondary_weight, settings.primary.len() + rank),
            (None, None) => (settings.secondary_weight, usize::MAX),
        };
        Self {
            weight,
            direction,
            rank,
            fabric: named(&settings.fabric).is_some(),
        }
    }

    /// Whether a fall of this metric is the node's own work falling: a
    /// primary metric that falls with a fault and that the network does not move.
    pub fn own_work(&self) -> bool {
        self.weight >= 1.0 && self.direction == Direction::Falls && !self.fabric
    }

    /// The deviation `z` (node minus peers, in robust deviations) as evidence
    /// of a fault: positive when it points the faulty way.
    pub fn alarm(&self, z: f64) -> f64 {
        match self.direction {
            Direction::Falls => -z,
            Direction::Rises => z,
            Direction::Either => z.abs(),
        }
    }

    /// The deviation `z` as weighed evidence: its alarm times the metric's
    /// weight, or 0 when the alarm is below `evidence_z` (noise).
    pub fn evidence(&self, z: f64, evidence_z: f64) -> f64 {
        let alarm = self.alarm(z);
        if alarm >= evidence_z {
            self.weight * alarm
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_counters_alarm_on_a_rise_and_utilisation_on_a_fall() {
        let s = WatchSettings::default();
        assert!(MetricRule::of("pfc_pause", &s).alarm(5.0) > 0.0);
        assert!(MetricRule::of("gpu_util", &s).alarm(5.0) < 0.0);
        assert!(MetricRule::of("gpu_util", &s).alarm(-5.0) > 0.0);
    }

    #[test]
    fn an_unknown_metric_counts_either_way_at_the_secondary_weight() {
        let s = WatchSettings::default();
        let rule = MetricRule::of("fan_rpm", &s);
        assert_eq!(rule.direction, Direction::Either);
        assert_eq!(rule.weight, s.secondary_weight);
        assert!(rule.rank > MetricRule::of("disk_io", &s).rank);
    }
}
