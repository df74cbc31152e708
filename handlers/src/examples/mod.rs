//! The example handlers (cargo feature `examples`, on for the demo and the tests, off in a
//! plain build): for a Stripe source, `payment_intent.succeeded` records an `orders` row
//! ([`stripe_orders`]) and `customer.subscription.*` maintain `subscriptions` through the
//! ordering guard ([`stripe_subscriptions`]). Their tables are the migration set `examples`
//! (`src/examples/migrations/`, history table `hookledger_examples_schema_history`).
//!
//! They run only where asked: on the Stripe sources named in [`SOURCES_VAR`]
//! (`HOOKLEDGER_EXAMPLES=stripe,stripe-deferred`, which `make demo` and `make run` set for the
//! demo's own sources), and their tables are migrated only then. Never on a source of yours by
//! default: `make run` with your sources runs your handlers alone. The tests and benchmarks
//! use [`registry`] and [`migrations`], which turn them on for every Stripe source.

pub mod stripe_orders;
pub mod stripe_subscriptions;

use hookledger_verify::Scheme;
use shared::prelude::*;

mod embedded {
    refinery::embed_migrations!("src/examples/migrations");
}

/// The environment variable that names the sources the examples run on: source names,
/// comma-separated; unset or empty, none.
pub const SOURCES_VAR: &str = "HOOKLEDGER_EXAMPLES";

/// The source names in [`SOURCES_VAR`], trimmed, empty ones dropped.
pub fn requested() -> Vec<String> {
    std::env::var(SOURCES_VAR)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Registers the examples for the configured Stripe sources named in [`SOURCES_VAR`]
/// (`handlers::registry` calls it).
pub fn register(registry: &mut Registry, sources: &Sources) {
    let requested = requested();
    register_on(registry, sources, |name| {
        requested.iter().any(|r| r == name)
    });
}

/// The examples on every configured Stripe source (this repository registers no handler of its
/// own): the tests', the benchmarks' and the chaos harness's registry.
pub fn registry(sources: &Sources) -> Registry {
    let mut registry = Registry::new();
    register_on(&mut registry, sources, |_| true);
    registry
}

/// This repository's migration sets with the examples' tables: the tests', the benchmarks' and
/// the chaos harness's.
pub fn migrations() -> Vec<MigrationSet> {
    let mut sets = crate::migrations();
    if requested().is_empty() {
        sets.push(migration_set());
    }
    sets
}

/// Registers the examples for each configured Stripe source whose name `wanted` accepts
/// (ordering ties are resolved through the source's `api_key` when it has one).
fn register_on(registry: &mut Registry, sources: &Sources, wanted: impl Fn(&str) -> bool) {
    for source in sources
        .iter()
        .filter(|s| s.scheme == Scheme::Stripe && wanted(&s.name))
    {
        registry.register(
            &source.name,
            stripe_orders::EVENT_TYPE,
            stripe_orders::PaymentIntentSucceeded,
        );
        let subscriptions = std::sync::Arc::new(stripe_subscriptions::SubscriptionChanged::new(
            source.api.clone(),
        ));
        for event_type in stripe_subscriptions::EVENT_TYPES {
            registry.register(&source.name, event_type, subscriptions.clone());
        }
    }
}

/// The examples' tables, `orders` and `subscriptions`.
pub fn migration_set() -> MigrationSet {
    MigrationSet::new("examples", embedded::migrations::runner())
}
