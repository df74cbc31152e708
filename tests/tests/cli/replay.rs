//! `hookledger replay` as the operator runs it: the built binary, a database at `DATABASE_URL`,
//! the sources in a file whose Stripe source points at a local fake of `GET /v1/events`.

use std::time::{SystemTime, UNIX_EPOCH};

use hookledger_tests::fake_providers::{serve_fixture, StripeEvents};
use hookledger_tests::{local_sources_json, TestDb};
use serde_json::{json, Value};

const KEY: &str = "rk_test_hookledger_cli_replay";

/// The local sources with the `stripe` source reading events from `base_url` with `key`.
fn sources(dir: &std::path::Path, base_url: &str, key: &str) -> std::path::PathBuf {
    let mut sources: Vec<Value> = serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    for source in &mut sources {
        if source["name"] == "stripe" {
            source["api_key"] = json!(key);
            source["api_base_url"] = json!(base_url);
        }
    }
    let path = dir.join("sources.json");
    std::fs::write(&path, Value::Array(sources).to_string()).unwrap();
    path
}

async fn hookledger(url: &str, sources: &std::path::Path, args: &[&str]) -> std::process::Output {
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        url,
        sources,
    )
    .args(args)
    .output()
    .await
    .expect("hookledger runs");
    hookledger_tests::test_log::record("hookledger", &output);
    output
}

/// `count` payment_intent.succeeded events, one second apart, the newest a minute ago.
fn events(count: usize) -> (Vec<Value>, i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let events = (0..count)
        .map(|n| {
            json!({
                "id": format!("evt_cli_{n:04}"), "object": "event", "api_version": "2024-06-20",
                "created": now - 60 - n as i64, "livemode": false, "pending_webhooks": 0,
                "type": "payment_intent.succeeded",
                "data": {"object": {"id": format!("pi_cli_{n:04}"), "object": "payment_intent",
                                    "amount": 1000, "amount_received": 1000, "currency": "usd",
                                    "metadata": {"order_id": format!("ord_cli_{n:04}")}}}
            })
        })
        .collect();
    (events, now - 3600)
}

fn report(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?}, stderr {:?}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.connect()
        .await
        .unwrap()
        .query_one(sql, &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn hookledger_replay_claims_the_missing_events_once_and_a_dry_run_writes_nothing() {
    let db = hookledger_tests::test_db().await.unwrap();
    let (events, since) = events(150);
    let fixture = StripeEvents::new(KEY, events);
    let fake = serve_fixture(move |r| fixture.answer(r), None)
        .await
        .unwrap();
    let dir = tempfile_dir();
    let sources = sources(&dir, &fake.base_url, KEY);
    let since =
        shared::timestamp::rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(since as u64));

    let dry = hookledger(
        &db.url,
        &sources,
        &[
            "replay",
            "--source",
            "stripe",
            "--since",
            &since,
            "--dry-run",
            "--json",
        ],
    )
    .await;
    assert!(dry.status.success(), "{dry:?}");
    let dry = report(&dry);
    assert_eq!(
        (dry["fetched"].as_u64(), dry["new"].as_u64()),
        (Some(150), Some(150)),
        "{dry}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM webhook_event").await, 0);

    let first = hookledger(
        &db.url,
        &sources,
        &["replay", "--source", "stripe", "--since", &since, "--json"],
    )
    .await;
    assert!(first.status.success(), "{first:?}");
    let first = report(&first);
    assert_eq!(
        (
            first["fetched"].as_u64(),
            first["new"].as_u64(),
            first["duplicates"].as_u64(),
            first["next_cursor"].clone()
        ),
        (Some(150), Some(150), Some(0), Value::Null),
        "{first}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM orders").await, 150);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM webhook_event WHERE replayed_at IS NOT NULL"
        )
        .await,
        150
    );

    // The readable summary of a second run: nothing new.
    let again = hookledger(
        &db.url,
        &sources,
        &["replay", "--source", "stripe", "--since", &since],
    )
    .await;
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        "replay stripe: fetched 150, new 0, duplicates 150, redelivered 0, failed 0"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM orders").await, 150);
}

#[tokio::test]
async fn hookledger_replay_with_a_refused_key_fails_in_one_line_without_the_key() {
    let db = hookledger_tests::test_db().await.unwrap();
    let (events, since) = events(3);
    let fixture = StripeEvents::new(KEY, events);
    let fake = serve_fixture(move |r| fixture.answer(r), None)
        .await
        .unwrap();
    let dir = tempfile_dir();
    let wrong = "rk_test_revoked_key_value";
    let sources = sources(&dir, &fake.base_url, wrong);
    let since =
        shared::timestamp::rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(since as u64));
    let output = hookledger(
        &db.url,
        &sources,
        &["replay", "--source", "stripe", "--since", &since],
    )
    .await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The reason is the last line, once (the log's `replay_run` line comes before it).
    let reasons: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("hookledger: "))
        .collect();
    assert_eq!(reasons.len(), 1, "{stderr}");
    assert_eq!(stderr.lines().last(), Some(reasons[0]), "{stderr}");
    assert!(
        stderr.contains("stripe") && stderr.contains("api_key"),
        "{stderr}"
    );
    assert!(!stderr.contains(wrong), "the key's value leaked: {stderr}");
    assert_eq!(count(&db, "SELECT count(*) FROM webhook_event").await, 0);
}

/// A fresh private directory for this test's sources file, one per call: the tests of this
/// file run at once, and two of them sharing a folder would read each other's sources (a
/// name from the clock alone can repeat; a counter cannot).
fn tempfile_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hookledger-cli-replay-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    // A folder of an earlier process with the same pid: start empty.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
