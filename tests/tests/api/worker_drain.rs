//! A worker's drain, event by event: a handler's failure, panic or timeout (even with its
//! statement still running, even on a pool of one connection) fails that event's attempt only
//! and the drain goes on; an event is started only when its full timeout fits the time left, and
//! an outbox message without time for its target is given back without stopping the events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shared::ledger::Tx;
use shared::Sources;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use worker::handler::AppState as WorkerState;

use crate::helpers::*;

pub(crate) fn deferred_only(max_attempts: u32, shadow: bool) -> String {
    format!(
        r#"[{{"name": "stripe-deferred", "scheme": "stripe", "mode": "deferred",
             "max_attempts": {max_attempts}, "shadow": {shadow},
             "secrets": ["{DEFERRED_SECRET}"]}}]"#
    )
}

pub(crate) fn with_sources(app: &mut TestApp, json: &str) {
    app.settings.sources = Sources::from_json(json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
    );
}

pub(crate) async fn accept(app: &TestApp, id: &str) {
    let reply = app
        .receive("stripe-deferred", &deferred(payment_intent_body(id, id, 1)))
        .await;
    assert_eq!(reply.status, 202, "{reply:?}");
}

/// What to do per event id; everything else records the order.
#[derive(Default)]
pub(crate) struct Scripted {
    pub(crate) fail: Vec<&'static str>,
    pub(crate) panic: Vec<&'static str>,
    pub(crate) sleep_sql: Vec<(&'static str, f64)>,
    pub(crate) calls: Mutex<HashMap<String, usize>>,
}

impl Scripted {
    pub(crate) fn calls_for(&self, id: &str) -> usize {
        self.calls.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

static SLEEP: shared::db::Sql = shared::db::Sql {
    text: "SELECT pg_sleep($1)",
    types: &[tokio_postgres::types::Type::FLOAT8],
};

#[async_trait::async_trait]
impl Handler for Scripted {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(event.event_id.to_owned())
            .or_default() += 1;
        if self.panic.contains(&event.event_id) {
            panic!("poison event");
        }
        if let Some((_, secs)) = self.sleep_sql.iter().find(|(id, _)| *id == event.event_id) {
            tx.execute(&SLEEP, &[secs]).await?;
        }
        if self.fail.contains(&event.event_id) {
            return Err(HandlerError::retryable("scripted failure".to_owned()));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

fn register(worker: &mut WorkerState, handler: Arc<Scripted>) {
    worker.worker.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        handler as Arc<dyn Handler>,
    );
}

#[tokio::test]
async fn a_handler_failure_is_recorded_with_a_pool_of_one_connection() {
    // The template gives the worker one connection per execution environment.
    let app = spawn_app_with(1, 2_000).await;
    let mut worker = worker_for(&app);
    let handler = Arc::new(Scripted {
        fail: vec!["evt_p1_bad"],
        ..Default::default()
    });
    register(&mut worker, handler.clone());
    accept(&app, "evt_p1_bad").await;
    accept(&app, "evt_p1_good").await;
    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!((summary.failed, summary.completed), (1, 1), "{summary:?}");
    assert_eq!(row(&app, "evt_p1_bad").await.0, "failed");
    assert_eq!(row(&app, "evt_p1_good").await.0, "completed");
}

#[tokio::test]
async fn a_panicking_handler_fails_its_own_attempt_and_not_its_batch_mates() {
    let mut app = spawn_app().await;
    with_sources(&mut app, &deferred_only(2, false));
    let mut worker = worker_for(&app);
    let handler = Arc::new(Scripted {
        panic: vec!["evt_poison"],
        ..Default::default()
    });
    register(&mut worker, handler.clone());
    accept(&app, "evt_poison").await;
    accept(&app, "evt_innocent").await;
    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!((summary.failed, summary.completed), (1, 1), "{summary:?}");
    let poison = row(&app, "evt_poison").await;
    assert_eq!(poison.0, "failed");
    assert!(poison.2.unwrap().contains("panicked"));
    assert_eq!(
        (
            row(&app, "evt_innocent").await.0.as_str(),
            handler.calls_for("evt_innocent")
        ),
        ("completed", 1)
    );
}

#[tokio::test]
async fn a_timed_out_handler_with_a_running_statement_does_not_stop_the_drain() {
    let mut app = spawn_app().await;
    app.settings.worker.handler_timeout_ms = 300;
    let mut worker = worker_for(&app);
    let handler = Arc::new(Scripted {
        sleep_sql: vec![("evt_sql_slow", 4.0)],
        ..Default::default()
    });
    register(&mut worker, handler.clone());
    accept(&app, "evt_sql_slow").await;
    accept(&app, "evt_sql_next").await;
    let summary = worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    assert_eq!((summary.failed, summary.completed), (1, 1), "{summary:?}");
    let slow = row(&app, "evt_sql_slow").await;
    assert_eq!(slow.0, "failed", "{slow:?}");
    assert!(slow.2.unwrap().contains("timed out"));
    assert_eq!(row(&app, "evt_sql_next").await.0, "completed");
}

#[tokio::test]
async fn an_event_is_not_started_when_its_full_timeout_no_longer_fits() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    accept(&app, "evt_short").await;
    let settings = &app.settings.worker;
    let almost = Duration::from_millis(settings.margin_ms + settings.handler_timeout_ms - 1);
    let summary = worker
        .worker
        .drain(SystemTime::now, move || almost)
        .await
        .unwrap();
    assert_eq!(
        (summary.leased, summary.out_of_time),
        (0, true),
        "{summary:?}"
    );
    assert_eq!(
        row(&app, "evt_short").await,
        ("claimed".to_owned(), 0, None)
    );
}

/// Sources: `slowshop` (inline) whose only target has the longest timeout allowed (60 s), and
/// `lazyshop` (deferred, no target).
async fn slow_target_app(server: &RecordingTarget) -> TestApp {
    let extra = serde_json::json!([
        standard_source(
            "slowshop",
            "inline",
            serde_json::json!([forward_target(
                "slow",
                &format!("{}/slow", server.base_url),
                60_000,
                serde_json::json!(["*"])
            )])
        ),
        standard_source("lazyshop", "deferred", serde_json::json!([])),
    ]);
    spawn_app_with_sources(extra).await.0
}

/// A message whose target's timeout does not fit the invocation's remaining time is given back,
/// and that stopped the whole drain, events included: one such message at the head of the
/// outbox starved every deferred event of every source (3 events per invocation instead of
/// all). The outbox and the events now run out of time separately.
#[tokio::test]
async fn a_message_whose_target_does_not_fit_the_time_left_does_not_stop_the_events() {
    let server = RecordingTarget::start(Duration::ZERO).await;
    let app = slow_target_app(&server).await;
    assert_eq!(
        app.receive(
            "slowshop",
            &standard("msg_poison", &typed_body("order.paid"), NOW)
        )
        .await
        .status,
        200
    );
    for i in 0..9 {
        let id = format!("msg_lazy_{i}");
        let reply = app
            .receive("lazyshop", &standard(&id, &typed_body("order.paid"), NOW))
            .await;
        assert_eq!(reply.status, 202, "{reply:?}");
    }
    let worker = worker_for(&app);
    // 65 s left: enough for the events (30 s handler timeout + 10 s margin), not for the
    // message (60 s + 10 s).
    let summary = worker
        .worker
        .drain(soon, || Duration::from_secs(65))
        .await
        .unwrap();
    assert_eq!(
        summary.completed, 9,
        "one undispatchable message stopped the drain after one batch of events: {summary:?}"
    );
    assert_eq!((summary.outbox.released, summary.outbox.dispatched), (1, 0));
    assert!(summary.out_of_time);
    let rows = outbox_messages(&app, "msg_poison").await;
    assert_eq!((rows[0].2.as_str(), rows[0].3), ("pending", 0), "{rows:?}");
}
