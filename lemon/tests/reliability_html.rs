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

/// A PNG of the page as Chromium draws it, kept under the test target
/// directory (`reliability-screens/NAME.png`) for a person to look at.
fn screenshot(page: &Path, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reliability-screens");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1200,5200",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{name}: the screenshot is not a drawn page ({} bytes)",
        bytes.len()
    );
    png
}

/// The text a reader sees: the DOM without its tags, charts included.
fn visible_text(dom: &str) -> String {
    let body = &dom[dom.find("<body").unwrap_or(0)..];
    let mut text = String::with_capacity(body.len());
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text of the section that starts with heading `h2`, up to the next.
fn section<'a>(text: &'a str, h2: &str) -> &'a str {
    let start = text
        .find(h2)
        .unwrap_or_else(|| panic!("no section {h2:?} in {text}"));
    let rest = &text[start..];
    let ends = [
        "Job outcomes",
        "Attributed hardware failures",
        "Failure rate",
        "MTTF by job size",
        "Expected ETTR",
        "Lost goodput",
        "Incidents and automatic repair",
        "Lemon nodes",
    ];
    let end = ends
        .iter()
        .filter(|e| **e != h2)
        .filter_map(|e| rest.find(e))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The y-axis labels of every chart (right-aligned beside the axis).
fn y_tick_labels(dom: &str) -> Vec<Vec<String>> {
    dom.split("<svg")
        .skip(1)
        .map(|svg| {
            svg.split("text-anchor=\"end\">")
                .skip(1)
                .map(|t| t[..t.find('<').unwrap()].to_string())
                .collect()
        })
        .collect()
}

/// The reliability report of `lemon.db` as the `lemon` binary writes it
/// at `now`, with the default window and minimum exposure.
fn lemon_report(db: &Path, now: i64, format: &str) -> String {
    let dir = db.parent().unwrap();
    let config = dir.join("lemonade.toml");
    std::fs::write(&config, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lemon"))
        .arg("--config")
        .arg(&config)
        .arg("--db")
        .arg(db)
        .args(["--now", &now.to_string(), "report"])
        .args(if format.is_empty() {
            vec![]
        } else {
            vec!["--reliability", "--format", format]
        })
        .output()
        .expect("run lemon");
    assert!(
        out.status.success(),
        "lemon report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A lemon.db holding `input`, written as ingest would.
fn lemon_db(dir: &Path, input: &lemon::reliability::ReportInput) -> PathBuf {
    let path = dir.join("lemon.db");
    let mut conn = lemon::db::open(&path, std::time::Duration::from_secs(5)).unwrap();
    lemonade_tests::reliability_history::store(&mut conn, input).unwrap();
    path
}

/// The HTML report of `db` drawn by Chromium: its screenshot, and the text
/// a reader sees.
fn drawn(db: &Path, now: i64, name: &str) -> (String, String) {
    let html = lemon_report(db, now, "html");
    let page = db.parent().unwrap().join(format!("{name}.html"));
    std::fs::write(&page, &html).unwrap();
    screenshot(&page, name);
    let dom = dump_dom(&page);
    (visible_text(&dom), dom)
}

/// Numbers no person should have to read.
fn assert_readable(text: &str, what: &str) {
    for bad in ["e0 ", "e0)", "NaN", "inf "] {
        assert!(!text.contains(bad), "{what} shows {bad:?}: {text}");
    }
    let seven_digit_rate = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(4)
        .any(|w| {
            w[0].split('.')
                .next()
                .is_some_and(|i| i.len() >= 7 && i.bytes().all(|b| b.is_ascii_digit()))
                && (w[1..].join(" ").starts_with("per 1000")
                    || w[1..].join(" ").contains("failures per"))
        });
    assert!(!seven_digit_rate, "{what} shows a seven-digit rate: {text}");
}

/// Three runs in the last minute before `until`: one completed, one failed
/// with an XID finding, one NODE_FAIL.
fn one_minute(until: chrono::DateTime<chrono::Utc>) -> lemon::reliability::ReportInput {
    use lemon::reliability::{JobRecord, JobState, ReportInput, TimeRange};
    let run = |id: &str, state, category: Option<&str>| JobRecord {
        id: id.into(),
        state,
        submit: Some(until - chrono::Duration::seconds(70)),
        start: Some(until - chrono::Duration::seconds(55)),
        end: until - chrono::Duration::seconds(5),
        gpus: 8,
        nodes: 1,
        category: category.map(String::from),
        co_categories: Vec::new(),
        requeued: false,
        partition: "gpu".into(),
    };
    ReportInput {
        range: TimeRange::last_days(until, 28),
        fleet_nodes: 4,
        gpus_per_node: 8,
        jobs: vec![
            run("501", JobState::Completed, None),
            run("502", JobState::Failed, Some("xid")),
            run("503", JobState::NodeFail, None),
        ],
        lemons: Vec::new(),
        signals: Vec::new(),
        state_changes: Vec::new(),
    }
}

#[test]
fn a_report_of_one_minute_says_how_little_history_it_has_and_withholds_rates() {
    let dir = tempfile::tempdir().unwrap();
    let until = SyntheticSpec::default().until;
    let db = lemon_db(dir.path(), &one_minute(until));
    let now = until.timestamp();

    let text = lemon_report(&db, now, "text");
    assert!(
        text.lines().next().unwrap().ends_with("UTC (1 min)"),
        "the range starts at the first record: {text}"
    );
    assert!(
        text.contains(
            "Exposure: 0.00174 node-days, 0.333 GPU-hours of runtime (rates need 100 node-days)."
        ),
        "{text}"
    );
    let shortfall = "not enough history: 0.00174 node-days of the 100 needed";
    for h in ["Failure rate", "MTTF by job size", "Expected ETTR"] {
        let at = text.find(h).unwrap();
        assert!(
            text[at..].lines().nth(1).unwrap().contains(shortfall),
            "{h} says what it lacks: {text}"
        );
    }
    assert!(text.contains("all GPU jobs: NODE_FAIL + attributed FAILED      2 failures over 0.00174 node-days, 3 runs"), "{text}");
    assert!(!text.contains("ETTR (r_f"), "no ETTR table: {text}");
    assert_readable(&text, "text report");

    let (seen, dom) = drawn(&db, now, "one-minute");
    assert!(seen.contains("UTC (1 min)"), "{seen}");
    assert!(seen.contains("Exposure: 0.00174 node-days, 0.333 GPU-hours"));
    for h in ["Failure rate", "MTTF by job size", "Expected ETTR"] {
        let s = section(&seen, h);
        assert!(s.contains(shortfall), "{h}: {s}");
    }
    assert!(section(&seen, "Failure rate").contains("2 failures over 0.00174 node-days (3 runs)"));
    assert!(
        section(&seen, "MTTF by job size").contains("8 3 2"),
        "the counts per size stay"
    );
    assert!(section(&seen, "Expected ETTR").contains("So far 2 failures"));
    assert!(section(&seen, "Job outcomes").contains("NODE_FAIL 1"));
    assert!(!dom.contains("data-chart=\"mttf\"") && !dom.contains("data-chart=\"failure-rate\""));
    assert_readable(&seen, "HTML report");

    // The lemon report has no fleet rate yet either.
    let lemon = lemon_report(&db, now, "");
    assert!(
        lemon.contains("no failure rate yet: not enough history"),
        "{lemon}"
    );
    assert_readable(&lemon, "lemon report");
}

#[test]
fn a_report_of_one_day_shows_rates_with_their_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SyntheticSpec {
        days: 1,
        jobs: 1_500,
        fleet_nodes: 400,
        max_runtime_hours: 20.0,
        sizes: &lemonade_tests::reliability_history::SIZES_REALISTIC,
        ..SyntheticSpec::default()
    };
    let db = lemon_db(dir.path(), &generate(&spec));
    let now = spec.until.timestamp();

    let text = lemon_report(&db, now, "text");
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("Cluster reliability report: 2025-12-31 ") && first.ends_with(" h)"),
        "one day of history, not the 28-day window: {first}"
    );
    assert!(!text.contains("not enough history"), "{text}");
    let rates = &text[text.find("Failure rate").unwrap()..];
    assert!(
        rates.contains("(95% interval "),
        "few failures carry their interval: {rates}"
    );
    assert_readable(&text, "text report");

    let (seen, dom) = drawn(&db, now, "one-day");
    assert!(
        section(&seen, "Failure rate").contains("(95% interval "),
        "{seen}"
    );
    assert!(section(&seen, "MTTF by job size").contains("1/(N·r_f)"));
    assert!(section(&seen, "Expected ETTR").contains("checkpoint for target"));
    for labels in y_tick_labels(&dom) {
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(unique, labels, "axis ticks repeat");
    }
    assert_readable(&seen, "HTML report");
}

#[test]
fn a_report_of_28_days_shows_every_section_with_figures() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SyntheticSpec::default();
    let db = lemon_db(dir.path(), &generate(&spec));
    let now = spec.until.timestamp();

    let text = lemon_report(&db, now, "text");
    assert!(text.lines().next().unwrap().ends_with("(28.0 d)"), "{text}");
    assert!(!text.contains("not enough history"));
    assert_readable(&text, "text report");

    let (seen, dom) = drawn(&db, now, "28-days");
    assert!(seen.contains("(28.0 d)"));
    assert!(section(&seen, "Failure rate").contains("per 1000 node-days"));
    assert!(section(&seen, "MTTF by job size").contains("1/(N·r_f)"));
    assert!(section(&seen, "Expected ETTR").contains("checkpoint for target"));
    assert!(section(&seen, "Lemon nodes").contains("gpu0017"));
    for id in ["failure-rate", "mttf"] {
        assert!(dom.contains(&format!("data-chart=\"{id}\"")), "{id}");
    }
    for labels in y_tick_labels(&dom) {
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(unique, labels, "axis ticks repeat");
    }
    assert_readable(&seen, "HTML report");
}
