//! The worker under hostile conditions found by review: each failed before its fix.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use shared::handlers::{Effect, Event, Handler, HandlerError};
use shared::ledger::Tx;
use shared::Sources;
use worker::handler::AppState as WorkerState;

use crate::helpers::*;

fn deferred_only(max_attempts: u32, shadow: bool) -> String {
    format!(
        r#"[{{"name": "stripe-deferred", "scheme": "stripe", "mode": "deferred",
             "max_attempts": {max_attempts}, "shadow": {shadow},
             "secrets": ["{DEFERRED_SECRET}"]}}]"#
    )
}

fn with_sources(app: &mut TestApp, json: &str) {
    app.settings.sources = Sources::from_json(json).unwrap();
    app.state = receiver::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers::registry(&app.settings.sources),
    );
}

async fn accept(app: &TestApp, id: &str) {
    let reply = app
        .receive("stripe-deferred", &deferred(payment_intent_body(id, id, 1)))
        .await;
    assert_eq!(reply.status, 202, "{reply:?}");
}

/// What to do per event id; everything else records the order.
#[derive(Default)]
struct Scripted {
    fail: Vec<&'static str>,
    panic: Vec<&'static str>,
    sleep_sql: Vec<(&'static str, f64)>,
    calls: Mutex<HashMap<String, usize>>,
}

impl Scripted {
    fn calls_for(&self, id: &str) -> usize {
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
async fn a_source_unknown_to_a_warm_worker_is_released_not_dead_lettered() {
    let app = spawn_app().await;
    accept(&app, "evt_new_source").await;
    let mut stale = app.settings.clone();
    stale.sources =
        Sources::from_json(r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_x"]}]"#)
            .unwrap();
    let old_worker = WorkerState::new(
        &stale,
        app.receiver().pool.clone(),
        handlers::registry(&stale.sources),
    );
    let summary = old_worker
        .worker
        .drain(SystemTime::now, plenty)
        .await
        .unwrap();
    assert_eq!((summary.released, summary.dead), (1, 0), "{summary:?}");
    assert_eq!(row(&app, "evt_new_source").await.1, 0, "no attempt charged");
    let later = SystemTime::now() + Duration::from_secs(120);
    let summary = worker_for(&app)
        .worker
        .drain(move || later, plenty)
        .await
        .unwrap();
    assert_eq!(summary.completed, 1, "{summary:?}");
    assert_eq!(row(&app, "evt_new_source").await.0, "completed");
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

fn subscription(event_id: &str, created: i64, plan: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id, "object": "event", "type": "customer.subscription.updated",
        "created": created,
        "data": {"object": {"id": "sub_x", "customer": "cus_x", "status": "active",
                            "items": {"data": [{"price": {"id": plan}}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_stale_event_through_another_stripe_source_does_not_overwrite_newer_state() {
    let app = spawn_app().await;
    let worker = worker_for(&app);
    let v3 = subscription("evt_src_v3", 3_000, "price_new");
    let v1 = subscription("evt_src_v1", 1_000, "price_old");
    assert_eq!(
        app.receive("stripe", &stripe_body(v3, NOW)).await.status,
        200
    );
    assert_eq!(
        app.receive("stripe-deferred", &deferred(v1)).await.status,
        202
    );
    worker.worker.drain(SystemTime::now, plenty).await.unwrap();
    let client = app.db.connect().await.unwrap();
    let state = client
        .query_one(
            "SELECT plan, version FROM subscriptions WHERE subscription_id = 'sub_x'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (state.get::<_, String>(0), state.get::<_, i64>(1)),
        ("price_new".to_owned(), 3_000)
    );
}

#[tokio::test]
async fn a_shadow_duplicate_of_a_deferred_event_is_still_a_202() {
    let mut app = spawn_app().await;
    with_sources(&mut app, &deferred_only(8, true));
    let handler = Arc::new(Scripted {
        fail: vec!["evt_shadow_fail"],
        ..Default::default()
    });
    app.state.receiver.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = deferred(payment_intent_body("evt_shadow_fail", "ord_sf", 1));
    let first = app.receive("stripe-deferred", &delivery).await;
    let second = app.receive("stripe-deferred", &delivery).await;
    assert_eq!((first.status, second.status), (202, 202), "{second:?}");
    assert_eq!(
        handler.calls_for("evt_shadow_fail"),
        1,
        "the shadow run happened"
    );
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

#[test]
fn out_of_range_worker_settings_are_configuration_errors_not_panics() {
    for (var, value) in [
        ("HOOKLEDGER_LEASE_SECS", u64::MAX.to_string()),
        ("HOOKLEDGER_BACKOFF_CAP_SECS", u64::MAX.to_string()),
        ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "100000".to_owned()),
    ] {
        let outcome = std::panic::catch_unwind(|| {
            shared::Settings::from_lookup(|name| match name {
                "DATABASE_URL" => Some("postgres://u@localhost/db".to_owned()),
                "HOOKLEDGER_SOURCES" => {
                    Some(r#"[{"name":"s","scheme":"stripe","secrets":["whsec_x"]}]"#.to_owned())
                }
                name if name == var => Some(value.clone()),
                _ => None,
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
        });
        assert!(matches!(outcome, Ok(Err(_))), "{var}={value}: {outcome:?}");
    }
}
