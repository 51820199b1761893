//! Who the last `lemon run` blamed for each failed run (`attributions`).

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};

/// One failed run's verdict as kept: the run (`jobs.id`), the node blamed
/// (`None`: the user's or nobody's), the rule, category and evidence.
pub struct StoredAttribution<'a> {
    pub job: i64,
    pub node: Option<i64>,
    pub rule: &'a str,
    pub category: &'a str,
    pub detail: &'a str,
}

/// Keeps `rows` (replacing earlier verdicts on the same runs) in one
/// transaction: all or none.
pub fn store<'a>(
    conn: &Connection,
    rows: impl Iterator<Item = StoredAttribution<'a>>,
    now: i64,
) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    let result = (|| -> Result<()> {
        let mut up = conn.prepare_cached(
            "INSERT INTO attributions(job, node, rule, category, detail, computed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(job) DO UPDATE SET node = excluded.node, rule = excluded.rule,
                 category = excluded.category, detail = excluded.detail,
                 computed_at = excluded.computed_at",
        )?;
        for a in rows {
            up.execute(params![a.job, a.node, a.rule, a.category, a.detail, now])?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            conn.execute_batch("COMMIT")?;
            Ok(())
        }
        Err(e) => {
            // The error that matters is the one above; a failed rollback
            // leaves the transaction to end with the connection.
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}
