//! One outbox message as a target dispatches it ([`Message`]), what a target answered
//! ([`Dispatched`]) and why a dispatch failed ([`DispatchError`]).

use std::time::{Duration, SystemTime};

/// The idempotency key of message `n` (1-based) of event `(source, event_id)`:
/// `{source}:{event_id}:{n}`. Source names have no `:` (`[a-z0-9_-]`), so the key is unique.
pub fn idempotency_key(source: &str, event_id: &str, n: i32) -> String {
    format!("{source}:{event_id}:{n}")
}

/// The media type of a handler's outbox message (its payload is JSON).
pub const JSON: &str = "application/json";

/// One outbox message, as a target dispatches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Source name of the event that wrote it.
    pub source: String,
    /// The provider's event id.
    pub event_id: String,
    /// The provider's event type (empty when the provider sent none).
    pub event_type: String,
    /// The message's number within its event (1-based).
    pub n: i32,
    /// The target's name in the source's configuration.
    pub target: String,
    /// The body to send: the provider's raw body (built-in targets) or the handler's JSON.
    pub payload: Vec<u8>,
    /// The payload's media type, e.g. `application/json`.
    pub content_type: String,
    /// Whether the payload is the event's body as verified, queued automatically for a
    /// built-in target (the target's `transform` applies to it at dispatch), rather than a
    /// handler's own `tx.outbox` payload (never transformed).
    pub verified_body: bool,
    /// Dispatch attempts started before this one.
    pub attempts: i32,
    /// When the message was committed.
    pub created_at: SystemTime,
}

impl Message {
    /// `{source}:{event_id}:{n}` (see [`idempotency_key`]).
    pub fn idempotency_key(&self) -> String {
        idempotency_key(&self.source, &self.event_id, self.n)
    }
}

/// What a target answered when it accepted a message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dispatched {
    /// The HTTP status (`forward`), when there is one.
    pub status: Option<u16>,
    /// The target's id for the message (SQS `MessageId`, EventBridge `EventId`), when it
    /// gives one.
    pub receipt: Option<String>,
}

/// Longest excerpt of a target's answer kept with a failed message, bytes.
pub const MAX_EXCERPT_BYTES: usize = 512;

/// Why a dispatch failed. Neither variant carries a secret or the payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// Trying again later can succeed (a timeout, a refused connection, HTTP 408, 429 or 5xx,
    /// throttling): the message is retried with backoff until the source's `max_attempts`.
    #[error("retryable: {reason}")]
    Retryable {
        /// What failed, for `last_error`.
        reason: String,
        /// The target's status code, when it answered.
        status: Option<u16>,
        /// The wait the target asked for (`Retry-After`), when it did.
        retry_after: Option<Duration>,
    },
    /// The target refused the message in a way the same message always will be (HTTP 4xx other
    /// than 408 and 429, a payload the queue or bus cannot take): the message is dead at once.
    #[error("fatal: {reason}")]
    Fatal {
        /// What the target said, for `last_error`: its status and a bounded excerpt of its
        /// answer ([`MAX_EXCERPT_BYTES`]).
        reason: String,
        /// The target's status code, when it answered.
        status: Option<u16>,
    },
}

impl DispatchError {
    /// The target's status code, when it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            DispatchError::Retryable { status, .. } | DispatchError::Fatal { status, .. } => {
                *status
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idempotency_key_names_the_event_and_the_message() {
        assert_eq!(idempotency_key("stripe", "evt_1", 2), "stripe:evt_1:2");
    }
}
