//! The signature catalog: what lines in a job's log mean, kept as data. The
//! defaults ship inside the binary (`joblog/signatures.toml`); a site's
//! file adds signatures, or replaces a default by using its id, the way the
//! XID check's `[checks.xid.catalog."N"]` overrides its built-in table.

mod parse;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem::Finder;
use regex::bytes::Regex;
use std::path::Path;

/// The default catalog, as shipped.
pub const DEFAULT_TOML: &str = include_str!("../../signatures.toml");
/// How the defaults are named in errors and docs.
pub const DEFAULT_FILE: &str = "joblog/signatures.toml";

/// What a signature says about the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A fault of the node's hardware: blames the node it localizes to.
    Hardware,
    /// The job's own failure: never counts against a node.
    User,
    /// What every rank prints when a peer dies: the rank that did not
    /// print it is the suspect.
    Collateral,
    /// Kept as evidence; decides nothing.
    Unknown,
    /// Known noise: claims the line so that no later signature does.
    Ignore,
}

impl Class {
    fn parse(s: &str) -> Option<Class> {
        Some(match s {
            "hardware" => Class::Hardware,
            "user" => Class::User,
            "collateral" => Class::Collateral,
            "unknown" => Class::Unknown,
            "ignore" => Class::Ignore,
            _ => return None,
        })
    }
}

/// The part of the node (or of the job) a signature is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    Gpu,
    Network,
    Memory,
    Storage,
    Software,
}

impl Component {
    fn parse(s: &str) -> Option<Component> {
        Some(match s {
            "gpu" => Component::Gpu,
            "network" => Component::Network,
            "memory" => Component::Memory,
            "storage" => Component::Storage,
            "software" => Component::Software,
            _ => return None,
        })
    }
}

/// How a matching line names the node it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Localize {
    /// The regex's `host` group (NCCL's `host:pid:tid` prefix, `srun: error: HOST:`).
    HostInLine,
    /// The regex's `rank`/`ranks` group, else a `[rankN]:` or `N: ` prefix,
    /// mapped to a node through the job's layout.
    RankInLine,
    /// Never names a node.
    None,
}

impl Localize {
    fn parse(s: &str) -> Option<Localize> {
        Some(match s {
            "host_in_line" => Localize::HostInLine,
            "rank_in_line" => Localize::RankInLine,
            "none" => Localize::None,
            _ => return None,
        })
    }
}

/// One signature of the catalog.
#[derive(Debug, Clone)]
pub struct Signature {
    pub id: String,
    pub class: Class,
    pub component: Component,
    pub localize: Localize,
    pub triggers: Vec<String>,
    pub description: String,
    regex: Regex,
    finders: Vec<Finder<'static>>,
}

impl Signature {
    fn new(
        id: String,
        class: Class,
        component: Component,
        localize: Localize,
        triggers: Vec<String>,
        regex: Regex,
        description: String,
    ) -> Signature {
        let finders = triggers
            .iter()
            .map(|t| Finder::new(t.as_bytes()).into_owned())
            .collect();
        Signature {
            id,
            class,
            component,
            localize,
            triggers,
            description,
            regex,
            finders,
        }
    }

    /// The regex, as written in the catalog.
    pub fn pattern(&self) -> &str {
        self.regex.as_str()
    }

    pub(crate) fn regex(&self) -> &Regex {
        &self.regex
    }

    /// Whether one of the triggers is in `line`: the regex runs only then.
    pub(crate) fn triggered_by(&self, line: &[u8]) -> bool {
        self.finders.iter().any(|f| f.find(line).is_some())
    }
}

/// A catalog file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: signature {signature}: field `{field}`: {message}")]
    Field {
        file: String,
        signature: String,
        field: String,
        message: String,
    },
}

impl CatalogError {
    fn field(file: &str, signature: &str, field: &str, message: impl Into<String>) -> CatalogError {
        CatalogError::Field {
            file: file.to_string(),
            signature: signature.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// The signatures, in the order lines are tried against them, with the
/// prefilter built from their triggers.
#[derive(Debug, Clone)]
pub struct Catalog {
    signatures: Vec<Signature>,
    prefilter: AhoCorasick,
}

impl Catalog {
    /// The shipped defaults ([`DEFAULT_FILE`]).
    pub fn defaults() -> Catalog {
        let signatures = parse::signatures(DEFAULT_TOML, DEFAULT_FILE)
            .expect("the shipped signatures.toml is valid (tested)");
        Catalog::build(signatures)
    }

    /// The defaults with a site's file applied: an entry whose id is a
    /// default's replaces it in place; a new one is tried before all the
    /// defaults, so that a site can claim a line a default would match.
    pub fn with_site_file(path: &Path) -> Result<Catalog, CatalogError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            file: file.clone(),
            source,
        })?;
        Catalog::with_site_toml(&text, &file)
    }

    /// [`Catalog::with_site_file`] on text already read; `file` names it in errors.
    pub fn with_site_toml(text: &str, file: &str) -> Result<Catalog, CatalogError> {
        let site = parse::signatures(text, file)?;
        let mut merged = parse::signatures(DEFAULT_TOML, DEFAULT_FILE)
            .expect("the shipped signatures.toml is valid (tested)");
        let mut added = Vec::new();
        for sig in site {
            match merged.iter_mut().find(|d| d.id == sig.id) {
                Some(default) => *default = sig,
                None => added.push(sig),
            }
        }
        added.extend(merged);
        Ok(Catalog::build(added))
    }

    fn build(signatures: Vec<Signature>) -> Catalog {
        let triggers = signatures.iter().flat_map(|s| s.triggers.iter());
        // Leftmost-first, not the standard semantics: only then does the
        // crate use its SIMD (Teddy) search, ten times faster here (4 GB/s),
        // and any match will do since the whole line is then tried.
        let prefilter = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(triggers)
            .expect("triggers are plain literals");
        Catalog {
            signatures,
            prefilter,
        }
    }

    /// The signatures in the order a line is tried against them.
    pub fn signatures(&self) -> &[Signature] {
        &self.signatures
    }

    /// The signature with this id.
    pub fn get(&self, id: &str) -> Option<&Signature> {
        self.signatures.iter().find(|s| s.id == id)
    }

    pub(crate) fn prefilter(&self) -> &AhoCorasick {
        &self.prefilter
    }
}
