//! Your business logic behind the ledger: the handlers, the one registry that lists them
//! ([`registry()`], in `src/registry.rs`, the file you edit) and their tables
//! ([`migrations()`], from `migrations/`).
//!
//! A handler is written with `use shared::prelude::*;` alone: a plain `async fn(tx, event)`
//! registered with `handler_fn!`, or a type implementing `Handler`, for one
//! `(source, event_type)`. It runs inside the claim's transaction (inline mode) or the
//! worker's (deferred mode) through a `Tx` that can run statements but cannot end the
//! transaction; it returns an `Effect` (always a 2xx) or a `HandlerError` (`Retryable` or
//! `Fatal`); state goes through the ordering guard (`advance`); anything that cannot roll back
//! (an email, a third-party call) goes through the outbox (`tx.outbox(target, payload)`),
//! dispatched after commit. The book's `docs/guide/handlers.md` has the contract in full.
//!
//! The example Stripe handlers and their tables are behind the cargo feature `examples` (off
//! by default; the demo and the tests turn it on), and even then run only on the sources
//! named in `HOOKLEDGER_EXAMPLES` (see `examples`).
#![forbid(unsafe_code)]

#[cfg(feature = "examples")]
pub mod examples;
mod registry;

pub use registry::registry;
use shared::prelude::{App, MigrationSet};

/// What this crate hands hookledger's functions and CLI: [`registry()`] and [`migrations()`].
/// Each binary of the reference deployment is one call with it, e.g.
/// `receiver::main(handlers::APP)`.
pub const APP: App = App {
    registry,
    migrations,
};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// The migration sets to apply after the ledger's: your handlers' tables (`migrations/`,
/// history table `hookledger_handlers_schema_history`), then, with the `examples` feature and
/// `HOOKLEDGER_EXAMPLES` naming a source (see [`examples`]), the examples' `orders` and
/// `subscriptions` (`hookledger_examples_schema_history`).
/// Each set is versioned on its own. `hookledger migrate` applies them
/// (`shared::db::migrate_with`).
pub fn migrations() -> Vec<MigrationSet> {
    let sets = vec![MigrationSet::new(
        "handlers",
        embedded::migrations::runner(),
    )];
    #[cfg(feature = "examples")]
    let sets = if examples::requested().is_empty() {
        sets
    } else {
        [sets, vec![examples::migration_set()]].concat()
    };
    sets
}

/// Without the `examples` feature: no example handler, no example table.
#[cfg(not(feature = "examples"))]
mod examples {
    pub(crate) fn register(_: &mut shared::prelude::Registry, _: &shared::prelude::Sources) {}
}
