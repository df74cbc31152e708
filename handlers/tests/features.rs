//! What the `examples` feature adds, and that without it nothing of the examples exists: no
//! handler for a configured Stripe source, no `orders` or `subscriptions` table in a freshly
//! migrated database (real PostgreSQL from `DATABASE_URL`). The tests without the feature run
//! only when this crate is tested alone (`cargo test -p hookledger-handlers`, as
//! scripts/test.sh does): in a workspace run the tests crate turns the feature on.

use shared::Sources;

const SOURCES: &str = r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_test"]}]"#;

fn registry() -> shared::handler::Registry {
    handlers::registry(&Sources::from_json(SOURCES).unwrap())
}

#[cfg(not(feature = "examples"))]
#[test]
fn without_the_feature_a_stripe_source_has_no_example_handler() {
    let registry = registry();
    for event_type in [
        "payment_intent.succeeded",
        "customer.subscription.created",
        "customer.subscription.updated",
        "customer.subscription.deleted",
    ] {
        assert!(
            registry.get("stripe", event_type).is_none(),
            "{event_type} has a handler: {registry:?}"
        );
    }
    assert!(
        handlers::migrations()
            .iter()
            .all(|set| set.name() != "examples"),
        "the examples' migration set is there"
    );
}

#[cfg(not(feature = "examples"))]
#[tokio::test]
async fn without_the_feature_migrating_creates_the_ledger_but_no_example_table() {
    let db = hookledger_testing::TestDb::empty().await.unwrap();
    let applied = shared::db::migrate_with(&db.settings(1), &handlers::migrations())
        .await
        .unwrap();
    assert!(
        applied.iter().any(|m| m == "V1__create_webhook_event"),
        "{applied:?}"
    );
    let client = db.connect().await.unwrap();
    let tables: Vec<String> = client
        .query(
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema = 'public' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    for ledger in ["webhook_event", "entity_version", "ordering_tie", "outbox"] {
        assert!(
            tables.iter().any(|t| t == ledger),
            "{ledger} missing: {tables:?}"
        );
    }
    for example in [
        "orders",
        "subscriptions",
        "hookledger_examples_schema_history",
    ] {
        assert!(
            !tables.iter().any(|t| t == example),
            "{example} exists: {tables:?}"
        );
    }
    // The user's own set is there, with its own history table (empty until they add one).
    assert!(
        tables
            .iter()
            .any(|t| t == "hookledger_handlers_schema_history"),
        "{tables:?}"
    );
}

/// `make run` with a team's own sources ran the examples on them: a `payment_intent.succeeded`
/// sent to their Stripe source wrote an `orders` row (issue 25). With the feature, the
/// reference registry runs them only on the sources named in `HOOKLEDGER_EXAMPLES`.
#[cfg(feature = "examples")]
#[test]
fn with_the_feature_the_examples_run_only_where_asked() {
    assert!(
        std::env::var_os(handlers::examples::SOURCES_VAR).is_none(),
        "this test needs HOOKLEDGER_EXAMPLES unset"
    );
    let registry = registry();
    for event_type in ["payment_intent.succeeded", "customer.subscription.updated"] {
        assert!(
            registry.get("stripe", event_type).is_none(),
            "{event_type}: {registry:?}"
        );
    }
    assert!(handlers::migrations()
        .iter()
        .all(|set| set.name() != "examples"));
}

#[cfg(feature = "examples")]
#[test]
fn with_the_feature_the_tests_registry_gets_the_examples_on_every_stripe_source() {
    let registry = handlers::examples::registry(&Sources::from_json(SOURCES).unwrap());
    assert!(registry.get("stripe", "payment_intent.succeeded").is_some());
    assert!(registry
        .get("stripe", "customer.subscription.updated")
        .is_some());
    // An event type nobody registers (not `charge.refunded`: the book's own example adds that).
    assert!(registry
        .get("stripe", "hookledger.test.unregistered")
        .is_none());
}
