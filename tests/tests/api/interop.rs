//! Interop with the providers' official libraries (from PyPI, `tests/interop/requirements.txt`,
//! and npm, `tests/interop/node/package-lock.json`; both installed by `make test`): deliveries
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
const GITHUB_SECRET: &str = "hookledger-local-development-secret";
const SHOPIFY_SECRET: &str = "hookledger-local-shopify-client-secret";

/// Where a library runs: `tests/interop/interop.py` or `tests/interop/node/interop.mjs`, both
/// with the same `sign`/`verify` protocol over stdin and stdout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Runtime {
    Python,
    Node,
}

const RUNTIMES: [Runtime; 2] = [Runtime::Python, Runtime::Node];

fn interop(runtime: Runtime, mode: &str, input: &Value) -> Value {
    let root = hookledger_tests::repo_root();
    let mut command = match runtime {
        Runtime::Python => {
            let python = std::env::var("HOOKLEDGER_TOOLS_PYTHON").expect(
                "HOOKLEDGER_TOOLS_PYTHON: run with make test (it installs the providers' libraries)",
            );
            let mut command = Command::new(python);
            command.arg(root.join("tests/interop/interop.py"));
            command
        }
        Runtime::Node => {
            let dir = root.join("tests/interop/node");
            assert!(
                dir.join("node_modules/@octokit/webhooks-methods").is_dir()
                    && dir.join("node_modules/@shopify/shopify-api").is_dir(),
                "{}/node_modules is not installed: run with make test (npm ci)",
                dir.display()
            );
            let node = std::env::var("HOOKLEDGER_TOOLS_NODE").unwrap_or_else(|_| "node".into());
            let mut command = Command::new(node);
            command.arg(dir.join("interop.mjs"));
            command
        }
    };
    let mut child = command
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{runtime:?} interop script does not start: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{runtime:?} interop {mode} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// One provider library's delivery.
struct Case {
    name: &'static str,
    library: &'static str,
    runtime: Runtime,
    /// The local source (`events/sources.local.json`) the delivery is for.
    source: &'static str,
    secret: &'static str,
    /// The message id a Standard Webhooks signature covers (empty elsewhere).
    msg_id: &'static str,
    body: String,
    /// Headers the provider sends beside the signature, unsigned: GitHub's delivery id and event,
    /// Shopify's topic, shop, API version and ids (Shopify's `validate` requires them).
    headers: Value,
}

fn cases() -> Vec<Case> {
    let python = |name, source, secret, msg_id, body: Value| Case {
        name,
        library: name,
        runtime: Runtime::Python,
        source,
        secret,
        msg_id,
        body: body.to_string(),
        headers: json!({}),
    };
    vec![
        python(
            "stripe",
            "stripe",
            STRIPE_SECRET,
            "",
            json!({"id": "evt_interop_1", "object": "event", "type": "charge.refunded", "data": {"object": {"id": "ch_1", "amount": 5, "note": "caf\u{e9} \u{2603}"}}}),
        ),
        python(
            "standardwebhooks",
            "acme",
            ACME_SECRET,
            "msg_interop_sw_1",
            json!({"type": "invoice.paid", "data": {"invoice_id": "inv_1"}}),
        ),
        python(
            "svix",
            "acme",
            ACME_SECRET,
            "msg_interop_svix_1",
            json!({"type": "invoice.voided", "data": {"invoice_id": "inv_2"}}),
        ),
        python(
            "slack_sdk",
            "slack",
            SLACK_SECRET,
            "",
            json!({"type": "event_callback", "event_id": "Ev_interop_1", "event": {"type": "app_mention", "text": "hi"}}),
        ),
        python(
            "paddle",
            "paddle",
            PADDLE_SECRET,
            "",
            json!({"event_id": "evt_interop_paddle_1", "event_type": "transaction.completed", "data": {"id": "txn_1"}}),
        ),
        Case {
            name: "octokit",
            library: "octokit",
            runtime: Runtime::Node,
            source: "github",
            secret: GITHUB_SECRET,
            msg_id: "",
            body: json!({"ref": "refs/heads/main", "after": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", "head_commit": {"message": "caf\u{e9} \u{2603}"}}).to_string(),
            headers: json!({
                "X-GitHub-Delivery": "5f7c2a3e-6f1d-11ef-8f3a-interop00001",
                "X-GitHub-Event": "push",
            }),
        },
        Case {
            name: "shopify",
            library: "shopify",
            runtime: Runtime::Node,
            source: "shopify",
            secret: SHOPIFY_SECRET,
            msg_id: "",
            body: json!({"id": 820982911946154508_u64, "email": "jon@example.com", "note": "caf\u{e9} \u{2603}"}).to_string(),
            headers: json!({
                "X-Shopify-Topic": "orders/create",
                "X-Shopify-Shop-Domain": "hookledger-interop.myshopify.com",
                "X-Shopify-API-Version": "2025-10",
                "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-interop00001",
                "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-interop00001",
            }),
        },
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
    let mut checked = 0;
    for runtime in RUNTIMES {
        let cases: Vec<Case> = cases()
            .into_iter()
            .filter(|c| c.runtime == runtime)
            .collect();
        let spec = json!({
            "now": NOW,
            "deliveries": cases.iter().map(|c| json!({
                "name": c.name, "library": c.library, "secret": c.secret, "msg_id": c.msg_id,
                "body": c.body, "headers": c.headers,
            })).collect::<Vec<_>>(),
        });
        let signed = interop(runtime, "sign", &spec);
        let signed = signed.as_array().unwrap();
        assert_eq!(signed.len(), cases.len(), "{runtime:?}");
        for (case, delivery) in cases.iter().zip(signed) {
            let name = case.name;
            let headers = header_map(&delivery["headers"]);
            let body = delivery["body"].as_str().unwrap().as_bytes().to_vec();
            let reply = app
                .receiver()
                .receive(case.source, &headers, &body, NOW)
                .await;
            assert_eq!(reply.status, 200, "{name}: {reply:?}");
            // The same signature over a body with one byte changed is refused.
            let mut tampered = body.clone();
            let last = tampered.len() - 2;
            tampered[last] ^= 0x01;
            let refused = app
                .receiver()
                .receive(case.source, &headers, &tampered, NOW)
                .await;
            assert_eq!(refused.status, 401, "{name}: tampered body: {refused:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, cases().len());
    assert_eq!(app.ledger_rows().await, cases().len() as i64);
}

#[tokio::test]
async fn deliveries_we_sign_pass_the_official_verifiers() {
    // The libraries check timestamps against the real clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut checked = 0;
    for runtime in RUNTIMES {
        let mut deliveries = Vec::new();
        for case in cases().into_iter().filter(|c| c.runtime == runtime) {
            let config = hookledger_tests::local_source(case.source).unwrap();
            let mut headers = case.headers.as_object().unwrap().clone();
            headers.extend(
                config
                    .verifier
                    .sign(0, case.msg_id, now, case.body.as_bytes())
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v))),
            );
            if case.library == "svix" {
                // Svix's library reads the svix-* names.
                headers = headers
                    .into_iter()
                    .map(|(k, v)| (k.replace("webhook-", "svix-"), v))
                    .collect();
            }
            let headers = Value::Object(headers);
            deliveries.push(json!({
                "name": case.name, "library": case.library, "secret": case.secret,
                "headers": headers.clone(), "body": case.body,
            }));
            let mut tampered = case.body.clone();
            tampered.push(' ');
            deliveries.push(json!({
                "name": format!("{} (tampered)", case.name), "library": case.library,
                "secret": case.secret, "headers": headers, "body": tampered,
            }));
        }
        let results = interop(runtime, "verify", &Value::Array(deliveries.clone()));
        let results = results.as_array().unwrap();
        assert_eq!(results.len(), deliveries.len(), "{runtime:?}");
        for result in results {
            let name = result["name"].as_str().unwrap();
            let accepted = result["accepted"].as_bool().unwrap();
            assert_eq!(
                accepted,
                !name.ends_with("(tampered)"),
                "{name}: {}",
                result["error"]
            );
            checked += 1;
        }
    }
    assert_eq!(checked, cases().len() * 2);
}
