//! What the functions log about a failure: a database error with its constraint and SQLSTATE, a
//! refused connection with the server's reason (not the pool's bare "db error"), and never a
//! value from a delivery's body.

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
        handlers::registry(&app.settings.sources),
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
