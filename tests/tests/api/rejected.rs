//! Rejected deliveries counted per source, reason and hour (`rejected_delivery`, migration
//! V20): each refusal under its source and reason, every unknown source under one key, nothing
//! for an accepted delivery, the answer unchanged when the count fails, and the sweep deleting
//! the hours past their retention.

use std::time::SystemTime;

use hookledger_tests::EventFile;
use lambda_http::http::Method;
use receiver::handler::handle_at;
use shared::config::SweepSettings;
use shared::Outcome;

use crate::helpers::*;

/// Every count: `(source, reason, count)`, by source and reason.
async fn counts(app: &TestApp) -> Vec<(String, String, i64)> {
    let client = app.db.connect().await.unwrap();
    client
        .query(
            "SELECT source, reason, count FROM rejected_delivery ORDER BY source, reason",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

fn count(source: &str, reason: &str, n: i64) -> (String, String, i64) {
    (source.to_owned(), reason.to_owned(), n)
}

#[tokio::test]
async fn each_refusal_is_counted_under_its_source_and_reason_and_an_accepted_delivery_is_not() {
    let app = spawn_app().await;
    // Accepted deliveries of every kind write nothing there: a new event, its duplicate, an
    // ignored type, a deferred accept and its duplicate.
    let paid = stripe_payment("evt_ok", "ord_ok", 100, NOW);
    assert_eq!(
        app.receive("stripe", &paid).await.outcome,
        Outcome::Processed
    );
    assert_eq!(
        app.receive("stripe", &paid).await.outcome,
        Outcome::Replayed
    );
    let ignored = stripe_body(
        br#"{"id": "evt_no_handler", "type": "invoice.paid", "created": 1}"#.to_vec(),
        NOW,
    );
    assert_eq!(
        app.receive("stripe", &ignored).await.outcome,
        Outcome::Ignored
    );
    let later = deferred(payment_intent_body("evt_later", "ord_later", 1));
    assert_eq!(app.receive("stripe-deferred", &later).await.status, 202);
    assert_eq!(app.receive("stripe-deferred", &later).await.status, 202);
    assert_eq!(counts(&app).await, []);

    // A bad signature (a secret the sources do not have), twice.
    let mut forged = stripe_payment("evt_forged", "ord_f", 1, NOW);
    forged.body = payment_intent_body("evt_forged", "ord_f", 999);
    for _ in 0..2 {
        assert_eq!(app.receive("stripe", &forged).await.status, 401);
    }
    // Two unknown source names: one key.
    assert_eq!(app.receive("paypal", &paid).await.status, 404);
    assert_eq!(app.receive("nosuch-source-123", &paid).await.status, 404);
    // A body over the limit.
    let big = stripe_body(
        format!(r#"{{"id":"evt_big","pad":"{}"}}"#, "x".repeat(70_000)).into_bytes(),
        NOW,
    );
    assert_eq!(app.receive("stripe", &big).await.status, 413);
    // The event id again with another body: 409.
    let conflict = app
        .receive("stripe", &stripe_payment("evt_ok", "ord_ok", 101, NOW))
        .await;
    assert_eq!(
        (conflict.status, conflict.outcome),
        (409, Outcome::DigestMismatch)
    );
    // A body without an event id, on GitHub.
    let anonymous = github("d-1", "push", "{}").without_header("x-github-delivery");
    assert_eq!(app.receive("github", &anonymous).await.status, 400);

    assert_eq!(
        counts(&app).await,
        [
            count("(unknown)", "unknown_source", 2),
            count("github", "bad_request", 1),
            count("stripe", "digest_mismatch", 1),
            count("stripe", "too_large", 1),
            count("stripe", "unauthorized", 2),
        ]
    );
    // In the current hour (UTC), last seen just now.
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(DISTINCT bucket),
                    bool_and(bucket = date_trunc('hour', now(), 'UTC')),
                    bool_and(last_at > now() - interval '1 minute')
             FROM rejected_delivery",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, i64>(0),
            row.get::<_, bool>(1),
            row.get::<_, bool>(2)
        ),
        (1, true, true)
    );
    // Nothing of them reached the ledger: the three accepted events only.
    assert_eq!(app.ledger_rows().await, 3);
}

#[tokio::test]
async fn the_receiver_functions_own_refusals_count_only_when_they_name_a_source() {
    let app = spawn_app().await;
    let send = |request| handle_at(&app.state, request, NOW);
    let event = EventFile::load("receiver/stripe-payment-intent-succeeded.json").unwrap();
    // A body flagged base64 that did not decode (the transport guard's marker), on a configured
    // source and on an unknown one.
    let mut marked = event.clone();
    marked
        .set_header(receiver::transport::INVALID_BASE64_HEADER, "1")
        .unwrap();
    let response = send(marked.request().unwrap()).await.unwrap();
    assert_eq!(response.status(), 400);
    let mut elsewhere = marked.request().unwrap();
    *elsewhere.uri_mut() = "/webhooks/not-configured".parse().unwrap();
    assert_eq!(send(elsewhere).await.unwrap().status(), 400);
    // Not deliveries: a GET, and a path that names no source.
    let mut get = event.request().unwrap();
    *get.method_mut() = Method::GET;
    assert_eq!(send(get).await.unwrap().status(), 405);
    let mut nowhere = event.request().unwrap();
    *nowhere.uri_mut() = "/admin/stripe".parse().unwrap();
    assert_eq!(send(nowhere).await.unwrap().status(), 404);
    assert_eq!(
        counts(&app).await,
        [
            count("(unknown)", "bad_request", 1),
            count("stripe", "bad_request", 1),
        ]
    );
}

#[tokio::test]
async fn a_refusal_that_cannot_be_counted_is_answered_as_decided_with_a_warning() {
    let app = spawn_app().await;
    // The table gone from under the receiver: every count fails.
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute("ALTER TABLE rejected_delivery RENAME TO rejected_delivery_gone")
        .await
        .unwrap();
    let (logs, _guard) = capture_logs();
    let mut forged = stripe_payment("evt_forged", "ord_f", 1, NOW);
    forged.body = payment_intent_body("evt_forged", "ord_f", 999);
    let reply = app.receive("stripe", &forged).await;
    assert_eq!((reply.status, reply.outcome), (401, Outcome::Unauthorized));
    assert_eq!(reply.body, r#"{"error":"signature mismatch"}"#);
    let reply = app
        .receive("paypal", &stripe_payment("evt_x", "o", 1, NOW))
        .await;
    assert_eq!((reply.status, reply.outcome), (404, Outcome::UnknownSource));
    let warnings = logs.with("message", "rejected delivery not counted");
    assert_eq!(warnings.len(), 2, "{}", logs.text());
    assert_eq!(warnings[0]["level"], "WARN");
    assert_eq!(
        (&warnings[0]["source"], &warnings[0]["reason"]),
        (
            &serde_json::json!("stripe"),
            &serde_json::json!("unauthorized")
        )
    );
    assert_eq!(
        (&warnings[1]["source"], &warnings[1]["reason"]),
        (
            &serde_json::json!("(unknown)"),
            &serde_json::json!("unknown_source")
        )
    );
    // The cause, without a value of the request.
    let error = warnings[0]["error"].as_str().unwrap();
    assert!(error.contains("42P01"), "{error}");
    assert!(!logs.text().contains("ord_f"), "{}", logs.text());
    // And the receive path goes on: an accepted delivery, with the pool still usable.
    let ok = app
        .receive("stripe", &stripe_payment("evt_fine", "o", 1, NOW))
        .await;
    assert_eq!(ok.status, 200, "{ok:?}");
}

#[tokio::test]
async fn the_sweep_deletes_the_hours_past_their_retention_and_keeps_the_others() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    // Hours 40 and 31 days old, one 29 days old, and this one, for two sources.
    client
        .batch_execute(
            "INSERT INTO rejected_delivery (source, reason, bucket, count, last_at)
             SELECT source, 'unauthorized', date_trunc('hour', now() - age, 'UTC'), 1,
                    date_trunc('hour', now() - age, 'UTC')
             FROM (VALUES ('stripe', interval '40 days'), ('stripe', interval '31 days'),
                          ('(unknown)', interval '31 days 2 hours'),
                          ('stripe', interval '29 days'), ('github', interval '0 days'))
                  AS r(source, age)",
        )
        .await
        .unwrap();
    let left = || async {
        app.texts(
            "SELECT source || ' ' || (now() - bucket > interval '30 days')
             FROM rejected_delivery ORDER BY bucket",
        )
        .await
    };
    assert_eq!(left().await.len(), 5);
    let conn = app.receiver().pool.get().await.unwrap();
    // One row a batch, one batch: bounded like the sweep's other work.
    let one = SweepSettings {
        batch_size: 1,
        max_batches: 1,
        pause_ms: 0,
        duty_percent: 100,
        margin_ms: 0,
        ..SweepSettings::default()
    };
    let report = shared::sweep::run(
        &conn,
        &app.settings.sources,
        &one,
        SystemTime::now(),
        plenty,
    )
    .await
    .unwrap();
    assert_eq!(
        (report.deleted, report.rejected_deleted, report.batches),
        (1, 1, 1),
        "{report:?}"
    );
    assert_eq!(left().await.len(), 4);
    // The rest, by the default retention (30 days): the two other old hours go, the 29-day-old
    // one stays. Not a source's deletions.
    let all = SweepSettings {
        max_batches: 100,
        ..one
    };
    let report = shared::sweep::run(
        &conn,
        &app.settings.sources,
        &all,
        SystemTime::now(),
        plenty,
    )
    .await
    .unwrap();
    assert_eq!(report.rejected_deleted, 2, "{report:?}");
    assert!(report.deleted_by_source.is_empty(), "{report:?}");
    assert_eq!(left().await, ["stripe false", "github false"]);
    // A shorter retention takes the 29-day-old hour too.
    let week = SweepSettings {
        rejected_retention_days: 7,
        ..all
    };
    let report = shared::sweep::run(
        &conn,
        &app.settings.sources,
        &week,
        SystemTime::now(),
        plenty,
    )
    .await
    .unwrap();
    assert_eq!(report.rejected_deleted, 1, "{report:?}");
    assert_eq!(left().await, ["github false"]);
    // The retention is read from the environment like the sweep's other bounds.
    let settings = |value: &str| {
        let value = value.to_owned();
        shared::Settings::from_lookup(|name| match name {
            "DATABASE_URL" => Some("postgres://localhost/x".to_owned()),
            "HOOKLEDGER_SOURCES" => Some(hookledger_tests::local_sources_json().unwrap()),
            "HOOKLEDGER_REJECTED_RETENTION_DAYS" => Some(value.clone()),
            _ => None,
        })
    };
    assert_eq!(settings("12").unwrap().sweep.rejected_retention_days, 12);
    assert_eq!(settings("").unwrap().sweep.rejected_retention_days, 30);
    for bad in ["0", "3651", "x"] {
        assert!(settings(bad).is_err(), "{bad}");
    }
}
