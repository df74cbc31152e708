//! The worker contract (the lease is the ownership), what a handler may and may not do, and
//! ordering ties: each test fails on the design before the lease token and the `Tx` handle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use handlers::examples::stripe_subscriptions::SubscriptionChanged;
use hookledger_tests::fake_providers::{Answer, FakeServer};
use shared::config::ProviderApi;
use shared::db::Sql;
use shared::ledger::{self, CompleteError, Tx};
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError, Success},
    handler::Handler,
};
use tokio::sync::Notify;
use tokio_postgres::types::Type;

use crate::helpers::*;

/// One row per applied effect, with no conflict handling: a doubled effect is two rows.
static RECORD_EFFECT: Sql = Sql {
    text: "INSERT INTO effects (event_id) VALUES ($1)",
    types: &[Type::TEXT],
};

async fn create_effects_table(app: &TestApp) {
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE effects (event_id text NOT NULL)")
        .await
        .unwrap();
}

async fn effects(app: &TestApp, event_id: &str) -> i64 {
    let client = app.db.connect().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM effects WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .get(0)
}

/// A handler that does "external work" first (a wait, outside any transaction), then records
/// one effect row. `gate`, when set, makes the first call wait until notified.
#[derive(Default)]
struct External {
    calls: AtomicUsize,
    delay: Duration,
    gate: Option<Arc<Notify>>,
}

#[async_trait::async_trait]
impl Handler for External {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        // The downstream call: no statement has run, so no transaction is open yet.
        tokio::time::sleep(self.delay).await;
        if let (Some(gate), 0) = (&self.gate, call) {
            gate.notified().await;
        }
        tx.execute(&RECORD_EFFECT, &[&event.event_id]).await?;
        Ok(Effect {
            status: Success::Accepted,
            body: serde_json::json!({"recorded": event.event_id}),
        })
    }
}

fn register(worker: &mut worker::handler::AppState, handler: Arc<dyn Handler>) {
    worker
        .worker
        .handlers
        .register("stripe-deferred", "payment_intent.succeeded", handler);
}

#[tokio::test]
async fn a_deferred_handler_waiting_12_s_on_an_external_call_completes_exactly_once_with_default_settings(
) {
    let app = spawn_app().await;
    create_effects_table(&app).await;
    // Default settings: idle_in_transaction_session_timeout 10 s, handler timeout 30 s.
    assert_eq!(app.settings.database.idle_in_transaction_timeout_ms, 10_000);
    let mut worker = worker_for(&app);
    let handler = Arc::new(External {
        delay: Duration::from_secs(12),
        ..External::default()
    });
    register(&mut worker, handler.clone());
    let delivery = deferred(payment_intent_body("evt_slow_12", "ord_slow_12", 10));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);

    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!((summary.completed, summary.failed), (1, 0), "{summary:?}");
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "called once");
    assert_eq!(effects(&app, "evt_slow_12").await, 1);
    assert_eq!(
        row(&app, "evt_slow_12").await,
        ("completed".to_owned(), 1, None)
    );
}

#[tokio::test]
async fn a_handler_that_outlives_its_lease_cannot_complete_after_another_worker_re_leased_the_event(
) {
    let app = spawn_app().await;
    create_effects_table(&app).await;
    let gate = Arc::new(Notify::new());
    let handler = Arc::new(External {
        gate: Some(gate.clone()),
        ..External::default()
    });
    let mut first = worker_for(&app);
    let mut second = worker_for(&app);
    register(&mut first, handler.clone());
    register(&mut second, handler.clone());
    let delivery = deferred(payment_intent_body("evt_outlived", "ord_outlived", 10));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);

    let start = SystemTime::now();
    let slow =
        tokio::spawn(async move { first.worker.drain(move || start, plenty).await.unwrap() });
    // Wait until the first worker is inside the handler (its attempt started).
    while handler.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its lease (120 s) expires; another worker re-leases the event and completes it.
    let later = start + Duration::from_secs(121);
    let summary = second.worker.drain(move || later, plenty).await.unwrap();
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    // Now the first handler finishes its external work and tries to complete.
    gate.notify_one();
    let summary = slow.await.unwrap();
    assert_eq!((summary.completed, summary.lost), (0, 1), "{summary:?}");
    assert_eq!(effects(&app, "evt_outlived").await, 1, "exactly one effect");
    let (status, attempts, _) = row(&app, "evt_outlived").await;
    assert_eq!((status.as_str(), attempts), ("completed", 2));
}

#[tokio::test]
async fn a_live_worker_function_whose_lease_was_taken_over_is_fenced_and_reports_it_lost() {
    let app = spawn_app().await;
    create_effects_table(&app).await;
    let gate = Arc::new(Notify::new());
    let handler = Arc::new(External {
        gate: Some(gate.clone()),
        ..External::default()
    });
    let mut first = worker_for(&app);
    let mut second = worker_for(&app);
    register(&mut first, handler.clone());
    register(&mut second, handler.clone());
    let delivery = deferred(payment_intent_body("evt_fenced_fn", "ord_fenced_fn", 10));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);

    let (logs, _guard) = capture_logs();
    // The worker function itself, invoked by the schedule with a minute to run.
    let payload = hookledger_tests::EventFile::load("worker/schedule.json")
        .unwrap()
        .json;
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + Duration::from_secs(60))
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let live = tokio::spawn(async move {
        worker::handler::function_handler(
            &first,
            lambda_runtime::LambdaEvent::new(payload, context),
        )
        .await
        .unwrap()
    });
    // Wait until the live worker is inside the handler (its attempt started).
    tokio::time::timeout(Duration::from_secs(20), async {
        while handler.calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the live worker starts the attempt");
    // Its lease (120 s) is past; another worker re-leases the event and completes it.
    let later = SystemTime::now() + Duration::from_secs(121);
    let summary = second.worker.drain(move || later, plenty).await.unwrap();
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    assert!(
        !live.is_finished(),
        "the live worker is still in its handler"
    );
    // The live worker's handler finishes and tries to complete: fenced.
    gate.notify_one();
    let summary = live.await.unwrap();
    assert_eq!(
        (summary.leased, summary.completed, summary.lost),
        (1, 0, 1),
        "{summary:?}"
    );
    assert_eq!(
        effects(&app, "evt_fenced_fn").await,
        1,
        "exactly one effect"
    );
    let (status, attempts, _) = row(&app, "evt_fenced_fn").await;
    assert_eq!((status.as_str(), attempts), ("completed", 2));
    // Counted and logged: the lease_lost metric's line, and the function's drain line.
    let lost = logs.with("metric", "lease_lost");
    assert_eq!(lost.len(), 1, "{}", logs.text());
    assert_eq!(lost[0]["event_id"], "evt_fenced_fn");
    assert_eq!(lost[0]["source"], "stripe-deferred");
    let drains = logs.with("message", "drain");
    let live_drain: Vec<_> = drains.iter().filter(|line| line["lost"] == 1).collect();
    assert_eq!(live_drain.len(), 1, "{}", logs.text());
    assert_eq!(live_drain[0]["completed"], 0);
}

#[tokio::test]
async fn a_completion_that_matches_no_row_commits_none_of_the_handlers_writes() {
    let app = spawn_app().await;
    create_effects_table(&app).await;
    let delivery = deferred(payment_intent_body("evt_fenced", "ord_fenced", 10));
    assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
    let conn = app.receiver().pool.get().await.unwrap();
    let now = SystemTime::now();
    let leased = ledger::lease_due(&conn, now, now + Duration::from_secs(1), 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert!(ledger::start(&conn, &leased[0]).await.unwrap().is_some());
    // The lease expires and another worker takes the event over (a newer token).
    let later = now + Duration::from_secs(5);
    let taken = ledger::lease_due(&conn, later, later + Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);

    let mut tx = leased[0].tx(&conn);
    tx.execute(&RECORD_EFFECT, &[&"evt_fenced"]).await.unwrap();
    tx.defer(&RECORD_EFFECT, vec![Box::new("evt_fenced".to_owned())])
        .unwrap();
    let completed = tx
        .complete(
            ("stripe-deferred", "evt_fenced"),
            200,
            &serde_json::json!({}),
        )
        .await;
    assert!(
        matches!(completed, Err(CompleteError::Lost)),
        "{completed:?}"
    );
    assert_eq!(effects(&app, "evt_fenced").await, 0, "nothing committed");
    assert_eq!(row(&app, "evt_fenced").await.0, "processing");
    // The connection is clean afterwards.
    assert_eq!(
        conn.query_one("SELECT 1", &[])
            .await
            .unwrap()
            .get::<_, i32>(0),
        1
    );
}

#[tokio::test]
async fn a_payload_the_business_table_refuses_is_kept_dead_and_answered_2xx_so_the_provider_stops()
{
    let app = spawn_app().await;
    // Stripe sends lower-case ISO codes; "USD" violates orders' CHECK, for every retry.
    let body = String::from_utf8(payment_intent_body("evt_usd", "ord_usd", 500))
        .unwrap()
        .replace("\"usd\"", "\"USD\"");
    let delivery = stripe_body(body.into_bytes(), NOW);
    let first = app.receive("stripe", &delivery).await;
    assert_eq!(
        (first.status, first.outcome),
        (200, Outcome::Dead),
        "{first:?}"
    );
    let answer: serde_json::Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(answer["status"], "dead");
    assert_eq!(app.order_rows().await, 0, "the claim's writes rolled back");

    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT status::text, last_error, payload IS NOT NULL FROM webhook_event \
             WHERE event_id = 'evt_usd'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "dead");
    let error: String = row.get(1);
    assert!(error.contains("orders_currency_iso_4217"), "{error}");
    assert!(
        row.get::<_, bool>(2),
        "kept with its payload for the operator"
    );

    // A retry runs it again (the handler might have been fixed), fails the same way, and gets
    // the same 2xx; still no order, still one row.
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        (retry.status, retry.body.as_str()),
        (200, first.body.as_str())
    );
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.order_rows().await, 0);
    assert_eq!(
        crate::helpers::row(&app, "evt_usd").await.1,
        2,
        "one more attempt"
    );
}

#[tokio::test]
async fn a_fatal_deferred_error_is_dead_at_once_not_retried() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let body = String::from_utf8(payment_intent_body("evt_usd_d", "ord_usd_d", 500))
        .unwrap()
        .replace("\"usd\"", "\"USD\"");
    assert_eq!(
        app.receive("stripe-deferred", &deferred(body.into_bytes()))
            .await
            .status,
        202
    );
    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!((summary.dead, summary.failed), (1, 0), "{summary:?}");
    let (status, attempts, error) = row(&app, "evt_usd_d").await;
    assert_eq!((status.as_str(), attempts), ("dead", 1));
    assert!(error.unwrap().contains("fatal"));
    // Nothing is due later either.
    let later = SystemTime::now() + Duration::from_secs(86_400);
    assert_eq!(
        worker
            .worker
            .drain(move || later, plenty)
            .await
            .unwrap()
            .leased,
        0
    );
}

static COMMIT: Sql = Sql {
    text: "COMMIT",
    types: &[],
};

static SESSION_SET: Sql = Sql {
    text: "SET statement_timeout = 0",
    types: &[],
};

/// Writes an order through the Tx, then runs a statement a handler may not run (one that ends
/// the transaction or sets session state).
struct Committer(&'static Sql);

#[async_trait::async_trait]
impl Handler for Committer {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let effect = handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await?;
        tx.execute(self.0, &[]).await?;
        Ok(effect)
    }
}

#[tokio::test]
async fn a_handler_cannot_commit_or_set_session_state_through_its_transaction() {
    for (n, sql) in [&COMMIT, &SESSION_SET].into_iter().enumerate() {
        let mut app = spawn_app().await;
        app.state.receiver.handlers.register(
            "stripe",
            "payment_intent.succeeded",
            Arc::new(Committer(sql)),
        );
        let id = format!("evt_commit_{n}");
        let reply = app
            .receive("stripe", &stripe_payment(&id, &id, 5, NOW))
            .await;
        assert_eq!(reply.outcome, Outcome::Dead, "{reply:?}");
        assert_eq!(app.order_rows().await, 0, "{}: nothing committed", sql.text);
        let (_, _, error) = row(&app, &id).await;
        assert!(error.unwrap().contains("may not run"));
    }
}

static TEXT_VALUE: Sql = Sql {
    text: "SELECT 'not a number'::text",
    types: &[],
};

/// Reads a text column as a number: a conversion bug in the handler, with no SQLSTATE.
struct ConversionBug;

#[async_trait::async_trait]
impl Handler for ConversionBug {
    async fn handle(&self, tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        let row = tx.query_opt(&TEXT_VALUE, &[]).await?;
        let value: i64 = row
            .ok_or_else(|| HandlerError::retryable("no row"))?
            .try_get(0)?;
        Ok(Effect::ok(serde_json::json!({ "value": value })))
    }
}

#[tokio::test]
async fn an_error_without_a_sqlstate_is_a_500_not_database_unavailable() {
    let mut app = spawn_app().await;
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        Arc::new(ConversionBug),
    );
    let reply = app
        .receive("stripe", &stripe_payment("evt_conv", "ord_conv", 5, NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (500, Outcome::HandlerFailed),
        "{reply:?}"
    );
    assert_eq!(
        app.ledger_rows().await,
        0,
        "rolled back; the provider retries clean"
    );
}

/// Returns a 201 effect.
struct Created;

#[async_trait::async_trait]
impl Handler for Created {
    async fn handle(&self, _tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        Ok(Effect {
            status: Success::Created,
            body: serde_json::json!({"created": true}),
        })
    }
}

#[tokio::test]
async fn an_effect_status_is_a_2xx_stored_and_replayed_verbatim() {
    let mut app = spawn_app().await;
    app.state
        .receiver
        .handlers
        .register("stripe", "payment_intent.succeeded", Arc::new(Created));
    let delivery = stripe_payment("evt_201", "ord_201", 5, NOW);
    let first = app.receive("stripe", &delivery).await;
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!((first.status, retry.status), (201, 201));
    assert_eq!(first.body, retry.body);
    assert!(retry.replayed);
}

/// A receiver whose Stripe subscription handler resolves ties through a fake Stripe API that
/// answers `GET /v1/subscriptions/sub_tie` with `answer` (status, JSON).
async fn app_with_fake_stripe(answer: (u16, serde_json::Value)) -> (TestApp, FakeServer) {
    let mut app = spawn_app().await;
    let (status, body) = answer;
    let stripe = FakeServer::start(move |request| {
        if request.method == "GET" && request.path == "/v1/subscriptions/sub_tie" {
            Answer::json(status, &body)
        } else {
            Answer::json(404, &serde_json::json!({"error": "no such route"}))
        }
    })
    .await
    .unwrap();
    let handler = Arc::new(SubscriptionChanged::new(Some(ProviderApi {
        base_url: stripe.base_url.clone(),
        key: "rk_test_local".to_owned().into(),
    })));
    app.state.receiver.handlers.register(
        "stripe",
        "customer.subscription.updated",
        handler as Arc<dyn Handler>,
    );
    (app, stripe)
}

fn subscription(event_id: &str, created: i64, plan: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "type": "customer.subscription.updated",
        "created": created,
        "data": {"object": {
            "id": "sub_tie", "object": "subscription", "customer": "cus_1",
            "status": "active", "items": {"data": [{"price": {"id": plan}}]}
        }}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_version_tie_is_resolved_by_re_fetching_the_subscription_from_stripe() {
    let (app, stripe) = app_with_fake_stripe((
        200,
        serde_json::json!({
            "id": "sub_tie", "object": "subscription", "customer": "cus_1",
            "status": "past_due", "items": {"data": [{"price": {"id": "price_now"}}]}
        }),
    ))
    .await;
    // Two changes within one second: the same version.
    let first = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_c", 9_000, "price_a"), NOW),
        )
        .await;
    assert_eq!(first.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u", 9_000, "price_b"), NOW),
        )
        .await;
    let answer: serde_json::Value = serde_json::from_str(&tie.body).unwrap();
    assert_eq!(answer["status"], "tie_resolved", "{tie:?}");

    let client = app.db.connect().await.unwrap();
    let state = client
        .query_one(
            "SELECT plan, status FROM subscriptions WHERE subscription_id = 'sub_tie'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (state.get::<_, String>(0), state.get::<_, String>(1)),
        ("price_now".to_owned(), "past_due".to_owned()),
        "Stripe's current state, not the first event's"
    );
    let resolved: bool = client
        .query_one("SELECT resolved FROM ordering_tie", &[])
        .await
        .unwrap()
        .get(0);
    assert!(resolved);
    let seen = stripe.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/subscriptions/sub_tie");
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer rk_test_local")
    );
}

#[tokio::test]
async fn a_tie_whose_re_fetch_fails_is_retried_not_dropped() {
    let (app, _stripe) = app_with_fake_stripe((503, serde_json::json!({"error": "down"}))).await;
    let first = stripe_body(subscription("evt_c2", 9_000, "price_a"), NOW);
    assert_eq!(app.receive("stripe", &first).await.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u2", 9_000, "price_b"), NOW),
        )
        .await;
    assert_eq!(
        (tie.status, tie.outcome),
        (500, Outcome::HandlerFailed),
        "{tie:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE event_id = 'evt_u2'")
            .await,
        0,
        "rolled back: the provider's retry tries again"
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

static HIDDEN_COMMIT: Sql = Sql {
    text: "/* a comment first */ COMMIT",
    types: &[],
};

static CR_COMMIT: Sql = Sql {
    text: "-- a comment ended by a carriage return\rCOMMIT",
    types: &[],
};

/// Records one effect, then tries to commit it itself (which would make it durable whatever
/// the lease or the claim says), then fails retryably the first time.
struct CommitsThenFails {
    commit: &'static Sql,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for CommitsThenFails {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        tx.execute(&RECORD_EFFECT, &[&event.event_id]).await?;
        if call == 0 {
            tx.execute(self.commit, &[]).await?;
            return Err(HandlerError::retryable("downstream failed after the write"));
        }
        Ok(Effect::ok(serde_json::json!({"ok": true})))
    }
}

#[tokio::test]
async fn a_commit_behind_a_comment_is_refused_and_cannot_double_a_deferred_effect() {
    for (n, commit) in [&HIDDEN_COMMIT, &CR_COMMIT].into_iter().enumerate() {
        let app = spawn_app().await;
        create_effects_table(&app).await;
        let mut worker = worker_for(&app);
        register(
            &mut worker,
            Arc::new(CommitsThenFails {
                commit,
                calls: AtomicUsize::new(0),
            }),
        );
        let id = format!("evt_sneaky_{n}");
        let delivery = deferred(payment_intent_body(&id, &id, 1));
        assert_eq!(app.receive("stripe-deferred", &delivery).await.status, 202);
        let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
        assert_eq!(summary.dead, 1, "{:?}: {summary:?}", commit.text);
        assert_eq!(
            effects(&app, &id).await,
            0,
            "nothing committed by the handler"
        );
        let (status, _, error) = row(&app, &id).await;
        assert_eq!(status, "dead");
        assert!(error.unwrap().contains("may not run"));
    }
}

static SESSION_OFF: Sql = Sql {
    text: "SELECT set_config('application_name', 'hijacked', false)",
    types: &[],
};

static DEALLOCATE: Sql = Sql {
    text: "DEALLOCATE ALL",
    types: &[],
};

#[tokio::test]
async fn session_state_set_from_a_handler_is_refused_and_never_reaches_the_next_delivery() {
    for (n, sql) in [&SESSION_OFF, &DEALLOCATE].into_iter().enumerate() {
        // One pooled connection: the next delivery gets the same session.
        let mut app = spawn_app_with(1, 2_000).await;
        app.state.receiver.handlers.register(
            "stripe",
            "payment_intent.succeeded",
            Arc::new(Committer(sql)),
        );
        let id = format!("evt_session_{n}");
        let reply = app
            .receive("stripe", &stripe_payment(&id, &id, 5, NOW))
            .await;
        assert_eq!(reply.outcome, Outcome::Dead, "{}: {reply:?}", sql.text);
        // The next, unrelated delivery on the same session works with the server's defaults.
        let next = app
            .receive(
                "github",
                &github(&format!("gh-{n}"), "ping", r#"{"zen":"x"}"#),
            )
            .await;
        assert_eq!(next.status, 200, "{next:?}");
        let conn = app.receiver().pool.get().await.unwrap();
        let setting: String = conn
            .query_one("SELECT current_setting('application_name')", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(setting, "hookledger");
    }
}

/// Fails fatally while `failing` is set, records the order otherwise.
#[derive(Default)]
struct FatalUntilFixed {
    failing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Handler for FatalUntilFixed {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(HandlerError::fatal("handler bug: field missing"));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn a_redelivered_dead_event_runs_again_once_the_handler_is_fixed() {
    let mut app = spawn_app().await;
    let handler = Arc::new(FatalUntilFixed::default());
    handler.failing.store(true, Ordering::SeqCst);
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_fixed", "ord_fixed", 5, NOW);
    let first = app.receive("stripe", &delivery).await;
    assert_eq!((first.status, first.outcome), (200, Outcome::Dead));
    // Still broken: dead again, one more attempt, the same answer.
    let again = app.receive("stripe", &delivery).await;
    assert_eq!(
        (again.status, again.body.as_str()),
        (200, first.body.as_str())
    );
    assert_eq!(row(&app, "evt_fixed").await.1, 2);
    // Fixed: the provider's resend is processed, exactly once.
    handler.failing.store(false, Ordering::SeqCst);
    let resent = app.receive("stripe", &delivery).await;
    assert_eq!(
        (resent.status, resent.outcome),
        (200, Outcome::Processed),
        "{resent:?}"
    );
    assert_eq!(row(&app, "evt_fixed").await.0, "completed");
    assert_eq!(app.order_rows().await, 1);
    let replay = app.receive("stripe", &delivery).await;
    assert_eq!(replay.outcome, Outcome::Replayed);
    assert_eq!(app.order_rows().await, 1);
}

/// Answers with a body jsonb cannot store.
struct NulInBody;

#[async_trait::async_trait]
impl Handler for NulInBody {
    async fn handle(&self, _tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        Ok(Effect::ok(serde_json::json!({"note": "a\u{0}b"})))
    }
}

#[tokio::test]
async fn a_response_body_the_ledger_cannot_store_is_fatal_not_a_500_for_ever() {
    let mut app = spawn_app().await;
    app.state
        .receiver
        .handlers
        .register("stripe", "payment_intent.succeeded", Arc::new(NulInBody));
    let reply = app
        .receive("stripe", &stripe_payment("evt_nul", "ord_nul", 5, NOW))
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Dead),
        "{reply:?}"
    );
    let (_, _, error) = row(&app, "evt_nul").await;
    assert!(error.unwrap().contains("22P05"));
}

/// Inserts a row keyed by the order id without conflict handling: a naive receiver's effect.
static NAIVE_INSERT: Sql = Sql {
    text: "INSERT INTO effects (event_id) VALUES ($1)",
    types: &[Type::TEXT],
};

struct Naive;

#[async_trait::async_trait]
impl Handler for Naive {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        tx.execute(&NAIVE_INSERT, &[&event.event_id]).await?;
        Ok(Effect::ok(serde_json::json!({"ok": true})))
    }
}

#[tokio::test]
async fn an_inline_shadow_duplicate_whose_run_fails_gets_the_stored_answer_not_a_500() {
    let mut app = spawn_app().await;
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE effects (event_id text PRIMARY KEY)")
        .await
        .unwrap();
    let json = r#"[{"name": "stripe", "scheme": "stripe", "shadow": true,
                    "secrets": ["whsec_hookledger_local_development_secret"]}]"#;
    app.settings.sources = shared::Sources::from_json(json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::registry(&app.settings.sources),
    );
    app.state
        .receiver
        .handlers
        .register("stripe", "payment_intent.succeeded", Arc::new(Naive));
    let delivery = stripe_payment("evt_shadow_fail", "ord_shadow_fail", 5, NOW);
    let first = app.receive("stripe", &delivery).await;
    assert_eq!(first.status, 200);
    // The shadow run hits the primary key (23505, fatal); the provider still gets the answer
    // enforcement gives.
    let duplicate = app.receive("stripe", &delivery).await;
    assert_eq!(
        (duplicate.status, duplicate.body.as_str()),
        (200, first.body.as_str())
    );
    assert!(duplicate.replayed, "{duplicate:?}");
}

#[tokio::test]
async fn a_re_fetch_that_answers_about_another_object_does_not_resolve_the_tie() {
    let (app, _stripe) = app_with_fake_stripe((
        200,
        serde_json::json!({"id": "sub_OTHER", "object": "subscription", "status": "canceled"}),
    ))
    .await;
    let first = stripe_body(subscription("evt_c3", 9_000, "price_a"), NOW);
    assert_eq!(app.receive("stripe", &first).await.status, 200);
    let tie = app
        .receive(
            "stripe",
            &stripe_body(subscription("evt_u3", 9_000, "price_b"), NOW),
        )
        .await;
    assert_eq!(
        (tie.status, tie.outcome),
        (500, Outcome::HandlerFailed),
        "{tie:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM subscriptions WHERE subscription_id = 'sub_OTHER'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM ordering_tie").await,
        0,
        "rolled back"
    );
}
