//! The worker's lease is its ownership of an event: a handler that outlives its lease cannot
//! complete once another worker has re-leased the event (it is fenced, reported `lease_lost`, and
//! none of its writes commit), while a slow handler inside its lease completes exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shared::db::Sql;
use shared::ledger::{self, CompleteError, Tx};
use shared::{
    effect::{Effect, Event, HandlerError, Success},
    handler::Handler,
};
use tokio::sync::Notify;
use tokio_postgres::types::Type;

use crate::helpers::*;

/// One row per applied effect, with no conflict handling: a doubled effect is two rows.
pub(crate) static RECORD_EFFECT: Sql = Sql {
    text: "INSERT INTO effects (event_id) VALUES ($1)",
    types: &[Type::TEXT],
};

pub(crate) async fn create_effects_table(app: &TestApp) {
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE effects (event_id text NOT NULL)")
        .await
        .unwrap();
}

pub(crate) async fn effects(app: &TestApp, event_id: &str) -> i64 {
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

pub(crate) fn register(worker: &mut worker::handler::AppState, handler: Arc<dyn Handler>) {
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
