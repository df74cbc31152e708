//! The claim (inline mode), the lookup of an existing row, and the dead letter an inline fatal
//! error leaves.

use std::time::SystemTime;

use tokio_postgres::types::{Json, ToSql, Type};

use super::tx::{Guard, Tx};
use super::{is_lock_timeout, Connection, LedgerError, Status};
use crate::db::pipeline::in_order;
use crate::db::Sql;
use crate::retention::Retention;

/// The event being claimed. `digest` is the SHA-256 of the raw body; `identity` what a retry
/// must match (see `hookledger_verify::identity`).
#[derive(Debug, Clone, Copy)]
pub struct NewEvent<'a> {
    /// Source name (the ledger key's first half).
    pub source: &'a str,
    /// The provider's event id (the ledger key's second half), 1 to 255 bytes.
    pub event_id: &'a str,
    /// The provider's event type, e.g. `payment_intent.succeeded`.
    pub event_type: &'a str,
    /// SHA-256 of the raw body (32 bytes), kept for audit.
    pub digest: &'a [u8; 32],
    /// The payload identity (32 bytes): what the provider keeps stable across retries of the
    /// event, compared to tell a retry from an event id reused with another body.
    pub identity: &'a [u8; 32],
    /// What the claim stores as the row's payload, `None` to keep the digest only: inline,
    /// the completed event's copy (redacted when the source redacts); deferred, the body as
    /// received (the worker processes it, then stores the completed copy). Sealed when the
    /// source encrypts (`crate::privacy`).
    pub payload: Option<&'a [u8]>,
    /// What a dead letter of the event keeps ([`record_dead`]): the body as received (sealed
    /// when the source encrypts), since re-drive runs the handlers on it again; `None` to keep
    /// the digest only.
    pub dead_payload: Option<&'a [u8]>,
    /// The keyed hash of the data subject the payload names (`crate::privacy::subject`), when
    /// the source has a `subject` and the payload carries one: `subject_hash` (V23).
    pub subject: Option<&'a [u8; 32]>,
    /// `true` when replay fetched the event from the provider's API (`crate::replay`) rather
    /// than a signed delivery bringing it: a new row gets `replayed_at`, and a key already in the
    /// ledger is [`Claim::Known`] whatever its bytes (the API re-serialises events, so the
    /// payload comparison applies to deliveries only) and is never retaken when dead (that is
    /// re-drive's job, `crate::redrive`).
    pub replayed: bool,
    /// `true` when the delivery's event id or type is not covered by its signature (GitHub,
    /// Shopify, a generic source reading a header: `hookledger_verify::extract::id_and_type_signed`).
    /// The row then keeps `digest` as its replay guard (`replay_guard`, unique per source,
    /// migration V17): the same verified body cannot become a second event under a fresh id or
    /// type while the row is kept. Ignored for a replayed event (the provider's API named it).
    pub unsigned_id: bool,
}

impl NewEvent<'_> {
    /// The replay guard this event's row records: its digest when [`NewEvent::unsigned_id`]
    /// (and not replayed), else `None` (SQL NULL: no guard).
    pub(crate) fn replay_guard(&self) -> Option<&[u8]> {
        (self.unsigned_id && !self.replayed).then_some(self.digest.as_slice())
    }
}

/// The row that already holds a verified body which arrived again under another event id (or
/// type): its replay guard matched ([`NewEvent::unsigned_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// The event id the body was first received under.
    pub event_id: String,
    /// Its stored response when it has one (completed, or kept dead inline): what the body's
    /// second arrival is answered with. `None` while it is still being processed.
    pub response: Option<StoredResponse>,
}

/// A stored response: what every retry of a completed event is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status, e.g. 200.
    pub status: u16,
    /// The response body, JSON text exactly as stored (`response_body::text`).
    pub body: String,
}

/// The decision a claim returns.
#[derive(Debug)]
pub enum Claim<'c> {
    /// This delivery owns the event: apply the effect through the open transaction, then
    /// [`Tx::complete`] (or drop / [`Tx::rollback`] to release the claim).
    Won(Tx<'c>),
    /// The event was completed before with the same body: answer with the stored response.
    Completed(StoredResponse),
    /// The event is claimed but not completed (another delivery holds it, or its lock wait
    /// hit `lock_timeout`): answer 409 with `Retry-After`.
    InFlight,
    /// The same event id arrived before with a different body: 409, the row is untouched.
    DigestMismatch,
    /// Replay only ([`NewEvent::replayed`]): the key is already in the ledger, in this status,
    /// whatever its body. Nothing was written.
    Known(Status),
    /// The same verified body is in the ledger under another event id, and this scheme does not
    /// sign the id or type ([`NewEvent::unsigned_id`]): a captured delivery sent again as a new
    /// event. Nothing was written; answer like a duplicate of the original.
    BodyReplayed(Original),
}

/// A row as [`lookup`] reads it.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// Current status.
    pub status: Status,
    /// SHA-256 of the body first claimed.
    pub payload_digest: Vec<u8>,
    /// The payload identity of the body first claimed (`None` on rows claimed before it was
    /// recorded).
    pub payload_identity: Option<Vec<u8>>,
    /// The stored response, present when completed (and on an inline dead letter).
    pub response: Option<StoredResponse>,
    /// When the key was first claimed (the first delivery).
    pub claimed_at: SystemTime,
    /// When the row went `dead`, if it is dead.
    pub dead_at: Option<SystemTime>,
    /// Whether replay created the row from the provider's API (`replayed_at` is set): its
    /// digests are of the API's rendering, not of the delivery's bytes.
    pub replayed: bool,
}

/// What a claim needs to judge an existing key's age: the source's retention and the time now.
/// A key past retention that is still present is treated exactly as one the sweeper already
/// deleted ([`Retention::is_expired`]).
#[derive(Debug, Clone, Copy)]
pub struct Expiry {
    /// The source's retention ([`crate::config::Sources::retention`]).
    pub retention: Retention,
    /// The time now (the receiver's clock; injected by tests).
    pub now: SystemTime,
}

impl EventRow {
    /// Whether `event` carries the same payload as this row: the payload identity when the row
    /// has one, else the full-body digest. A row replay created matches any body: the provider's
    /// API renders an event differently from its deliveries (Stripe's list pages nest and
    /// indent it otherwise, an endpoint may be pinned to another API version), so the
    /// provider's own retry of the delivery replay stood in for is a duplicate, never a 409.
    pub fn same_payload(&self, event: &NewEvent<'_>) -> bool {
        if self.replayed {
            return true;
        }
        match &self.payload_identity {
            Some(identity) => identity.as_slice() == event.identity.as_slice(),
            None => self.payload_digest.as_slice() == event.digest.as_slice(),
        }
    }

    /// Whether this row has expired under `expiry` (then it counts as absent).
    pub fn is_expired(&self, expiry: &Expiry) -> bool {
        expiry
            .retention
            .is_expired(self.status, self.claimed_at, self.dead_at, expiry.now)
    }
}

/// The claim's INSERT: the whole concurrency control of the receive path (public for the
/// benchmark's baseline, which pairs it with the lookup as it was before retention).
pub static CLAIM: Sql = Sql {
    text: "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, payload_identity,
     replayed_at, replay_guard, subject_hash)
VALUES ($1, $2, $3, $4, $5, 'claimed', $6, CASE WHEN $7 THEN now() END, $8, $9)
-- No conflict target: the key, or the replay guard (the same body under another id, V17). A
-- concurrent claim of either waits here for the first to commit or roll back.
ON CONFLICT DO NOTHING
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
        Type::BYTEA,
        Type::BOOL,
        Type::BYTEA,
        Type::BYTEA,
    ],
};

/// Claims `event` on `conn`: opens a transaction (with the session's limits) and inserts the
/// ledger row.
///
/// On [`Claim::Won`] the transaction stays open in the returned [`Tx`]; on every other outcome
/// it is already rolled back. A lost claim reads the existing row in a new statement (its own
/// snapshot, so it sees the winner's commit) and compares payloads ([`EventRow::same_payload`]).
///
/// A key past its retention (`expiry`) that is still present is claimed again as new
/// ([`retake_expired`]), whatever its body: exactly what a redelivery after the sweep gets.
///
/// One round trip when won (`BEGIN` and the INSERT are pipelined); two when lost.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (check [`LedgerError::is_unavailable`]). A
/// `lock_timeout` while waiting on an in-flight claim is [`Claim::InFlight`], not an error.
pub async fn claim<'c>(
    conn: &'c Connection,
    event: &NewEvent<'_>,
    expiry: &Expiry,
) -> Result<Claim<'c>, LedgerError> {
    let statement = conn.prepare(&CLAIM).await?;
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let guard = event.replay_guard();
    let subject = event.subject.map(<[u8; 32]>::as_slice);
    let params: [&(dyn ToSql + Sync); 9] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &identity,
        &event.replayed,
        &guard,
        &subject,
    ];
    // The guard exists before anything is sent: if this future is dropped while the INSERT
    // waits (a cancelled duplicate), the guard's Drop queues ROLLBACK, so the connection never
    // returns to the pool inside an open transaction holding an orphaned claim.
    let tx = Tx::open(conn, Guard::Claimed);
    // BEGIN is sent before the INSERT: `in_order` polls (and so sends) in the order given.
    let (begin, inserted) = in_order(conn.begin(), conn.query_opt(&statement, &params)).await;
    begin?;
    match inserted {
        Ok(Some(_)) => return Ok(Claim::Won(tx)),
        Ok(None) => {}
        Err(error) if is_lock_timeout(&error) => {
            tx.rollback().await?;
            return Ok(Claim::InFlight);
        }
        Err(error) => return Err(error.into()),
    }
    // Lost: release our (empty) transaction and read the winner's row.
    let (rolled_back, found) = in_order(tx.rollback(), lookup_conflict(conn, event)).await;
    rolled_back?;
    let row = match found? {
        Conflict::Own(row) => row,
        // The replay guard's conflict: this body under another id.
        Conflict::Guarded(original) => return Ok(Claim::BodyReplayed(original)),
        // Deleted between the conflict and the read (sweeper): the provider's retry decides.
        Conflict::Gone => return Ok(Claim::InFlight),
    };
    Ok(match judge(&row, event, expiry) {
        Verdict::Known(status) => Claim::Known(status),
        Verdict::Expired => retake(conn, retake_expired(conn, event, &row, expiry, None)).await?,
        Verdict::DigestMismatch => Claim::DigestMismatch,
        Verdict::Completed(response) => Claim::Completed(response),
        Verdict::Dead => retake_dead(conn, event).await?,
        Verdict::InFlight => Claim::InFlight,
    })
}

/// What an existing row means for a delivery (or a replayed event) that lost the claim.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Replay: the key is in the ledger, whatever its bytes, status or age.
    Known(Status),
    /// Past the source's retention: claim it again as new (as if swept).
    Expired,
    /// The same event id with a different payload.
    DigestMismatch,
    /// Completed with the same payload: answer the stored response.
    Completed(StoredResponse),
    /// Dead by an inline fatal error: a redelivery runs it again.
    Dead,
    /// Claimed, pending or processing: someone else owns it now.
    InFlight,
}

/// Judges the existing `row` of the key `event` lost the claim to: the one place both claim
/// shapes (this module's transaction and `super::one_statement`) decide a duplicate.
pub(crate) fn judge(row: &EventRow, event: &NewEvent<'_>, expiry: &Expiry) -> Verdict {
    match row {
        // Replay: a key in the ledger is known, whatever its bytes, status or age. (An expired
        // key is not taken again: the window stays inside the look-back, so only an event the
        // API answered outside the window could find one, and it must not run twice.)
        row if event.replayed => Verdict::Known(row.status),
        row if row.is_expired(expiry) => Verdict::Expired,
        row if !row.same_payload(event) => Verdict::DigestMismatch,
        EventRow {
            response: Some(response),
            status: Status::Completed,
            ..
        } => Verdict::Completed(response.clone()),
        // Dead by an inline fatal error: a redelivery (a resend after the handler or the
        // sender was fixed) runs it again. Its fatal run rolled everything back, so nothing can
        // double; a fatal error again keeps it dead with the same answer.
        EventRow {
            status: Status::Dead,
            ..
        } => Verdict::Dead,
        _ => Verdict::InFlight,
    }
}

static LOOKUP_CONFLICT: Sql = Sql {
    text: "\
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity,
       claimed_at, dead_at, replayed_at IS NOT NULL, event_id
FROM webhook_event
WHERE source = $1
  AND (event_id = $2 OR replay_guard = $3)",
    types: &[Type::TEXT, Type::TEXT, Type::BYTEA],
};

/// What a lost claim (or accept) of `event` conflicted with.
#[derive(Debug)]
pub(crate) enum Conflict {
    /// The row of the event's own key.
    Own(EventRow),
    /// No row of its key, but one holding its body under another id (the replay guard).
    Guarded(Original),
    /// Neither: deleted between the conflict and the read (the sweeper).
    Gone,
}

/// The row `event`'s claim conflicted with, in one statement: [`lookup`] when `event` has no
/// replay guard (the schemes that sign the id and type), else the key's row or the row holding
/// the guard ([`LOOKUP_CONFLICT`]).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; [`LedgerError::UnknownStatus`] for a status
/// this build does not know.
pub(crate) async fn lookup_conflict(
    conn: &Connection,
    event: &NewEvent<'_>,
) -> Result<Conflict, LedgerError> {
    let Some(guard) = event.replay_guard() else {
        return Ok(match lookup(conn, event.source, event.event_id).await? {
            Some(row) => Conflict::Own(row),
            None => Conflict::Gone,
        });
    };
    let statement = conn.prepare(&LOOKUP_CONFLICT).await?;
    let rows = conn
        .query(&statement, &[&event.source, &event.event_id, &guard])
        .await?;
    conflict(&rows, event.event_id, 8)
}

/// [`Conflict`] from rows holding [`LOOKUP`]'s columns, then the row's event id at
/// `event_id_column`: the key's own row decides when there is one (a retry, a reused id), else
/// the row holding the body under another id.
///
/// # Errors
/// [`LedgerError::Db`] for a column of the wrong type; [`LedgerError::UnknownStatus`].
pub(crate) fn conflict(
    rows: &[tokio_postgres::Row],
    event_id: &str,
    event_id_column: usize,
) -> Result<Conflict, LedgerError> {
    let mut guarded = None;
    for row in rows {
        let id: String = row.try_get(event_id_column)?;
        if id == event_id {
            return Ok(Conflict::Own(event_row(row)?));
        }
        guarded = Some(event_row(row)?.original(id));
    }
    Ok(guarded.map_or(Conflict::Gone, Conflict::Guarded))
}

/// Whether `error` is the replay guard's unique index refusing a second row of the same body
/// (an UPDATE or an `ON CONFLICT (source, event_id)` INSERT, which do not arbitrate it).
pub(crate) fn is_replay_guard_conflict(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
        && error
            .as_db_error()
            .and_then(tokio_postgres::error::DbError::constraint)
            == Some(REPLAY_GUARD_INDEX)
}

/// The replay guard's unique index (migration V17).
const REPLAY_GUARD_INDEX: &str = "webhook_event_replay_guard_key";

static RETAKE_DEAD: Sql = Sql {
    text: "\
UPDATE webhook_event
SET status = 'claimed',
    response_status = NULL,
    response_body = NULL,
    next_attempt_at = NULL,
    lease_expires_at = NULL,
    dead_at = NULL,
    -- A new first delivery: the key's retention (counted from claimed_at) starts again, or a
    -- dead letter re-driven late would complete already past retention (and be swept, and a
    -- second resend run again).
    claimed_at = now()
WHERE source = $1
  AND event_id = $2
  -- Another delivery retaking it at the same time holds the row: this one waits (lock_timeout)
  -- and then finds it no longer dead.
  AND status = 'dead'
RETURNING 1",
    types: &[Type::TEXT, Type::TEXT],
};

/// Claims a dead event again (the row back to `claimed`, claimed now, so its retention starts
/// again; uncommitted), through [`retake`].
async fn retake_dead<'c>(
    conn: &'c Connection,
    event: &NewEvent<'_>,
) -> Result<Claim<'c>, LedgerError> {
    retake(conn, async {
        let statement = conn.prepare(&RETAKE_DEAD).await?;
        let row = conn
            .query_opt(&statement, &[&event.source, &event.event_id])
            .await?;
        Ok(row.is_some())
    })
    .await
}

/// Opens the claim's transaction and runs `update` in it, pipelined after `BEGIN`:
/// [`Claim::Won`] when it took the row, [`Claim::InFlight`] (rolled back) when the row had
/// moved on or another delivery held it past `lock_timeout`.
async fn retake<'c>(
    conn: &'c Connection,
    update: impl std::future::Future<Output = Result<bool, tokio_postgres::Error>>,
) -> Result<Claim<'c>, LedgerError> {
    let tx = Tx::open(conn, Guard::Claimed);
    let (begin, retaken) = in_order(conn.begin(), update).await;
    begin?;
    match retaken {
        Ok(true) => Ok(Claim::Won(tx)),
        Ok(false) => {
            tx.rollback().await?;
            Ok(Claim::InFlight)
        }
        Err(error) if is_lock_timeout(&error) => {
            tx.rollback().await?;
            Ok(Claim::InFlight)
        }
        Err(error) => Err(error.into()),
    }
}

static RETAKE_EXPIRED: Sql = Sql {
    text: "\
UPDATE webhook_event
SET event_type = $3,
    payload_digest = $4,
    payload = $5,
    -- The new life's payload is kept until its own payload retention (the sweep picks rows
    -- without a drop time).
    payload_dropped_at = NULL,
    payload_identity = $6,
    status = 'claimed',
    attempts = 0,
    last_error = NULL,
    response_status = NULL,
    response_body = NULL,
    claimed_at = now(),
    -- A new life of the event: its outbox messages of the earlier life were for that one.
    life_started_at = now(),
    completed_at = NULL,
    dead_at = NULL,
    lease_expires_at = NULL,
    next_attempt_at = $7,
    replayed_at = CASE WHEN $10 THEN now() END,
    replay_guard = $11,
    subject_hash = $12,
    erased_at = NULL,
    history = NULL
WHERE source = $1
  AND event_id = $2
  -- Only the version judged expired: a concurrent retake or a sweep got there first, and this
  -- delivery is answered as in flight (its retry finds the new row, or none).
  AND status = $8::text::event_status
  AND claimed_at = $9
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
        Type::BYTEA,
        Type::TIMESTAMPTZ,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::BOOL,
        Type::BYTEA,
        Type::BYTEA,
    ],
};

/// Claims an expired key again as a new event: the row takes this delivery's body, type and
/// digests, `claimed` with no attempts, `claimed_at` now and `next_attempt_at` = `due_at`
/// (`None` inline, the accept time in deferred mode). Runs in the caller's open transaction
/// (inline), or in its own, committed before this returns, when `due_at` is set (deferred).
/// Returns `false` when the row changed
/// since `row` was read, or when this body is already another row's under the replay guard
/// (an expired key retaken with a body the ledger holds under another id). Logs `expired_key_reclaimed` and counts the metric of that name: a
/// delivery past retention means the retention is shorter than the provider retries, or an old
/// event was replayed.
pub(crate) async fn retake_expired(
    conn: &Connection,
    event: &NewEvent<'_>,
    row: &EventRow,
    expiry: &Expiry,
    due_at: Option<SystemTime>,
) -> Result<bool, tokio_postgres::Error> {
    let age_secs = expiry
        .now
        .duration_since(row.claimed_at)
        .map_or(0, |age| age.as_secs());
    tracing::warn!(
        source = event.source,
        event_id = event.event_id,
        status = row.status.as_str(),
        age_secs,
        retention_secs = expiry.retention.completed.as_secs(),
        metric = "expired_key_reclaimed",
        "a key past its retention is claimed again as a new event (as if it had been swept)"
    );
    crate::telemetry::count(
        crate::telemetry::MetricName::ExpiredKeyReclaimed,
        event.source,
        1,
    );
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let status = row.status.as_str();
    let guard = event.replay_guard();
    let subject = event.subject.map(<[u8; 32]>::as_slice);
    let params: [&(dyn ToSql + Sync); 12] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &identity,
        &due_at,
        &status,
        &row.claimed_at,
        &event.replayed,
        &guard,
        &subject,
    ];
    let rows = if due_at.is_some() {
        conn.autocommit(&RETAKE_EXPIRED, &params).await
    } else {
        let statement = conn.prepare(&RETAKE_EXPIRED).await?;
        conn.query(&statement, &params).await
    };
    match rows {
        Ok(rows) => Ok(!rows.is_empty()),
        Err(error) if is_replay_guard_conflict(&error) => Ok(false),
        Err(error) => Err(error),
    }
}

static LOOKUP: Sql = Sql {
    text: "\
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity,
       claimed_at, dead_at, replayed_at IS NOT NULL
FROM webhook_event
WHERE source = $1
  AND event_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// Reads one ledger row by key (outside any transaction: no locks, no limits needed for a
/// primary-key read).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; [`LedgerError::UnknownStatus`] for a status
/// this build does not know.
pub async fn lookup(
    conn: &Connection,
    source: &str,
    event_id: &str,
) -> Result<Option<EventRow>, LedgerError> {
    let statement = conn.prepare(&LOOKUP).await?;
    let Some(row) = conn.query_opt(&statement, &[&source, &event_id]).await? else {
        return Ok(None);
    };
    event_row(&row).map(Some)
}

impl EventRow {
    /// This row as the [`Original`] of a body that arrived again under `event_id`'s other id:
    /// its stored response when it has one to give (completed, or kept dead inline).
    pub(crate) fn original(self, event_id: String) -> Original {
        let response = match self.status {
            Status::Completed | Status::Dead => self.response,
            _ => None,
        };
        Original { event_id, response }
    }
}

/// An [`EventRow`] from a row of [`LOOKUP`]'s columns (in that order).
pub(crate) fn event_row(row: &tokio_postgres::Row) -> Result<EventRow, LedgerError> {
    let status = Status::parse(row.try_get::<_, &str>(0)?)?;
    let response_status: Option<i16> = row.try_get(2)?;
    let response_body: Option<String> = row.try_get(3)?;
    Ok(EventRow {
        status,
        payload_digest: row.try_get(1)?,
        payload_identity: row.try_get(4)?,
        claimed_at: row.try_get(5)?,
        dead_at: row.try_get(6)?,
        replayed: row.try_get(7)?,
        response: match (response_status, response_body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).unwrap_or(500),
                body,
            }),
            _ => None,
        },
    })
}

static LOOKUP_MANY: Sql = Sql {
    text: "\
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity,
       claimed_at, dead_at, replayed_at IS NOT NULL, event_id
FROM webhook_event
WHERE source = $1
  AND event_id = ANY ($2)",
    types: &[Type::TEXT, Type::TEXT_ARRAY],
};

/// [`lookup`] for many keys of one source in one statement (a replay's page): the rows found,
/// by event id.
///
/// # Errors
/// As [`lookup`].
pub async fn lookup_many(
    conn: &Connection,
    source: &str,
    event_ids: &[String],
) -> Result<std::collections::HashMap<String, EventRow>, LedgerError> {
    let statement = conn.prepare(&LOOKUP_MANY).await?;
    let rows = conn.query(&statement, &[&source, &event_ids]).await?;
    rows.iter()
        .map(|row| Ok((row.try_get(8)?, event_row(row)?)))
        .collect()
}

static RECORD_DEAD: Sql = Sql {
    text: "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, attempts, last_error,
     response_status, response_body, payload_identity, dead_at, replayed_at, replay_guard,
     subject_hash)
VALUES ($1, $2, $3, $4, $5, 'dead', 1, $6, $7, $8, $9, now(), CASE WHEN $12 THEN now() END,
        $13, $14)
-- A redelivery of a dead event failed fatally again: one more attempt, the latest error, the
-- same answer. A key past its retention ($10: completed claimed before it; $11: dead before it)
-- counts as absent, exactly as if swept: it becomes a new dead letter of this delivery. A
-- concurrent delivery that claimed the event after our rollback: its outcome stands (no row
-- back). (The replay guard is not an arbiter here: a delivery of the same body under another id
-- that claimed it after our rollback makes this statement fail, a 5xx the provider retries,
-- and its retry is answered as that body's duplicate.)
ON CONFLICT (source, event_id) DO UPDATE
SET attempts = CASE WHEN webhook_event.status = 'completed' OR webhook_event.dead_at < $11
                    THEN 1 ELSE webhook_event.attempts + 1 END,
    claimed_at = CASE WHEN webhook_event.status = 'completed' OR webhook_event.dead_at < $11
                      THEN now() ELSE webhook_event.claimed_at END,
    life_started_at = CASE WHEN webhook_event.status = 'completed' OR webhook_event.dead_at < $11
                           THEN now() ELSE webhook_event.life_started_at END,
    replayed_at = CASE WHEN webhook_event.status = 'completed' OR webhook_event.dead_at < $11
                       THEN EXCLUDED.replayed_at ELSE webhook_event.replayed_at END,
    event_type = EXCLUDED.event_type,
    payload_digest = EXCLUDED.payload_digest,
    payload = EXCLUDED.payload,
    payload_dropped_at = NULL,
    subject_hash = EXCLUDED.subject_hash,
    erased_at = NULL,
    payload_identity = EXCLUDED.payload_identity,
    replay_guard = EXCLUDED.replay_guard,
    status = 'dead',
    completed_at = NULL,
    last_error = EXCLUDED.last_error,
    response_status = EXCLUDED.response_status,
    response_body = EXCLUDED.response_body,
    dead_at = EXCLUDED.dead_at
WHERE webhook_event.status = 'dead'
   OR (webhook_event.status = 'completed' AND webhook_event.claimed_at < $10)
RETURNING response_body::text",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
        Type::TEXT,
        Type::INT2,
        Type::JSONB,
        Type::BYTEA,
        Type::TIMESTAMPTZ,
        Type::TIMESTAMPTZ,
        Type::BOOL,
        Type::BYTEA,
        Type::BYTEA,
    ],
};

/// Keeps an event whose inline handler failed fatally as `dead`, with its payload (when the
/// source keeps payloads), the error, and the response the delivery is answered with; a dead
/// row already there (a redelivery that failed again) gets the new error and one more attempt;
/// a key past its retention (`expiry`, [`EventRow::is_expired`]) becomes this delivery's new
/// dead letter, as it would after the sweep. Runs in its own transaction after the claim's was rolled back (so none of the handler's
/// writes survive). Returns the stored response, or `None` when another delivery claimed the
/// event in between (its outcome stands).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn record_dead(
    conn: &Connection,
    event: &NewEvent<'_>,
    error: &str,
    status: u16,
    body: &serde_json::Value,
    expiry: &Expiry,
) -> Result<Option<StoredResponse>, LedgerError> {
    let completed_cutoff = expiry.retention.completed_cutoff(expiry.now);
    let dead_cutoff = expiry.retention.dead_cutoff(expiry.now);
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let error = super::bounded_error(error);
    let status_param = i16::try_from(status).unwrap_or(200);
    let body_param = Json(body);
    let guard = event.replay_guard();
    let subject = event.subject.map(<[u8; 32]>::as_slice);
    let rows = conn
        .autocommit(
            &RECORD_DEAD,
            &[
                &event.source,
                &event.event_id,
                &event.event_type,
                &digest,
                &event.dead_payload,
                &error,
                &status_param,
                &body_param,
                &identity,
                &completed_cutoff,
                &dead_cutoff,
                &event.replayed,
                &guard,
                &subject,
            ],
        )
        .await?;
    match rows.first() {
        Some(row) => Ok(Some(StoredResponse {
            status,
            body: row.try_get(0)?,
        })),
        None => Ok(None),
    }
}
