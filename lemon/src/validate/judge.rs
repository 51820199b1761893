//! `lemon validate judge --results FILE`: replays a fleet's past validation
//! results. Each node's latest value of each metric is judged against the
//! criteria learned from the same file, every node against the others of
//! its SKU ([`super::criteria`]).
//!
//! The file is CSV with the header `node,sku,time,metric,value`; `time` is
//! unix seconds or `YYYY-MM-DDTHH:MM:SS` UTC, or SuperBench's results
//! summary ([`parse_superbench`]). A bad row stops the judging with its
//! line named: a verdict over a half-read file would be wrong.

use super::criteria::{self, Failure};
use crate::error::{LemonError, Result};
use crate::input_file::read_plain;
use lemonade_config::ValidateSettings;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The largest results file read: about 1.5 million rows of
/// `node,sku,time,metric,value`, a year of daily validations of a
/// 4000-node fleet's headline metrics.
pub const MAX_RESULTS_BYTES: u64 = 64 * 1024 * 1024;

/// The header the file must start with.
pub const HEADER: &str = "node,sku,time,metric,value";

/// One row of the results file.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub node: String,
    pub sku: String,
    pub time: i64,
    pub metric: String,
    pub value: f64,
}

/// A SKU's metric with too few results to learn a band from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BelowMin {
    pub sku: String,
    pub metric: String,
    pub results: usize,
    pub needed: usize,
    /// Whether a static floor judged it; if not, nothing did.
    pub static_floor: bool,
}

/// A node without a metric that other nodes of its SKU have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub node: String,
    pub sku: String,
    pub metrics: Vec<String>,
}

/// Everything a judging found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub nodes: usize,
    pub skus: usize,
    pub results: usize,
    /// Failures, grouped by node in name order, with the node's SKU.
    pub failing: Vec<NodeFailures>,
    pub below_min: Vec<BelowMin>,
    /// Metrics no direction pattern or word names: judged on both sides.
    pub no_direction: Vec<String>,
    pub missing: Vec<Missing>,
}

/// One failing node's failures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeFailures {
    pub node: String,
    pub sku: String,
    pub failures: Vec<Failure>,
}

impl Judgement {
    /// Whether some node fails (exit code 1).
    pub fn any_failing(&self) -> bool {
        !self.failing.is_empty()
    }

    /// Whether something was judged by nothing at all: a SKU's metric with
    /// too few results and no static floor, or a node without a result its
    /// peers have (a benchmark that did not run or print). No verdict is no
    /// pass.
    pub fn any_unjudged(&self) -> bool {
        self.below_min.iter().any(|b| !b.static_floor) || !self.missing.is_empty()
    }
}

/// Reads and judges `path`.
pub fn judge_file(path: &Path, settings: &ValidateSettings) -> Result<Judgement> {
    settings
        .check()
        .map_err(|e| LemonError::Usage(format!("config: {e}")))?;
    let bytes = read_plain(path, MAX_RESULTS_BYTES, "a CSV file of results")?;
    let superbench = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let rows = if superbench {
        let dir_node = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        parse_superbench(&bytes, dir_node)
    } else {
        parse(&bytes)
    }
    .map_err(|e| LemonError::Usage(format!("{}:{e}", path.display())))?;
    Ok(judge(&rows, settings))
}

/// The SKU the rows of a SuperBench file are judged under when a line
/// names none: SuperBench runs one fleet of one kind of node.
pub const SUPERBENCH_SKU: &str = "superbench";

/// The rows of SuperBench's results summary: `results-summary.jsonl`
/// (`sb run` writes it to its output directory, one JSON object per node
/// per line) or one node's `nodes/<node>/results-summary.json`. Each
/// object maps `benchmark/metric` names to numbers; its `node` string
/// names the node, else (a file of one object) `dir_node`, the name of the
/// directory the file is in. An optional `sku` string groups the nodes;
/// without it every node is of [`SUPERBENCH_SKU`]. A value that is not a
/// finite number stops the reading with its line and metric named, as a
/// bad CSV row does: the assumptions are in
/// `lemon/tests/fixtures/superbench/SOURCE.md`.
pub fn parse_superbench(
    bytes: &[u8],
    dir_node: Option<&str>,
) -> std::result::Result<Vec<Row>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("1: not UTF-8: {e}"))?;
    let objects = superbench_objects(text)?;
    let single = objects.len() == 1;
    let mut rows = Vec::new();
    for (line, object) in objects {
        let text_of = |key: &str| match object.get(key) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => {
                Ok(Some(s.trim().to_string()))
            }
            Some(_) => Err(format!("{line}: `{key}` is not a name")),
        };
        let node = match (text_of("node")?, dir_node.filter(|_| single)) {
            (Some(n), _) => n,
            (None, Some(d)) => d.to_string(),
            (None, None) => return Err(format!("{line}: no `node` names the node")),
        };
        let sku = text_of("sku")?.unwrap_or_else(|| SUPERBENCH_SKU.to_string());
        for (metric, value) in &object {
            if metric == "node" || metric == "sku" {
                continue;
            }
            let value = value
                .as_f64()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{line}: {metric}: {value} is not a finite number"))?;
            rows.push(Row {
                node: node.clone(),
                sku: sku.clone(),
                time: 0,
                metric: metric.clone(),
                value,
            });
        }
    }
    if rows.is_empty() {
        return Err("1: no results in the SuperBench summary".into());
    }
    Ok(rows)
}

type JsonObject = serde_json::Map<String, serde_json::Value>;

/// The objects of a JSON Lines file, or of a file holding one object
/// (pretty-printed over many lines), each with its first line.
fn superbench_objects(text: &str) -> std::result::Result<Vec<(usize, JsonObject)>, String> {
    if let Ok(serde_json::Value::Object(one)) = serde_json::from_str(text) {
        return Ok(vec![(1, one)]);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(serde_json::Value::Object(o)) => out.push((i + 1, o)),
            Ok(_) => return Err(format!("{}: not a JSON object", i + 1)),
            Err(e) => return Err(format!("{}: not JSON: {e}", i + 1)),
        }
    }
    Ok(out)
}

/// The rows of a results file; an error is `LINE: why`.
pub fn parse(bytes: &[u8]) -> std::result::Result<Vec<Row>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rows = Vec::new();
    let mut saw_header = false;
    for (i, record) in reader.records().enumerate() {
        let line = match &record {
            Ok(r) => r.position(),
            Err(e) => e.position(),
        }
        .map_or(i as u64 + 1, csv::Position::line);
        let record = record.map_err(|e| format!("{line}: not CSV: {e}"))?;
        if i == 0 {
            let header: Vec<&str> = record.iter().map(str::trim).collect();
            if header.join(",") != HEADER {
                return Err(format!("{line}: expected the header `{HEADER}`"));
            }
            saw_header = true;
            continue;
        }
        rows.push(row(&record).map_err(|why| format!("{line}: {why}"))?);
    }
    if !saw_header {
        return Err(format!("1: empty file; expected the header `{HEADER}`"));
    }
    Ok(rows)
}

fn row(f: &csv::StringRecord) -> std::result::Result<Row, String> {
    if f.len() != 5 {
        return Err(format!("{} fields; expected 5: {HEADER}", f.len()));
    }
    let field = |i: usize, name: &str| {
        let v = f[i].trim();
        if v.is_empty() {
            Err(format!("{name} is empty"))
        } else {
            Ok(v.to_string())
        }
    };
    let time = match crate::db::parse_time(&f[2]) {
        Ok(Some(t)) => t,
        Ok(None) => return Err("time is empty".into()),
        Err(e) => return Err(format!("time: {e}")),
    };
    let raw = f[4].trim();
    let value: f64 = raw
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("value {raw:?} is not a finite number"))?;
    Ok(Row {
        node: field(0, "node")?,
        sku: field(1, "sku")?,
        time,
        metric: field(3, "metric")?,
        value,
    })
}

/// Each node's latest value per metric: `(sku, metric) -> node -> value`.
/// A later row of the same time wins (the file's order).
type Latest = BTreeMap<(String, String), BTreeMap<String, f64>>;

fn latest(rows: &[Row]) -> Latest {
    let mut newest: BTreeMap<(&str, &str), &Row> = BTreeMap::new();
    for r in rows {
        let slot = newest.entry((&r.node, &r.metric)).or_insert(r);
        if r.time >= slot.time {
            *slot = r;
        }
    }
    let mut out = Latest::new();
    for r in newest.values() {
        out.entry((r.sku.clone(), r.metric.clone()))
            .or_default()
            .insert(r.node.clone(), r.value);
    }
    out
}

/// Judges `rows`: every node's latest results against the others'.
pub fn judge(rows: &[Row], settings: &ValidateSettings) -> Judgement {
    let groups = latest(rows);
    let mut failing: BTreeMap<(String, String), Vec<Failure>> = BTreeMap::new();
    let mut below_min = Vec::new();
    let mut no_direction = BTreeSet::new();
    for ((sku, metric), nodes) in &groups {
        if criteria::direction(settings, metric).is_none() {
            no_direction.insert(metric.clone());
        }
        let results: Vec<(String, f64)> = nodes.iter().map(|(n, v)| (n.clone(), *v)).collect();
        let outcome = criteria::judge_group(settings, sku, metric, &results);
        if let Some((results, static_floor)) = outcome.below_min {
            below_min.push(BelowMin {
                sku: sku.clone(),
                metric: metric.clone(),
                results,
                needed: settings.min_results,
                static_floor,
            });
        }
        for f in outcome.failures {
            failing
                .entry((f.node.clone(), sku.clone()))
                .or_default()
                .push(f);
        }
    }
    let nodes: BTreeSet<&str> = rows.iter().map(|r| r.node.as_str()).collect();
    let skus: BTreeSet<&str> = rows.iter().map(|r| r.sku.as_str()).collect();
    Judgement {
        nodes: nodes.len(),
        skus: skus.len(),
        results: rows.len(),
        failing: (failing.into_iter())
            .map(|((node, sku), failures)| NodeFailures {
                node,
                sku,
                failures,
            })
            .collect(),
        below_min,
        no_direction: no_direction.into_iter().collect(),
        missing: missing(&groups),
    }
}

/// Nodes lacking a metric that at least one other node of their SKU has:
/// a benchmark that did not run or print is no pass, so the operator sees it.
fn missing(groups: &Latest) -> Vec<Missing> {
    let mut per_sku: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for ((sku, metric), nodes) in groups {
        let metrics = per_sku.entry(sku).or_default();
        for node in nodes.keys() {
            metrics.entry(node).or_default().insert(metric);
        }
    }
    let mut out = Vec::new();
    for (sku, nodes) in per_sku {
        let all: BTreeSet<&str> = nodes.values().flatten().copied().collect();
        for (node, has) in nodes {
            let lacks: Vec<String> = all.difference(&has).map(|m| m.to_string()).collect();
            if !lacks.is_empty() {
                out.push(Missing {
                    node: node.to_string(),
                    sku: sku.to_string(),
                    metrics: lacks,
                });
            }
        }
    }
    out
}

/// The judgement as text (a line per failure, then notes) or JSON.
pub fn render(j: &Judgement, json: bool) -> String {
    if json {
        return serde_json::to_string_pretty(j).expect("plain data serialises") + "\n";
    }
    let mut out = format!(
        "{} of {} nodes fail ({} SKUs, {} results)\n",
        j.failing.len(),
        j.nodes,
        j.skus,
        j.results
    );
    for n in &j.failing {
        for f in &n.failures {
            out += &format!(
                "{} ({}): {} {}, band {} [{}: {}]\n",
                n.node,
                n.sku,
                f.metric,
                criteria::short(f.value),
                band_text(&f.band),
                f.band.rule.name(),
                f.band.detail
            );
        }
    }
    for b in &j.below_min {
        let rule = if b.static_floor {
            "static floor"
        } else {
            "not judged (no static floor)"
        };
        out += &format!(
            "note: {} {}: {rule}: {} results of {} needed\n",
            b.sku, b.metric, b.results, b.needed
        );
    }
    for m in &j.missing {
        out += &format!(
            "note: {} ({}): no result for {}\n",
            m.node,
            m.sku,
            m.metrics.join(", ")
        );
    }
    if !j.no_direction.is_empty() {
        out += &format!(
            "note: no direction known (set one in [validate]), judged on both sides: {}\n",
            j.no_direction.join(", ")
        );
    }
    if j.any_unjudged() {
        out += "NOT JUDGED: a metric with neither enough results nor a static floor, or a \
                node without a result (notes above): no verdict is no pass\n";
    }
    out
}

fn band_text(band: &criteria::Band) -> String {
    match (band.min, band.max) {
        (Some(lo), Some(hi)) if lo == hi => format!("= {}", criteria::short(lo)),
        (Some(lo), Some(hi)) => format!("[{}, {}]", criteria::short(lo), criteria::short(hi)),
        (Some(lo), None) => format!(">= {}", criteria::short(lo)),
        (None, Some(hi)) => format!("<= {}", criteria::short(hi)),
        (None, None) => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).unwrap_err()
    }

    #[test]
    fn rows_read_with_unix_or_iso_times_and_quoted_fields() {
        let rows = parse(
            b"node,sku,time,metric,value\n\
              gpu001,H100x8,1760000000,avg_busbw,471.5\n\
              \"gpu,002\",H100x8,2025-10-09T08:53:20,avg_busbw,4.7e2\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].node, "gpu,002");
        assert_eq!(rows[1].time, 1_760_000_000);
        assert_eq!(rows[1].value, 470.0);
    }

    #[test]
    fn a_bad_row_names_its_line_and_what_is_wrong() {
        let head = "node,sku,time,metric,value\n";
        assert_eq!(
            err(""),
            "1: empty file; expected the header `node,sku,time,metric,value`"
        );
        assert!(err("node,time,metric,value\n").starts_with("1: expected the header"));
        let e = err(&format!("{head}a,s,1,m,1\na,s,1,m\n"));
        assert_eq!(e, "3: 4 fields; expected 5: node,sku,time,metric,value");
        assert_eq!(
            err(&format!("{head}a,s,1,m,NaN\n")),
            "2: value \"NaN\" is not a finite number"
        );
        assert_eq!(
            err(&format!("{head}a,s,1,m,fast\n")),
            "2: value \"fast\" is not a finite number"
        );
        assert_eq!(err(&format!("{head}a,s,,m,1\n")), "2: time is empty");
        assert!(err(&format!("{head}a,s,yesterday,m,1\n")).starts_with("2: time: "));
        assert_eq!(err(&format!("{head}a, ,1,m,1\n")), "2: sku is empty");
        // A quoted field over two lines: the next row is still named by its own line.
        let e = err(&format!("{head}\"a\nb\",s,1,m,1\nc,s,1,,1\n"));
        assert_eq!(e, "4: metric is empty");
    }

    #[test]
    fn the_latest_result_of_a_node_counts_and_missing_metrics_are_noted() {
        let mut text = String::from("node,sku,time,metric,value\n");
        for i in 0..10 {
            text += &format!("n{i},s,100,avg_busbw,{}\n", 400 + i % 3);
            text += &format!("n{i},s,100,gflops.gpu0,{}\n", 900 + i % 4);
        }
        // n3 was slow once, then repaired: its latest result passes.
        text += "n3,s,50,avg_busbw,200\n";
        // n4 is slow now.
        text += "n4,s,200,avg_busbw,300\n";
        text += "n9,s,300,wrong_total,0\n";
        let j = judge(
            &parse(text.as_bytes()).unwrap(),
            &ValidateSettings::default(),
        );
        assert_eq!(j.failing.len(), 1);
        assert_eq!(j.failing[0].node, "n4");
        assert_eq!(j.failing[0].failures[0].value, 300.0);
        assert_eq!(j.missing.len(), 9, "{:?}", j.missing);
        assert_eq!(j.missing[0].metrics, ["wrong_total"]);
        let out = render(&j, false);
        assert!(
            out.starts_with("1 of 10 nodes fail (1 SKUs, 23 results)\n"),
            "{out}"
        );
        assert!(out.contains("n4 (s): avg_busbw 300, band >= 393"), "{out}");
        assert!(
            out.contains("[learned: median 401 of 9 peers - 8.02"),
            "{out}"
        );
    }
}
