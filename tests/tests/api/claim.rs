//! The claim itself, on two real connections: the primary key is the concurrency control, and a
//! duplicate dropped while it waits on another delivery's claim strands nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shared::ledger::{self, Claim, Expiry, NewEvent, Tx};
use shared::retention::Retention;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio::sync::Notify;

use crate::helpers::{spawn_app_with, stripe_payment, wait_for_lock_waiter, NOW};

const DIGEST: [u8; 32] = [7; 32];

fn event<'a>(id: &'a str, digest: &'a [u8; 32]) -> NewEvent<'a> {
    NewEvent {
        source: "stripe",
        event_id: id,
        event_type: "payment_intent.succeeded",
        digest,
        identity: digest,
        payload: Some(b"{}"),
        dead_payload: Some(b"{}"),
        subject: None,
        replayed: false,
        unsigned_id: false,
    }
}

/// The default retention, judged now.
fn now() -> Expiry {
    Expiry {
        retention: Retention::default(),
        now: std::time::SystemTime::now(),
    }
}

#[tokio::test]
async fn a_concurrent_second_claim_waits_for_the_first_and_then_sees_it_completed() {
    let app = spawn_app_with(4, 10_000).await;
    let first_conn = app.receiver().pool.get().await.unwrap();
    let second_conn = app.receiver().pool.get().await.unwrap();

    let Claim::Won(tx) = ledger::claim(&first_conn, &event("evt_race", &DIGEST), &now())
        .await
        .unwrap()
    else {
        panic!("the first claim must win");
    };
    let second = tokio::spawn(async move {
        let outcome = ledger::claim(&second_conn, &event("evt_race", &DIGEST), &now()).await;
        match outcome.unwrap() {
            Claim::Won(_) => "won".to_owned(),
            Claim::Completed(stored) => stored.body,
            other => format!("{other:?}"),
        }
    });
    wait_for_lock_waiter(&app).await;
    assert!(
        !second.is_finished(),
        "the second claim must block on the uncommitted row"
    );

    let stored = tx
        .complete(("stripe", "evt_race"), 200, &json!({"ok": true}))
        .await
        .unwrap();
    assert_eq!(second.await.unwrap(), stored.body);
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn a_second_claim_wins_when_the_first_rolls_back() {
    let app = spawn_app_with(4, 10_000).await;
    let first_conn = app.receiver().pool.get().await.unwrap();
    let second_conn = app.receiver().pool.get().await.unwrap();

    let Claim::Won(tx) = ledger::claim(&first_conn, &event("evt_rb", &DIGEST), &now())
        .await
        .unwrap()
    else {
        panic!("the first claim must win");
    };
    let second = tokio::spawn(async move {
        match ledger::claim(&second_conn, &event("evt_rb", &DIGEST), &now())
            .await
            .unwrap()
        {
            Claim::Won(tx) => {
                tx.complete(("stripe", "evt_rb"), 200, &json!({"second": true}))
                    .await
                    .unwrap();
                true
            }
            _ => false,
        }
    });
    wait_for_lock_waiter(&app).await;
    tx.rollback().await.unwrap();
    assert!(
        second.await.unwrap(),
        "after a rollback the waiting claim wins"
    );
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn a_claim_waiting_longer_than_lock_timeout_is_in_flight_not_an_error() {
    let app = spawn_app_with(4, 200).await;
    let first_conn = app.receiver().pool.get().await.unwrap();
    let second_conn = app.receiver().pool.get().await.unwrap();
    let Claim::Won(tx) = ledger::claim(&first_conn, &event("evt_slow", &DIGEST), &now())
        .await
        .unwrap()
    else {
        panic!("the first claim must win");
    };
    let second = ledger::claim(&second_conn, &event("evt_slow", &DIGEST), &now())
        .await
        .unwrap();
    assert!(matches!(second, Claim::InFlight), "{second:?}");
    drop(second);
    // The waiting side's connection is usable again (its transaction was rolled back).
    second_conn.simple_query("SELECT 1").await.unwrap();
    tx.complete(("stripe", "evt_slow"), 200, &json!({}))
        .await
        .unwrap();
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn a_dropped_claim_is_rolled_back_and_the_connection_is_clean() {
    let app = spawn_app_with(1, 2_000).await;
    {
        let conn = app.receiver().pool.get().await.unwrap();
        let claim = ledger::claim(&conn, &event("evt_drop", &DIGEST), &now())
            .await
            .unwrap();
        assert!(matches!(claim, Claim::Won(_)));
        // `claim` (and its open transaction) is dropped here without completing.
    }
    // The only pooled connection comes back outside any transaction, and the row is gone.
    let conn = app.receiver().pool.get().await.unwrap();
    // Still inside the dropped transaction, this session would see its own uncommitted row
    // and have a transaction id assigned.
    let row = conn
        .query_one(
            "SELECT count(*), pg_current_xact_id_if_assigned() IS NULL FROM webhook_event",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 0);
    assert!(row.get::<_, bool>(1), "no transaction left open");
    assert_eq!(app.ledger_rows().await, 0);
    let again = ledger::claim(&conn, &event("evt_drop", &DIGEST), &now())
        .await
        .unwrap();
    assert!(matches!(again, Claim::Won(_)));
}

#[tokio::test]
async fn a_completed_claim_with_another_digest_is_a_mismatch() {
    let app = spawn_app_with(2, 2_000).await;
    let conn = app.receiver().pool.get().await.unwrap();
    let Claim::Won(tx) = ledger::claim(&conn, &event("evt_d", &DIGEST), &now())
        .await
        .unwrap()
    else {
        panic!("must win");
    };
    tx.complete(("stripe", "evt_d"), 200, &json!({"a": 1}))
        .await
        .unwrap();
    let other = [8u8; 32];
    let outcome = ledger::claim(&conn, &event("evt_d", &other), &now())
        .await
        .unwrap();
    assert!(matches!(outcome, Claim::DigestMismatch), "{outcome:?}");
    let outcome = ledger::claim(&conn, &event("evt_d", &DIGEST), &now())
        .await
        .unwrap();
    assert!(matches!(outcome, Claim::Completed(_)), "{outcome:?}");
}

fn replayed<'a>(id: &'a str, digest: &'a [u8; 32]) -> NewEvent<'a> {
    NewEvent {
        replayed: true,
        unsigned_id: false,
        ..event(id, digest)
    }
}

async fn status_and_replayed(app: &crate::helpers::TestApp, id: &str) -> (String, bool) {
    let client = app.db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT status::text, replayed_at IS NOT NULL FROM webhook_event \
             WHERE source = 'stripe' AND event_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn a_replayed_claim_marks_the_row_and_a_delivered_one_does_not() {
    let app = spawn_app_with(2, 2_000).await;
    let conn = app.receiver().pool.get().await.unwrap();
    for (id, new_event) in [
        ("evt_api", replayed("evt_api", &DIGEST)),
        ("evt_post", event("evt_post", &DIGEST)),
    ] {
        let Claim::Won(tx) = ledger::claim(&conn, &new_event, &now()).await.unwrap() else {
            panic!("a new key is won");
        };
        tx.complete(("stripe", id), 200, &json!({"ok": true}))
            .await
            .unwrap();
    }
    assert_eq!(
        status_and_replayed(&app, "evt_api").await,
        ("completed".to_owned(), true)
    );
    assert_eq!(
        status_and_replayed(&app, "evt_post").await,
        ("completed".to_owned(), false)
    );
}

#[tokio::test]
async fn a_replayed_event_already_in_the_ledger_is_known_whatever_its_bytes() {
    // The provider's API re-serialises events: the bytes differ from the delivery's, and that
    // must not read as an event id reused with another body.
    let app = spawn_app_with(2, 2_000).await;
    let conn = app.receiver().pool.get().await.unwrap();
    let Claim::Won(tx) = ledger::claim(&conn, &event("evt_seen", &DIGEST), &now())
        .await
        .unwrap()
    else {
        panic!("a new key is won");
    };
    tx.complete(("stripe", "evt_seen"), 200, &json!({"ok": true}))
        .await
        .unwrap();
    let other = [9u8; 32];
    match ledger::claim(&conn, &replayed("evt_seen", &other), &now())
        .await
        .unwrap()
    {
        Claim::Known(ledger::Status::Completed) => {}
        other => panic!("expected Known(Completed), got {other:?}"),
    }
    // A delivery with those bytes is still a mismatch.
    assert!(matches!(
        ledger::claim(&conn, &event("evt_seen", &other), &now())
            .await
            .unwrap(),
        Claim::DigestMismatch
    ));
    assert_eq!(
        status_and_replayed(&app, "evt_seen").await,
        ("completed".to_owned(), false)
    );
}

#[tokio::test]
async fn a_replayed_event_never_retakes_a_dead_letter() {
    // Re-running a dead letter is re-drive's decision, not replay's: a replay that finds the
    // event dead leaves it dead (a delivery of it would run it again).
    let app = spawn_app_with(2, 2_000).await;
    let conn = app.receiver().pool.get().await.unwrap();
    let dead = ledger::record_dead(
        &conn,
        &event("evt_dead", &DIGEST),
        "fatal: no such customer",
        200,
        &json!({"status": "dead"}),
        &now(),
    )
    .await
    .unwrap();
    assert!(dead.is_some());
    match ledger::claim(&conn, &replayed("evt_dead", &DIGEST), &now())
        .await
        .unwrap()
    {
        Claim::Known(ledger::Status::Dead) => {}
        other => panic!("expected Known(Dead), got {other:?}"),
    }
    assert_eq!(
        status_and_replayed(&app, "evt_dead").await,
        ("dead".to_owned(), false)
    );
    // The deferred accept agrees.
    let accepted = ledger::accept(&conn, &replayed("evt_dead", &[3; 32]), &now())
        .await
        .unwrap();
    assert_eq!(accepted, ledger::Accept::Duplicate(ledger::Status::Dead));
}

/// While `failing` is set: signals `entered` (the claim is taken, its transaction open), waits
/// for `release`, then fails. Records the order as usual otherwise.
struct GatedThenMaybeFail {
    entered: Notify,
    release: Notify,
    failing: AtomicBool,
}

#[async_trait::async_trait]
impl Handler for GatedThenMaybeFail {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        if self.failing.load(Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
            return Err(HandlerError::retryable("downstream is down".to_owned()));
        }
        handlers::examples::stripe_orders::PaymentIntentSucceeded
            .handle(tx, event)
            .await
    }
}

#[tokio::test]
async fn a_cancelled_duplicate_does_not_strand_the_event_as_claimed() {
    let mut app = spawn_app_with(2, 10_000).await;
    let handler = Arc::new(GatedThenMaybeFail {
        entered: Notify::new(),
        release: Notify::new(),
        failing: AtomicBool::new(true),
    });
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let delivery = stripe_payment("evt_cancel", "ord_cancel", 100, NOW);
    let first = {
        let (receiver, d) = (app.receiver().clone(), delivery.clone());
        tokio::spawn(async move { receiver.receive("stripe", &d.headers, &d.body, NOW).await })
    };
    // The first delivery holds the claim (its handler is running) before the duplicate starts.
    tokio::time::timeout(Duration::from_secs(20), handler.entered.notified())
        .await
        .expect("the first delivery reaches its handler");
    let second = {
        let (receiver, d) = (app.receiver().clone(), delivery.clone());
        tokio::spawn(async move { receiver.receive("stripe", &d.headers, &d.body, NOW).await })
    };
    // The duplicate's INSERT is blocked in PostgreSQL on the first's uncommitted row.
    wait_for_lock_waiter(&app).await;
    assert!(!second.is_finished(), "the duplicate waits on the claim");
    // A timeout or a hung-up caller drops the waiting duplicate.
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());
    // The first rolls back; the orphaned INSERT would now win if nothing rolled it back.
    handler.release.notify_one();
    assert_eq!(first.await.unwrap().status, 500);
    handler.failing.store(false, Ordering::SeqCst);
    let (a, b) = (
        stripe_payment("evt_other_a", "ord_a", 1, NOW),
        stripe_payment("evt_other_b", "ord_b", 1, NOW),
    );
    // Use both pooled connections again.
    let _ = tokio::join!(app.receive("stripe", &a), app.receive("stripe", &b));
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        retry.status, 200,
        "the retry must process the event: {retry:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM orders WHERE order_id = 'ord_cancel'")
            .await,
        1
    );
}
