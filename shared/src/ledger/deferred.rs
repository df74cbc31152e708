//! Deferred mode's durable accept: the claim commits on its own, the worker does the work.

use std::time::SystemTime;

use tokio_postgres::types::ToSql;

use super::{is_lock_timeout, lookup, Connection, LedgerError, NewEvent, Status};

/// The decision of a deferred accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// The claim's INSERT in deferred mode: committed by itself (autocommit), due at `$6`.
const ACCEPT: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, status, next_attempt_at)
VALUES ($1, $2, $3, $4, $5, 'claimed', $6)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING 1";

/// Accepts `event` durably for the worker: one statement, committed before this returns (one
/// round trip when new). The payload must be present: the worker processes from it.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (the provider must get a 5xx: nothing was
/// acknowledged). A `lock_timeout` is [`Accept::InFlight`], not an error.
pub async fn accept(
    conn: &Connection,
    event: &NewEvent<'_>,
    now: SystemTime,
) -> Result<Accept, LedgerError> {
    let statement = conn.prepare_cached(ACCEPT).await?;
    let digest: &[u8] = event.digest;
    let params: [&(dyn ToSql + Sync); 6] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &now,
    ];
    match conn.query_opt(&statement, &params).await {
        Ok(Some(_)) => return Ok(Accept::Accepted),
        Ok(None) => {}
        Err(error) if is_lock_timeout(&error) => return Ok(Accept::InFlight),
        Err(error) => return Err(error.into()),
    }
    Ok(match lookup(conn, event.source, event.event_id).await? {
        // Swept between the conflict and the read: let the provider's retry decide.
        None => Accept::InFlight,
        Some(row) if row.payload_digest.as_slice() != event.digest.as_slice() => {
            Accept::DigestMismatch
        }
        Some(row) => Accept::Duplicate(row.status),
    })
}
