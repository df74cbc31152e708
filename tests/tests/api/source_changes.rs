//! Sources that change while their events and messages are in the ledger: an event of a source
//! new to a warm worker is released for a worker that knows it (no attempt charged); a target
//! added before another gets its own message on re-drive and the other no second one (a
//! message's number is its target's); a retired source's outbox rows are still swept and
//! audited. Real PostgreSQL, a real local HTTP target.

use shared::Outcome;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shared::config::SweepSettings;
use shared::ledger::Tx;
use shared::Sources;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use worker::handler::AppState as WorkerState;

use crate::helpers::*;
use crate::worker_drain::accept;

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
        handlers::examples::registry(&stale.sources),
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

/// A handler for `order.shipped` that does nothing but answer.
struct Shipped;

#[async_trait::async_trait]
impl Handler for Shipped {
    async fn handle(&self, _tx: &mut Tx<'_>, _event: &Event<'_>) -> Result<Effect, HandlerError> {
        Ok(Effect::ok(serde_json::json!({"shipped": true})))
    }
}

/// Message numbers were positions, not identities. An ignored event forwarded to `service` as
/// message 1; the operator then adds an `audit` target (listed first) and a handler, and
/// re-drives the ignored events, as the book says to. The re-run numbered `audit` 1 (dropped
/// by ON CONFLICT: `audit` never got the event) and `service` 2 (a second copy of the same body
/// under a NEW idempotency key, which `service` cannot deduplicate). Now `audit` gets message 2
/// and `service` nothing more.
#[tokio::test]
async fn a_target_added_before_another_gets_its_message_and_the_other_no_second_on_redrive() {
    let server = RecordingTarget::start(Duration::ZERO).await;
    let service = forward_target(
        "service",
        &format!("{}/service", server.base_url),
        5000,
        serde_json::json!(["order.*"]),
    );
    let audit = forward_target(
        "audit",
        &format!("{}/audit", server.base_url),
        5000,
        serde_json::json!(["*"]),
    );
    let before = serde_json::json!([standard_source(
        "shop",
        "inline",
        serde_json::json!([service.clone()])
    )]);
    let (app, json) = spawn_app_with_sources(before).await;
    assert_eq!(
        app.receive(
            "shop",
            &standard("msg_shipped", &typed_body("order.shipped"), NOW)
        )
        .await
        .outcome,
        Outcome::Ignored
    );
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    assert_eq!(
        server.seen(),
        [("/service".to_owned(), "shop:msg_shipped:1".to_owned())]
    );

    // The new configuration: `audit` first, then `service` unchanged.
    let mut all: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let shop = all.iter_mut().find(|s| s["name"] == "shop").unwrap();
    shop["targets"] = serde_json::json!([audit, service]);
    let sources =
        shared::config::Sources::from_json(&serde_json::to_string(&all).unwrap()).unwrap();
    let mut worker = worker_for(&app);
    worker.worker.sources = sources.clone();
    let mut handlers = app.state.receiver.handlers.clone();
    for registry in [&mut handlers, &mut worker.worker.handlers] {
        registry.register(
            "shop",
            "order.shipped",
            Arc::new(Shipped) as Arc<dyn Handler>,
        );
    }
    let report = shared::redrive::run(
        &app.receiver().pool,
        &sources,
        &handlers,
        &shared::doorbell::Doorbell::off(),
        "shop",
        &shared::redrive::Selection::IgnoredBetween {
            event_type: "order.shipped".to_owned(),
            since: SystemTime::now() - Duration::from_secs(3600),
            until: None,
        },
        false,
        plenty,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.redriven, 1, "{report:?}");
    let at = SystemTime::now() + Duration::from_secs(5);
    worker.worker.drain(move || at, plenty).await.unwrap();
    let mut seen = server.seen();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("/audit".to_owned(), "shop:msg_shipped:2".to_owned()),
            ("/service".to_owned(), "shop:msg_shipped:1".to_owned()),
        ],
        "outbox rows now: {:?}",
        outbox_messages(&app, "msg_shipped").await
    );
}

/// The sweep planned outbox work only for sources with keys in the ledger or in the
/// configuration. A source removed from the configuration whose keys were swept (completed keys
/// go after 30 days, its messages live longer: delivered later, dead ones 90 days) kept its
/// outbox rows forever; the auditor did not see its dead messages either.
#[tokio::test]
async fn outbox_rows_of_a_retired_source_are_swept_and_audited() {
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, delivered_at, dead_at)
             VALUES ('retired', 'evt_old_1', 1, 't', 'q', '\\x7b7d', 'application/json',
                     'delivered', now() - interval '400 days', NULL),
                    ('retired', 'evt_old_2', 1, 't', 'q', '\\x7b7d', 'application/json',
                     'dead', NULL, now() - interval '400 days')",
        )
        .await
        .unwrap();
    let audit = {
        let conn = app.receiver().pool.get().await.unwrap();
        shared::audit::run(
            &conn,
            &app.settings.sources,
            &Default::default(),
            SystemTime::now(),
        )
        .await
        .unwrap()
    };
    let conn = app.receiver().pool.get().await.unwrap();
    shared::sweep::run(
        &conn,
        &app.settings.sources,
        &SweepSettings::default(),
        SystemTime::now(),
        plenty,
    )
    .await
    .unwrap();
    let left = app
        .count("SELECT count(*) FROM outbox WHERE source = 'retired'")
        .await;
    assert_eq!(
        (left, audit.sources.get("retired").map(|a| a.outbox_dead)),
        (0, Some(1)),
        "400-day-old messages of an unconfigured source: swept, and audited first"
    );
}
