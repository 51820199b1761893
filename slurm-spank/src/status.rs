//! The node's health as tasks see it: read from the status file that every
//! healthcheck run writes (`StoreSettings::status_path`).

/// `LEMONADE_NODE_HEALTH` and `LEMONADE_LAST_CHECK` for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    /// `ok`, or `warning` for anything worse or unknown.
    pub health: &'static str,
    /// Unix seconds of the last run.
    pub checked_at: i64,
}

/// Parses `<severity> <unix seconds>`; `None` for anything else.
pub fn parse(text: &str) -> Option<NodeHealth> {
    let mut words = text.split_whitespace();
    let severity = words.next()?;
    let checked_at = words.next()?.parse().ok()?;
    let health = if severity == "ok" { "ok" } else { "warning" };
    Some(NodeHealth { health, checked_at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_status_line() {
        assert_eq!(
            parse("ok 1700000000\n"),
            Some(NodeHealth {
                health: "ok",
                checked_at: 1_700_000_000
            })
        );
        assert_eq!(parse("warning 5").unwrap().health, "warning");
        assert_eq!(parse("unknown 5").unwrap().health, "warning");
        assert_eq!(parse(""), None);
        assert_eq!(parse("ok soon"), None);
    }
}
