//! The receiver's answers as HTTP responses: the book's table of statuses, exact bodies and
//! headers (`Retry-After`, `Idempotent-Replayed`, `Allow`), through lambda_http `Request`s built
//! from the `events/` files and the receiver function's `handle_at`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use hookledger_tests::EventFile;
use lambda_http::http::{HeaderMap, Method};
use lambda_http::{Body, Request};
use receiver::handler::{handle_at, AppState};

use crate::helpers::*;

const STRIPE: &str = "receiver/stripe-payment-intent-succeeded.json";
const STRIPE_OTHER_BODY: &str = "receiver/stripe-payment-intent-succeeded.different-body.json";
const STRIPE_BAD_SIGNATURE: &str = "receiver/stripe-bad-signature.json";
const STRIPE_DEFERRED: &str = "receiver/stripe-deferred-payment-intent-succeeded.json";

/// An HTTP response, read back.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

async fn send(state: &AppState, request: Request, now: i64) -> Answer {
    let response = handle_at(state, request, now).await.unwrap();
    let body = match response.body() {
        Body::Text(text) => text.clone(),
        Body::Binary(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        Body::Empty => String::new(),
        _ => panic!("unexpected body kind"),
    };
    let answer = Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body,
    };
    assert_eq!(
        answer.header("content-type"),
        Some("application/json"),
        "{answer:?}"
    );
    answer
}

fn load(name: &str) -> EventFile {
    EventFile::load(name).unwrap()
}

/// `event` with its body replaced and re-signed with the local secret of `source`.
fn resigned(mut event: EventFile, source: &str, body: &[u8], at: i64) -> EventFile {
    event.set_body(body).unwrap();
    let config = hookledger_tests::local_source(source).unwrap();
    event.sign(&config.verifier, 0, at).unwrap();
    event
}

fn without_header(mut event: EventFile, name: &str) -> EventFile {
    for key in ["headers", "multiValueHeaders"] {
        if let Some(headers) = event.json.get_mut(key).and_then(|h| h.as_object_mut()) {
            headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
        }
    }
    event
}

fn at_path(mut event: EventFile, path: &str) -> EventFile {
    event.json["rawPath"] = path.into();
    event.json["requestContext"]["http"]["path"] = path.into();
    event
}

#[tokio::test]
async fn a_duplicate_in_flight_is_a_409_with_retry_after_5_and_the_first_answer_is_replayed_later()
{
    let mut app = spawn_app_with(4, 200).await;
    let handler = gated(&mut app);
    let event = load(STRIPE);
    let now = event.signed_at().unwrap();
    let first = {
        let (state, request) = (app.state.clone(), event.request().unwrap());
        tokio::spawn(async move { send(&state, request, now).await })
    };
    // The first delivery holds the claim, its transaction open, inside its handler.
    tokio::time::timeout(Duration::from_secs(20), handler.entered.notified())
        .await
        .expect("the first delivery reaches its handler");
    let duplicate = send(&app.state, event.request().unwrap(), now).await;
    assert_eq!(duplicate.status, 409, "{duplicate:?}");
    assert_eq!(duplicate.body, r#"{"error":"event is being processed"}"#);
    assert_eq!(duplicate.header("retry-after"), Some("5"));
    assert_eq!(duplicate.header("idempotent-replayed"), None);
    assert!(!first.is_finished());

    handler.release.notify_one();
    let first = first.await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(first.header("retry-after"), None);
    let later = send(&app.state, event.request().unwrap(), now + 5).await;
    assert_eq!(
        (later.status, later.body.as_str()),
        (200, first.body.as_str())
    );
    assert_eq!(later.header("idempotent-replayed"), Some("true"));
    assert_eq!(later.header("retry-after"), None);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
    assert_eq!((app.ledger_rows().await, app.order_rows().await), (1, 1));
}

#[tokio::test]
async fn a_deferred_duplicate_is_a_202_with_idempotent_replayed() {
    let app = spawn_app().await;
    let event = load(STRIPE_DEFERRED);
    let now = event.signed_at().unwrap();
    let first = send(&app.state, event.request().unwrap(), now).await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.body, r#"{"accepted":true,"duplicate":false}"#);
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = send(&app.state, event.request().unwrap(), now + 5).await;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(again.body, r#"{"accepted":true,"duplicate":true}"#);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(
        app.order_rows().await,
        0,
        "nothing applied before the worker"
    );
}

#[tokio::test]
async fn malformed_signature_headers_are_a_401_with_the_fixed_reason_and_write_nothing() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let event = load(STRIPE);
    let now = event.signed_at().unwrap();
    let valid = event.headers()["stripe-signature"].clone();
    let v1 = valid.split(',').find(|p| p.starts_with("v1=")).unwrap();
    let values = [
        "garbage".to_owned(),
        "t=abc,v1=zz".to_owned(),
        // The right signature under a timestamp that is not a number.
        format!("t=abc,{v1}"),
        String::new(),
        ",,,".to_owned(),
    ];
    for value in &values {
        let mut bad = event.clone();
        bad.set_header("stripe-signature", value).unwrap();
        let answer = send(&app.state, bad.request().unwrap(), now).await;
        assert_eq!(answer.status, 401, "{value:?}: {answer:?}");
        assert_eq!(
            answer.body, r#"{"error":"malformed signature header"}"#,
            "{value:?}"
        );
        assert_eq!(app.ledger_rows().await, 0, "{value:?}: no ledger row");
        assert_eq!(app.order_rows().await, 0, "{value:?}: no order");
    }
    // Each refusal is one warning delivery line (the signature_failed metric itself is an EMF
    // line on stdout), naming the malformed header but never its value.
    let refused = logs.with("outcome", "unauthorized");
    assert_eq!(refused.len(), values.len(), "{}", logs.text());
    for line in &refused {
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["status"], 401);
        assert!(
            line["reason"].as_str().unwrap().contains("Malformed"),
            "{line}"
        );
    }
    assert!(!logs.text().contains("garbage"), "{}", logs.text());
    // The intact event still goes through.
    let answer = send(&app.state, event.request().unwrap(), now).await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[tokio::test]
async fn every_refusal_in_the_readme_table_has_its_exact_status_and_body_and_writes_nothing() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let event = load(STRIPE);
    let now = event.signed_at().unwrap();
    let body = event.body().unwrap();
    let mut get = event.request().unwrap();
    *get.method_mut() = Method::GET;
    let cases: Vec<(&str, Request, i64, u16, &str)> = vec![
        (
            "unknown source",
            at_path(event.clone(), "/webhooks/paypal")
                .request()
                .unwrap(),
            now,
            404,
            r#"{"error":"unknown source"}"#,
        ),
        (
            "a path that is not /webhooks/{source}",
            at_path(event.clone(), "/admin/stripe").request().unwrap(),
            now,
            404,
            r#"{"error":"not found"}"#,
        ),
        (
            "method other than POST",
            get,
            now,
            405,
            r#"{"error":"method not allowed"}"#,
        ),
        (
            "body over max_body_bytes",
            resigned(
                event.clone(),
                "stripe",
                format!(r#"{{"id":"evt_big","pad":"{}"}}"#, "x".repeat(70_000)).as_bytes(),
                now,
            )
            .request()
            .unwrap(),
            now,
            413,
            r#"{"error":"body too large"}"#,
        ),
        (
            "missing signature header",
            without_header(event.clone(), "stripe-signature")
                .request()
                .unwrap(),
            now,
            401,
            r#"{"error":"missing signature header"}"#,
        ),
        (
            "malformed signature header",
            {
                let mut e = event.clone();
                e.set_header("stripe-signature", "garbage").unwrap();
                e.request().unwrap()
            },
            now,
            401,
            r#"{"error":"malformed signature header"}"#,
        ),
        (
            "wrong signature",
            {
                let bad = load(STRIPE_BAD_SIGNATURE);
                let at = bad.signed_at().unwrap();
                assert_eq!(at, now, "the bad-signature file is signed at the same time");
                bad.request().unwrap()
            },
            now,
            401,
            r#"{"error":"signature mismatch"}"#,
        ),
        (
            "a tampered body",
            {
                let mut e = event.clone();
                e.set_body(
                    String::from_utf8(body.clone())
                        .unwrap()
                        .replace("4999", "1")
                        .as_bytes(),
                )
                .unwrap();
                e.request().unwrap()
            },
            now,
            401,
            r#"{"error":"signature mismatch"}"#,
        ),
        (
            "timestamp too old",
            event.request().unwrap(),
            now + 301,
            401,
            r#"{"error":"timestamp outside tolerance"}"#,
        ),
        (
            "timestamp from the future",
            event.request().unwrap(),
            now - 301,
            401,
            r#"{"error":"timestamp outside tolerance"}"#,
        ),
        (
            "body not a JSON object",
            resigned(event.clone(), "stripe", b"id=evt_1&type=x", now)
                .request()
                .unwrap(),
            now,
            400,
            r#"{"error":"body is not a JSON object"}"#,
        ),
        (
            "missing event id",
            resigned(
                event.clone(),
                "stripe",
                br#"{"type":"payment_intent.succeeded"}"#,
                now,
            )
            .request()
            .unwrap(),
            now,
            400,
            r#"{"error":"missing event id"}"#,
        ),
        (
            "oversized event id",
            resigned(
                event.clone(),
                "stripe",
                format!(r#"{{"id":"{}","type":"x"}}"#, "e".repeat(256)).as_bytes(),
                now,
            )
            .request()
            .unwrap(),
            now,
            400,
            r#"{"error":"event id must be 1 to 255 bytes, without NUL"}"#,
        ),
        (
            "NUL in the event id",
            resigned(
                event.clone(),
                "stripe",
                br#"{"id":"evt_\u0000","type":"x"}"#,
                now,
            )
            .request()
            .unwrap(),
            now,
            400,
            r#"{"error":"event id must be 1 to 255 bytes, without NUL"}"#,
        ),
    ];
    let count = cases.len();
    for (what, request, at, status, expected) in cases {
        let answer = send(&app.state, request, at).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (status, expected),
            "{what}"
        );
        assert_eq!(answer.header("idempotent-replayed"), None, "{what}");
        assert_eq!(answer.header("retry-after"), None, "{what}");
        if status == 405 {
            assert_eq!(answer.header("allow"), Some("POST"));
        }
        assert_eq!(app.ledger_rows().await, 0, "{what}: no ledger row");
        assert_eq!(app.order_rows().await, 0, "{what}: no order");
    }
    // One warning delivery line per refusal, with the cause for the operator.
    let delivery_lines = logs.with("message", "delivery");
    assert_eq!(delivery_lines.len(), count, "{}", logs.text());
    assert!(
        delivery_lines.iter().all(|l| l["level"] == "WARN"),
        "{}",
        logs.text()
    );
    assert_eq!(logs.with("outcome", "unauthorized").len(), 6);
}

#[tokio::test]
async fn a_reused_id_is_a_409_a_fatal_payload_a_200_dead_a_failing_handler_a_500() {
    let mut app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let event = load(STRIPE);
    let now = event.signed_at().unwrap();
    let first = send(&app.state, event.request().unwrap(), now).await;
    assert_eq!(first.status, 200, "{first:?}");

    // Same id, different body: 409, the original untouched, an error line.
    let other = load(STRIPE_OTHER_BODY);
    let conflict = send(
        &app.state,
        other.request().unwrap(),
        other.signed_at().unwrap(),
    )
    .await;
    assert_eq!(
        (conflict.status, conflict.body.as_str()),
        (409, r#"{"error":"event id reused with a different body"}"#)
    );
    assert_eq!(conflict.header("idempotent-replayed"), None);
    let mismatch = logs.with("outcome", "digest_mismatch");
    assert_eq!(mismatch.len(), 1, "{}", logs.text());
    assert_eq!(mismatch[0]["level"], "ERROR");
    // Counted: the digest_mismatch metric, once, for this source.
    let counted = logs.with("emf_metric", "digest_mismatch");
    assert_eq!(counted.len(), 1, "{}", logs.text());
    assert_eq!(counted[0]["source"], "stripe");
    let replay = send(&app.state, event.request().unwrap(), now).await;
    assert_eq!(
        (replay.status, replay.body.as_str()),
        (200, first.body.as_str())
    );
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));

    // A payload the business table refuses (currency "USD" breaks orders' CHECK): 200 dead.
    let text = String::from_utf8(event.body().unwrap()).unwrap();
    let usd = text
        .replace("\"usd\"", "\"USD\"")
        .replace("evt_1QhookledgerDemo0001", "evt_usd_http");
    assert_ne!(usd, text);
    let fatal = resigned(event.clone(), "stripe", usd.as_bytes(), now);
    let dead = send(&app.state, fatal.request().unwrap(), now).await;
    assert_eq!(dead.status, 200, "{dead:?}");
    assert_eq!(
        dead.json(),
        serde_json::json!({
            "status": "dead",
            "error": "the event cannot be processed; it is kept for an operator"
        })
    );
    assert_eq!(dead.header("idempotent-replayed"), None);
    assert_eq!(
        logs.with("metric", "handler_fatal").len(),
        1,
        "{}",
        logs.text()
    );
    let again = send(&app.state, fatal.request().unwrap(), now).await;
    assert_eq!(
        (again.status, again.body.as_str()),
        (200, dead.body.as_str())
    );
    // A redelivery runs it again (it may have been fixed): the same answer, a new attempt.
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_eq!(app.ledger_rows().await, 2);

    // A retryable handler failure: 500 with no internals, and no row left behind.
    let handler = flaky(&mut app);
    handler.failing.store(true, Ordering::SeqCst);
    let failing = resigned(
        event.clone(),
        "stripe",
        text.replace("evt_1QhookledgerDemo0001", "evt_flaky_http")
            .as_bytes(),
        now,
    );
    let failed = send(&app.state, failing.request().unwrap(), now).await;
    assert_eq!(
        (failed.status, failed.body.as_str()),
        (500, r#"{"error":"internal error"}"#)
    );
    assert_eq!(app.ledger_rows().await, 2, "the claim rolled back");
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn an_unreachable_database_is_a_503_service_unavailable() {
    let app = spawn_app().await;
    let mut database = shared::config::DatabaseSettings::with_url(
        "postgres://postgres@127.0.0.1:1/nothing?sslmode=disable",
    );
    database.pool_size = 1;
    let settings = shared::Settings {
        database,
        ..app.settings.clone()
    };
    let pool = shared::db::pool(&settings.database).unwrap();
    let state = AppState::new(
        &settings,
        pool,
        handlers::examples::registry(&settings.sources),
    );
    let event = load(STRIPE);
    let answer = send(&state, event.request().unwrap(), event.signed_at().unwrap()).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (503, r#"{"error":"service unavailable"}"#)
    );
}
