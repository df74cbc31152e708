//! What the functions log about a failure: a database error with its constraint and SQLSTATE, a
//! refused connection with the server's reason (not the pool's bare "db error"), and never a
//! value from a delivery's body.

use std::time::{Duration, SystemTime};

use crate::helpers::*;
use shared::Outcome;

#[tokio::test]
async fn database_errors_are_logged_with_their_cause() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let reply = app
        .receive("stripe", &stripe_payment("evt_neg", "ord_neg", -5, NOW))
        .await;
    assert_eq!((reply.status, reply.outcome), (200, Outcome::Dead));
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
async fn a_deferred_handlers_unique_violation_is_stored_and_inspected_without_row_values() {
    let app = spawn_app().await;
    // A second unique constraint on the example's orders: two orders of one amount collide,
    // and PostgreSQL's DETAIL would quote the row's key: `Key (total_minor)=(987654321)`.
    let owner = app.db.connect().await.unwrap();
    owner
        .batch_execute(
            "ALTER TABLE orders ADD CONSTRAINT orders_one_per_amount UNIQUE (total_minor)",
        )
        .await
        .unwrap();
    let (logs, _guard) = capture_logs();
    let worker = worker_for(&app);
    let mut at = SystemTime::now();
    for (event, order) in [("evt_uniq_1", "ord_uniq_1"), ("evt_uniq_2", "ord_uniq_2")] {
        let delivery = deferred(payment_intent_body(event, order, 987_654_321));
        assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
        at += Duration::from_secs(1);
        let now = at;
        worker.worker.drain(move || now, plenty).await.unwrap();
    }
    assert_eq!(row(&app, "evt_uniq_1").await.0, "completed");
    let (status, _, stored) = row(&app, "evt_uniq_2").await;
    assert!(status == "failed" || status == "dead", "{status}");
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe-deferred", "evt_uniq_2")
        .await
        .unwrap()
        .expect("the row");
    let inspected = detail.to_json()["last_error"].as_str().map(str::to_owned);
    for (what, error) in [
        ("last_error", stored),
        ("inspect", detail.last_error.clone()),
        ("inspect --json", inspected),
    ] {
        let error = error.unwrap_or_else(|| panic!("{what}: no error"));
        assert!(
            error.contains("23505") && error.contains("orders_one_per_amount"),
            "{what}: {error}"
        );
        for value in [
            "987654321",
            "Key (",
            "already exists",
            "ord_uniq",
            hookledger_tests::PAYLOAD_MARKER,
        ] {
            assert!(!error.contains(value), "{what} quotes {value:?}: {error}");
        }
    }
    let text = logs.text();
    assert!(text.contains("orders_one_per_amount"), "{text}");
    for value in ["987654321", "Key (", hookledger_tests::PAYLOAD_MARKER] {
        assert!(!text.contains(value), "the logs quote {value:?}: {text}");
    }
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
    assert_eq!((reply.status, reply.outcome), (200, Outcome::Dead));
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
async fn a_refused_connection_is_logged_with_the_servers_reason() {
    let mut app = spawn_app().await;
    let url = hookledger_tests::url_with_database(&app.db.url, "no_such_database").unwrap();
    app.settings.database = shared::config::DatabaseSettings::with_url(url);
    let pool = shared::db::pool(&app.settings.database).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        pool,
        handlers::examples::registry(&app.settings.sources),
    );
    let (logs, _guard) = capture_logs();
    let reply = app
        .receive("stripe", &stripe_payment("evt_nodb", "ord_nodb", 5, NOW))
        .await;
    assert_eq!((reply.status, reply.outcome), (503, Outcome::Unavailable));
    let text = logs.text();
    // PostgreSQL's SQLSTATE and message, not deadpool's bare "db error".
    assert!(text.contains("3D000"), "{text}");
    assert!(text.contains("does not exist"), "{text}");
}
