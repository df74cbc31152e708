//! Interop with the providers' official libraries (PyPI, installed by `make test`): deliveries
//! they sign must verify here, and deliveries we sign must pass their verifiers.

use std::io::Write as _;
use std::process::{Command, Stdio};

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::helpers::{spawn_app, NOW};

const STRIPE_SECRET: &str = "whsec_hookledger_local_development_secret";
const ACME_SECRET: &str = "whsec_aG9va2xlZGdlciBsb2NhbCBkZXZlbG9wbWVudCBrZXk=";
const SLACK_SECRET: &str = "hookledger0local0slack0signing0secret";
const PADDLE_SECRET: &str = "pdl_ntfset_01hookledgerlocal_developmentsecret";

fn python(mode: &str, input: &Value) -> Value {
    let python = std::env::var("HOOKLEDGER_TOOLS_PYTHON").expect(
        "HOOKLEDGER_TOOLS_PYTHON: run with make test (it installs the providers' libraries)",
    );
    let script = hookledger_tests::repo_root().join("tests/interop/interop.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "interop.py {mode} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// (name, library, source, secret, msg_id, body)
fn cases() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    String,
)> {
    vec![
        (
            "stripe",
            "stripe",
            "stripe",
            STRIPE_SECRET,
            "",
            json!({"id": "evt_interop_1", "object": "event", "type": "charge.refunded", "data": {"object": {"id": "ch_1", "amount": 5, "note": "caf\u{e9} \u{2603}"}}}).to_string(),
        ),
        (
            "standardwebhooks",
            "standardwebhooks",
            "acme",
            ACME_SECRET,
            "msg_interop_sw_1",
            json!({"type": "invoice.paid", "data": {"invoice_id": "inv_1"}}).to_string(),
        ),
        (
            "svix",
            "svix",
            "acme",
            ACME_SECRET,
            "msg_interop_svix_1",
            json!({"type": "invoice.voided", "data": {"invoice_id": "inv_2"}}).to_string(),
        ),
        (
            "slack_sdk",
            "slack_sdk",
            "slack",
            SLACK_SECRET,
            "",
            json!({"type": "event_callback", "event_id": "Ev_interop_1", "event": {"type": "app_mention", "text": "hi"}}).to_string(),
        ),
        (
            "paddle",
            "paddle",
            "paddle",
            PADDLE_SECRET,
            "",
            json!({"event_id": "evt_interop_paddle_1", "event_type": "transaction.completed", "data": {"id": "txn_1"}}).to_string(),
        ),
    ]
}

fn header_map(headers: &Value) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers.as_object().unwrap() {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value.as_str().unwrap()).unwrap(),
        );
    }
    map
}

#[tokio::test]
async fn deliveries_signed_by_the_official_libraries_are_accepted() {
    let app = spawn_app().await;
    let spec = json!({
        "now": NOW,
        "deliveries": cases().iter().map(|(name, library, _, secret, msg_id, body)| json!({
            "name": name, "library": library, "secret": secret, "msg_id": msg_id, "body": body,
        })).collect::<Vec<_>>(),
    });
    let signed = python("sign", &spec);
    let signed = signed.as_array().unwrap();
    assert_eq!(signed.len(), cases().len());
    for ((name, _, source, _, _, _), delivery) in cases().iter().zip(signed) {
        let headers = header_map(&delivery["headers"]);
        let body = delivery["body"].as_str().unwrap().as_bytes().to_vec();
        let reply = app.receiver().receive(source, &headers, &body, NOW).await;
        assert_eq!(reply.status, 200, "{name}: {reply:?}");
        // The same signature over a body with one byte changed is refused.
        let mut tampered = body.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 0x01;
        let refused = app
            .receiver()
            .receive(source, &headers, &tampered, NOW)
            .await;
        assert_eq!(refused.status, 401, "{name}: tampered body: {refused:?}");
    }
    assert_eq!(app.ledger_rows().await, cases().len() as i64);
}

#[tokio::test]
async fn deliveries_we_sign_pass_the_official_verifiers() {
    // The libraries check timestamps against the real clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut deliveries = Vec::new();
    for (name, library, source, secret, msg_id, body) in cases() {
        let config = hookledger_tests::local_source(source).unwrap();
        let headers: serde_json::Map<String, Value> = config
            .verifier
            .sign(0, msg_id, now, body.as_bytes())
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let mut headers = Value::Object(headers);
        if library == "svix" {
            // Svix's library reads the svix-* names.
            let renamed: serde_json::Map<String, Value> = headers
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.replace("webhook-", "svix-"), v.clone()))
                .collect();
            headers = Value::Object(renamed);
        }
        deliveries.push(json!({
            "name": name, "library": library, "secret": secret, "headers": headers.clone(), "body": body,
        }));
        let mut tampered = body.clone();
        tampered.push(' ');
        deliveries.push(json!({
            "name": format!("{name} (tampered)"), "library": library, "secret": secret,
            "headers": headers, "body": tampered,
        }));
    }
    let results = python("verify", &Value::Array(deliveries));
    for result in results.as_array().unwrap() {
        let name = result["name"].as_str().unwrap();
        let accepted = result["accepted"].as_bool().unwrap();
        assert_eq!(
            accepted,
            !name.ends_with("(tampered)"),
            "{name}: {}",
            result["error"]
        );
    }
    assert_eq!(results.as_array().unwrap().len(), cases().len() * 2);
}
