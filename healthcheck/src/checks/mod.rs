//! The checks, one module each. [`all`] is the registry.

use crate::check::Check;
use std::sync::Arc;

/// Every check, in the order runs report them.
pub fn all() -> Vec<Arc<dyn Check>> {
    vec![]
}
