//! Job evidence (issue 36, after Aegis): what a failed job printed says more
//! than its exit code. This crate is the part that needs no Slurm and no
//! database:
//!
//! * [`read_tail`]: the tail of a user-named log file, read as root without
//!   following links, with size, line and time caps ([`Limits`]); a file
//!   that breaks a rule is a [`Skip`] with a short name, never an error;
//! * [`Catalog`]: the signatures (shipped defaults plus a site file), data
//!   in TOML, each with a class, a component and a way to localize;
//! * [`classify`]: one [`Verdict`] per job from its [`JobLayout`] and tails.
//!
//! `lemon ingest` calls these three in that order for each failed job.

mod catalog;
mod classify;
mod evidence;
mod layout;
mod read;
mod scan;
mod tail;

pub use catalog::{Catalog, CatalogError, Class, Component, Localize, Signature, DEFAULT_FILE};
pub use classify::{classify, Verdict, VerdictKind, MAX_EVIDENCE};
pub use evidence::EVIDENCE_CHARS;
pub use layout::JobLayout;
pub use read::{read_head, read_tail, read_tails, stalled_now, Skip};
pub use scan::Hit;
pub use tail::{Limits, LogTail};
