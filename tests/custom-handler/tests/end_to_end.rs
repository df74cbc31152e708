//! The custom handler end to end, on a real PostgreSQL (`DATABASE_URL`), with the helper users
//! copy: signed delivery -> 200 with the effect; the same delivery again -> the stored response
//! byte for byte and still one row; a fatal payload -> nothing written.

use hookledger_testing::{assert_replayed, TestLedger};
use shared::Outcome;

const SOURCES: &str = r#"[{"name": "stripe", "scheme": "stripe",
                          "secrets": ["whsec_custom_handler_test_secret"]}]"#;

async fn ledger() -> TestLedger {
    TestLedger::start(
        SOURCES,
        custom_handler::registry(&shared::Sources::from_json(SOURCES).unwrap()),
        &custom_handler::migrations(),
    )
    .await
    .expect("a ledger on DATABASE_URL")
}

fn charge_refunded(event_id: &str, amount_refunded: i64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "type": "charge.refunded",
        "data": {"object": {
            "id": "ch_1", "object": "charge", "amount": 2000,
            "amount_refunded": amount_refunded, "currency": "usd"
        }}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_refund_is_recorded_once_and_its_retry_gets_the_stored_response() {
    let ledger = ledger().await;
    let delivery = ledger
        .signed("stripe", charge_refunded("evt_refund_1", 500))
        .unwrap();

    let first = ledger.deliver(&delivery).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.outcome, Outcome::Processed);
    let body: serde_json::Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"status": "refunded", "charge_id": "ch_1"})
    );
    let refunds = "SELECT count(*) FROM refunds WHERE event_id = 'evt_refund_1' \
                   AND charge_id = 'ch_1' AND amount_minor = 500";
    assert_eq!(ledger.count(refunds).await.unwrap(), 1);

    let again = ledger.deliver(&delivery).await;
    assert_replayed(&first, &again);
    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        1
    );
    assert_eq!(
        ledger
            .status("stripe", "evt_refund_1")
            .await
            .unwrap()
            .as_deref(),
        Some("completed")
    );
}

#[tokio::test]
async fn a_payload_the_table_refuses_is_kept_dead_and_writes_nothing() {
    let ledger = ledger().await;
    // A negative amount violates the table's CHECK: SQLSTATE 23514, fatal.
    let refused = ledger
        .signed("stripe", charge_refunded("evt_refund_bad", -1))
        .unwrap();
    let reply = ledger.deliver(&refused).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.outcome, Outcome::Dead);
    // A payload without the fields: fatal in the handler itself.
    let shapeless = ledger
        .signed(
            "stripe",
            r#"{"id": "evt_refund_shapeless", "type": "charge.refunded", "data": {}}"#,
        )
        .unwrap();
    assert_eq!(ledger.deliver(&shapeless).await.outcome, Outcome::Dead);

    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        0
    );
    for event_id in ["evt_refund_bad", "evt_refund_shapeless"] {
        assert_eq!(
            ledger.status("stripe", event_id).await.unwrap().as_deref(),
            Some("dead")
        );
    }
}

#[tokio::test]
async fn an_event_type_without_a_handler_is_recorded_as_ignored_and_writes_nothing() {
    let ledger = ledger().await;
    let other = br#"{"id": "evt_other", "type": "charge.succeeded", "data": {"object": {}}}"#;
    let reply = ledger
        .deliver(&ledger.signed("stripe", other.to_vec()).unwrap())
        .await;
    assert_eq!(reply.outcome, Outcome::Ignored, "{reply:?}");
    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        0
    );
}
