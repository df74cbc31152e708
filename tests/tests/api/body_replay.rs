//! A captured delivery sent again under a new event id or type (issue 24, item 1).
//!
//! GitHub and Shopify sign the body only: the event id and type come from headers
//! (`X-GitHub-Delivery` / `X-GitHub-Event`, `X-Shopify-Event-Id` / `X-Shopify-Topic`) and no
//! timestamp is signed. Anyone who once saw a signed delivery could send its body and signature
//! again with a fresh id (a second event: handled, forwarded) or another topic (another handler).
//! The ledger keeps one event per verified body for those schemes (the replay guard, migration
//! V17), so the same body under another id is answered as the first event's duplicate (outcome
//! `body_replayed`), in every shape: the one statement, the claim's transaction, deferred mode.
//! A generic source that reads its id or type from an (unsigned) header must sign a timestamp.
//! Legitimate redeliveries (same id, same body) and different bodies are unaffected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hookledger_verify::{Scheme, SigningKey};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::json;
use shared::config::Sources;
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
    Outcome,
};

use crate::helpers::*;

const SHOPIFY_SECRET: &str = "hookledger-local-shopify-client-secret";

/// Counts its calls and writes nothing (so the event takes the claim's transaction, not the one
/// statement).
#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for Counting {
    async fn handle(&self, _: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Effect::ok(json!({"handled": event.event_type})))
    }
}

fn counting(app: &mut TestApp, source: &str, event_type: &str) -> Arc<Counting> {
    let handler = Arc::new(Counting::default());
    app.state
        .receiver
        .handlers
        .register(source, event_type, handler.clone() as Arc<dyn Handler>);
    handler
}

/// A Shopify delivery of `body` with the given event id and topic.
fn shopify(event_id: &str, topic: &str, body: &str) -> Delivery {
    let key = SigningKey::new(Scheme::Shopify, SHOPIFY_SECRET).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in hookledger_verify::sign(Scheme::Shopify, &key, "", NOW, body.as_bytes()) {
        headers.insert(
            HeaderName::try_from(name).expect("a signature header name"),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    headers.insert(
        "x-shopify-event-id",
        HeaderValue::from_str(event_id).unwrap(),
    );
    headers.insert("x-shopify-topic", HeaderValue::from_str(topic).unwrap());
    Delivery {
        headers,
        body: body.as_bytes().to_vec(),
    }
}

/// `delivery` with `name` set to `value` (the signature untouched: it does not cover headers).
fn with_header(mut delivery: Delivery, name: &'static str, value: &str) -> Delivery {
    delivery.headers.insert(
        HeaderName::try_from(name).expect("a signature header name"),
        HeaderValue::from_str(value).unwrap(),
    );
    delivery
}

const PUSH: &str = r#"{"ref":"refs/heads/main","after":"5d1c7a0","repository":{"id":1}}"#;

#[tokio::test]
async fn a_github_body_sent_again_under_a_fresh_delivery_id_is_not_a_second_event() {
    let (logs, _guard) = capture_logs();
    let (mut app, _) = spawn_app_with_sources(json!([
        {"name": "github-forward", "scheme": "github", "secrets": [GITHUB_SECRET],
         "targets": [forward_target("ci", "http://127.0.0.1:9/hooks/ci", 5000, json!(["push"]))]},
        {"name": "github-deferred", "scheme": "github", "secrets": [GITHUB_SECRET],
         "mode": "deferred"}
    ]))
    .await;
    let handled = counting(&mut app, "github-forward", "push");

    // The one statement (no handler for `push` on `github`: a recorded no-op), the claim's
    // transaction with an outbox message (`github-forward`), and deferred mode.
    for source in ["github", "github-forward", "github-deferred"] {
        let first = app.receive(source, &github("d-1", "push", PUSH)).await;
        assert!(
            matches!(first.status, 200 | 202) && !first.replayed,
            "{source}: {first:?}"
        );
        let captured = github("d-1", "push", PUSH);
        let replay = app
            .receive(
                source,
                &with_header(captured, "x-github-delivery", "d-forged"),
            )
            .await;
        assert_eq!(
            replay.outcome,
            Outcome::BodyReplayed,
            "{source}: {replay:?}"
        );
        assert!(replay.replayed, "{source}: {replay:?}");
        // Answered as the first event's duplicate: its stored response (inline), deferred
        // mode's duplicate acknowledgement.
        let duplicate = app.receive(source, &github("d-1", "push", PUSH)).await;
        assert!(duplicate.replayed, "{source}: {duplicate:?}");
        assert_eq!(
            (replay.status, &replay.body),
            (duplicate.status, &duplicate.body),
            "{source}"
        );
        if source != "github-deferred" {
            assert_eq!(replay.body, first.body, "{source}");
        }
        assert_eq!(
            app.texts(&format!(
                "SELECT event_id FROM webhook_event WHERE source = '{source}' ORDER BY event_id"
            ))
            .await,
            ["d-1"],
            "{source}: no second row"
        );
    }
    assert_eq!(
        handled.calls.load(Ordering::SeqCst),
        1,
        "no second handler run"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM outbox").await,
        1,
        "no second outbox message"
    );

    // The operator sees it: the delivery line (a warning with the outcome) and a line naming
    // both ids.
    let lines = logs.with("outcome", "body_replayed");
    assert!(
        lines.iter().any(|l| l["message"] == "delivery"
            && l["level"] == "WARN"
            && l["event_id"] == "d-forged"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["original_event_id"] == "d-1" && l["event_id"] == "d-forged"),
        "{lines:#?}"
    );
    assert!(
        !logs.text().contains("5d1c7a0"),
        "no payload value in the log"
    );
}

#[tokio::test]
async fn a_shopify_body_sent_again_under_another_topic_is_not_handled_as_that_topic() {
    let mut app = spawn_app().await;
    let created = counting(&mut app, "shopify", "orders/create");
    let paid = counting(&mut app, "shopify", "orders/paid");
    let body = r#"{"id":820982911946154508,"financial_status":"pending","total_price":"10.00"}"#;

    let first = app
        .receive("shopify", &shopify("e-1", "orders/create", body))
        .await;
    assert_eq!((first.status, first.outcome), (200, Outcome::Processed));

    // The same body under another topic, with a fresh event id or with the same one.
    let fresh = app
        .receive("shopify", &shopify("e-2", "orders/paid", body))
        .await;
    assert_eq!(fresh.outcome, Outcome::BodyReplayed, "{fresh:?}");
    assert_eq!((fresh.status, &fresh.body), (200, &first.body));
    let same_id = app
        .receive("shopify", &shopify("e-1", "orders/paid", body))
        .await;
    assert_eq!(same_id.outcome, Outcome::Replayed, "{same_id:?}");
    assert_eq!((same_id.status, &same_id.body), (200, &first.body));

    assert_eq!(created.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        paid.calls.load(Ordering::SeqCst),
        0,
        "orders/create's body never reaches the orders/paid handler"
    );
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn legitimate_redeliveries_and_different_bodies_still_work() {
    let mut app = spawn_app().await;
    let handled = counting(&mut app, "github", "issues");
    let opened = r#"{"action":"opened","issue":{"number":1}}"#;
    let closed = r#"{"action":"closed","issue":{"number":1}}"#;

    let first = app
        .receive("github", &github("d-1", "issues", opened))
        .await;
    assert_eq!((first.status, first.outcome), (200, Outcome::Processed));
    // GitHub's "Redeliver" resends the same body with the same X-GitHub-Delivery: a duplicate,
    // answered with the stored response.
    let redelivered = app
        .receive("github", &github("d-1", "issues", opened))
        .await;
    assert_eq!(redelivered.outcome, Outcome::Replayed);
    assert_eq!((redelivered.status, &redelivered.body), (200, &first.body));
    // Another event: another body, another id.
    let second = app
        .receive("github", &github("d-2", "issues", closed))
        .await;
    assert_eq!((second.status, second.outcome), (200, Outcome::Processed));
    // Stripe signs its id and type (and a timestamp): no replay guard, the same body under its
    // own id is the only way in, as before.
    let stripe = app
        .receive("stripe", &stripe_payment("evt_a", "ord_a", 100, NOW))
        .await;
    assert_eq!(stripe.outcome, Outcome::Processed);

    assert_eq!(handled.calls.load(Ordering::SeqCst), 2);
    assert_eq!(app.ledger_rows().await, 3);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE replay_guard IS NOT NULL")
            .await,
        2,
        "GitHub's rows carry the guard, Stripe's does not"
    );
}

#[test]
fn a_generic_source_reading_its_id_from_an_unsigned_header_without_a_signed_timestamp_is_refused() {
    let source = |generic: serde_json::Value| {
        json!([{"name": "partner", "scheme": "generic-hmac", "secrets": ["partner-secret"],
                "retry_horizon_hours": 24,
                "generic": generic}])
        .to_string()
    };
    for (generic, field) in [
        (
            json!({"signature_header": "X-Signature", "event_id_header": "X-Event-Id"}),
            "event_id_header",
        ),
        (
            json!({"signature_header": "X-Signature", "event_id_pointer": "/id",
                   "event_type_header": "X-Event-Type"}),
            "event_type_header",
        ),
    ] {
        let error = Sources::from_json(&source(generic))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("partner")
                && error.contains(field)
                && error.contains("not covered by the signature")
                && error.contains("_pointer"),
            "{error}"
        );
    }
    // Accepted: the id from the signed body, or a header with a signed timestamp (then the
    // replay guard keeps one event per body within the retention, and the tolerance ends a
    // captured delivery's life).
    for generic in [
        json!({"signature_header": "X-Signature", "event_id_pointer": "/id"}),
        json!({"signature_header": "X-Signature", "event_id_header": "X-Event-Id",
               "timestamp_header": "X-Timestamp", "signed_payload": "{timestamp}.{body}"}),
    ] {
        Sources::from_json(&source(generic.clone())).unwrap_or_else(|e| panic!("{generic}: {e}"));
    }
}
