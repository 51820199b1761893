//! The parsers' common result: named metrics with units.

use serde::Serialize;

/// One number a benchmark printed, e.g. `busbw.out_of_place.1073741824` =
/// 358.38 `GB/s`. `detail` carries text that goes with it: a failing test's
/// warning, a status word.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The metrics of one output, in the order the tool printed them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub metrics: Vec<Metric>,
}

impl Metrics {
    pub fn push(&mut self, name: impl Into<String>, value: f64, unit: &str) {
        self.metrics.push(Metric {
            name: name.into(),
            value,
            unit: unit.to_string(),
            detail: None,
        });
    }

    pub fn push_detail(&mut self, name: impl Into<String>, value: f64, unit: &str, detail: String) {
        self.metrics.push(Metric {
            name: name.into(),
            value,
            unit: unit.to_string(),
            detail: Some(detail),
        });
    }

    /// The metric of that name, if the output had it.
    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|metric| metric.name == name)
    }

    /// The value of the metric of that name.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.get(name).map(|metric| metric.value)
    }

    pub fn len(&self) -> usize {
        self.metrics.len()
    }

    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }
}
