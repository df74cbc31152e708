//! Field redaction at rest (issue 28, item 2): a source's `redact` pointers are replaced by
//! `"[redacted]"` in the payload the ledger stores, while the handlers (here a SQL handler that
//! writes the field to a table) see the body as received, in the claim's transaction. A
//! deferred event keeps the body as received until the worker completes it, then keeps the
//! redacted copy. The payload identity (the 409 rule) is the body's as received.

use hookledger_tests::PAYLOAD_MARKER as MARK;

use crate::helpers::*;

const SCHEMA: &str = "CREATE TABLE seen (event_id text PRIMARY KEY, email text NOT NULL);";

/// A Standard Webhooks source `name` in `mode` that redacts the customer's e-mail and every
/// item's name, with a SQL handler writing the e-mail it sees to `seen`.
fn redacting_source(name: &str, mode: &str) -> serde_json::Value {
    let mut source = standard_source(name, mode, serde_json::json!([]));
    source["redact"] = serde_json::json!(["/data/customer/email", "/data/items/*/name"]);
    source["handlers"] = serde_json::json!([{
        "event_types": ["order.paid"],
        "sql": [{"statement": "INSERT INTO seen (event_id, email) VALUES ($1, $2)",
                 "params": [{"event": "id"}, {"path": "/data/customer/email", "type": "text"}]}]
    }]);
    source
}

async fn app_with(name: &str, mode: &str) -> TestApp {
    let (app, _) = spawn_app_with_sources(serde_json::json!([redacting_source(name, mode)])).await;
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(SCHEMA)
        .await
        .unwrap();
    app
}

/// An `order.paid` body naming the marked customer and two items.
fn order(email: &str) -> String {
    serde_json::json!({
        "type": "order.paid",
        "data": {"order": 7, "customer": {"email": email, "country": "NL"},
                 "items": [{"name": format!("{MARK}-item"), "qty": 1}, {"name": "b", "qty": 2}]}
    })
    .to_string()
}

async fn stored(app: &TestApp, event_id: &str) -> String {
    app.texts(&format!(
        "SELECT convert_from(payload, 'UTF8') FROM webhook_event WHERE event_id = '{event_id}'"
    ))
    .await
    .pop()
    .expect("a stored payload")
}

#[tokio::test]
async fn redacted_fields_never_reach_the_table_or_the_console_while_the_handler_sees_them() {
    let app = app_with("priv", "inline").await;
    let email = format!("{MARK}@example.com");
    let delivery = standard("msg_r1", &order(&email), NOW);
    assert_eq!(app.receive("priv", &delivery).await.status, 200);

    // The handler saw the body as received, in the claim's transaction.
    assert_eq!(
        app.texts("SELECT email FROM seen").await,
        vec![email.clone()]
    );
    // The ledger keeps the redacted copy: every other field as received.
    let payload = stored(&app, "msg_r1").await;
    assert!(!payload.contains(MARK), "{payload}");
    let document: serde_json::Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(document["data"]["customer"]["email"], "[redacted]");
    assert_eq!(document["data"]["customer"]["country"], "NL");
    assert_eq!(document["data"]["items"][0]["name"], "[redacted]");
    assert_eq!(document["data"]["items"][1]["qty"], 2);
    // Nothing else in the row holds it either (the response, the history, an error).
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM webhook_event WHERE position('{MARK}' IN \
             coalesce(response_body::text, '') || coalesce(history::text, '') || \
             coalesce(last_error, '')) > 0"
        ))
        .await,
        0
    );

    // A retry is a duplicate; the same id with the redacted field changed is a conflict: the
    // identity is the body's as received, not the stored copy's.
    let retry = app.receive("priv", &delivery).await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    let changed = standard("msg_r1", &order("someone-else@example.com"), NOW);
    assert_eq!(app.receive("priv", &changed).await.status, 409);
    assert_eq!(app.count("SELECT count(*) FROM seen").await, 1);

    // Inspect and the console's event page show the stored copy only.
    let detail = shared::redrive::inspect(&app.receiver().pool, "priv", "msg_r1")
        .await
        .unwrap();
    assert!(!format!("{detail:?}").contains(MARK));
    let html = console_page(&app, app.settings.clone(), "/events/priv/msg_r1").await;
    assert!(
        html.contains("[redacted]"),
        "the page shows the stored copy"
    );
    assert!(!html.contains(MARK));
}

#[tokio::test]
async fn a_deferred_event_keeps_its_fields_until_the_worker_completes_it_then_is_redacted() {
    let app = app_with("privd", "deferred").await;
    let email = format!("{MARK}@example.com");
    let delivery = standard("msg_d1", &order(&email), NOW);
    assert_eq!(app.receive("privd", &delivery).await.status, 202);
    // Unfinished: the worker will need the body as received.
    assert!(stored(&app, "msg_d1").await.contains(MARK));

    let worker = worker_for(&app);
    let summary = worker.worker.drain(soon, plenty).await.unwrap();
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(app.texts("SELECT email FROM seen").await, vec![email]);
    let payload = stored(&app, "msg_d1").await;
    assert!(!payload.contains(MARK), "{payload}");
    assert!(payload.contains("[redacted]"));
    // Still the same event to the ledger: a redelivery is a duplicate, and nothing runs again.
    assert_eq!(app.receive("privd", &delivery).await.status, 202);
    assert_eq!(worker.worker.drain(soon, plenty).await.unwrap().leased, 0);
    assert_eq!(app.count("SELECT count(*) FROM seen").await, 1);
}

#[tokio::test]
async fn a_source_that_keeps_digests_only_cannot_also_redact() {
    let mut source = redacting_source("lean", "inline");
    source["store_payload"] = serde_json::json!(false);
    let error = shared::Sources::from_json(&serde_json::json!([source]).to_string()).unwrap_err();
    assert!(
        error.to_string().contains("redact needs store_payload"),
        "{error}"
    );
    let mut source = redacting_source("bad", "inline");
    source["redact"] = serde_json::json!(["data.customer.email"]);
    let error = shared::Sources::from_json(&serde_json::json!([source]).to_string()).unwrap_err();
    assert!(error.to_string().contains("must start with '/'"), "{error}");
}
