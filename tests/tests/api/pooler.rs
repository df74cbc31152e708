//! The receive path behind pgbouncer 1.18 in transaction mode (started by `make test`,
//! scripts/with-pgbouncer.sh), with the statement cache off: what RDS Proxy and pgbouncer users
//! run. pgbouncer refuses start-up `options` and, in transaction mode, hands every transaction
//! whichever server connection is free, so the session timeouts must travel inside each
//! transaction and no statement may outlive one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use shared::db::Sql;
use shared::ledger::Tx;
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio::sync::Notify;
use tokio_postgres::SimpleQueryMessage;

use crate::helpers::*;

/// `(name, setting)` rows of a simple query, in order.
async fn simple_rows(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<String>> {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or("").to_owned())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// A plain client of the pooler for the app's database, with no start-up options.
async fn pooler_client(app: &TestApp) -> tokio_postgres::Client {
    let url = hookledger_tests::db_pooler_url(&app.db).unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Transactions pgbouncer has carried for the app's database (its admin console, `SHOW STATS`).
async fn pooled_transactions(app: &TestApp) -> i64 {
    let url =
        hookledger_tests::url_with_database(&hookledger_tests::pooler_url().unwrap(), "pgbouncer")
            .unwrap();
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let messages = admin.simple_query("SHOW STATS").await.unwrap();
    messages
        .iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) if row.get("database") == Some(app.db.name.as_str()) => {
                row.get("total_xact_count").and_then(|n| n.parse().ok())
            }
            _ => None,
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_payment_and_its_retry_through_pgbouncer_have_one_effect() {
    let app = spawn_app_behind_pooler(4, 2_000, false).await;
    let first = app
        .receive("stripe", &stripe_payment("evt_pool", "ord_pool", 4999, NOW))
        .await;
    assert_eq!(
        (first.status, first.outcome),
        (200, Outcome::Processed),
        "{first:?}"
    );
    assert!(!first.replayed);

    let retry = stripe_payment("evt_pool", "ord_pool", 4999, NOW + 60);
    let second = app
        .receiver()
        .receive("stripe", &retry.headers, &retry.body, NOW + 60)
        .await;
    assert_eq!(
        (second.status, second.outcome),
        (200, Outcome::Replayed),
        "{second:?}"
    );
    assert!(second.replayed, "Idempotent-Replayed on the retry");
    assert_eq!(second.body, first.body, "byte-for-byte the same body");
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.order_rows().await, 1);
    assert!(
        pooled_transactions(&app).await >= 2,
        "the app's transactions went through pgbouncer"
    );
}

static SHOW_TIMEOUTS: Sql = Sql {
    text: "SELECT name, setting FROM pg_settings WHERE name IN \
           ('idle_in_transaction_session_timeout', 'lock_timeout', 'statement_timeout') \
           ORDER BY name",
    types: &[],
};

/// Records the session timeouts in force inside the claim's transaction, then records the order.
#[derive(Default)]
struct ShowTimeouts {
    seen: Mutex<Vec<Vec<String>>>,
}

#[async_trait::async_trait]
impl Handler for ShowTimeouts {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        let rows = tx
            .query(&SHOW_TIMEOUTS, &[])
            .await?
            .iter()
            .map(|row| vec![row.get::<_, String>(0), row.get::<_, String>(1)])
            .collect();
        *self.seen.lock().unwrap() = rows;
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn the_configured_timeouts_hold_inside_the_claim_and_do_not_leak_to_other_clients() {
    // One pooled connection, used in turn: pgbouncer then needs one server connection, and a
    // later client gets that same one (pgbouncer reuses the most recently used server).
    let mut app = spawn_app_behind_pooler(1, 2_000, false).await;
    let mut database = app.settings.database.clone();
    database.statement_timeout_ms = 4_321;
    database.lock_timeout_ms = 321;
    database.idle_in_transaction_timeout_ms = 9_876;
    app.settings.database = database;
    let pool = shared::db::pool(&app.settings.database).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        pool,
        handlers::examples::registry(&app.settings.sources),
    );
    let handler = Arc::new(ShowTimeouts::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );

    let reply = app
        .receive("stripe", &stripe_payment("evt_show", "ord_show", 1, NOW))
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let expected: Vec<Vec<String>> = [
        ("idle_in_transaction_session_timeout", "9876"),
        ("lock_timeout", "321"),
        ("statement_timeout", "4321"),
    ]
    .iter()
    .map(|(name, value)| vec![(*name).to_owned(), (*value).to_owned()])
    .collect();
    assert_eq!(
        *handler.seen.lock().unwrap(),
        expected,
        "the configured timeouts, in milliseconds, inside the claim's transaction"
    );

    // Another client of the pooler, on the server connection the app just used: the timeouts
    // were local to the app's transactions, and no named statement was left behind.
    let other = pooler_client(&app).await;
    let after = simple_rows(
        &other,
        "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), \
                (SELECT count(*) FROM pg_prepared_statements)",
    )
    .await;
    assert_eq!(
        after,
        [["0", "0", "0"].map(str::to_owned).to_vec()],
        "session defaults and no prepared statement on pgbouncer's server connection"
    );
}

/// Holds the claim's transaction open until released, then records the order.
#[derive(Default)]
struct Gate {
    calls: AtomicUsize,
    entered: Notify,
    release: Notify,
}

#[async_trait::async_trait]
impl Handler for Gate {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.entered.notify_one();
        self.release.notified().await;
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn an_in_flight_duplicate_through_pgbouncer_answers_409_within_lock_timeout() {
    let mut app = spawn_app_behind_pooler(4, 300, false).await;
    let gate = Arc::new(Gate::default());
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        gate.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_pool_wait", "ord_pool_wait", 250, NOW);

    let first = {
        let receiver = app.receiver().clone();
        let delivery = delivery.clone();
        tokio::spawn(async move {
            receiver
                .receive("stripe", &delivery.headers, &delivery.body, NOW)
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(10), gate.entered.notified())
        .await
        .expect("the first delivery reaches its handler (it claimed the event)");

    let started = Instant::now();
    let duplicate = {
        let receiver = app.receiver().clone();
        let delivery = delivery.clone();
        tokio::spawn(async move {
            let reply = receiver
                .receive("stripe", &delivery.headers, &delivery.body, NOW)
                .await;
            (reply, started.elapsed())
        })
    };
    // The duplicate's INSERT waits on the first's uncommitted row (seen on the server).
    wait_for_lock_waiter(&app).await;
    let (reply, waited) = match tokio::time::timeout(Duration::from_secs(5), duplicate).await {
        Ok(done) => done.unwrap(),
        Err(_) => {
            gate.release.notify_one();
            panic!("the duplicate still waits after 5 s: lock_timeout (300 ms) is not in force");
        }
    };
    assert_eq!(
        (reply.status, reply.outcome),
        (409, Outcome::InFlight),
        "{reply:?}"
    );
    assert!(reply.retry_after.is_some(), "Retry-After on the 409");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "waited {waited:?}: about lock_timeout (300 ms), not until the winner finishes"
    );
    assert_eq!(
        gate.calls.load(Ordering::SeqCst),
        1,
        "the duplicate never ran"
    );

    gate.release.notify_one();
    let first = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("the first delivery completes once released")
        .unwrap();
    assert_eq!(
        (first.status, first.outcome),
        (200, Outcome::Processed),
        "{first:?}"
    );
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.order_rows().await, 1);
    // The provider's retry after Retry-After gets the stored answer.
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        (retry.status, retry.body.as_str()),
        (200, first.body.as_str())
    );
    assert!(retry.replayed);
}

fn accepted_duplicate(reply: &shared::Reply) -> Option<bool> {
    serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()["duplicate"].as_bool()
}

#[tokio::test]
async fn a_deferred_event_through_pgbouncer_is_accepted_once_and_drained() {
    let app = spawn_app_behind_pooler(4, 2_000, false).await;
    let worker = worker_for(&app);
    let delivery = deferred(payment_intent_body("evt_pool_def", "ord_pool_def", 990));

    let first = app.receive("stripe-deferred", &delivery).await;
    assert_eq!(
        (first.status, accepted_duplicate(&first)),
        (202, Some(false)),
        "{first:?}"
    );
    let again = app.receive("stripe-deferred", &delivery).await;
    assert_eq!(
        (again.status, accepted_duplicate(&again)),
        (202, Some(true)),
        "{again:?}"
    );
    assert!(again.replayed);
    assert_eq!(row(&app, "evt_pool_def").await.0, "claimed");
    assert_eq!(app.order_rows().await, 0);

    let now = SystemTime::now();
    let summary = worker.worker.drain(move || now, plenty).await.unwrap();
    assert_eq!((summary.leased, summary.completed), (1, 1), "{summary:?}");
    assert_eq!(
        row(&app, "evt_pool_def").await,
        ("completed".to_owned(), 1, None)
    );
    assert_eq!(app.order_rows().await, 1);
    let late = app.receive("stripe-deferred", &delivery).await;
    assert_eq!((late.status, accepted_duplicate(&late)), (202, Some(true)));
    assert_eq!(
        worker
            .worker
            .drain(move || now, plenty)
            .await
            .unwrap()
            .leased,
        0
    );
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn fifty_concurrent_deliveries_through_pgbouncer_make_one_order() {
    // 50 clients share pgbouncer's 20 server connections for this database. A lock_timeout
    // far above the test's own waits: the duplicates can be seen waiting.
    let mut app = spawn_app_behind_pooler(50, 30_000, false).await;
    let handler = gated(&mut app);
    let delivery = stripe_payment("evt_pool_storm", "ord_pool_storm", 1234, NOW);
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
    // One delivery holds the claim inside its handler; the duplicates that got one of the
    // other 19 server connections wait in PostgreSQL on its row lock (the rest queue in
    // pgbouncer).
    tokio::time::timeout(Duration::from_secs(20), handler.entered.notified())
        .await
        .expect("one delivery reaches the handler");
    wait_for_lock_waiters(&app, 19).await;
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "nobody answered yet"
    );
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
    let original = processed[0].body.clone();
    for reply in &replies {
        match reply.status {
            200 => assert_eq!(reply.body, original),
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
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "one handler call");
}
