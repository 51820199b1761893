//! The Prometheus source: `/api/v1/query_range`, one query per vocabulary
//! metric per poll for every watched node at once, each
//! `AGG by (LABEL) (SELECTOR{LABEL=~"nodes"})` (or the `rate()` of a
//! counter), mapped back to Slurm node names by [`node_of`].
//!
//! The answer is hostile input like any other: its size is capped, the
//! request has a deadline, and a series whose host is not one of the job's
//! nodes is ignored.

use super::{OwnedSample, SampleSource, SourceError};
use lemonade_config::{PrometheusMetric, PrometheusSettings};
use lemonade_slurm::squeue::RunningJob;
use serde::Deserialize;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::time::Duration;

/// The largest answer read, in bytes (100 jobs × 64 nodes × 11 metrics ×
/// 90 points is about 40 MB of JSON).
pub const MAX_ANSWER_BYTES: u64 = 256 << 20;

/// A Prometheus server and the mapping to the detector's vocabulary.
pub struct PrometheusSource {
    base: String,
    settings: PrometheusSettings,
    step_s: i64,
    agent: ureq::Agent,
    /// The samples of the poll in hand, by node, from [`SampleSource::prepare`].
    prepared: RefCell<Option<HashMap<String, Vec<OwnedSample>>>>,
}

impl PrometheusSource {
    /// `url` is the server's root (`http://prom:9090`); `step_s` the
    /// detector's `interval_s`. A bad selector is an error naming it.
    pub fn new(url: &str, settings: &PrometheusSettings, step_s: i64) -> Result<Self, String> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "[watch] prometheus_url `{url}`: not an http:// URL"
            ));
        }
        if url.starts_with("https://") {
            return Err(format!(
                "[watch] prometheus_url `{url}`: https is not built in; use http:// on the site network"
            ));
        }
        for m in &settings.metrics {
            check_metric(m).map_err(|why| {
                format!("[[watch.prometheus.metrics]] name = \"{}\": {why}", m.name)
            })?;
        }
        let timeout = Duration::from_secs_f64(settings.timeout_s.clamp(0.1, 300.0));
        Ok(Self {
            base: url.trim_end_matches('/').to_string(),
            settings: settings.clone(),
            step_s: step_s.max(1),
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
            prepared: RefCell::new(None),
        })
    }

    /// Every metric of `nodes` from `since` (exclusive) to `now - delay_s`.
    pub fn fetch(
        &self,
        nodes: &BTreeSet<&str>,
        since: i64,
        now: i64,
    ) -> Result<Vec<OwnedSample>, SourceError> {
        let start = (since.div_euclid(self.step_s) + 1) * self.step_s;
        let end = now - self.settings.delay_s.max(0);
        let names: Vec<&str> = nodes.iter().copied().filter(|n| plain_name(n)).collect();
        if end < start || names.is_empty() {
            return Ok(Vec::new());
        }
        let mut samples = Vec::new();
        for m in &self.settings.metrics {
            let query = query_of(m, &names, self.settings.rate_window_s);
            let text = self.query_range(&query, start, end)?;
            parse_matrix(&text, m, &self.settings, &mut samples).map_err(|why| {
                SourceError::BadAnswer {
                    what: format!("Prometheus ({})", m.name),
                    why,
                }
            })?;
        }
        samples.retain(|s| nodes.contains(s.node.as_str()));
        Ok(samples)
    }

    /// One POST (a long node matcher does not fit in a URL) under the deadline.
    fn query_range(&self, query: &str, start: i64, end: i64) -> Result<String, SourceError> {
        let url = format!("{}/api/v1/query_range", self.base);
        let unreachable = |why: String| SourceError::Unreachable {
            what: format!("Prometheus at {}", self.base),
            why,
        };
        let (start, end, step) = (start.to_string(), end.to_string(), self.step_s.to_string());
        let form = [
            ("query", query),
            ("start", &start),
            ("end", &end),
            ("step", &step),
        ];
        let response = match self.agent.post(&url).send_form(&form) {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let body = read_capped(r.into_reader(), 4096).unwrap_or_default();
                return Err(unreachable(format!("HTTP {code}: {}", body.trim())));
            }
            Err(e) => return Err(unreachable(e.to_string())),
        };
        read_capped(response.into_reader(), MAX_ANSWER_BYTES).map_err(unreachable)
    }
}

impl SampleSource for PrometheusSource {
    fn prepare(&self, jobs: &[RunningJob], since: i64, now: i64) -> Result<(), SourceError> {
        self.prepared.replace(None);
        let nodes: BTreeSet<&str> = jobs
            .iter()
            .flat_map(|j| j.nodes.iter().map(String::as_str))
            .collect();
        let mut by_node: HashMap<String, Vec<OwnedSample>> = HashMap::new();
        for s in self.fetch(&nodes, since, now)? {
            by_node.entry(s.node.clone()).or_default().push(s);
        }
        self.prepared.replace(Some(by_node));
        Ok(())
    }

    fn recent(&self, job: &RunningJob, since: i64) -> Result<Vec<OwnedSample>, SourceError> {
        let prepared = self.prepared.borrow();
        let Some(by_node) = prepared.as_ref() else {
            let nodes = job.nodes.iter().map(String::as_str).collect();
            return self.fetch(&nodes, since, chrono::Utc::now().timestamp());
        };
        Ok(job
            .nodes
            .iter()
            .filter_map(|n| by_node.get(n))
            .flatten()
            .filter(|s| s.time > since)
            .cloned()
            .collect())
    }
}

/// Reads at most `cap` bytes; more is an error, never a truncated parse.
fn read_capped(reader: impl Read, cap: u64) -> Result<String, String> {
    let mut text = String::new();
    reader
        .take(cap + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the answer: {e}"))?;
    if text.len() as u64 > cap {
        return Err(format!("answer longer than {cap} bytes"));
    }
    Ok(text)
}

/// Node names that can go into a regex matcher unescaped but for `.`.
fn plain_name(node: &str) -> bool {
    !node.is_empty()
        && node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A selector is a metric name with optional matchers in braces, and a
/// label and aggregation are plain words: nothing that could carry more PromQL.
fn check_metric(m: &PrometheusMetric) -> Result<(), String> {
    let name_end = m.selector.find('{').unwrap_or(m.selector.len());
    let (name, rest) = m.selector.split_at(name_end);
    let word = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    if !word(name) {
        return Err(format!("selector `{}`: not a metric name", m.selector));
    }
    // One pair of braces, nothing inside them that could close and reopen a selector.
    let matchers = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .filter(|inner| !inner.contains(['{', '}']));
    if !rest.is_empty() && matchers.is_none() {
        return Err(format!(
            "selector `{}`: only `name{{matchers}}`",
            m.selector
        ));
    }
    if !word(&m.label) || m.label.contains(':') {
        return Err(format!("label `{}`: not a label name", m.label));
    }
    if !matches!(m.aggregate.as_str(), "avg" | "min" | "max" | "sum") {
        return Err(format!("aggregate `{}`: avg, min, max or sum", m.aggregate));
    }
    Ok(())
}

/// The PromQL of `m` over `nodes`: the host label must be one of the nodes,
/// with any port or domain after it.
pub fn query_of(m: &PrometheusMetric, nodes: &[&str], rate_window_s: i64) -> String {
    let alternatives: Vec<String> = nodes.iter().map(|n| n.replace('.', "\\\\.")).collect();
    let matcher = format!("{}=~\"(?:{})(?:[:.].*)?\"", m.label, alternatives.join("|"));
    let selector = match m.selector.strip_suffix('}') {
        Some(open) if open.ends_with('{') => format!("{open}{matcher}}}"),
        Some(open) => format!("{open},{matcher}}}"),
        None => format!("{}{{{matcher}}}", m.selector),
    };
    let inner = if m.rate {
        format!("rate({selector}[{}s])", rate_window_s.max(1))
    } else {
        selector
    };
    format!("{} by ({}) ({inner})", m.aggregate, m.label)
}

/// The Slurm node name of a host label value (`gpu001.example:9400` → `gpu001`).
pub fn node_of<'a>(value: &'a str, settings: &PrometheusSettings) -> &'a str {
    let mut name = value;
    if settings.strip_port {
        name = name.split(':').next().unwrap_or(name);
    }
    if settings.strip_domain {
        name = name.split('.').next().unwrap_or(name);
    }
    name
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Matrix>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Matrix {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: HashMap<String, String>,
    values: Vec<(f64, String)>,
}

/// Appends the samples of one `query_range` answer for metric `m`.
pub fn parse_matrix(
    text: &str,
    m: &PrometheusMetric,
    settings: &PrometheusSettings,
    out: &mut Vec<OwnedSample>,
) -> Result<(), String> {
    let answer: Answer = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if answer.status != "success" {
        return Err(answer.error.unwrap_or(answer.status));
    }
    let data = answer.data.ok_or("no data")?;
    if data.result_type != "matrix" {
        return Err(format!("result type {}, expected matrix", data.result_type));
    }
    for series in data.result {
        let Some(host) = series.metric.get(&m.label) else {
            continue;
        };
        let node = node_of(host, settings);
        for (time, value) in series.values {
            out.push(OwnedSample {
                time: time as i64,
                node: node.to_string(),
                metric: m.name.clone(),
                // "NaN", "+Inf": the detector skips them and counts them.
                value: value.parse().unwrap_or(f64::NAN),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(selector: &str, label: &str, rate: bool) -> PrometheusMetric {
        PrometheusMetric {
            name: "x".into(),
            selector: selector.into(),
            label: label.into(),
            aggregate: "sum".into(),
            rate,
        }
    }

    #[test]
    fn a_query_puts_the_node_matcher_inside_the_selector_braces() {
        let q = query_of(
            &metric("DCGM_FI_DEV_GPU_UTIL", "Hostname", false),
            &["a", "b.c"],
            60,
        );
        assert_eq!(
            q,
            r#"sum by (Hostname) (DCGM_FI_DEV_GPU_UTIL{Hostname=~"(?:a|b\\.c)(?:[:.].*)?"})"#
        );
        let q = query_of(
            &metric("node_cpu_seconds_total{mode!=\"idle\"}", "instance", true),
            &["a"],
            30,
        );
        assert_eq!(
            q,
            r#"sum by (instance) (rate(node_cpu_seconds_total{mode!="idle",instance=~"(?:a)(?:[:.].*)?"}[30s]))"#
        );
    }

    #[test]
    fn selectors_labels_and_aggregates_that_could_carry_promql_are_refused() {
        for (selector, label) in [
            ("up or vector(1)", "instance"),
            ("up{a=\"b\"} + 1", "instance"),
            ("up{a=\"b\"} or vector(1) + up{c=\"d\"}", "instance"),
            ("up", "instance) (x"),
        ] {
            assert!(
                check_metric(&metric(selector, label, false)).is_err(),
                "{selector} {label}"
            );
        }
        assert!(check_metric(&metric("up{job=\"dcgm\"}", "Hostname", false)).is_ok());
    }

    #[test]
    fn host_labels_map_to_node_names_and_odd_answers_are_errors() {
        let settings = PrometheusSettings::default();
        assert_eq!(node_of("gpu001.cluster.example:9400", &settings), "gpu001");
        assert_eq!(node_of("gpu001", &settings), "gpu001");
        let m = metric("DCGM_FI_DEV_GPU_UTIL", "Hostname", false);
        let mut out = Vec::new();
        let text = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"Hostname":"n1:9400"},"values":[[1700000000,"95"],[1700000001,"NaN"]]},
            {"metric":{},"values":[[1700000000,"1"]]}]}}"#;
        parse_matrix(text, &m, &settings, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].node.as_str(), out[0].time, out[0].value),
            ("n1", 1_700_000_000, 95.0)
        );
        assert!(out[1].value.is_nan());
        let err = parse_matrix(
            r#"{"status":"error","error":"bad query"}"#,
            &m,
            &settings,
            &mut out,
        );
        assert_eq!(err.unwrap_err(), "bad query");
        assert!(parse_matrix("<html>", &m, &settings, &mut out).is_err());
    }
}
