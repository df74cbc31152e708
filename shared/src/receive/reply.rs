//! What the receiver answers: the [`Reply`] and the shapes every path shares (a replayed
//! stored response, in flight, the deferred acknowledgement, replay's record of an event it did
//! not write).

use super::outcome::Outcome;
use crate::ledger;

/// Seconds a provider is asked to wait before retrying an in-flight duplicate.
pub const RETRY_AFTER_SECS: u32 = 5;

/// What the receiver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body text: JSON, except a handshake answered otherwise (Twitch's `text/plain`).
    pub body: String,
    /// The body's `Content-Type`: `application/json` but for such a handshake.
    pub content_type: &'static str,
    /// Set on a replayed (cached) response: send `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// Seconds for a `Retry-After` header, when set.
    pub retry_after: Option<u32>,
    /// What happened, for the log, the metrics and tests.
    pub outcome: Outcome,
}

impl Reply {
    pub(super) fn error(status: u16, outcome: Outcome, reason: &str) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: serde_json::json!({ "error": reason }).to_string(),
            replayed: false,
            retry_after: None,
            outcome,
        }
    }
}

/// A stored response sent again, with `Idempotent-Replayed: true`.
pub(super) fn replayed(stored: ledger::StoredResponse, outcome: Outcome) -> Reply {
    Reply {
        content_type: "application/json",
        status: stored.status,
        body: stored.body,
        replayed: true,
        retry_after: None,
        outcome,
    }
}

/// A verified body already in the ledger as `original` arrived under another event id (the
/// replay guard): its stored response (`Idempotent-Replayed: true`) when it has one, else 409
/// with `Retry-After` while it is processed; outcome `body_replayed` either way.
pub(super) fn body_replayed(original: ledger::Original) -> Reply {
    match original.response {
        Some(stored) => replayed(stored, Outcome::BodyReplayed),
        None => Reply {
            content_type: "application/json",
            outcome: Outcome::BodyReplayed,
            ..in_flight()
        },
    }
}

/// Why a delivery was answered [`body_replayed`]: the `delivery` line's `reason`.
pub(super) const BODY_REPLAYED_REASON: &str =
    "verified body already in the ledger under another event id, and the scheme does not sign \
     the event id or type: answered as that event's duplicate";

pub(super) fn in_flight() -> Reply {
    let mut reply = Reply::error(409, Outcome::InFlight, "event is being processed");
    reply.retry_after = Some(RETRY_AFTER_SECS);
    reply
}

/// Deferred mode's acknowledgement: `202 {"accepted": true, "duplicate": ..}`.
pub(super) fn accepted_reply(duplicate: bool, outcome: Outcome) -> Reply {
    Reply {
        content_type: "application/json",
        status: 202,
        body: serde_json::json!({ "accepted": true, "duplicate": duplicate }).to_string(),
        replayed: duplicate,
        retry_after: None,
        outcome,
    }
}

/// What replay records for an event it did not write: `200 {"duplicate": ...}` with the
/// outcome `new` (a dry run's absent key) or `duplicate`.
pub(super) fn dry_run_reply(outcome: Outcome) -> Reply {
    Reply {
        content_type: "application/json",
        status: 200,
        body: serde_json::json!({ "duplicate": outcome == Outcome::Duplicate }).to_string(),
        replayed: false,
        retry_after: None,
        outcome,
    }
}
