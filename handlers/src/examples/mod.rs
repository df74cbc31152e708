//! The example handlers (cargo feature `examples`, on for the demo and the tests, off in a
//! plain build): for each Stripe source, `payment_intent.succeeded` records an `orders` row
//! ([`stripe_orders`]) and `customer.subscription.*` maintain `subscriptions` through the
//! ordering guard ([`stripe_subscriptions`]). Their tables are the migration set `examples`
//! (`src/examples/migrations/`, history table `hookledger_examples_schema_history`).

pub mod stripe_orders;
pub mod stripe_subscriptions;

use hookledger_verify::Scheme;
use shared::prelude::*;

mod embedded {
    refinery::embed_migrations!("src/examples/migrations");
}

/// Registers the examples for every configured Stripe source (ordering ties are resolved
/// through the source's `api_key` when it has one).
pub fn register(registry: &mut Registry, sources: &Sources) {
    for source in sources.iter().filter(|s| s.scheme == Scheme::Stripe) {
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
pub fn migrations() -> MigrationSet {
    MigrationSet::new("examples", embedded::migrations::runner())
}
