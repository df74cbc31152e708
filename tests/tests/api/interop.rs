//! Interop with the providers' official libraries (from PyPI, `tests/interop/requirements.txt`,
//! and npm, `tests/interop/node/package-lock.json`; both installed by `make test`): deliveries
//! they sign must verify here, and deliveries we sign must pass their verifiers.

use std::io::Write as _;
use std::process::{Command, Stdio};

use base64::Engine as _;
use hookledger_verify::extract;
use hookledger_verify::generic::{self, Signer};
use hookledger_verify::{
    Algorithm, PrivateKey, Request, Scheme, Verifier, VerifyError, DEFAULT_TOLERANCE_SECS,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};
use shared::Outcome;

use crate::helpers::{spawn_app, spawn_app_with_sources, NOW};

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

// The presets of the scheme model (`hookledger_verify::presets`) against the providers'
// libraries: Twilio (`twilio` RequestValidator), Square (`squareup` verify_signature), Discord
// (`discord-interactions` verify_key; PyNaCl signs, as Discord's library only verifies), and the
// batches: SendGrid (`sendgrid` EventWebhook.verify_signature; `cryptography` signs, as SendGrid's
// library only verifies) and HubSpot (`hubspot-api-client` Signature, v3).

/// A Twilio Auth Token (the HMAC-SHA1 key, UTF-8).
const TWILIO_AUTH_TOKEN: &str = "hookledger0local0twilio0auth0tok";
/// A Square subscription's signature key (the HMAC-SHA256 key, UTF-8).
const SQUARE_SIGNATURE_KEY: &str = "hookledger-local-square-signature-key";
/// A Discord application's Ed25519 seed (bytes 00 to 1f), which only the tests hold.
const DISCORD_SEED: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
/// Its public key, hex, as the developer portal shows it (the Discord source's secret).
const DISCORD_PUBLIC_KEY: &str = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8";
/// The demo SendGrid Event Webhook key (events/private-keys.local.json): its P-256 private
/// scalar, hex, which only the tests hold.
const SENDGRID_PRIVATE_KEY: &str =
    "1fe8004ba4f5234439eed861c1a28c77f65db332d4ab06131e1b0e854cf24e7e";
/// Its verification key, base64 of the SPKI DER, as SendGrid's settings page shows it (the
/// SendGrid source's secret).
const SENDGRID_PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAMhAyPSWHZDxcVbZ4cbfFLi+UzEt3pYdyPo3xCI/K+m9bLLk6GFE0YVSQlzCznwrQQdGC5rOTxy4A0qCXwUNGQ==";
/// A Linear webhook's signing secret (the HMAC-SHA256 key, UTF-8).
const LINEAR_SECRET: &str = "lin_wh_hookledger0local0linear0signing0secret";
/// A HubSpot app's client secret (the HMAC-SHA256 key, UTF-8).
const HUBSPOT_CLIENT_SECRET: &str = "hookledger-local-hubspot-client-secret";

/// One preset's delivery, for its provider's library.
struct PresetCase {
    name: &'static str,
    library: &'static str,
    scheme: Scheme,
    /// The source's secret: the shared key, or the public key (Discord's hex, SendGrid's base64
    /// DER).
    secret: &'static str,
    /// The private key the provider signs with (Discord's seed, SendGrid's scalar; hex), empty
    /// for a shared key.
    private_key: &'static str,
    /// The URL the provider signs (empty where it signs none).
    url: &'static str,
    body: String,
}

/// A Twilio SMS status callback as Twilio posts it: form fields, a repeated name (the library
/// signs each distinct value, sorted), an empty value, percent-escaped UTF-8 and `+` for spaces.
const TWILIO_FORM: &str = "AccountSid=AC00000000000000000000000000interop&ApiVersion=2010-04-01\
    &From=%2B15557650000&To=%2B15551230000&MessageSid=SM0000000000000000000000000interop\
    &MessageStatus=delivered&SmsStatus=delivered&Body=caf%C3%A9+%E2%98%83&MediaUrl0=b\
    &MediaUrl0=a&Empty=";

fn preset_cases() -> Vec<PresetCase> {
    vec![
        PresetCase {
            name: "twilio",
            library: "twilio",
            scheme: Scheme::Twilio,
            secret: TWILIO_AUTH_TOKEN,
            private_key: "",
            url: "https://hooks.example.com/webhooks/twilio?account=main&x=caf%C3%A9",
            body: TWILIO_FORM.to_owned(),
        },
        PresetCase {
            name: "square",
            library: "square",
            scheme: Scheme::Square,
            secret: SQUARE_SIGNATURE_KEY,
            private_key: "",
            url: "https://hooks.example.com/webhooks/square",
            body: json!({
                "merchant_id": "MLINTEROP1", "type": "payment.updated",
                "event_id": "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc",
                "created_at": "2026-12-03T12:00:00Z",
                "data": {"type": "payment", "id": "p1", "object": {"note": "caf\u{e9} \u{2603}"}},
            })
            .to_string(),
        },
        PresetCase {
            name: "discord",
            library: "discord",
            scheme: Scheme::Discord,
            secret: DISCORD_PUBLIC_KEY,
            private_key: DISCORD_SEED,
            url: "",
            body: json!({
                "type": 2, "id": "1180000000000000001", "application_id": "1170000000000000000",
                "token": "interop-token", "version": 1,
                "data": {"name": "note", "options": [{"name": "text", "value": "caf\u{e9} \u{2603}"}]},
            })
            .to_string(),
        },
        PresetCase {
            name: "sendgrid",
            library: "sendgrid",
            scheme: Scheme::Sendgrid,
            secret: SENDGRID_PUBLIC_KEY,
            private_key: SENDGRID_PRIVATE_KEY,
            url: "",
            body: json!([
                sendgrid_event("sg_interop_1", "delivered"),
                {"email": "ada@example.com", "timestamp": NOW - 4, "event": "click",
                 "sg_event_id": "sg_interop_2", "url": "https://example.com/caf\u{e9}?q=\u{2603}",
                 "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"},
            ])
            .to_string(),
        },
        PresetCase {
            name: "hubspot",
            library: "hubspot",
            scheme: Scheme::Hubspot,
            secret: HUBSPOT_CLIENT_SECRET,
            private_key: "",
            url: "https://hooks.example.com/webhooks/hubspot?portal=62515",
            body: json!([
                {"eventId": 1001, "subscriptionId": 7, "portalId": 62515, "appId": 54321,
                 "occurredAt": 1_750_000_000_000_u64, "subscriptionType": "contact.creation",
                 "attemptNumber": 0, "objectId": 123, "changeSource": "CRM", "changeFlag": "NEW"},
                {"eventId": 1002, "subscriptionId": 7, "portalId": 62515, "appId": 54321,
                 "occurredAt": 1_750_000_000_001_u64, "subscriptionType": "contact.propertyChange",
                 "attemptNumber": 0, "objectId": 123, "propertyName": "firstname",
                 "propertyValue": "Ren\u{e9}e \u{2603}"},
            ])
            .to_string(),
        },
    ]
}

/// A SendGrid event as its Event Webhook posts it, one item of a batch.
fn sendgrid_event(id: &str, event: &str) -> Value {
    json!({"email": "ada@example.com", "timestamp": NOW - 5, "event": event, "sg_event_id": id,
           "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"})
}

/// The spec `interop.py sign` reads for `cases`, at `now_ms` (unix milliseconds: HubSpot's
/// timestamp as is, the others' the second it falls in).
fn preset_sign_spec(cases: &[PresetCase], now_ms: i64) -> Value {
    json!({
        "now": now_ms.div_euclid(1000),
        "deliveries": cases.iter().map(|c| json!({
            "name": c.name, "library": c.library, "secret": c.secret, "url": c.url,
            "body": c.body, "private_key": c.private_key,
            "timestamp": (c.scheme == Scheme::Hubspot).then_some(now_ms.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// The real clock, unix milliseconds: HubSpot's library refuses a timestamp five minutes old.
fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn preset_verifier(case: &PresetCase) -> Verifier {
    Verifier::new(case.scheme, &[case.secret], DEFAULT_TOLERANCE_SECS, None)
        .unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

#[test]
fn discord_public_key_is_the_seeds() {
    let key = PrivateKey::parse(Algorithm::Ed25519, DISCORD_SEED, None).unwrap();
    let public = base64::engine::general_purpose::STANDARD
        .decode(key.public_key_base64())
        .unwrap();
    assert_eq!(hex::encode(public), DISCORD_PUBLIC_KEY);
}

#[test]
fn preset_deliveries_signed_by_the_official_libraries_verify() {
    let cases = preset_cases();
    // HubSpot's timestamp is milliseconds at the real clock (not a whole second), as HubSpot
    // sends it; the others sign that second.
    let now_ms = real_now_ms();
    let now = now_ms.div_euclid(1000);
    let signed = interop(Runtime::Python, "sign", &preset_sign_spec(&cases, now_ms));
    let signed = signed.as_array().unwrap();
    assert_eq!(signed.len(), cases.len());
    for (case, delivery) in cases.iter().zip(signed) {
        let name = case.name;
        assert_eq!(delivery["name"], name);
        let verifier = preset_verifier(case);
        let headers = header_map(&delivery["headers"]);
        let body = delivery["body"].as_str().unwrap().as_bytes().to_vec();
        assert_eq!(
            body,
            case.body.as_bytes(),
            "{name}: the library changed the body"
        );
        let url = delivery["url"].as_str().unwrap_or_default();
        assert_eq!(url, case.url, "{name}: the library signed another URL");
        let verify = |url: &str, body: &[u8]| {
            verifier.verify_request(
                &Request {
                    method: "POST",
                    url,
                    headers: &headers,
                    body,
                },
                now,
            )
        };
        let verified = verify(url, &body).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(verified.key_index, 0, "{name}");
        if case.scheme == Scheme::Hubspot {
            assert_eq!(
                headers["x-hubspot-request-timestamp"].to_str().unwrap(),
                now_ms.to_string(),
                "{name}: the library signed another timestamp"
            );
        }
        if matches!(case.scheme, Scheme::Sendgrid | Scheme::Hubspot) {
            // A batch: every item is an event, named inside it, with its own bytes.
            let items = serde_json::from_slice::<Vec<Value>>(&body).unwrap();
            match extract::extract(case.scheme, verifier.generic(), &headers, &body) {
                Ok(extract::Extracted::Batch(events)) => {
                    assert_eq!(events.len(), items.len(), "{name}");
                    for (event, item) in events.iter().zip(&items) {
                        let id = item
                            .get("sg_event_id")
                            .or_else(|| item.get("eventId"))
                            .unwrap();
                        let id = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
                        assert_eq!(event.event_id, id, "{name}");
                        let event_type = item.get("event").or_else(|| item.get("subscriptionType"));
                        assert_eq!(
                            event.event_type,
                            event_type.unwrap().as_str().unwrap(),
                            "{name}"
                        );
                        assert_eq!(
                            &serde_json::from_slice::<Value>(&event.document).unwrap(),
                            item,
                            "{name}"
                        );
                    }
                }
                other => panic!("{name}: not a batch: {other:?}"),
            }
        }
        // The same signature over a body with one byte changed is refused.
        let mut tampered = body.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 0x01;
        assert_eq!(
            verify(url, &tampered).map(|v| v.key_index),
            Err(VerifyError::NoSignatureMatched),
            "{name}: tampered body"
        );
        if !url.is_empty() {
            // The URL is signed: the same delivery at another URL is refused.
            let other = url.replace("/webhooks/", "/webhook/");
            assert_eq!(
                verify(&other, &body).map(|v| v.key_index),
                Err(VerifyError::NoSignatureMatched),
                "{name}: another URL"
            );
        }
    }
}

#[test]
fn preset_deliveries_we_sign_pass_the_official_verifiers() {
    // HubSpot's library checks the timestamp against the real clock.
    let now = real_now_ms().div_euclid(1000);
    let discord_key = PrivateKey::parse(Algorithm::Ed25519, DISCORD_SEED, None).unwrap();
    let sendgrid_key =
        PrivateKey::parse(Algorithm::EcdsaP256Sha256, SENDGRID_PRIVATE_KEY, None).unwrap();
    let mut deliveries = Vec::new();
    for case in preset_cases() {
        let verifier = preset_verifier(&case);
        let model = verifier.generic().expect("a preset has a model");
        let no_headers = HeaderMap::new();
        let request = Request {
            method: "POST",
            url: case.url,
            headers: &no_headers,
            body: case.body.as_bytes(),
        };
        let signer = match case.scheme {
            Scheme::Discord => Signer::Private(&discord_key),
            Scheme::Sendgrid => Signer::Private(&sendgrid_key),
            _ => Signer::Secret(verifier.key(0).unwrap()),
        };
        let signed = generic::sign(model, signer, &request, now)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let headers: serde_json::Map<String, Value> = signed
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        // What we sign verifies here too.
        let header_map = header_map(&Value::Object(headers.clone()));
        verifier
            .verify_request(
                &Request {
                    headers: &header_map,
                    ..request
                },
                now,
            )
            .unwrap_or_else(|e| panic!("{}: our own signature: {e:?}", case.name));
        let delivery = |name: String, url: &str, body: &str| {
            json!({
                "name": name, "library": case.library, "secret": case.secret, "url": url,
                "public_key": case.secret, "headers": headers.clone(), "body": body,
            })
        };
        deliveries.push(delivery(case.name.to_owned(), case.url, &case.body));
        let mut tampered = case.body.clone();
        tampered.push(' ');
        deliveries.push(delivery(
            format!("{} (tampered)", case.name),
            case.url,
            &tampered,
        ));
        if !case.url.is_empty() {
            deliveries.push(delivery(
                format!("{} (another URL)", case.name),
                &case.url.replace("/webhooks/", "/webhook/"),
                &case.body,
            ));
        }
    }
    let results = interop(Runtime::Python, "verify", &Value::Array(deliveries.clone()));
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), deliveries.len());
    for result in results {
        let name = result["name"].as_str().unwrap();
        let accepted = result["accepted"].as_bool().unwrap();
        assert_eq!(accepted, !name.contains('('), "{name}: {}", result["error"]);
    }
    // Each case, its tampered copy, and for Twilio, Square and HubSpot the other URL.
    assert_eq!(results.len(), preset_cases().len() * 2 + 3);
}

/// The end-to-end sources: Twilio behind a proxy (its `public_url`, the URL configured in
/// Twilio), a Discord application, and a SendGrid Event Webhook (its tolerance the preset's).
fn preset_sources() -> Value {
    json!([
        {
            "name": "twilio-interop",
            "scheme": "twilio",
            "secrets": [TWILIO_AUTH_TOKEN],
            "mode": "inline",
            "public_url": "https://hooks.example.com/webhooks/twilio",
        },
        {
            "name": "discord-interop",
            "scheme": "discord",
            "secrets": [DISCORD_PUBLIC_KEY],
            "mode": "inline",
        },
        {
            "name": "sendgrid-interop",
            "scheme": "sendgrid",
            "secrets": [SENDGRID_PUBLIC_KEY],
            "mode": "inline",
        },
        {
            "name": "adyen-interop",
            "scheme": "adyen",
            "secrets": [ADYEN_HMAC_KEY],
            "mode": "inline",
        },
    ])
}

/// An Adyen HMAC key, as the Customer Area shows it: hex digits.
const ADYEN_HMAC_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

/// An Adyen notification of two items (a capture has an `originalReference`, the
/// authorisation none: an absent field signs as empty).
fn adyen_notification(capture_value: u64) -> String {
    json!({"live": "false", "notificationItems": [
        {"NotificationRequestItem": {
            "additionalData": {"authCode": "58747"},
            "amount": {"currency": "EUR", "value": 1130},
            "eventCode": "AUTHORISATION", "eventDate": "2026-12-03T13:00:00+01:00",
            "merchantAccountCode": "HookledgerECOM", "merchantReference": "ord_1042",
            "paymentMethod": "visa", "pspReference": "QFQTPCQ8HXSKGK82", "reason": "58747:1111:03/2030",
            "success": "true"}},
        {"NotificationRequestItem": {
            "additionalData": {},
            "amount": {"currency": "EUR", "value": capture_value},
            "eventCode": "CAPTURE", "eventDate": "2026-12-03T13:05:00+01:00",
            "merchantAccountCode": "HookledgerECOM", "merchantReference": "ord_1042",
            "originalReference": "QFQTPCQ8HXSKGK82", "paymentMethod": "visa",
            "pspReference": "LF2BNT5KWBW2MPK6", "success": "true"}}
    ]})
    .to_string()
}

#[tokio::test]
async fn an_adyen_batch_signed_item_by_item_by_the_library_is_accepted_once_per_item() {
    let (app, _) = spawn_app_with_sources(preset_sources()).await;
    let sign = |body: String| {
        let spec = json!({"now": NOW, "deliveries": [{
            "name": "adyen", "library": "adyen", "secret": ADYEN_HMAC_KEY, "body": body,
        }]});
        let signed = interop(Runtime::Python, "sign", &spec);
        signed[0]["body"].as_str().unwrap().to_owned()
    };
    let body = sign(adyen_notification(1130));
    let receiver = app.receiver();
    let url = "https://hooks.example.com/webhooks/adyen";
    let headers = HeaderMap::new();
    let first = receiver
        .receive_at("adyen-interop", url, &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(
        (first.status, first.content_type),
        (200, "text/plain"),
        "{first:?}"
    );
    assert_eq!(first.body, "[accepted]");
    // Adyen retries the same notification: nothing new.
    let again = receiver
        .receive_at("adyen-interop", url, &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(
        (again.status, again.outcome),
        (200, Outcome::Replayed),
        "{again:?}"
    );
    assert_eq!(
        app.texts("SELECT event_id || ' ' || event_type FROM webhook_event ORDER BY event_id")
            .await,
        [
            "LF2BNT5KWBW2MPK6:CAPTURE:true CAPTURE",
            "QFQTPCQ8HXSKGK82:AUTHORISATION:true AUTHORISATION",
        ]
    );
    // A signed field changed in one item (the capture's amount): the whole delivery is 401.
    let tampered = sign(adyen_notification(2500)).replace("\"value\":2500", "\"value\":25000");
    let reply = receiver
        .receive_at("adyen-interop", url, &headers, tampered.as_bytes(), NOW)
        .await;
    assert_eq!(reply.status, 401, "{reply:?}");
    // Our verifier and Adyen's agree on the library's signatures.
    let verify = json!([{
        "name": "adyen", "library": "adyen", "secret": ADYEN_HMAC_KEY, "headers": {}, "body": body,
    }]);
    let verdict = interop(Runtime::Python, "verify", &verify);
    assert_eq!(verdict[0]["error"], Value::Null, "{verdict}");
    assert_eq!(app.ledger_rows().await, 2);
}

#[tokio::test]
async fn a_twilio_status_callback_signed_by_the_library_is_recorded_once() {
    let (app, _) = spawn_app_with_sources(preset_sources()).await;
    let body = "AccountSid=AC00000000000000000000000000interop&ApiVersion=2010-04-01\
        &From=%2B15557650000&To=%2B15551230000&MessageSid=SM0000000000000000000000000e2e001\
        &MessageStatus=delivered&SmsStatus=delivered";
    // Twilio signs the URL configured in its console; the receiver behind a proxy sees another
    // host and scheme but the same query.
    let spec = json!({"now": NOW, "deliveries": [{
        "name": "twilio", "library": "twilio", "secret": TWILIO_AUTH_TOKEN, "body": body,
        "url": "https://hooks.example.com/webhooks/twilio?account=main",
    }]});
    let signed = interop(Runtime::Python, "sign", &spec);
    let headers = header_map(&signed[0]["headers"]);
    let arrived = "http://10.0.0.7:3000/webhooks/twilio?account=main";
    let first = app
        .receiver()
        .receive_at("twilio-interop", arrived, &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    // Twilio does not retry on its own, but a connection override (or an attacker) can send the
    // same callback again: it is a replay, not a second event.
    let second = app
        .receiver()
        .receive_at("twilio-interop", arrived, &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(second.outcome, Outcome::Replayed, "{second:?}");
    // The query is signed: the same callback at another query is refused.
    let other = app
        .receiver()
        .receive_at(
            "twilio-interop",
            "http://10.0.0.7:3000/webhooks/twilio?account=other",
            &headers,
            body.as_bytes(),
            NOW,
        )
        .await;
    assert_eq!(other.status, 401, "{other:?}");
    assert_eq!(
        app.texts(
            "SELECT event_id || ' ' || event_type FROM webhook_event \
             WHERE source = 'twilio-interop'"
        )
        .await,
        ["SM0000000000000000000000000e2e001:delivered delivered"]
    );
    assert_eq!(app.ledger_rows().await, 1);
}

#[tokio::test]
async fn a_discord_ping_signed_with_pynacl_is_answered_pong_and_not_recorded() {
    let (app, _) = spawn_app_with_sources(preset_sources()).await;
    let body = json!({
        "type": 1, "id": "1180000000000000002", "application_id": "1170000000000000000",
        "token": "interop-ping-token", "version": 1,
    })
    .to_string();
    let spec = json!({"now": NOW, "deliveries": [{
        "name": "discord", "library": "discord", "private_key": DISCORD_SEED, "body": body,
    }]});
    let signed = interop(Runtime::Python, "sign", &spec);
    let headers = header_map(&signed[0]["headers"]);
    let reply = app
        .receiver()
        .receive("discord-interop", &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body).unwrap(),
        json!({"type": 1})
    );
    assert_eq!(reply.outcome, Outcome::Challenge);
    // Discord also checks that a bad signature is refused.
    let mut bad = headers.clone();
    let signature = bad["x-signature-ed25519"].to_str().unwrap().to_owned();
    let flipped = if signature.starts_with('0') { "1" } else { "0" };
    bad.insert(
        "x-signature-ed25519",
        HeaderValue::from_str(&format!("{flipped}{}", &signature[1..])).unwrap(),
    );
    let refused = app
        .receiver()
        .receive("discord-interop", &bad, body.as_bytes(), NOW)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert_eq!(app.ledger_rows().await, 0);
}

#[tokio::test]
async fn a_sendgrid_batch_signed_by_the_library_is_one_row_per_event_and_recorded_once() {
    let (app, _) = spawn_app_with_sources(preset_sources()).await;
    let body = json!([
        sendgrid_event("sg_e2e_1", "processed"),
        sendgrid_event("sg_e2e_2", "delivered"),
        {"email": "ada@example.com", "timestamp": NOW - 3, "event": "open",
         "sg_event_id": "sg_e2e_3", "useragent": "caf\u{e9} \u{2603}",
         "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"},
    ])
    .to_string();
    let spec = json!({"now": NOW, "deliveries": [{
        "name": "sendgrid", "library": "sendgrid", "private_key": SENDGRID_PRIVATE_KEY,
        "body": body,
    }]});
    let signed = interop(Runtime::Python, "sign", &spec);
    assert_eq!(signed[0]["body"], body.as_str());
    let headers = header_map(&signed[0]["headers"]);
    let url = "https://hooks.example.com/webhooks/sendgrid";
    let first = app
        .receiver()
        .receive_at("sendgrid-interop", url, &headers, body.as_bytes(), NOW)
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    let answer: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(answer["events"], 3, "{answer}");
    // No handler is configured for this source: each event is recorded, completed, ignored.
    assert_eq!(answer["outcomes"], json!({"ignored": 3}), "{answer}");
    assert_eq!(first.outcome, Outcome::Ignored, "{first:?}");
    assert_eq!(
        app.texts(
            "SELECT event_id || ' ' || event_type || ' ' || status::text FROM webhook_event \
             WHERE source = 'sendgrid-interop' ORDER BY event_id"
        )
        .await,
        [
            "sg_e2e_1 processed completed",
            "sg_e2e_2 delivered completed",
            "sg_e2e_3 open completed",
        ]
    );
    assert_eq!(app.ledger_rows().await, 3);
    // SendGrid posts the same batch again (a retry, ten minutes later: past the default five
    // minutes, within the preset's 24 h tolerance): 200, and no new row.
    let again = app
        .receiver()
        .receive_at(
            "sendgrid-interop",
            url,
            &headers,
            body.as_bytes(),
            NOW + 600,
        )
        .await;
    assert_eq!(again.status, 200, "{again:?}");
    let answer: Value = serde_json::from_str(&again.body).unwrap();
    assert_eq!(answer["events"], 3, "{answer}");
    assert_eq!(answer["outcomes"], json!({"replayed": 3}), "{answer}");
    assert_eq!(app.ledger_rows().await, 3);
    // The same signature over another batch is refused.
    let forged = body.replace("\"open\"", "\"click\"");
    let refused = app
        .receiver()
        .receive_at("sendgrid-interop", url, &headers, forged.as_bytes(), NOW)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert_eq!(app.ledger_rows().await, 3);
}

/// Linear's library only verifies (`@linear/sdk`'s `LinearWebhookClient.verify`, the check its
/// docs give): a delivery hookledger's Linear preset signs, with `webhookTimestamp` in the body
/// at the real clock, is accepted by it, and the same delivery with one body byte changed or
/// signed with another secret is refused by both.
#[test]
fn a_linear_delivery_we_sign_passes_linears_own_verifier() {
    let now_ms = real_now_ms();
    let body = json!({
        "action": "create", "type": "Issue", "webhookId": "wh-interop",
        "webhookTimestamp": now_ms, "createdAt": "2026-12-03T12:00:00.000Z",
        "data": {"id": "iss_interop_1", "title": "caf\u{e9} \u{2603}"},
        "url": "https://linear.app/hookledger/issue/HL-1",
    })
    .to_string();
    let ours = Verifier::new(Scheme::Linear, &[LINEAR_SECRET], 300, None).unwrap();
    let signed: serde_json::Map<String, Value> = ours
        .sign(0, "", now_ms / 1000, body.as_bytes())
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    assert!(signed.contains_key("linear-signature"), "{signed:?}");
    let other = Verifier::new(Scheme::Linear, &["another secret"], 300, None).unwrap();
    let forged: serde_json::Map<String, Value> = other
        .sign(0, "", now_ms / 1000, body.as_bytes())
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    let tampered = body.replacen("iss_interop_1", "iss_interop_2", 1);
    let deliveries = json!([
        {"name": "signed", "library": "linear", "secret": LINEAR_SECRET,
         "headers": signed, "body": body},
        {"name": "tampered", "library": "linear", "secret": LINEAR_SECRET,
         "headers": signed, "body": tampered},
        {"name": "other secret", "library": "linear", "secret": LINEAR_SECRET,
         "headers": forged, "body": body},
    ]);
    let results = interop(Runtime::Node, "verify", &deliveries);
    let accepted: Vec<(String, bool)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["accepted"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        accepted,
        vec![
            ("signed".to_owned(), true),
            ("tampered".to_owned(), false),
            ("other secret".to_owned(), false),
        ],
        "{results}"
    );
    // Our own verifier agrees on all three.
    let check = |headers: &serde_json::Map<String, Value>, body: &str| {
        let headers = header_map(&Value::Object(headers.clone()));
        ours.verify(&headers, body.as_bytes(), now_ms / 1000)
            .is_ok()
    };
    assert!(check(&signed, &body));
    assert!(!check(&signed, &tampered));
    assert!(!check(&forged, &body));
}
