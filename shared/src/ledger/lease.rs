//! The worker's statements: lease due rows, start an attempt, fail, dead-letter or release it.
//!
//! A lease is one statement (a CTE with `FOR UPDATE SKIP LOCKED`, then an UPDATE) that takes
//! `claimed` rows and `failed` rows whose `next_attempt_at` has come, and `processing` rows whose
//! lease expired (a worker died), bumping `lease_token`: the lease's fencing token. Every later
//! transition is guarded by `status = 'processing' AND lease_token = n`, so a worker whose lease
//! expired and was taken over can no longer start, complete, fail or release the row.
//!
//! `attempts` counts attempts that really started: [`start`] bumps it just before the handler
//! runs. Rows leased in a batch but never started (the worker was killed, or ran out of time)
//! come back with their attempts unchanged.

use std::time::SystemTime;

use tokio_postgres::types::{ToSql, Type};

use super::tx::{Guard, Tx};
use super::{Connection, LedgerError, Status};
use crate::db::Sql;

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
    /// Attempts started before this lease (0 for a new event).
    pub attempts: i32,
    /// This lease's fencing token.
    pub lease_token: i64,
}

impl Leased {
    /// The transaction in which the handler applies this event: it begins with the handler's
    /// first statement (so the handler's external work before it runs outside any transaction),
    /// and its completion is fenced by this lease's token.
    pub fn tx<'c>(&self, conn: &'c Connection) -> Tx<'c> {
        Tx::lazy(
            conn,
            Guard::Leased {
                token: self.lease_token,
            },
        )
    }
}

static LEASE_DUE: Sql = Sql {
    text: "\
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
    -- A new token for every lease: the previous holder's transitions no longer match.
    lease_token = e.lease_token + 1,
    lease_expires_at = $2,
    next_attempt_at = $2
FROM due
WHERE e.source = due.source
  AND e.event_id = due.event_id
RETURNING e.source, e.event_id, e.event_type, e.payload, e.attempts, e.lease_token",
    types: &[Type::TIMESTAMPTZ, Type::TIMESTAMPTZ, Type::INT8],
};

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
    let rows = conn
        .autocommit(&LEASE_DUE, &[&now, &lease_expires_at, &limit])
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Leased {
                source: row.try_get(0)?,
                event_id: row.try_get(1)?,
                event_type: row.try_get(2)?,
                payload: row.try_get(3)?,
                attempts: row.try_get(4)?,
                lease_token: row.try_get(5)?,
            })
        })
        .collect()
}

static START: Sql = Sql {
    text: "\
UPDATE webhook_event
SET attempts = attempts + 1
WHERE source = $1
  AND event_id = $2
  AND status = 'processing'
  AND lease_token = $3
RETURNING attempts",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Records that an attempt of `leased` starts now: bumps `attempts` under the lease and returns
/// the attempt's number (1 for the first), or `None` when the lease was lost (the event must not
/// be processed). Committed before the handler runs, so an attempt that kills its worker still
/// counts.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn start(conn: &Connection, leased: &Leased) -> Result<Option<i32>, LedgerError> {
    let rows = conn
        .autocommit(
            &START,
            &[&leased.source, &leased.event_id, &leased.lease_token],
        )
        .await?;
    match rows.first() {
        Some(row) => Ok(Some(row.try_get(0)?)),
        None => Ok(None),
    }
}

/// How a failed attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Retry at this time (`failed`).
    RetryAt(SystemTime),
    /// Attempts exhausted or a fatal error (`dead`): kept for a human and re-drive.
    Dead,
}

static FAIL: Sql = Sql {
    text: "\
UPDATE webhook_event
SET status = $4::text::event_status,
    last_error = $5,
    next_attempt_at = $6,
    lease_expires_at = NULL,
    -- Dead letters keep their own retention, counted from here.
    dead_at = CASE WHEN $4 = 'dead' THEN now() END
WHERE source = $1
  AND event_id = $2
  -- Fenced by the lease: a worker that lost its lease cannot overwrite the new owner's state.
  AND status = 'processing'
  AND lease_token = $3
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
        Type::TEXT,
        Type::TIMESTAMPTZ,
    ],
};

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
    let (status, next_attempt_at) = match failure {
        Failure::RetryAt(at) => (Status::Failed.as_str(), Some(*at)),
        Failure::Dead => (Status::Dead.as_str(), None),
    };
    let error = super::bounded_error(error);
    let params: [&(dyn ToSql + Sync); 6] = [
        &leased.source,
        &leased.event_id,
        &leased.lease_token,
        &status,
        &error,
        &next_attempt_at,
    ];
    Ok(!conn.autocommit(&FAIL, &params).await?.is_empty())
}

static RELEASE: Sql = Sql {
    text: "\
UPDATE webhook_event
SET status = 'failed',
    -- attempts is untouched: this lease never started an attempt.
    last_error = $5,
    next_attempt_at = $4,
    lease_expires_at = NULL
WHERE source = $1
  AND event_id = $2
  AND status = 'processing'
  AND lease_token = $3
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TIMESTAMPTZ,
        Type::TEXT,
    ],
};

/// Gives a leased event back unstarted (the worker is out of time, or cannot handle it yet):
/// due again at `due_at`, no attempt counted, `reason` in `last_error`. Returns `false` when the
/// lease was lost.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn release(
    conn: &Connection,
    leased: &Leased,
    due_at: SystemTime,
    reason: &str,
) -> Result<bool, LedgerError> {
    let params: [&(dyn ToSql + Sync); 5] = [
        &leased.source,
        &leased.event_id,
        &leased.lease_token,
        &due_at,
        &reason,
    ];
    Ok(!conn.autocommit(&RELEASE, &params).await?.is_empty())
}
