//! The reliability report's model: one function per section, each
//! returning the [`Section`] every format renders.

use super::charts::{Cdf, Mttf, RollingRate};
use super::{
    checkpoint_cell, duration_hours, exposure_text, failures, opt, pct, range_text, rate_value,
    rate_with_interval, remediation_cells, significant,
};
use crate::document::{Block, Document, Paragraph, Section, Span, Table};
use crate::reliability::ReliabilityReport;

/// The whole report as a document.
pub fn document(r: &ReliabilityReport) -> Document<'_> {
    Document {
        title: format!("Cluster reliability report: {}", range_text(&r.range)),
        preamble: preamble(r),
        sections: vec![
            outcomes(r),
            attribution(r),
            failure_rate(r),
            mttf(r),
            ettr(r),
            goodput(r),
            remediation(r),
            lemons(r),
        ],
    }
}

fn preamble(r: &ReliabilityReport) -> Vec<Block<'_>> {
    let mut blocks = vec![
        Paragraph::spans(vec![
            format!(
                "Fleet: {} nodes × {} GPUs. Runs: ",
                r.fleet_nodes, r.gpus_per_node
            )
            .into(),
            Span::figure("total-runs", r.totals.jobs.to_string()),
            ".".into(),
        ])
        .id("fleet")
        .into(),
        Paragraph::plain(exposure_text(&r.exposure))
            .id("exposure")
            .into(),
    ];
    if !r.exposure.enough() {
        blocks.push(
            Paragraph::withheld(format!(
                "Rates, MTTF and ETTR are withheld: {}.",
                r.exposure.shortfall()
            ))
            .id("withheld")
            .into(),
        );
    }
    blocks
}

fn outcomes(r: &ReliabilityReport) -> Section<'_> {
    let table = Table::new("outcomes")
        .left("state", 14)
        .right("runs", 10)
        .right("share", 7)
        .right("GPU-hours", 14)
        .right("share", 7)
        .rows(r.outcomes.iter().map(|row| {
            [
                row.state.as_str().to_string(),
                row.jobs.to_string(),
                pct(row.share_of_jobs),
                format!("{:.1}", row.gpu_hours),
                pct(row.share_of_gpu_hours),
            ]
        }));
    Section::new("Job outcomes").with(table)
}

fn attribution(r: &ReliabilityReport) -> Section<'_> {
    let a = &r.attribution;
    let table = Table::new("attribution")
        .left("category", 16)
        .right("runs", 8)
        .right("of all runs", 8)
        .right("GPU-hours", 12)
        .right("of GPU runtime", 12)
        .rows(
            a.attributed
                .iter()
                .chain([&a.attributed_total, &a.unattributed])
                .map(|row| {
                    [
                        row.category.clone(),
                        row.jobs.to_string(),
                        pct(row.share_of_jobs),
                        format!("{:.1}", row.gpu_hours),
                        pct(row.share_of_gpu_runtime),
                    ]
                }),
        );
    let mut s = Section::new(format!(
        "Attributed hardware failures ({} FAILED/NODE_FAIL runs)",
        a.failed_jobs
    ))
    .with(Paragraph::note(
        "A failure is attributed to a check category when the check fired on one of the job's nodes from 10 minutes before its end to 5 minutes after.",
    ))
    .with(table);
    if !a.co_occurrence.is_empty() {
        s.push(Paragraph::plain("Categories firing in the same window:"));
        s.push(
            Table::new("co-occurrence")
                .left("categories", 20)
                .right("runs", 8)
                .right("of the first's runs", 8)
                .rows(a.co_occurrence.iter().map(|c| {
                    [
                        format!("{} with {}", c.category, c.with),
                        c.jobs.to_string(),
                        pct(c.share_of_category),
                    ]
                })),
        );
    }
    s
}

fn failure_rate(r: &ReliabilityReport) -> Section<'_> {
    let f = &r.failure_rate;
    let s = Section::new("Failure rate r_f (failures per 1000 node-days)");
    if !r.exposure.enough() {
        return failure_counts(r, s);
    }
    let counted = |rate: &crate::reliability::failure_rate::Rate| {
        format!(
            " per 1000 node-days ({} over {:.1} node-days, {} runs)",
            failures(rate.failures),
            rate.node_days,
            rate.jobs
        )
    };
    let rates = Paragraph::spans(vec![
        format!("By the paper's rule ({}): ", f.paper.rule).into(),
        Span::figure(
            "rf-paper",
            rate_with_interval(&f.paper, r.params.confidence),
        ),
        format!("{}. Over all GPU jobs: ", counted(&f.paper)).into(),
        Span::figure(
            "rf-all",
            rate_with_interval(&f.all_jobs, r.params.confidence),
        ),
        format!("{}.", counted(&f.all_jobs)).into(),
    ]);
    let by_category = Table::new("rate-by-category")
        .left("category", 20)
        .right("failures", 8)
        .right("per 1000 node-days", 8)
        .rows(f.by_category.iter().map(|c| {
            [
                c.category.clone(),
                c.failures.to_string(),
                rate_value(c.per_1000_node_days),
            ]
        }));
    s.with(rates)
        .with(by_category)
        .with(Block::Chart(Box::new(RollingRate(&f.rolling))))
        .with(Paragraph::plain(format!(
            "The projections below use: {}.",
            f.projection_rule
        )))
}

/// The failure-rate section without rates: what was counted.
fn failure_counts<'a>(r: &'a ReliabilityReport, s: Section<'a>) -> Section<'a> {
    let f = &r.failure_rate;
    let counted = |rate: &crate::reliability::failure_rate::Rate, sep: (&str, &str)| {
        format!(
            "{} over {} node-days{}{} runs{}",
            failures(rate.failures),
            significant(rate.node_days),
            sep.0,
            rate.jobs,
            sep.1
        )
    };
    let note = format!(
        "By the paper's rule ({}): {}. Over all GPU jobs: {}.",
        f.paper.rule,
        counted(&f.paper, (" (", ")")),
        counted(&f.all_jobs, (" (", ")"))
    );
    let by_rule = Table::new("rate-rules")
        .left("rule", 48)
        .left("counted", 0)
        .rows([&f.paper, &f.all_jobs].map(|rate| [rate.rule.clone(), counted(rate, (", ", ""))]));
    let by_category = Table::new("rate-by-category")
        .left("category", 20)
        .right("failures", 8)
        .rows(
            f.by_category
                .iter()
                .map(|c| [c.category.clone(), c.failures.to_string()]),
        );
    s.with(Paragraph::withheld(r.exposure.shortfall()).id("rate-withheld"))
        .with(Paragraph::note(note).id("rate-counts"))
        .with(by_rule)
        .with(by_category)
}

fn size(row: &crate::reliability::mttf::MttfRow) -> String {
    format!("{}{}", row.gpus, if row.open_ended { "+" } else { "" })
}

fn mttf(r: &ReliabilityReport) -> Section<'_> {
    let m = &r.mttf;
    if !r.exposure.enough() {
        let table = Table::new("mttf-table")
            .right("GPUs", 6)
            .right("runs", 9)
            .right("failures", 9)
            .right("run-hours", 12)
            .rows(m.rows.iter().map(|row| {
                [
                    size(row),
                    row.jobs.to_string(),
                    row.failures.to_string(),
                    significant(row.runtime_hours),
                ]
            }));
        return Section::new("MTTF by job size")
            .with(Paragraph::withheld(r.exposure.shortfall()).id("mttf-withheld"))
            .with(table);
    }
    let note = format!(
        "Empirical MTTF is run time per failure in each size bucket; the {:.0}% interval (chi-square) is shown from {} failures on. The projection is 1/(N·r_f) with r_f = {:.2} per 1000 node-days and N the job's nodes.",
        m.confidence * 100.0,
        m.min_failures_for_interval,
        m.failure_rate_per_1000_node_days
    );
    Section::new(format!(
        "MTTF by job size (r_f = {:.2}/1000 node-days; {:.0}% interval with >= {} failures)",
        m.failure_rate_per_1000_node_days,
        m.confidence * 100.0,
        m.min_failures_for_interval
    ))
    .with(Paragraph::note(note))
    .with(Block::Chart(Box::new(Mttf(m))))
    .with(mttf_table(m))
}

fn mttf_table(m: &crate::reliability::mttf::MttfTable) -> Table {
    Table::new("mttf-table")
        .right("GPUs", 6)
        .right("runs", 9)
        .right("failures", 9)
        .right("run-hours", 12)
        .right("empirical", 10)
        .right("interval", 21)
        .right("1/(N·r_f)", 11)
        .rows(m.rows.iter().map(|row| {
            [
                size(row),
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
        }))
}

fn ettr(r: &ReliabilityReport) -> Section<'_> {
    let e = &r.ettr;
    if !r.exposure.enough() {
        let f = &r.failure_rate.all_jobs;
        return Section::new("Expected ETTR")
            .with(Paragraph::withheld(r.exposure.shortfall()).id("ettr-withheld"))
            .with(
                Paragraph::plain(format!(
                    "So far {} over {} node-days.",
                    failures(f.failures),
                    significant(f.node_days)
                ))
                .id("ettr-counts"),
            );
    }
    let note = format!(
        "E[ETTR] ≈ (1 − N·r_f·(u0 + Δt/2)) / (1 + N·r_f·(q + (u0/R)(q + u0 + Δt/2))) with r_f = {:.2} per 1000 node-days, checkpoint interval Δt = {} min, restart overhead u0 = {} min, queue time q = {:.1} min ({}), productive runtime R = {} h. The last column is the checkpoint interval that reaches ETTR {:.2}.",
        e.failure_rate_per_1000_node_days,
        e.checkpoint_min,
        e.restart_min,
        e.queue.minutes,
        e.queue.source,
        e.runtime_hours,
        e.target
    );
    let table = Table::new("ettr-table")
        .right("GPUs", 7)
        .right("nodes", 8)
        .right("MTTF", 10)
        .right("ETTR", 6)
        .right("long job", 10)
        .right(&format!("checkpoint for target {:.2}", e.target), 18)
        .rows(e.rows.iter().map(|row| {
            [
                row.gpus.to_string(),
                format!("{:.0}", row.nodes),
                row.mttf_hours.map_or("—".into(), duration_hours),
                format!("{:.3}", row.ettr),
                format!("{:.3}", row.ettr_long_job),
                checkpoint_cell(row.checkpoint_for_target_min),
            ]
        }));
    Section::new(format!(
        "Expected ETTR (r_f = {:.2}/1000 node-days, checkpoint {} min, restart {} min, queue {:.1} min [{}], R = {} h)",
        e.failure_rate_per_1000_node_days,
        e.checkpoint_min,
        e.restart_min,
        e.queue.minutes,
        e.queue.source,
        e.runtime_hours
    ))
    .with(Paragraph::note(note))
    .with(table)
}

fn goodput(r: &ReliabilityReport) -> Section<'_> {
    let g = &r.goodput;
    let table = Table::new("goodput")
        .left("what", 20)
        .right("runs", 8)
        .right("GPU-hours", 12)
        .rows(
            [&g.hardware, &g.all_failed, &g.second_order_preemptions]
                .into_iter()
                .chain(&g.by_category)
                .map(|l| {
                    [
                        l.what.clone(),
                        l.jobs.to_string(),
                        format!("{:.1}", l.gpu_hours),
                    ]
                }),
        );
    Section::new(format!(
        "Lost goodput (min(runtime, {} min) × GPUs)",
        g.cap_min
    ))
    .with(Paragraph::note(format!(
        "Each failed run loses min(runtime, {} min) × GPUs.",
        g.cap_min
    )))
    .with(table)
    .with(Paragraph::plain(format!(
        "Second-order preemptions are {} of the hardware-related loss.",
        pct(g.second_order_share)
    )))
}

fn remediation(r: &ReliabilityReport) -> Section<'_> {
    let m = &r.remediation;
    let s = Section::new(format!(
        "Incidents and automatic repair (state changes of {} nodes' spool exports)",
        m.nodes_reporting
    ))
    .with(Paragraph::note(
        "An incident is a node a health check took out, until it was resumed.",
    ));
    if m.total.incidents == 0 {
        return s.with(Paragraph::plain(format!(
            "No node was taken out by a health check in the range{}.",
            if m.nodes_reporting == 0 {
                " (or no spool export was ingested)"
            } else {
                ""
            }
        )));
    }
    let table = Table::new("remediation")
        .left("category", 12)
        .right("incidents", 9)
        .right("resets", 7)
        .right("restarts", 8)
        .right("reboots", 8)
        .right("hand-overs", 11)
        .right("remediated", 11)
        .right("returned to service", 9)
        .right("median time out", 13)
        .rows(
            m.by_category
                .iter()
                .chain([&m.total])
                .map(remediation_cells),
        );
    let mtbi = m.mtbi_days.map_or("—".into(), |d| duration_hours(d * 24.0));
    let mut s = s.with(table).with(Paragraph::spans(vec![
        "mean time between incidents per node: ".into(),
        Span::figure("mtbi", mtbi),
    ]));
    if !m.repeat_nodes.is_empty() {
        s.push(
            Table::new("repeat-nodes")
                .left("node", 16)
                .right("incidents", 9)
                .left("one every", 0)
                .rows(m.repeat_nodes.iter().map(|n| {
                    [
                        n.node.clone(),
                        n.incidents.to_string(),
                        duration_hours(n.days_between * 24.0),
                    ]
                })),
        );
    }
    s
}

fn lemons(r: &ReliabilityReport) -> Section<'_> {
    let l = &r.lemons;
    let list = Table::new("lemons")
        .left("node", 16)
        .left("since", 17)
        .left("reason", 0)
        .rows(l.lemons.iter().map(|e| {
            [
                e.node.clone(),
                e.since
                    .map_or("—".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
                e.reason.clone(),
            ]
        }));
    let signals = Table::new("signals")
        .left("signal", 32)
        .right("nodes", 6)
        .right("p50", 8)
        .right("p90", 8)
        .right("p99", 8)
        .right("max", 8)
        .right("threshold", 10)
        .right("≥ threshold", 8)
        .rows(l.signals.iter().map(|s| {
            [
                s.name.clone(),
                s.nodes.to_string(),
                format!("{:.2}", s.p50),
                format!("{:.2}", s.p90),
                format!("{:.2}", s.p99),
                format!("{:.2}", s.max),
                opt(s.threshold, 2),
                s.at_or_above_threshold.to_string(),
            ]
        }));
    let count = Paragraph::spans(vec![
        Span::figure("lemon-count", l.lemons.len().to_string()),
        " nodes on the lemon list.".into(),
    ]);
    let mut s = Section::new(format!("Lemon nodes ({})", l.lemons.len()))
        .with(count)
        .with(list)
        .with(signals);
    for sig in &l.signals {
        s.push(Block::Chart(Box::new(Cdf(sig))));
    }
    s
}
