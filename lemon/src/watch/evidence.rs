//! What a detection is recorded with: per metric that made the call, the
//! node's latest value and its peers' median, so that `lemon report` and an
//! administrator see why without the metrics server.

use serde::Serialize;
use std::collections::HashMap;

/// The latest value of each (metric, node) of one job.
#[derive(Debug, Default)]
pub struct Latest {
    values: HashMap<String, HashMap<String, f64>>,
}

/// One metric's evidence.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricEvidence {
    pub metric: String,
    pub node_value: Option<f64>,
    pub peers_median: Option<f64>,
    pub peers: usize,
}

impl Latest {
    pub fn note(&mut self, metric: &str, node: &str, value: f64) {
        if !value.is_finite() {
            return;
        }
        let nodes = match self.values.get_mut(metric) {
            Some(n) => n,
            None => self.values.entry(metric.to_string()).or_default(),
        };
        match nodes.get_mut(node) {
            Some(v) => *v = value,
            None => {
                nodes.insert(node.to_string(), value);
            }
        }
    }

    /// The evidence of `node` for each of `metrics`.
    pub fn evidence(&self, node: &str, metrics: &[String]) -> Vec<MetricEvidence> {
        metrics
            .iter()
            .map(|metric| {
                let nodes = self.values.get(metric);
                let mut peers: Vec<f64> = nodes
                    .map(|n| {
                        n.iter()
                            .filter(|(name, _)| name.as_str() != node)
                            .map(|(_, v)| *v)
                            .collect()
                    })
                    .unwrap_or_default();
                peers.sort_by(f64::total_cmp);
                MetricEvidence {
                    metric: metric.clone(),
                    node_value: nodes.and_then(|n| n.get(node)).copied(),
                    peers_median: median(&peers),
                    peers: peers.len(),
                }
            })
            .collect()
    }
}

fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_sets_the_node_against_the_median_of_its_peers() {
        let mut latest = Latest::default();
        for (node, v) in [("a", 95.0), ("b", 5.0), ("c", 97.0), ("d", 93.0)] {
            latest.note("gpu_util", node, 1.0);
            latest.note("gpu_util", node, v);
        }
        latest.note("gpu_util", "a", f64::NAN);
        let e = latest.evidence("b", &["gpu_util".into(), "ib_tx".into()]);
        assert_eq!(e[0].node_value, Some(5.0));
        assert_eq!(e[0].peers_median, Some(95.0));
        assert_eq!(e[0].peers, 3);
        assert_eq!((e[1].node_value, e[1].peers_median), (None, None));
    }
}
