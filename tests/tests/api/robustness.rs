//! Hostile inputs and conditions found by review: each failed before its fix.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio::sync::Notify;

use crate::helpers::*;

/// While `failing` is set: signals `entered` (the claim is taken, its transaction open), waits
/// for `release`, then fails. Records the order as usual otherwise.
struct GatedThenMaybeFail {
    entered: Notify,
    release: Notify,
    failing: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for GatedThenMaybeFail {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.failing.load(Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
            return Err(HandlerError::retryable("downstream is down".to_owned()));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn a_cancelled_duplicate_does_not_strand_the_event_as_claimed() {
    let mut app = spawn_app_with(2, 10_000).await;
    let handler = Arc::new(GatedThenMaybeFail {
        entered: Notify::new(),
        release: Notify::new(),
        failing: AtomicBool::new(true),
    });
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_cancel", "ord_cancel", 100, NOW);
    let first = {
        let (receiver, d) = (app.receiver().clone(), delivery.clone());
        tokio::spawn(async move { receiver.receive("stripe", &d.headers, &d.body, NOW).await })
    };
    // The first delivery holds the claim (its handler is running) before the duplicate starts.
    tokio::time::timeout(Duration::from_secs(20), handler.entered.notified())
        .await
        .expect("the first delivery reaches its handler");
    let second = {
        let (receiver, d) = (app.receiver().clone(), delivery.clone());
        tokio::spawn(async move { receiver.receive("stripe", &d.headers, &d.body, NOW).await })
    };
    // The duplicate's INSERT is blocked in PostgreSQL on the first's uncommitted row.
    wait_for_lock_waiter(&app).await;
    assert!(!second.is_finished(), "the duplicate waits on the claim");
    // A timeout or a hung-up caller drops the waiting duplicate.
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());
    // The first rolls back; the orphaned INSERT would now win if nothing rolled it back.
    handler.release.notify_one();
    assert_eq!(first.await.unwrap().status, 500);
    handler.failing.store(false, Ordering::SeqCst);
    let (a, b) = (
        stripe_payment("evt_other_a", "ord_a", 1, NOW),
        stripe_payment("evt_other_b", "ord_b", 1, NOW),
    );
    // Use both pooled connections again.
    let _ = tokio::join!(app.receive("stripe", &a), app.receive("stripe", &b));
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        retry.status, 200,
        "the retry must process the event: {retry:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM orders WHERE order_id = 'ord_cancel'")
            .await,
        1
    );
}

#[tokio::test]
async fn database_errors_are_logged_with_their_cause() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let reply = app
        .receive("stripe", &stripe_payment("evt_neg", "ord_neg", -5, NOW))
        .await;
    assert_eq!((reply.status, reply.outcome), (200, "dead"));
    let text = logs.text();
    assert!(
        text.contains("orders_total_minor_non_negative") && text.contains("23514"),
        "{text}"
    );
    // PostgreSQL's DETAIL quotes the row ("Failing row contains (ord_neg, -5, ...)"): payload
    // values, never printed; nor the client's bare "db error".
    assert!(
        !text.contains("Failing row") && !text.contains("db error"),
        "{text}"
    );
}

#[tokio::test]
async fn body_values_never_reach_the_log() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let reply = app
        .receive(
            "stripe",
            &stripe_body(br#""jane.doe@example.com 4242424242424242""#.to_vec(), NOW),
        )
        .await;
    assert_eq!(reply.status, 400);
    let body = serde_json::json!({"id": "evt_meta", "type": "payment_intent.succeeded",
        "data": {"object": {"id": "pi_1", "amount": 1, "currency": "usd",
                            "metadata": "customer jane.doe@example.com"}}});
    let reply = app
        .receive(
            "stripe",
            &stripe_body(serde_json::to_vec(&body).unwrap(), NOW),
        )
        .await;
    assert_eq!((reply.status, reply.outcome), (200, "dead"));
    let text = logs.text();
    assert!(text.contains("handler_fatal"), "{text}");
    assert_eq!(
        logs.with("metric", "handler_fatal").len(),
        1,
        "the handler_fatal metric's log line: {text}"
    );
    assert!(!text.contains("jane.doe@example.com"), "{text}");
}

#[tokio::test]
async fn a_nul_in_the_event_id_or_type_is_the_senders_error() {
    let app = spawn_app().await;
    let cases = [
        (
            "stripe",
            stripe_body(br#"{"id":"evt_nul\u0000","type":"x"}"#.to_vec(), NOW),
        ),
        (
            "stripe",
            stripe_body(br#"{"id":"evt_nul2","type":"x\u0000"}"#.to_vec(), NOW),
        ),
        ("acme", standard("msg_nul", r#"{"type":"a\u0000"}"#, NOW)),
    ];
    for (source, delivery) in cases {
        let reply = app.receive(source, &delivery).await;
        assert_eq!(reply.status, 400, "{source}: {reply:?}");
    }
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn a_json_array_body_is_not_an_object() {
    let app = spawn_app().await;
    let stripe = app
        .receive("stripe", &stripe_body(br#"["evt_arr","x"]"#.to_vec(), NOW))
        .await;
    let github = app.receive("github", &github("d-arr", "push", "[]")).await;
    let acme = app
        .receive(
            "acme",
            &standard("msg_arr", r#"[null,"invoice.paid"]"#, NOW),
        )
        .await;
    assert_eq!((stripe.status, github.status, acme.status), (400, 400, 400));
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn a_refused_connection_is_logged_with_the_servers_reason() {
    let mut app = spawn_app().await;
    let url = hookledger_tests::url_with_database(&app.db.url, "no_such_database").unwrap();
    app.settings.database = shared::config::DatabaseSettings::with_url(url);
    let pool = shared::db::pool(&app.settings.database).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        pool,
        handlers::registry(&app.settings.sources),
    );
    let (logs, _guard) = capture_logs();
    let reply = app
        .receive("stripe", &stripe_payment("evt_nodb", "ord_nodb", 5, NOW))
        .await;
    assert_eq!((reply.status, reply.outcome), (503, "unavailable"));
    let text = logs.text();
    // PostgreSQL's SQLSTATE and message, not deadpool's bare "db error".
    assert!(text.contains("3D000"), "{text}");
    assert!(text.contains("does not exist"), "{text}");
}

#[tokio::test]
async fn a_bad_signature_is_counted_as_signature_failed_per_source() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let mut forged = stripe_payment("evt_forged", "ord_forged", 5, NOW);
    forged.body = payment_intent_body("evt_forged", "ord_forged", 6);
    for _ in 0..3 {
        assert_eq!(app.receive("stripe", &forged).await.status, 401);
    }
    let good = stripe_payment("evt_good", "ord_good", 5, NOW);
    assert_eq!(app.receive("stripe", &good).await.status, 200);
    let counted = logs.with("emf_metric", "signature_failed");
    assert_eq!(counted.len(), 3, "{}", logs.text());
    assert!(counted
        .iter()
        .all(|line| line["source"] == "stripe" && line["value"] == 1));
}
