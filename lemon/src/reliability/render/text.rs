//! Plain-text output for terminals and cron mail.

use super::{
    checkpoint_cell, duration_hours, exposure_text, failures, opt, pct, range_text, rate_value,
    rate_with_interval, remediation_cells, significant,
};
use crate::reliability::ReliabilityReport;
use std::fmt::Write;

/// The report as aligned plain-text tables.
pub fn render(r: &ReliabilityReport) -> String {
    let mut o = String::new();
    header(&mut o, r);
    outcomes(&mut o, r);
    attribution(&mut o, r);
    failure_rate(&mut o, r);
    mttf(&mut o, r);
    ettr(&mut o, r);
    goodput(&mut o, r);
    remediation(&mut o, r);
    lemons(&mut o, r);
    o
}

fn header(o: &mut String, r: &ReliabilityReport) {
    let _ = writeln!(o, "Cluster reliability report: {}", range_text(&r.range));
    let _ = writeln!(
        o,
        "Fleet: {} nodes x {} GPUs. Runs: {}.",
        r.fleet_nodes, r.gpus_per_node, r.totals.jobs
    );
    let _ = writeln!(o, "{}", exposure_text(&r.exposure));
    if !r.exposure.enough() {
        let _ = writeln!(
            o,
            "Rates, MTTF and ETTR are withheld: {}.",
            r.exposure.shortfall()
        );
    }
    o.push('\n');
}

fn outcomes(o: &mut String, r: &ReliabilityReport) {
    let _ = writeln!(o, "Job outcomes");
    let _ = writeln!(
        o,
        "  {:<14} {:>10} {:>7} {:>14} {:>7}",
        "state", "runs", "share", "GPU-hours", "share"
    );
    for row in &r.outcomes {
        let _ = writeln!(
            o,
            "  {:<14} {:>10} {:>7} {:>14.1} {:>7}",
            row.state.as_str(),
            row.jobs,
            pct(row.share_of_jobs),
            row.gpu_hours,
            pct(row.share_of_gpu_hours)
        );
    }
    o.push('\n');
}

fn attribution(o: &mut String, r: &ReliabilityReport) {
    let a = &r.attribution;
    let _ = writeln!(
        o,
        "Attributed hardware failures ({} FAILED/NODE_FAIL runs)",
        a.failed_jobs
    );
    let _ = writeln!(
        o,
        "  {:<16} {:>8} {:>8} {:>12} {:>12}",
        "category", "runs", "of runs", "GPU-hours", "of GPU time"
    );
    for row in a
        .attributed
        .iter()
        .chain([&a.attributed_total, &a.unattributed])
    {
        let _ = writeln!(
            o,
            "  {:<16} {:>8} {:>8} {:>12.1} {:>12}",
            row.category,
            row.jobs,
            pct(row.share_of_jobs),
            row.gpu_hours,
            pct(row.share_of_gpu_runtime)
        );
    }
    if !a.co_occurrence.is_empty() {
        let _ = writeln!(o, "  co-occurring in the attribution window:");
        for c in a.co_occurrence.iter().take(10) {
            let _ = writeln!(
                o,
                "    {} with {}: {} runs ({} of {})",
                c.category,
                c.with,
                c.jobs,
                pct(c.share_of_category),
                c.category
            );
        }
    }
    o.push('\n');
}

fn failure_rate(o: &mut String, r: &ReliabilityReport) {
    let f = &r.failure_rate;
    let _ = writeln!(o, "Failure rate r_f (failures per 1000 node-days)");
    if !r.exposure.enough() {
        failure_counts(o, r);
        return;
    }
    for rate in [&f.paper, &f.all_jobs] {
        let _ = writeln!(
            o,
            "  {:<48} {:>8}  ({} / {:.1} node-days, {} runs)",
            rate.rule,
            rate_with_interval(rate, r.params.confidence),
            failures(rate.failures),
            rate.node_days,
            rate.jobs
        );
    }
    for c in &f.by_category {
        let _ = writeln!(
            o,
            "    {:<20} {:>8}  ({}, all jobs)",
            c.category,
            rate_value(c.per_1000_node_days),
            failures(c.failures)
        );
    }
    rolling(o, r);
    let _ = writeln!(o, "  projections below use: {}\n", f.projection_rule);
}

/// The failure-rate section without rates: what was counted.
fn failure_counts(o: &mut String, r: &ReliabilityReport) {
    let f = &r.failure_rate;
    let _ = writeln!(o, "  {}", r.exposure.shortfall());
    for rate in [&f.paper, &f.all_jobs] {
        let _ = writeln!(
            o,
            "  {:<48} {} over {} node-days, {} runs",
            rate.rule,
            failures(rate.failures),
            significant(rate.node_days),
            rate.jobs
        );
    }
    for c in &f.by_category {
        let _ = writeln!(o, "    {:<20} {}", c.category, failures(c.failures));
    }
    o.push('\n');
}

fn rolling(o: &mut String, r: &ReliabilityReport) {
    let roll = &r.failure_rate.rolling;
    if !roll.days.is_empty() {
        let _ = writeln!(
            o,
            "  rolling {}-day r_f, all GPU jobs (every 7th day):",
            roll.window_days
        );
        let n = roll.days.len();
        for d in (0..n)
            .rev()
            .step_by(7)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            let parts: Vec<String> = roll
                .categories
                .iter()
                .zip(&roll.rates)
                .filter(|(_, v)| v[d] > 0.0)
                .map(|(c, v)| format!("{c} {:.2}", v[d]))
                .collect();
            let _ = writeln!(
                o,
                "    {}  {:>7.2}  {}",
                roll.days[d],
                roll.total[d],
                parts.join(", ")
            );
        }
    }
}

fn mttf(o: &mut String, r: &ReliabilityReport) {
    let m = &r.mttf;
    if !r.exposure.enough() {
        let _ = writeln!(o, "MTTF by job size\n  {}", r.exposure.shortfall());
        let _ = writeln!(
            o,
            "  {:>6} {:>9} {:>9} {:>12}",
            "GPUs", "runs", "failures", "run-hours"
        );
        for row in &m.rows {
            let _ = writeln!(
                o,
                "  {:>6} {:>9} {:>9} {:>12}",
                format!("{}{}", row.gpus, if row.open_ended { "+" } else { "" }),
                row.jobs,
                row.failures,
                significant(row.runtime_hours)
            );
        }
        o.push('\n');
        return;
    }
    let _ = writeln!(
        o,
        "MTTF by job size (r_f = {:.2}/1000 node-days; {:.0}% interval with >= {} failures)",
        m.failure_rate_per_1000_node_days,
        m.confidence * 100.0,
        m.min_failures_for_interval
    );
    let _ = writeln!(
        o,
        "  {:>6} {:>9} {:>9} {:>12} {:>10} {:>21} {:>11}",
        "GPUs", "runs", "failures", "run-hours", "empirical", "interval", "1/(N r_f)"
    );
    for row in &m.rows {
        let interval = match (row.ci_low_hours, row.ci_high_hours) {
            (Some(l), Some(h)) => format!("{} - {}", duration_hours(l), duration_hours(h)),
            _ => "—".into(),
        };
        let _ = writeln!(
            o,
            "  {:>6} {:>9} {:>9} {:>12.1} {:>10} {:>21} {:>11}",
            format!("{}{}", row.gpus, if row.open_ended { "+" } else { "" }),
            row.jobs,
            row.failures,
            row.runtime_hours,
            row.empirical_hours.map_or("—".into(), duration_hours),
            interval,
            row.projected_hours.map_or("—".into(), duration_hours)
        );
    }
    o.push('\n');
}

fn ettr(o: &mut String, r: &ReliabilityReport) {
    let e = &r.ettr;
    if !r.exposure.enough() {
        let f = &r.failure_rate.all_jobs;
        let _ = writeln!(
            o,
            "Expected ETTR\n  {} (so far {} over {} node-days)\n",
            r.exposure.shortfall(),
            failures(f.failures),
            significant(f.node_days)
        );
        return;
    }
    let _ = writeln!(
        o,
        "Expected ETTR (r_f = {:.2}/1000 node-days, checkpoint {} min, restart {} min, queue {:.1} min [{}], R = {} h)",
        e.failure_rate_per_1000_node_days,
        e.checkpoint_min,
        e.restart_min,
        e.queue.minutes,
        e.queue.source,
        e.runtime_hours
    );
    let _ = writeln!(
        o,
        "  {:>7} {:>8} {:>10} {:>6} {:>10} {:>18}",
        "GPUs",
        "nodes",
        "MTTF",
        "ETTR",
        "long job",
        format!("ckpt for {:.2}", e.target)
    );
    for row in &e.rows {
        let _ = writeln!(
            o,
            "  {:>7} {:>8.0} {:>10} {:>6.3} {:>10.3} {:>18}",
            row.gpus,
            row.nodes,
            row.mttf_hours.map_or("—".into(), duration_hours),
            row.ettr,
            row.ettr_long_job,
            checkpoint_cell(row.checkpoint_for_target_min)
        );
    }
    o.push('\n');
}

fn goodput(o: &mut String, r: &ReliabilityReport) {
    let g = &r.goodput;
    let _ = writeln!(o, "Lost goodput (min(runtime, {} min) x GPUs)", g.cap_min);
    for l in [&g.hardware, &g.all_failed, &g.second_order_preemptions] {
        let _ = writeln!(
            o,
            "  {:<72} {:>8} runs {:>12.1} GPU-hours",
            l.what, l.jobs, l.gpu_hours
        );
    }
    for l in &g.by_category {
        let _ = writeln!(
            o,
            "    {:<20} {:>8} runs {:>12.1} GPU-hours",
            l.what, l.jobs, l.gpu_hours
        );
    }
    let _ = writeln!(
        o,
        "  second-order share of hardware-related loss: {}\n",
        pct(g.second_order_share)
    );
}

fn remediation(o: &mut String, r: &ReliabilityReport) {
    let m = &r.remediation;
    let _ = writeln!(
        o,
        "Incidents and automatic repair (state changes of {} nodes' spool exports)",
        m.nodes_reporting
    );
    if m.total.incidents == 0 {
        let _ = writeln!(
            o,
            "  no node was taken out by a health check in the range{}\n",
            if m.nodes_reporting == 0 {
                " (or no spool export was ingested)"
            } else {
                ""
            }
        );
        return;
    }
    let _ = writeln!(
        o,
        "  {:<12} {:>9} {:>7} {:>8} {:>11} {:>11} {:>9} {:>13}",
        "category",
        "incidents",
        "resets",
        "reboots",
        "hand-overs",
        "remediated",
        "returned",
        "median out"
    );
    for row in m.by_category.iter().chain([&m.total]) {
        let [category, incidents, resets, reboots, hand_overs, remediated, returned, out] =
            remediation_cells(row);
        let _ = writeln!(
            o,
            "  {category:<12} {incidents:>9} {resets:>7} {reboots:>8} {hand_overs:>11} {remediated:>11} {returned:>9} {out:>13}",
        );
    }
    let _ = writeln!(
        o,
        "  mean time between incidents per node: {}",
        m.mtbi_days.map_or("—".into(), |d| duration_hours(d * 24.0))
    );
    for n in &m.repeat_nodes {
        let _ = writeln!(
            o,
            "    {:<16} {:>3} incidents, one every {}",
            n.node,
            n.incidents,
            duration_hours(n.days_between * 24.0)
        );
    }
    o.push('\n');
}

fn lemons(o: &mut String, r: &ReliabilityReport) {
    let l = &r.lemons;
    let _ = writeln!(o, "Lemon nodes ({})", l.lemons.len());
    for e in &l.lemons {
        let _ = writeln!(
            o,
            "  {:<16} {:<17} {}",
            e.node,
            e.since
                .map_or("—".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
            e.reason
        );
    }
    if !l.signals.is_empty() {
        let _ = writeln!(
            o,
            "  {:<32} {:>6} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8}",
            "signal", "nodes", "p50", "p90", "p99", "max", "threshold", ">= thr"
        );
        for s in &l.signals {
            let _ = writeln!(
                o,
                "  {:<32} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>10} {:>8}",
                s.name,
                s.nodes,
                s.p50,
                s.p90,
                s.p99,
                s.max,
                opt(s.threshold, 2),
                s.at_or_above_threshold
            );
        }
    }
}
