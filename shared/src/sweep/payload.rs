//! The payload sweep (issue 28): a source's `payload_retention_hours` past, a completed event's
//! raw payload and stored response are dropped in bounded batches, while its key, status,
//! digests, times and history stay, so deduplication, replay judgement and the audit trail keep
//! working.
//!
//! A batch walks one source's completed rows by `claimed_at` (`webhook_event_source_claimed_at_idx`)
//! from the source's watermark (`payload_sweep.swept_until`) up to the bound of this run
//! ([`payload_bound`]), and moves the watermark in the same statement, so the next run never
//! reads the rows already emptied. The bound never passes a row that is still pending (claimed,
//! processing or failed): a row that completes late is dropped after it completes. A dead letter
//! keeps its payload (re-drive needs it); re-driven, it is claimed anew (`claimed_at = now()`)
//! and so comes after the watermark again.
//!
//! Delivered outbox messages of the source lose their payload the same way, by `delivered_at`
//! ([`drop_message_payloads`]); pending, processing and dead ones keep it (dispatch and
//! re-drive need it).
//!
//! The watermark assumes a row becomes visible (its claim commits) less than the payload
//! retention after its `claimed_at` (set when the claiming transaction starts): hence a payload
//! retention of at least one hour, far beyond any transaction's life. A key taken again (a new
//! life: a late redelivery or replay of an expired key, `claim.rs`) gets `claimed_at = now()`
//! and no `payload_dropped_at`, so its new payload is dropped in its turn.
//!
//! What a dropped row answers a retry with: its original status and, as body, the recorded
//! no-op for an ignored event (unchanged: it holds only the type), `{"status": "stale"}` for a
//! stale one, else [`DROPPED_RESPONSE`]; with `Idempotent-Replayed: true` as before. The rule
//! is `emptied_response_sql!`, which erasure (`crate::forget`) shares; a row erased before
//! its payload retention ends is skipped (nothing is left to drop, and it keeps the erased
//! answer) unless it was claimed again since and holds a payload.

use std::time::SystemTime;

use tokio_postgres::types::Type;

use super::sql::Deleted;
use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};

/// [`DROPPED_RESPONSE`] as a literal, for `concat!` in the statement.
macro_rules! dropped_response {
    () => {
        r#"{"status": "processed", "response": "dropped after its payload retention"}"#
    };
}

/// The stored response of a completed row whose payload goes, as a SQL expression (type
/// `jsonb`) on the row's unqualified columns: the recorded no-op of an ignored event kept (it
/// holds only the event's type), `{"status": "stale"}` for a stale one (the ordering guard's
/// no-op: the handler's body may say more), else `$replacement` (a JSON text literal). The
/// payload sweep's rule, and erasure's (`crate::forget`): one rule for what an emptied row
/// answers its retries with. Expands to a string literal, for `concat!` in statement texts.
macro_rules! emptied_response_sql {
    ($($replacement:tt)*) => {
        concat!(
            "CASE
            WHEN ",
            crate::ignored_response_sql!(),
            " THEN response_body
            WHEN ",
            crate::stale_response_sql!(),
            " THEN '{\"status\": \"stale\"}'::jsonb
            ELSE '",
            $($replacement)*,
            "'::jsonb
        END"
        )
    };
}
pub(crate) use emptied_response_sql;

/// The response body a processed event answers retries with once its payload is dropped: the
/// handler's own answer may quote the payload. JSON text.
pub const DROPPED_RESPONSE: &str = dropped_response!();

/// One batch of payloads to drop, exactly as [`drop_payloads`] sends it. Parameters: `$1`
/// source (text), `$2` the keyset start (timestamptz: the watermark, then the previous batch's
/// [`Deleted::last`]), `$3` the bound (timestamptz, exclusive), `$4` the batch size (int8). One
/// row back: `(count(*) int8, max(claimed_at) timestamptz)`; the source's watermark is moved to
/// that `max` by the same statement.
pub static DROP_PAYLOADS: Sql = Sql {
    text: concat!(
        "\
WITH dropped AS (
    UPDATE webhook_event
    SET payload = NULL,
        response_body = ",
        emptied_response_sql!(dropped_response!()),
        ",
        payload_dropped_at = now()
    WHERE ctid = ANY (ARRAY(
        SELECT ctid
        FROM webhook_event
        WHERE source = $1
          AND claimed_at >= $2
          AND claimed_at < $3
          AND status = 'completed'
          AND payload_dropped_at IS NULL
          -- An erased row (crate::forget) has nothing left to drop, and keeps its answer;
          -- one claimed again since holds a new payload.
          AND (erased_at IS NULL OR payload IS NOT NULL)
        ORDER BY claimed_at
        LIMIT $4
        -- Not SKIP LOCKED: a row a delivery holds right now is waited for (a duplicate's
        -- claim is short), never stepped over, or the watermark would pass it for good.
        FOR UPDATE
    ))
      -- Re-checked on the locked row.
      AND status = 'completed'
      AND payload_dropped_at IS NULL
      AND (erased_at IS NULL OR payload IS NOT NULL)
    RETURNING claimed_at
), marked AS (
    INSERT INTO payload_sweep (source, swept_until)
    SELECT $1, max(claimed_at) FROM dropped HAVING count(*) > 0
    ON CONFLICT (source) DO UPDATE
    SET swept_until = greatest(payload_sweep.swept_until, EXCLUDED.swept_until)
)
SELECT count(*), max(claimed_at) FROM dropped"
    ),
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Drops the payload and stored response of at most `limit` completed rows of `source` claimed
/// in `[after, bound)`, oldest first, in the caller's transaction, and moves the source's
/// watermark to the newest of them.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn drop_payloads(
    conn: &Connection,
    source: &str,
    after: SystemTime,
    bound: SystemTime,
    limit: i64,
) -> Result<Deleted, LedgerError> {
    let statement = conn.prepare(&DROP_PAYLOADS).await?;
    let rows = conn
        .query(&statement, &[&source, &after, &bound, &limit])
        .await?;
    super::sql::deleted(&rows)
}

/// [`payload_bound`]'s statement: the watermark, and the oldest pending row's claim.
static PAYLOAD_BOUND: Sql = Sql {
    text: "\
SELECT (SELECT swept_until FROM payload_sweep WHERE source = $1),
       (SELECT min(claimed_at) FROM webhook_event
        WHERE source = $1 AND status IN ('claimed', 'processing', 'failed')),
       (SELECT messages_swept_until FROM payload_sweep WHERE source = $1)",
    types: &[Type::TEXT],
};

/// Where `source`'s payload sweep starts and must stop at `now`, for its events and for its
/// delivered outbox messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadBounds {
    /// The events' watermark (the epoch when the source was never swept).
    pub events_after: SystemTime,
    /// The events' bound: the earlier of the cutoff (now minus the payload retention) and the
    /// claim of the source's oldest pending row.
    pub events_before: SystemTime,
    /// The delivered messages' watermark.
    pub messages_after: SystemTime,
    /// The delivered messages' bound: the cutoff.
    pub messages_before: SystemTime,
}

/// [`PayloadBounds`] of `source` for `cutoff` (now minus its payload retention).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn payload_bounds(
    conn: &Connection,
    source: &str,
    cutoff: SystemTime,
) -> Result<PayloadBounds, LedgerError> {
    let statement = conn.prepare(&PAYLOAD_BOUND).await?;
    // Scalar subqueries only: always exactly one row.
    let rows = conn.query(&statement, &[&source]).await?;
    let (events, pending, messages): (Option<SystemTime>, Option<SystemTime>, Option<SystemTime>) =
        match rows.first() {
            Some(row) => (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?),
            None => (None, None, None),
        };
    Ok(PayloadBounds {
        events_after: events.unwrap_or(SystemTime::UNIX_EPOCH),
        events_before: pending.map_or(cutoff, |at| at.min(cutoff)),
        messages_after: messages.unwrap_or(SystemTime::UNIX_EPOCH),
        messages_before: cutoff,
    })
}

/// One batch of delivered outbox messages whose payload to empty, exactly as
/// [`drop_message_payloads`] sends it: parameters and result as [`DROP_PAYLOADS`]'s, by
/// `delivered_at`; the source's `messages_swept_until` moves with it.
pub static DROP_MESSAGE_PAYLOADS: Sql = Sql {
    text: "\
WITH dropped AS (
    UPDATE outbox
    SET payload = ''::bytea,
        payload_dropped_at = now()
    WHERE ctid = ANY (ARRAY(
        SELECT ctid
        FROM outbox
        WHERE source = $1
          AND status = 'delivered'
          AND delivered_at >= $2
          AND delivered_at < $3
          AND payload_dropped_at IS NULL
        ORDER BY delivered_at
        LIMIT $4
        FOR UPDATE
    ))
      AND status = 'delivered'
      AND payload_dropped_at IS NULL
    RETURNING delivered_at
), marked AS (
    INSERT INTO payload_sweep (source, messages_swept_until)
    SELECT $1, max(delivered_at) FROM dropped HAVING count(*) > 0
    ON CONFLICT (source) DO UPDATE
    SET messages_swept_until = greatest(payload_sweep.messages_swept_until,
                                        EXCLUDED.messages_swept_until)
)
SELECT count(*), max(delivered_at) FROM dropped",
    types: &[Type::TEXT, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

/// Empties the payload of at most `limit` delivered outbox messages of `source` delivered in
/// `[after, bound)`, oldest first, in the caller's transaction, and moves the source's message
/// watermark to the newest of them.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn drop_message_payloads(
    conn: &Connection,
    source: &str,
    after: SystemTime,
    bound: SystemTime,
    limit: i64,
) -> Result<Deleted, LedgerError> {
    let statement = conn.prepare(&DROP_MESSAGE_PAYLOADS).await?;
    let rows = conn
        .query(&statement, &[&source, &after, &bound, &limit])
        .await?;
    super::sql::deleted(&rows)
}
