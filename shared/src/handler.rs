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

use crate::effect::{Effect, Event, HandlerError};
use crate::ledger::Tx;
use crate::sql_handler::{NotReady, Readiness, SqlHandlers};

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

/// Handlers by source name, then event type: the application's Rust handlers by exact type,
/// then each source's SQL handlers (`crate::sql_handler`) by pattern, consulted when no Rust
/// handler is registered for the exact type.
#[derive(Default, Clone)]
pub struct Registry {
    handlers: HashMap<String, HashMap<String, Arc<dyn Handler>>>,
    /// Each source's SQL handlers, and the same as a handler.
    sql: Vec<(Arc<SqlHandlers>, Arc<dyn Handler>)>,
    /// The same SQL handlers, for [`Registry::ready`].
    sql_only: Vec<Arc<SqlHandlers>>,
    /// Whether the SQL handlers' statements prepare against the schema (once per process).
    readiness: Arc<Readiness>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<_> = self
            .handlers
            .iter()
            .flat_map(|(source, types)| types.keys().map(move |t| format!("{source}:{t}")))
            .chain(self.sql.iter().flat_map(|(sql, _)| {
                sql.patterns()
                    .into_iter()
                    .map(|p| format!("{}:{p} (sql)", sql.source))
                    .collect::<Vec<_>>()
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

    /// Adds a source's SQL handlers (`crate::sql_handler::with_sql_handlers` does, after
    /// checking they take no type a Rust handler has), replacing any earlier ones of the
    /// source. They are consulted for an event type without a Rust handler.
    pub fn register_sql(&mut self, handlers: Arc<SqlHandlers>) {
        self.sql.retain(|(sql, _)| sql.source != handlers.source);
        let as_handler: Arc<dyn Handler> = handlers.clone();
        self.sql.push((handlers, as_handler));
        self.sql_only = self.sql.iter().map(|(sql, _)| Arc::clone(sql)).collect();
    }

    /// The handler for `(source, event_type)`, if any: the Rust handler registered for the
    /// exact type, else the source's SQL handlers when one of their patterns matches it.
    pub fn get(&self, source: &str, event_type: &str) -> Option<&Arc<dyn Handler>> {
        if let Some(handler) = self.handlers.get(source).and_then(|t| t.get(event_type)) {
            return Some(handler);
        }
        self.sql
            .iter()
            .find(|(sql, _)| sql.source == source && sql.matches(event_type))
            .map(|(_, handler)| handler)
    }

    /// The event types Rust handlers are registered for on `source`, sorted.
    pub fn registered_rust(&self, source: &str) -> Vec<&str> {
        let mut types: Vec<&str> = self
            .handlers
            .get(source)
            .map(|t| t.keys().map(String::as_str).collect())
            .unwrap_or_default();
        types.sort_unstable();
        types
    }

    /// Every source name with a handler, each with its event types (Rust handlers' exact
    /// types and SQL handlers' patterns), both sorted.
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
        for (sql, _) in &self.sql {
            let patterns = sql.patterns();
            match all.iter_mut().find(|(source, _)| *source == sql.source) {
                Some((_, types)) => types.extend(patterns),
                None => all.push((sql.source.as_str(), patterns)),
            }
        }
        for (_, types) in &mut all {
            types.sort_unstable();
            types.dedup();
        }
        all.sort_unstable();
        all
    }

    /// Every source's SQL handlers.
    pub fn sql_handlers(&self) -> &[Arc<SqlHandlers>] {
        &self.sql_only
    }

    /// Whether this registry may serve on `conn`'s database: its SQL handlers' statements
    /// prepare against the schema, checked once per process on the first call (free without
    /// SQL handlers; see `crate::sql_handler::prepare`).
    ///
    /// # Errors
    /// [`NotReady::Refused`] (keep refusing: fatal until redeployed) or
    /// [`NotReady::Unchecked`] (the database is unavailable: retry).
    pub async fn ready(&self, conn: &crate::db::Connection) -> Result<(), NotReady> {
        if self.sql.is_empty() {
            return Ok(());
        }
        self.readiness.check(conn, &self.sql_only).await
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
