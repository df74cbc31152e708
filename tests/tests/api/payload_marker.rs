//! No payload value in a log line, for every scheme (issue 28, item 5): a marker planted in the
//! body of a delivery of each scheme hookledger verifies never appears in any line the receiver
//! logs (captured at debug, as `make test`'s log files are), whether the delivery is accepted,
//! repeated, refused for its signature, or signed but unreadable. The suite-wide scan
//! (`scripts/scan-test-logs.py`) looks for the same marker in every test's log file.

use std::collections::BTreeSet;

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};
use sha2::Sha256;

use hookledger_tests::PAYLOAD_MARKER as MARK;
use hookledger_verify::generic::{sign, Signer};
use hookledger_verify::{Algorithm, PrivateKey, Request, Scheme, SigningKey};

use crate::helpers::*;

/// The URL every delivery is sent to and signed for (Twilio, Square and HubSpot sign it).
const URL: &str = "https://hooks.example.com/webhooks/marker";
/// An Ed25519 seed (Discord, Standard Webhooks v1a) and a P-256 scalar (SendGrid), test-only.
const ED25519_SEED: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const P256_SCALAR: &str = "1fe8004ba4f5234439eed861c1a28c77f65db332d4ab06131e1b0e854cf24e7e";
/// Adyen's HMAC key is hex.
const ADYEN_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C";

/// One scheme's source and a body naming one event of it, with the marker in a field that is
/// neither its id nor its type, and the unsigned headers its provider sends beside the body.
struct Case {
    scheme: Scheme,
    /// The source's `secrets[0]`: a shared secret, or the public half of the signing key.
    secret: String,
    private_key: Option<PrivateKey>,
    body: String,
    headers: Vec<(&'static str, String)>,
}

fn ed25519() -> PrivateKey {
    PrivateKey::parse(Algorithm::Ed25519, ED25519_SEED, None).unwrap()
}

fn p256() -> PrivateKey {
    PrivateKey::parse(Algorithm::EcdsaP256Sha256, P256_SCALAR, None).unwrap()
}

fn shared(scheme: Scheme, secret: &str, body: Value, headers: &[(&'static str, &str)]) -> Case {
    Case {
        scheme,
        secret: secret.to_owned(),
        private_key: None,
        body: body.to_string(),
        headers: headers.iter().map(|(n, v)| (*n, (*v).to_owned())).collect(),
    }
}

fn cases() -> Vec<Case> {
    let note = json!({"note": MARK});
    let mut cases = vec![
        shared(
            Scheme::Stripe,
            "whsec_marker",
            json!({"id": "evt_m", "type": "marker.test", "data": {"object": note}}),
            &[],
        ),
        shared(
            Scheme::Github,
            "github-marker",
            json!({"action": "opened", "issue": {"body": MARK}}),
            &[("x-github-delivery", "d-m"), ("x-github-event", "issues")],
        ),
        shared(
            Scheme::StandardWebhooks,
            "whsec_bWFya2VyLXNlY3JldA==",
            json!({"type": "marker.test", "data": note}),
            &[("webhook-id", "msg_m")],
        ),
        shared(
            Scheme::Shopify,
            "shopify-marker",
            json!({"id": 1, "note": MARK}),
            &[
                ("x-shopify-event-id", "e-m"),
                ("x-shopify-topic", "orders/create"),
            ],
        ),
        shared(
            Scheme::Slack,
            "slack-marker",
            json!({"type": "event_callback", "event_id": "Ev_m",
                   "event": {"type": "message", "text": MARK}}),
            &[],
        ),
        shared(
            Scheme::Paddle,
            "pdl_ntfset_marker",
            json!({"event_id": "evt_m", "event_type": "marker.test", "data": note}),
            &[],
        ),
        Case {
            scheme: Scheme::Twilio,
            secret: "twilio-marker".to_owned(),
            private_key: None,
            body: format!(
                "MessageSid=SM0123456789abcdef0123456789abcdef&MessageStatus=delivered&Body={MARK}"
            ),
            headers: vec![(
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            )],
        },
        shared(
            Scheme::Square,
            "square-marker",
            json!({"merchant_id": "M1", "type": "payment.updated", "event_id": "sq-m",
                   "data": {"object": note}}),
            &[],
        ),
        shared(
            Scheme::Intercom,
            "intercom-marker",
            json!({"id": "notif_m", "topic": "conversation.user.created",
                   "data": {"item": {"body": MARK}}}),
            &[],
        ),
        shared(
            Scheme::Linear,
            "linear-marker",
            json!({"action": "create", "type": "Issue", "webhookTimestamp": NOW * 1000,
                   "data": {"title": MARK}}),
            &[("linear-delivery", "lin-m")],
        ),
        shared(
            Scheme::Zoom,
            "zoom-marker",
            json!({"event": "meeting.started", "event_ts": 1_796_300_000_000_u64,
                   "payload": {"object": {"topic": MARK}}}),
            &[],
        ),
        shared(
            Scheme::Twitch,
            "twitch-marker",
            json!({"subscription": {"id": "s1", "type": "channel.follow"},
                   "event": {"user_name": MARK}}),
            &[
                ("twitch-eventsub-message-id", "tw-m"),
                ("twitch-eventsub-message-type", "notification"),
            ],
        ),
        shared(
            Scheme::Mailgun,
            "mailgun-marker",
            json!({"signature": {"timestamp": NOW.to_string(), "token": "tok-m"},
                   "event-data": {"id": "mg-m", "event": "delivered", "recipient": MARK}}),
            &[],
        ),
        Case {
            scheme: Scheme::StandardWebhooksV1a,
            secret: format!("whpk_{}", ed25519().public_key_base64()),
            private_key: Some(ed25519()),
            body: json!({"type": "marker.test", "data": note}).to_string(),
            headers: vec![("webhook-id", "msg_v1a_m".to_owned())],
        },
        Case {
            scheme: Scheme::Discord,
            secret: ed25519().public_key_base64(),
            private_key: Some(ed25519()),
            body: json!({"type": 2, "id": "int_m",
                         "data": {"name": "note", "options": [{"value": MARK}]}})
            .to_string(),
            headers: Vec::new(),
        },
        Case {
            scheme: Scheme::Sendgrid,
            secret: p256().public_key_base64(),
            private_key: Some(p256()),
            body: json!([{"sg_event_id": "sg_m", "event": "delivered", "email": MARK}]).to_string(),
            headers: Vec::new(),
        },
        shared(
            Scheme::Hubspot,
            "hubspot-marker",
            json!([{"eventId": 7, "subscriptionType": "contact.propertyChange",
                    "propertyValue": MARK}]),
            &[],
        ),
        shared(
            Scheme::Gitlab,
            "gitlab-marker",
            json!({"object_kind": "note", "object_attributes": {"note": MARK}}),
            &[
                ("x-gitlab-token", "gitlab-marker"),
                ("idempotency-key", "gl-m"),
                ("x-gitlab-event", "Note Hook"),
            ],
        ),
        shared(Scheme::Adyen, ADYEN_KEY, adyen_batch(), &[]),
        shared(
            Scheme::Meta,
            "meta-marker",
            json!({"object": "whatsapp_business_account", "entry": [
                {"id": "102290129340398", "changes": [
                    {"field": "messages", "value": {"messages": [{"text": {"body": MARK}}]}}]}]}),
            &[],
        ),
    ];
    cases.push(shared(
        Scheme::GenericHmac,
        "generic-marker",
        json!({"id": "gen-m", "type": "marker.test", "data": note}),
        &[],
    ));
    cases
}

/// The generic-hmac source's model.
fn generic_model() -> Value {
    json!({"signature_header": "X-Marker-Signature", "timestamp_header": "X-Marker-Timestamp",
           "signed_payload": "{timestamp}.{body}", "event_id_pointer": "/id",
           "event_type_pointer": "/type"})
}

/// An Adyen batch of one item carrying the marker outside its signed fields, the item signed as
/// Adyen signs it (base64 HMAC-SHA256 of the hex key over the eight fields joined by `:`).
fn adyen_batch() -> Value {
    let mut item = json!({
        "additionalData": {"shopperEmail": MARK},
        "amount": {"currency": "EUR", "value": 1130},
        "eventCode": "AUTHORISATION", "merchantAccountCode": "HookledgerECOM",
        "merchantReference": "ord_m", "pspReference": "QFQTPCQ8HXSKGKMK", "success": "true"});
    let signed = "QFQTPCQ8HXSKGKMK::HookledgerECOM:ord_m:1130:EUR:AUTHORISATION:true";
    let mut mac = Hmac::<Sha256>::new_from_slice(&hex::decode(ADYEN_KEY).unwrap()).unwrap();
    mac.update(signed.as_bytes());
    let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    item["additionalData"]["hmacSignature"] = json!(signature);
    json!({"live": "false", "notificationItems": [{"NotificationRequestItem": item}]})
}

/// `body` signed as `case`'s provider would at `NOW`, for [`URL`]: the headers to send (the
/// case's own and the signature's), and the body (with a signature the scheme carries in it).
/// Unsigned (the case's headers only) when the model cannot sign it (a body without the fields
/// the scheme signs: Linear's or Mailgun's timestamp).
fn signed(case: &Case, body: &str) -> (HeaderMap, Vec<u8>) {
    let mut headers = HeaderMap::new();
    for (name, value) in &case.headers {
        headers.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    let mut body = body.to_owned();
    let model = match case.scheme {
        Scheme::GenericHmac => serde_json::from_value(generic_model()).unwrap(),
        scheme => hookledger_verify::presets::preset(scheme)
            .unwrap()
            .model
            .unwrap(),
    };
    // GitLab's token is the secret itself; Adyen's items carry their own signatures.
    if matches!(case.scheme, Scheme::Gitlab | Scheme::Adyen) {
        return (headers, body.into_bytes());
    }
    let key = SigningKey::for_algorithm(
        model.algorithm,
        &case.secret,
        model.secret_encoding,
        model.key_prefix.as_deref(),
    );
    let key = key.ok();
    let signer = match (&case.private_key, &key) {
        (Some(private), _) => Signer::Private(private),
        (None, Some(key)) => Signer::Secret(key),
        (None, None) => panic!("{:?}: no key", case.scheme),
    };
    let signature = sign(
        &model,
        signer,
        &Request {
            method: "POST",
            url: URL,
            headers: &headers,
            body: body.as_bytes(),
        },
        NOW,
    );
    let Ok(signature) = signature else {
        return (headers, body.into_bytes());
    };
    for (name, value) in signature {
        match name.strip_prefix("body ") {
            // A signature inside the body (Mailgun): written at its pointer after signing.
            Some(pointer) => {
                let mut doc: Value = serde_json::from_str(&body).unwrap();
                let (parent, leaf) = pointer.rsplit_once('/').unwrap();
                doc.pointer_mut(parent)
                    .and_then(Value::as_object_mut)
                    .unwrap_or_else(|| panic!("{:?}: no object at {parent}", case.scheme))
                    .insert(leaf.to_owned(), json!(value));
                body = doc.to_string();
            }
            None => {
                headers.insert(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(&value).unwrap(),
                );
            }
        }
    }
    (headers, body.into_bytes())
}

#[tokio::test]
async fn a_payload_marker_in_a_delivery_of_every_scheme_never_reaches_a_log_line() {
    let cases = cases();
    // Every scheme a source can name has its case.
    let covered: BTreeSet<&str> = cases.iter().map(|c| c.scheme.name()).collect();
    let all: BTreeSet<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(covered, all);
    let sources: Vec<Value> = cases
        .iter()
        .map(|case| {
            let mut source = json!({"name": format!("marker-{}", case.scheme.name()),
                                    "scheme": case.scheme.name(), "secrets": [case.secret],
                                    "public_url": URL});
            if !hookledger_verify::Verifier::new(case.scheme, &[&case.secret], 300, None)
                .is_ok_and(|v| v.signs_url())
            {
                source.as_object_mut().unwrap().remove("public_url");
            }
            if case.scheme == Scheme::GenericHmac {
                source["generic"] = generic_model();
                source["retry_horizon_hours"] = json!(24);
            }
            source
        })
        .collect();
    let (app, _) = spawn_app_with_sources(Value::Array(sources)).await;
    let receiver = app.receiver();
    let (logs, _guard) = capture_logs();
    for case in &cases {
        let source = format!("marker-{}", case.scheme.name());
        assert!(case.body.contains(MARK), "{source}");
        let (headers, body) = signed(case, &case.body);
        // Accepted, then repeated.
        for _ in 0..2 {
            let reply = receiver
                .receive_at(&source, URL, &headers, &body, NOW)
                .await;
            assert!(
                reply.status < 300,
                "{source}: {} {}",
                reply.status,
                reply.body
            );
        }
        // One byte of the marker changed after signing: refused for its signature where the
        // whole body is signed (Adyen and Mailgun sign chosen fields only).
        let mut changed = body.clone();
        let at = changed
            .windows(MARK.len())
            .position(|w| w == MARK.as_bytes())
            .unwrap();
        changed[at] ^= 1;
        let reply = receiver
            .receive_at(&source, URL, &headers, &changed, NOW)
            .await;
        if !matches!(case.scheme, Scheme::Adyen | Scheme::Mailgun) {
            assert!(reply.status >= 400, "{source}: {}", reply.status);
        }
        // Signed, but naming no event (or nothing the scheme can read).
        let bare = if case.body.starts_with('{') {
            json!({"note": MARK}).to_string()
        } else if case.body.starts_with('[') {
            json!([{"note": MARK}]).to_string()
        } else {
            format!("Body={MARK}")
        };
        let (headers, body) = signed(case, &bare);
        let reply = receiver
            .receive_at(&source, URL, &headers, &body, NOW)
            .await;
        assert!(!reply.body.contains(MARK), "{source}: {}", reply.body);
    }
    let text = logs.text();
    assert!(
        text.contains("marker-stripe"),
        "the logs were captured: {text}"
    );
    assert!(
        !text.contains(MARK),
        "a log line quotes a payload: {}",
        text.lines().find(|l| l.contains(MARK)).unwrap_or_default()
    );
}
