//! The fleet's bands per SKU and metric, learned from its recent passed
//! results (issue 31 part 3): what `lemon run` publishes for the nodes to
//! judge their next validation by, and what `lemon report` shows. Pure:
//! each node's latest passed result in (the caller picks the window), the
//! bands and the SKUs still on their static floors out. The rule is
//! [`criteria::fleet_band`]'s: every result a peer of the node judged next.

use super::criteria::{self, Band, Direction, FleetBand};
use lemonade_config::ValidateSettings;
use serde::Serialize;
use std::collections::BTreeMap;

/// One SKU's learned band for one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkuBand {
    pub sku: String,
    pub metric: String,
    pub direction: Direction,
    pub band: Band,
    /// How many nodes' results it was learned from.
    pub results: usize,
}

impl SkuBand {
    /// The bound a node must not cross: the minimum of a higher-is-better
    /// metric, the maximum of a lower-is-better one.
    pub fn bound(&self) -> f64 {
        match self.direction {
            Direction::LowerIsBetter => self.band.max.unwrap_or(f64::INFINITY),
            _ => self.band.min.unwrap_or(f64::NEG_INFINITY),
        }
    }

    /// `avg_busbw >= 456.4 [learned: ...]`.
    pub fn text(&self) -> String {
        let op = if self.direction == Direction::LowerIsBetter {
            "<="
        } else {
            ">="
        };
        format!(
            "{} {op} {} [{}: {}]",
            self.metric,
            criteria::short(self.bound()),
            self.band.rule.name(),
            self.band.detail
        )
    }
}

/// A SKU's metric with too few results to learn from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TooFew {
    pub sku: String,
    pub metric: String,
    pub results: usize,
    pub needed: usize,
    /// A `[[validate.floor]]` applies meanwhile.
    pub floor: bool,
}

impl TooFew {
    /// `A100x8 avg_busbw: static floor: 5 results of 8 needed`, as `lemon
    /// validate judge` says it.
    pub fn text(&self) -> String {
        let rule = if self.floor {
            "static floor"
        } else {
            "no floor configured"
        };
        format!(
            "{} {}: {rule}: {} results of {} needed",
            self.sku, self.metric, self.results, self.needed
        )
    }
}

/// The notes of `too_few` for people: one line per metric on a static
/// floor, and one line per SKU for its metrics with no floor, which are
/// many (nccl-tests gives a bus bandwidth per message size: 64 lines of
/// the same news otherwise).
pub fn too_few_notes(too_few: &[TooFew]) -> Vec<String> {
    let mut notes = Vec::new();
    let mut bare: BTreeMap<(&str, usize, usize), Vec<&str>> = BTreeMap::new();
    for t in too_few {
        if t.floor {
            notes.push(t.text());
        } else {
            (bare
                .entry((t.sku.as_str(), t.results, t.needed))
                .or_default())
            .push(&t.metric);
        }
    }
    for ((sku, results, needed), metrics) in bare {
        let Some((first, rest)) = metrics.split_first() else {
            continue;
        };
        let named = match rest.len() {
            0 => first.to_string(),
            n => format!("{first} and {n} more metrics"),
        };
        notes.push(format!(
            "{sku} {named}: no floor configured: {results} results of {needed} needed"
        ));
    }
    notes
}

/// Everything learned from one window of results.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Learned {
    /// By SKU, then metric.
    pub bands: Vec<SkuBand>,
    pub too_few: Vec<TooFew>,
}

/// Learns the bands from `(sku, metric, value)`, one per node and metric
/// (each node's latest passed result).
pub fn learn<'a>(
    settings: &ValidateSettings,
    results: impl IntoIterator<Item = (&'a str, &'a str, f64)>,
) -> Learned {
    let mut groups: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for (sku, metric, value) in results {
        if value.is_finite() {
            groups.entry((sku, metric)).or_default().push(value);
        }
    }
    let mut out = Learned::default();
    for ((sku, metric), values) in groups {
        match criteria::fleet_band(settings, sku, metric, &values) {
            FleetBand::Learned(band) => out.bands.push(SkuBand {
                sku: sku.to_string(),
                metric: metric.to_string(),
                direction: criteria::direction(settings, metric)
                    .expect("a learned band has a direction"),
                band,
                results: values.len(),
            }),
            FleetBand::TooFew(results, floor) => out.too_few.push(TooFew {
                sku: sku.to_string(),
                metric: metric.to_string(),
                results,
                needed: settings.min_results,
                floor,
            }),
            FleetBand::NotLearned => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sku_learns_its_own_bands_and_a_small_one_says_it_stays_on_floors() {
        let s = ValidateSettings::default();
        let mut rows: Vec<(String, &str, f64)> = Vec::new();
        for i in 0..12 {
            rows.push(("H100x8".into(), "avg_busbw", 470.0 + (i % 3) as f64));
            rows.push(("H100x8".into(), "wrong_total", 0.0));
            rows.push(("H100x8".into(), "time.total", 60.0));
        }
        for _ in 0..5 {
            rows.push(("A100x8".into(), "avg_busbw", 230.0));
        }
        let learned = learn(&s, rows.iter().map(|(k, m, v)| (k.as_str(), *m, *v)));
        let texts: Vec<String> = learned.bands.iter().map(SkuBand::text).collect();
        assert_eq!(
            texts,
            [
                "avg_busbw >= 461.6 [learned: median 471 of 12 peers - 9.42 (min_gap 2% of the median)]",
                "time.total <= 61.2 [learned: median 60 of 12 peers + 1.2 (min_gap 2% of the median)]",
            ]
        );
        assert!(learned
            .bands
            .iter()
            .all(|b| b.sku == "H100x8" && b.results == 12));
        let notes: Vec<String> = learned.too_few.iter().map(TooFew::text).collect();
        assert_eq!(
            notes,
            ["A100x8 avg_busbw: no floor configured: 5 results of 8 needed"]
        );
    }
    #[test]
    fn a_skus_many_metrics_without_a_floor_make_one_note_and_each_floored_metric_its_own() {
        let note = |metric: &str, floor: bool| TooFew {
            sku: "H100x8".into(),
            metric: metric.into(),
            results: 1,
            needed: 8,
            floor,
        };
        let mut too_few = vec![note("avg_busbw", true)];
        for size in ["1024", "2048", "4096"] {
            too_few.push(note(&format!("busbw.in_place.{size}"), false));
        }
        too_few.push(TooFew {
            sku: "A100x8".into(),
            ..note("avg_busbw", false)
        });
        assert_eq!(
            too_few_notes(&too_few),
            [
                "H100x8 avg_busbw: static floor: 1 results of 8 needed",
                "A100x8 avg_busbw: no floor configured: 1 results of 8 needed",
                "H100x8 busbw.in_place.1024 and 2 more metrics: no floor configured: 1 results of 8 needed",
            ]
        );
    }
}
