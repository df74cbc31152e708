//! Business handlers, keyed by `(source, event_type)`, and the registry that finds them.
//!
//! A handler runs inside the claim's transaction. It may read or write through
//! [`ClaimTx::connection`] when it must decide on what it reads back; writes it does not need
//! to read back go into [`Effect::writes`], which the ledger pipelines with the completion and
//! `COMMIT` (one round trip for the whole tail of the transaction).
//!
//! Event types without a handler complete as no-ops with a recorded response
//! ([`ignored_effect`]): the provider stops retrying and the ledger still shows the event.

pub mod stripe_orders;
pub mod stripe_subscriptions;

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Sources;
use crate::ledger::{ClaimTx, LedgerError, StoredResponse, Write};
use crate::verify::Scheme;

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

/// What a handler decided: the response to store (and send, now and on every retry) and the
/// writes to commit with it.
#[derive(Debug)]
pub struct Effect {
    /// HTTP status of the response, normally 200.
    pub status: u16,
    /// JSON body of the response.
    pub body: serde_json::Value,
    /// Statements to run, in order, in the claim's transaction before it commits.
    pub writes: Vec<Write>,
}

/// Why a handler failed. Any failure rolls the claim back and answers 500, so the provider
/// retries and the retry starts clean.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The payload lacks what the handler needs (permanent for this body: the provider's
    /// retries will fail the same way until someone fixes the handler or the sender).
    #[error("payload: {0}")]
    Payload(String),
    /// A statement the handler ran itself failed (retryable when the database is unavailable).
    #[error("database: {}", crate::db::describe(.0))]
    Db(#[from] tokio_postgres::Error),
    /// Anything else the handler reports (e.g. a downstream call failed).
    #[error("{0}")]
    Failed(String),
}

/// A business effect for one kind of event.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    /// Decides the effect of `event`, inside the claim's transaction `tx`.
    ///
    /// # Errors
    /// [`HandlerError`] for anything that must not complete the event.
    async fn handle(&self, tx: &ClaimTx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError>;
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

    /// The example handlers for every configured source they fit: for each Stripe source,
    /// `payment_intent.succeeded` records an `orders` row ([`stripe_orders`]) and
    /// `customer.subscription.*` maintain `subscriptions` through the ordering guard
    /// ([`stripe_subscriptions`]).
    pub fn with_examples(sources: &Sources) -> Self {
        let mut registry = Self::new();
        for source in sources.iter() {
            if source.scheme == Scheme::Stripe {
                registry.register(
                    &source.name,
                    stripe_orders::EVENT_TYPE,
                    Arc::new(stripe_orders::PaymentIntentSucceeded),
                );
                for event_type in stripe_subscriptions::EVENT_TYPES {
                    registry.register(
                        &source.name,
                        event_type,
                        Arc::new(stripe_subscriptions::SubscriptionChanged),
                    );
                }
            }
        }
        registry
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
/// `200 {"status": "ignored", "event_type": ...}`.
pub fn ignored_effect(event: &Event<'_>) -> Effect {
    Effect {
        status: 200,
        body: serde_json::json!({ "status": "ignored", "event_type": event.event_type }),
        writes: Vec::new(),
    }
}

/// Why applying an event failed, classified for the caller: the receiver answers 500 or 503,
/// the worker records `last_error` and retries.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The handler failed, or one of its writes was refused (a constraint, a type): 500.
    #[error("handler failed: {0}")]
    Handler(String),
    /// The database is unavailable (connection, timeouts): 503. Retryable.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Our own fault outside the handler: 500.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApplyError {
    /// Classifies a ledger failure.
    pub fn ledger(error: LedgerError) -> Self {
        if error.is_unavailable() {
            ApplyError::Unavailable(error.to_string())
        } else {
            ApplyError::Internal(error.to_string())
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
}

/// Runs the handler for `event` (or the recorded no-op) in `tx`, then completes and commits:
/// the one place where an effect is applied, for the receiver's inline mode, shadow mode and
/// the worker. On any error the transaction is rolled back and nothing is written.
///
/// # Errors
/// [`ApplyError`], classified as documented there.
pub async fn apply(
    registry: &Registry,
    tx: ClaimTx<'_>,
    event: &Event<'_>,
) -> Result<Applied, ApplyError> {
    let (effect, outcome) = match registry.get(event.source, event.event_type) {
        Some(handler) => match handler.handle(&tx, event).await {
            Ok(effect) => (effect, "processed"),
            Err(error) => {
                // Dropping the transaction would roll it back too; do it explicitly so the
                // connection is clean before it returns to the pool.
                let _ = tx.rollback().await;
                return Err(match error {
                    HandlerError::Db(e) if crate::db::is_unavailable(&e) => {
                        ApplyError::Unavailable(format!("handler: {}", crate::db::describe(&e)))
                    }
                    error => ApplyError::Handler(error.to_string()),
                });
            }
        },
        None => (ignored_effect(event), "ignored"),
    };
    let response = tx
        .complete(
            (event.source, event.event_id),
            effect.status,
            &effect.body,
            &effect.writes,
        )
        .await
        .map_err(|e| match e {
            // A handler's write failing (constraint, type) is the handler's failure.
            LedgerError::Db(ref db)
                if !crate::db::is_unavailable(db) && !effect.writes.is_empty() =>
            {
                ApplyError::Handler(format!("write: {e}"))
            }
            e => ApplyError::ledger(e),
        })?;
    Ok(Applied { response, outcome })
}
