//! One self-contained HTML page: inline CSS and inline SVG charts, no
//! script at all, so it can be mailed, archived and opened offline.
//!
//! Key figures carry stable `id`s (`rf-paper`, `rf-all`, `total-runs`,
//! `lemon-count`) so that tests and scrapers can read them.

use super::{
    checkpoint_cell, duration_hours, exposure_text, failures, opt, pct, range_text, rate_value,
    rate_with_interval, remediation_cells, significant,
};
use crate::reliability::svg::{self, esc, MttfPoint};
use crate::reliability::ReliabilityReport;
use std::fmt::Write;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}\
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:.9em}\
.figure{font-weight:bold}svg{display:block;margin:.6em 0}";

/// The report as one HTML document.
pub fn render(r: &ReliabilityReport) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let title = format!(
        "Cluster reliability {} to {}",
        r.range.since.format("%Y-%m-%d"),
        r.range.until.format("%Y-%m-%d")
    );
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = esc(&title)
    );
    let _ = write!(
        o,
        "<p id=\"range\">{range}. Fleet: {n} nodes × {g} GPUs. Runs: <span class=\"figure\" id=\"total-runs\">{runs}</span>.</p><p id=\"exposure\">{exposure}</p>",
        range = esc(&range_text(&r.range)),
        n = r.fleet_nodes,
        g = r.gpus_per_node,
        runs = r.totals.jobs,
        exposure = esc(&exposure_text(&r.exposure)),
    );
    if !r.exposure.enough() {
        let _ = write!(
            o,
            "<p class=\"withheld\" id=\"withheld\">Rates, MTTF and ETTR are withheld: {}.</p>",
            esc(&r.exposure.shortfall())
        );
    }
    outcomes(&mut o, r);
    attribution(&mut o, r);
    failure_rate(&mut o, r);
    mttf(&mut o, r);
    ettr(&mut o, r);
    goodput(&mut o, r);
    remediation(&mut o, r);
    lemons(&mut o, r);
    o.push_str("</body></html>\n");
    o
}

fn table(o: &mut String, id: &str, head: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let _ = write!(o, "<table id=\"{}\"><thead><tr>", esc(id));
    for h in head {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for row in rows {
        o.push_str("<tr>");
        for cell in row {
            let _ = write!(o, "<td>{}</td>", esc(&cell));
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
}

fn outcomes(o: &mut String, r: &ReliabilityReport) {
    o.push_str("<h2>Job outcomes</h2>");
    table(
        o,
        "outcomes",
        &["state", "runs", "share", "GPU-hours", "share"],
        r.outcomes.iter().map(|row| {
            vec![
                row.state.as_str().to_string(),
                row.jobs.to_string(),
                pct(row.share_of_jobs),
                format!("{:.1}", row.gpu_hours),
                pct(row.share_of_gpu_hours),
            ]
        }),
    );
}

fn attribution(o: &mut String, r: &ReliabilityReport) {
    let a = &r.attribution;
    let _ = write!(
        o,
        "<h2>Attributed hardware failures</h2><p>{} FAILED/NODE_FAIL runs; a failure is attributed to a check category when the check fired on one of the job's nodes from 10 minutes before its end to 5 minutes after.</p>",
        a.failed_jobs
    );
    table(
        o,
        "attribution",
        &[
            "category",
            "runs",
            "of all runs",
            "GPU-hours",
            "of GPU runtime",
        ],
        a.attributed
            .iter()
            .chain([&a.attributed_total, &a.unattributed])
            .map(|row| {
                vec![
                    row.category.clone(),
                    row.jobs.to_string(),
                    pct(row.share_of_jobs),
                    format!("{:.1}", row.gpu_hours),
                    pct(row.share_of_gpu_runtime),
                ]
            }),
    );
    if !a.co_occurrence.is_empty() {
        o.push_str("<p>Categories firing in the same window:</p>");
        table(
            o,
            "co-occurrence",
            &["category", "with", "runs", "of category"],
            a.co_occurrence.iter().map(|c| {
                vec![
                    c.category.clone(),
                    c.with.clone(),
                    c.jobs.to_string(),
                    pct(c.share_of_category),
                ]
            }),
        );
    }
}

/// A section's note that its figures are withheld.
fn withheld(o: &mut String, r: &ReliabilityReport, id: &str) {
    let _ = write!(
        o,
        "<p class=\"withheld\" id=\"{id}-withheld\">{}</p>",
        esc(&r.exposure.shortfall())
    );
}

fn failure_rate(o: &mut String, r: &ReliabilityReport) {
    let f = &r.failure_rate;
    o.push_str("<h2>Failure rate</h2>");
    if !r.exposure.enough() {
        withheld(o, r, "rate");
        let _ = write!(
            o,
            "<p id=\"rate-counts\">By the paper's rule ({}): {} over {} node-days ({} runs). Over all GPU jobs: {} over {} node-days ({} runs).</p>",
            esc(&f.paper.rule),
            failures(f.paper.failures),
            significant(f.paper.node_days),
            f.paper.jobs,
            failures(f.all_jobs.failures),
            significant(f.all_jobs.node_days),
            f.all_jobs.jobs
        );
        rate_table(o, r, false);
        return;
    }
    let _ = write!(
        o,
        "<p>r_f by the paper's rule ({}): <span class=\"figure\" id=\"rf-paper\">{}</span> per 1000 node-days ({} failures over {:.1} node-days). Over all GPU jobs: <span class=\"figure\" id=\"rf-all\">{}</span> ({} failures over {:.1} node-days).</p>",
        esc(&f.paper.rule),
        esc(&rate_with_interval(&f.paper, r.params.confidence)),
        f.paper.failures,
        f.paper.node_days,
        esc(&rate_with_interval(&f.all_jobs, r.params.confidence)),
        f.all_jobs.failures,
        f.all_jobs.node_days
    );
    rate_table(o, r, true);
    rolling_chart(o, r);
}

fn rate_table(o: &mut String, r: &ReliabilityReport, with_rates: bool) {
    let head: &[&str] = if with_rates {
        &["category", "failures", "per 1000 node-days"]
    } else {
        &["category", "failures"]
    };
    table(
        o,
        "rate-by-category",
        head,
        r.failure_rate.by_category.iter().map(|c| {
            let mut row = vec![c.category.clone(), c.failures.to_string()];
            if with_rates {
                row.push(rate_value(c.per_1000_node_days));
            }
            row
        }),
    );
}

fn rolling_chart(o: &mut String, r: &ReliabilityReport) {
    let roll = &r.failure_rate.rolling;
    let days: Vec<String> = roll
        .days
        .iter()
        .map(|d| d.format("%m-%d").to_string())
        .collect();
    let series: Vec<(String, Vec<f64>)> = roll
        .categories
        .iter()
        .cloned()
        .zip(roll.rates.iter().cloned())
        .collect();
    o.push_str(&svg::stacked_area(
        "failure-rate",
        &format!(
            "Rolling {}-day failure rate by category (all GPU jobs)",
            roll.window_days
        ),
        "failures / 1000 node-days",
        &days,
        &series,
    ));
}

fn mttf(o: &mut String, r: &ReliabilityReport) {
    let m = &r.mttf;
    o.push_str("<h2>MTTF by job size</h2>");
    if !r.exposure.enough() {
        withheld(o, r, "mttf");
        table(
            o,
            "mttf-table",
            &["GPUs", "runs", "failures", "run-hours"],
            m.rows.iter().map(|row| {
                vec![
                    format!("{}{}", row.gpus, if row.open_ended { "+" } else { "" }),
                    row.jobs.to_string(),
                    row.failures.to_string(),
                    significant(row.runtime_hours),
                ]
            }),
        );
        return;
    }
    let _ = write!(
        o,
        "<p class=\"note\">Empirical MTTF is run time per failure in each size bucket; the {:.0}% interval (chi-square) is shown from {} failures on. The projection is 1/(N·r_f) with r_f = {:.2} per 1000 node-days and N the job's nodes.</p>",
        m.confidence * 100.0,
        m.min_failures_for_interval,
        m.failure_rate_per_1000_node_days
    );
    let points: Vec<MttfPoint> = m
        .rows
        .iter()
        .map(|row| MttfPoint {
            gpus: row.gpus as f64,
            empirical: row.empirical_hours,
            ci: row.ci_low_hours.zip(row.ci_high_hours),
            projected: row.projected_hours,
        })
        .collect();
    o.push_str(&svg::mttf_chart("mttf", "MTTF vs job size", &points));
    table(
        o,
        "mttf-table",
        &[
            "GPUs",
            "runs",
            "failures",
            "run-hours",
            "empirical",
            "interval",
            "1/(N·r_f)",
        ],
        m.rows.iter().map(|row| {
            vec![
                format!("{}{}", row.gpus, if row.open_ended { "+" } else { "" }),
                row.jobs.to_string(),
                row.failures.to_string(),
                format!("{:.1}", row.runtime_hours),
                row.empirical_hours.map_or("—".into(), duration_hours),
                match (row.ci_low_hours, row.ci_high_hours) {
                    (Some(l), Some(h)) => format!("{} – {}", duration_hours(l), duration_hours(h)),
                    _ => "—".into(),
                },
                row.projected_hours.map_or("—".into(), duration_hours),
            ]
        }),
    );
}

fn ettr(o: &mut String, r: &ReliabilityReport) {
    let e = &r.ettr;
    o.push_str("<h2>Expected ETTR</h2>");
    if !r.exposure.enough() {
        withheld(o, r, "ettr");
        let f = &r.failure_rate.all_jobs;
        let _ = write!(
            o,
            "<p id=\"ettr-counts\">So far {} over {} node-days.</p>",
            failures(f.failures),
            significant(f.node_days)
        );
        return;
    }
    let _ = write!(
        o,
        "<p class=\"note\">E[ETTR] ≈ (1 − N·r_f·(u0 + Δt/2)) / (1 + N·r_f·(q + (u0/R)(q + u0 + Δt/2))) with r_f = {:.2} per 1000 node-days, checkpoint interval Δt = {} min, restart overhead u0 = {} min, queue time q = {:.1} min ({}), productive runtime R = {} h. The last column is the checkpoint interval that reaches ETTR {:.2}.</p>",
        e.failure_rate_per_1000_node_days,
        e.checkpoint_min,
        e.restart_min,
        e.queue.minutes,
        esc(&e.queue.source),
        e.runtime_hours,
        e.target
    );
    table(
        o,
        "ettr-table",
        &[
            "GPUs",
            "nodes",
            "MTTF",
            "ETTR",
            "long job",
            "checkpoint for target",
        ],
        e.rows.iter().map(|row| {
            vec![
                row.gpus.to_string(),
                format!("{:.0}", row.nodes),
                row.mttf_hours.map_or("—".into(), duration_hours),
                format!("{:.3}", row.ettr),
                format!("{:.3}", row.ettr_long_job),
                checkpoint_cell(row.checkpoint_for_target_min),
            ]
        }),
    );
}

fn goodput(o: &mut String, r: &ReliabilityReport) {
    let g = &r.goodput;
    let _ = write!(
        o,
        "<h2>Lost goodput</h2><p class=\"note\">Each failed run loses min(runtime, {} min) × GPUs. Second-order preemptions are {} of the hardware-related loss.</p>",
        g.cap_min,
        pct(g.second_order_share)
    );
    table(
        o,
        "goodput",
        &["what", "runs", "GPU-hours"],
        [&g.hardware, &g.all_failed, &g.second_order_preemptions]
            .into_iter()
            .chain(&g.by_category)
            .map(|l| {
                vec![
                    l.what.clone(),
                    l.jobs.to_string(),
                    format!("{:.1}", l.gpu_hours),
                ]
            }),
    );
}

fn remediation(o: &mut String, r: &ReliabilityReport) {
    let m = &r.remediation;
    let _ = write!(
        o,
        "<h2>Incidents and automatic repair</h2><p class=\"note\">From the state changes in {} nodes' spool exports: an incident is a node a health check took out, until it was resumed. Mean time between incidents per node: <span class=\"figure\" id=\"mtbi\">{}</span>.</p>",
        m.nodes_reporting,
        m.mtbi_days.map_or("—".into(), |d| duration_hours(d * 24.0))
    );
    table(
        o,
        "remediation",
        &[
            "category",
            "incidents",
            "resets",
            "reboots",
            "hand-overs",
            "remediated",
            "returned to service",
            "median time out",
        ],
        m.by_category
            .iter()
            .chain([&m.total])
            .map(|row| remediation_cells(row).to_vec()),
    );
}

fn lemons(o: &mut String, r: &ReliabilityReport) {
    let l = &r.lemons;
    let _ = write!(
        o,
        "<h2>Lemon nodes</h2><p><span class=\"figure\" id=\"lemon-count\">{}</span> nodes on the lemon list.</p>",
        l.lemons.len()
    );
    table(
        o,
        "lemons",
        &["node", "since", "reason"],
        l.lemons.iter().map(|e| {
            vec![
                e.node.clone(),
                e.since
                    .map_or("—".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
                e.reason.clone(),
            ]
        }),
    );
    table(
        o,
        "signals",
        &[
            "signal",
            "nodes",
            "p50",
            "p90",
            "p99",
            "max",
            "threshold",
            "≥ threshold",
        ],
        l.signals.iter().map(|s| {
            vec![
                s.name.clone(),
                s.nodes.to_string(),
                format!("{:.2}", s.p50),
                format!("{:.2}", s.p90),
                format!("{:.2}", s.p99),
                format!("{:.2}", s.max),
                opt(s.threshold, 2),
                s.at_or_above_threshold.to_string(),
            ]
        }),
    );
    for s in &l.signals {
        o.push_str(&svg::cdf_chart(
            &format!("cdf-{}", s.name),
            &format!("{} over nodes", s.name),
            &s.sorted_values,
            s.threshold,
        ));
    }
}
