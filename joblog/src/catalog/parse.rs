//! The catalog's TOML: one `[[signature]]` table per signature, every field
//! required and spelled out, so that a typo is an error naming the file, the
//! signature and the field rather than a signature silently never matching.

use super::{CatalogError, Class, Component, Localize, Signature};
use regex::bytes::RegexBuilder;
use std::collections::BTreeSet;

const FIELDS: [&str; 7] = [
    "id",
    "class",
    "component",
    "localize",
    "triggers",
    "regex",
    "description",
];

/// The signatures of one catalog file, in file order. `file` names it in errors.
pub fn signatures(text: &str, file: &str) -> Result<Vec<Signature>, CatalogError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| CatalogError::Syntax {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    if let Some(key) = table.keys().find(|k| *k != "signature") {
        return Err(CatalogError::Syntax {
            file: file.to_string(),
            message: format!("unknown top-level key `{key}` (expected [[signature]] tables)"),
        });
    }
    let entries = match table.get("signature") {
        None => return Ok(Vec::new()),
        Some(toml::Value::Array(entries)) => entries,
        Some(_) => {
            return Err(CatalogError::Syntax {
                file: file.to_string(),
                message: "`signature` must be an array of tables ([[signature]])".into(),
            })
        }
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let sig = Entry::new(entry, i, file)?.signature()?;
        if !seen.insert(sig.id.clone()) {
            return Err(CatalogError::field(
                file,
                &sig.id,
                "id",
                "used twice in this file",
            ));
        }
        out.push(sig);
    }
    Ok(out)
}

/// One `[[signature]]` table, read field by field.
struct Entry<'a> {
    table: &'a toml::Table,
    name: String,
    file: &'a str,
}

impl<'a> Entry<'a> {
    fn new(value: &'a toml::Value, index: usize, file: &'a str) -> Result<Self, CatalogError> {
        // Until its id is read, a signature is named by its place in the file.
        let name = format!("#{}", index + 1);
        let table = value
            .as_table()
            .ok_or_else(|| CatalogError::field(file, &name, "signature", "must be a table"))?;
        let name = match table.get("id").and_then(|v| v.as_str()) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => name,
        };
        Ok(Entry { table, name, file })
    }

    fn error(&self, field: &str, message: impl Into<String>) -> CatalogError {
        CatalogError::field(self.file, &self.name, field, message)
    }

    fn string(&self, field: &str) -> Result<&'a str, CatalogError> {
        match self.table.get(field) {
            None => Err(self.error(field, "missing")),
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s),
            Some(toml::Value::String(_)) => Err(self.error(field, "empty")),
            Some(_) => Err(self.error(field, "must be a string")),
        }
    }

    fn choice<T>(
        &self,
        field: &str,
        parse: fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Result<T, CatalogError> {
        let s = self.string(field)?;
        parse(s).ok_or_else(|| self.error(field, format!("`{s}` is not one of {allowed}")))
    }

    fn triggers(&self) -> Result<Vec<String>, CatalogError> {
        let Some(value) = self.table.get("triggers") else {
            return Err(self.error("triggers", "missing"));
        };
        let list = value
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| self.error("triggers", "must be a non-empty list of strings"))?;
        list.iter()
            .map(|t| match t.as_str() {
                Some(s) if !s.is_empty() => Ok(s.to_string()),
                _ => Err(self.error("triggers", "each trigger must be a non-empty string")),
            })
            .collect()
    }

    fn signature(&self) -> Result<Signature, CatalogError> {
        if let Some(key) = self.table.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(self.error(key, "unknown field"));
        }
        let id = self.string("id")?;
        if !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(self.error("id", "use only a-z, 0-9, - and _"));
        }
        let localize = self.choice(
            "localize",
            Localize::parse,
            "host_in_line, rank_in_line, none",
        )?;
        let pattern = self.string("regex")?;
        let regex = RegexBuilder::new(pattern)
            // A site's pattern is compiled once; the bound keeps a huge
            // repetition from costing the ingest its memory.
            .size_limit(1 << 20)
            .build()
            .map_err(|e| self.error("regex", e.to_string()))?;
        if localize == Localize::HostInLine && !regex.capture_names().any(|n| n == Some("host")) {
            return Err(self.error(
                "regex",
                "localize = \"host_in_line\" needs a (?P<host>...) group",
            ));
        }
        Ok(Signature::new(
            id.to_string(),
            self.choice(
                "class",
                Class::parse,
                "hardware, user, collateral, unknown, ignore",
            )?,
            self.choice(
                "component",
                Component::parse,
                "gpu, network, memory, storage, software",
            )?,
            localize,
            self.triggers()?,
            regex,
            self.string("description")?.to_string(),
        ))
    }
}
