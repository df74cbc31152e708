//! The README's "Test it" example, verbatim below the marker (`readme_quotes_this_test`
//! checks), run against this crate, which has the same `registry` and `migrations` as the
//! user's `handlers` crate.

use custom_handler as handlers;

// README example:
use hookledger_testing::{assert_replayed, TestLedger};

const SOURCES: &str = r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_test"]}]"#;

#[tokio::test]
async fn a_refund_is_recorded_once() {
    let sources = shared::Sources::from_json(SOURCES).unwrap();
    let ledger = TestLedger::start(
        SOURCES,
        handlers::registry(&sources),
        &handlers::migrations(),
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
    // The provider's retry: the same status and body, byte for byte, and still one row.
    assert_replayed(&first, &ledger.deliver(&delivery).await);
    assert_eq!(
        ledger.count("SELECT count(*) FROM refunds").await.unwrap(),
        1
    );
}

/// The README quotes the test above (everything after the marker), indented by two spaces.
#[test]
fn readme_quotes_this_test() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let this = include_str!("readme_example.rs");
    let marker = "// README example:\n";
    let start = this.find(marker).expect("the marker") + marker.len();
    let end = this.find("/// The README quotes").expect("the end");
    let quoted: String = this[start..end]
        .trim_end()
        .lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_owned()
            } else {
                format!("  {line}\n")
            }
        })
        .collect();
    assert!(
        readme.contains(&quoted),
        "README.md does not quote:\n{quoted}"
    );
}
