//! The handler API: the [`Handler`] trait (or a plain `async fn` through [`handler_fn!`]), and
//! the [`Registry`] that finds a handler by `(source, event_type)`. What a handler sees and
//! returns is in [`crate::effect`]; the user's code imports all of it from [`crate::prelude`].
//! [`crate::apply`] is the engine side: the one place an effect is applied.
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

use crate::config::targets::EventTypes;
use crate::effect::{Effect, Event, HandlerError};
use crate::ledger::Tx;

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

/// A shared handler is a handler (so `Arc<dyn Handler>` registers as it always did).
#[async_trait::async_trait]
impl<H: Handler + ?Sized> Handler for Arc<H> {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        (**self).handle(tx, event).await
    }

    fn plain_sql(&self) -> bool {
        (**self).plain_sql()
    }
}

/// What a registry's handlers need checked before a function serves (the SQL handlers'
/// statements prepare against the schema: `crate::sql_handler::prepare`), run by
/// [`Registry::ready`] on the function's connections.
#[async_trait::async_trait]
pub trait ReadyCheck: Send + Sync {
    /// Checks on `conn`, whose `BEGIN` (with its limits) is `begin`; may remember its outcome.
    ///
    /// # Errors
    /// [`NotReady`].
    async fn check(&self, conn: &tokio_postgres::Client, begin: &str) -> Result<(), NotReady>;
}

/// Why a function may not serve.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// A handler's configuration is refused by the database (e.g. a SQL handler's statement
    /// does not prepare): refuse every delivery (500) until redeployed. The message names the
    /// source, the handler and the statement, never a value of an event.
    #[error("{0}")]
    Refused(String),
    /// The database could not be asked: retry (503).
    #[error("the handlers could not be checked against the database")]
    Unchecked(#[source] crate::db::PgError),
}

/// Handlers by source name, then event type: the application's Rust handlers by exact type,
/// then handlers by pattern (a source's SQL handlers, `crate::sql_handler`), consulted when no
/// handler is registered for the exact type.
#[derive(Default, Clone)]
pub struct Registry {
    handlers: HashMap<String, HashMap<String, Arc<dyn Handler>>>,
    /// Handlers by source and event type patterns, in registration order.
    patterns: Vec<(String, EventTypes, Arc<dyn Handler>)>,
    /// What [`Registry::ready`] checks.
    checks: Vec<Arc<dyn ReadyCheck>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<_> = self
            .handlers
            .iter()
            .flat_map(|(source, types)| types.keys().map(move |t| format!("{source}:{t}")))
            .chain(self.patterns.iter().flat_map(|(source, types, _)| {
                types
                    .patterns()
                    .iter()
                    .map(move |p| format!("{source}:{p}"))
            }))
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

    /// Registers `handler` for `(source, event_type)`, replacing any earlier one: a value of a
    /// type that implements [`Handler`], an `Arc<dyn Handler>`, or a plain `async fn` through
    /// [`handler_fn!`]. `source` is the source's configured name.
    pub fn register(&mut self, source: &str, event_type: &str, handler: impl Handler + 'static) {
        self.handlers
            .entry(source.to_owned())
            .or_default()
            .insert(event_type.to_owned(), Arc::new(handler));
    }

    /// Registers `handler` for every event type of `source` matching `event_types` that has
    /// no handler registered for its exact type (a source's SQL handlers). The first
    /// registration whose patterns match wins.
    pub fn register_patterns(
        &mut self,
        source: &str,
        event_types: EventTypes,
        handler: impl Handler + 'static,
    ) {
        self.patterns
            .push((source.to_owned(), event_types, Arc::new(handler)));
    }

    /// Adds a check [`Registry::ready`] runs before the function serves.
    pub fn add_ready_check(&mut self, check: impl ReadyCheck + 'static) {
        self.checks.push(Arc::new(check));
    }

    /// The handler for `(source, event_type)`, if any: the Rust handler registered for the
    /// exact type, else the source's SQL handlers when one of their patterns matches it.
    pub fn get(&self, source: &str, event_type: &str) -> Option<&Arc<dyn Handler>> {
        if let Some(handler) = self.handlers.get(source).and_then(|t| t.get(event_type)) {
            return Some(handler);
        }
        self.patterns
            .iter()
            .find(|(s, types, _)| s == source && types.matches(event_type))
            .map(|(_, _, handler)| handler)
    }

    /// The exact event types handlers are registered for on `source`, sorted.
    pub fn registered_rust(&self, source: &str) -> Vec<&str> {
        let mut types: Vec<&str> = self
            .handlers
            .get(source)
            .map(|t| t.keys().map(String::as_str).collect())
            .unwrap_or_default();
        types.sort_unstable();
        types
    }

    /// Every source name with a handler, each with its event types (exact types and
    /// patterns), both sorted.
    pub fn registered(&self) -> Vec<(&str, Vec<&str>)> {
        let mut all: Vec<(&str, Vec<&str>)> = self
            .handlers
            .iter()
            .map(|(source, types)| {
                let mut types: Vec<&str> = types.keys().map(String::as_str).collect();
                types.sort_unstable();
                (source.as_str(), types)
            })
            .collect();
        for (source, event_types, _) in &self.patterns {
            let patterns = event_types.patterns().iter().map(String::as_str);
            match all.iter_mut().find(|(s, _)| s == source) {
                Some((_, types)) => types.extend(patterns),
                None => all.push((source.as_str(), patterns.collect())),
            }
        }
        for (_, types) in &mut all {
            types.sort_unstable();
            types.dedup();
        }
        all.sort_unstable();
        all
    }

    /// Whether this registry may serve on `conn`'s database: every [`ReadyCheck`] passes
    /// (the SQL handlers' statements prepare against the schema, checked once per process on
    /// the first call). Free without checks.
    ///
    /// # Errors
    /// [`NotReady::Refused`] (keep refusing: fatal until redeployed) or
    /// [`NotReady::Unchecked`] (the database is unavailable: retry).
    pub async fn ready(&self, conn: &crate::db::Connection) -> Result<(), NotReady> {
        for check in &self.checks {
            check.check(conn, conn.session().begin_sql()).await?;
        }
        Ok(())
    }
}

/// A plain `async fn` as a [`Handler`]: `handler_fn!(path::to::f)`, where `f` is
/// `async fn f(tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError>`; the value
/// it makes goes to [`Registry::register`]. `handler_fn!(f, plain_sql)` also declares the
/// effect plain SQL ([`Handler::plain_sql`]; read its conditions first).
///
/// A macro rather than a blanket implementation: the function borrows the transaction and the
/// event, and a trait bound cannot yet say "for every pair of borrows, a `Send` future".
#[macro_export]
macro_rules! handler_fn {
    ($f:path) => {
        $crate::handler_fn!(@make $f, false)
    };
    ($f:path, plain_sql) => {
        $crate::handler_fn!(@make $f, true)
    };
    (@make $f:path, $plain:literal) => {{
        /// The function, as a handler.
        struct FnHandler;
        #[$crate::handler::__private::async_trait]
        impl $crate::handler::Handler for FnHandler {
            async fn handle(
                &self,
                tx: &mut $crate::ledger::Tx<'_>,
                event: &$crate::effect::Event<'_>,
            ) -> ::core::result::Result<$crate::effect::Effect, $crate::effect::HandlerError> {
                $f(tx, event).await
            }

            fn plain_sql(&self) -> bool {
                $plain
            }
        }
        FnHandler
    }};
}

/// What [`handler_fn!`] expands to needs; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
}
