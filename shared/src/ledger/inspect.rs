//! One ledger row in full, for the operator (`hookledger inspect`, the replay function's
//! `inspect`): everything but the payload's bytes.

use std::time::SystemTime;

use tokio_postgres::types::{Json, Type};

use super::{Connection, LedgerError, Status};
use crate::db::Sql;
use crate::telemetry::rfc3339;

/// One ledger row as an operator reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDetail {
    /// Source name.
    pub source: String,
    /// The provider's event id.
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// Current status.
    pub status: Status,
    /// Attempts started by workers since the last claim or re-drive.
    pub attempts: i32,
    /// The latest handler error, if any.
    pub last_error: Option<String>,
    /// The stored response status (completed rows, inline dead letters).
    pub response_status: Option<i16>,
    /// The stored response body, as JSON.
    pub response_body: Option<serde_json::Value>,
    /// SHA-256 of the body first claimed, lowercase hex (64 characters).
    pub payload_digest: String,
    /// The stored body's length in bytes; `None` when the source keeps digests only.
    pub payload_bytes: Option<i32>,
    /// When the key was (last) claimed: the first delivery, or the latest re-drive.
    pub claimed_at: SystemTime,
    /// When it completed.
    pub completed_at: Option<SystemTime>,
    /// When it went dead.
    pub dead_at: Option<SystemTime>,
    /// When the worker may take it next (deferred, re-driven and failed rows).
    pub next_attempt_at: Option<SystemTime>,
    /// When the current worker's lease ends (`processing`).
    pub lease_expires_at: Option<SystemTime>,
    /// When replay created the row from the provider's API; `None` for a delivery.
    pub replayed_at: Option<SystemTime>,
    /// What operators did to the row, oldest first (see migration V12): a JSON array, empty when
    /// nothing was done.
    pub history: serde_json::Value,
}

impl EventDetail {
    /// The row as the CLI's `inspect --json` and the replay function's `inspect` print it:
    /// `{"source", "event_id", "event_type", "status", "attempts", "last_error",
    /// "response_status", "response_body", "payload_digest", "payload_bytes", "claimed_at",
    /// "completed_at", "dead_at", "next_attempt_at", "lease_expires_at", "replayed",
    /// "replayed_at", "history"}`, times in RFC 3339 (UTC, milliseconds) or `null`.
    pub fn to_json(&self) -> serde_json::Value {
        let time = |at: Option<SystemTime>| at.map(rfc3339);
        serde_json::json!({
            "source": self.source,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "status": self.status.as_str(),
            "attempts": self.attempts,
            "last_error": self.last_error,
            "response_status": self.response_status,
            "response_body": self.response_body,
            "payload_digest": self.payload_digest,
            "payload_bytes": self.payload_bytes,
            "claimed_at": rfc3339(self.claimed_at),
            "completed_at": time(self.completed_at),
            "dead_at": time(self.dead_at),
            "next_attempt_at": time(self.next_attempt_at),
            "lease_expires_at": time(self.lease_expires_at),
            "replayed": self.replayed_at.is_some(),
            "replayed_at": time(self.replayed_at),
            "history": self.history,
        })
    }
}

static INSPECT: Sql = Sql {
    text: "\
SELECT source, event_id, event_type, status::text, attempts, last_error, response_status,
       response_body, encode(payload_digest, 'hex'), octet_length(payload), claimed_at,
       completed_at, dead_at, next_attempt_at, lease_expires_at, replayed_at,
       coalesce(history, '[]'::jsonb)
FROM webhook_event
WHERE source = $1
  AND event_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// Reads `(source, event_id)` in full; `None` when the key is not in the ledger.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails; [`LedgerError::UnknownStatus`] for a status this
/// build does not know.
pub async fn inspect(
    conn: &Connection,
    source: &str,
    event_id: &str,
) -> Result<Option<EventDetail>, LedgerError> {
    let statement = conn.prepare(&INSPECT).await?;
    let Some(row) = conn.query_opt(&statement, &[&source, &event_id]).await? else {
        return Ok(None);
    };
    let response_body: Option<Json<serde_json::Value>> = row.try_get(7)?;
    let history: Json<serde_json::Value> = row.try_get(16)?;
    Ok(Some(EventDetail {
        source: row.try_get(0)?,
        event_id: row.try_get(1)?,
        event_type: row.try_get(2)?,
        status: Status::parse(row.try_get::<_, &str>(3)?)?,
        attempts: row.try_get(4)?,
        last_error: row.try_get(5)?,
        response_status: row.try_get(6)?,
        response_body: response_body.map(|Json(body)| body),
        payload_digest: row.try_get(8)?,
        payload_bytes: row.try_get(9)?,
        claimed_at: row.try_get(10)?,
        completed_at: row.try_get(11)?,
        dead_at: row.try_get(12)?,
        next_attempt_at: row.try_get(13)?,
        lease_expires_at: row.try_get(14)?,
        replayed_at: row.try_get(15)?,
        history: history.0,
    }))
}
