//! The worker's statements: lease due rows, own one in a transaction, fail or dead-letter it.
//!
//! A lease is one statement (a CTE with `FOR UPDATE SKIP LOCKED`, then an UPDATE) that takes
//! `claimed` rows and `failed` rows whose `next_attempt_at` has come, and `processing` rows whose
//! lease expired (a worker died), bumping `attempts`. The attempt number is the lease's fencing
//! token: every later transition is guarded by `status = 'processing' AND attempts = n`, so a
//! worker whose lease expired and was taken over can no longer complete or fail the row.

use std::time::SystemTime;

use super::pipeline::in_order;
use super::{ClaimTx, Connection, Guard, LedgerError, Status};

/// One leased event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// Source name.
    pub source: String,
    /// The provider's event id.
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// The raw body stored at accept time (`None` if the source kept the digest only, which
    /// deferred sources may not; such a row is dead-lettered).
    pub payload: Option<Vec<u8>>,
    /// This lease's attempt number (1 for the first), also its fencing token.
    pub attempts: i32,
}

const LEASE_DUE: &str = "\
WITH due AS (
    SELECT source, event_id
    FROM webhook_event
    -- claimed and failed rows whose time has come, and processing rows whose lease expired
    -- (a worker died): leasing sets next_attempt_at to the lease's expiry, so one range on
    -- the partial index webhook_event_due_idx finds all three, oldest first.
    WHERE status IN ('claimed', 'failed', 'processing')
      AND next_attempt_at <= $1
    ORDER BY next_attempt_at
    LIMIT $3
    -- Rows another worker is leasing or processing right now are skipped, not waited for.
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_event AS e
SET status = 'processing',
    attempts = e.attempts + 1,
    lease_expires_at = $2,
    next_attempt_at = $2
FROM due
WHERE e.source = due.source
  AND e.event_id = due.event_id
RETURNING e.source, e.event_id, e.event_type, e.payload, e.attempts";

/// Leases at most `limit` due rows at `now` until `lease_expires_at`, in one statement.
/// Concurrent workers get disjoint rows. An empty vector means nothing is due.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn lease_due(
    conn: &Connection,
    now: SystemTime,
    lease_expires_at: SystemTime,
    limit: i64,
) -> Result<Vec<Leased>, LedgerError> {
    let statement = conn.prepare_cached(LEASE_DUE).await?;
    let rows = conn
        .query(&statement, &[&now, &lease_expires_at, &limit])
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Leased {
                source: row.try_get(0)?,
                event_id: row.try_get(1)?,
                event_type: row.try_get(2)?,
                payload: row.try_get(3)?,
                attempts: row.try_get(4)?,
            })
        })
        .collect()
}

const OWN_LEASED: &str = "\
SELECT 1
FROM webhook_event
WHERE source = $1
  AND event_id = $2
  AND status = 'processing'
  AND attempts = $3
-- Held until COMMIT: the row cannot be re-leased while the effect is being applied.
FOR UPDATE";

/// Opens the transaction in which a worker applies a leased event: `BEGIN` and a locking read
/// of the row under the lease, pipelined. `None` when the lease was lost (expired and taken
/// over): the caller must not apply the effect.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn begin_leased<'c>(
    conn: &'c Connection,
    leased: &Leased,
) -> Result<Option<ClaimTx<'c>>, LedgerError> {
    let statement = conn.prepare_cached(OWN_LEASED).await?;
    // Guard first, so a cancelled caller (handler timeout) still rolls back.
    let tx = ClaimTx {
        conn,
        open: true,
        guard: Guard::Leased {
            attempts: leased.attempts,
        },
    };
    let (begin, owned) = in_order(
        conn.batch_execute("BEGIN"),
        conn.query_opt(
            &statement,
            &[&leased.source, &leased.event_id, &leased.attempts],
        ),
    )
    .await;
    begin?;
    match owned? {
        Some(_) => Ok(Some(tx)),
        None => {
            tx.rollback().await?;
            Ok(None)
        }
    }
}

/// How a failed attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Retry at this time (`failed`).
    RetryAt(SystemTime),
    /// Attempts exhausted (`dead`): kept for a human and replay's re-drive.
    Dead,
}

const FAIL: &str = "\
UPDATE webhook_event
SET status = $4::text::event_status,
    last_error = $5,
    next_attempt_at = $6,
    lease_expires_at = NULL
WHERE source = $1
  AND event_id = $2
  -- Guarded by the lease: a worker that lost its lease cannot overwrite the new owner's state.
  AND status = 'processing'
  AND attempts = $3";

/// Records a failed attempt of `leased`: `failed` with `last_error` and the next attempt time,
/// or `dead`. Returns `false` when the lease was lost (zero rows: an outcome, not an error).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn fail(
    conn: &Connection,
    leased: &Leased,
    error: &str,
    failure: &Failure,
) -> Result<bool, LedgerError> {
    let statement = conn.prepare_cached(FAIL).await?;
    let (status, next_attempt_at) = match failure {
        Failure::RetryAt(at) => (Status::Failed.as_str(), Some(*at)),
        Failure::Dead => (Status::Dead.as_str(), None),
    };
    // last_error is for humans: keep it bounded.
    let error: String = error.chars().take(2000).collect();
    let updated = conn
        .execute(
            &statement,
            &[
                &leased.source,
                &leased.event_id,
                &leased.attempts,
                &status,
                &error,
                &next_attempt_at,
            ],
        )
        .await?;
    Ok(updated == 1)
}

const RELEASE: &str = "\
UPDATE webhook_event
SET status = 'failed',
    -- The attempt never ran: give it back.
    attempts = attempts - 1,
    last_error = $5,
    next_attempt_at = $4,
    lease_expires_at = NULL
WHERE source = $1
  AND event_id = $2
  AND status = 'processing'
  AND attempts = $3";

/// Gives a leased event back unprocessed (the worker is out of time, or cannot handle it yet):
/// due again at `due_at`, its attempt not counted, `reason` in `last_error`. Returns `false`
/// when the lease was lost.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn release(
    conn: &Connection,
    leased: &Leased,
    due_at: SystemTime,
    reason: &str,
) -> Result<bool, LedgerError> {
    let statement = conn.prepare_cached(RELEASE).await?;
    let updated = conn
        .execute(
            &statement,
            &[
                &leased.source,
                &leased.event_id,
                &leased.attempts,
                &due_at,
                &reason,
            ],
        )
        .await?;
    Ok(updated == 1)
}
