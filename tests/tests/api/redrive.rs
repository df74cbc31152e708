//! Re-drive of dead letters, re-run of ignored events and inspect (`shared::redrive`), on real
//! PostgreSQL with the worker run in-process: every moved row is run once by the worker, a row
//! that cannot run is refused, and no path here ever records a ledger row.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shared::doorbell::Doorbell;
use shared::ledger::Tx;
use shared::redrive::{RedriveError, RedriveReport, RedriveSpec, Selection, Which, BATCH};
use shared::Outcome;
use shared::Sources;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::{Handler, Registry},
};

use crate::helpers::*;

/// Counts calls; fails (retryably, or fatally with `fatal`) while `failing`; records the order
/// otherwise.
#[derive(Default)]
struct Broken {
    calls: AtomicUsize,
    failing: AtomicBool,
    fatal: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for Broken {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(if self.fatal.load(Ordering::SeqCst) {
                HandlerError::fatal("handler bug: metadata.order_id missing")
            } else {
                HandlerError::retryable("downstream answered 502".to_owned())
            });
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

fn dead_ids(ids: &[&str]) -> Selection {
    RedriveSpec {
        status: Which::Dead,
        event_ids: Some(ids.iter().map(|id| id.to_string()).collect()),
        event_type: None,
        since: None,
        until: None,
        outbox: false,
    }
    .selection()
    .unwrap()
}

fn dead_between(since: &str, until: Option<&str>) -> Selection {
    RedriveSpec {
        status: Which::Dead,
        event_ids: None,
        event_type: None,
        since: Some(since.to_owned()),
        until: until.map(str::to_owned),
        outbox: false,
    }
    .selection()
    .unwrap()
}

fn ignored_since(event_type: &str, since: SystemTime) -> Selection {
    Selection::IgnoredBetween {
        event_type: event_type.to_owned(),
        since,
        until: None,
    }
}

/// `shared::redrive::run` as the CLI runs it (no deadline), with the example handlers.
async fn redrive(
    app: &TestApp,
    source: &str,
    selection: &Selection,
    dry_run: bool,
) -> Result<RedriveReport, RedriveError> {
    redrive_with(
        app,
        &handlers::examples::registry(&app.settings.sources),
        source,
        selection,
        dry_run,
    )
    .await
}

async fn redrive_with(
    app: &TestApp,
    handlers: &Registry,
    source: &str,
    selection: &Selection,
    dry_run: bool,
) -> Result<RedriveReport, RedriveError> {
    shared::redrive::run(
        &app.receiver().pool,
        &app.settings.sources,
        handlers,
        &Doorbell::off(),
        source,
        selection,
        dry_run,
        plenty,
        |_| {},
    )
    .await
}

async fn drain(worker: &worker::handler::AppState) -> shared::work::Summary {
    // Re-driven rows are due at the database's now: a drain a little later takes them.
    let at = SystemTime::now() + Duration::from_secs(5);
    worker.worker.drain(move || at, plenty).await.unwrap()
}

/// A snapshot of every ledger row, to show a dry run or a refusal wrote nothing.
async fn ledger_text(app: &TestApp) -> String {
    let client = app.db.connect().await.unwrap();
    client
        .query_one(
            "SELECT coalesce(string_agg(e::text, '|' ORDER BY source, event_id), '')
             FROM webhook_event e",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn history(app: &TestApp, event_id: &str) -> serde_json::Value {
    let client = app.db.connect().await.unwrap();
    let value: Option<serde_json::Value> = client
        .query_one(
            "SELECT history FROM webhook_event WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get(0);
    value.unwrap_or(serde_json::Value::Null)
}

/// `rows` dead letters of `stripe-deferred` named `{prefix}{i}`, gone dead one second apart from
/// `first_dead_at` (SQL, e.g. `timestamptz '2020-01-01 00:00:00Z'`), with payloads.
async fn seed_dead(app: &TestApp, prefix: &str, rows: i32, first_dead_at: &str) {
    let client = app.db.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, payload, status, attempts,
                  last_error, claimed_at, dead_at)
             SELECT 'stripe-deferred', '{prefix}' || i, 'payment_intent.succeeded',
                    sha256(convert_to('{prefix}' || i, 'UTF8')), convert_to('{{}}', 'UTF8'),
                    'dead', 8, 'downstream answered 502', {first_dead_at} - interval '1 hour',
                    {first_dead_at} + i * interval '1 second'
             FROM generate_series(0, {rows} - 1) AS i"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_dead_deferred_event_is_redriven_with_its_history_and_the_worker_completes_it_once() {
    let mut app = spawn_app().await;
    with_max_attempts(&mut app, 2);
    let mut worker = worker_for(&app);
    let handler = Arc::new(Broken::default());
    handler.failing.store(true, Ordering::SeqCst);
    worker.worker.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = deferred(payment_intent_body("evt_dead", "ord_dead", 5));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
    let mut at = SystemTime::now();
    for _ in 0..2 {
        worker.worker.drain(move || at, plenty).await.unwrap();
        at += Duration::from_secs(2 * 3600);
    }
    assert_eq!(row(&app, "evt_dead").await.0, "dead");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 2);

    let report = redrive(&app, "stripe-deferred", &dead_ids(&["evt_dead"]), false)
        .await
        .unwrap();
    assert_eq!((report.matched, report.redriven), (1, 1), "{report:?}");
    assert!(report.complete);
    let (status, attempts, error) = row(&app, "evt_dead").await;
    assert_eq!((status.as_str(), attempts, error), ("claimed", 0, None));
    let entries = history(&app, "evt_dead").await;
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["action"], "redrive");
    assert_eq!(entries[0]["status"], "dead");
    assert_eq!(entries[0]["attempts"], 2);
    assert!(
        entries[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("downstream answered 502"),
        "{entries}"
    );
    assert!(entries[0]["dead_at"].is_string(), "{entries}");

    // The cause is fixed: the worker runs it once more, and it completes.
    handler.failing.store(false, Ordering::SeqCst);
    let summary = drain(&worker).await;
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    assert_eq!(row(&app, "evt_dead").await.0, "completed");
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3);

    // A second re-drive of the same id does nothing: it is not dead.
    let again = redrive(&app, "stripe-deferred", &dead_ids(&["evt_dead"]), false)
        .await
        .unwrap();
    assert_eq!((again.matched, again.redriven), (0, 0));
    assert_eq!(again.not_dead, ["evt_dead"]);
    assert_eq!(drain(&worker).await.leased, 0);
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_inline_fatal_dead_letter_is_redriven_and_the_worker_completes_it_once_fixed() {
    let mut app = spawn_app().await;
    let handler = Arc::new(Broken::default());
    handler.failing.store(true, Ordering::SeqCst);
    handler.fatal.store(true, Ordering::SeqCst);
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_fatal", "ord_fatal", 7, NOW);
    let reply = app.receive("stripe", &delivery).await;
    assert_eq!((reply.status, reply.outcome), (200, Outcome::Dead));
    let (status, attempts, error) = row(&app, "evt_fatal").await;
    assert_eq!((status.as_str(), attempts), ("dead", 1));
    assert!(error.unwrap().contains("metadata.order_id missing"));

    let report = redrive(&app, "stripe", &dead_ids(&["evt_fatal"]), false)
        .await
        .unwrap();
    assert_eq!(report.redriven, 1, "{report:?}");
    let entries = history(&app, "evt_fatal").await;
    assert!(
        entries[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("metadata.order_id missing"),
        "{entries}"
    );
    // The answer the provider was given while it was dead is kept too.
    assert_eq!(entries[0]["response"]["status"], "dead", "{entries}");
    // The fixed handler is the worker's (the example one).
    let worker = worker_for(&app);
    let summary = drain(&worker).await;
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(row(&app, "evt_fatal").await.0, "completed");
    assert_eq!(app.order_rows().await, 1);
    // The provider's next retry is answered from the stored response; nothing runs again.
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        (retry.status, retry.outcome),
        (200, Outcome::Replayed),
        "{retry:?}"
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(drain(&worker).await.leased, 0);
}

#[tokio::test]
async fn a_dead_letter_without_a_payload_is_refused_and_nothing_moves() {
    let mut app = spawn_app().await;
    let json = format!(
        r#"[{{"name": "lean", "scheme": "stripe", "secrets": ["{STRIPE_SECRET}"],
              "store_payload": false}}]"#
    );
    app.settings.sources = Sources::from_json(&json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    );
    let handler = Arc::new(Broken::default());
    handler.failing.store(true, Ordering::SeqCst);
    handler.fatal.store(true, Ordering::SeqCst);
    app.state.receiver.handlers.register(
        "lean",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let reply = app
        .receive("lean", &stripe_payment("evt_lean", "ord_lean", 3, NOW))
        .await;
    assert_eq!(reply.outcome, Outcome::Dead);
    let before = ledger_text(&app).await;

    let report = redrive(&app, "lean", &dead_ids(&["evt_lean"]), false)
        .await
        .unwrap();
    assert_eq!(report.no_payload_ids, ["evt_lean"]);
    assert_eq!(
        (report.matched, report.redriven, report.no_payload),
        (0, 0, 1)
    );
    let report = redrive(
        &app,
        "lean",
        &dead_between("2000-01-01T00:00:00Z", None),
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        (report.matched, report.redriven, report.no_payload),
        (0, 0, 1)
    );
    assert_eq!(ledger_text(&app).await, before, "nothing moved");
    assert_eq!(row(&app, "evt_lean").await.0, "dead");
}

#[tokio::test]
async fn a_window_redrive_moves_exactly_the_rows_that_died_in_it_in_batches() {
    let app = spawn_app().await;
    let in_window = 2 * BATCH as i32 + 100;
    // 2020-01-01 00:00:00 to 00:18:19 (one a second), the window's both edges included: the
    // first at `since` (in), one at `until` (out).
    seed_dead(
        &app,
        "evt_in_",
        in_window,
        "timestamptz '2020-01-01 00:00:00Z'",
    )
    .await;
    seed_dead(
        &app,
        "evt_before_",
        40,
        "timestamptz '2019-12-31 23:00:00Z'",
    )
    .await;
    seed_dead(&app, "evt_after_", 40, "timestamptz '2020-01-01 00:18:20Z'").await;
    let selection = dead_between("2020-01-01T00:00:00Z", Some("2020-01-01T00:18:20Z"));
    let mut batches = Vec::new();
    let report = shared::redrive::run(
        &app.receiver().pool,
        &app.settings.sources,
        &Registry::new(),
        &Doorbell::off(),
        "stripe-deferred",
        &selection,
        false,
        plenty,
        |report| batches.push(report.redriven),
    )
    .await
    .unwrap();
    let n = in_window as u64;
    assert_eq!((report.matched, report.redriven), (n, n), "{report:?}");
    assert!(report.complete);
    assert_eq!(
        batches,
        [BATCH as u64, 2 * BATCH as u64, n],
        "one call per batch"
    );
    let moved = app
        .texts(
            "SELECT DISTINCT split_part(event_id, '_', 2) || '/' || status::text
             FROM webhook_event ORDER BY 1",
        )
        .await;
    assert_eq!(moved, ["after/dead", "before/dead", "in/claimed"]);
    let again = redrive(&app, "stripe-deferred", &selection, false)
        .await
        .unwrap();
    assert_eq!((again.matched, again.redriven), (0, 0));
}

#[tokio::test]
async fn a_window_redrive_out_of_time_stops_early_and_the_next_run_finishes() {
    let app = spawn_app().await;
    let rows = BATCH as i32 + 100;
    seed_dead(&app, "evt_", rows, "timestamptz '2020-01-01 00:00:00Z'").await;
    let selection = dead_between("2020-01-01T00:00:00Z", None);
    // Time for one batch only.
    let checks = Cell::new(0);
    let remaining = || {
        checks.set(checks.get() + 1);
        if checks.get() == 1 {
            plenty()
        } else {
            Duration::from_millis(shared::redrive::MARGIN_MS - 1)
        }
    };
    let first = shared::redrive::run(
        &app.receiver().pool,
        &app.settings.sources,
        &Registry::new(),
        &Doorbell::off(),
        "stripe-deferred",
        &selection,
        false,
        remaining,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!((first.matched, first.redriven), (rows as u64, BATCH as u64));
    assert!(!first.complete, "{first:?}");
    let second = redrive(&app, "stripe-deferred", &selection, false)
        .await
        .unwrap();
    assert_eq!((second.matched, second.redriven), (100, 100), "{second:?}");
    assert!(second.complete);
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'claimed'")
            .await,
        i64::from(rows)
    );
    assert_eq!(
        app.count("SELECT max(jsonb_array_length(history))::int8 FROM webhook_event")
            .await,
        1,
        "no row moved twice"
    );
}

/// Regression: a window ending in the future took, in the same run, rows the run itself had
/// re-driven and that went dead again meanwhile (a handler still failing fatally), for as long
/// as the worker kept killing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_redrive_never_takes_a_row_twice_when_it_dies_again_during_the_run() {
    let app = spawn_app().await;
    let rows = BATCH as i32 + 100;
    seed_dead(&app, "evt_", rows, "timestamptz '2020-01-01 00:00:00Z'").await;
    let selection = dead_between("2020-01-01T00:00:00Z", Some("2100-01-01T00:00:00Z"));
    let client = app.db.connect().await.unwrap();
    let handle = tokio::runtime::Handle::current();
    let mut batches = 0;
    let report = shared::redrive::run(
        &app.receiver().pool,
        &app.settings.sources,
        &Registry::new(),
        &Doorbell::off(),
        "stripe-deferred",
        &selection,
        false,
        plenty,
        |_| {
            batches += 1;
            if batches == 1 {
                // The worker takes the first batch and its handler kills every one again.
                tokio::task::block_in_place(|| {
                    handle.block_on(client.batch_execute(
                        "UPDATE webhook_event
                         SET status = 'dead', dead_at = now(), attempts = 1,
                             last_error = 'still broken', next_attempt_at = NULL
                         WHERE status = 'claimed'",
                    ))
                })
                .unwrap();
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(report.redriven, rows as u64, "{report:?}");
    assert_eq!(
        app.count("SELECT max(jsonb_array_length(history))::int8 FROM webhook_event")
            .await,
        1,
        "a row was re-driven twice in one run"
    );
    // The next run takes the ones that died again.
    let next = redrive(&app, "stripe-deferred", &selection, false)
        .await
        .unwrap();
    assert_eq!(next.redriven, BATCH as u64);
}

#[tokio::test]
async fn ignored_events_are_rerun_once_each_after_a_handler_exists() {
    let mut app = spawn_app().await;
    // Delivered before the handlers existed: completed as ignored.
    app.state.receiver.handlers = Registry::new();
    for i in 0..3 {
        let delivery = stripe_payment(&format!("evt_ign_{i}"), &format!("ord_ign_{i}"), 9, NOW);
        assert_eq!(app.receive("stripe", &delivery).await.status, 200);
    }
    let other = serde_json::to_vec(&serde_json::json!({
        "id": "evt_other", "object": "event", "created": NOW - 1, "type": "invoice.paid",
        "data": {"object": {"id": "in_1"}}
    }))
    .unwrap();
    assert_eq!(
        app.receive("stripe", &stripe_body(other, NOW)).await.status,
        200
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_event
             WHERE status = 'completed' AND response_body ->> 'status' = 'ignored'"
        )
        .await,
        4
    );
    assert_eq!(app.order_rows().await, 0);
    let since = SystemTime::now() - Duration::from_secs(3600);
    let selection = ignored_since("payment_intent.succeeded", since);

    // Still no handler for the type: refused, nothing moves.
    let before = ledger_text(&app).await;
    let refused = redrive_with(&app, &Registry::new(), "stripe", &selection, false).await;
    assert!(
        matches!(refused, Err(RedriveError::NoHandler { .. })),
        "{refused:?}"
    );
    assert_eq!(ledger_text(&app).await, before);

    let report = redrive(&app, "stripe", &selection, false).await.unwrap();
    assert_eq!((report.matched, report.redriven), (3, 3), "{report:?}");
    assert_eq!(report.status, "ignored");
    let entries = history(&app, "evt_ign_0").await;
    assert_eq!(entries[0]["action"], "rerun_ignored");
    assert_eq!(entries[0]["response"]["status"], "ignored");
    let worker = worker_for(&app);
    let summary = drain(&worker).await;
    assert_eq!(summary.completed, 3, "{summary:?}");
    assert_eq!(app.order_rows().await, 3);
    // Once each: a second run finds nothing, and the other type was never touched.
    let again = redrive(&app, "stripe", &selection, false).await.unwrap();
    assert_eq!((again.matched, again.redriven), (0, 0));
    assert_eq!(drain(&worker).await.leased, 0);
    assert_eq!(app.order_rows().await, 3);
    assert_eq!(
        history(&app, "evt_other").await,
        serde_json::Value::Null,
        "another type is not re-run"
    );
}

#[tokio::test]
async fn a_dry_run_counts_and_writes_nothing() {
    let mut app = spawn_app().await;
    seed_dead(&app, "evt_dead_", 3, "timestamptz '2020-01-01 00:00:00Z'").await;
    app.state.receiver.handlers = Registry::new();
    let delivery = stripe_payment("evt_ignored", "ord_ignored", 9, NOW);
    app.receive("stripe", &delivery).await;
    let before = ledger_text(&app).await;
    let by_ids = redrive(
        &app,
        "stripe-deferred",
        &dead_ids(&["evt_dead_0", "evt_dead_1", "evt_none"]),
        true,
    )
    .await
    .unwrap();
    assert!(by_ids.dry_run);
    assert_eq!((by_ids.matched, by_ids.redriven), (2, 0));
    assert_eq!(by_ids.not_found, ["evt_none"]);
    // A dry run names what would move, so the operator can inspect it first.
    assert_eq!(by_ids.event_ids, ["evt_dead_0", "evt_dead_1"]);
    let window = redrive(
        &app,
        "stripe-deferred",
        &dead_between("2020-01-01T00:00:00Z", None),
        true,
    )
    .await
    .unwrap();
    assert_eq!((window.matched, window.redriven), (3, 0));
    let mut listed = window.event_ids.clone();
    listed.sort();
    assert_eq!(listed, ["evt_dead_0", "evt_dead_1", "evt_dead_2"]);
    let ignored = redrive(
        &app,
        "stripe",
        &ignored_since(
            "payment_intent.succeeded",
            SystemTime::now() - Duration::from_secs(3600),
        ),
        true,
    )
    .await
    .unwrap();
    assert_eq!((ignored.matched, ignored.redriven), (1, 0));
    assert_eq!(ignored.event_ids, ["evt_ignored"]);
    assert_eq!(ledger_text(&app).await, before);
}

#[tokio::test]
async fn inspect_shows_status_attempts_error_history_and_replayed_at() {
    let app = spawn_app().await;
    seed_dead(&app, "evt_", 1, "timestamptz '2020-01-01 00:00:00Z'").await;
    let pool = &app.receiver().pool;
    let dead = shared::redrive::inspect(pool, "stripe-deferred", "evt_0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dead.status.as_str(), "dead");
    assert_eq!(dead.attempts, 8);
    assert_eq!(dead.last_error.as_deref(), Some("downstream answered 502"));
    assert_eq!(
        dead.dead_at.map(shared::timestamp::rfc3339).as_deref(),
        Some("2020-01-01T00:00:00Z")
    );
    assert_eq!(dead.history, serde_json::json!([]));
    assert_eq!(dead.replayed_at, None);
    assert_eq!(dead.payload_bytes, Some(2));

    redrive(&app, "stripe-deferred", &dead_ids(&["evt_0"]), false)
        .await
        .unwrap();
    let moved = shared::redrive::inspect(pool, "stripe-deferred", "evt_0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((moved.status.as_str(), moved.attempts), ("claimed", 0));
    assert_eq!(moved.last_error, None);
    assert_eq!(moved.dead_at, None);
    assert!(moved.next_attempt_at.is_some());
    assert_eq!(moved.history[0]["attempts"], 8);
    assert_eq!(moved.history[0]["last_error"], "downstream answered 502");

    // A row replay created carries replayed_at.
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, completed_at,
                  response_status, response_body, replayed_at)
             VALUES ('stripe', 'evt_replayed', 't', sha256('x'::bytea), 'completed', now(),
                     200, '{\"status\": \"ok\"}', now())",
        )
        .await
        .unwrap();
    let replayed = shared::redrive::inspect(pool, "stripe", "evt_replayed")
        .await
        .unwrap()
        .unwrap();
    assert!(replayed.replayed_at.is_some());
    assert_eq!(replayed.response_status, Some(200));
    assert_eq!(
        replayed.response_body,
        Some(serde_json::json!({"status": "ok"}))
    );
    assert_eq!(replayed.payload_bytes, None);
    assert!(shared::redrive::inspect(pool, "stripe", "evt_absent")
        .await
        .unwrap()
        .is_none());
}

/// The rule "no path records a ledger row without a verified signature or an authenticated
/// provider API read", for this entry point: re-drive and re-run only update rows that exist.
#[tokio::test]
async fn redrive_never_creates_a_ledger_row() {
    let app = spawn_app().await;
    let report = redrive(
        &app,
        "stripe-deferred",
        &dead_ids(&["evt_unknown", "evt_unknown_2"]),
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.not_found, ["evt_unknown", "evt_unknown_2"]);
    redrive(
        &app,
        "stripe-deferred",
        &dead_between("2000-01-01T00:00:00Z", None),
        false,
    )
    .await
    .unwrap();
    redrive(
        &app,
        "stripe",
        &ignored_since("payment_intent.succeeded", SystemTime::UNIX_EPOCH),
        false,
    )
    .await
    .unwrap();
    let unknown = redrive(&app, "nowhere", &dead_ids(&["evt_unknown"]), false).await;
    assert!(
        matches!(unknown, Err(RedriveError::UnknownSource(_))),
        "{unknown:?}"
    );
    assert_eq!(app.ledger_rows().await, 0);
}

/// A real handler that records the order and answers `{"status": "ignored", ...}` (e.g. "we
/// ignore orders below a threshold, but log them").
#[derive(Default)]
struct SaysIgnored {
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for SaysIgnored {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        static INSERT: shared::db::Sql = shared::db::Sql {
            text: "INSERT INTO handler_effects VALUES ($1)",
            types: &[tokio_postgres::types::Type::TEXT],
        };
        tx.execute(&INSERT, &[&event.event_id]).await?;
        Ok(Effect::ok(
            serde_json::json!({"status": "ignored", "reason": "below threshold"}),
        ))
    }
}

#[tokio::test]
async fn a_handler_that_answers_ignored_itself_is_never_rerun_as_ignored() {
    let mut app = spawn_app().await;
    app.db
        .connect()
        .await
        .unwrap()
        .execute("CREATE TABLE handler_effects (event_id text)", &[])
        .await
        .unwrap();
    let handler = Arc::new(SaysIgnored::default());
    let mut registry = Registry::new();
    registry.register("stripe", "payment_intent.succeeded", handler.clone());
    app.state.receiver.handlers = registry.clone();
    let delivery = stripe_payment("evt_real_1", "ord_real_1", 9, NOW);
    let reply = app.receive("stripe", &delivery).await;
    assert_eq!(reply.outcome, Outcome::Processed, "{reply:?}");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1);
    let since = SystemTime::now() - Duration::from_secs(3600);
    let report = redrive_with(
        &app,
        &registry,
        "stripe",
        &ignored_since("payment_intent.succeeded", since),
        false,
    )
    .await
    .unwrap();
    let mut worker = worker_for(&app);
    worker.worker.handlers = registry.clone();
    let _ = drain(&worker).await;
    let effects = app
        .count("SELECT count(*) FROM handler_effects WHERE event_id = 'evt_real_1'")
        .await;
    assert_eq!(
        (report.redriven, effects),
        (0, 1),
        "a processed event was re-run: {report:?}, handler calls {}",
        handler.calls.load(Ordering::SeqCst)
    );
}

/// Inserts `count` dead outbox messages of event `event_id` (n = 1..=count) for `source`, dead
/// at `dead_at` (RFC 3339), with 8 attempts and a last error.
async fn seed_dead_messages(
    app: &TestApp,
    source: &str,
    event_id: &str,
    count: i32,
    dead_at: &str,
) {
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, attempts, last_error, last_status, dead_at)
             SELECT $1, $2, n, 'invoice.paid', 'billing', '\\x7b7d', 'application/json',
                    'dead', 8, 'fatal: HTTP 400', 400, $4::text::timestamptz
             FROM generate_series(1, $3::int4) AS n",
            &[&source, &event_id, &count, &dead_at],
        )
        .await
        .unwrap();
}

fn outbox_spec(event_ids: Option<&[&str]>, since: Option<&str>) -> Selection {
    RedriveSpec {
        status: Which::Dead,
        event_ids: event_ids.map(|ids| ids.iter().map(|id| id.to_string()).collect()),
        event_type: None,
        since: since.map(str::to_owned),
        until: None,
        outbox: true,
    }
    .selection()
    .unwrap()
}

#[tokio::test]
async fn dead_outbox_messages_are_redriven_by_event_id_with_their_history_and_keys() {
    let app = spawn_app().await;
    seed_dead_messages(&app, "stripe", "evt_a", 2, "2026-11-30T10:00:00Z").await;
    seed_dead_messages(&app, "stripe", "evt_b", 1, "2026-11-30T10:00:00Z").await;
    let client = app.db.connect().await.unwrap();
    // evt_c has a message that was delivered: not dead, left alone.
    client
        .execute(
            "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, delivered_at)
             VALUES ('stripe', 'evt_c', 1, 'invoice.paid', 'billing', '\\x7b7d',
                     'application/json', 'delivered', now())",
            &[],
        )
        .await
        .unwrap();

    let selection = outbox_spec(Some(&["evt_a", "evt_c", "evt_missing"]), None);
    let dry = redrive(&app, "stripe", &selection, true).await.unwrap();
    assert_eq!(
        (dry.status.as_str(), dry.matched, dry.redriven),
        ("outbox", 2, 0)
    );
    assert_eq!(dry.idempotency_keys, ["stripe:evt_a:1", "stripe:evt_a:2"]);
    assert!(dry.event_ids.is_empty());
    let pending = "SELECT count(*) FROM outbox WHERE status = 'pending'";
    assert_eq!(app.count(pending).await, 0, "a dry run writes nothing");

    let report = redrive(&app, "stripe", &selection, false).await.unwrap();
    assert_eq!((report.matched, report.redriven), (2, 2));
    assert_eq!(
        report.idempotency_keys,
        ["stripe:evt_a:1", "stripe:evt_a:2"]
    );
    assert_eq!(report.not_dead, ["evt_c"]);
    assert_eq!(report.not_found, ["evt_missing"]);
    assert!(report.complete);
    let rows = client
        .query(
            "SELECT n, status::text, attempts, dead_at IS NULL, next_attempt_at <= now(), history
             FROM outbox WHERE source = 'stripe' AND event_id = 'evt_a' ORDER BY n",
            &[],
        )
        .await
        .unwrap();
    for row in &rows {
        assert_eq!(row.get::<_, String>(1), "pending");
        assert_eq!(row.get::<_, i32>(2), 0, "attempts start again");
        assert!(row.get::<_, bool>(3) && row.get::<_, bool>(4));
        let history: serde_json::Value = row.get(5);
        assert_eq!(history[0]["action"], "redrive");
        assert_eq!(history[0]["attempts"], 8);
        assert_eq!(history[0]["last_status"], 400);
        assert_eq!(history[0]["last_error"], "fatal: HTTP 400");
    }
    // evt_b was not named: still dead. A second run moves nothing more.
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE status = 'dead'")
            .await,
        1
    );
    let again = redrive(&app, "stripe", &selection, false).await.unwrap();
    assert_eq!((again.matched, again.redriven), (0, 0));
    // The events themselves are untouched: there are none in the ledger.
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn an_outbox_window_redrive_moves_exactly_what_died_in_it_in_batches() {
    let app = spawn_app().await;
    // 1,200 messages dead in the window (three batches of 500), 3 before it.
    for i in 0..12 {
        seed_dead_messages(
            &app,
            "stripe",
            &format!("evt_w{i}"),
            100,
            "2026-11-30T10:00:00Z",
        )
        .await;
    }
    seed_dead_messages(&app, "stripe", "evt_old", 3, "2026-11-01T10:00:00Z").await;
    let mut batches = Vec::new();
    let report = shared::redrive::run(
        &app.receiver().pool,
        &app.settings.sources,
        &Registry::new(),
        &Doorbell::off(),
        "stripe",
        &outbox_spec(None, Some("2026-11-30T00:00:00Z")),
        false,
        plenty,
        |report| batches.push(report.redriven),
    )
    .await
    .unwrap();
    assert_eq!((report.matched, report.redriven), (1200, 1200));
    assert_eq!(batches, [500, 1000, 1200]);
    assert_eq!(report.idempotency_keys.len(), shared::redrive::LISTED_IDS);
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE status = 'pending'")
            .await,
        1200
    );
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE status = 'dead' AND event_id = 'evt_old'")
            .await,
        3
    );
}

#[tokio::test]
async fn an_outbox_redrive_of_ignored_events_is_refused() {
    let spec = RedriveSpec {
        status: Which::Ignored,
        event_ids: None,
        event_type: Some("invoice.paid".to_owned()),
        since: Some("2026-11-30T00:00:00Z".to_owned()),
        until: None,
        outbox: true,
    };
    let error = spec.selection().unwrap_err().to_string();
    assert!(
        error.contains("outbox applies to status \"dead\" only"),
        "{error}"
    );
}

#[tokio::test]
async fn inspect_lists_the_events_outbox_messages_with_their_keys_and_errors() {
    let app = spawn_app().await;
    seed_dead(&app, "evt_i", 1, "timestamptz '2026-11-30 10:00:00Z'").await;
    seed_dead_messages(&app, "stripe-deferred", "evt_i0", 2, "2026-11-30T10:00:00Z").await;
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe-deferred", "evt_i0")
        .await
        .unwrap()
        .expect("the event");
    let keys: Vec<&str> = detail
        .outbox
        .iter()
        .map(|m| m.idempotency_key.as_str())
        .collect();
    assert_eq!(
        keys,
        ["stripe-deferred:evt_i0:1", "stripe-deferred:evt_i0:2"]
    );
    let json = detail.to_json();
    assert_eq!(json["outbox"][1]["status"], "dead");
    assert_eq!(json["outbox"][1]["last_status"], 400);
    assert_eq!(json["outbox"][1]["last_error"], "fatal: HTTP 400");
    assert_eq!(json["outbox"][0]["payload_bytes"], 2);
    assert_eq!(json["outbox"][0]["target"], "billing");
}
