//! Deferred mode's durable accept: the claim commits on its own, the worker does the work.

use std::time::SystemTime;

use tokio_postgres::types::{ToSql, Type};

use super::claim::{lookup_conflict, retake_expired, Conflict, Expiry, Original};
use super::{is_lock_timeout, Connection, LedgerError, NewEvent, Status};
use crate::db::Sql;

/// The decision of a deferred accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accept {
    /// The event is durably stored as `claimed`, due at once: ring the worker, answer 202.
    Accepted,
    /// The event was accepted before with the same body; its current status is given (any of
    /// them: claimed, processing, completed, failed, dead). Answer the same 202.
    Duplicate(Status),
    /// The same event id arrived before with a different body: 409, the row is untouched.
    DigestMismatch,
    /// Another delivery of the event holds an uncommitted claim past `lock_timeout`: 409 with
    /// `Retry-After`.
    InFlight,
    /// The same verified body is in the ledger under another event id and the scheme does not
    /// sign the id or type ([`NewEvent::unsigned_id`]): nothing was written; answer like a
    /// duplicate.
    BodyReplayed(Original),
}

/// The claim's INSERT in deferred mode: committed by itself, due at `$6`.
static ACCEPT: Sql = Sql {
    text: "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, next_attempt_at,
     payload_identity, replayed_at, replay_guard, subject_hash)
VALUES ($1, $2, $3, $4, $5, 'claimed', $6, $7, CASE WHEN $8 THEN now() END, $9, $10)
-- No conflict target: the key, or the replay guard (the same body under another id, V17). A
-- concurrent accept of either waits here (bounded by lock_timeout).
ON CONFLICT DO NOTHING
RETURNING 1",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
        Type::TIMESTAMPTZ,
        Type::BYTEA,
        Type::BOOL,
        Type::BYTEA,
        Type::BYTEA,
    ],
};

/// Accepts `event` durably for the worker: one statement in its own transaction (`BEGIN` with
/// the session's limits, the INSERT and `COMMIT` pipelined: one round trip when new), committed
/// before this returns, due at `expiry.now`. The payload must be present: the worker processes
/// from it. A key past its retention is accepted again as new, as in [`super::claim`].
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (the provider must get a 5xx: nothing was
/// acknowledged). A `lock_timeout` is [`Accept::InFlight`], not an error.
pub async fn accept(
    conn: &Connection,
    event: &NewEvent<'_>,
    expiry: &Expiry,
) -> Result<Accept, LedgerError> {
    let now: SystemTime = expiry.now;
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let guard = event.replay_guard();
    let subject = event.subject.map(<[u8; 32]>::as_slice);
    let params: [&(dyn ToSql + Sync); 10] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &now,
        &identity,
        &event.replayed,
        &guard,
        &subject,
    ];
    match conn.autocommit(&ACCEPT, &params).await {
        Ok(rows) if !rows.is_empty() => return Ok(Accept::Accepted),
        Ok(_) => {}
        Err(error) if is_lock_timeout(&error) => return Ok(Accept::InFlight),
        Err(error) => return Err(error.into()),
    }
    let row = match lookup_conflict(conn, event).await? {
        Conflict::Own(row) => row,
        // The replay guard's conflict: this body under another id.
        Conflict::Guarded(original) => return Ok(Accept::BodyReplayed(original)),
        // Swept between the conflict and the read: the provider's retry decides.
        Conflict::Gone => return Ok(Accept::InFlight),
    };
    Ok(match row {
        // Replay: a key in the ledger is a duplicate whatever its bytes, status or age (see
        // `super::claim`).
        row if event.replayed => Accept::Duplicate(row.status),
        row if row.is_expired(expiry) => {
            match retake_expired(conn, event, &row, expiry, Some(now)).await {
                Ok(true) => Accept::Accepted,
                Ok(false) => Accept::InFlight,
                Err(error) if is_lock_timeout(&error) => Accept::InFlight,
                Err(error) => return Err(error.into()),
            }
        }
        row if !row.same_payload(event) => Accept::DigestMismatch,
        row => Accept::Duplicate(row.status),
    })
}
