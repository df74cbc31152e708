//! `hookledger inspect` of an event whose response is sealed (`encrypt_payload`): shown opened
//! with the operator's keys, said to be sealed with keys that cannot open it, and never as the
//! envelope.

use std::time::Duration;

use hookledger_tests::local_sources_json;

/// What the sealed response holds (not the suite's payload marker: inspect prints it opened, and
/// the suite's log scan reads what the CLI printed).
const VALUE: &str = "receipt-to-ada@example.com";
use serde_json::{json, Value};
use shared::privacy::keys::PayloadKeys;
use shared::privacy::wrap::LocalKeys;

const K1: &str =
    r#"{"current": "k1", "keys": {"k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}}"#;
const K2: &str =
    r#"{"current": "k2", "keys": {"k2": "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="}}"#;

fn sources_file() -> std::path::PathBuf {
    let mut sources: Vec<Value> = serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    for source in &mut sources {
        if source["name"] == "stripe" {
            source["encrypt_payload"] = json!(true);
        }
    }
    let dir = std::env::temp_dir().join(format!("hookledger-cli-sealed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sources.json");
    std::fs::write(&path, Value::Array(sources).to_string()).unwrap();
    path
}

async fn inspect(url: &str, sources: &std::path::Path, keys: &str) -> String {
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        url,
        sources,
    )
    .env("HOOKLEDGER_PAYLOAD_KEYS", keys)
    .args(["inspect", "--source", "stripe", "evt_sealed"])
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn inspect_opens_a_sealed_response_with_the_operators_keys_and_never_prints_the_envelope() {
    let db = hookledger_tests::test_db().await.unwrap();
    let keys = PayloadKeys::local(LocalKeys::from_json(K1).unwrap(), Duration::from_secs(60));
    let sealed = shared::privacy::response::seal_response(
        &keys,
        "stripe",
        "evt_sealed",
        &json!({"receipt_to": VALUE}),
    )
    .await
    .unwrap();
    db.connect()
        .await
        .unwrap()
        .execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, response_status,
                  response_body, completed_at)
             VALUES ('stripe', 'evt_sealed', 'payment_intent.succeeded',
                     sha256('x'::bytea), 'completed', 200, $1, now())",
            &[&tokio_postgres::types::Json(&sealed)],
        )
        .await
        .unwrap();
    let sources = sources_file();
    let url = db.url.clone();
    let opened = inspect(&url, &sources, K1).await;
    assert!(
        opened.contains(&format!("200 {{\"receipt_to\":\"{VALUE}\"}}")),
        "{opened}"
    );
    let other = inspect(&url, &sources, K2).await;
    assert!(
        other.contains("(sealed: encrypted at rest; these keys cannot open it)"),
        "{other}"
    );
    assert!(!other.contains(VALUE) && !other.contains("SExT"), "{other}");
}
