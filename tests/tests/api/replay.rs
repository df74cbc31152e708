//! Replay from the providers' APIs (shared::replay, functions/replay) against local fakes of
//! Stripe's, Paddle's and GitHub's list APIs that check the credential and the query
//! parameters they receive (hookledger_tests::fake_providers).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hookledger_tests::fake_providers::{
    serve_fixture, Answer, FakeServer, GithubAuth, GithubDeliveries, PaddleEvents, StripeEvents,
};
use hookledger_tests::local_sources_json;
use serde_json::{json, Value};
use shared::replay::{ReplayErrorKind, ReplayOptions, ReplayReport, ReplayRequest, Replayer};
use shared::sources_refresh::LiveSources;
use shared::timestamp::rfc3339;
use shared::Sources;

use crate::helpers::*;

const STRIPE_KEY: &str = "rk_test_hookledger_replay_read_events";
const PADDLE_KEY: &str = "pdl_live_apikey_hookledger_replay";
const GITHUB_TOKEN: &str = "github_pat_hookledger_replay_token";

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn at(unix: i64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(unix as u64))
}

/// The local sources with `overrides` merged into the sources they name.
fn sources_with(overrides: &[(&str, Value)]) -> String {
    let mut sources: Vec<Value> = serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    for (name, fields) in overrides {
        let source = sources
            .iter_mut()
            .find(|s| s["name"] == *name)
            .unwrap_or_else(|| panic!("no local source {name}"));
        for (key, value) in fields.as_object().unwrap() {
            source[key] = value.clone();
        }
    }
    Value::Array(sources).to_string()
}

/// Points the app (its receiver and its settings, which the worker reads) at `json`'s sources.
fn use_sources(app: &mut TestApp, json: &str) {
    let sources = Sources::from_json(json).unwrap();
    app.settings.sources = sources.clone();
    app.state.receiver.sources = LiveSources::fixed(sources);
}

fn replayer() -> Replayer {
    Replayer::new(ReplayOptions {
        backoff_base: Duration::from_millis(10),
        ..ReplayOptions::default()
    })
    .unwrap()
}

fn request(source: &str, since: i64) -> ReplayRequest {
    ReplayRequest {
        source: source.to_owned(),
        since: at(since),
        until: None,
        dry_run: false,
        starting_after: None,
        delivery_success: None,
    }
}

/// A Stripe `payment_intent.succeeded` event as `GET /v1/events` lists it.
fn stripe_event(n: usize, created: i64) -> Value {
    json!({
        "id": format!("evt_{n:06}"),
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "livemode": false,
        "pending_webhooks": 0,
        "request": {"id": null, "idempotency_key": null},
        "type": "payment_intent.succeeded",
        "data": {"object": {
            "id": format!("pi_{n:06}"),
            "object": "payment_intent",
            "amount": 1000 + n,
            "amount_received": 1000 + n,
            "currency": "usd",
            "metadata": {"order_id": format!("ord_{n:06}")}
        }}
    })
}

/// `count` Stripe events created one second apart, the newest a minute ago.
fn stripe_events(count: usize) -> Vec<Value> {
    let newest = now_unix() - 60;
    (0..count)
        .map(|n| stripe_event(n, newest - n as i64))
        .collect()
}

fn ids(events: &[Value], field: &str) -> Vec<String> {
    events
        .iter()
        .map(|e| e[field].as_str().unwrap().to_owned())
        .collect()
}

/// Puts `ids` of `source` in the ledger as `status` (`completed` or `dead`) in one statement,
/// as earlier deliveries would have left them.
async fn seed(app: &TestApp, source: &str, ids: &[String], status: &str) {
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, completed_at,
                  response_status, response_body, dead_at, last_error, attempts)
             SELECT $1::text, id, 'payment_intent.succeeded', sha256(id::bytea),
                    $3::text::event_status,
                    CASE WHEN $3::text = 'completed' THEN now() END,
                    CASE WHEN $3::text = 'completed' THEN 200::smallint END,
                    CASE WHEN $3::text = 'completed' THEN '{\"ok\": true}'::jsonb END,
                    CASE WHEN $3::text = 'dead' THEN now() END,
                    CASE WHEN $3::text = 'dead' THEN 'the handler refused it' END,
                    CASE WHEN $3::text = 'dead' THEN 1 ELSE 0 END
             FROM unnest($2::text[]) AS id",
            &[&source, &ids, &status],
        )
        .await
        .unwrap();
}

async fn stripe_fake(events: Vec<Value>) -> (FakeServer, StripeEvents) {
    let fixture = StripeEvents::new(STRIPE_KEY, events);
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), None)
        .await
        .unwrap();
    (server, fixture)
}

/// An app whose `stripe` source (inline) reads events from `server` with `key`.
async fn stripe_app(server: &FakeServer, key: &str) -> TestApp {
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "stripe",
            json!({"api_key": key, "api_base_url": server.base_url}),
        )]),
    );
    app
}

fn plenty_left() -> Duration {
    Duration::from_secs(600)
}

#[tokio::test]
async fn stripe_replay_claims_only_the_missing_events_and_applies_each_once() {
    let events = stripe_events(4_812);
    let (server, _) = stripe_fake(events.clone()).await;
    let app = stripe_app(&server, STRIPE_KEY).await;
    let all = ids(&events, "id");
    let missing: BTreeSet<String> = all.iter().step_by(219).cloned().collect();
    assert_eq!(missing.len(), 22);
    let delivered: Vec<String> = all
        .iter()
        .filter(|id| !missing.contains(*id))
        .cloned()
        .collect();
    seed(&app, "stripe", &delivered, "completed").await;
    assert_eq!(app.ledger_rows().await, 4_790);

    let mut pages = Vec::new();
    let report = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |r: &ReplayReport| pages.push(r.fetched),
        )
        .await
        .unwrap();
    assert_eq!(
        report,
        ReplayReport {
            fetched: 4_812,
            new: 22,
            duplicates: 4_790,
            redelivered: 0,
            failed: 0,
            next_cursor: None,
        }
    );
    // 49 pages of up to 100, each reported as it finished.
    assert_eq!(pages.len(), 49);
    assert_eq!(pages.last(), Some(&4_812));
    let gets = server.requests_with("GET");
    assert_eq!(gets.len(), 49);
    assert_eq!(gets[0].param("starting_after"), None);
    assert_eq!(gets[1].param("starting_after"), Some("evt_000099"));
    assert_eq!(gets[0].param("limit"), Some("100"));
    // Exactly 22 business effects, each for a missing event, each marked as replayed.
    assert_eq!(app.order_rows().await, 22);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE replayed_at IS NOT NULL")
            .await,
        22
    );
    let replayed: BTreeSet<String> = app
        .texts(
            "SELECT event_id FROM webhook_event WHERE replayed_at IS NOT NULL AND status = 'completed'",
        )
        .await
        .into_iter()
        .collect();
    assert_eq!(replayed, missing);

    // Again: nothing is new, nothing runs twice.
    let again = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!(
        (again.fetched, again.new, again.duplicates),
        (4_812, 0, 4_812)
    );
    assert_eq!(app.order_rows().await, 22);
    assert_eq!(app.ledger_rows().await, 4_812);
}

#[tokio::test]
async fn a_stopped_stripe_replay_resumes_at_its_cursor_and_the_totals_add_up() {
    let events = stripe_events(250);
    let (server, _) = stripe_fake(events).await;
    let app = stripe_app(&server, STRIPE_KEY).await;
    let since = now_unix() - 7_200;

    // Time runs short mid-way through the second page: 1 request + 100 events, 1 + 48.
    let calls = AtomicUsize::new(0);
    let running_out = || {
        if calls.fetch_add(1, Ordering::SeqCst) < 150 {
            plenty_left()
        } else {
            Duration::from_secs(1)
        }
    };
    let first = replayer()
        .run(
            app.receiver(),
            &request("stripe", since),
            running_out,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!((first.fetched, first.new), (148, 148), "{first:?}");
    assert_eq!(first.next_cursor.as_deref(), Some("evt_000147"));
    assert_eq!(app.order_rows().await, 148);

    let mut resumed_request = request("stripe", since);
    resumed_request.starting_after = first.next_cursor.clone();
    let second = replayer()
        .run(
            app.receiver(),
            &resumed_request,
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    // The rest, exactly: none fetched twice (no duplicates), none skipped.
    assert_eq!(
        (
            second.fetched,
            second.new,
            second.duplicates,
            second.next_cursor
        ),
        (102, 102, 0, None)
    );
    assert_eq!(first.fetched + second.fetched, 250);
    assert_eq!(app.order_rows().await, 250);
    assert_eq!(
        server
            .requests_with("GET")
            .last()
            .unwrap()
            .param("starting_after"),
        Some("evt_000247")
    );

    // Too little time to start anything: an error that says so, with nothing done.
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", since),
            || Duration::from_secs(3),
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(*error.kind, ReplayErrorKind::OutOfTime { .. }),
        "{error}"
    );
    assert_eq!(error.report, ReplayReport::default());
}

#[tokio::test]
async fn a_dry_run_counts_what_would_be_new_and_writes_nothing() {
    let events = stripe_events(30);
    let (server, _) = stripe_fake(events.clone()).await;
    let app = stripe_app(&server, STRIPE_KEY).await;
    seed(&app, "stripe", &ids(&events, "id")[..10], "completed").await;
    let mut dry = request("stripe", now_unix() - 7_200);
    dry.dry_run = true;
    let report = replayer()
        .run(app.receiver(), &dry, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap();
    assert_eq!(
        (report.fetched, report.new, report.duplicates, report.failed),
        (30, 20, 10, 0)
    );
    assert_eq!(app.ledger_rows().await, 10);
    assert_eq!(app.order_rows().await, 0);
}

#[tokio::test]
async fn delivery_success_false_is_passed_to_stripe() {
    let events = stripe_events(10);
    let mut fixture = StripeEvents::new(STRIPE_KEY, events.clone());
    fixture.undelivered = Arc::new(ids(&events, "id")[..3].iter().cloned().collect());
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), None)
        .await
        .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let mut failed_only = request("stripe", now_unix() - 7_200);
    failed_only.delivery_success = Some(false);
    let report = replayer()
        .run(
            app.receiver(),
            &failed_only,
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!((report.fetched, report.new), (3, 3));
    assert_eq!(
        server.requests()[0].param("delivery_success"),
        Some("false")
    );
}

#[tokio::test]
async fn a_429_with_retry_after_and_a_503_are_retried_and_the_replay_succeeds() {
    let events = stripe_events(5);
    let fixture = StripeEvents::new(STRIPE_KEY, events);
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    let server = serve_fixture(
        move |r| match count.fetch_add(1, Ordering::SeqCst) {
            0 => Answer::json(429, &json!({"error": {"message": "Too many requests"}}))
                .with_header("retry-after", "1"),
            1 => Answer::raw(503, "upstream unavailable"),
            _ => fixture.answer(r),
        },
        None,
    )
    .await
    .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let started = Instant::now();
    let report = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!((report.fetched, report.new), (5, 5));
    assert_eq!(server.requests().len(), 3);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not honoured ({:?})",
        started.elapsed()
    );

    // A provider that keeps failing: a bounded number of attempts, then a clear error.
    let down = serve_fixture(|_| Answer::raw(502, "bad gateway"), None)
        .await
        .unwrap();
    let app = stripe_app(&down, STRIPE_KEY).await;
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            *error.kind,
            ReplayErrorKind::Provider {
                status: 502,
                attempts: 5,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(down.requests().len(), 5);
}

#[tokio::test]
async fn a_401_is_a_clear_error_naming_the_source_and_api_key_never_its_value_and_writes_no_row() {
    let (server, _) = stripe_fake(stripe_events(5)).await;
    let wrong_key = "rk_test_revoked_key_value_0123456789";
    let app = stripe_app(&server, wrong_key).await;
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("\"stripe\""), "{message}");
    assert!(message.contains("api_key"), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains(wrong_key), "{message}");
    assert!(!format!("{error:?}").contains(wrong_key));
    assert_eq!(error.report, ReplayReport::default());
    // Sent once, not retried.
    assert_eq!(server.requests().len(), 1);
    assert_eq!(app.ledger_rows().await, 0);
    assert_eq!(app.order_rows().await, 0);
}

#[tokio::test]
async fn a_redirect_is_not_followed_with_the_credential() {
    // A provider URL that answers 302 to another host (a hijacked DNS name, a misconfigured
    // proxy): the key must not travel there.
    let elsewhere = serve_fixture(
        |_| Answer::json(200, &json!({"data": [], "has_more": false})),
        None,
    )
    .await
    .unwrap();
    let target = format!("{}/v1/events", elsewhere.base_url);
    let server = serve_fixture(
        move |_| Answer::raw(302, "").with_header("location", &target),
        None,
    )
    .await
    .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("302"), "{error}");
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn a_malformed_page_stops_the_run_with_the_cursor_to_resume_from() {
    let fixture = StripeEvents::new(STRIPE_KEY, stripe_events(150));
    let broken = Arc::new(AtomicBool::new(true));
    let is_broken = broken.clone();
    let server = serve_fixture(
        move |r| {
            if r.param("starting_after").is_some() && is_broken.load(Ordering::SeqCst) {
                Answer::raw(200, "<html>upstream proxy error</html>")
            } else {
                fixture.answer(r)
            }
        },
        None,
    )
    .await
    .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let since = now_unix() - 7_200;
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", since),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(*error.kind, ReplayErrorKind::MalformedPage { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("malformed page"), "{error}");
    assert_eq!((error.report.fetched, error.report.new), (100, 100));
    assert_eq!(error.report.next_cursor.as_deref(), Some("evt_000099"));

    broken.store(false, Ordering::SeqCst);
    let mut resume = request("stripe", since);
    resume.starting_after = error.report.next_cursor.clone();
    let rest = replayer()
        .run(app.receiver(), &resume, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap();
    assert_eq!((rest.fetched, rest.new, rest.duplicates), (50, 50, 0));
    assert_eq!(app.order_rows().await, 150);
}

#[tokio::test]
async fn a_window_beyond_the_look_back_or_of_another_scheme_is_refused_before_any_request() {
    let (server, _) = stripe_fake(stripe_events(5)).await;
    let app = stripe_app(&server, STRIPE_KEY).await;
    // The default look-back: 30 days of retention minus Stripe's 3-day horizon.
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 28 * 86_400),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(
        *error.kind,
        ReplayErrorKind::BeyondLookBack {
            lookback_days: 27,
            ..
        }
    ));
    assert!(message.contains("\"stripe\""), "{message}");
    assert!(message.contains("replay_lookback_days"), "{message}");
    assert!(message.contains("earliest allowed since is"), "{message}");

    let mut backwards = request("stripe", now_unix() - 600);
    backwards.until = Some(at(now_unix() - 1_200));
    let error = replayer()
        .run(
            app.receiver(),
            &backwards,
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("before since"), "{error}");

    let error = replayer()
        .run(
            app.receiver(),
            &request("acme", now_unix() - 600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("replay is supported for stripe, paddle and github sources"),
        "{error}"
    );
    let error = replayer()
        .run(
            app.receiver(),
            &request("paypal", now_unix() - 600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(*error.kind, ReplayErrorKind::UnknownSource(_)),
        "{error}"
    );
    // A source without an api_key says which setting to add.
    let error = replayer()
        .run(
            app.receiver(),
            &request("stripe-deferred", now_unix() - 600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("set api_key"), "{error}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_deferred_source_replays_into_claimed_rows_that_the_worker_completes_once() {
    let events = stripe_events(3);
    let (server, _) = stripe_fake(events.clone()).await;
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "stripe-deferred",
            json!({"api_key": STRIPE_KEY, "api_base_url": server.base_url}),
        )]),
    );
    let report = replayer()
        .run(
            app.receiver(),
            &request("stripe-deferred", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!((report.fetched, report.new), (3, 3));
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_event WHERE source = 'stripe-deferred' \
             AND status = 'claimed' AND replayed_at IS NOT NULL"
        )
        .await,
        3
    );
    assert_eq!(app.order_rows().await, 0);
    let worker = worker_for(&app);
    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!(summary.leased, 3, "{summary:?}");
    assert_eq!(app.order_rows().await, 3);
    // Replayed again while completed: duplicates, nothing re-queued.
    let again = replayer()
        .run(
            app.receiver(),
            &request("stripe-deferred", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!((again.new, again.duplicates), (0, 3));
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'completed'")
            .await,
        3
    );
}

/// A Paddle event entity as `GET /events` lists it.
fn paddle_event(n: usize, occurred_at: i64) -> Value {
    json!({
        "event_id": format!("evt_01hv8y5ehszzq0yv20ttx3166{n}"),
        "event_type": "transaction.completed",
        "occurred_at": rfc3339(UNIX_EPOCH + Duration::from_millis(occurred_at as u64 * 1000 + 123)),
        "data": {"id": format!("txn_01hv8wptq8987qeep44cyrewp{n}"), "status": "completed"}
    })
}

#[tokio::test]
async fn paddle_replay_reads_two_pages_newest_first_and_claims_the_one_new_event() {
    let now = now_unix();
    let since = now - 3_600;
    let until = now - 120;
    // Ids sort by creation: 1 is the oldest (before the window), 6 the newest (after it).
    let events = vec![
        paddle_event(1, since - 10),
        paddle_event(2, since + 100),
        paddle_event(3, since + 200),
        paddle_event(4, since + 300),
        paddle_event(5, since + 400),
        paddle_event(6, until + 60),
    ];
    let fixture = PaddleEvents::new(PADDLE_KEY, events.clone(), 3);
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), Some(fixture.base_url.clone()))
        .await
        .unwrap();
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "paddle",
            json!({"api_key": PADDLE_KEY, "api_base_url": server.base_url}),
        )]),
    );
    let event_ids = ids(&events, "event_id");
    seed(
        &app,
        "paddle",
        &[
            event_ids[1].clone(),
            event_ids[3].clone(),
            event_ids[4].clone(),
        ],
        "completed",
    )
    .await;
    let mut window = request("paddle", since);
    window.until = Some(at(until));
    let report = replayer()
        .run(app.receiver(), &window, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap();
    assert_eq!(
        report,
        ReplayReport {
            fetched: 4,
            new: 1,
            duplicates: 3,
            redelivered: 0,
            failed: 0,
            next_cursor: None,
        }
    );
    let gets = server.requests();
    assert_eq!(gets.len(), 2, "two pages, then past since");
    assert_eq!(gets[0].param("after"), None);
    assert_eq!(gets[1].param("after"), Some(event_ids[3].as_str()));
    assert_eq!(gets[0].param("order_by"), Some("id[DESC]"));
    // The one new event (no handler for its type: ignored, recorded), marked replayed.
    let (status, _, _) = row(&app, &event_ids[2]).await;
    assert_eq!(status, "completed");
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE replayed_at IS NOT NULL")
            .await,
        1
    );
    assert_eq!(app.ledger_rows().await, 4);

    // A wrong key: a clear error, and no row.
    use_sources(
        &mut app,
        &sources_with(&[(
            "paddle",
            json!({"api_key": "pdl_live_apikey_wrong", "api_base_url": server.base_url}),
        )]),
    );
    let error = replayer()
        .run(app.receiver(), &window, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            *error.kind,
            ReplayErrorKind::Unauthorized { status: 401, .. }
        ),
        "{error}"
    );
    assert!(!error.to_string().contains("pdl_live_apikey_wrong"));
    assert_eq!(app.ledger_rows().await, 4);
}

/// A GitHub hook delivery as `GET .../deliveries` lists it.
fn delivery(id: u64, guid: &str, delivered_at: i64, redelivery: bool) -> Value {
    json!({
        "id": id,
        "guid": guid,
        "delivered_at": at(delivered_at),
        "redelivery": redelivery,
        "duration": 0.27,
        "status": if redelivery { "OK" } else { "failed to connect to host" },
        "status_code": if redelivery { 200 } else { 0 },
        "event": "issues",
        "action": "opened",
        "installation_id": null,
        "repository_id": 42,
        "throttled_at": null
    })
}

fn guid(k: usize) -> String {
    format!("0b989ba4-242f-11e5-81e1-c7b6966d{k:04}")
}

#[tokio::test]
async fn github_replay_asks_for_exactly_the_missing_and_dead_deliveries_and_writes_no_row() {
    let now = now_unix();
    let since = now - 3_600;
    let until = now - 120;
    let mut deliveries = Vec::new();
    // 30 GUIDs in the window, delivered (and failed) during the outage.
    for k in 0..30 {
        deliveries.push(delivery(
            2_000 + 2 * k as u64,
            &guid(k),
            since + 60 + k as i64,
            false,
        ));
    }
    // Three were redelivered since (same GUID, newer id): still one GUID each.
    for k in 0..3 {
        deliveries.push(delivery(
            3_000 + k as u64,
            &guid(k),
            since + 1_000 + k as i64,
            true,
        ));
    }
    // Outside the window: after until, and before since (absent from the ledger too).
    deliveries.push(delivery(4_000, "late-guid", until + 30, false));
    deliveries.push(delivery(1_000, "early-guid-1", since - 100, false));
    deliveries.push(delivery(999, "early-guid-2", since - 200, false));
    let hook = "/repos/acme/shop/hooks/7";
    let fixture = GithubDeliveries::new(
        hook,
        GithubAuth::Token(GITHUB_TOKEN.to_owned()),
        deliveries,
        10,
    );
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), Some(fixture.base_url.clone()))
        .await
        .unwrap();
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "github",
            json!({"api_key": GITHUB_TOKEN, "api_base_url": server.base_url,
                   "github_hook": {"repository": "acme/shop", "hook_id": 7}}),
        )]),
    );
    let missing = [1, 10, 17];
    let dead = [5, 20];
    let completed: Vec<String> = (0..30)
        .filter(|k| !missing.contains(k) && !dead.contains(k))
        .map(guid)
        .collect();
    seed(&app, "github", &completed, "completed").await;
    seed(&app, "github", &dead.map(guid), "dead").await;
    assert_eq!(app.ledger_rows().await, 27);
    let mut window = request("github", since);
    window.until = Some(at(until));

    // Dry run: would redeliver five, asks for none.
    let mut dry = window.clone();
    dry.dry_run = true;
    let report = replayer()
        .run(app.receiver(), &dry, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap();
    assert_eq!(
        (
            report.fetched,
            report.redelivered,
            report.duplicates,
            report.new
        ),
        (30, 5, 25, 0)
    );
    assert!(server.requests_with("POST").is_empty());

    let mut pages = 0;
    let report = replayer()
        .run(app.receiver(), &window, plenty_left, |_: &ReplayReport| {
            pages += 1
        })
        .await
        .unwrap();
    assert_eq!(
        report,
        ReplayReport {
            fetched: 30,
            new: 0,
            duplicates: 25,
            redelivered: 5,
            failed: 0,
            next_cursor: None,
        }
    );
    assert_eq!(pages, 4);
    // One POST per missing or dead GUID, for its newest delivery (guid 1 was redelivered as
    // 3001), and none for the rest.
    let posted: BTreeSet<String> = server
        .requests_with("POST")
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let expected: BTreeSet<String> = [3_001, 2_020, 2_034, 2_010, 2_040]
        .iter()
        .map(|id| format!("{hook}/deliveries/{id}/attempts"))
        .collect();
    assert_eq!(posted, expected);
    assert_eq!(server.requests_with("POST").len(), 5);
    for request in server.requests() {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {GITHUB_TOKEN}").as_str())
        );
        assert_eq!(request.header("x-github-api-version"), Some("2022-11-28"));
    }
    // GitHub resends them signed to the receiver; replay itself wrote nothing.
    assert_eq!(app.ledger_rows().await, 27);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE replayed_at IS NOT NULL")
            .await,
        0
    );
}

#[tokio::test]
async fn a_stopped_github_replay_resumes_on_the_same_page_without_asking_twice() {
    let now = now_unix();
    let since = now - 3_600;
    let deliveries: Vec<Value> = (0..25)
        .map(|k| delivery(5_000 + k as u64, &guid(k), since + 60 + k as i64, false))
        .collect();
    let hook = "/orgs/acme/hooks/8";
    let fixture = GithubDeliveries::new(
        hook,
        GithubAuth::Token(GITHUB_TOKEN.to_owned()),
        deliveries,
        10,
    );
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), Some(fixture.base_url.clone()))
        .await
        .unwrap();
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "github",
            json!({"api_key": GITHUB_TOKEN, "api_base_url": server.base_url,
                   "github_hook": {"organization": "acme", "hook_id": 8}}),
        )]),
    );
    // Each delivery costs two checks of the time (the loop's and the POST's): stop on page 2.
    let calls = AtomicUsize::new(0);
    let running_out = || {
        if calls.fetch_add(1, Ordering::SeqCst) < 30 {
            plenty_left()
        } else {
            Duration::from_secs(1)
        }
    };
    let first = replayer()
        .run(
            app.receiver(),
            &request("github", since),
            running_out,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    let cursor = first.next_cursor.clone().expect("stopped early");
    assert!(cursor.starts_with("gh:"), "{cursor}");
    assert!(
        first.redelivered > 10 && first.redelivered < 25,
        "{first:?}"
    );
    let mut resume = request("github", since);
    resume.starting_after = Some(cursor);
    let second = replayer()
        .run(app.receiver(), &resume, plenty_left, |_: &ReplayReport| {})
        .await
        .unwrap();
    assert_eq!(second.next_cursor, None);
    assert_eq!(first.redelivered + second.redelivered, 25);
    let posts: Vec<String> = server
        .requests_with("POST")
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let distinct: BTreeSet<&String> = posts.iter().collect();
    assert_eq!(
        (posts.len(), distinct.len()),
        (25, 25),
        "each delivery asked for once"
    );
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn a_github_app_hook_authenticates_with_a_jwt_from_the_apps_key() {
    let rsa = openssl::rsa::Rsa::generate(2048).unwrap();
    let pem = String::from_utf8(rsa.private_key_to_pem().unwrap()).unwrap();
    let public_key = openssl::pkey::PKey::from_rsa(
        openssl::rsa::Rsa::public_key_from_pem(&rsa.public_key_to_pem().unwrap()).unwrap(),
    )
    .unwrap();
    let now = now_unix();
    let since = now - 3_600;
    let deliveries = vec![
        delivery(7_001, &guid(1), since + 10, false),
        delivery(7_002, &guid(2), since + 20, false),
    ];
    let fixture = GithubDeliveries::new(
        "/app/hook",
        GithubAuth::App {
            app_id: 4242,
            public_key,
        },
        deliveries,
        100,
    );
    let answer = fixture.clone();
    let server = serve_fixture(move |r| answer.answer(r), Some(fixture.base_url.clone()))
        .await
        .unwrap();
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "github",
            json!({"api_base_url": server.base_url,
                   "github_hook": {"app_id": 4242, "app_private_key": pem}}),
        )]),
    );
    seed(&app, "github", &[guid(1)], "completed").await;
    let report = replayer()
        .run(
            app.receiver(),
            &request("github", since),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!(
        (report.fetched, report.redelivered, report.duplicates),
        (2, 1, 1)
    );
    let posts = server.requests_with("POST");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].path, "/app/hook/deliveries/7002/attempts");

    // Another app's key: GitHub refuses the JWT, and the error names the app's settings.
    let other = openssl::rsa::Rsa::generate(2048).unwrap();
    let other_pem = String::from_utf8(other.private_key_to_pem().unwrap()).unwrap();
    use_sources(
        &mut app,
        &sources_with(&[(
            "github",
            json!({"api_base_url": server.base_url,
                   "github_hook": {"app_id": 4242, "app_private_key": other_pem}}),
        )]),
    );
    let error = replayer()
        .run(
            app.receiver(),
            &request("github", since),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("github_hook.app_private_key"), "{message}");
    assert!(!message.contains("PRIVATE KEY"), "{message}");
}

/// Every way into the ledger: a delivery needs a verified signature (the receiver's 401 case is
/// `receive::rejected_deliveries_answer_4xx_and_write_nothing`); replay needs an authenticated
/// API read (a 401 writes nothing, for Stripe and Paddle alike); GitHub replay writes nothing at
/// all (the redelivery comes back signed through the receiver).
#[tokio::test]
async fn no_path_records_a_ledger_row_without_a_verified_signature_or_an_authenticated_read() {
    // Replay with a credential the provider refuses.
    let (stripe, _) = stripe_fake(stripe_events(20)).await;
    let paddle_fixture = PaddleEvents::new(PADDLE_KEY, vec![paddle_event(1, now_unix() - 600)], 10);
    let answer = paddle_fixture.clone();
    let paddle = serve_fixture(
        move |r| answer.answer(r),
        Some(paddle_fixture.base_url.clone()),
    )
    .await
    .unwrap();
    let github_fixture = GithubDeliveries::new(
        "/repos/acme/shop/hooks/7",
        GithubAuth::Token(GITHUB_TOKEN.to_owned()),
        vec![delivery(1, &guid(1), now_unix() - 600, false)],
        10,
    );
    let answer = github_fixture.clone();
    let github_api = serve_fixture(
        move |r| answer.answer(r),
        Some(github_fixture.base_url.clone()),
    )
    .await
    .unwrap();
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[
            (
                "stripe",
                json!({"api_key": "rk_wrong", "api_base_url": stripe.base_url}),
            ),
            (
                "paddle",
                json!({"api_key": "pdl_wrong", "api_base_url": paddle.base_url}),
            ),
            (
                "github",
                json!({"api_key": GITHUB_TOKEN, "api_base_url": github_api.base_url,
                       "github_hook": {"repository": "acme/shop", "hook_id": 7}}),
            ),
        ]),
    );
    for source in ["stripe", "paddle"] {
        let error = replayer()
            .run(
                app.receiver(),
                &request(source, now_unix() - 3_600),
                plenty_left,
                |_: &ReplayReport| {},
            )
            .await
            .unwrap_err();
        assert!(
            matches!(*error.kind, ReplayErrorKind::Unauthorized { .. }),
            "{source}: {error}"
        );
    }
    assert_eq!(app.ledger_rows().await, 0);
    // GitHub: the missing delivery is asked for, and no row is written by replay.
    let report = replayer()
        .run(
            app.receiver(),
            &request("github", now_unix() - 3_600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!(report.redelivered, 1);
    assert_eq!(app.ledger_rows().await, 0);
    // The redelivery arrives signed with the wrong secret: refused, still no row.
    let mut forged = github(&guid(1), "issues", r#"{"action":"opened"}"#);
    forged.body = br#"{"action":"closed"}"#.to_vec();
    assert_eq!(app.receive("github", &forged).await.status, 401);
    assert_eq!(app.ledger_rows().await, 0);
    // Signed correctly, it is claimed once.
    let signed = github(&guid(1), "issues", r#"{"action":"opened"}"#);
    assert_eq!(app.receive("github", &signed).await.status, 200);
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn the_replay_function_takes_a_replay_a_redrive_or_an_inspect_and_refuses_anything_else() {
    let events = stripe_events(4);
    let (server, _) = stripe_fake(events.clone()).await;
    let app = stripe_app(&server, STRIPE_KEY).await;
    let state = ::replay::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    )
    .unwrap();
    let since = at(now_unix() - 7_200);

    let report = ::replay::handler::handle(
        &state,
        json!({"source": "stripe", "since": since, "dry_run": false}),
        plenty_left,
    )
    .await
    .unwrap();
    assert_eq!(
        report,
        json!({"fetched": 4, "new": 4, "duplicates": 0, "redelivered": 0, "failed": 0,
               "next_cursor": null})
    );
    assert_eq!(app.order_rows().await, 4);

    let detail = ::replay::handler::handle(
        &state,
        json!({"source": "stripe", "inspect": "evt_000002"}),
        plenty_left,
    )
    .await
    .unwrap();
    assert_eq!(detail["status"], "completed");
    assert_eq!(detail["replayed"], true);

    seed(&app, "stripe", &["evt_dead_1".to_owned()], "dead").await;
    let redrive = ::replay::handler::handle(
        &state,
        json!({"source": "stripe", "redrive": {"status": "dead",
               "event_ids": ["evt_dead_1", "evt_nope"]}, "dry_run": true}),
        plenty_left,
    )
    .await
    .unwrap();
    assert_eq!(redrive["matched"], 0, "{redrive}");
    assert_eq!(
        redrive["no_payload_ids"],
        json!(["evt_dead_1"]),
        "{redrive}"
    );
    assert_eq!(redrive["not_found"], json!(["evt_nope"]), "{redrive}");

    // Through the Lambda entry point with its deadline.
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + Duration::from_secs(300))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let again = ::replay::handler::function_handler(
        &state,
        lambda_runtime::LambdaEvent::new(json!({"source": "stripe", "since": since}), context),
    )
    .await
    .unwrap();
    assert_eq!(
        (again["new"].clone(), again["duplicates"].clone()),
        (json!(0), json!(4))
    );

    // The example inputs in events/replay/ (for `cargo lambda invoke replay --data-file`).
    for name in ["stripe-window.json", "redrive-dead.json", "inspect.json"] {
        let input = hookledger_tests::EventFile::load(&format!("replay/{name}"))
            .unwrap()
            .json;
        ::replay::handler::Input::parse(input).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (input, expected) in [
        (json!({"source": "stripe"}), "since"),
        (
            json!({"source": "stripe", "since": since, "limit": 5}),
            "limit",
        ),
        (
            json!({"source": "stripe", "redrive": {"status": "alive"}}),
            "alive",
        ),
        (json!("replay everything"), "JSON object"),
        (
            json!({"source": "stripe", "since": "last tuesday"}),
            "RFC 3339",
        ),
    ] {
        let error = ::replay::handler::handle(&state, input.clone(), plenty_left)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{input}: {error}");
    }
    // A failed replay's error carries how far it got.
    let error = ::replay::handler::handle(
        &state,
        json!({"source": "stripe", "since": at(now_unix() - 40 * 86_400)}),
        plenty_left,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("report so far"), "{error}");
}

#[tokio::test]
async fn a_providers_retry_after_a_replay_is_answered_from_the_ledger_not_409() {
    let event = stripe_event(1, now_unix() - 60);
    let fixture = StripeEvents::new(STRIPE_KEY, vec![event.clone()]);
    let answer = fixture.clone();
    // Stripe pretty-prints its API answers, as it does its webhook bodies.
    let server = serve_fixture(
        move |r| {
            let mut a = answer.answer(r);
            if a.status == 200 {
                let v: Value = serde_json::from_slice(&a.body).unwrap();
                a.body = serde_json::to_vec_pretty(&v).unwrap();
            }
            a
        },
        None,
    )
    .await
    .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let report = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 7_200),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!(report.new, 1, "{report:?}");
    // Stripe's own (pending) retry of the missed delivery arrives after the replay.
    let body = serde_json::to_vec_pretty(&event).unwrap();
    let reply = app.receive("stripe", &stripe_body(body, NOW)).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[tokio::test]
async fn a_stripe_page_that_never_advances_stops_the_run_instead_of_looping() {
    let events = stripe_events(3);
    let page = json!({"object": "list", "url": "/v1/events", "has_more": true, "data": events});
    let server = FakeServer::start(move |_r| Answer::json(200, &page))
        .await
        .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let replayer = replayer();
    let request = request("stripe", now_unix() - 7_200);
    let run = replayer.run(
        app.receiver(),
        &request,
        || Duration::from_secs(u64::from(u32::MAX)),
        |_: &ReplayReport| {},
    );
    let outcome = tokio::time::timeout(Duration::from_secs(5), run).await;
    let gets = server.requests_with("GET");
    let same = gets
        .iter()
        .filter(|g| g.param("starting_after") == Some("evt_000002"))
        .count();
    assert!(
        outcome.is_ok(),
        "still running after 5 s: {} pages fetched, {same} with the same starting_after",
        gets.len()
    );
}

#[tokio::test]
async fn a_stripe_event_outside_the_window_is_skipped_and_an_expired_key_never_runs_again() {
    // The API answers an event 60 days old (outside the window, beyond the look-back).
    let old = stripe_event(7, now_unix() - 60 * 86_400);
    let page = json!({"object": "list", "url": "/v1/events", "has_more": false, "data": [old]});
    let server = FakeServer::start(move |_r| Answer::json(200, &page))
        .await
        .unwrap();
    let app = stripe_app(&server, STRIPE_KEY).await;
    let client = app.db.connect().await.unwrap();
    // Processed 60 days ago, past the 30-day retention, not swept yet.
    client
        .execute(
            "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status,
                 completed_at, response_status, response_body, claimed_at)
             VALUES ('stripe', 'evt_000007', 'payment_intent.succeeded', sha256('x'::bytea),
                 'completed', now() - interval '60 days', 200, '{\"ok\": true}'::jsonb,
                 now() - interval '60 days')",
            &[],
        )
        .await
        .unwrap();
    let report = replayer()
        .run(
            app.receiver(),
            &request("stripe", now_unix() - 3_600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    let orders = app.order_rows().await;
    assert_eq!(
        (report.fetched, orders),
        (0, 0),
        "an event created 60 days before `since` was replayed: {report:?}, orders {orders}"
    );
}

async fn github_app_over(server: &FakeServer) -> TestApp {
    let mut app = spawn_app().await;
    use_sources(
        &mut app,
        &sources_with(&[(
            "github",
            json!({"api_key": GITHUB_TOKEN, "api_base_url": server.base_url,
                   "github_hook": {"repository": "acme/shop", "hook_id": 7}}),
        )]),
    );
    app
}

#[tokio::test]
async fn a_github_link_back_to_a_page_already_read_stops_the_run_instead_of_looping() {
    let page = Value::Array(vec![delivery(10, &guid(1), now_unix() - 100, false)]);
    let server = FakeServer::start(move |r| {
        let base = format!(
            "http://{}/repos/acme/shop/hooks/7/deliveries?per_page=100&cursor=same",
            r.header("host").unwrap_or("")
        );
        Answer::json(200, &page).with_header("link", &format!("<{base}>; rel=\"next\""))
    })
    .await
    .unwrap();
    let app = github_app_over(&server).await;
    let replayer = replayer();
    let mut req = request("github", now_unix() - 3_600);
    req.dry_run = true;
    let run = replayer.run(
        app.receiver(),
        &req,
        || Duration::from_secs(u64::from(u32::MAX)),
        |_: &ReplayReport| {},
    );
    let outcome = tokio::time::timeout(Duration::from_secs(5), run).await;
    assert!(
        outcome.is_ok(),
        "still running after 5 s: {} identical pages fetched",
        server.requests_with("GET").len()
    );
}

#[tokio::test]
async fn a_redelivery_request_answered_502_is_not_sent_twice() {
    let page = Value::Array(vec![delivery(10, &guid(1), now_unix() - 100, false)]);
    let posts = Arc::new(AtomicUsize::new(0));
    let counter = posts.clone();
    let server = FakeServer::start(move |r| {
        if r.method == "POST" {
            // GitHub accepted it (the redelivery goes out) but the answer is lost / 502.
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                return Answer::json(502, &json!({"message": "Server Error"}));
            }
            return Answer::json(202, &json!({}));
        }
        Answer::json(200, &page)
    })
    .await
    .unwrap();
    let app = github_app_over(&server).await;
    let report = replayer()
        .run(
            app.receiver(),
            &request("github", now_unix() - 3_600),
            plenty_left,
            |_: &ReplayReport| {},
        )
        .await
        .unwrap();
    assert_eq!(
        server.requests_with("POST").len(),
        1,
        "POST .../attempts sent more than once for one delivery: {report:?}"
    );
}
