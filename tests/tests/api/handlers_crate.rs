//! The user's handlers crate with the `examples` feature on (as this crate builds it): the
//! example handlers are registered for every Stripe source and their tables are migrated, each
//! migration set in its own history table. (Without the feature neither exists:
//! handlers/tests/features.rs, run alone by scripts/test.sh.)

use hookledger_tests::{local_sources_json, TestDb};
use shared::Sources;

#[test]
fn with_the_examples_every_stripe_source_has_the_example_handlers() {
    let sources = Sources::from_json(&local_sources_json().unwrap()).unwrap();
    let registry = handlers::examples::registry(&sources);
    for source in ["stripe", "stripe-deferred"] {
        assert!(sources.get(source).is_some(), "{source} is a local source");
        for event_type in [
            "payment_intent.succeeded",
            "customer.subscription.created",
            "customer.subscription.updated",
            "customer.subscription.deleted",
        ] {
            assert!(
                registry.get(source, event_type).is_some(),
                "{source}:{event_type} has no handler: {registry:?}"
            );
        }
    }
    // Not a Stripe source: nothing of the examples.
    assert!(registry.get("github", "push").is_none());
}

#[tokio::test]
async fn with_the_examples_migrating_creates_their_tables_in_their_own_history() {
    let db = TestDb::empty().await.unwrap();
    let applied = shared::db::migrate_with(&db.settings(1), &handlers::examples::migrations())
        .await
        .unwrap();
    let ledger = shared::db::MigrationSet::ledger().names();
    assert_eq!(
        applied[..ledger.len()],
        ledger[..],
        "the ledger's come first"
    );
    // After the ledger's: the user's own set (handlers/migrations/, whatever it holds), then the
    // examples'.
    let examples: Vec<&str> = applied[ledger.len()..]
        .iter()
        .map(String::as_str)
        .filter(|name| !name.starts_with("handlers/"))
        .collect();
    assert_eq!(
        examples,
        [
            "examples/V1__create_orders",
            "examples/V2__create_subscriptions",
            "examples/V3__create_refunds"
        ]
    );
    let client = db.connect().await.unwrap();
    let exists = |table: &'static str| {
        let client = &client;
        async move {
            client
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .await
                .unwrap()
                .get::<_, bool>(0)
        }
    };
    for table in ["webhook_event", "orders", "subscriptions", "refunds"] {
        assert!(exists(table).await, "{table} is missing");
    }
    // Each set records its own versions: both start at 1 and never collide.
    let history = |table: &str| format!("SELECT array_agg(version ORDER BY version) FROM {table}");
    let ledger_versions: Vec<i32> = client
        .query_one(&history("refinery_schema_history"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(!ledger_versions.contains(&3) && !ledger_versions.contains(&4));
    let example_versions: Vec<i32> = client
        .query_one(&history("hookledger_examples_schema_history"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(example_versions, [1, 2, 3]);

    // Up to date the second time.
    let again = shared::db::migrate_with(&db.settings(1), &handlers::examples::migrations())
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}
