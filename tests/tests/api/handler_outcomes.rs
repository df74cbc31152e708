//! What a handler's result becomes, for the provider and in the ledger: an effect's 2xx status is
//! stored and replayed verbatim; a fatal error (a payload the business table refuses, a response
//! body the ledger cannot store) is dead and answered 2xx, and in deferred mode dead at once; an
//! error without a SQLSTATE is a 500 that rolls back; a dead event runs again once its handler is
//! fixed.

use shared::Outcome;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shared::db::Sql;
use shared::ledger::Tx;
use shared::{
    effect::{Effect, Event, HandlerError, Success},
    handler::Handler,
};

use crate::helpers::*;

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
