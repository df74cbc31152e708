//! Our webhooks: the handlers, the one registry that lists them ([`registry`]) and their tables
//! ([`migrations`], from `migrations/`). Every binary in `src/bin/` hands [`APP`] to hookledger.
//!
//! A handler is an `async fn(tx, event)` written with `use hookledger::prelude::*;`: it runs in
//! the claim's transaction, so its writes commit exactly once per event, together with the
//! ledger's record of it. Add one: a file next to this one, a `mod` line below, a
//! `registry.register(...)` line, and its table in `migrations/`.

use hookledger::prelude::*;

mod refunds;

/// What the functions and the CLI run: our handlers and our tables.
pub const APP: App = App {
    registry,
    migrations,
};

/// Our handlers by source name (as in the sources JSON) and event type. An event type with no
/// handler is recorded and answered 200 `ignored`; `hookledger check-config --strict` fails
/// when a name here is not a configured source.
pub fn registry(_sources: &Sources) -> Registry {
    let mut registry = Registry::new();
    registry.register(
        "stripe",
        "charge.refunded",
        handler_fn!(refunds::charge_refunded),
    );
    registry
}

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// Our tables: `migrations/`, applied after the ledger's by the migrate function at deploy
/// and by `hookledger migrate` (history table `hookledger_app_schema_history`).
pub fn migrations() -> Vec<MigrationSet> {
    vec![MigrationSet::new("app", embedded::migrations::runner())]
}
