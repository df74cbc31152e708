//! The refund handler through hookledger's receive path on a throwaway PostgreSQL
//! (`DATABASE_URL`, `make test` starts one): a signed delivery writes one row; the provider's
//! retry gets the stored answer byte for byte and writes nothing.

use hookledger::testing::{assert_replayed, TestLedger};

const SOURCES: &str = include_str!("../sources.json");

#[tokio::test]
async fn a_refund_is_recorded_exactly_once() {
    let sources = hookledger::prelude::Sources::from_json(SOURCES).unwrap();
    let ledger = TestLedger::start(
        SOURCES,
        webhooks::registry(&sources),
        &webhooks::migrations(),
    )
    .await
    .unwrap();
    let body = br#"{"id": "evt_1", "type": "charge.refunded",
                    "data": {"object": {"id": "ch_1", "amount_refunded": 500}}}"#;
    let delivery = ledger.signed("stripe", body.to_vec()).unwrap();
    let first = ledger.deliver(&delivery).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        1
    );
    // The provider's retry: the same status and body, and still one row.
    assert_replayed(&first, &ledger.deliver(&delivery).await);
    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        1
    );
}
