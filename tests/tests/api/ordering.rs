//! The ordering guard of the example subscription handler (an event's version is its `created`):
//! a stale event never overwrites newer state, even through another Stripe source, and a tie (two
//! changes within one second) is resolved by re-fetching the subscription from Stripe, retried
//! when the re-fetch fails, and never resolved by an answer about another object.

use shared::Outcome;
use std::sync::Arc;
use std::time::SystemTime;

use handlers::examples::stripe_subscriptions::SubscriptionChanged;
use hookledger_tests::fake_providers::{Answer, FakeServer};
use shared::config::ProviderApi;
use shared::handler::Handler;

use crate::helpers::*;

/// A receiver whose Stripe subscription handler resolves ties through a fake Stripe API that
/// answers `GET /v1/subscriptions/sub_tie` with `answer` (status, JSON).
async fn app_with_fake_stripe(answer: (u16, serde_json::Value)) -> (TestApp, FakeServer) {
    let mut app = spawn_app().await;
    let (status, body) = answer;
    let stripe = FakeServer::start(move |request| {
        if request.method == "GET" && request.path == "/v1/subscriptions/sub_tie" {
            Answer::json(status, &body)
        } else {
            Answer::json(404, &serde_json::json!({"error": "no such route"}))
        }
    })
    .await
    .unwrap();
    let handler = Arc::new(SubscriptionChanged::new(Some(ProviderApi {
        base_url: stripe.base_url.clone(),
        key: "rk_test_local".to_owned().into(),
    })));
    app.state.receiver.handlers.register(
        "stripe",
        "customer.subscription.updated",
        handler as Arc<dyn Handler>,
    );
    (app, stripe)
}

fn subscription(event_id: &str, created: i64, plan: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "type": "customer.subscription.updated",
        "created": created,
        "data": {"object": {
            "id": "sub_tie", "object": "subscription", "customer": "cus_1",
            "status": "active", "items": {"data": [{"price": {"id": plan}}]}
        }}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_version_tie_is_resolved_by_re_fetching_the_subscription_from_stripe() {
    let (app, stripe) = app_with_fake_stripe((
        200,
        serde_json::json!({
            "id": "sub_tie", "object": "subscription", "customer": "cus_1",
            "status": "past_due", "items": {"data": [{"price": {"id": "price_now"}}]}
        }),
    ))
    .await;
    // Two changes within one second: the same version.
    let first = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_c", 9_000, "price_a"), NOW),
        )
        .await;
    assert_eq!(first.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u", 9_000, "price_b"), NOW),
        )
        .await;
    let answer: serde_json::Value = serde_json::from_str(&tie.body).unwrap();
    assert_eq!(answer["status"], "tie_resolved", "{tie:?}");

    let client = app.db.connect().await.unwrap();
    let state = client
        .query_one(
            "SELECT plan, status FROM subscriptions WHERE subscription_id = 'sub_tie'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (state.get::<_, String>(0), state.get::<_, String>(1)),
        ("price_now".to_owned(), "past_due".to_owned()),
        "Stripe's current state, not the first event's"
    );
    let resolved: bool = client
        .query_one("SELECT resolved FROM ordering_tie", &[])
        .await
        .unwrap()
        .get(0);
    assert!(resolved);
    let seen = stripe.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/subscriptions/sub_tie");
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer rk_test_local")
    );
}

#[tokio::test]
async fn a_tie_whose_re_fetch_fails_is_retried_not_dropped() {
    let (app, _stripe) = app_with_fake_stripe((503, serde_json::json!({"error": "down"}))).await;
    let first = stripe_body(subscription("evt_c2", 9_000, "price_a"), NOW);
    assert_eq!(app.receive("stripe", &first).await.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u2", 9_000, "price_b"), NOW),
        )
        .await;
    assert_eq!(
        (tie.status, tie.outcome),
        (500, Outcome::HandlerFailed),
        "{tie:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE event_id = 'evt_u2'")
            .await,
        0,
        "rolled back: the provider's retry tries again"
    );
}

#[tokio::test]
async fn a_re_fetch_that_answers_about_another_object_does_not_resolve_the_tie() {
    let (app, _stripe) = app_with_fake_stripe((
        200,
        serde_json::json!({"id": "sub_OTHER", "object": "subscription", "status": "canceled"}),
    ))
    .await;
    let first = stripe_body(subscription("evt_c3", 9_000, "price_a"), NOW);
    assert_eq!(app.receive("stripe", &first).await.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u3", 9_000, "price_b"), NOW),
        )
        .await;
    assert_eq!(
        (tie.status, tie.outcome),
        (500, Outcome::HandlerFailed),
        "{tie:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM subscriptions WHERE subscription_id = 'sub_OTHER'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM ordering_tie").await,
        0,
        "rolled back"
    );
}

/// A `customer.subscription.updated` event for `sub_x`, at version `created`, on `plan`.
fn subscription_of_sub_x(event_id: &str, created: i64, plan: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id, "object": "event", "type": "customer.subscription.updated",
        "created": created,
        "data": {"object": {"id": "sub_x", "customer": "cus_x", "status": "active",
                            "items": {"data": [{"price": {"id": plan}}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_stale_event_through_another_stripe_source_does_not_overwrite_newer_state() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let v3 = subscription_of_sub_x("evt_src_v3", 3_000, "price_new");
    let v1 = subscription_of_sub_x("evt_src_v1", 1_000, "price_old");
    assert_eq!(
        app.receive("stripe", &stripe_body(v3, NOW)).await.status,
        200
    );
    assert_eq!(
        app.receive("stripe-deferred", &deferred(v1)).await.status,
        202
    );
    worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    let client = app.db.connect().await.unwrap();
    let state = client
        .query_one(
            "SELECT plan, version FROM subscriptions WHERE subscription_id = 'sub_x'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (state.get::<_, String>(0), state.get::<_, i64>(1)),
        ("price_new".to_owned(), 3_000)
    );
}
