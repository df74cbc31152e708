//! The operator's statements on finished rows: re-drive dead letters and re-run ignored events
//! (both back to `claimed`, due now, for the worker), keeping what the row was in `history`.
//!
//! Every statement takes its rows with `FOR UPDATE SKIP LOCKED` and re-checks the status on the
//! locked row, so a row a delivery or a worker holds right now is left alone (it is not dead, or
//! not ignored, any more by the time it is free), and each row moves at most once per run: once
//! `claimed` it no longer matches.
//!
//! A moved row looks like a new first delivery to everything else: `claimed_at` = now (the
//! key's retention starts again and the auditor does not count it stuck at once), `attempts` = 0,
//! `next_attempt_at` = now (the worker's due index finds it), no response, no `dead_at`.

use std::time::SystemTime;

use tokio_postgres::types::Type;

use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};

/// What [`classify_ids`] found for the event ids an operator named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdClasses {
    /// Dead with a stored payload: can be re-driven.
    pub dead: Vec<String>,
    /// Dead without a payload (the source keeps digests only): refused.
    pub no_payload: Vec<String>,
    /// In the ledger but not dead (completed, claimed, processing, failed): left alone.
    pub not_dead: Vec<String>,
    /// Not in the ledger.
    pub not_found: Vec<String>,
}

static CLASSIFY_IDS: Sql = Sql {
    text: "\
SELECT event_id, status = 'dead', payload IS NOT NULL
FROM webhook_event
WHERE source = $1
  AND event_id = ANY ($2)",
    types: &[Type::TEXT, Type::TEXT_ARRAY],
};

/// Reads what each of `event_ids` is in `source`'s ledger (primary-key reads, no locks).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn classify_ids(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
) -> Result<IdClasses, LedgerError> {
    let statement = conn.prepare(&CLASSIFY_IDS).await?;
    let rows = conn.query(&statement, &[&source, &event_ids]).await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get(0)?;
        let dead: bool = row.try_get(1)?;
        let has_payload: bool = row.try_get(2)?;
        found.insert(id, (dead, has_payload));
    }
    let mut classes = IdClasses::default();
    for id in event_ids {
        let list = match found.get(id) {
            Some((true, true)) => &mut classes.dead,
            Some((true, false)) => &mut classes.no_payload,
            Some((false, _)) => &mut classes.not_dead,
            None => &mut classes.not_found,
        };
        if !list.contains(id) {
            list.push(id.clone());
        }
    }
    Ok(classes)
}

/// The SET list both re-drive statements share: the row becomes a new first delivery, due now,
/// with what it was appended to `history`.
macro_rules! redrive_set {
    () => {
        "SET status = 'claimed',
    attempts = 0,
    last_error = NULL,
    response_status = NULL,
    response_body = NULL,
    dead_at = NULL,
    lease_expires_at = NULL,
    next_attempt_at = now(),
    claimed_at = now(),
    history = coalesce(e.history, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'action', 'redrive', 'at', now(), 'status', 'dead', 'attempts', e.attempts,
        'last_error', e.last_error, 'dead_at', e.dead_at, 'claimed_at', e.claimed_at,
        'response', e.response_body))"
    };
}

static REDRIVE_IDS: Sql = Sql {
    text: concat!(
        "\
WITH picked AS (
    SELECT source, event_id
    FROM webhook_event
    WHERE source = $1
      AND event_id = ANY ($2)
      AND status = 'dead'
      AND payload IS NOT NULL
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_event AS e
",
        redrive_set!(),
        "
FROM picked
WHERE e.source = picked.source
  AND e.event_id = picked.event_id
RETURNING e.event_id"
    ),
    types: &[Type::TEXT, Type::TEXT_ARRAY],
};

/// Re-drives the dead letters among `event_ids` that have a payload (one statement, committed
/// on its own). Returns the ids moved back to `claimed`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn redrive_ids(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
) -> Result<Vec<String>, LedgerError> {
    let rows = conn
        .autocommit(&REDRIVE_IDS, &[&source, &event_ids])
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

static COUNT_DEAD_BETWEEN: Sql = Sql {
    text: "\
SELECT count(*) FILTER (WHERE payload IS NOT NULL), count(*) FILTER (WHERE payload IS NULL)
FROM webhook_event
WHERE source = $1
  AND status = 'dead'
  AND dead_at >= $2
  AND dead_at < $3",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ],
};

/// Counts `source`'s dead letters that went dead in `[since, until)`: `(with a payload,
/// without one)`. Served by `webhook_event_dead_idx (source, dead_at)`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn count_dead_between(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
) -> Result<(u64, u64), LedgerError> {
    let statement = conn.prepare(&COUNT_DEAD_BETWEEN).await?;
    let rows = conn.query(&statement, &[&source, &since, &until]).await?;
    let Some(row) = rows.first() else {
        return Ok((0, 0));
    };
    let with: i64 = row.try_get(0)?;
    let without: i64 = row.try_get(1)?;
    Ok((with.unsigned_abs(), without.unsigned_abs()))
}

static REDRIVE_BETWEEN: Sql = Sql {
    text: concat!(
        "\
WITH picked AS (
    SELECT source, event_id
    FROM webhook_event
    WHERE source = $1
      AND status = 'dead'
      AND dead_at >= $2
      AND dead_at < $3
      AND payload IS NOT NULL
    ORDER BY dead_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_event AS e
",
        redrive_set!(),
        "
FROM picked
WHERE e.source = picked.source
  AND e.event_id = picked.event_id
RETURNING e.event_id"
    ),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Re-drives at most `limit` of `source`'s dead letters that went dead in `[since, until)` and
/// have a payload, oldest first, in one statement committed on its own. Returns the ids moved;
/// fewer than `limit` means none is left (a row held right now is skipped and stays dead).
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
    let rows = conn
        .autocommit(&REDRIVE_BETWEEN, &[&source, &since, &until, &limit])
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

static COUNT_IGNORED_BETWEEN: Sql = Sql {
    text: concat!(
        "\
SELECT count(*) FILTER (WHERE payload IS NOT NULL), count(*) FILTER (WHERE payload IS NULL)
FROM webhook_event
WHERE source = $1
  AND claimed_at >= $3
  AND claimed_at < $4
  AND status = 'completed'
  AND event_type = $2
  -- Exactly the recorded no-op (crate::apply::ignored_effect), never a handler's own
  -- answer that happens to say ignored.
  AND ",
        crate::ignored_response_sql!()
    ),
    types: &[Type::TEXT, Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ],
};

/// Counts `source`'s events of `event_type` first claimed in `[since, until)` that completed
/// as `ignored` (no handler then: the response is exactly `crate::apply::ignored_effect`'s
/// body): `(with a payload, without
/// one)`. Served by `webhook_event_source_claimed_at_idx`.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn count_ignored_between(
    conn: &Connection,
    source: &str,
    event_type: &str,
    since: SystemTime,
    until: SystemTime,
) -> Result<(u64, u64), LedgerError> {
    let statement = conn.prepare(&COUNT_IGNORED_BETWEEN).await?;
    let rows = conn
        .query(&statement, &[&source, &event_type, &since, &until])
        .await?;
    let Some(row) = rows.first() else {
        return Ok((0, 0));
    };
    let with: i64 = row.try_get(0)?;
    let without: i64 = row.try_get(1)?;
    Ok((with.unsigned_abs(), without.unsigned_abs()))
}

static RERUN_IGNORED: Sql = Sql {
    text: concat!(
        "\
WITH picked AS (
    SELECT source, event_id
    FROM webhook_event
    WHERE source = $1
      AND claimed_at >= $3
      AND claimed_at < $4
      AND status = 'completed'
      AND event_type = $2
      -- Exactly the recorded no-op (crate::apply::ignored_effect), never a handler's own
      -- answer that happens to say ignored.
      AND ",
        crate::ignored_response_sql!(),
        "
      AND payload IS NOT NULL
    ORDER BY claimed_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_event AS e
SET status = 'claimed',
    attempts = 0,
    last_error = NULL,
    response_status = NULL,
    response_body = NULL,
    completed_at = NULL,
    lease_expires_at = NULL,
    next_attempt_at = now(),
    claimed_at = now(),
    history = coalesce(e.history, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'action', 'rerun_ignored', 'at', now(), 'status', 'completed',
        'response', e.response_body, 'completed_at', e.completed_at, 'claimed_at', e.claimed_at))
FROM picked
WHERE e.source = picked.source
  AND e.event_id = picked.event_id
RETURNING e.event_id"
    ),
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::INT8,
    ],
};

/// Puts at most `limit` of the events [`count_ignored_between`] counts (with a payload) back
/// to `claimed` for the worker to run through the handler that now exists, oldest first, in
/// one statement committed on its own. Each runs once: once `claimed` it is no longer ignored,
/// and when it completes it carries the handler's response. Returns the ids moved.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn rerun_ignored_between(
    conn: &Connection,
    source: &str,
    event_type: &str,
    since: SystemTime,
    until: SystemTime,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    let rows = conn
        .autocommit(
            &RERUN_IGNORED,
            &[&source, &event_type, &since, &until, &limit],
        )
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

static LIST_DEAD_BETWEEN: Sql = Sql {
    text: "\
SELECT event_id
FROM webhook_event
WHERE source = $1
  AND status = 'dead'
  AND dead_at >= $2
  AND dead_at < $3
  AND payload IS NOT NULL
ORDER BY dead_at
LIMIT $4",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// The first `limit` ids [`redrive_between`] would move, oldest first (a dry run's list; no
/// locks).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn list_dead_between(
    conn: &Connection,
    source: &str,
    since: SystemTime,
    until: SystemTime,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    let statement = conn.prepare(&LIST_DEAD_BETWEEN).await?;
    let rows = conn
        .query(&statement, &[&source, &since, &until, &limit])
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}

static LIST_IGNORED_BETWEEN: Sql = Sql {
    text: concat!(
        "\
SELECT event_id
FROM webhook_event
WHERE source = $1
  AND claimed_at >= $3
  AND claimed_at < $4
  AND status = 'completed'
  AND event_type = $2
  AND ",
        crate::ignored_response_sql!(),
        "
  AND payload IS NOT NULL
ORDER BY claimed_at
LIMIT $5"
    ),
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::INT8,
    ],
};

/// The first `limit` ids [`rerun_ignored_between`] would move, oldest first (a dry run's list;
/// no locks).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn list_ignored_between(
    conn: &Connection,
    source: &str,
    event_type: &str,
    since: SystemTime,
    until: SystemTime,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    let statement = conn.prepare(&LIST_IGNORED_BETWEEN).await?;
    let rows = conn
        .query(&statement, &[&source, &event_type, &since, &until, &limit])
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(LedgerError::from))
        .collect()
}
