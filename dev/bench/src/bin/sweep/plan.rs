//! The batch statement's plan: `EXPLAIN (ANALYZE, BUFFERS)` of the sweep's `DELETE` after a
//! few batches, the text of an `EXPLAIN`, and one sentence on what a plan shows.

use std::time::SystemTime;

use anyhow::Result;
use shared::config::SweepSettings;
use tokio_postgres::types::Type;
use tokio_postgres::Row;

use crate::setup::Bench;
use crate::sources::SOURCES;

impl Bench {
    /// Runs `n` batches of the first source's expired keys as the sweep does, then the
    /// `EXPLAIN (ANALYZE, BUFFERS)` of the next one (rolled back).
    pub async fn explain_after_batches(&self, n: usize) -> Result<String> {
        let conn = self.pool.get().await?;
        let now = SystemTime::now();
        let cutoff = self.sources.retention(SOURCES[0]).completed_cutoff(now);
        let limit = SweepSettings::default().batch_size;
        let mut after = SystemTime::UNIX_EPOCH;
        for _ in 0..n {
            conn.begin().await?;
            let deleted = shared::sweep::sql::delete_expired(
                &conn,
                SOURCES[0],
                shared::sweep::sql::Expired::Completed,
                after,
                cutoff,
                limit,
            )
            .await?;
            conn.batch_execute("COMMIT").await?;
            after = deleted.last.unwrap_or(after);
        }
        let text = format!(
            "EXPLAIN (ANALYZE, BUFFERS) {}",
            shared::sweep::sql::DELETE_COMPLETED.text
        );
        let statement = self
            .admin
            .prepare_typed(
                &text,
                &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
            )
            .await?;
        self.admin.batch_execute("BEGIN").await?;
        let rows = self
            .admin
            .query(&statement, &[&SOURCES[0], &after, &cutoff, &limit])
            .await;
        self.admin.batch_execute("ROLLBACK").await?;
        Ok(plan_text(&rows?))
    }
}

/// The text of an `EXPLAIN`'s rows, one line each.
pub fn plan_text(rows: &[Row]) -> String {
    let mut plan = String::new();
    for row in rows {
        plan.push_str(row.get::<_, &str>(0));
        plan.push('\n');
    }
    plan
}

/// One sentence on what the plan shows, from its text.
pub fn plan_sentence(plan: &str) -> String {
    let tid = plan.contains("Tid Scan");
    let index = plan
        .lines()
        .find(|l| l.contains("Index Scan") || l.contains("Index Only Scan"))
        .map(|l| l.trim().trim_start_matches("->").trim().to_owned());
    let lines: Vec<&str> = plan.lines().collect();
    let buffers_after = |node: &str| {
        lines
            .iter()
            .position(|l| l.contains(node))
            .and_then(|at| {
                lines[at..]
                    .iter()
                    .find(|l| l.trim_start().starts_with("Buffers:"))
            })
            .map_or("?".to_owned(), |l| {
                l.trim().trim_start_matches("Buffers:").trim().to_owned()
            })
    };
    let rows = |node: &str| {
        lines
            .iter()
            .find(|l| l.contains(node))
            .and_then(|l| l.split("rows=").nth(2))
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "What it shows: the DELETE is {} over the ARRAY of ctids ({} rows, buffers {}), and the \
         inner SELECT {} ({} rows, buffers {}): the work is proportional to the batch, not to \
         the ledger or to what earlier batches already emptied.",
        if tid {
            "a TID scan"
        } else {
            "NOT a TID scan (check the plan)"
        },
        rows("Tid Scan"),
        buffers_after("Tid Scan"),
        index.map_or(
            "is not an index scan (check the plan)".to_owned(),
            |i| format!(
                "is one range of `{}` starting at the keyset (`claimed_at >= $2`)",
                i.split(" on ")
                    .next()
                    .unwrap_or(&i)
                    .trim_start_matches("Index Scan using ")
            )
        ),
        rows("Index Scan"),
        buffers_after("Index Scan"),
    )
}
