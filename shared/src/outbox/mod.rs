//! The transactional outbox: effects that cannot roll back (an HTTP call to the user's service, a
//! queue, an event bus) are written as `outbox` rows in the claim's own transaction, committed
//! with the claim and the business writes or not at all, and dispatched by the worker after
//! commit: leased like deferred events (`FOR UPDATE SKIP LOCKED`), retried with backoff, dead
//! after the source's `max_attempts`, re-drivable by an operator.
//!
//! Each message has an idempotency key derived from its event, `{source}:{event_id}:{n}`
//! ([`idempotency_key`]), the same on every dispatch attempt: a downstream that deduplicates on
//! it sees each message once even when a dispatch is retried after a crash (the worker can die
//! after the target accepted a message and before it recorded that; the message is then sent
//! again, with the same key). That is at-least-once delivery with a stable key, the only honest
//! promise across a network.
//!
//! Where messages come from, numbered in this order within one event:
//! 1. the source's built-in targets (`"targets"` in its configuration, [`Target`]) whose
//!    `event_types` match the event: the provider's body as it was verified;
//! 2. the handler's own, `tx.outbox(target, payload)`, in the order it added them.
//!
//! Built-in target kinds ([`TargetKind`]): `forward` (HTTP POST re-signed as a Standard Webhooks
//! delivery), `sqs` (FIFO queues deduplicate on the key) and `eventbridge` (`PutEvents`).
//!
//! How the pieces fit:
//!
//! - **Queueing** (in the claim's transaction): `crate::apply::apply` queues the built-in
//!   targets' messages (payload = the raw body as verified; `application/json`, or
//!   `application/x-www-form-urlencoded` for a form body), then the handler adds its own with
//!   `crate::ledger::Tx::outbox` (JSON; the target must be one of the source's, else the event
//!   fails fatally). `Tx::complete` writes them all with one statement pipelined with the
//!   completion and `COMMIT` (`crate::ledger::outbox`), `ON CONFLICT (source, event_id, n) DO
//!   NOTHING`. A re-run of the event (re-drive of an ignored event, shadow mode) queues only
//!   the messages no earlier run queued: a message is identified by its target and its rank
//!   among the event's messages to that target, so a target added to the configuration since
//!   gets its message (numbered after the existing ones), a target that had one gets no second
//!   copy, and a message already delivered stays delivered, whatever the targets' order now.
//! - **Dispatching** (the worker, after commit): [`drain`] leases a batch, dispatches it with
//!   [`Dispatcher`], records the outcomes; see there for retries, `Retry-After`, dead letters and
//!   the statements per message.

mod aws;
mod dispatch;
pub mod drain;
pub mod eventbridge;
mod excerpt;
pub mod forward;
pub mod sqs;

pub use dispatch::{Dispatcher, AWS_ATTEMPT_TIMEOUT, AWS_OPERATION_TIMEOUT};
pub use drain::OutboxSummary;

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use hookledger_verify::{Scheme, SigningKey};

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

/// Which events a built-in target receives: patterns on the event type, each exact
/// (`invoice.paid`) or a prefix ending in `*` (`invoice.*`; `*` alone is every event). An empty
/// list sends nothing automatically: the target receives only what handlers add with
/// `tx.outbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypes(Vec<String>);

impl EventTypes {
    /// Every event (`["*"]`), the default.
    pub fn all() -> Self {
        Self(vec!["*".to_owned()])
    }

    /// Whether `event_type` matches one of the patterns.
    pub fn matches(&self, event_type: &str) -> bool {
        self.0
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => event_type.starts_with(prefix),
                None => pattern == event_type,
            })
    }
}

/// Default time a `forward` request may take, milliseconds.
pub const DEFAULT_FORWARD_TIMEOUT_MS: u64 = 10_000;

/// Longest a `forward` request may be allowed to take, milliseconds: a webhook receiver should
/// answer in seconds, and the dispatch must end well inside the worker's lease
/// (`crate::config::check_dispatch_fits_lease`).
pub const MAX_FORWARD_TIMEOUT_MS: u64 = 60_000;

/// A built-in target as written in a source's `"targets"` list:
///
/// ```json
/// [{"name": "billing", "type": "forward", "url": "https://billing.example.com/hooks",
///   "secret": "whsec_...", "event_types": ["invoice.*"]},
///  {"name": "orders", "type": "sqs",
///   "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"},
///  {"name": "bus", "type": "eventbridge", "event_bus": "default"}]
/// ```
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum TargetSpec {
    /// HTTP POST, re-signed as a Standard Webhooks delivery.
    Forward {
        /// Target name: 1 to 64 characters of `[a-z0-9_-]`, unique within the source.
        name: String,
        /// `https://` anywhere; plain `http://` only to the loopback host.
        url: String,
        /// The Standard Webhooks secret the receiving service verifies with, `whsec_` and
        /// base64 (at least 24 bytes decoded, as the Standard Webhooks libraries generate).
        secret: String,
        /// Time a request may take, milliseconds (at most [`MAX_FORWARD_TIMEOUT_MS`]);
        /// [`DEFAULT_FORWARD_TIMEOUT_MS`] when absent.
        #[serde(default)]
        timeout_ms: Option<u64>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
    },
    /// An SQS queue (standard or FIFO).
    Sqs {
        /// Target name, as for `forward`.
        name: String,
        /// The queue's URL; a name ending in `.fifo` is a FIFO queue.
        queue_url: String,
        /// FIFO queues: the message group; the source's name when absent (one ordered stream
        /// per source).
        #[serde(default)]
        message_group_id: Option<String>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
    },
    /// An EventBridge event bus.
    Eventbridge {
        /// Target name, as for `forward`.
        name: String,
        /// The bus's name or ARN; `default` when absent.
        #[serde(default)]
        event_bus: Option<String>,
        /// The events' `Source`; `hookledger.{source}` when absent.
        #[serde(default)]
        detail_source: Option<String>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
    },
}

/// A validated built-in target.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its name, unique within the source.
    pub name: String,
    /// Which events receive a message automatically.
    pub event_types: EventTypes,
    /// Where and how messages go.
    pub kind: TargetKind,
}

/// Where a target's messages go.
// A handful per source, built once from the configuration: the prepared HMAC key's size does
// not matter, and boxing it would only add an indirection to every signature.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum TargetKind {
    /// HTTP POST to `url`, re-signed with `key` as a Standard Webhooks delivery.
    Forward {
        /// The endpoint.
        url: url::Url,
        /// The Standard Webhooks key (never logged).
        key: SigningKey,
        /// Time a request may take.
        timeout: Duration,
    },
    /// `SendMessage` to an SQS queue.
    Sqs {
        /// The queue's URL.
        queue_url: String,
        /// Whether the queue is FIFO (its name ends in `.fifo`).
        fifo: bool,
        /// FIFO queues: the message group (`None`: the source's name).
        message_group_id: Option<String>,
    },
    /// `PutEvents` to an EventBridge bus.
    EventBridge {
        /// The bus's name or ARN.
        event_bus: String,
        /// The events' `Source` (`None`: `hookledger.{source}`).
        detail_source: Option<String>,
    },
}

impl Target {
    /// The longest one dispatch to this target may take: a `forward` target's `timeout_ms`,
    /// [`AWS_OPERATION_TIMEOUT`] for the others (the SDK's own retries included). The worker starts no dispatch with less
    /// invocation time left than this plus its margin.
    pub fn timeout(&self) -> Duration {
        match &self.kind {
            TargetKind::Forward { timeout, .. } => *timeout,
            TargetKind::Sqs { .. } | TargetKind::EventBridge { .. } => AWS_OPERATION_TIMEOUT,
        }
    }
}

/// Longest target name, characters.
pub const MAX_TARGET_NAME_LEN: usize = 64;

/// Smallest Standard Webhooks secret a `forward` target accepts, bytes decoded.
pub const MIN_FORWARD_SECRET_BYTES: usize = 24;

impl Target {
    /// Validates a [`TargetSpec`].
    ///
    /// # Errors
    /// A short reason (never the secret): a bad name, URL, secret, queue URL or pattern.
    pub fn from_spec(spec: TargetSpec) -> Result<Self, String> {
        let (name, event_types, kind) = match spec {
            TargetSpec::Forward {
                name,
                url,
                secret,
                timeout_ms,
                event_types,
            } => {
                if !crate::config::url_may_carry_credentials(&url) {
                    return Err(format!(
                        "target {name:?}: url must be https:// (plain http:// only to the \
                         loopback host)"
                    ));
                }
                let parsed =
                    url::Url::parse(&url).map_err(|_| format!("target {name:?}: bad url"))?;
                let decoded_len = secret_len(&secret);
                if decoded_len < MIN_FORWARD_SECRET_BYTES {
                    return Err(format!(
                        "target {name:?}: secret must be a Standard Webhooks secret (whsec_ and \
                         base64) of at least {MIN_FORWARD_SECRET_BYTES} bytes"
                    ));
                }
                let key = SigningKey::new(Scheme::StandardWebhooks, &secret)
                    .map_err(|e| format!("target {name:?}: secret: {e}"))?;
                let timeout_ms = timeout_ms.unwrap_or(DEFAULT_FORWARD_TIMEOUT_MS);
                if timeout_ms == 0 || timeout_ms > MAX_FORWARD_TIMEOUT_MS {
                    return Err(format!(
                        "target {name:?}: timeout_ms must be 1 to {MAX_FORWARD_TIMEOUT_MS}"
                    ));
                }
                (
                    name,
                    event_types,
                    TargetKind::Forward {
                        url: parsed,
                        key,
                        timeout: Duration::from_millis(timeout_ms),
                    },
                )
            }
            TargetSpec::Sqs {
                name,
                queue_url,
                message_group_id,
                event_types,
            } => {
                let parsed = url::Url::parse(&queue_url)
                    .map_err(|_| format!("target {name:?}: bad queue_url"))?;
                // SigV4 signs the request but does not hide the payload: plain http:// only to
                // the loopback host (a local emulator).
                if !crate::config::url_may_carry_credentials(&queue_url) {
                    return Err(format!(
                        "target {name:?}: queue_url must be an https:// URL (plain http:// only \
                         to the loopback host)"
                    ));
                }
                let fifo = parsed.path().trim_end_matches('/').ends_with(".fifo");
                if message_group_id.as_deref().is_some_and(str::is_empty) {
                    return Err(format!("target {name:?}: message_group_id is empty"));
                }
                (
                    name,
                    event_types,
                    TargetKind::Sqs {
                        queue_url,
                        fifo,
                        message_group_id,
                    },
                )
            }
            TargetSpec::Eventbridge {
                name,
                event_bus,
                detail_source,
                event_types,
            } => {
                if detail_source
                    .as_deref()
                    .is_some_and(|s| s.is_empty() || s.starts_with("aws."))
                {
                    return Err(format!(
                        "target {name:?}: detail_source must be non-empty and not start with aws."
                    ));
                }
                (
                    name,
                    event_types,
                    TargetKind::EventBridge {
                        event_bus: event_bus.unwrap_or_else(|| "default".to_owned()),
                        detail_source,
                    },
                )
            }
        };
        if name.is_empty()
            || name.len() > MAX_TARGET_NAME_LEN
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "target name {name:?} must be 1 to {MAX_TARGET_NAME_LEN} characters of [a-z0-9_-]"
            ));
        }
        let event_types = match event_types {
            None => EventTypes::all(),
            Some(patterns) => {
                if let Some(bad) = patterns
                    .iter()
                    .find(|p| p.is_empty() || p.trim_end_matches('*').contains('*'))
                {
                    return Err(format!(
                        "target {name:?}: event type pattern {bad:?} must be an exact type or a \
                         prefix ending in *"
                    ));
                }
                EventTypes(patterns)
            }
        };
        Ok(Target {
            name,
            event_types,
            kind,
        })
    }
}

/// Decoded length of a Standard Webhooks secret (0 when it does not decode).
fn secret_len(secret: &str) -> usize {
    use base64::Engine;
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded))
        .map(|k| k.len())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(json: &str) -> Result<Target, String> {
        let spec: TargetSpec = serde_json::from_str(json).map_err(|e| e.to_string())?;
        Target::from_spec(spec)
    }

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn patterns_are_exact_or_prefixes() {
        let types = EventTypes(vec!["invoice.*".into(), "charge.refunded".into()]);
        assert!(types.matches("invoice.paid"));
        assert!(types.matches("charge.refunded"));
        assert!(!types.matches("charge.refunded.x"));
        assert!(!types.matches("customer.created"));
        assert!(EventTypes::all().matches(""));
        assert!(!EventTypes(vec![]).matches("invoice.paid"));
    }

    #[test]
    fn targets_are_validated() {
        let forward = target(&format!(
            r#"{{"type":"forward","name":"billing","url":"https://b.example/h","secret":"{SECRET}"}}"#
        ))
        .unwrap();
        assert!(matches!(forward.kind, TargetKind::Forward { .. }));
        assert!(forward.event_types.matches("anything"));
        let fifo = target(
            r#"{"type":"sqs","name":"q","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/orders.fifo"}"#,
        )
        .unwrap();
        assert!(matches!(fifo.kind, TargetKind::Sqs { fifo: true, .. }));
        let bus = target(r#"{"type":"eventbridge","name":"bus"}"#).unwrap();
        assert!(
            matches!(bus.kind, TargetKind::EventBridge { ref event_bus, .. } if event_bus == "default")
        );
        for bad in [
            format!(r#"{{"type":"forward","name":"b","url":"http://b.example/h","secret":"{SECRET}"}}"#),
            r#"{"type":"forward","name":"b","url":"https://b.example/h","secret":"whsec_c2hvcnQ="}"#.to_owned(),
            format!(r#"{{"type":"forward","name":"B","url":"https://b.example/h","secret":"{SECRET}"}}"#),
            format!(r#"{{"type":"forward","name":"b","url":"https://b.example/h","secret":"{SECRET}","event_types":["a*b"]}}"#),
            r#"{"type":"sqs","name":"q","queue_url":"not a url"}"#.to_owned(),
            r#"{"type":"eventbridge","name":"bus","detail_source":"aws.events"}"#.to_owned(),
            r#"{"type":"kafka","name":"k"}"#.to_owned(),
            r#"{"type":"sqs","name":"q","queue_url":"https://q","extra":1}"#.to_owned(),
        ] {
            let error = target(&bad).expect_err(&bad);
            assert!(!error.contains("MfKQ9r8"), "{error}");
        }
        assert!(target(&format!(
            r#"{{"type":"forward","name":"b","url":"http://127.0.0.1:9/h","secret":"{SECRET}"}}"#
        ))
        .is_ok());
    }

    #[test]
    fn the_idempotency_key_names_the_event_and_the_message() {
        assert_eq!(idempotency_key("stripe", "evt_1", 2), "stripe:evt_1:2");
    }
}
