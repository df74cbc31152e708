//! The one-statement shape (`shared::ledger::one_statement`): a plain-SQL handler's new event is
//! the claim, its writes and the completed response in one statement; a lost claim applies
//! nothing; whatever the statement cannot decide takes the transaction shape.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use receiver::handler::AppState;
use shared::db::Sql;
use shared::ledger::Tx;
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio_postgres::types::Type;

use crate::helpers::*;

/// `(ctid, status, attempts, xmin)` of the only ledger row.
async fn ledger_tuple(app: &TestApp) -> (String, String, i32, String) {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT ctid::text, status::text, attempts, xmin::text FROM webhook_event",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[tokio::test]
async fn a_new_event_is_one_tuple_written_completed_in_the_transaction_of_its_order() {
    let app = spawn_app().await;
    let reply = app
        .receive(
            "stripe",
            &stripe_payment("evt_one_1", "ord_one_1", 2000, NOW),
        )
        .await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{reply:?}"
    );
    assert_eq!(
        reply.body,
        r#"{"status": "recorded", "order_id": "ord_one_1"}"#
    );
    let (ctid, status, attempts, xmin) = ledger_tuple(&app).await;
    // The first tuple of a fresh table, never updated: the transaction shape inserts it
    // `claimed` and updates it to `completed`, leaving (0,1) dead and the row at (0,2).
    assert_eq!(ctid, "(0,1)", "the row was written once, already completed");
    assert_eq!((status.as_str(), attempts), ("completed", 1));
    let client = app.db.connect().await.unwrap();
    let order_xmin: String = client
        .query_one("SELECT xmin::text FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        order_xmin, xmin,
        "the order commits in the claim's own transaction"
    );
}

#[tokio::test]
async fn a_completed_duplicate_is_answered_from_the_stored_row_and_writes_nothing() {
    let app = spawn_app().await;
    let delivery = stripe_payment("evt_one_2", "ord_one_2", 2000, NOW);
    let first = app.receive("stripe", &delivery).await;
    let before = ledger_tuple(&app).await;
    for _ in 0..3 {
        let again = app.receive("stripe", &delivery).await;
        assert_eq!(
            (again.status, again.outcome),
            (200, Outcome::Replayed),
            "{again:?}"
        );
        assert!(again.replayed);
        assert_eq!(again.body, first.body);
    }
    assert_eq!(ledger_tuple(&app).await, before, "the row was not touched");
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn the_same_event_id_with_another_body_is_refused_and_applies_nothing() {
    let app = spawn_app().await;
    app.receive(
        "stripe",
        &stripe_payment("evt_one_3", "ord_one_3", 2000, NOW),
    )
    .await;
    let reused = app
        .receive(
            "stripe",
            &stripe_payment("evt_one_3", "ord_other", 9999, NOW),
        )
        .await;
    assert_eq!(
        (reused.status, reused.outcome),
        (409, Outcome::DigestMismatch)
    );
    assert_eq!(app.order_rows().await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM orders WHERE order_id = 'ord_other'")
            .await,
        0
    );
}

static RECORD_EFFECT: Sql = Sql {
    // No ON CONFLICT: a second application of the same event would add a second row.
    text: "INSERT INTO plain_effects (event_id) VALUES ($1)",
    types: &[Type::TEXT],
};

static PEEK: Sql = Sql {
    text: "SELECT count(*) FROM plain_effects",
    types: &[],
};

/// A plain-SQL handler counting its calls; with `reads` set it also reads first (which a
/// plain-SQL handler must not: the event then takes the transaction shape).
#[derive(Default)]
struct Effects {
    calls: AtomicUsize,
    reads: bool,
}

#[async_trait::async_trait]
impl Handler for Effects {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.reads {
            tx.query(&PEEK, &[]).await?;
        }
        tx.defer(&RECORD_EFFECT, vec![Box::new(event.event_id.to_owned())])?;
        Ok(Effect::ok(serde_json::json!({ "effect": event.event_id })))
    }

    fn plain_sql(&self) -> bool {
        true
    }
}

async fn with_effects(reads: bool) -> (TestApp, Arc<Effects>) {
    let mut app = spawn_app_with(16, 2_000).await;
    let client = app.db.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE plain_effects (n bigserial PRIMARY KEY, event_id text NOT NULL)",
        )
        .await
        .unwrap();
    let handler = Arc::new(Effects {
        calls: AtomicUsize::new(0),
        reads,
    });
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    (app, handler)
}

#[tokio::test]
async fn a_storm_of_one_event_through_a_plain_sql_handler_applies_its_write_once() {
    let (app, _) = with_effects(false).await;
    let delivery = stripe_payment("evt_one_storm", "ord_storm", 2000, NOW);
    let replies =
        futures_util::future::join_all((0..32).map(|_| app.receive("stripe", &delivery))).await;
    let expected = r#"{"effect": "evt_one_storm"}"#;
    let mut answered = 0;
    for reply in &replies {
        match reply.status {
            200 => {
                assert_eq!(reply.body, expected, "{reply:?}");
                answered += 1;
            }
            409 => assert_eq!(reply.outcome, Outcome::InFlight, "{reply:?}"),
            _ => panic!("unexpected {reply:?}"),
        }
    }
    assert!(answered >= 1);
    assert_eq!(
        app.count("SELECT count(*) FROM plain_effects").await,
        1,
        "the write is gated on the claim: only the winner's applies"
    );
    let after = app.receive("stripe", &delivery).await;
    assert_eq!((after.status, after.body.as_str()), (200, expected));
    assert_eq!(app.count("SELECT count(*) FROM plain_effects").await, 1);
}

#[tokio::test]
async fn a_plain_sql_handler_that_reads_takes_the_transaction_shape_and_applies_once() {
    let (app, handler) = with_effects(true).await;
    let delivery = stripe_payment("evt_one_reads", "ord_reads", 2000, NOW);
    let reply = app.receive("stripe", &delivery).await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Processed),
        "{reply:?}"
    );
    // Planned once (discarded at its read), then run in the claim's transaction.
    assert_eq!(handler.calls.load(Ordering::SeqCst), 2);
    assert_eq!(app.count("SELECT count(*) FROM plain_effects").await, 1);
    let (ctid, status, ..) = ledger_tuple(&app).await;
    assert_eq!((ctid.as_str(), status.as_str()), ("(0,2)", "completed"));
}

#[tokio::test]
async fn a_write_the_table_refuses_leaves_nothing_and_the_event_is_kept_dead() {
    let app = spawn_app().await;
    // Stripe sends lower-case ISO codes; "USD" violates orders' CHECK (SQLSTATE 23514).
    let body = String::from_utf8(payment_intent_body("evt_one_usd", "ord_usd", 2000))
        .unwrap()
        .replace("\"usd\"", "\"USD\"");
    let delivery = stripe_body(body.into_bytes(), NOW);
    let reply = app.receive("stripe", &delivery).await;
    assert_eq!(
        (reply.status, reply.outcome),
        (200, Outcome::Dead),
        "{reply:?}"
    );
    assert_eq!(app.order_rows().await, 0);
    let (_, status, ..) = ledger_tuple(&app).await;
    assert_eq!(status, "dead");
    let again = app.receive("stripe", &delivery).await;
    assert_eq!((again.status, again.body), (200, reply.body));
    assert_eq!(app.order_rows().await, 0);
}

/// A duplicate sent as one statement while another delivery's transaction holds the claim
/// open: the wait is bounded by `lock_timeout` in both ways the limits can be set (with every
/// transaction, or on the database: the role settings the deploy provisions): once, in the one
/// statement, whose lock timeout on the ledger key is answered 409 at once (the transaction
/// shape is not tried after it: it would wait again). Once the holder commits, the duplicate
/// gets the stored response.
#[tokio::test]
async fn a_duplicate_in_one_statement_waits_on_an_open_claim_a_bounded_time_then_409() {
    for limits_per_transaction in [true, false] {
        let mut holder = spawn_app_with(4, 300).await;
        let gate = gated(&mut holder);
        let mut database = holder.settings.database.clone();
        database.transaction_limits = limits_per_transaction;
        if !limits_per_transaction {
            let client = holder.db.connect().await.unwrap();
            let name: String = client
                .query_one("SELECT current_database()", &[])
                .await
                .unwrap()
                .get(0);
            client
                .batch_execute(&format!(
                    "ALTER DATABASE \"{name}\" SET lock_timeout = 300; \
                     ALTER DATABASE \"{name}\" SET statement_timeout = 5000"
                ))
                .await
                .unwrap();
        }
        // The example handler (plain SQL) on a second pool: the duplicate's one statement.
        let pool = shared::db::pool(&database).unwrap();
        let plain = AppState::new(
            &holder.settings,
            pool,
            handlers::examples::registry(&holder.settings.sources),
        );
        let delivery = stripe_payment("evt_one_wait", "ord_wait", 2000, NOW);
        let first = {
            let holder = &holder;
            let delivery = delivery.clone();
            async move { holder.receive("stripe", &delivery).await }
        };
        let duplicate = async {
            gate.entered.notified().await;
            let started = std::time::Instant::now();
            let reply = plain
                .receiver
                .receive("stripe", &delivery.headers, &delivery.body, NOW)
                .await;
            let waited = started.elapsed();
            gate.release.notify_one();
            (reply, waited)
        };
        let (first, (duplicate, waited)) = tokio::join!(first, duplicate);
        assert_eq!(first.status, 200, "{first:?}");
        assert_eq!(
            (duplicate.status, duplicate.outcome, duplicate.retry_after),
            (409, Outcome::InFlight, Some(5)),
            "limits per transaction: {limits_per_transaction}"
        );
        assert!(
            waited < std::time::Duration::from_secs(3),
            "waited {waited:?} (limits per transaction: {limits_per_transaction})"
        );
        let after = plain
            .receiver
            .receive("stripe", &delivery.headers, &delivery.body, NOW)
            .await;
        assert_eq!((after.status, after.body), (200, first.body));
        assert_eq!(holder.order_rows().await, 1);
    }
}
