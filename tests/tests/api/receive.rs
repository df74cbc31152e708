//! Every outcome of the receive path (docs/architecture.md, "The receive path"), through `Receiver::receive`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use shared::Outcome;

use crate::helpers::*;

#[tokio::test]
async fn a_new_event_records_one_order_and_answers_with_the_handler_body() {
    let app = spawn_app().await;
    let reply = app
        .receive("stripe", &stripe_payment("evt_new", "ord_1", 4999, NOW))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.outcome, Outcome::Processed);
    assert!(!reply.replayed);
    let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"order_id": "ord_1", "status": "recorded"})
    );
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT o.total_minor, o.currency, o.event_id, w.status::text, w.attempts, \
                    w.payload IS NOT NULL, w.completed_at IS NOT NULL \
             FROM orders o JOIN webhook_event w ON w.event_id = o.event_id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 4999);
    assert_eq!(row.get::<_, String>(1), "usd");
    assert_eq!(row.get::<_, String>(2), "evt_new");
    assert_eq!(row.get::<_, String>(3), "completed");
    assert_eq!(row.get::<_, i32>(4), 1);
    assert!(row.get::<_, bool>(5), "the raw payload is kept");
    assert!(row.get::<_, bool>(6));
}

#[tokio::test]
async fn duplicate_delivery_returns_the_cached_response_verbatim() {
    let app = spawn_app().await;
    let delivery = stripe_payment("evt_dup", "ord_2", 100, NOW);
    let first = app.receive("stripe", &delivery).await;
    // The provider retries later: same body, a fresh signature.
    let retry = stripe_payment("evt_dup", "ord_2", 100, NOW + 60);
    let second = app
        .receiver()
        .receive("stripe", &retry.headers, &retry.body, NOW + 60)
        .await;
    assert_eq!(first.status, 200);
    assert_eq!(second.status, first.status);
    assert_eq!(second.body, first.body, "byte-for-byte the same body");
    assert!(second.replayed, "Idempotent-Replayed on the retry");
    assert_eq!(second.outcome, Outcome::Replayed);
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn the_same_id_with_a_different_body_is_a_conflict_and_changes_nothing() {
    let app = spawn_app().await;
    let first = app
        .receive("stripe", &stripe_payment("evt_same", "ord_3", 500, NOW))
        .await;
    assert_eq!(first.status, 200);
    let client = app.db.connect().await.unwrap();
    let snapshot = "SELECT payload_digest, response_body::text, completed_at::text, \
                    (SELECT total_minor FROM orders WHERE order_id = 'ord_3') \
                    FROM webhook_event WHERE event_id = 'evt_same'";
    let before = client.query_one(snapshot, &[]).await.unwrap();

    let tampered = app
        .receive("stripe", &stripe_payment("evt_same", "ord_3", 1, NOW))
        .await;
    assert_eq!(tampered.status, 409);
    assert_eq!(tampered.outcome, Outcome::DigestMismatch);
    assert!(tampered.body.contains("different body"));

    let after = client.query_one(snapshot, &[]).await.unwrap();
    assert_eq!(before.get::<_, Vec<u8>>(0), after.get::<_, Vec<u8>>(0));
    assert_eq!(before.get::<_, String>(1), after.get::<_, String>(1));
    assert_eq!(before.get::<_, String>(2), after.get::<_, String>(2));
    assert_eq!(after.get::<_, i64>(3), 500);
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn fifty_concurrent_deliveries_of_one_event_make_one_order() {
    // A lock_timeout far above the test's own waits: every duplicate can be seen waiting.
    let mut app = spawn_app_with(50, 30_000).await;
    let handler = gated(&mut app);
    let delivery = stripe_payment("evt_storm", "ord_storm", 1234, NOW);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let receiver = app.receiver().clone();
            let delivery = delivery.clone();
            tokio::spawn(async move {
                receiver
                    .receive("stripe", &delivery.headers, &delivery.body, NOW)
                    .await
            })
        })
        .collect();
    // One delivery won the claim and sits in its handler with the row uncommitted ...
    tokio::time::timeout(Duration::from_secs(20), handler.entered.notified())
        .await
        .expect("one delivery reaches the handler");
    // ... and the 49 others are blocked in PostgreSQL on that row (a client-side mutex or a
    // check-then-insert would show no lock waiters at all).
    let waiting = wait_for_lock_waiters(&app, 49).await;
    assert_eq!(waiting, 49, "every duplicate waits on the claim's row lock");
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "nobody answered yet"
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
    handler.release.notify_one();
    let replies = futures_util::future::join_all(tasks).await;
    let replies: Vec<_> = replies.into_iter().map(|r| r.unwrap()).collect();
    let processed: Vec<_> = replies
        .iter()
        .filter(|r| r.outcome == Outcome::Processed)
        .collect();
    assert_eq!(
        processed.len(),
        1,
        "exactly one delivery applies the effect"
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "one handler call");
    let original = processed[0].body.clone();
    for reply in &replies {
        match reply.status {
            200 if reply.outcome == Outcome::Processed => assert_eq!(reply.body, original),
            200 => {
                assert_eq!(reply.body, original);
                assert_eq!(reply.outcome, Outcome::Replayed);
                assert!(reply.replayed, "{reply:?}");
            }
            409 => {
                assert_eq!(reply.outcome, Outcome::InFlight);
                assert!(reply.retry_after.is_some());
            }
            other => panic!("unexpected status {other}: {reply:?}"),
        }
    }
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(app.ledger_rows().await, 1);
    let later = app.receive("stripe", &delivery).await;
    assert_eq!(
        (later.status, later.body.as_str()),
        (200, original.as_str())
    );
    assert!(later.replayed);
}

#[tokio::test]
async fn rejected_deliveries_answer_4xx_and_write_nothing() {
    let app = spawn_app().await;
    let good = stripe_payment("evt_bad", "ord_bad", 100, NOW);

    let mut wrong_sig = good.clone();
    wrong_sig.body = payment_intent_body("evt_bad", "ord_bad", 999_999);
    let cases: Vec<(&str, &str, Delivery, u16)> = vec![
        ("bad signature", "stripe", wrong_sig, 401),
        (
            "missing signature header",
            "stripe",
            good.clone().without_header("stripe-signature"),
            401,
        ),
        (
            "stale timestamp",
            "stripe",
            stripe_payment("evt_bad", "ord_bad", 100, NOW - 301),
            401,
        ),
        (
            "timestamp from the future",
            "stripe",
            stripe_payment("evt_bad", "ord_bad", 100, NOW + 301),
            401,
        ),
        ("unknown source", "paypal", good.clone(), 404),
        (
            "oversized body",
            "stripe",
            stripe_body(
                format!(r#"{{"id":"evt_big","pad":"{}"}}"#, "x".repeat(70_000)).into_bytes(),
                NOW,
            ),
            413,
        ),
        (
            "missing event id",
            "stripe",
            stripe_body(br#"{"type":"payment_intent.succeeded"}"#.to_vec(), NOW),
            400,
        ),
        (
            "unreadable body",
            "stripe",
            stripe_body(b"id=evt_1&type=x".to_vec(), NOW),
            400,
        ),
        (
            "GitHub delivery without X-GitHub-Delivery",
            "github",
            github("d-1", "push", "{}").without_header("x-github-delivery"),
            400,
        ),
        (
            "Standard Webhooks signed for another message id",
            "acme",
            {
                let mut d = standard("msg_1", r#"{"type":"a"}"#, NOW);
                d.headers.insert("webhook-id", "msg_2".parse().unwrap());
                d
            },
            401,
        ),
    ];
    for (what, source, delivery, status) in cases {
        let reply = app.receive(source, &delivery).await;
        assert_eq!(reply.status, status, "{what}: {reply:?}");
        let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert!(body["error"].is_string(), "{what}: a short reason");
        assert_eq!(app.ledger_rows().await, 0, "{what}: no ledger row");
        assert_eq!(app.order_rows().await, 0, "{what}: no order");
    }
    // Both edges of the tolerance are inside it.
    for at in [NOW - 300, NOW + 300] {
        let id = format!("evt_edge_{at}");
        let reply = app
            .receive("stripe", &stripe_payment(&id, &id, 1, at))
            .await;
        assert_eq!(reply.status, 200, "signed at {at}");
    }
}

#[tokio::test]
async fn a_failing_handler_rolls_back_the_claim_and_the_retry_succeeds() {
    let mut app = spawn_app().await;
    let handler = flaky(&mut app);
    handler.failing.store(true, Ordering::SeqCst);
    let delivery = stripe_payment("evt_flaky", "ord_flaky", 700, NOW);

    let failed = app.receive("stripe", &delivery).await;
    assert_eq!(failed.status, 500);
    assert_eq!(failed.outcome, Outcome::HandlerFailed);
    assert!(
        !failed.body.contains("downstream"),
        "no internals in the response"
    );
    assert_eq!(app.ledger_rows().await, 0, "the claim vanished");
    assert_eq!(app.order_rows().await, 0);

    handler.failing.store(false, Ordering::SeqCst);
    let retried = app.receive("stripe", &delivery).await;
    assert_eq!(retried.status, 200);
    assert_eq!(retried.outcome, Outcome::Processed);
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn a_failing_pipelined_write_commits_nothing() {
    let app = spawn_app().await;
    // A negative amount violates orders' CHECK: the write fails after the claim, in the
    // same pipeline as the completion and COMMIT. The same payload always will: fatal.
    let reply = app
        .receive("stripe", &stripe_payment("evt_neg", "ord_neg", -5, NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Dead),
        "{reply:?}"
    );
    assert_eq!(app.order_rows().await, 0, "the handler's write rolled back");
    assert_eq!(
        row(&app, "evt_neg").await.0,
        "dead",
        "kept for an operator, not completed"
    );
    // The connection is healthy afterwards.
    let ok = app
        .receive("stripe", &stripe_payment("evt_pos", "ord_pos", 5, NOW))
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn unknown_event_types_complete_as_recorded_no_ops() {
    let app = spawn_app().await;
    let reply = app
        .receive(
            "github",
            &github("delivery-1", "issues", r#"{"action":"opened"}"#),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.outcome, Outcome::Ignored);
    let again = app
        .receive(
            "github",
            &github("delivery-1", "issues", r#"{"action":"opened"}"#),
        )
        .await;
    assert_eq!(again.body, reply.body);
    assert!(again.replayed);
    let sw = app
        .receive(
            "acme",
            &standard("msg_9", r#"{"type":"invoice.paid","data":{}}"#, NOW),
        )
        .await;
    assert_eq!(sw.status, 200);
    assert_eq!(app.ledger_rows().await, 2);
}

#[tokio::test]
async fn an_unreachable_database_answers_503_so_the_provider_retries() {
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
    let receiver = shared::Receiver::new(
        &settings,
        pool,
        handlers::examples::registry(&settings.sources),
    );
    let delivery = stripe_payment("evt_down", "ord_down", 1, NOW);
    let reply = receiver
        .receive("stripe", &delivery.headers, &delivery.body, NOW)
        .await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.outcome, Outcome::Unavailable);
}

#[tokio::test]
async fn sources_that_keep_the_digest_only_store_no_payload() {
    let mut app = spawn_app().await;
    let json = r#"[{"name": "stripe", "scheme": "stripe",
                    "secrets": ["whsec_hookledger_local_development_secret"],
                    "store_payload": false}]"#;
    app.settings.sources = shared::Sources::from_json(json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    );
    let reply = app
        .receive("stripe", &stripe_payment("evt_np", "ord_np", 1, NOW))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE payload IS NULL AND octet_length(payload_digest) = 32")
            .await,
        1
    );
}

/// A Stripe payment event as Stripe renders it at one delivery attempt.
fn rendered(pending_webhooks: u32, amount: i64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": "evt_rendered",
        "object": "event",
        "created": NOW - 1,
        "type": "payment_intent.succeeded",
        "pending_webhooks": pending_webhooks,
        "data": {"object": {
            "id": "pi_rendered", "object": "payment_intent", "amount": amount,
            "amount_received": amount, "currency": "usd",
            "metadata": {"order_id": "ord_rendered"}
        }}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_stripe_retry_that_differs_only_in_pending_webhooks_gets_the_cached_response() {
    let app = spawn_app().await;
    let first = app
        .receive("stripe", &stripe_body(rendered(2, 700), NOW))
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    // The second endpoint acknowledged meanwhile: Stripe renders the retry with 1.
    let retry = app
        .receive("stripe", &stripe_body(rendered(1, 700), NOW))
        .await;
    assert_eq!(
        (retry.status, retry.outcome),
        (200, Outcome::Replayed),
        "{retry:?}"
    );
    assert_eq!(retry.body, first.body);
    assert_eq!(app.order_rows().await, 1);

    // Deferred mode compares the same way.
    let accepted = app
        .receive("stripe-deferred", &deferred(rendered(2, 700)))
        .await;
    let again = app
        .receive("stripe-deferred", &deferred(rendered(1, 700)))
        .await;
    assert_eq!((accepted.status, again.status), (202, 202), "{again:?}");
    assert!(again.replayed);
}

#[tokio::test]
async fn a_stripe_retry_that_differs_in_data_object_is_a_409_and_leaves_the_original_untouched() {
    let app = spawn_app().await;
    let first = app
        .receive("stripe", &stripe_body(rendered(2, 700), NOW))
        .await;
    assert_eq!(first.status, 200);
    let client = app.db.connect().await.unwrap();
    let before: (Vec<u8>, Option<Vec<u8>>, String) = {
        let row = client
            .query_one(
                "SELECT payload_digest, payload_identity, response_body::text \
                 FROM webhook_event WHERE event_id = 'evt_rendered'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert!(before.1.is_some(), "the identity is recorded");
    let other = app
        .receive("stripe", &stripe_body(rendered(2, 701), NOW))
        .await;
    assert_eq!(
        (other.status, other.outcome),
        (409, Outcome::DigestMismatch)
    );
    let after: (Vec<u8>, Option<Vec<u8>>, String) = {
        let row = client
            .query_one(
                "SELECT payload_digest, payload_identity, response_body::text \
                 FROM webhook_event WHERE event_id = 'evt_rendered'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert_eq!(before, after, "the original row is untouched");
    let total: i64 = client
        .query_one("SELECT total_minor FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 700);
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
