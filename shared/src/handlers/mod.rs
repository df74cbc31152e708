//! The handler API: the [`Handler`] trait, the [`Event`] it sees, the [`Effect`] it returns,
//! [`HandlerError`], the [`Registry`] that finds a handler by `(source, event_type)`, and
//! [`apply`], the one place an effect is applied.
//!
//! The user's handlers live outside this crate, in the `handlers` crate the user owns: each in
//! its own file, registered in one function (`handlers::registry`, `handlers/src/registry.rs`)
//! whose [`Registry`] is handed to every function that runs handlers (the receiver, the worker,
//! replay and re-drive). The example Stripe handlers are there too, behind its `examples`
//! feature.
//!
//! The handler contract:
//!
//! - A handler runs with a [`Tx`]: inside the claim's transaction (inline mode) or the
//!   worker's (deferred mode). It can run statements ([`Tx::query`], [`Tx::execute`]) and
//!   queue writes to be pipelined with the completion ([`Tx::defer`], no round trip of its own),
//!   but cannot end the transaction or set session state. Only the ledger commits, together with
//!   the completion of the event's row.
//! - In deferred mode (the worker) the transaction begins with the handler's **first
//!   statement**: do external work (HTTP calls, anything slow) before it, and keep the
//!   database part short. The completion is fenced by the lease token: if the lease was lost
//!   meanwhile (expired and taken over), nothing the handler wrote commits. External work may
//!   therefore run more than once for one event; give downstream calls an idempotency key such
//!   as `{source}:{event_id}`, or better, send them through the outbox (below).
//! - It returns an [`Effect`]: a 2xx [`Success`] status and a JSON body, stored and sent to
//!   every retry verbatim. "Try later" is not an effect, it is [`HandlerError::Retryable`].
//! - Errors are [`HandlerError::Retryable`] (the database or a downstream is unavailable: the
//!   provider's retry or the worker's backoff will succeed later) or [`HandlerError::Fatal`] (the
//!   payload can never be processed: a missing field, a value the business table refuses).
//!   Database errors convert with `?`: data exceptions (SQLSTATE class 22) and integrity
//!   violations (class 23) are fatal, everything else retryable. A fatal event is kept `dead`
//!   with its payload and error for an operator (inline mode answers the provider
//!   [`FATAL_STATUS`] so it stops retrying), and is counted as `handler_fatal`.
//! - State goes through the ordering guard ([`crate::ordering::advance`]) in the same
//!   transaction, so a late older event completes as a no-op.
//! - Effects that cannot roll back (an email, a third-party API call, handing the event to the
//!   user's own service) go through the outbox (`tx.outbox(target, payload)`): the message is
//!   committed with the claim and dispatched by the worker after commit, with the idempotency
//!   key `{source}:{event_id}:{n}` ([`crate::outbox::idempotency_key`]).
//!
//! Event types without a handler complete as no-ops with a recorded response
//! ([`ignored_effect`]): the provider stops retrying and the ledger still shows the event.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::SourceConfig;
use crate::ledger::{CompleteError, LedgerError, StoredResponse, Tx};

/// The event a handler sees: already verified and claimed.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Source name.
    pub source: &'a str,
    /// The provider's event id.
    pub event_id: &'a str,
    /// The provider's event type, e.g. `payment_intent.succeeded` (empty when the provider
    /// sent none).
    pub event_type: &'a str,
    /// The raw body exactly as received and verified.
    pub body: &'a [u8],
    /// The JSON object to read: the body itself, or the JSON a form-encoded body carries
    /// (GitHub `payload=`, Slack interactivity and slash commands).
    pub document: &'a [u8],
}

/// The status of a successful effect: a 2xx, by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    /// 200 OK.
    Ok,
    /// 201 Created.
    Created,
    /// 202 Accepted.
    Accepted,
}

impl Success {
    /// The HTTP status code.
    pub fn code(self) -> u16 {
        match self {
            Success::Ok => 200,
            Success::Created => 201,
            Success::Accepted => 202,
        }
    }
}

/// What a handler decided: the response to store, and to send now and on every retry. Writes
/// go through the [`Tx`] ([`Tx::defer`] to pipeline them with the completion).
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// The response status: always a 2xx.
    pub status: Success,
    /// JSON body of the response.
    pub body: serde_json::Value,
}

impl Effect {
    /// `200` with `body`.
    pub fn ok(body: serde_json::Value) -> Self {
        Self {
            status: Success::Ok,
            body,
        }
    }
}

/// A boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a handler failed, and whether trying again can help. Either way nothing the handler
/// wrote is committed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// Trying again later can succeed (the database or a downstream is unavailable, a lock or
    /// serialization conflict): inline mode answers 5xx so the provider retries; the worker
    /// retries with backoff until `max_attempts`.
    #[error("retryable: {reason}")]
    Retryable {
        /// What failed, for `last_error` and the log (never payload values or secrets).
        reason: String,
        /// The cause, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The payload can never be processed as it is (a missing field, a value the business
    /// table refuses): the event goes `dead` at once with this error, for an operator to fix
    /// and re-drive.
    #[error("fatal: {reason}")]
    Fatal {
        /// What is wrong, for `last_error` and the log (never payload values or secrets).
        reason: String,
        /// The cause, if any.
        #[source]
        source: Option<BoxError>,
    },
}

impl HandlerError {
    /// A retryable error with no cause.
    pub fn retryable(reason: impl Into<String>) -> Self {
        HandlerError::Retryable {
            reason: reason.into(),
            source: None,
        }
    }

    /// A fatal error with no cause.
    pub fn fatal(reason: impl Into<String>) -> Self {
        HandlerError::Fatal {
            reason: reason.into(),
            source: None,
        }
    }

    /// Whether the event can never be processed as it is.
    pub fn is_fatal(&self) -> bool {
        matches!(self, HandlerError::Fatal { .. })
    }

    /// Whether the cause is the database being unavailable (the receiver answers 503).
    pub fn is_unavailable(&self) -> bool {
        let (HandlerError::Retryable { source, .. } | HandlerError::Fatal { source, .. }) = self;
        source
            .as_ref()
            .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
            .is_some_and(crate::db::is_unavailable)
    }

    /// The reason with its cause chain, for `last_error` and the log.
    pub fn chain(&self) -> String {
        crate::telemetry::error_chain(self)
    }
}

/// Database errors from a handler's statements: data exceptions (SQLSTATE class 22, e.g. a
/// value out of range) and integrity violations (class 23, e.g. a CHECK the business table
/// has) are fatal: the same payload fails the same way every time. Everything else (connection,
/// timeouts, lock and serialization conflicts, a statement that is wrong until the handler is
/// fixed) is retryable.
impl From<tokio_postgres::Error> for HandlerError {
    fn from(error: tokio_postgres::Error) -> Self {
        let reason = format!("database: {}", crate::db::describe(&error));
        let fatal = error
            .code()
            .map(|code| code.code().starts_with("22") || code.code().starts_with("23"))
            .unwrap_or(false);
        let source = Some(Box::new(error) as BoxError);
        if fatal {
            HandlerError::Fatal { reason, source }
        } else {
            HandlerError::Retryable { reason, source }
        }
    }
}

/// The status an inline fatal error is answered with (and every retry of it): 200, so the
/// provider stops retrying and keeps the endpoint enabled, with body
/// `{"status": "dead", "error": "the event cannot be processed; it is kept for an operator"}`.
pub const FATAL_STATUS: u16 = 200;

/// The body stored and sent for an inline fatal error (see [`FATAL_STATUS`]).
pub fn fatal_body() -> serde_json::Value {
    serde_json::json!({
        "status": "dead",
        "error": "the event cannot be processed; it is kept for an operator",
    })
}

/// A business effect for one kind of event.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    /// Decides the effect of `event` through `tx` (see the module docs for the contract).
    ///
    /// # Errors
    /// [`HandlerError::Retryable`] or [`HandlerError::Fatal`]; nothing is committed then.
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError>;

    /// Whether this handler's effect is **plain SQL**: [`Handler::handle`] decides from the
    /// event alone and writes only through [`Tx::defer`] (no [`Tx::query`] or [`Tx::execute`],
    /// nothing outside the database, no outbox message), each write one `INSERT ... VALUES
    /// (...)` row with every parameter's type declared. Then the receiver (inline mode) runs
    /// it *before* the claim and sends the claim, its writes and the completed response as one
    /// statement (`crate::ledger::one_statement`): one round trip per new event instead of two,
    /// and a completed duplicate answered in one. The writes are gated on the claim, so a lost
    /// claim applies nothing.
    ///
    /// Default `false` (the transaction shape, always correct). Answering `true` for a handler
    /// that reads or calls out is safe for the ledger, not for what the handler does outside it:
    /// a read makes the receiver discard the plan and run the handler again in the transaction
    /// shape, so anything it did before the read runs twice.
    fn plain_sql(&self) -> bool {
        false
    }
}

/// Handlers by source name, then event type.
#[derive(Default, Clone)]
pub struct Registry {
    handlers: HashMap<String, HashMap<String, Arc<dyn Handler>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<_> = self
            .handlers
            .iter()
            .flat_map(|(source, types)| types.keys().map(move |t| format!("{source}:{t}")))
            .collect();
        keys.sort();
        f.debug_tuple("Registry").field(&keys).finish()
    }
}

impl Registry {
    /// An empty registry: every event completes as a no-op.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` for `(source, event_type)`, replacing any earlier one.
    pub fn register(&mut self, source: &str, event_type: &str, handler: Arc<dyn Handler>) {
        self.handlers
            .entry(source.to_owned())
            .or_default()
            .insert(event_type.to_owned(), handler);
    }

    /// The handler for `(source, event_type)`, if any.
    pub fn get(&self, source: &str, event_type: &str) -> Option<&Arc<dyn Handler>> {
        self.handlers.get(source)?.get(event_type)
    }
}

/// The recorded no-op for an event type without a handler:
/// `200 {"status": "ignored", "event_type": ...}`. That exact body (these two members, the
/// event's own type) is how the ledger tells an event that no handler ran for
/// (`hookledger redrive --ignored` re-runs those once a handler exists): a handler must not
/// answer exactly this; any other body, even one with `"status": "ignored"`, is a handler's.
pub fn ignored_effect(event: &Event<'_>) -> Effect {
    Effect::ok(serde_json::json!({ "status": "ignored", "event_type": event.event_type }))
}

/// Why applying an event failed, classified for the caller: the receiver answers 5xx (or keeps
/// a fatal event dead), the worker records `last_error` and retries or dead-letters.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The handler or one of its writes failed; trying again can succeed.
    #[error("handler failed")]
    Retryable(#[source] HandlerError),
    /// The handler or one of its writes failed in a way the same payload always will.
    #[error("handler failed fatally")]
    Fatal(#[source] HandlerError),
    /// The completion matched no row: the lease was lost (expired and taken over); nothing was
    /// committed.
    #[error("the lease was lost before the completion")]
    Lost,
    /// A ledger statement failed (check [`LedgerError::is_unavailable`]).
    #[error("ledger")]
    Ledger(#[source] LedgerError),
}

impl ApplyError {
    /// Whether the database is unavailable (the receiver answers 503).
    pub fn is_unavailable(&self) -> bool {
        match self {
            ApplyError::Retryable(e) | ApplyError::Fatal(e) => e.is_unavailable(),
            ApplyError::Ledger(e) => e.is_unavailable(),
            ApplyError::Lost => false,
        }
    }

    /// The error with its cause chain, for `last_error` and the log.
    pub fn chain(&self) -> String {
        crate::telemetry::error_chain(self)
    }
}

impl From<HandlerError> for ApplyError {
    fn from(error: HandlerError) -> Self {
        if error.is_fatal() {
            ApplyError::Fatal(error)
        } else {
            ApplyError::Retryable(error)
        }
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The response as stored (inline, worker) or as the handler returned it (shadow).
    pub response: StoredResponse,
    /// `processed` when a handler ran, `ignored` when the event type has none.
    pub outcome: &'static str,
    /// Outbox messages the commit added (built-in targets' and the handler's; none for a re-run
    /// whose messages were queued before): the worker has something to dispatch.
    pub queued: u64,
}

/// Decides `event`'s effect before any claim, for the one-statement shape
/// (`crate::ledger::one_statement`): the plan, or `None` when the event must take the
/// transaction shape ([`apply`]): a built-in target of the source takes the event (an outbox
/// message), its handler is not [`Handler::plain_sql`], or the handler ran a statement,
/// queued an outbox message or failed (the transaction shape runs it again and deals with the
/// failure as always). An event type without a handler plans the recorded no-op.
///
/// Returns the plan and the outcome (`processed` or `ignored`).
pub async fn plan(
    registry: &Registry,
    source: &SourceConfig,
    conn: &crate::ledger::Connection,
    event: &Event<'_>,
) -> Option<(crate::ledger::one_statement::Plan, &'static str)> {
    if source
        .targets
        .iter()
        .any(|t| t.event_types.matches(event.event_type))
    {
        return None;
    }
    let mut tx = Tx::plan(conn).for_event(&source.targets, event.event_type);
    let (effect, outcome) = match registry.get(event.source, event.event_type) {
        Some(handler) if handler.plain_sql() => match handler.handle(&mut tx, event).await {
            Ok(effect) => (effect, "processed"),
            Err(_) => return None,
        },
        Some(_) => return None,
        None => (ignored_effect(event), "ignored"),
    };
    let Some(writes) = tx.into_plan_writes() else {
        tracing::warn!(
            source = event.source,
            event_id = event.event_id,
            event_type = event.event_type,
            "a plain-SQL handler ran a statement or queued an outbox message: the event takes \
             the transaction shape (the handler should not declare plain_sql)"
        );
        return None;
    };
    crate::ledger::one_statement::Plan::new(effect.status.code(), effect.body, writes)
        .map(|plan| (plan, outcome))
}

/// The media type of a built-in target's message whose payload is a form body (GitHub's
/// `payload=`, Slack interactivity and slash commands).
pub const FORM: &str = "application/x-www-form-urlencoded";

/// Runs the handler for `event` (or the recorded no-op) in `tx`, then completes and commits:
/// the one place where an effect is applied, for the receiver's inline mode, shadow mode and
/// the worker. On any error the transaction is rolled back and nothing is written.
///
/// Outbox messages come first from `source`'s built-in targets (`source.targets`) whose
/// `event_types` match the event's type, in configuration order (messages 1, 2, ...), each
/// with the raw body exactly as verified ([`Event::body`]) as its payload: media type
/// `application/json` when the body is the JSON document itself, [`FORM`] when it is a form
/// that carries it. They are queued for events without a handler too (the recorded no-op stays
/// as it is). Then come the handler's own ([`Tx::outbox`], which accepts only `source`'s target
/// names). All are committed with the completion, or not at all.
///
/// # Errors
/// [`ApplyError`], classified as documented there.
pub async fn apply<'c>(
    registry: &Registry,
    source: &'c SourceConfig,
    tx: Tx<'c>,
    event: &Event<'c>,
) -> Result<Applied, ApplyError> {
    let mut tx = tx.for_event(&source.targets, event.event_type);
    let content_type = if event.body == event.document {
        crate::outbox::JSON
    } else {
        FORM
    };
    for target in source
        .targets
        .iter()
        .filter(|t| t.event_types.matches(event.event_type))
    {
        tx.queue(&target.name, event.body.to_vec(), content_type);
    }
    let (effect, outcome) = match registry.get(event.source, event.event_type) {
        Some(handler) => match handler.handle(&mut tx, event).await {
            Ok(effect) => (effect, "processed"),
            Err(error) => {
                // Dropping the transaction would roll it back too; do it explicitly so the
                // connection is clean before it returns to the pool.
                let _ = tx.rollback().await;
                return Err(error.into());
            }
        },
        None => (ignored_effect(event), "ignored"),
    };
    let (response, queued) = tx
        .complete_counting(
            (event.source, event.event_id),
            effect.status.code(),
            &effect.body,
        )
        .await
        .map_err(|error| match error {
            // A deferred write failing (constraint, type) is the handler's failure.
            CompleteError::Write(db) => ApplyError::from(HandlerError::from(db)),
            CompleteError::Lost => ApplyError::Lost,
            CompleteError::Ledger(e) => ApplyError::Ledger(e),
        })?;
    Ok(Applied {
        response,
        outcome,
        queued,
    })
}
