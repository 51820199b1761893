//! The HTML report rendered by a real browser: headless Chromium parses the
//! page, and the dumped DOM must hold the charts with their data and the
//! key figures. Chromium is a test dependency (`scripts/install-deps`);
//! without it this test fails rather than skipping.

use lemon::reliability::render::{render, Format};
use lemon::reliability::{build_report, ReliabilityReport, ReportParams};
use lemonade_tests::reliability_history::{generate, SyntheticSpec};
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        if let Some(dir) = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|d| d.join(name).is_file())
        {
            return dir.join(name);
        }
    }
    panic!("headless Chromium is needed to render the HTML report: run scripts/install-deps (it installs `chromium`)");
}

/// The DOM as Chromium built it from the file.
fn dump_dom(page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The serialised `<svg data-chart="id">…</svg>` element.
fn chart<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("data-chart=\"{id}\""))
        .unwrap_or_else(|| panic!("chart {id} missing from the DOM"));
    let start = dom[..start].rfind("<svg").unwrap();
    let end = start + dom[start..].find("</svg>").unwrap();
    &dom[start..end]
}

/// Text of the element with this id.
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("#{id} missing"));
    let open = at + dom[at..].find('>').unwrap() + 1;
    let close = open + dom[open..].find('<').unwrap();
    &dom[open..close]
}

fn report() -> ReliabilityReport {
    let spec = SyntheticSpec {
        days: 35,
        jobs: 20_000,
        ..SyntheticSpec::default()
    };
    build_report(&generate(&spec), &ReportParams::default()).unwrap()
}

#[test]
fn html_report_renders_in_chromium_with_non_empty_charts() {
    let report = report();
    let html = render(&report, Format::Html).unwrap();
    assert!(
        !html.contains("<script"),
        "the page must not need JavaScript"
    );
    assert!(!html.contains("http://") || !html.contains("src=\"http"));
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("reliability.html");
    std::fs::write(&page, &html).unwrap();
    let dom = dump_dom(&page);

    // Failure rate over time: one filled area per category, with data.
    let rate = chart(&dom, "failure-rate");
    let categories = report.failure_rate.rolling.categories.len();
    assert!(
        categories >= 5,
        "synthetic history has {categories} categories"
    );
    assert_eq!(rate.matches("class=\"series\"").count(), categories);
    assert!(!rate.contains("class=\"empty\""));
    let d = rate.split("class=\"series\"").nth(1).unwrap();
    assert!(d.matches(" L").count() >= 35, "area has too few vertices");

    // MTTF: the projection line, an empirical point per bucket with failures.
    let mttf = chart(&dom, "mttf");
    assert_eq!(mttf.matches("series projection").count(), 1);
    let with_failures = report.mttf.rows.iter().filter(|r| r.failures > 0).count();
    assert!(with_failures >= 8);
    assert_eq!(mttf.matches("class=\"point\"").count(), with_failures);
    let with_interval = report
        .mttf
        .rows
        .iter()
        .filter(|r| r.ci_low_hours.is_some())
        .count();
    assert_eq!(mttf.matches("series interval").count(), with_interval);

    // One CDF per signal, each with its threshold marked.
    for s in &report.lemons.signals {
        let cdf = chart(&dom, &format!("cdf-{}", s.name));
        assert_eq!(cdf.matches("series cdf").count(), 1, "{}", s.name);
        assert_eq!(cdf.matches("class=\"threshold\"").count(), 1, "{}", s.name);
    }
    let svgs = dom.matches("<svg").count();
    assert_eq!(svgs, 2 + report.lemons.signals.len());

    // Known values survive the browser's parse.
    assert_eq!(
        text_of(&dom, "rf-paper"),
        format!("{:.2}", report.failure_rate.paper.per_1000_node_days)
    );
    assert_eq!(text_of(&dom, "total-runs"), report.totals.jobs.to_string());
    assert_eq!(text_of(&dom, "lemon-count"), "3");
    assert!(dom.contains("gpu0017"));
    // Counted in the page as written and in the browser's DOM alike.
    assert_eq!(
        html.matches("<path").count(),
        dom.matches("<path").count(),
        "the browser dropped SVG paths"
    );
}
