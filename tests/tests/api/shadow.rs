//! Shadow mode: a duplicate is answered as enforcement would answer it (the stored answer inline,
//! 202 deferred) while its handler runs again as a naive receiver's would, whatever that run
//! does.

use std::sync::Arc;

use shared::db::Sql;
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio_postgres::types::Type;

use crate::helpers::*;
use crate::worker_drain::{deferred_only, with_sources, Scripted};

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
        handlers::examples::registry(&app.settings.sources),
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
