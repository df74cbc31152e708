//! The console's own reads of the ledger (everything else it shows comes from `shared`: the
//! audit, the stuck list, `inspect`, re-drive). Read-only; each statement runs in a short
//! transaction with custom plans (`plan_cache_mode = force_custom_plan`), so the optional
//! filters (`$n IS NULL OR ...`) fold away and the index the EXPLAIN test checks is the one
//! that serves it, even on a connection that ran the statement before.

use std::time::SystemTime;

use shared::db::{Connection, Sql};
use shared::ledger::{EventOutcome, LedgerError, Status};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use crate::PageError;

/// Runs `sql` with `params` in a read-only transaction with custom plans.
async fn read(
    conn: &Connection,
    sql: &'static Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, PageError> {
    let statement = conn.prepare(sql).await?;
    conn.begin().await?;
    let rows = match conn
        .batch_execute("SET LOCAL plan_cache_mode = force_custom_plan; SET TRANSACTION READ ONLY")
        .await
    {
        Ok(()) => conn.query(&statement, params).await,
        Err(error) => Err(error),
    };
    match rows {
        Ok(rows) => {
            conn.batch_execute("COMMIT").await?;
            Ok(rows)
        }
        Err(error) => {
            let _ = conn.batch_execute("ROLLBACK").await;
            Err(error.into())
        }
    }
}

/// Events of the sources `$1` claimed per minute in `[$2, $3)`, by source and status now: one
/// statement for the whole overview, not one per source.
pub static PER_MINUTE: Sql = Sql {
    text: "\
SELECT source,
       date_trunc('minute', claimed_at) AS minute,
       status::text,
       count(*)
FROM webhook_event
-- webhook_event_source_claimed_at_idx (source, claimed_at) INCLUDE (status) serves it as an
-- index-only scan of each source's window (source = ANY: one range per source).
WHERE source = ANY($1)
  AND claimed_at >= $2
  AND claimed_at < $3
GROUP BY 1, 2, 3
ORDER BY 1, 2",
    types: &[Type::TEXT_ARRAY, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ],
};

/// One bucket of [`per_minute`]: events first claimed in that minute, by status now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteCount {
    /// The source.
    pub source: String,
    /// The minute's start.
    pub minute: SystemTime,
    /// `claimed`, `processing`, `completed`, `failed` or `dead`.
    pub status: String,
    /// Events.
    pub count: u64,
}

/// Events of `sources` claimed per minute in `[since, until)` by source and their status now
/// ([`PER_MINUTE`]), in one statement.
///
/// # Errors
/// [`PageError::Unavailable`] when PostgreSQL fails.
pub async fn per_minute(
    conn: &Connection,
    sources: &[&str],
    since: SystemTime,
    until: SystemTime,
) -> Result<Vec<MinuteCount>, PageError> {
    read(conn, &PER_MINUTE, &[&sources, &since, &until])
        .await?
        .iter()
        .map(|row| {
            Ok(MinuteCount {
                source: row.try_get(0)?,
                minute: row.try_get(1)?,
                status: row.try_get(2)?,
                count: u64::try_from(row.try_get::<_, i64>(3)?).unwrap_or(0),
            })
        })
        .collect()
}

/// One page of the ledger, newest first, by the optional filters; see [`EventFilter`]. Each
/// row's outcome is `shared`'s rule ([`shared::ledger::EVENT_OUTCOME_SQL`]), in the select list
/// and in the outcome filter alike, so a page lists exactly the rows whose shown outcome is the
/// one asked for, and the keyset pages through them like any other filter.
pub static EVENTS: Sql = Sql {
    text: concat!(
        "\
SELECT source, event_id, event_type, status::text, attempts, claimed_at, completed_at, dead_at,
       last_error, replayed_at IS NOT NULL, jsonb_array_length(coalesce(history, '[]'::jsonb)),
       ",
        shared::event_outcome_sql!(),
        "
FROM (
    SELECT source, event_id, event_type, status, attempts, claimed_at, completed_at, dead_at,
           last_error, replayed_at, history, response_body
    FROM webhook_event
    WHERE ($1::text IS NULL OR source = $1)
      AND ($2::text IS NULL OR status = $2::event_status)
      AND ($3::text IS NULL OR event_type = $3)
      AND ($4::timestamptz IS NULL OR claimed_at >= $4)
      AND ($5::timestamptz IS NULL OR claimed_at < $5)
      -- An id prefix (the page asks for a source with it) is checked on the rows of that
      -- source's index scan: a prefix of text in a non-C collation cannot bound a btree range.
      AND ($6::text IS NULL OR starts_with(event_id, $6))
      -- The keyset: rows after the previous page's last (claimed_at, source, event_id), in the
      -- order of webhook_event_claimed_at_key_idx (V15), so the next page starts where the last
      -- one ended: never OFFSET.
      AND ($7::timestamptz IS NULL OR (claimed_at, source, event_id) < ($7, $8, $9))
    ORDER BY claimed_at DESC, source DESC, event_id DESC
    -- A fence: the subquery is neither merged into this statement nor given the outcome's
    -- condition, so it stays the ordered index scan above, planned for the page's LIMIT,
    -- rather than a read of every matching row to sort them.
    OFFSET 0
) AS page
-- The outcome of a completed row ($2 holds an outcome's status), by the same rule as the
-- select list's, checked on the rows the scan yields, in its order, until the page is full.
WHERE ($11::text IS NULL OR ",
        shared::event_outcome_is_sql!("$11::text"),
        ")
-- No ORDER BY here: the scan over the subquery keeps its order, and one here would make the
-- planner plan the subquery for every row.
LIMIT $10"
    ),
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
    ],
};

/// The position after one row in [`EVENTS`]' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyset {
    /// The row's `claimed_at`.
    pub claimed_at: SystemTime,
    /// Its source.
    pub source: String,
    /// Its event id.
    pub event_id: String,
}

/// The filters of [`EVENTS`] (each `None` for "any").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Exact source.
    pub source: Option<String>,
    /// Exact status (an `event_status` label).
    pub status: Option<String>,
    /// Exact event type.
    pub event_type: Option<String>,
    /// Claimed at or after.
    pub from: Option<SystemTime>,
    /// Claimed before.
    pub until: Option<SystemTime>,
    /// Event ids starting with this.
    pub id_prefix: Option<String>,
    /// Exact outcome (an [`EventOutcome`] label).
    pub outcome: Option<EventOutcome>,
}

impl EventFilter {
    /// [`EVENTS`]' status (`$2`) and outcome (`$11`) parameters for the status and outcome
    /// filters: an outcome is one status (a row that is not completed has its status as its
    /// outcome), so it becomes that status, and the outcome rule is asked only to tell
    /// completed rows apart (`processed`, `ignored`, `stale`). `None` when the two filters
    /// contradict each other (an outcome of another status): no row can match.
    pub fn status_and_outcome(&self) -> Option<(Option<&str>, Option<&'static str>)> {
        let implied = self.outcome.map(|o| o.status().as_str());
        let status = match (self.status.as_deref(), implied) {
            (Some(status), Some(implied)) if status != implied => return None,
            (status, implied) => status.or(implied),
        };
        let outcome = self
            .outcome
            .filter(|o| o.status() == Status::Completed)
            .map(EventOutcome::as_str);
        Some((status, outcome))
    }
}

/// One row of the events list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Source.
    pub source: String,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Status now.
    pub status: String,
    /// Attempts since the last claim or re-drive.
    pub attempts: i32,
    /// When claimed (the first delivery, or the latest re-drive).
    pub claimed_at: SystemTime,
    /// When completed.
    pub completed_at: Option<SystemTime>,
    /// When it went dead.
    pub dead_at: Option<SystemTime>,
    /// The latest handler error.
    pub last_error: Option<String>,
    /// Whether replay created the row from the provider's API (`replayed_at` set), rather than
    /// a delivery.
    pub replayed: bool,
    /// Operator actions in its `history` (re-drives, re-runs of an ignored event).
    pub redriven: i32,
    /// What became of it ([`shared::ledger::EVENT_OUTCOME_SQL`]).
    pub outcome: EventOutcome,
}

impl EventRow {
    /// Its position, for the next page's cursor.
    pub fn keyset(&self) -> Keyset {
        Keyset {
            claimed_at: self.claimed_at,
            source: self.source.clone(),
            event_id: self.event_id.clone(),
        }
    }
}

/// At most `limit` events matching `filter` after `after`, newest first ([`EVENTS`]). An
/// outcome filter becomes its status (`$2`) and, for the outcomes of a completed row, the
/// rule (`$11`); with a status it cannot have, nothing matches and nothing is read.
///
/// # Errors
/// [`PageError::Unavailable`] when PostgreSQL fails.
pub async fn events(
    conn: &Connection,
    filter: &EventFilter,
    after: Option<&Keyset>,
    limit: i64,
) -> Result<Vec<EventRow>, PageError> {
    let after_at = after.map(|k| k.claimed_at);
    let after_source = after.map(|k| k.source.as_str());
    let after_id = after.map(|k| k.event_id.as_str());
    let Some((status, outcome)) = filter.status_and_outcome() else {
        return Ok(Vec::new());
    };
    read(
        conn,
        &EVENTS,
        &[
            &filter.source,
            &status,
            &filter.event_type,
            &filter.from,
            &filter.until,
            &filter.id_prefix,
            &after_at,
            &after_source,
            &after_id,
            &limit,
            &outcome,
        ],
    )
    .await?
    .iter()
    .map(|row| {
        let outcome: &str = row.try_get(11)?;
        Ok(EventRow {
            source: row.try_get(0)?,
            event_id: row.try_get(1)?,
            event_type: row.try_get(2)?,
            status: row.try_get(3)?,
            attempts: row.try_get(4)?,
            claimed_at: row.try_get(5)?,
            completed_at: row.try_get(6)?,
            dead_at: row.try_get(7)?,
            last_error: row.try_get(8)?,
            replayed: row.try_get(9)?,
            redriven: row.try_get(10)?,
            // Only a schema ahead of this build names another.
            outcome: EventOutcome::parse(outcome)
                .ok_or_else(|| LedgerError::UnknownStatus(outcome.to_owned()))?,
        })
    })
    .collect()
}

/// The stored body of one event (NULL for a source that keeps digests only).
pub static PAYLOAD: Sql = Sql {
    text: "\
SELECT payload
FROM webhook_event
-- The primary key.
WHERE source = $1
  AND event_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// The stored body of `(source, event_id)`, if any ([`PAYLOAD`]).
///
/// # Errors
/// [`PageError::Unavailable`] when PostgreSQL fails.
pub async fn payload(
    conn: &Connection,
    source: &str,
    event_id: &str,
) -> Result<Option<Vec<u8>>, PageError> {
    Ok(
        match read(conn, &PAYLOAD, &[&source, &event_id]).await?.first() {
            Some(row) => row.try_get(0)?,
            None => None,
        },
    )
}

/// The newest dead letters, optionally of one source and in a window of `dead_at`.
pub static DEAD_EVENTS: Sql = Sql {
    text: "\
SELECT source, event_id, event_type, attempts, last_error, dead_at, payload IS NOT NULL
FROM webhook_event
-- webhook_event_dead_idx (source, dead_at) WHERE status = 'dead': dead rows only.
WHERE status = 'dead'
  AND ($1::text IS NULL OR source = $1)
  AND ($2::timestamptz IS NULL OR dead_at >= $2)
  AND ($3::timestamptz IS NULL OR dead_at < $3)
ORDER BY dead_at DESC, source, event_id
LIMIT $4",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadEvent {
    /// Source.
    pub source: String,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Attempts used.
    pub attempts: i32,
    /// The error it died of.
    pub last_error: Option<String>,
    /// When it went dead.
    pub dead_at: SystemTime,
    /// Whether its payload is stored (else it cannot be re-driven).
    pub has_payload: bool,
}

/// The window and source of the dead-letter lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadFilter {
    /// Exact source.
    pub source: Option<String>,
    /// Went dead at or after.
    pub since: Option<SystemTime>,
    /// Went dead before.
    pub until: Option<SystemTime>,
}

/// The newest `limit` dead letters matching `filter` ([`DEAD_EVENTS`]).
///
/// # Errors
/// [`PageError::Unavailable`] when PostgreSQL fails.
pub async fn dead_events(
    conn: &Connection,
    filter: &DeadFilter,
    limit: i64,
) -> Result<Vec<DeadEvent>, PageError> {
    read(
        conn,
        &DEAD_EVENTS,
        &[&filter.source, &filter.since, &filter.until, &limit],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(DeadEvent {
            source: row.try_get(0)?,
            event_id: row.try_get(1)?,
            event_type: row.try_get(2)?,
            attempts: row.try_get(3)?,
            last_error: row.try_get(4)?,
            dead_at: row.try_get(5)?,
            has_payload: row.try_get(6)?,
        })
    })
    .collect()
}

/// The newest dead outbox messages, optionally of one source and in a window of `dead_at`.
pub static DEAD_MESSAGES: Sql = Sql {
    text: "\
SELECT source, event_id, n, target, attempts, last_error, last_status, dead_at
FROM outbox
-- outbox_dead_idx (source, dead_at) WHERE status = 'dead'.
WHERE status = 'dead'
  AND ($1::text IS NULL OR source = $1)
  AND ($2::timestamptz IS NULL OR dead_at >= $2)
  AND ($3::timestamptz IS NULL OR dead_at < $3)
ORDER BY dead_at DESC, source, event_id, n
LIMIT $4",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// One dead outbox message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadMessage {
    /// Its event's source.
    pub source: String,
    /// Its event's id.
    pub event_id: String,
    /// Its number within the event.
    pub n: i32,
    /// The target's name.
    pub target: String,
    /// Dispatch attempts used.
    pub attempts: i32,
    /// The last error.
    pub last_error: Option<String>,
    /// The target's last status code (HTTP).
    pub last_status: Option<i16>,
    /// When it went dead.
    pub dead_at: SystemTime,
}

/// The newest `limit` dead outbox messages matching `filter` ([`DEAD_MESSAGES`]).
///
/// # Errors
/// [`PageError::Unavailable`] when PostgreSQL fails.
pub async fn dead_messages(
    conn: &Connection,
    filter: &DeadFilter,
    limit: i64,
) -> Result<Vec<DeadMessage>, PageError> {
    read(
        conn,
        &DEAD_MESSAGES,
        &[&filter.source, &filter.since, &filter.until, &limit],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(DeadMessage {
            source: row.try_get(0)?,
            event_id: row.try_get(1)?,
            n: row.try_get(2)?,
            target: row.try_get(3)?,
            attempts: row.try_get(4)?,
            last_error: row.try_get(5)?,
            last_status: row.try_get(6)?,
            dead_at: row.try_get(7)?,
        })
    })
    .collect()
}
