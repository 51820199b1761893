//! A small SVG chart writer: the three charts of the HTML report, with
//! axes, ticks and legends, and no dependency beyond `std`.
//!
//! Every chart is an `<svg data-chart="...">` element; data series are
//! `<path class="series">` (or `<circle class="point">`) so that tests can
//! count them in a rendered page.

use super::render::significant;
// XML needs the same escapes as HTML: the report model owns them.
use crate::document::html::esc;
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 46.0;

/// Colours of successive series (colour-blind-safe Okabe–Ito, then greys).
pub const PALETTE: [&str; 10] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
    "#999999", "#666666",
];

/// A number for an axis label: short, no trailing zeros, and with enough
/// digits that neighbouring ticks (1-2-5 steps, or powers of ten) never
/// read the same: `1.5M` and `2M`, `2e-4` and `4e-4`, not `2M` and `0`.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{}M", significant(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", significant(v / 1e3))
    } else if a < 1e-3 {
        let s = format!("{v:.1e}");
        s.replace(".0e", "e")
    } else {
        significant(v)
    }
}

/// A linear or logarithmic axis mapping data values to pixels.
#[derive(Debug, Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    px_lo: f64,
    px_hi: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, log: bool, px_lo: f64, px_hi: f64) -> Axis {
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
        Axis {
            lo,
            hi,
            log,
            px_lo,
            px_hi,
        }
    }

    fn map(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.max(f64::MIN_POSITIVE).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.px_lo + t.clamp(-0.05, 1.05) * (self.px_hi - self.px_lo)
    }

    /// Round-number ticks: 1-2-5 steps on a linear axis, powers of `base`
    /// on a log axis.
    fn ticks(&self, base: f64) -> Vec<f64> {
        if self.log {
            let mut t = base.powf((self.lo.ln() / base.ln()).floor());
            let mut out = Vec::new();
            while t <= self.hi * 1.0001 {
                if t >= self.lo * 0.9999 {
                    out.push(t);
                }
                t *= base;
            }
            return out;
        }
        let span = self.hi - self.lo;
        let raw = span / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| span / s <= 6.0)
            .unwrap_or(10.0 * mag);
        let mut t = (self.lo / step).ceil() * step;
        let mut out = Vec::new();
        while t <= self.hi + step * 1e-9 {
            out.push(t);
            t += step;
        }
        out
    }
}

/// Upper bound of a linear axis: a little above the data, at least 1.
fn headroom(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

struct Chart {
    out: String,
    x: Axis,
    y: Axis,
}

impl Chart {
    fn open(id: &str, title: &str, x: Axis, y: Axis) -> Chart {
        let mut out = String::new();
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" data-chart="{id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{t}"><title>{t}</title><rect class="frame" x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="#fff" stroke="#ccc"/><text x="{LEFT}" y="18" font-size="13" font-weight="bold">{t}</text>"##,
            id = esc(id),
            t = esc(title),
            w = WIDTH - LEFT - RIGHT,
            h = HEIGHT - TOP - BOTTOM,
        );
        Chart { out, x, y }
    }

    fn axes(&mut self, x_label: &str, y_label: &str, x_ticks: &[(f64, String)], y_base: f64) {
        let y_ticks = self.y.ticks(y_base);
        let (x0, x1) = (LEFT, WIDTH - RIGHT);
        let (y0, y1) = (HEIGHT - BOTTOM, TOP);
        for t in y_ticks {
            let py = self.y.map(t);
            let _ = write!(
                self.out,
                r##"<line class="grid" x1="{x0}" x2="{x1}" y1="{py:.1}" y2="{py:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" font-size="10" text-anchor="end">{l}</text>"##,
                tx = x0 - 4.0,
                ty = py + 3.0,
                l = esc(&short_number(t)),
            );
        }
        for (t, label) in x_ticks {
            let px = self.x.map(*t);
            let _ = write!(
                self.out,
                r##"<line class="tick" x1="{px:.1}" x2="{px:.1}" y1="{y0}" y2="{y2}" stroke="#888"/><text x="{px:.1}" y="{ty}" font-size="10" text-anchor="middle">{l}</text>"##,
                y2 = y0 + 4.0,
                ty = y0 + 15.0,
                l = esc(label),
            );
        }
        let _ = write!(
            self.out,
            r##"<line x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}" stroke="#333"/><line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" stroke="#333"/><text x="{mx}" y="{ly}" font-size="11" text-anchor="middle">{xl}</text><text x="14" y="{my}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {my})">{yl}</text>"##,
            mx = (x0 + x1) / 2.0,
            ly = HEIGHT - 8.0,
            my = (y0 + y1) / 2.0,
            xl = esc(x_label),
            yl = esc(y_label),
        );
    }

    fn legend(&mut self, entries: &[(String, &str, bool)]) {
        for (i, (name, colour, line)) in entries.iter().enumerate() {
            let x = WIDTH - RIGHT + 12.0;
            let y = TOP + 6.0 + i as f64 * 16.0;
            if *line {
                let _ = write!(
                    self.out,
                    r#"<line class="legend" x1="{x}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="2"/>"#,
                    x2 = x + 12.0,
                    y = y + 5.0
                );
            } else {
                let _ = write!(
                    self.out,
                    r#"<rect class="legend" x="{x}" y="{y:.1}" width="12" height="10" fill="{colour}"/>"#
                );
            }
            let _ = write!(
                self.out,
                r#"<text x="{tx}" y="{ty:.1}" font-size="11">{n}</text>"#,
                tx = x + 16.0,
                ty = y + 9.0,
                n = esc(name)
            );
        }
    }

    /// A dashed vertical line at `value` on the x axis: a threshold or a band's bound.
    fn threshold_line(&mut self, value: f64, color: &str) {
        let px = self.x.map(value);
        let _ = write!(
            self.out,
            r#"<line class="threshold" data-threshold="{value}" x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{TOP}" stroke="{color}" stroke-width="2" stroke-dasharray="4 3"/>"#,
            HEIGHT - BOTTOM,
        );
    }

    fn note(&mut self, text: &str) {
        let _ = write!(
            self.out,
            r##"<text class="empty" x="{x}" y="{y}" font-size="12" fill="#888" text-anchor="middle">{t}</text>"##,
            x = (LEFT + WIDTH - RIGHT) / 2.0,
            y = (TOP + HEIGHT - BOTTOM) / 2.0,
            t = esc(text)
        );
    }

    fn close(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// Stacked areas over days: `series[k].1[d]` is series k's value on day d.
pub fn stacked_area(
    id: &str,
    title: &str,
    y_label: &str,
    days: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let n = days.len().max(1);
    let totals: Vec<f64> = (0..n)
        .map(|d| {
            series
                .iter()
                .map(|s| s.1.get(d).copied().unwrap_or(0.0))
                .fold(0.0, |a, b| a + b)
        })
        .collect();
    let max = totals.iter().copied().fold(0.0, f64::max);
    let x = Axis::new(0.0, (n - 1).max(1) as f64, false, LEFT, WIDTH - RIGHT);
    let y = Axis::new(0.0, headroom(max), false, HEIGHT - BOTTOM, TOP);
    let mut chart = Chart::open(id, title, x, y);
    let every = n.div_ceil(8).max(1);
    let x_ticks: Vec<(f64, String)> = days
        .iter()
        .enumerate()
        .filter(|(i, _)| i % every == 0)
        .map(|(i, d)| (i as f64, d.clone()))
        .collect();
    chart.axes("day (window ending)", y_label, &x_ticks, 10.0);
    // A single day still gets a visible band.
    let xs: Vec<f64> = if n == 1 {
        vec![0.0, 1.0]
    } else {
        (0..n).map(|d| d as f64).collect()
    };
    let value = |s: &[f64], i: usize| s.get(i.min(n - 1)).copied().unwrap_or(0.0);
    let mut lower = vec![0.0; xs.len()];
    let mut legend = Vec::new();
    for (k, (name, values)) in series.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        let upper: Vec<f64> = (0..xs.len()).map(|i| lower[i] + value(values, i)).collect();
        let mut d = String::new();
        for (i, &xv) in xs.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if i == 0 { 'M' } else { 'L' },
                chart.x.map(xv),
                chart.y.map(upper[i])
            );
        }
        for (i, &xv) in xs.iter().enumerate().rev() {
            let _ = write!(d, "L{:.1},{:.1} ", chart.x.map(xv), chart.y.map(lower[i]));
        }
        let _ = write!(
            chart.out,
            r#"<path class="series" data-series="{n}" d="{d}Z" fill="{colour}" fill-opacity="0.8" stroke="{colour}"/>"#,
            n = esc(name),
            d = d.trim_end()
        );
        lower = upper;
        legend.push((name.clone(), colour, false));
    }
    if series.is_empty() || max == 0.0 {
        chart.note("no hardware failures in this range");
    }
    chart.legend(&legend);
    chart.close()
}

/// One job size of the MTTF chart.
#[derive(Debug, Clone, Copy)]
pub struct MttfPoint {
    pub gpus: f64,
    pub empirical: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub projected: Option<f64>,
}

/// MTTF (hours, log scale) against job size (GPUs, log scale): empirical
/// points with interval bars, and the projection line.
pub fn mttf_chart(id: &str, title: &str, points: &[MttfPoint]) -> String {
    let values: Vec<f64> = points
        .iter()
        .flat_map(|p| {
            [
                p.empirical,
                p.projected,
                p.ci.map(|c| c.0),
                p.ci.map(|c| c.1),
            ]
        })
        .flatten()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
        )
    };
    let gmin = points.first().map_or(8.0, |p| p.gpus);
    let gmax = points.last().map_or(4096.0, |p| p.gpus).max(gmin * 2.0);
    let x = Axis::new(gmin, gmax, true, LEFT + 10.0, WIDTH - RIGHT - 10.0);
    let y = Axis::new(lo, hi, true, HEIGHT - BOTTOM, TOP);
    let mut chart = Chart::open(id, title, x, y);
    let x_ticks: Vec<(f64, String)> = points
        .iter()
        .map(|p| (p.gpus, short_number(p.gpus)))
        .collect();
    chart.axes("job size (GPUs)", "MTTF (hours)", &x_ticks, 10.0);
    mttf_projection(&mut chart, points);
    mttf_points(&mut chart, points);
    if values.is_empty() {
        chart.note("no failures: nothing to project");
    }
    chart.legend(&[
        ("1/(N·r_f)".to_string(), PALETTE[0], true),
        ("empirical".to_string(), PALETTE[3], false),
    ]);
    chart.close()
}

/// The projection line `1/(N·r_f)` of the MTTF chart.
fn mttf_projection(chart: &mut Chart, points: &[MttfPoint]) {
    let proj: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.gpus, p.projected?)))
        .collect();
    if !proj.is_empty() {
        let mut d = String::new();
        for (i, (g, h)) in proj.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if i == 0 { 'M' } else { 'L' },
                chart.x.map(*g),
                chart.y.map(*h)
            );
        }
        let _ = write!(
            chart.out,
            r#"<path class="series projection" d="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="6 4"/>"#,
            d.trim_end(),
            PALETTE[0]
        );
    }
}

/// The empirical points of the MTTF chart with their interval bars.
fn mttf_points(chart: &mut Chart, points: &[MttfPoint]) {
    for p in points {
        let px = chart.x.map(p.gpus);
        if let Some((l, h)) = p.ci {
            let _ = write!(
                chart.out,
                r#"<path class="series interval" d="M{px:.1},{:.1} L{px:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="{c}" fill="none"/>"#,
                chart.y.map(l),
                chart.y.map(h),
                px - 4.0,
                chart.y.map(l),
                px + 4.0,
                chart.y.map(l),
                px - 4.0,
                chart.y.map(h),
                px + 4.0,
                chart.y.map(h),
                c = PALETTE[3]
            );
        }
        if let Some(e) = p.empirical {
            let _ = write!(
                chart.out,
                r#"<circle class="point" data-gpus="{g}" cx="{px:.1}" cy="{:.1}" r="4" fill="{c}"><title>{g} GPUs: {e:.1} h</title></circle>"#,
                chart.y.map(e),
                g = p.gpus,
                c = PALETTE[3]
            );
        }
    }
}

/// The empirical CDF of one signal over the nodes, with its threshold.
pub fn cdf_chart(id: &str, title: &str, sorted: &[f64], threshold: Option<f64>) -> String {
    let max = sorted
        .last()
        .copied()
        .unwrap_or(0.0)
        .max(threshold.unwrap_or(0.0));
    let min = sorted.first().copied().unwrap_or(0.0).min(0.0);
    let x = Axis::new(min, headroom(max), false, LEFT, WIDTH - RIGHT);
    let y = Axis::new(0.0, 1.0, false, HEIGHT - BOTTOM, TOP);
    let mut chart = Chart::open(id, title, x, y);
    let x_ticks: Vec<(f64, String)> = x
        .ticks(10.0)
        .into_iter()
        .map(|t| (t, short_number(t)))
        .collect();
    chart.axes("value", "share of nodes ≤ value", &x_ticks, 10.0);
    if !sorted.is_empty() {
        let n = sorted.len() as f64;
        let mut d = format!("M{:.1},{:.1}", chart.x.map(sorted[0]), chart.y.map(0.0));
        let mut prev = 0.0;
        let mut i = 0;
        // One step per distinct value keeps integer signals on big fleets small.
        while i < sorted.len() {
            let v = sorted[i];
            while i < sorted.len() && sorted[i] == v {
                i += 1;
            }
            let f = i as f64 / n;
            let _ = write!(
                d,
                " L{px:.1},{:.1} L{px:.1},{:.1}",
                chart.y.map(prev),
                chart.y.map(f),
                px = chart.x.map(v)
            );
            prev = f;
        }
        let _ = write!(
            d,
            " L{:.1},{:.1}",
            chart.x.map(headroom(max)),
            chart.y.map(1.0)
        );
        let _ = write!(
            chart.out,
            r#"<path class="series cdf" d="{d}" fill="none" stroke="{}" stroke-width="2"/>"#,
            PALETTE[0]
        );
    } else {
        chart.note("no values");
    }
    let mut legend = vec![("nodes".to_string(), PALETTE[0], true)];
    if let Some(t) = threshold {
        chart.threshold_line(t, PALETTE[3]);
        legend.push((format!("threshold {}", short_number(t)), PALETTE[3], true));
    }
    chart.legend(&legend);
    chart.close()
}

/// One node's value on a [`distribution_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct NodePoint {
    pub node: String,
    pub value: f64,
    /// Its validation failed: drawn apart and named.
    pub failing: bool,
}

/// One metric's values over nodes as an empirical CDF of dots (the x axis
/// spans the values, not from 0: a band a few percent wide must show),
/// failing nodes marked and named, the band's bound a dashed line.
pub fn distribution_chart(
    id: &str,
    title: &str,
    points: &[NodePoint],
    bound: Option<f64>,
) -> String {
    let mut sorted: Vec<&NodePoint> = points.iter().filter(|p| p.value.is_finite()).collect();
    sorted.sort_by(|a, b| a.value.total_cmp(&b.value));
    let values = sorted.iter().map(|p| p.value).chain(bound);
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.01).max(1e-9);
    let (lo, hi) = if lo.is_finite() {
        (lo - pad, hi + pad)
    } else {
        (0.0, 1.0)
    };
    let x = Axis::new(lo, hi, false, LEFT, WIDTH - RIGHT);
    let y = Axis::new(0.0, 1.0, false, HEIGHT - BOTTOM, TOP);
    let mut chart = Chart::open(id, title, x, y);
    let x_ticks: Vec<(f64, String)> = (x.ticks(10.0).into_iter())
        .map(|t| (t, short_number(t)))
        .collect();
    chart.axes("value", "share of nodes ≤ value", &x_ticks, 10.0);
    let n = sorted.len() as f64;
    for (i, p) in sorted.iter().enumerate() {
        let (px, py) = (chart.x.map(p.value), chart.y.map((i + 1) as f64 / n));
        let (class, colour, r) = if p.failing {
            ("point failing", PALETTE[3], 5.0)
        } else {
            ("point", PALETTE[0], 3.0)
        };
        let _ = write!(
            chart.out,
            r#"<circle class="{class}" data-node="{node}" cx="{px:.1}" cy="{py:.1}" r="{r}" fill="{colour}"><title>{node} {v}</title></circle>"#,
            node = esc(&p.node),
            v = short_number(p.value),
        );
        if p.failing {
            let _ = write!(
                chart.out,
                r#"<text class="failing-label" x="{tx:.1}" y="{ty:.1}" font-size="10" fill="{colour}">{node}</text>"#,
                tx = px + 7.0,
                ty = py + 3.0,
                node = esc(&p.node),
            );
        }
    }
    if sorted.is_empty() {
        chart.note("no results");
    }
    let mut legend = vec![
        ("passed".to_string(), PALETTE[0], false),
        ("failed".to_string(), PALETTE[3], false),
    ];
    if let Some(b) = bound {
        chart.threshold_line(b, PALETTE[1]);
        legend.push((format!("band {}", short_number(b)), PALETTE[1], true));
    }
    chart.legend(&legend);
    chart.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_axis_ticks_never_read_the_same() {
        for (lo, hi, log) in [
            (0.0, 7.9e6, false),
            (0.0, 2.6e6, false),
            (0.0, 23_000.0, false),
            (0.0, 1.1, false),
            (0.0, 0.001_1, false),
            (0.0, 3.3e-4, false),
            (1e-5, 10.0, true),
            (1e-3, 1e7, true),
        ] {
            let axis = Axis::new(lo, hi, log, 0.0, 100.0);
            let labels: Vec<String> = axis.ticks(10.0).into_iter().map(short_number).collect();
            assert!(labels.len() >= 2, "{lo}..{hi}: {labels:?}");
            let mut unique = labels.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), labels.len(), "{lo}..{hi}: {labels:?}");
        }
    }
}
