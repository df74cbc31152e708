//! The receive path when the network to PostgreSQL goes half-open (a failover, a dead NAT
//! entry): nothing answers and nothing is reset, so neither `statement_timeout` (server-side)
//! nor TCP keepalives can end the wait. The receiver's pool reaches the test database through
//! `chaos::proxy`, which stops forwarding without closing either socket. Every delivery must
//! answer 503 with `Retry-After` within the client-side deadline
//! (`DatabaseSettings::client_deadline`), the connection it abandoned must never be handed out
//! again, and deliveries succeed again once the path is back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chaos::proxy::Proxy;
use shared::config::DatabaseSettings;
use shared::Outcome;

use crate::helpers::*;

/// The limits of these tests: statement 1 s, lock 0.5 s, idle in transaction 2 s; the client
/// deadline is then statement + 1 s = 2 s.
fn fast_limits(database: &mut DatabaseSettings) {
    database.statement_timeout_ms = 1_000;
    database.lock_timeout_ms = 500;
    database.idle_in_transaction_timeout_ms = 2_000;
}

/// How long past the deadline a test waits before calling the delivery hung.
const HUNG_AFTER: Duration = Duration::from_secs(6);

/// A receiver (one pooled connection, so a connection wrongly returned to the pool is the one
/// the next delivery gets) over a fresh database reached through a proxy.
async fn app_through_proxy() -> (TestApp, Proxy) {
    let db = hookledger_tests::test_db().await.expect("test database");
    let url = url::Url::parse(&db.url).unwrap();
    let upstream: SocketAddr =
        format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432))
            .parse()
            .unwrap();
    let proxy = Proxy::start(upstream).await.unwrap();
    let mut through = url.clone();
    through.set_port(Some(proxy.local_addr().port())).unwrap();
    let mut database = DatabaseSettings::with_url(through.to_string());
    database.pool_size = 1;
    fast_limits(&mut database);
    (spawn_app_over(db, database), proxy)
}

/// Receives `delivery` for `source`, failing (not hanging) when it takes longer than the
/// deadline plus [`HUNG_AFTER`]; returns the reply and how long it took.
async fn bounded(app: &TestApp, source: &str, delivery: &Delivery) -> (shared::Reply, Duration) {
    let deadline = app.settings.database.client_deadline();
    let started = Instant::now();
    match tokio::time::timeout(deadline + HUNG_AFTER, app.receive(source, delivery)).await {
        Ok(reply) => (reply, started.elapsed()),
        Err(_) => panic!(
            "the delivery hung for {:?} (client deadline {deadline:?}) through a half-open network",
            started.elapsed()
        ),
    }
}

/// [`bounded`] for a signed Stripe payment `event_id` for `order`, `amount` in cents.
async fn bounded_payment(
    app: &TestApp,
    event_id: &str,
    order: &str,
    amount: i64,
) -> (shared::Reply, Duration) {
    bounded(app, "stripe", &stripe_payment(event_id, order, amount, NOW)).await
}

/// One drain of `worker` with its clock past the lease (`lease_secs + 1` s ahead), bounded
/// by the client deadline plus [`HUNG_AFTER`]; panics with `hung` when it does not end.
async fn drain_past_lease(
    app: &TestApp,
    worker: &worker::handler::AppState,
    hung: &str,
) -> shared::work::Summary {
    let later =
        std::time::SystemTime::now() + Duration::from_secs(app.settings.worker.lease_secs + 1);
    let deadline = app.settings.database.client_deadline();
    tokio::time::timeout(
        deadline + HUNG_AFTER,
        worker.worker.drain(move || later, plenty),
    )
    .await
    .expect(hung)
    .unwrap()
}

fn assert_unavailable_within(reply: &shared::Reply, took: Duration, deadline: Duration) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.outcome, Outcome::Unavailable);
    assert_eq!(reply.retry_after, Some(shared::receive::RETRY_AFTER_SECS));
    // The deadline, plus scheduling slack on a loaded 2-core machine.
    assert!(
        took < deadline + Duration::from_millis(500),
        "answered after {took:?}, over the deadline {deadline:?}"
    );
}

#[tokio::test]
async fn a_half_open_database_path_answers_503_within_the_deadline_and_recovers() {
    let (app, proxy) = app_through_proxy().await;
    let deadline = app.settings.database.client_deadline();
    assert_eq!(deadline, Duration::from_millis(2_000));

    // Paused before the pool has any connection: opening one must be bounded too.
    proxy.pause();
    let (reply, took) = bounded_payment(&app, "evt_ho_1", "o_ho_1", 100).await;
    assert_unavailable_within(&reply, took, deadline);
    proxy.resume();

    let (reply, _) = bounded_payment(&app, "evt_ho_1", "o_ho_1", 100).await;
    assert_eq!(reply.status, 200, "{reply:?}");

    // Paused with a warm connection, inline and deferred.
    proxy.pause();
    let (reply, took) = bounded_payment(&app, "evt_ho_2", "o_ho_2", 200).await;
    assert_unavailable_within(&reply, took, deadline);
    let body = payment_intent_body("evt_ho_3", "o_ho_3", 300);
    let (reply, took) = bounded(&app, "stripe-deferred", &deferred(body.clone())).await;
    assert_unavailable_within(&reply, took, deadline);
    proxy.resume();

    // Back: the retries succeed, each event once.
    let (reply, _) = bounded_payment(&app, "evt_ho_2", "o_ho_2", 200).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let (reply, _) = bounded(&app, "stripe-deferred", &deferred(body)).await;
    assert_eq!(reply.status, 202, "{reply:?}");
    assert_eq!(app.order_rows().await, 2);
    assert_eq!(app.ledger_rows().await, 3);
}

#[tokio::test]
async fn a_connection_stranded_by_a_dead_network_path_is_never_handed_out_again() {
    let (app, proxy) = app_through_proxy().await;
    let deadline = app.settings.database.client_deadline();
    let (reply, _) = bounded_payment(&app, "evt_st_1", "o_st_1", 100).await;
    assert_eq!(reply.status, 200, "{reply:?}");

    // The pool's one connection goes dead for good (new connections work).
    proxy.strand();
    let (reply, took) = bounded_payment(&app, "evt_st_2", "o_st_2", 200).await;
    assert_unavailable_within(&reply, took, deadline);

    // The retry gets a new connection, not the dead one back from the pool.
    let (reply, _) = bounded_payment(&app, "evt_st_2", "o_st_2", 200).await;
    assert_eq!(
        reply.status, 200,
        "the dead connection was reused: {reply:?}"
    );
    assert_eq!(proxy.counters().accepted, 2);
    assert_eq!(app.order_rows().await, 2);
}

/// The worker under the same fault: a drain whose pooled connection went dead for good must
/// end within the client deadline (not the Lambda timeout, 300 s), close that connection,
/// mark nothing, and the next drain (on a fresh connection) completes the event once.
#[tokio::test]
async fn a_worker_drain_on_a_stranded_connection_ends_within_a_bound() {
    let (app, proxy) = app_through_proxy().await;
    let deadline = app.settings.database.client_deadline();
    let worker = worker_for(&app);
    let body = payment_intent_body("evt_w_1", "o_w_1", 100);
    assert_eq!(
        app.receive("stripe-deferred", &deferred(body)).await.status,
        202
    );
    // A first drain warms the pool's one connection.
    let summary = worker
        .worker
        .drain(std::time::SystemTime::now, plenty)
        .await
        .unwrap();
    assert_eq!(summary.completed, 1, "{summary:?}");
    let body = payment_intent_body("evt_w_2", "o_w_2", 100);
    assert_eq!(
        app.receive("stripe-deferred", &deferred(body)).await.status,
        202
    );
    proxy.strand();
    let started = Instant::now();
    let drained = tokio::time::timeout(
        deadline + HUNG_AFTER,
        worker.worker.drain(std::time::SystemTime::now, plenty),
    )
    .await;
    let took = started.elapsed();
    let Ok(drained) = drained else {
        panic!("the worker's drain was still waiting on a dead connection after {took:?}");
    };
    let summary = drained.expect("a deadline is a summary entry, not a failed drain");
    eprintln!("stranded drain ended after {took:?} (client deadline {deadline:?}): {summary:?}");
    // The lease step's deadline, plus the outbox step on a fresh connection and slack.
    assert!(
        took < deadline + Duration::from_millis(1_500),
        "the drain ended after {took:?}, over the deadline {deadline:?}"
    );
    assert_eq!(summary.deadlines, 1, "{summary:?}");
    assert_eq!(summary.completed, 0, "{summary:?}");
    assert_eq!(row(&app, "evt_w_2").await.1, 0, "no attempt was charged");

    // The next drain gets a fresh connection, not the dead one back, and completes the event;
    // its clock is past any lease the stranded statement might have taken.
    let summary = drain_past_lease(
        &app,
        &worker,
        "the next drain hung: the dead connection was reused",
    )
    .await;
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(summary.deadlines, 0, "{summary:?}");
    let (status, attempts, _) = row(&app, "evt_w_2").await;
    assert_eq!((status.as_str(), attempts), ("completed", 1));
    // Nothing doubled: one order per event, and the stranded connection was never reused
    // (it plus one fresh connection for the outbox step, kept in the pool for the next drain).
    assert_eq!(app.order_rows().await, 2);
    assert_eq!(app.ledger_rows().await, 2);
    assert_eq!(proxy.counters().accepted, 2);
}

/// The outbox step under the same fault, at its worst moment: the connection strands while
/// the target is being sent the message, so recording the delivery cannot get through. The
/// drain must end within the client deadline, leave the message `processing` (not marked
/// anything), and the next drain after its lease expired sends it again with the same
/// idempotency key and records it delivered once, on a fresh connection.
#[tokio::test]
async fn an_outbox_record_on_a_stranded_connection_ends_within_a_bound_and_redispatches_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let db = hookledger_tests::test_db().await.expect("test database");
    let url = url::Url::parse(&db.url).unwrap();
    let upstream: SocketAddr =
        format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432))
            .parse()
            .unwrap();
    let proxy = Arc::new(Proxy::start(upstream).await.unwrap());
    // The target strands the worker's connection when the first message arrives.
    let armed = Arc::new(AtomicBool::new(false));
    let target = {
        let (proxy, armed) = (proxy.clone(), armed.clone());
        hookledger_tests::fake_providers::FakeServer::start(move |_| {
            if armed.swap(false, Ordering::SeqCst) {
                proxy.strand();
            }
            hookledger_tests::fake_providers::Answer::raw(200, "ok")
        })
        .await
        .unwrap()
    };
    let sources = serde_json::json!([
        {"name": "shop", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "inline", "tolerance_secs": 300,
         "targets": [{"name": "service", "type": "forward",
                      "url": format!("{}/service", target.base_url),
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "timeout_ms": 2000,
                      "event_types": ["order.*"]}]},
    ]);
    let mut through = url.clone();
    through.set_port(Some(proxy.local_addr().port())).unwrap();
    let mut database = DatabaseSettings::with_url(through.to_string());
    database.pool_size = 1;
    fast_limits(&mut database);
    let app = spawn_app_over_sources(db, database, &sources.to_string());
    let deadline = app.settings.database.client_deadline();
    let worker = worker_for(&app);
    let body = serde_json::json!({"type": "order.paid", "data": {"order": 1}}).to_string();
    let reply = app
        .receive("shop", &standard("msg_ho_out", &body, NOW))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");

    armed.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let summary = tokio::time::timeout(
        deadline + HUNG_AFTER,
        worker.worker.drain(std::time::SystemTime::now, plenty),
    )
    .await
    .expect("the outbox step was still waiting on a dead connection")
    .expect("a deadline is a summary entry, not a failed drain");
    let took = started.elapsed();
    eprintln!("stranded outbox drain ended after {took:?} (deadline {deadline:?}): {summary:?}");
    assert!(
        took < deadline + Duration::from_millis(1_500),
        "the drain ended after {took:?}, over the deadline {deadline:?}"
    );
    assert_eq!(target.requests().len(), 1, "dispatched once");
    assert_eq!(
        (
            summary.outbox.abandoned,
            summary.outbox.deadlines,
            summary.outbox.delivered
        ),
        (1, 1, 0),
        "{summary:?}"
    );
    assert_eq!(
        outbox_status(&app).await,
        "processing",
        "nothing was marked"
    );

    // Past the lease: dispatched again with the same key, recorded once, on a fresh connection.
    let summary = drain_past_lease(
        &app,
        &worker,
        "the next drain hung: the dead connection was reused",
    )
    .await;
    assert_eq!(summary.outbox.delivered, 1, "{summary:?}");
    assert_eq!(summary.outbox.deadlines, 0, "{summary:?}");
    assert_eq!(outbox_status(&app).await, "delivered");
    let ids: Vec<String> = target
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").unwrap_or("").to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same idempotency key both times");
}

/// The status of the one outbox message.
async fn outbox_status(app: &TestApp) -> String {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one("SELECT status::text FROM outbox", &[])
        .await
        .unwrap();
    row.get(0)
}

/// A handler doing business database work through the worker's `Tx` when the database stops
/// answering altogether (the proxy paused, so new connections hang too): its statement never
/// returns, the handler timeout ends the run, the cancel request and the failure's record
/// (each needing a new connection) are bounded by the client deadline, and the drain stops
/// instead of waiting for the Lambda timeout. Once the path is back, the event comes back when
/// its lease expires and completes once.
#[tokio::test]
async fn a_handler_s_statement_on_a_dead_database_path_is_bounded_and_the_event_completes_once() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use shared::db::Sql;
    use shared::ledger::Tx;
    use shared::{
        effect::{Effect, Event, HandlerError},
        handler::Handler,
    };

    static PROBE: Sql = Sql {
        text: "SELECT 1",
        types: &[],
    };

    /// Pauses the proxy (once, when armed) and then runs a statement; counts its completions.
    struct Stalling {
        proxy: Arc<Proxy>,
        armed: AtomicBool,
        completed: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Handler for Stalling {
        async fn handle(&self, tx: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
            if self.armed.swap(false, Ordering::SeqCst) {
                self.proxy.pause();
            }
            tx.execute(&PROBE, &[]).await?;
            self.completed.fetch_add(1, Ordering::SeqCst);
            Ok(Effect::ok(serde_json::json!({"probed": true})))
        }
    }

    let db = hookledger_tests::test_db().await.expect("test database");
    let url = url::Url::parse(&db.url).unwrap();
    let upstream: SocketAddr =
        format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432))
            .parse()
            .unwrap();
    let proxy = Arc::new(Proxy::start(upstream).await.unwrap());
    let mut through = url.clone();
    through.set_port(Some(proxy.local_addr().port())).unwrap();
    let mut database = DatabaseSettings::with_url(through.to_string());
    database.pool_size = 1;
    fast_limits(&mut database);
    let app = spawn_app_over(db, database);
    let deadline = app.settings.database.client_deadline();
    let mut worker = worker_for(&app);
    let handler_timeout = Duration::from_millis(1_000);
    worker.worker.settings.handler_timeout_ms = handler_timeout.as_millis() as u64;
    let stalling = Arc::new(Stalling {
        proxy: proxy.clone(),
        armed: AtomicBool::new(true),
        completed: AtomicUsize::new(0),
    });
    worker.worker.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        stalling.clone() as Arc<dyn Handler>,
    );
    let body = payment_intent_body("evt_w_tx", "o_w_tx", 100);
    assert_eq!(
        app.receive("stripe-deferred", &deferred(body)).await.status,
        202
    );

    let started = Instant::now();
    let summary = tokio::time::timeout(
        handler_timeout + 2 * deadline + HUNG_AFTER,
        worker.worker.drain(std::time::SystemTime::now, plenty),
    )
    .await
    .expect("the drain was still waiting on a dead database path")
    .expect("a deadline is a summary entry, not a failed drain");
    let took = started.elapsed();
    eprintln!(
        "drain with a dead path mid-handler ended after {took:?} (handler timeout \
         {handler_timeout:?}, deadline {deadline:?}): {summary:?}"
    );
    // The handler timeout, then the cancel's and the record's deadlines, plus slack.
    assert!(
        took < handler_timeout + 2 * deadline + Duration::from_millis(1_500),
        "the drain ended after {took:?}"
    );
    assert_eq!(
        (
            summary.leased,
            summary.abandoned,
            summary.deadlines,
            summary.completed
        ),
        (1, 1, 1, 0),
        "{summary:?}"
    );
    proxy.resume();
    let (status, attempts, _) = row(&app, "evt_w_tx").await;
    assert_eq!(
        (status.as_str(), attempts),
        ("processing", 1),
        "the started attempt counts"
    );

    // Back, and past the lease: the event completes once.
    let summary = drain_past_lease(&app, &worker, "the next drain hung").await;
    assert_eq!(summary.completed, 1, "{summary:?}");
    let (status, attempts, _) = row(&app, "evt_w_tx").await;
    assert_eq!((status.as_str(), attempts), ("completed", 2));
    assert_eq!(stalling.completed.load(Ordering::SeqCst), 1);
}
