//! The operator's statements on dead outbox messages: back to `pending`, due now, for the
//! worker's next dispatch, keeping what the message was in `history`.
//!
//! As for events (`super::sql`), rows are taken with `FOR UPDATE SKIP LOCKED` and the status
//! is re-checked on the locked row, so each message moves at most once per run (once `pending`
//! it no longer matches). A moved message keeps its idempotency key: the target sees the same
//! `{source}:{event_id}:{n}` it may already have seen, and deduplicates.

use std::time::SystemTime;

use tokio_postgres::types::Type;

use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};
use crate::outbox::idempotency_key;

/// What [`classify_ids`] found for the event ids an operator named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxIdClasses {
    /// Dead messages of the named events (each counts).
    pub dead_messages: u64,
    /// Named events with at least one dead message: what a re-drive moves.
    pub with_dead: Vec<String>,
    /// Named events with messages, none of them dead: left alone.
    pub not_dead: Vec<String>,
    /// Named events with no outbox message at all.
    pub not_found: Vec<String>,
}

static CLASSIFY_IDS: Sql = Sql {
    text: "\
-- An erased dead message (hookledger forget) has nothing left to send: not counted as dead.
SELECT event_id, count(*) FILTER (WHERE status = 'dead' AND payload_dropped_at IS NULL), count(*)
FROM outbox
WHERE source = $1
  AND event_id = ANY ($2)
GROUP BY event_id",
    types: &[Type::TEXT, Type::TEXT_ARRAY],
};

/// Reads what outbox messages each of `event_ids` has in `source` (primary-key prefix reads,
/// no locks).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn classify_ids(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
) -> Result<OutboxIdClasses, LedgerError> {
    let statement = conn.prepare(&CLASSIFY_IDS).await?;
    let rows = conn.query(&statement, &[&source, &event_ids]).await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get(0)?;
        let dead: i64 = row.try_get(1)?;
        found.insert(id, u64::try_from(dead).unwrap_or(0));
    }
    let mut classes = OutboxIdClasses::default();
    for id in event_ids {
        let list = match found.get(id) {
            Some(0) => &mut classes.not_dead,
            Some(_) => &mut classes.with_dead,
            None => &mut classes.not_found,
        };
        if !list.contains(id) {
            list.push(id.clone());
        }
    }
    classes.dead_messages = classes.with_dead.iter().map(|id| found[id]).sum();
    Ok(classes)
}

/// The SET list both re-drive statements share: due now, attempts from 0, the previous state
/// appended to `history`.
macro_rules! redrive_set {
    () => {
        "SET status = 'pending',
    attempts = 0,
    dead_at = NULL,
    lease_expires_at = NULL,
    next_attempt_at = now(),
    history = coalesce(o.history, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'action', 'redrive', 'at', now(), 'status', 'dead', 'attempts', o.attempts,
        'last_error', o.last_error, 'last_status', o.last_status, 'dead_at', o.dead_at))"
    };
}

static REDRIVE_IDS: Sql = Sql {
    text: concat!(
        "\
WITH picked AS (
    SELECT source, event_id, n
    FROM outbox
    WHERE source = $1
      AND event_id = ANY ($2)
      AND status = 'dead'
      -- An erased message (hookledger forget) has nothing left to send.
      AND payload_dropped_at IS NULL
    ORDER BY event_id, n
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox AS o
",
        redrive_set!(),
        "
FROM picked
WHERE o.source = picked.source
  AND o.event_id = picked.event_id
  AND o.n = picked.n
RETURNING o.event_id, o.n"
    ),
    types: &[Type::TEXT, Type::TEXT_ARRAY, Type::INT8],
};

static REDRIVE_BETWEEN: Sql = Sql {
    text: concat!(
        "\
WITH picked AS (
    SELECT source, event_id, n
    FROM outbox
    WHERE source = $1
      AND status = 'dead'
      -- An erased message (hookledger forget) has nothing left to send.
      AND payload_dropped_at IS NULL
      AND dead_at >= $2
      AND dead_at < $3
    ORDER BY dead_at, event_id, n
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox AS o
",
        redrive_set!(),
        "
FROM picked
WHERE o.source = picked.source
  AND o.event_id = picked.event_id
  AND o.n = picked.n
RETURNING o.event_id, o.n"
    ),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// The dead messages `source` has in `[$2, $3)` of `dead_at`: `outbox_dead_idx`.
static COUNT_BETWEEN: Sql = Sql {
    text: "\
SELECT count(*)
FROM outbox
WHERE source = $1
  AND status = 'dead'
  -- An erased message (hookledger forget) has nothing left to send.
  AND payload_dropped_at IS NULL
  AND dead_at >= $2
  AND dead_at < $3",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ],
};

static LIST_BETWEEN: Sql = Sql {
    text: "\
SELECT event_id, n
FROM outbox
WHERE source = $1
  AND status = 'dead'
  -- An erased message (hookledger forget) has nothing left to send.
  AND payload_dropped_at IS NULL
  AND dead_at >= $2
  AND dead_at < $3
ORDER BY dead_at, event_id, n
LIMIT $4",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

static LIST_IDS: Sql = Sql {
    text: "\
SELECT event_id, n
FROM outbox
WHERE source = $1
  AND event_id = ANY ($2)
  AND status = 'dead'
  -- An erased message (hookledger forget) has nothing left to send.
  AND payload_dropped_at IS NULL
ORDER BY event_id, n
LIMIT $3",
    types: &[Type::TEXT, Type::TEXT_ARRAY, Type::INT8],
};

/// Runs `sql` (committed on its own) and returns the idempotency keys of the `(event_id, n)`
/// rows it returns.
async fn keys(
    conn: &Connection,
    source: &str,
    sql: &'static Sql,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<String>, LedgerError> {
    let rows = conn.autocommit(sql, params).await?;
    rows.iter()
        .map(|row| {
            let event_id: String = row.try_get(0)?;
            let n: i32 = row.try_get(1)?;
            Ok(idempotency_key(source, &event_id, n))
        })
        .collect()
}

/// Moves at most `limit` dead messages of `event_ids` back to `pending` (one statement,
/// committed on its own). Returns their idempotency keys.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn redrive_ids(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    keys(conn, source, &REDRIVE_IDS, &[&source, &event_ids, &limit]).await
}

/// Moves at most `limit` of `source`'s messages that went dead in `[since, until)` back to
/// `pending`, oldest first (one statement, committed on its own). Returns their idempotency keys.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn redrive_between(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    keys(
        conn,
        source,
        &REDRIVE_BETWEEN,
        &[&source, &since, &until, &limit],
    )
    .await
}

/// How many of `source`'s messages went dead in `[since, until)`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn count_between(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
) -> Result<u64, LedgerError> {
    let rows = conn
        .autocommit(&COUNT_BETWEEN, &[&source, &since, &until])
        .await?;
    let count: i64 = match rows.first() {
        Some(row) => row.try_get(0)?,
        None => 0,
    };
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The idempotency keys of the first `limit` messages [`redrive_between`] would move (a dry run).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn list_between(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    keys(
        conn,
        source,
        &LIST_BETWEEN,
        &[&source, &since, &until, &limit],
    )
    .await
}

/// The idempotency keys of the first `limit` messages [`redrive_ids`] would move (a dry run).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn list_ids(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    keys(conn, source, &LIST_IDS, &[&source, &event_ids, &limit]).await
}
