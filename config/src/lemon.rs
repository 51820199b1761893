//! `[lemon]`: the head node's lemon job.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[lemon]`: where the lemon job keeps its history.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LemonSettings {
    pub db_path: PathBuf,
}

impl Default for LemonSettings {
    fn default() -> Self {
        Self {
            db_path: PathBuf::from("/var/lib/lemonade/lemon.db"),
        }
    }
}
