//! The sweeper on real PostgreSQL, with an injected clock: which keys go (and which never do),
//! batches that commit one by one, why a run stops, the sweeper function and its metric, and
//! the rule that makes the sweep invisible to senders: a key past retention counts as absent,
//! so a late redelivery gets the same answer before and after the sweep.
//!
//! Rows the sweep judges are written with the claim times a test needs and swept at a fixed
//! `now`; where the receiver's own clock decides (a redelivery), rows are backdated with UPDATE.
//! Nothing sleeps for time to pass.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shared::config::{Sources, SweepSettings};
use shared::ledger::Tx;
use shared::sweep::{Stopped, Sweep, SweepReport};
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio_postgres::Client;

use crate::helpers::{
    capture_logs, deferred, gated, payment_intent_body, plenty, spawn_app, spawn_app_with,
    stripe_payment, wait_for_lock_waiter, worker_for, TestApp,
};

const DAY: u64 = 24 * 60 * 60;

/// The sweep's injected clock (the deliveries' `NOW`).
fn t() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(crate::helpers::NOW as u64)
}

/// `secs` seconds before [`t`].
fn before(secs: u64) -> SystemTime {
    t() - Duration::from_secs(secs)
}

/// No pause between batches (nor a duty cycle), no time margin: the bounds under test are set
/// per test.
fn settings(batch_size: i64, max_batches: u32) -> SweepSettings {
    SweepSettings {
        batch_size,
        max_batches,
        pause_ms: 0,
        duty_percent: 100,
        margin_ms: 0,
        ..SweepSettings::default()
    }
}

/// Inserts `n` ledger rows of `source`, ids `{prefix}1` to `{prefix}n`, with `status`, claimed
/// at `claimed_at` and (dead rows) dead at `dead_at`, satisfying every CHECK of the table.
async fn seed(
    client: &Client,
    source: &str,
    prefix: &str,
    status: &str,
    claimed_at: SystemTime,
    dead_at: Option<SystemTime>,
    n: i64,
) {
    client
        .execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, claimed_at, completed_at,
                  response_status, response_body, lease_expires_at, next_attempt_at, dead_at)
             SELECT $1::text, $2::text || g, 'test.event', sha256(($2::text || g)::bytea),
                    $3::text::event_status, $4::timestamptz,
                    CASE WHEN $3::text = 'completed' THEN $4::timestamptz END,
                    CASE WHEN $3::text = 'completed' THEN 200::smallint END,
                    CASE WHEN $3::text = 'completed' THEN '{\"ok\": true}'::jsonb END,
                    CASE WHEN $3::text = 'processing' THEN $4::timestamptz + interval '2 min' END,
                    CASE WHEN $3::text IN ('claimed', 'failed') THEN $4::timestamptz END,
                    $5::timestamptz
             FROM generate_series(1, $6::int8) AS g",
            &[&source, &prefix, &status, &claimed_at, &dead_at, &n],
        )
        .await
        .unwrap();
}

/// Every `source/event_id` left in the ledger.
async fn keys(client: &Client) -> BTreeSet<String> {
    client
        .query(
            "SELECT source || '/' || event_id FROM webhook_event ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

async fn count(client: &Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM webhook_event", &[])
        .await
        .unwrap()
        .get(0)
}

/// One sweep run on a connection of the app's pool at `now`.
async fn sweep_at(app: &TestApp, now: SystemTime, limits: &SweepSettings) -> SweepReport {
    let conn = app.receiver().pool.get().await.unwrap();
    shared::sweep::run(&conn, &app.settings.sources, limits, now, plenty)
        .await
        .unwrap()
}

/// `(source, id, status, claimed_at, dead_at, swept)`.
type SeededRow = (
    &'static str,
    &'static str,
    &'static str,
    SystemTime,
    Option<SystemTime>,
    bool,
);

#[tokio::test]
async fn the_sweep_deletes_exactly_the_expired_keys_of_each_source_and_nothing_else() {
    let mut app = spawn_app().await;
    // `stripe` keeps the defaults (30 d, dead 90 d), `shop` its own (7 d, dead 14 d); `gone`
    // has keys but is no longer configured: the defaults apply to it.
    app.settings.sources = Sources::from_json(
        r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["x"]},
            {"name": "shop", "scheme": "shopify", "secrets": ["y"],
             "retention_days": 7, "dead_retention_days": 14}]"#,
    )
    .unwrap();
    let client = app.db.connect().await.unwrap();
    let rows: &[SeededRow] = &[
        (
            "stripe",
            "inside",
            "completed",
            before(30 * DAY - 1),
            None,
            false,
        ),
        (
            "stripe",
            "at_cutoff",
            "completed",
            before(30 * DAY),
            None,
            false,
        ),
        (
            "stripe",
            "outside",
            "completed",
            before(30 * DAY + 1),
            None,
            true,
        ),
        // Unfinished work is never swept, however old.
        (
            "stripe",
            "claimed",
            "claimed",
            before(3650 * DAY),
            None,
            false,
        ),
        (
            "stripe",
            "processing",
            "processing",
            before(3650 * DAY),
            None,
            false,
        ),
        (
            "stripe",
            "failed",
            "failed",
            before(3650 * DAY),
            None,
            false,
        ),
        // Dead letters count from dead_at, against the dead-letter retention.
        (
            "stripe",
            "dead_inside",
            "dead",
            before(1000 * DAY),
            Some(before(90 * DAY - 1)),
            false,
        ),
        (
            "stripe",
            "dead_outside",
            "dead",
            before(1000 * DAY),
            Some(before(90 * DAY + 1)),
            true,
        ),
        (
            "shop",
            "inside",
            "completed",
            before(7 * DAY - 1),
            None,
            false,
        ),
        (
            "shop",
            "outside",
            "completed",
            before(7 * DAY + 1),
            None,
            true,
        ),
        (
            "shop",
            "dead_inside",
            "dead",
            before(100 * DAY),
            Some(before(14 * DAY - 1)),
            false,
        ),
        (
            "shop",
            "dead_outside",
            "dead",
            before(100 * DAY),
            Some(before(14 * DAY + 1)),
            true,
        ),
        (
            "gone",
            "inside",
            "completed",
            before(30 * DAY - 1),
            None,
            false,
        ),
        (
            "gone",
            "outside",
            "completed",
            before(30 * DAY + 1),
            None,
            true,
        ),
        (
            "gone",
            "dead_inside",
            "dead",
            before(200 * DAY),
            Some(before(90 * DAY - 1)),
            false,
        ),
        (
            "gone",
            "dead_outside",
            "dead",
            before(200 * DAY),
            Some(before(90 * DAY + 1)),
            true,
        ),
    ];
    for (source, id, status, claimed_at, dead_at, _) in rows {
        seed(&client, source, id, status, *claimed_at, *dead_at, 1).await;
    }
    client
        .batch_execute(
            "INSERT INTO orders (order_id, total_minor, currency, source, event_id, recorded_at)
             VALUES ('o1', 100, 'usd', 'stripe', 'outside1', now() - interval '10 years'),
                    ('o2', 200, 'usd', 'gone', 'outside1', now() - interval '10 years')",
        )
        .await
        .unwrap();

    // Batches of 2: the run crosses work items and sources within one batch.
    let report = sweep_at(&app, t(), &settings(2, 100)).await;

    let survivors: BTreeSet<String> = rows
        .iter()
        .filter(|row| !row.5)
        .map(|(source, id, ..)| format!("{source}/{id}1"))
        .collect();
    assert_eq!(keys(&client).await, survivors);
    assert_eq!(report.deleted, 6, "{report:?}");
    assert_eq!(report.stopped, Stopped::Done);
    assert_eq!(
        report.deleted_by_source,
        BTreeMap::from([
            ("gone".to_owned(), 2),
            ("shop".to_owned(), 2),
            ("stripe".to_owned(), 2)
        ])
    );
    // The source no longer configured is named: it was judged by the defaults.
    assert_eq!(report.unconfigured, vec!["gone".to_owned()]);
    // The oldest key left is the oldest unfinished one.
    assert_eq!(
        report.oldest_remaining.as_deref(),
        Some(shared::timestamp::rfc3339(before(3650 * DAY)).as_str())
    );
    // The business rows are not the ledger's.
    let orders: i64 = client
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(orders, 2);

    // Nothing expired is left: a second run at the same time deletes nothing.
    let again = sweep_at(&app, t(), &settings(2, 100)).await;
    assert_eq!((again.deleted, again.batches), (0, 1), "{again:?}");
    assert_eq!(keys(&client).await, survivors);
}

#[tokio::test]
async fn each_batch_commits_on_its_own_and_leaves_no_transaction_open() {
    let app = spawn_app().await;
    let observer = app.db.connect().await.unwrap();
    seed(
        &observer,
        "stripe",
        "old",
        "completed",
        before(31 * DAY),
        None,
        20_000,
    )
    .await;
    seed(
        &observer,
        "stripe",
        "new",
        "completed",
        before(DAY),
        None,
        10,
    )
    .await;

    let conn = app.receiver().pool.get().await.unwrap();
    let pid: i32 = conn
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let mut sweep = Sweep::plan(&conn, &app.settings.sources, t(), &settings(5_000, 1))
        .await
        .unwrap();
    for done in 1..=4i64 {
        assert_eq!(sweep.batch().await.unwrap(), 5_000, "batch {done}");
        // Another session sees the deletions: the batch is committed ...
        assert_eq!(
            count(&observer).await,
            20_010 - 5_000 * done,
            "batch {done}"
        );
        // ... and the sweep's session holds no transaction between batches.
        let row = observer
            .query_one(
                "SELECT state, xact_start IS NULL FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .unwrap();
        let (state, no_transaction): (String, bool) = (row.get(0), row.get(1));
        assert_eq!(
            (state.as_str(), no_transaction),
            ("idle", true),
            "batch {done}"
        );
    }
    assert_eq!(
        sweep.batch().await.unwrap(),
        0,
        "the fifth batch finds nothing"
    );
    assert_eq!(count(&observer).await, 10);
    assert_eq!(
        sweep.deleted_by_source(),
        &BTreeMap::from([("stripe".to_owned(), 20_000)])
    );
}

#[tokio::test]
async fn a_run_over_twenty_thousand_expired_keys_takes_five_batches_and_is_done() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    seed(
        &client,
        "stripe",
        "old",
        "completed",
        before(31 * DAY),
        None,
        20_000,
    )
    .await;

    let report = sweep_at(&app, t(), &settings(5_000, 100)).await;

    assert_eq!(
        (report.deleted, report.batches, report.stopped),
        (20_000, 5, Stopped::Done),
        "{report:?}"
    );
    assert_eq!(report.oldest_remaining, None, "the ledger is empty");
    assert_eq!(count(&client).await, 0);
    // The report as the function returns it and the CLI prints it.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["stopped"], "done");
    assert_eq!(json["deleted_by_source"]["stripe"], 20_000);
}

#[tokio::test]
async fn a_run_stops_early_at_max_batches_and_when_time_runs_short() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    seed(
        &client,
        "stripe",
        "old",
        "completed",
        before(31 * DAY),
        None,
        20_000,
    )
    .await;
    let conn = app.receiver().pool.get().await.unwrap();
    let sources = &app.settings.sources;

    let capped = shared::sweep::run(&conn, sources, &settings(5_000, 2), t(), plenty)
        .await
        .unwrap();
    assert_eq!(
        (capped.deleted, capped.batches, capped.stopped),
        (10_000, 2, Stopped::MaxBatches)
    );
    assert_eq!(count(&client).await, 10_000);

    // Time for one batch, then less than the margin.
    let margin = SweepSettings {
        margin_ms: 10_000,
        ..settings(5_000, 100)
    };
    let calls = Cell::new(0);
    let remaining = || {
        calls.set(calls.get() + 1);
        if calls.get() == 1 {
            Duration::from_secs(60)
        } else {
            Duration::from_secs(9)
        }
    };
    let short = shared::sweep::run(&conn, sources, &margin, t(), remaining)
        .await
        .unwrap();
    assert_eq!(
        (short.deleted, short.batches, short.stopped),
        (5_000, 1, Stopped::OutOfTime)
    );
    let none = shared::sweep::run(&conn, sources, &margin, t(), || Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        (none.deleted, none.batches, none.stopped),
        (0, 0, Stopped::OutOfTime)
    );
    assert_eq!(count(&client).await, 5_000);

    // The next run finishes the job.
    let rest = shared::sweep::run(&conn, sources, &margin, t(), plenty)
        .await
        .unwrap();
    assert_eq!(
        (rest.deleted, rest.batches, rest.stopped),
        (5_000, 2, Stopped::Done)
    );
}

/// The example order handler, counting its calls: each call is one business effect.
#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for Counting {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

fn counting(app: &mut TestApp) -> Arc<Counting> {
    let handler = Arc::new(Counting::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    handler
}

/// Moves `source/event_id`'s first delivery `age` (SQL interval) into the past, as the
/// receiver's clock sees it.
async fn backdate(app: &TestApp, source: &str, event_id: &str, age: &str) {
    let client = app.db.connect().await.unwrap();
    let updated = client
        .execute(
            &format!(
                "UPDATE webhook_event
                 SET claimed_at = now() - interval '{age}',
                     completed_at = CASE WHEN status = 'completed'
                                         THEN now() - interval '{age}' END
                 WHERE source = $1 AND event_id = $2"
            ),
            &[&source, &event_id],
        )
        .await
        .unwrap();
    assert_eq!(updated, 1, "{source}/{event_id}");
}

/// `(status, claimed within the last minute)` of `source/event_id`.
async fn key_state(app: &TestApp, source: &str, event_id: &str) -> (String, bool) {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT status::text, claimed_at > now() - interval '1 minute'
             FROM webhook_event WHERE source = $1 AND event_id = $2",
            &[&source, &event_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The `expired_key_reclaimed` warnings logged for `event_id`, each checked for its `metric`
/// field and its EMF twin.
fn reclaimed(logs: &crate::helpers::Captured, event_id: &str) -> usize {
    let warnings = logs
        .with("metric", "expired_key_reclaimed")
        .into_iter()
        .filter(|line| line["event_id"] == event_id)
        .count();
    if warnings > 0 {
        assert!(
            !logs.with("emf_metric", "expired_key_reclaimed").is_empty(),
            "the warning's metric is counted"
        );
    }
    warnings
}

/// The reply's shape without the order id (twins record different orders).
fn shape(reply: &shared::Reply) -> (u16, Outcome, bool, serde_json::Value) {
    let mut body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    if let Some(object) = body.as_object_mut() {
        object.remove("order_id");
    }
    (reply.status, reply.outcome, reply.replayed, body)
}

/// Real time now, for sweeps that must agree with the receiver's clock.
fn wall_clock() -> SystemTime {
    SystemTime::now()
}

#[tokio::test]
async fn a_late_inline_redelivery_is_new_again_whether_or_not_the_sweep_ran() {
    let (logs, _guard) = capture_logs();
    let mut app = spawn_app().await;
    let handler = counting(&mut app);
    let now = crate::helpers::NOW;
    let a = stripe_payment("evt_late_a", "order_late_a", 1200, now);
    let b = stripe_payment("evt_late_b", "order_late_b", 1200, now);
    assert_eq!(app.receive("stripe", &a).await.outcome, Outcome::Processed);
    assert_eq!(app.receive("stripe", &b).await.outcome, Outcome::Processed);
    assert_eq!(handler.calls.load(Ordering::SeqCst), 2);

    // A: past retention but still present (not swept yet).
    backdate(&app, "stripe", "evt_late_a", "30 days 1 hour").await;
    let before_sweep = app.receive("stripe", &a).await;
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3, "one new effect");
    assert_eq!(reclaimed(&logs, "evt_late_a"), 1);
    assert_eq!(
        key_state(&app, "stripe", "evt_late_a").await,
        ("completed".to_owned(), true),
        "the key starts a new retention"
    );

    // B: past retention and swept (A was claimed again, so only B goes).
    backdate(&app, "stripe", "evt_late_b", "30 days 1 hour").await;
    let report = sweep_at(&app, wall_clock(), &settings(5_000, 100)).await;
    assert_eq!(
        report.deleted_by_source,
        BTreeMap::from([("stripe".to_owned(), 1)])
    );
    let after_sweep = app.receive("stripe", &b).await;
    assert_eq!(handler.calls.load(Ordering::SeqCst), 4, "one new effect");
    assert_eq!(reclaimed(&logs, "evt_late_b"), 0, "nothing left to reclaim");
    assert_eq!(
        key_state(&app, "stripe", "evt_late_b").await,
        ("completed".to_owned(), true)
    );

    // The same answer either way, and a new key that is a duplicate again.
    assert_eq!(shape(&before_sweep), shape(&after_sweep));
    assert_eq!(
        shape(&before_sweep),
        (
            200,
            Outcome::Processed,
            false,
            serde_json::json!({"status": "recorded"})
        )
    );
    for delivery in [&a, &b] {
        let replay = app.receive("stripe", delivery).await;
        assert!(replay.replayed, "{replay:?}");
    }
    assert_eq!(handler.calls.load(Ordering::SeqCst), 4);
    // The first record of each order stands.
    assert_eq!(app.order_rows().await, 2);
}

#[tokio::test]
async fn a_key_just_inside_retention_stays_a_duplicate_and_is_not_swept() {
    let (logs, _guard) = capture_logs();
    let mut app = spawn_app().await;
    let handler = counting(&mut app);
    let delivery = stripe_payment("evt_inside", "order_inside", 700, crate::helpers::NOW);
    let first = app.receive("stripe", &delivery).await;
    assert_eq!(first.outcome, Outcome::Processed);
    backdate(&app, "stripe", "evt_inside", "29 days 23 hours").await;

    let report = sweep_at(&app, wall_clock(), &settings(5_000, 100)).await;
    assert_eq!(report.deleted, 0, "{report:?}");
    let again = app.receive("stripe", &delivery).await;

    assert!(again.replayed, "{again:?}");
    assert_eq!(
        (again.status, again.body.as_str()),
        (first.status, first.body.as_str())
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "no second effect");
    assert_eq!(reclaimed(&logs, "evt_inside"), 0);
    assert_eq!(
        key_state(&app, "stripe", "evt_inside").await,
        ("completed".to_owned(), false),
        "the key keeps its first claim time"
    );
}

#[tokio::test]
async fn a_late_deferred_redelivery_is_accepted_again_whether_or_not_the_sweep_ran() {
    let (logs, _guard) = capture_logs();
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let a = deferred(payment_intent_body("evt_dlate_a", "order_dlate_a", 300));
    let b = deferred(payment_intent_body("evt_dlate_b", "order_dlate_b", 300));
    for delivery in [&a, &b] {
        assert_eq!(app.receive("stripe-deferred", delivery).await.status, 202);
    }
    let drained = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!(drained.completed, 2);

    backdate(&app, "stripe-deferred", "evt_dlate_a", "30 days 1 hour").await;
    let before_sweep = app.receive("stripe-deferred", &a).await;
    assert_eq!(reclaimed(&logs, "evt_dlate_a"), 1);
    assert_eq!(
        key_state(&app, "stripe-deferred", "evt_dlate_a").await,
        ("claimed".to_owned(), true)
    );
    let drained = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!(drained.completed, 1, "one new effect: {drained:?}");

    backdate(&app, "stripe-deferred", "evt_dlate_b", "30 days 1 hour").await;
    let report = sweep_at(&app, wall_clock(), &settings(5_000, 100)).await;
    assert_eq!(
        report.deleted_by_source,
        BTreeMap::from([("stripe-deferred".to_owned(), 1)])
    );
    let after_sweep = app.receive("stripe-deferred", &b).await;
    assert_eq!(reclaimed(&logs, "evt_dlate_b"), 0);
    assert_eq!(
        key_state(&app, "stripe-deferred", "evt_dlate_b").await,
        ("claimed".to_owned(), true)
    );
    let drained = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!(drained.completed, 1, "one new effect: {drained:?}");

    assert_eq!(shape(&before_sweep), shape(&after_sweep));
    assert_eq!(
        shape(&before_sweep),
        (
            202,
            Outcome::Accepted,
            false,
            serde_json::json!({"accepted": true, "duplicate": false})
        )
    );
    // Within the new retention, a duplicate again.
    let duplicate = app.receive("stripe-deferred", &a).await;
    assert_eq!(
        (duplicate.outcome, duplicate.replayed),
        (Outcome::Duplicate, true)
    );
}

#[tokio::test]
async fn two_concurrent_redeliveries_of_an_expired_key_make_one_new_effect() {
    let mut app = spawn_app_with(8, 10_000).await;
    let delivery = stripe_payment("evt_race_late", "order_race_late", 900, crate::helpers::NOW);
    assert_eq!(
        app.receive("stripe", &delivery).await.outcome,
        Outcome::Processed
    );
    backdate(&app, "stripe", "evt_race_late", "31 days").await;
    // From here on the handler counts, and its first call holds its transaction open.
    let handler = gated(&mut app);
    let app = Arc::new(app);

    let first = tokio::spawn({
        let (app, delivery) = (app.clone(), delivery.clone());
        async move { app.receive("stripe", &delivery).await }
    });
    handler.entered.notified().await;
    let second = tokio::spawn({
        let (app, delivery) = (app.clone(), delivery.clone());
        async move { app.receive("stripe", &delivery).await }
    });
    // The second redelivery waits on the first's uncommitted retake.
    wait_for_lock_waiter(&app).await;
    handler.release.notify_one();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());

    assert_eq!(first.outcome, Outcome::Processed, "{first:?}");
    assert!(
        second.replayed || (second.status, second.outcome) == (409, Outcome::InFlight),
        "{second:?}"
    );
    if second.replayed {
        assert_eq!(second.body, first.body);
    }
    assert_eq!(
        handler.calls.load(Ordering::SeqCst),
        1,
        "exactly one new effect"
    );
    assert_eq!(app.ledger_rows().await, 1);
}

/// The scheduled event of events/sweeper/schedule.json with `deadline` from now.
fn schedule_event(deadline: Duration) -> lambda_runtime::LambdaEvent<serde_json::Value> {
    let payload = hookledger_tests::EventFile::load("sweeper/schedule.json")
        .unwrap()
        .json;
    assert_eq!(payload["detail-type"], "Scheduled Event");
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + deadline)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    lambda_runtime::LambdaEvent::new(payload, context)
}

#[tokio::test]
async fn the_sweeper_function_sweeps_on_its_schedule_returns_the_report_and_counts_swept() {
    let (logs, _guard) = capture_logs();
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    let now = SystemTime::now();
    seed(
        &client,
        "stripe",
        "old",
        "completed",
        now - Duration::from_secs(31 * DAY),
        None,
        3,
    )
    .await;
    seed(
        &client,
        "github",
        "old",
        "completed",
        now - Duration::from_secs(31 * DAY),
        None,
        2,
    )
    .await;
    seed(
        &client,
        "stripe",
        "new",
        "completed",
        now - Duration::from_secs(DAY),
        None,
        1,
    )
    .await;
    let state = sweeper::handler::AppState::new(&app.settings, app.receiver().pool.clone());

    // Less time left than the margin (10 s): no batch starts.
    let report = sweeper::handler::function_handler(&state, schedule_event(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(
        (report.deleted, report.batches, report.stopped),
        (0, 0, Stopped::OutOfTime)
    );
    assert_eq!(count(&client).await, 6);

    let report =
        sweeper::handler::function_handler(&state, schedule_event(Duration::from_secs(300)))
            .await
            .unwrap();
    assert_eq!(
        (report.deleted, report.batches, report.stopped),
        (5, 1, Stopped::Done),
        "{report:?}"
    );
    assert_eq!(
        keys(&client).await,
        BTreeSet::from(["stripe/new1".to_owned()])
    );
    let swept: BTreeMap<String, u64> = logs
        .with("emf_metric", "swept")
        .iter()
        .map(|line| {
            (
                line["source"].as_str().unwrap().to_owned(),
                line["value"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        swept,
        BTreeMap::from([("github".to_owned(), 2), ("stripe".to_owned(), 3)])
    );
    let line = logs
        .lines()
        .into_iter()
        .rfind(|line| line["message"] == "sweep")
        .expect("the sweep line");
    assert_eq!(line["deleted"], 5);
    assert_eq!(line["batches"], 1);
    // The log line names why it stopped as the report does.
    assert_eq!(line["stopped"], "done");
}

/// The order handler, failing fatally on its first call (a payload it cannot yet process) and
/// recording the order on later ones (the handler was fixed, the sender resends); counts calls.
#[derive(Default)]
struct FatalFirst {
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for FatalFirst {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(HandlerError::fatal("not yet supported"));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn a_dead_letter_redriven_late_keeps_its_key_for_a_full_retention_again() {
    // A dead letter is kept 90 days from when it died, so a resend may re-drive it long after
    // its first delivery. Once the resend completes, the key must keep answering duplicates for
    // the source's retention from then, not expire at once because the first delivery was
    // long ago (a second resend would run the effect twice, and the sweep would delete it).
    let (logs, _guard) = capture_logs();
    let mut app = spawn_app().await;
    let handler = Arc::new(FatalFirst::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_redrive", "order_redrive", 500, crate::helpers::NOW);
    assert_eq!(
        app.receive("stripe", &delivery).await.outcome,
        Outcome::Dead
    );
    // It died 60 days ago, at its first delivery: inside the 90 days of a dead letter.
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "UPDATE webhook_event SET claimed_at = now() - interval '60 days',
                                      dead_at = now() - interval '60 days'
             WHERE source = 'stripe' AND event_id = 'evt_redrive'",
            &[],
        )
        .await
        .unwrap();

    let redriven = app.receive("stripe", &delivery).await;
    assert_eq!(redriven.outcome, Outcome::Processed, "{redriven:?}");
    assert_eq!(
        key_state(&app, "stripe", "evt_redrive").await,
        ("completed".to_owned(), true),
        "the re-driven key starts a new retention"
    );
    let report = sweep_at(&app, wall_clock(), &settings(5_000, 100)).await;
    assert_eq!(report.deleted, 0, "{report:?}");
    let again = app.receive("stripe", &delivery).await;
    assert!(again.replayed, "a second resend is a duplicate: {again:?}");
    assert_eq!(again.body, redriven.body);
    assert_eq!(
        handler.calls.load(Ordering::SeqCst),
        2,
        "one fatal run, one effect"
    );
    assert_eq!(reclaimed(&logs, "evt_redrive"), 0);
}

/// Fails fatally on every call (a payload the handler can no longer process).
struct AlwaysFatal;

#[async_trait::async_trait]
impl Handler for AlwaysFatal {
    async fn handle(&self, _tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        Err(HandlerError::fatal("no longer supported"))
    }
}

#[tokio::test]
async fn a_late_redelivery_that_fails_fatally_is_a_dead_letter_before_the_sweep_as_after() {
    // A key past retention counts as absent: a late redelivery whose handler now fails
    // fatally must get the same answer (the fatal 200, a dead letter kept for an operator)
    // whether or not the sweeper has deleted the old key yet.
    let mut app = spawn_app().await;
    let now = crate::helpers::NOW;
    let a = stripe_payment("evt_late_fatal_a", "order_late_fatal_a", 100, now);
    let b = stripe_payment("evt_late_fatal_b", "order_late_fatal_b", 100, now);
    assert_eq!(app.receive("stripe", &a).await.outcome, Outcome::Processed);
    assert_eq!(app.receive("stripe", &b).await.outcome, Outcome::Processed);
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        Arc::new(AlwaysFatal) as Arc<dyn Handler>,
    );

    // A: past retention, not swept yet.
    backdate(&app, "stripe", "evt_late_fatal_a", "31 days").await;
    let before_sweep = app.receive("stripe", &a).await;
    // B: past retention and swept.
    backdate(&app, "stripe", "evt_late_fatal_b", "31 days").await;
    sweep_at(&app, wall_clock(), &settings(5_000, 100)).await;
    let after_sweep = app.receive("stripe", &b).await;

    assert_eq!(
        (after_sweep.status, after_sweep.outcome),
        (200, Outcome::Dead),
        "{after_sweep:?}"
    );
    assert_eq!(
        shape(&before_sweep),
        shape(&after_sweep),
        "the same answer before the sweep as after: {before_sweep:?}"
    );
    assert_eq!(
        key_state(&app, "stripe", "evt_late_fatal_a").await,
        ("dead".to_owned(), true),
        "a dead letter for the operator, as after the sweep"
    );
}

/// The local sources with `stripe`'s `retention_days` set to `days`.
fn sources_with_stripe_retention(days: u32) -> String {
    let mut sources: serde_json::Value =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    for source in sources.as_array_mut().unwrap() {
        if source["name"] == "stripe" {
            source["retention_days"] = serde_json::json!(days);
        }
    }
    sources.to_string()
}

#[tokio::test]
async fn the_sweeper_function_applies_a_retention_changed_in_its_sources_from_the_next_run() {
    use shared::sources_refresh::{LiveSources, RefreshFrom, Refresher};
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    let now = SystemTime::now();
    seed(
        &client,
        "stripe",
        "aged",
        "completed",
        now - Duration::from_secs(40 * DAY),
        None,
        1,
    )
    .await;
    let path = std::env::temp_dir().join(format!(
        "hookledger-sweeper-sources-{}-{}.json",
        std::process::id(),
        now.duration_since(UNIX_EPOCH).unwrap().as_nanos()
    ));
    std::fs::write(&path, sources_with_stripe_retention(60)).unwrap();
    let mut state = sweeper::handler::AppState::new(&app.settings, app.receiver().pool.clone());
    state.sources = LiveSources::refreshing(
        Sources::from_json(&sources_with_stripe_retention(60)).unwrap(),
        Refresher::new(RefreshFrom::File(path.clone()), Duration::ZERO),
    );
    let event = || schedule_event(Duration::from_secs(300));
    let report = sweeper::handler::function_handler(&state, event())
        .await
        .unwrap();
    assert_eq!(report.deleted, 0, "40 days is inside a 60-day retention");

    // The operator shortens the retention in the sources (file or secret): a warm sweeper
    // applies it from its next run, without a cold start.
    std::fs::write(&path, sources_with_stripe_retention(35)).unwrap();
    let report = sweeper::handler::function_handler(&state, event())
        .await
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(report.deleted, 1, "{report:?}");
    assert_eq!(count(&client).await, 0);
}

/// Inserts outbox message `n` of `(source, event_id)` with `status` (`delivered` or `dead` at
/// `at`, `pending` or `processing` committed at `at`).
async fn seed_message(client: &Client, source: &str, event_id: &str, status: &str, at: SystemTime) {
    client
        .execute(
            "INSERT INTO outbox
                 (source, event_id, n, event_type, target, payload, content_type, status,
                  created_at, next_attempt_at, lease_expires_at, delivered_at, dead_at)
             VALUES ($1, $2, 1, 'test.event', 'billing', '\\x7b7d', 'application/json',
                     $3::text::outbox_status, $4::timestamptz, $4::timestamptz,
                     CASE WHEN $3::text = 'processing' THEN $4::timestamptz END,
                     CASE WHEN $3::text = 'delivered' THEN $4::timestamptz END,
                     CASE WHEN $3::text = 'dead' THEN $4::timestamptz END)",
            &[&source, &event_id, &status, &at],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sweep_deletes_delivered_and_dead_outbox_messages_past_retention_and_nothing_else() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    // `stripe` keeps the defaults: delivered messages 30 days, dead ones 90 days. No event keys
    // at all: the messages are swept by their own times, for a configured source.
    for (event_id, status, age_days) in [
        ("delivered_old", "delivered", 31),
        ("delivered_new", "delivered", 29),
        ("dead_old", "dead", 91),
        ("dead_mid", "dead", 31),
        ("pending_old", "pending", 200),
        ("processing_old", "processing", 200),
    ] {
        seed_message(&client, "stripe", event_id, status, before(age_days * DAY)).await;
    }
    let report = sweep_at(&app, t(), &settings(1000, 10)).await;
    assert_eq!(report.deleted, 2, "{report:?}");
    assert_eq!(report.deleted_by_source.get("stripe"), Some(&2));
    let left: BTreeSet<String> = client
        .query("SELECT event_id FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        left,
        ["delivered_new", "dead_mid", "pending_old", "processing_old"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}
