//! The guide's worked example (`docs/guide/without-rust.md`): a SQL handler records each Stripe
//! refund once in the team's own table (`refunds`, the examples' migration V3) and a `forward`
//! tells the team's service with a reshaped body that the official Standard Webhooks library
//! verifies. The guide's source is the demo's (`events/sources.local.json`, `stripe`), so
//! `make demo` runs what the guide shows.

use std::time::{Duration, SystemTime};

use base64::Engine;
use serde_json::{json, Value};

use crate::helpers::*;
use crate::targets::{forward_server, recorded, scratch, SECRET};

/// The guide's worked example: the JSON block after its marker comment.
fn guide_source() -> Value {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/without-rust.md"),
    )
    .expect("docs/guide/without-rust.md");
    let marker = page.find("<!-- worked example").expect("the marker");
    let after = &page[marker..];
    let start = after.find("```json\n").expect("the JSON block") + "```json\n".len();
    let end = start + after[start..].find("```").expect("the block's end");
    serde_json::from_str(&after[start..end]).expect("the guide's JSON parses")
}

/// The demo's `stripe` source.
fn demo_stripe() -> Value {
    let sources: Vec<Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    sources
        .into_iter()
        .find(|s| s["name"] == "stripe")
        .expect("the local sources have stripe")
}

#[test]
fn the_without_rust_guide_is_the_demos_stripe_source() {
    let guide = guide_source();
    let demo = demo_stripe();
    assert_eq!(guide["name"], demo["name"]);
    assert_eq!(guide["handlers"], demo["handlers"], "the SQL handler");
    // The targets, but for the forward's secret (the guide shows a placeholder).
    let without_secret = |source: &Value| {
        let mut targets = source["targets"].clone();
        for target in targets.as_array_mut().expect("targets") {
            target.as_object_mut().expect("a target").remove("secret");
        }
        targets
    };
    assert_eq!(without_secret(&guide), without_secret(&demo), "the targets");
}

/// A Stripe `charge.refunded` event refunding `amount` of charge `charge`.
fn refund(event_id: &str, charge: &str, amount: i64) -> Delivery {
    let body = json!({
        "id": event_id, "object": "event", "type": "charge.refunded", "created": NOW - 5,
        "data": {"object": {"id": charge, "object": "charge", "amount": 4999,
                            "amount_refunded": amount, "currency": "usd",
                            "description": hookledger_tests::PAYLOAD_MARKER}},
    });
    stripe_body(serde_json::to_vec(&body).unwrap(), NOW)
}

#[tokio::test]
async fn the_worked_example_records_each_refund_once_and_forwards_it_reshaped() {
    let record = scratch("without-rust");
    let server = forward_server(&record);
    let mut source = guide_source();
    // Under another name: the test sources have a `stripe` of their own.
    source["name"] = json!("shop");
    source["secrets"] = json!([STRIPE_SECRET]);
    source["targets"][0]["url"] = json!(format!("http://127.0.0.1:{}/hooks/refunds", server.port));
    source["targets"][0]["secret"] = json!(SECRET);
    let (app, _) = spawn_app_with_sources(json!([source])).await;

    // Stripe's delivery and its retries, some concurrent: one row, one answer.
    let delivery = refund("evt_r_1", "ch_r_1", 1500);
    let replies =
        futures_util::future::join_all((0..8).map(|_| app.receive("shop", &delivery))).await;
    for reply in replies.iter().filter(|r| r.status != 409) {
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, r#"{"status": "recorded"}"#),
            "{reply:?}"
        );
    }
    let retry = app.receive("shop", &delivery).await;
    assert_eq!(
        (retry.status, retry.body.as_str()),
        (200, r#"{"status": "recorded"}"#)
    );
    // A refund of nothing: recorded, but the forward's filter keeps it from the service.
    let nothing = app.receive("shop", &refund("evt_r_2", "ch_r_2", 0)).await;
    assert_eq!(nothing.status, 200, "{nothing:?}");

    let client = app.db.connect().await.unwrap();
    let rows = client
        .query(
            "SELECT event_id, charge_id, amount_minor, currency, \
                    extract(epoch FROM refunded_at)::bigint FROM refunds ORDER BY event_id",
            &[],
        )
        .await
        .unwrap();
    let rows: Vec<(String, String, i64, String, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    assert_eq!(
        rows,
        [
            (
                "evt_r_1".into(),
                "ch_r_1".into(),
                1500,
                "usd".into(),
                NOW - 5
            ),
            ("evt_r_2".into(), "ch_r_2".into(), 0, "usd".into(), NOW - 5),
        ]
    );
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE event_id = 'evt_r_2'")
            .await,
        0,
        "the filter holds only for a refund of something"
    );

    let worker = worker_for(&app);
    let at = SystemTime::now() + Duration::from_secs(1);
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(summary.outbox.delivered, 1, "{summary:?}");
    drop(server);
    let requests = recorded(&record);
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request["path"], "/hooks/refunds");
    assert_eq!(request["verified"], true, "{}", request["error"]);
    assert_eq!(request["webhook_id"], "shop:evt_r_1:1");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(request["body_b64"].as_str().unwrap())
        .unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(
        sent,
        json!({"event_id": "evt_r_1", "charge": "ch_r_1", "amount": 1500, "currency": "usd"})
    );
}
