//! The book's "Test it" example (`docs/guide/handlers.md`), verbatim below the marker
//! (`the_book_quotes_this_test` checks), run against this crate, which has the same `registry`
//! and `migrations` as the user's `handlers` crate; and the README's handler, which is
//! `src/refunds.rs` (`the_readme_quotes_the_refunds_handler` checks).

use custom_handler as handlers;

// Book example:
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

/// The book's handler chapter quotes the test above (everything after the marker), indented by
/// two spaces (it is inside a list item).
#[test]
fn the_book_quotes_this_test() {
    let page = "docs/guide/handlers.md";
    let book = std::fs::read_to_string(format!("{}/../../{page}", env!("CARGO_MANIFEST_DIR")))
        .expect(page);
    let this = include_str!("book_example.rs");
    let marker = "// Book example:\n";
    let start = this.find(marker).expect("the marker") + marker.len();
    let end = this
        .find("/// The book's handler chapter quotes")
        .expect("the end");
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
    assert!(book.contains(&quoted), "{page} does not quote:\n{quoted}");
}

/// README.md and the book's handler chapter show the starter's `src/refunds.rs` as the example handler,
/// without its doc comments, in a `rust` code block: the code a reader copies compiles and is
/// tested end to end (`tests/end_to_end.rs`).
#[test]
fn the_readme_quotes_the_refunds_handler() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let handler: String = include_str!("../../../starter/src/refunds.rs")
        .lines()
        .filter(|line| {
            !line.trim_start().starts_with("//!") && !line.trim_start().starts_with("///")
        })
        .map(|line| format!("{line}\n"))
        .collect::<String>()
        .trim()
        .to_owned();
    let block = format!("```rust\n{handler}\n```\n");
    for file in ["README.md", "docs/guide/handlers.md"] {
        let text = std::fs::read_to_string(format!("{root}/{file}")).expect(file);
        assert!(
            text.contains(&block),
            "{file} does not show src/refunds.rs (without its doc comments) as:\n{block}"
        );
    }
}

/// README.md and the book show the refund handler's migration as it is (issue 25: the README
/// showed the handler without its table).
#[test]
fn the_readme_and_the_book_quote_the_refunds_migration() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let sql = include_str!("../../../starter/migrations/V1__create_refunds.sql");
    let block = format!("```sql\n{sql}```\n");
    for file in ["README.md", "docs/guide/handlers.md"] {
        let text = std::fs::read_to_string(format!("{root}/{file}")).expect(file);
        assert!(
            text.contains(&block),
            "{file} does not show starter/migrations/V1__create_refunds.sql as:\n{block}"
        );
    }
}
