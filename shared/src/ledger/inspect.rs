//! One ledger row in full, for the operator (`hookledger inspect`, the replay function's
//! `inspect`): everything but the payload's bytes, and the event's outbox messages.

use std::time::SystemTime;

use tokio_postgres::types::{Json, Type};

use super::{Connection, EventOutcome, LedgerError, Status};
use crate::db::Sql;
use crate::timestamp::rfc3339;

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
    /// What became of it ([`EventOutcome`], derived from the row by
    /// [`super::EVENT_OUTCOME_SQL`]): for a completed row `processed`, `ignored` or `stale`;
    /// else its status.
    pub outcome: EventOutcome,
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
    /// The stored body's length in bytes; `None` when the source keeps digests only or the
    /// payload was dropped.
    pub payload_bytes: Option<i32>,
    /// When the sweeper dropped the payload and stored response (the source's
    /// `payload_retention_hours`); `None` while they are kept.
    pub payload_dropped_at: Option<SystemTime>,
    /// When `hookledger forget` erased the payload, stored response and earlier answers (who
    /// and why: the history's last `forget` entry); `None` when never.
    pub erased_at: Option<SystemTime>,
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
    /// Leases workers took over the row's whole life (its fencing token, migration V6): 0 when
    /// no worker ever leased it, i.e. the delivery's own transaction handled it (inline).
    pub lease_token: i64,
    /// What operators did to the row, oldest first (see migration V12): a JSON array, empty when
    /// nothing was done.
    pub history: serde_json::Value,
    /// The event's outbox messages, by `n`.
    pub outbox: Vec<MessageDetail>,
}

/// One outbox message as an operator reads it (everything but the payload's bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDetail {
    /// Its number within the event (1-based).
    pub n: i32,
    /// `{source}:{event_id}:{n}`.
    pub idempotency_key: String,
    /// The target's name.
    pub target: String,
    /// `pending`, `processing`, `delivered` or `dead`.
    pub status: String,
    /// Dispatch attempts since it was committed or last re-driven.
    pub attempts: i32,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// The target's last status code (HTTP).
    pub last_status: Option<i16>,
    /// The payload's length, bytes (0 once dropped).
    pub payload_bytes: i32,
    /// When the sweeper emptied the payload of this delivered message (the source's
    /// `payload_retention_hours`); `None` while it is kept.
    pub payload_dropped_at: Option<SystemTime>,
    /// When it was committed (with its event's claim).
    pub created_at: SystemTime,
    /// When the worker may dispatch it next (`pending`), or its lease's end (`processing`).
    pub next_attempt_at: SystemTime,
    /// When the target accepted it.
    pub delivered_at: Option<SystemTime>,
    /// When it went dead.
    pub dead_at: Option<SystemTime>,
    /// Operator actions, oldest first (a JSON array, empty when none).
    pub history: serde_json::Value,
}

impl MessageDetail {
    /// `{"n", "idempotency_key", "target", "status", "attempts", "last_error", "last_status",
    /// "payload_bytes", "payload_dropped_at", "created_at", "next_attempt_at", "delivered_at",
    /// "dead_at", "history"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let time = |at: Option<SystemTime>| at.map(rfc3339);
        serde_json::json!({
            "n": self.n,
            "idempotency_key": self.idempotency_key,
            "target": self.target,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "last_status": self.last_status,
            "payload_bytes": self.payload_bytes,
            "payload_dropped_at": time(self.payload_dropped_at),
            "created_at": rfc3339(self.created_at),
            "next_attempt_at": rfc3339(self.next_attempt_at),
            "delivered_at": time(self.delivered_at),
            "dead_at": time(self.dead_at),
            "history": self.history,
        })
    }
}

impl EventDetail {
    /// The row as the CLI's `inspect --json` and the replay function's `inspect` print it:
    /// `{"source", "event_id", "event_type", "status", "outcome", "attempts", "last_error",
    /// "response_status", "response_body", "payload_digest", "payload_bytes",
    /// "payload_dropped_at", "erased_at", "claimed_at",
    /// "completed_at", "dead_at", "next_attempt_at", "lease_expires_at", "replayed",
    /// "replayed_at", "history", "outbox"}`, times in RFC 3339 (UTC, milliseconds) or `null`;
    /// `outbox` is a list of [`MessageDetail::to_json`].
    pub fn to_json(&self) -> serde_json::Value {
        let time = |at: Option<SystemTime>| at.map(rfc3339);
        serde_json::json!({
            "source": self.source,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "status": self.status.as_str(),
            "outcome": self.outcome.as_str(),
            "attempts": self.attempts,
            "last_error": self.last_error,
            "response_status": self.response_status,
            "response_body": self.response_body,
            "payload_digest": self.payload_digest,
            "payload_bytes": self.payload_bytes,
            "payload_dropped_at": time(self.payload_dropped_at),
            "erased_at": time(self.erased_at),
            "claimed_at": rfc3339(self.claimed_at),
            "completed_at": time(self.completed_at),
            "dead_at": time(self.dead_at),
            "next_attempt_at": time(self.next_attempt_at),
            "lease_expires_at": time(self.lease_expires_at),
            "replayed": self.replayed_at.is_some(),
            "replayed_at": time(self.replayed_at),
            "history": self.history,
            "outbox": self.outbox.iter().map(MessageDetail::to_json).collect::<Vec<_>>(),
        })
    }
}

static OUTBOX_OF_EVENT: Sql = Sql {
    text: "\
SELECT n, target, status::text, attempts, last_error, last_status, octet_length(payload),
       created_at, next_attempt_at, delivered_at, dead_at, coalesce(history, '[]'::jsonb),
       payload_dropped_at
FROM outbox
WHERE source = $1
  AND event_id = $2
ORDER BY n",
    types: &[Type::TEXT, Type::TEXT],
};

static INSPECT: Sql = Sql {
    text: concat!(
        "\
SELECT source, event_id, event_type, status::text, attempts, last_error, response_status,
       response_body, encode(payload_digest, 'hex'), octet_length(payload), claimed_at,
       completed_at, dead_at, next_attempt_at, lease_expires_at, replayed_at,
       coalesce(history, '[]'::jsonb), lease_token, payload_dropped_at,
       ",
        crate::event_outcome_sql!(),
        ",
       erased_at
FROM webhook_event
WHERE source = $1
  AND event_id = $2"
    ),
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
    let outbox_statement = conn.prepare(&OUTBOX_OF_EVENT).await?;
    let mut outbox = Vec::new();
    for message in conn.query(&outbox_statement, &[&source, &event_id]).await? {
        let n: i32 = message.try_get(0)?;
        let history: Json<serde_json::Value> = message.try_get(11)?;
        outbox.push(MessageDetail {
            n,
            idempotency_key: crate::outbox::idempotency_key(source, event_id, n),
            target: message.try_get(1)?,
            status: message.try_get(2)?,
            attempts: message.try_get(3)?,
            last_error: message.try_get(4)?,
            last_status: message.try_get(5)?,
            payload_bytes: message.try_get(6)?,
            payload_dropped_at: message.try_get(12)?,
            created_at: message.try_get(7)?,
            next_attempt_at: message.try_get(8)?,
            delivered_at: message.try_get(9)?,
            dead_at: message.try_get(10)?,
            history: history.0,
        });
    }
    let response_body: Option<Json<serde_json::Value>> = row.try_get(7)?;
    let history: Json<serde_json::Value> = row.try_get(16)?;
    let outcome: &str = row.try_get(19)?;
    let outcome = EventOutcome::parse(outcome)
        .ok_or_else(|| LedgerError::UnknownStatus(outcome.to_owned()))?;
    Ok(Some(EventDetail {
        source: row.try_get(0)?,
        event_id: row.try_get(1)?,
        event_type: row.try_get(2)?,
        status: Status::parse(row.try_get::<_, &str>(3)?)?,
        outcome,
        attempts: row.try_get(4)?,
        last_error: row.try_get(5)?,
        response_status: row.try_get(6)?,
        response_body: response_body.map(|Json(body)| body),
        payload_digest: row.try_get(8)?,
        payload_bytes: row.try_get(9)?,
        payload_dropped_at: row.try_get(18)?,
        erased_at: row.try_get(20)?,
        claimed_at: row.try_get(10)?,
        completed_at: row.try_get(11)?,
        dead_at: row.try_get(12)?,
        next_attempt_at: row.try_get(13)?,
        lease_expires_at: row.try_get(14)?,
        replayed_at: row.try_get(15)?,
        lease_token: row.try_get(17)?,
        history: history.0,
        outbox,
    }))
}
