//! Deferred mode, the worker, the ordering guard and shadow mode, on real PostgreSQL with an
//! injected clock (no sleeping for backoffs or leases).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use shared::ledger::{self, NewEvent, Tx};
use shared::work::Summary;
use shared::Outcome;
use shared::Sources;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use worker::handler::AppState as WorkerState;

use crate::helpers::*;

async fn drain_at(worker: &WorkerState, at: SystemTime) -> Summary {
    worker.worker.drain(move || at, plenty).await.unwrap()
}

/// Counts calls; fails while `failing`; never finishes while `hanging`.
#[derive(Default)]
struct Controlled {
    calls: AtomicUsize,
    failing: AtomicBool,
    hanging: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for Controlled {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hanging.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(HandlerError::retryable(
                "downstream answered 502".to_owned(),
            ));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

fn control(app: &mut TestApp, worker: &mut WorkerState, source: &str) -> Arc<Controlled> {
    let handler = Arc::new(Controlled::default());
    for registry in [
        &mut app.state.receiver.handlers,
        &mut worker.worker.handlers,
    ] {
        registry.register(
            source,
            "payment_intent.succeeded",
            handler.clone() as Arc<dyn Handler>,
        );
    }
    handler
}

fn json(reply: &shared::Reply) -> serde_json::Value {
    serde_json::from_str(&reply.body).unwrap()
}

#[tokio::test]
async fn a_deferred_event_delivered_three_times_has_one_effect() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let delivery = deferred(payment_intent_body("evt_def_1", "ord_def_1", 990));
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(app.receive("stripe-deferred", &delivery).await);
    }
    assert!(replies.iter().all(|r| r.status == 202), "{replies:?}");
    let duplicates: Vec<bool> = replies
        .iter()
        .map(|r| json(r)["duplicate"].as_bool().unwrap())
        .collect();
    assert_eq!(duplicates, [false, true, true]);
    assert_eq!(row(&app, "evt_def_1").await.0, "claimed");
    assert_eq!(
        app.order_rows().await,
        0,
        "nothing applied before the worker runs"
    );

    let summary = drain_at(&worker, SystemTime::now()).await;
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    assert_eq!(
        row(&app, "evt_def_1").await,
        ("completed".to_owned(), 1, None)
    );
    assert_eq!(app.order_rows().await, 1);
    // A retry after completion is still a 202 duplicate, and the worker has nothing to do.
    let late = app.receive("stripe-deferred", &delivery).await;
    assert_eq!(
        (late.status, json(&late)["duplicate"].as_bool()),
        (202, Some(true))
    );
    assert_eq!(drain_at(&worker, SystemTime::now()).await.leased, 0);
    assert_eq!(app.order_rows().await, 1);
    // A different body under the same id is still a conflict.
    let other = deferred(payment_intent_body("evt_def_1", "ord_def_1", 1));
    assert_eq!(app.receive("stripe-deferred", &other).await.status, 409);
}

fn subscription_event(
    event_id: &str,
    created: i64,
    plan: &str,
    status: &str,
    kind: &str,
) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "type": format!("customer.subscription.{kind}"),
        "created": created,
        "data": {"object": {
            "id": "sub_1",
            "object": "subscription",
            "customer": "cus_1",
            // The object's own creation time never changes: not a version.
            "created": 1_000,
            "status": status,
            "items": {"data": [{"price": {"id": plan}}]}
        }}
    }))
    .unwrap()
}

async fn subscription_state(app: &TestApp) -> (String, String, i64) {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT plan, status, version FROM subscriptions WHERE subscription_id = 'sub_1'",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn events_delivered_in_reverse_order_leave_the_newest_state_inline() {
    let app = spawn_app().await;
    let v1 = subscription_event("evt_v1", 2_000, "price_basic", "active", "created");
    let v2 = subscription_event("evt_v2", 2_100, "price_pro", "active", "updated");
    let v3 = subscription_event("evt_v3", 2_200, "price_pro", "past_due", "updated");
    let mut outcomes = Vec::new();
    for body in [&v3, &v1, &v2, &v3] {
        let reply = app.receive("stripe", &stripe_body(body.clone(), NOW)).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        outcomes.push(json(&reply)["status"].as_str().unwrap().to_owned());
    }
    // v3 applies; v1 and v2 arrive late and are stale; v3 again is a replay of the response.
    assert_eq!(outcomes, ["applied", "stale", "stale", "applied"]);
    assert_eq!(
        subscription_state(&app).await,
        ("price_pro".to_owned(), "past_due".to_owned(), 2_200)
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'completed'")
            .await,
        3
    );
}

#[tokio::test]
async fn events_delivered_in_reverse_order_leave_the_newest_state_deferred() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let v1 = subscription_event("evt_dv1", 2_000, "price_basic", "active", "created");
    let v2 = subscription_event("evt_dv2", 2_100, "price_pro", "active", "updated");
    let v3 = subscription_event("evt_dv3", 2_200, "price_team", "active", "updated");
    for body in [&v3, &v1, &v2, &v3] {
        let reply = app
            .receive("stripe-deferred", &deferred(body.clone()))
            .await;
        assert_eq!(reply.status, 202);
    }
    let summary = drain_at(&worker, SystemTime::now()).await;
    assert_eq!((summary.leased, summary.completed), (3, 3), "{summary:?}");
    assert_eq!(
        subscription_state(&app).await,
        ("price_team".to_owned(), "active".to_owned(), 2_200)
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'completed'")
            .await,
        3
    );
}

#[tokio::test]
async fn an_update_after_creation_is_applied_because_the_version_is_the_events_created() {
    let app = spawn_app().await;
    let created = subscription_event("evt_c", 5_000, "price_basic", "incomplete", "created");
    let updated = subscription_event("evt_u", 5_060, "price_basic", "active", "updated");
    for body in [created, updated] {
        assert_eq!(
            app.receive("stripe", &stripe_body(body, NOW)).await.status,
            200
        );
    }
    assert_eq!(subscription_state(&app).await.1, "active");
}

#[tokio::test]
async fn a_version_tie_without_an_api_key_is_kept_visible_not_silently_dropped() {
    let app = spawn_app().await;
    let (logs, _guard) = capture_logs();
    let first = subscription_event("evt_t1", 7_000, "price_a", "active", "updated");
    let second = subscription_event("evt_t2", 7_000, "price_b", "active", "updated");
    assert_eq!(
        json(&app.receive("stripe", &stripe_body(first, NOW)).await)["status"],
        "applied"
    );
    let tie = app.receive("stripe", &stripe_body(second, NOW)).await;
    assert_eq!(tie.status, 200);
    assert_eq!(json(&tie)["status"], "tie");
    assert_eq!(subscription_state(&app).await.0, "price_a");
    // Listed for operators: which event set the version and which tied with it.
    let client = app.db.connect().await.unwrap();
    let ties = client
        .query(
            "SELECT applied_event_id, event_id, version, resolved FROM ordering_tie",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ties.len(), 1);
    assert_eq!(ties[0].get::<_, String>(0), "evt_t1");
    assert_eq!(ties[0].get::<_, String>(1), "evt_t2");
    assert_eq!(ties[0].get::<_, i64>(2), 7_000);
    assert!(!ties[0].get::<_, bool>(3));
    // Counted: the ordering_tie metric's log line.
    assert_eq!(
        logs.with("metric", "ordering_tie").len(),
        1,
        "{}",
        logs.text()
    );
    // A retry of the tying event answers the same and records nothing twice.
    let again = app
        .receive("stripe", &stripe_body(second_again(), NOW))
        .await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(app.count("SELECT count(*) FROM ordering_tie").await, 1);
}

fn second_again() -> Vec<u8> {
    subscription_event("evt_t2", 7_000, "price_b", "active", "updated")
}

#[tokio::test]
async fn a_handler_past_its_deadline_fails_is_retried_after_backoff_and_then_completes() {
    let mut app = spawn_app().await;
    app.settings.worker.handler_timeout_ms = 300;
    let mut worker = worker_for(&app);
    let handler = control(&mut app, &mut worker, "stripe-deferred");
    handler.hanging.store(true, Ordering::SeqCst);
    let delivery = deferred(payment_intent_body("evt_slow", "ord_slow", 5));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);

    let t0 = SystemTime::now();
    let summary = drain_at(&worker, t0).await;
    assert_eq!((summary.leased, summary.failed), (1, 1), "{summary:?}");
    let (status, attempts, error) = row(&app, "evt_slow").await;
    assert_eq!((status.as_str(), attempts), ("failed", 1));
    assert!(error.unwrap().contains("timed out"));

    // Not due before its backoff (15-30 s after attempt 1) ...
    handler.hanging.store(false, Ordering::SeqCst);
    assert_eq!(
        drain_at(&worker, t0 + Duration::from_secs(14)).await.leased,
        0
    );
    // ... due after it, and it completes once the handler is healthy.
    let summary = drain_at(&worker, t0 + Duration::from_secs(31)).await;
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    assert_eq!(row(&app, "evt_slow").await.0, "completed");
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn a_worker_stops_leasing_when_its_remaining_time_is_under_the_margin() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    for i in 0..3 {
        let id = format!("evt_time_{i}");
        let delivery = deferred(payment_intent_body(&id, &id, 1));
        assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
    }
    let margin = Duration::from_millis(app.settings.worker.margin_ms);
    // No time at all: nothing is leased.
    let summary = worker
        .worker
        .drain(SystemTime::now, || margin - Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!((summary.leased, summary.out_of_time), (0, true));
    // Time for one event: the batch is leased, one processed, the rest given back unprocessed.
    let calls = AtomicUsize::new(0);
    let summary = worker
        .worker
        .drain(SystemTime::now, || {
            // drain's check and the first event's check pass; the second event's fails.
            match calls.fetch_add(1, Ordering::SeqCst) {
                0..=1 => plenty(),
                _ => Duration::ZERO,
            }
        })
        .await
        .unwrap();
    assert_eq!(
        (
            summary.leased,
            summary.completed,
            summary.released,
            summary.out_of_time
        ),
        (3, 1, 2, true),
        "{summary:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'failed' AND attempts = 0")
            .await,
        2,
        "released events keep their attempt count"
    );
    // The next invocation finishes them.
    assert_eq!(drain_at(&worker, SystemTime::now()).await.completed, 2);
    assert_eq!(app.order_rows().await, 3);
}

#[tokio::test]
async fn a_killed_worker_loses_its_lease_and_another_completes_the_event_once() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let started = deferred(payment_intent_body("evt_crash", "ord_crash", 42));
    let unstarted = deferred(payment_intent_body("evt_crash_mate", "ord_crash_mate", 43));
    assert_eq!(app.receive("stripe-deferred", &started).await.status, 202);
    assert_eq!(app.receive("stripe-deferred", &unstarted).await.status, 202);

    // A real separate process leases both events as one batch, starts an attempt of the first
    // and is killed in the middle of it, before it ever reaches the second.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookledger-dev"))
        .args(["lease-and-hang", "--lease-secs", "60", "--start", "1"])
        .env("DATABASE_URL", &app.db.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "leased 2, started 1");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(row(&app, "evt_crash").await.0, "processing");

    // While the lease holds, nobody else takes the events.
    assert_eq!(drain_at(&worker, SystemTime::now()).await.leased, 0);
    // Once it expires, another worker completes each exactly once.
    let later = SystemTime::now() + Duration::from_secs(61);
    let summary = drain_at(&worker, later).await;
    assert_eq!((summary.leased, summary.completed), (2, 2), "{summary:?}");
    // The attempt that was running when the worker died counts; the batch-mate it never
    // started is not charged.
    assert_eq!(
        row(&app, "evt_crash").await,
        ("completed".to_owned(), 2, None)
    );
    assert_eq!(
        row(&app, "evt_crash_mate").await,
        ("completed".to_owned(), 1, None)
    );
    assert_eq!(app.order_rows().await, 2);
    assert_eq!(
        drain_at(&worker, later + Duration::from_secs(3600))
            .await
            .leased,
        0
    );
}

#[tokio::test]
async fn two_workers_leasing_at_once_get_disjoint_rows() {
    // lock_timeout 500 ms: a lease that waited on the other worker's rows would fail, not hang.
    let app = spawn_app_with(4, 500).await;
    {
        let conn = app.receiver().pool.get().await.unwrap();
        for i in 0..30 {
            let id = format!("evt_pool_{i}");
            let digest = [i as u8; 32];
            let event = NewEvent {
                source: "stripe-deferred",
                event_id: &id,
                event_type: "payment_intent.succeeded",
                digest: &digest,
                identity: &digest,
                payload: Some(b"{}"),
                dead_payload: Some(b"{}"),
                subject: None,
                replayed: false,
                unsigned_id: false,
            };
            let expiry = ledger::Expiry {
                retention: shared::retention::Retention::default(),
                now: SystemTime::now() - Duration::from_secs(1),
            };
            ledger::accept(&conn, &event, &expiry).await.unwrap();
        }
    }
    let now = SystemTime::now();
    let until = now + Duration::from_secs(60);
    // The first worker is in the middle of its lease: the oldest 20 due rows are locked by its
    // statement and its transaction has not committed.
    let mut raw = app.db.connect().await.unwrap();
    let first_tx = raw.transaction().await.unwrap();
    let first: Vec<String> = first_tx
        .query(
            "WITH due AS ( \
                 SELECT source, event_id FROM webhook_event \
                 WHERE status IN ('claimed', 'failed', 'processing') AND next_attempt_at <= $1 \
                 ORDER BY next_attempt_at LIMIT 20 FOR UPDATE) \
             UPDATE webhook_event AS e \
             SET status = 'processing', lease_token = e.lease_token + 1, \
                 lease_expires_at = $2, next_attempt_at = $2 \
             FROM due WHERE e.source = due.source AND e.event_id = due.event_id \
             RETURNING e.event_id",
            &[&now, &until],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(first.len(), 20);
    // The second worker leases while the first's lease is still open: it skips the locked rows
    // rather than waiting for them (without SKIP LOCKED this fails on lock_timeout).
    let b = app.receiver().pool.get().await.unwrap();
    let second = tokio::time::timeout(
        Duration::from_secs(10),
        ledger::lease_due(&b, now, until, 20),
    )
    .await
    .expect("the second lease does not wait for the first");
    let second: Vec<String> = second
        .expect("the second lease skips the first's rows")
        .into_iter()
        .map(|l| l.event_id)
        .collect();
    assert_eq!(
        second.len(),
        10,
        "the 10 rows the first worker does not hold"
    );
    assert!(
        first.iter().all(|id| !second.contains(id)),
        "{first:?} / {second:?}"
    );
    first_tx.commit().await.unwrap();
    assert_eq!(first.len() + second.len(), 30);
    // Every row was leased exactly once.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM webhook_event WHERE status = 'processing' AND lease_token = 1"
        )
        .await,
        30
    );
    // And two real leases at once still split what is due between them.
    let later = until + Duration::from_secs(1);
    let (a, b) = (
        app.receiver().pool.get().await.unwrap(),
        app.receiver().pool.get().await.unwrap(),
    );
    let (third, fourth) = tokio::join!(
        ledger::lease_due(&a, later, later + Duration::from_secs(60), 20),
        ledger::lease_due(&b, later, later + Duration::from_secs(60), 20)
    );
    let third: Vec<String> = third.unwrap().into_iter().map(|l| l.event_id).collect();
    let fourth: Vec<String> = fourth.unwrap().into_iter().map(|l| l.event_id).collect();
    assert_eq!(third.len() + fourth.len(), 30);
    assert!(
        third.iter().all(|id| !fourth.contains(id)),
        "{third:?} / {fourth:?}"
    );
}

#[tokio::test]
async fn exhausted_attempts_end_dead_with_the_last_error() {
    let mut app = spawn_app().await;
    let json = r#"[{"name": "stripe-deferred", "scheme": "stripe", "mode": "deferred",
                    "max_attempts": 3, "secrets": ["whsec_hookledger_local_deferred_secret"]}]"#;
    app.settings.sources = Sources::from_json(json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    );
    let mut worker = worker_for(&app);
    let handler = control(&mut app, &mut worker, "stripe-deferred");
    handler.failing.store(true, Ordering::SeqCst);
    let delivery = deferred(payment_intent_body("evt_dead", "ord_dead", 5));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);

    let mut at = SystemTime::now();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        drain_at(&worker, at).await;
        statuses.push(row(&app, "evt_dead").await.0);
        at += Duration::from_secs(2 * 3600); // past any backoff
    }
    assert_eq!(statuses, ["failed", "failed", "dead"]);
    let (_, attempts, error) = row(&app, "evt_dead").await;
    assert_eq!(attempts, 3);
    assert!(error.unwrap().contains("downstream answered 502"));
    assert_eq!(drain_at(&worker, at).await.leased, 0, "dead rows stay put");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_failing_doorbell_does_not_fail_the_delivery() {
    let mut app = spawn_app().await;
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "run with make test: the doorbell rings the moto emulator"
    );
    let doorbell = shared::doorbell::Doorbell::new(Some("hookledger-no-such-worker")).await;
    assert!(
        doorbell.ring("stripe-deferred", "evt_x").await.is_err(),
        "moto has no such function"
    );
    app.state.receiver = app.state.receiver.clone().with_doorbell(doorbell);
    let delivery = deferred(payment_intent_body("evt_bell", "ord_bell", 5));
    let (logs, _guard) = capture_logs();
    let reply = app.receive("stripe-deferred", &delivery).await;
    assert_eq!((reply.status, reply.outcome), (202, Outcome::Accepted));
    assert_eq!(row(&app, "evt_bell").await.0, "claimed");
    // The failure is logged (the doorbell_failed metric itself is an EMF line on stdout).
    let failed: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("doorbell failed"))
        })
        .collect();
    assert_eq!(failed.len(), 1, "{}", logs.text());
    assert_eq!(failed[0]["event_id"], "evt_bell");
}

#[tokio::test]
async fn the_worker_function_drains_on_its_schedule_and_doorbell_events() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    for (i, name) in ["worker/schedule.json", "worker/doorbell.json"]
        .iter()
        .enumerate()
    {
        let id = format!("evt_fn_{i}");
        let delivery = deferred(payment_intent_body(&id, &id, 3));
        assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
        let payload = hookledger_tests::EventFile::load(name).unwrap().json;
        let mut context = lambda_runtime::Context::default();
        context.deadline = (SystemTime::now() + Duration::from_secs(60))
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let summary = worker::handler::function_handler(
            &worker,
            lambda_runtime::LambdaEvent::new(payload, context),
        )
        .await
        .unwrap();
        assert_eq!(
            (summary.leased, summary.completed),
            (1, 1),
            "{name}: {summary:?}"
        );
    }
}

#[tokio::test]
async fn shadow_mode_processes_duplicates_and_counts_them() {
    for shadow in [true, false] {
        let mut app = spawn_app().await;
        let (logs, _guard) = capture_logs();
        let json = format!(
            r#"[{{"name": "stripe", "scheme": "stripe", "shadow": {shadow},
                 "secrets": ["whsec_hookledger_local_development_secret"]}}]"#
        );
        app.settings.sources = Sources::from_json(&json).unwrap();
        app.state = receiver::handler::AppState::new(
            &app.settings,
            app.receiver().pool.clone(),
            handlers::examples::registry(&app.settings.sources),
        );
        let mut worker = worker_for(&app);
        let handler = control(&mut app, &mut worker, "stripe");
        let delivery = stripe_payment("evt_shadow", "ord_shadow", 5, NOW);
        let first = app.receive("stripe", &delivery).await;
        let second = app.receive("stripe", &delivery).await;
        assert_eq!((first.status, second.status), (200, 200));
        let expected = if shadow {
            (2, Outcome::ShadowDuplicate)
        } else {
            (1, Outcome::Replayed)
        };
        assert_eq!(
            (handler.calls.load(Ordering::SeqCst), second.outcome),
            expected,
            "shadow = {shadow}"
        );
        assert_eq!(
            app.ledger_rows().await,
            1,
            "the claim is recorded once either way"
        );
        // Counted: the shadow_duplicate metric's log line, once per processed duplicate.
        let counted = logs.with("metric", "shadow_duplicate");
        assert_eq!(
            counted.len(),
            usize::from(shadow),
            "shadow = {shadow}: {}",
            logs.text()
        );
        if shadow {
            assert_eq!(counted[0]["source"], "stripe");
            assert_eq!(counted[0]["event_id"], "evt_shadow");
        }
    }
}

#[test]
fn the_workers_document_is_the_receivers_document() {
    let mut headers = HeaderMap::new();
    headers.insert("x-github-delivery", HeaderValue::from_static("d-1"));
    headers.insert("x-github-event", HeaderValue::from_static("ping"));
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    let body: &[u8] = b"{=1&payload=%7B%22a%22%3A1%7D";
    let receiver_doc = match hookledger_verify::extract::extract(
        hookledger_verify::Scheme::Github,
        None,
        &headers,
        body,
    ) {
        Ok(hookledger_verify::extract::Extracted::Event(meta)) => meta.document.into_owned(),
        other => panic!("{other:?}"),
    };
    let worker_doc = hookledger_verify::extract::document_of(body)
        .unwrap()
        .into_owned();
    assert_eq!(worker_doc, receiver_doc);
}
