//! The learned bands as the nodes read them: `validate-criteria.json` in
//! the spool directory (`lemonade_validate::criteria_file`), replaced
//! atomically each `lemon run`. SKUs with too few results have no band in
//! it: the nodes then judge by their static floors alone.

use super::criteria::Direction;
use super::learn::Learned;
use crate::error::{LemonError, Result};
use ::validate::criteria_file::{self, Band, CriteriaFile};
use std::path::Path;

pub use criteria_file::FILE_NAME;

/// The file's contents for `learned`, at `now`.
pub fn criteria_file(learned: &Learned, now: i64) -> CriteriaFile {
    CriteriaFile {
        generated_at: now,
        bands: (learned.bands.iter())
            .map(|b| Band {
                sku: b.sku.clone(),
                metric: b.metric.clone(),
                direction: match b.direction {
                    Direction::HigherIsBetter => criteria_file::Direction::HigherIsBetter,
                    Direction::LowerIsBetter => criteria_file::Direction::LowerIsBetter,
                    Direction::MustBeZero => criteria_file::Direction::MustBeZero,
                },
                bound: b.bound(),
                detail: format!("{}: {}", b.band.rule.name(), b.band.detail),
            })
            .collect(),
    }
}

/// Writes the file at `path`, atomically.
pub fn write(path: &Path, learned: &Learned, now: i64) -> Result<()> {
    criteria_file::write(path, &criteria_file(learned, now))
        .map_err(|e| LemonError::Usage(format!("criteria file: {e}")))
}
