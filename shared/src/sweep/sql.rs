//! The sweeper's statements: which sources have keys, delete one bounded batch of expired
//! keys (or outbox messages) of one source, or of the counts of rejected deliveries, and the
//! oldest key left.
//!
//! A batch is `DELETE ... WHERE ctid = ANY (ARRAY(SELECT ctid ... ORDER BY claimed_at LIMIT n
//! FOR UPDATE SKIP LOCKED))`:
//! - the inner SELECT walks one source's range of `webhook_event_source_claimed_at_idx` (dead
//!   letters: `webhook_event_dead_idx`; outbox messages: `outbox_delivered_idx` and
//!   `outbox_dead_idx`) from where the previous batch ended (`>= after`), so it
//!   reads about the rows it deletes, never the already emptied start of the range again;
//! - `ARRAY(...)` makes the outer DELETE a TID scan of exactly those rows (an `IN (SELECT ..)`
//!   can be planned as a semi-join over the whole table);
//! - `SKIP LOCKED` steps over a key a delivery holds right now (it is being claimed again):
//!   the delivery is never made to wait on the sweep, and the next run sees the key.

use std::time::SystemTime;

use tokio_postgres::types::Type;

use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};

/// What a batch deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// `completed` keys claimed before the cutoff (the source's retention).
    Completed,
    /// `dead` keys that died before the cutoff (the dead-letter retention).
    Dead,
    /// `delivered` outbox messages delivered before the cutoff (the source's retention).
    Delivered,
    /// `dead` outbox messages that died before the cutoff (the dead-letter retention).
    DeadMessages,
    /// `rejected_delivery` buckets (hours) that started before the cutoff
    /// (`HOOKLEDGER_REJECTED_RETENTION_DAYS`), of every source at once: [`delete_rejected`].
    Rejected,
}

/// One batch's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// Rows deleted.
    pub rows: u64,
    /// The newest `claimed_at` (or `dead_at`) deleted: where the next batch starts.
    pub last: Option<SystemTime>,
}

/// One batch of expired `completed` keys, exactly as [`delete_expired`] sends it (public so
/// `make bench-sweep` can `EXPLAIN` the real text). Parameters: `$1` source (text), `$2` the
/// keyset start (timestamptz, the previous batch's [`Deleted::last`]), `$3` the cutoff
/// (timestamptz), `$4` the batch size (int8). One row back: `(count(*) int8, max(claimed_at)
/// timestamptz)`.
pub static DELETE_COMPLETED: Sql = Sql {
    text: "\
WITH deleted AS (
    DELETE FROM webhook_event
    WHERE ctid = ANY (ARRAY(
        SELECT ctid
        FROM webhook_event
        WHERE source = $1
          AND claimed_at >= $2
          AND claimed_at < $3
          AND status = 'completed'
        ORDER BY claimed_at
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ))
      -- Re-checked on the locked row (never claimed, processing, failed or dead).
      AND status = 'completed'
      AND claimed_at < $3
    RETURNING claimed_at
)
SELECT count(*), max(claimed_at) FROM deleted",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// One batch of `$table` rows of source `$1` in `$status` whose `$at` is in `[$2, $3)`, at most
/// `$4`, oldest first; one row back: `(count(*), max($at))`. The status and the cutoff are
/// re-checked on the locked row.
macro_rules! delete_batch {
    ($table:literal, $status:literal, $at:literal) => {
        concat!(
            "WITH deleted AS (
    DELETE FROM ",
            $table,
            "
    WHERE ctid = ANY (ARRAY(
        SELECT ctid
        FROM ",
            $table,
            "
        WHERE source = $1
          AND status = '",
            $status,
            "'
          AND ",
            $at,
            " >= $2
          AND ",
            $at,
            " < $3
        ORDER BY ",
            $at,
            "
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ))
      AND status = '",
            $status,
            "'
      AND ",
            $at,
            " < $3
    RETURNING ",
            $at,
            "
)
SELECT count(*), max(",
            $at,
            ") FROM deleted"
        )
    };
}

static DELETE_DEAD: Sql = Sql {
    text: delete_batch!("webhook_event", "dead", "dead_at"),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

static DELETE_DELIVERED: Sql = Sql {
    text: delete_batch!("outbox", "delivered", "delivered_at"),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

static DELETE_DEAD_MESSAGES: Sql = Sql {
    text: delete_batch!("outbox", "dead", "dead_at"),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Deletes at most `limit` rows of `source` that are `expired` before `cutoff`, starting at
/// `after` (the previous batch's [`Deleted::last`], or the epoch), in the caller's
/// transaction. [`Expired::Rejected`] is every source's at once ([`delete_rejected`]; `source`
/// is not used).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn delete_expired(
    conn: &Connection,
    source: &str,
    expired: Expired,
    after: SystemTime,
    cutoff: SystemTime,
    limit: i64,
) -> Result<Deleted, LedgerError> {
    let sql = match expired {
        Expired::Completed => &DELETE_COMPLETED,
        Expired::Dead => &DELETE_DEAD,
        Expired::Delivered => &DELETE_DELIVERED,
        Expired::DeadMessages => &DELETE_DEAD_MESSAGES,
        Expired::Rejected => return delete_rejected(conn, after, cutoff, limit).await,
    };
    let statement = conn.prepare(sql).await?;
    let rows = conn
        .query(&statement, &[&source, &after, &cutoff, &limit])
        .await?;
    deleted(&rows)
}

/// A batch's one row back, `(count(*), max(at))`.
pub(super) fn deleted(rows: &[tokio_postgres::Row]) -> Result<Deleted, LedgerError> {
    let Some(row) = rows.first() else {
        return Ok(Deleted {
            rows: 0,
            last: None,
        });
    };
    let rows: i64 = row.try_get(0)?;
    Ok(Deleted {
        rows: u64::try_from(rows).unwrap_or(0),
        last: row.try_get(1)?,
    })
}

/// One batch of `rejected_delivery` buckets that started in `[$1, $2)`, at most `$3`, oldest
/// first; one row back: `(count(*), max(bucket))`.
pub static DELETE_REJECTED: Sql = Sql {
    text: "\
WITH deleted AS (
    DELETE FROM rejected_delivery
    WHERE ctid = ANY (ARRAY(
        -- rejected_delivery_bucket_idx, from where the previous batch ended. No row lock: the
        -- receivers only ever count into the current hour, never into a bucket this old.
        SELECT ctid
        FROM rejected_delivery
        WHERE bucket >= $1
          AND bucket < $2
        ORDER BY bucket
        LIMIT $3
    ))
      AND bucket < $2
    RETURNING bucket
)
SELECT count(*), max(bucket) FROM deleted",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Deletes at most `limit` counts of rejected deliveries (every source's) whose hour started
/// before `cutoff`, from `after` on, in the caller's transaction.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn delete_rejected(
    conn: &Connection,
    after: SystemTime,
    cutoff: SystemTime,
    limit: i64,
) -> Result<Deleted, LedgerError> {
    let statement = conn.prepare(&DELETE_REJECTED).await?;
    let rows = conn.query(&statement, &[&after, &cutoff, &limit]).await?;
    deleted(&rows)
}

/// [`sources_present`]'s statement (public so benchmarks and plan tests explain the real text).
pub static SOURCES_PRESENT: Sql = Sql {
    text: "\
-- A skip scan over the primary key: one index probe per distinct source, however many rows.
WITH RECURSIVE present(source) AS (
    (SELECT source FROM webhook_event ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT w.source FROM webhook_event w WHERE w.source > present.source
            ORDER BY w.source LIMIT 1)
    FROM present
    WHERE present.source IS NOT NULL
)
SELECT source FROM present WHERE source IS NOT NULL",
    types: &[],
};

/// Every source that has at least one key in the ledger, configured or not, in name order.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn sources_present(conn: &Connection) -> Result<Vec<String>, LedgerError> {
    let statement = conn.prepare(&SOURCES_PRESENT).await?;
    conn.query(&statement, &[])
        .await?
        .iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

/// [`outbox_sources_present`]'s statement: the same skip scan over the outbox's primary key.
pub static OUTBOX_SOURCES_PRESENT: Sql = Sql {
    text: "\
WITH RECURSIVE present(source) AS (
    (SELECT source FROM outbox ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT o.source FROM outbox o WHERE o.source > present.source
            ORDER BY o.source LIMIT 1)
    FROM present
    WHERE present.source IS NOT NULL
)
SELECT source FROM present WHERE source IS NOT NULL",
    types: &[],
};

/// Every source that has at least one outbox message, configured or not, in name order: a
/// source removed from the configuration whose keys were swept can still have messages (they
/// are delivered after their events are claimed, and dead ones are kept longer).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn outbox_sources_present(conn: &Connection) -> Result<Vec<String>, LedgerError> {
    let statement = conn.prepare(&OUTBOX_SOURCES_PRESENT).await?;
    conn.query(&statement, &[])
        .await?
        .iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

/// [`oldest_key`]'s statement (public so benchmarks and plan tests explain the real text).
pub static OLDEST_KEY: Sql = Sql {
    text: "\
SELECT claimed_at
FROM webhook_event
WHERE source = $1
ORDER BY claimed_at
LIMIT 1",
    types: &[Type::TEXT],
};

/// The `claimed_at` of `source`'s oldest key (any status), or `None` when it has none. One
/// probe of `webhook_event_source_claimed_at_idx`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn oldest_key(
    conn: &Connection,
    source: &str,
) -> Result<Option<SystemTime>, LedgerError> {
    let statement = conn.prepare(&OLDEST_KEY).await?;
    match conn.query_opt(&statement, &[&source]).await? {
        Some(row) => Ok(Some(row.try_get(0)?)),
        None => Ok(None),
    }
}
