//! The presets of the scheme model through the real receiver and a real ledger: a public-key
//! delivery (Discord, Ed25519), the handshakes (Discord's PING, Zoom's URL validation,
//! Twitch's callback verification) answered and never recorded, and a scheme that signs the URL
//! (Twilio) verified against the request URL or the source's `public_url`.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::json;
use shared::Outcome;

use hookledger_verify::generic::{sign, Signer};
use hookledger_verify::{Algorithm, PrivateKey, Request, Scheme, Verifier};

use crate::helpers::*;

/// The demo Discord application's key (events/private-keys.local.json; its public half is the
/// `discord` source's secret in events/sources.local.json).
const DISCORD_SEED: &str = "f94389da93686f12262ee7596c1a17545b98c0330b1153e97a09d9c350d46afe";
const ZOOM_SECRET: &str = "hookledger-local-zoom-secret-token";
const TWITCH_SECRET: &str = "hookledger-local-twitch-secret";
const TWILIO_TOKEN: &str = "hookledger0local0twilio0auth0token";

fn headers(pairs: &[(&str, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// `body` signed as the preset `scheme`'s provider would at `NOW`, with `extra` headers (those
/// the scheme signs, e.g. Twitch's message id), for `url`.
fn delivery(
    scheme: Scheme,
    signer: Signer<'_>,
    extra: &[(&str, String)],
    url: &str,
    body: &str,
) -> Delivery {
    let model = hookledger_verify::presets::preset(scheme)
        .unwrap()
        .model
        .unwrap();
    let mut map = headers(extra);
    let signed = sign(
        &model,
        signer,
        &Request {
            method: "POST",
            url,
            headers: &map,
            body: body.as_bytes(),
        },
        NOW,
    )
    .unwrap();
    for (name, value) in signed {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    Delivery {
        headers: map,
        body: body.as_bytes().to_vec(),
    }
}

fn discord_key() -> PrivateKey {
    PrivateKey::parse(Algorithm::Ed25519, DISCORD_SEED, None).unwrap()
}

#[tokio::test]
async fn a_discord_interaction_verifies_with_the_public_key_and_its_ping_is_answered_not_recorded()
{
    let app = spawn_app().await;
    let key = discord_key();
    let ping = delivery(
        Scheme::Discord,
        Signer::Private(&key),
        &[],
        "",
        r#"{"id":"1","type":1,"version":1}"#,
    );
    let reply = app.receive("discord", &ping).await;
    assert_eq!((reply.status, reply.outcome), (200, Outcome::Challenge));
    assert_eq!(reply.body, r#"{"type":1}"#);
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(app.count("SELECT count(*) FROM webhook_event").await, 0);

    let body = r#"{"id":"1316000000000000002","type":2,"data":{"name":"refund"},"version":1}"#;
    let command = delivery(Scheme::Discord, Signer::Private(&key), &[], "", body);
    assert_eq!(app.receive("discord", &command).await.status, 200);
    assert_eq!(
        app.receive("discord", &command).await.outcome,
        Outcome::Replayed
    );
    assert_eq!(
        app.texts("SELECT event_id || ' ' || event_type FROM webhook_event")
            .await,
        ["1316000000000000002 2"]
    );

    // Another key's signature, a changed body, a late timestamp: 401, nothing written.
    let other = PrivateKey::parse(Algorithm::Ed25519, &"11".repeat(32), None).unwrap();
    let forged = delivery(Scheme::Discord, Signer::Private(&other), &[], "", body);
    assert_eq!(app.receive("discord", &forged).await.status, 401);
    let mut tampered = command.clone();
    tampered.body = body.replace("refund", "refunD").into_bytes();
    assert_eq!(app.receive("discord", &tampered).await.status, 401);
    assert_eq!(app.count("SELECT count(*) FROM webhook_event").await, 1);
}

#[tokio::test]
async fn zoom_and_twitch_handshakes_are_answered_as_their_providers_expect() {
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "zoom", "scheme": "zoom", "secrets": [ZOOM_SECRET]},
        {"name": "twitch", "scheme": "twitch", "secrets": [TWITCH_SECRET]},
    ]))
    .await;
    let zoom_key = Verifier::new(Scheme::Zoom, &[ZOOM_SECRET], 300, None).unwrap();
    let validation = r#"{"event":"endpoint.url_validation","event_ts":1750000000000,"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"}}"#;
    let zoom = delivery(
        Scheme::Zoom,
        Signer::Secret(zoom_key.key(0).unwrap()),
        &[],
        "",
        validation,
    );
    let reply = app.receive("zoom", &zoom).await;
    assert_eq!((reply.status, reply.outcome), (200, Outcome::Challenge));
    let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    // Zoom's rule: hex HMAC-SHA256 of the plainToken under the secret token.
    let expected = {
        use hmac::{Hmac, KeyInit, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(ZOOM_SECRET.as_bytes()).unwrap();
        mac.update(b"qgg8vlvZRS6UYooatFL8Aw");
        hex::encode(mac.finalize().into_bytes())
    };
    assert_eq!(
        answer,
        json!({"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": expected})
    );
    // An event of the same source is an event: named `event:event_ts`.
    let started =
        r#"{"event":"meeting.started","event_ts":1750000000123,"payload":{"object":{"id":"85"}}}"#;
    let event = delivery(
        Scheme::Zoom,
        Signer::Secret(zoom_key.key(0).unwrap()),
        &[],
        "",
        started,
    );
    assert_eq!(app.receive("zoom", &event).await.status, 200);

    let twitch_key = Verifier::new(Scheme::Twitch, &[TWITCH_SECRET], 300, None).unwrap();
    let id = (
        "twitch-eventsub-message-id",
        "e76c6bd4-55c9-4987-8304-da1588d8988b".to_owned(),
    );
    let kind = (
        "twitch-eventsub-message-type",
        "webhook_callback_verification".to_owned(),
    );
    let challenge = r#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}"#;
    let twitch = delivery(
        Scheme::Twitch,
        Signer::Secret(twitch_key.key(0).unwrap()),
        &[id.clone(), kind],
        "",
        challenge,
    );
    let reply = app.receive("twitch", &twitch).await;
    assert_eq!((reply.status, reply.content_type), (200, "text/plain"));
    assert_eq!(reply.body, "pogchamp-kappa-360noscope-vohiyo");

    assert_eq!(
        app.texts("SELECT source || ' ' || event_id || ' ' || event_type FROM webhook_event")
            .await,
        ["zoom meeting.started:1750000000123 meeting.started"]
    );
}

#[tokio::test]
async fn twilio_signs_the_url_the_receiver_sees_or_the_public_url_it_is_told() {
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "twilio", "scheme": "twilio", "secrets": [TWILIO_TOKEN]},
        {"name": "twilio-proxied", "scheme": "twilio", "secrets": [TWILIO_TOKEN],
         "public_url": "https://hooks.example.com/sms/status"},
    ]))
    .await;
    let key = Verifier::new(Scheme::Twilio, &[TWILIO_TOKEN], 300, None).unwrap();
    let body = "MessageSid=SM0123456789abcdef0123456789abcdef&MessageStatus=delivered&AccountSid=AC1&To=%2B15551230000";
    let url = "https://abc123.execute-api.us-east-1.amazonaws.com/webhooks/twilio?attempt=1";
    let signed = delivery(
        Scheme::Twilio,
        Signer::Secret(key.key(0).unwrap()),
        &[],
        url,
        body,
    );
    let receiver = app.receiver();
    let reply = receiver
        .receive_at("twilio", url, &signed.headers, &signed.body, NOW)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // Another URL (a host the provider did not call) does not verify.
    let elsewhere = "https://evil.example/webhooks/twilio?attempt=1";
    assert_eq!(
        receiver
            .receive_at("twilio", elsewhere, &signed.headers, &signed.body, NOW)
            .await
            .status,
        401
    );
    // Behind a proxy: Twilio signed its configured URL (plus the query); the receiver saw
    // another host and path.
    let public = "https://hooks.example.com/sms/status?attempt=1";
    let proxied = delivery(
        Scheme::Twilio,
        Signer::Secret(key.key(0).unwrap()),
        &[],
        public,
        body.replace("delivered", "sent").as_str(),
    );
    let seen = "https://internal.local/webhooks/twilio-proxied?attempt=1";
    assert_eq!(
        receiver
            .receive_at("twilio-proxied", seen, &proxied.headers, &proxied.body, NOW)
            .await
            .status,
        200
    );
    assert_eq!(
        app.texts("SELECT source || ' ' || event_id || ' ' || event_type FROM webhook_event ORDER BY source").await,
        [
            "twilio SM0123456789abcdef0123456789abcdef:delivered delivered",
            "twilio-proxied SM0123456789abcdef0123456789abcdef:sent sent",
        ]
    );
}

#[tokio::test]
async fn a_gitlab_token_authenticates_and_the_replay_guard_keeps_one_event_per_body() {
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "gitlab", "scheme": "gitlab", "secrets": ["hookledger-local-gitlab-token"]},
    ]))
    .await;
    let body = r#"{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}"#;
    let push = |token: &str, key: &str| Delivery {
        headers: headers(&[
            ("x-gitlab-token", token.to_owned()),
            ("x-gitlab-event", "Push Hook".to_owned()),
            ("idempotency-key", key.to_owned()),
        ]),
        body: body.as_bytes().to_vec(),
    };
    let first = app
        .receive(
            "gitlab",
            &push("hookledger-local-gitlab-token", "f0b4c2e1-0001"),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    // A resend keeps the key: a duplicate.
    let resend = app
        .receive(
            "gitlab",
            &push("hookledger-local-gitlab-token", "f0b4c2e1-0001"),
        )
        .await;
    assert_eq!(resend.outcome, Outcome::Replayed);
    // The same body under a fresh key is a replayed body, not a second event.
    let fresh = app
        .receive(
            "gitlab",
            &push("hookledger-local-gitlab-token", "f0b4c2e1-9999"),
        )
        .await;
    assert_eq!(fresh.outcome, Outcome::BodyReplayed);
    for wrong in [
        "hookledger-local-gitlab-tokeN",
        "hookledger-local-gitlab-token ",
        "",
    ] {
        let reply = app.receive("gitlab", &push(wrong, "f0b4c2e1-0002")).await;
        assert_eq!(reply.status, 401, "{wrong:?}");
    }
    assert_eq!(
        app.texts("SELECT event_id || ' ' || event_type FROM webhook_event")
            .await,
        ["f0b4c2e1-0001 Push Hook"]
    );
}

#[tokio::test]
async fn meta_checks_the_subscription_with_a_get_and_sends_entries_as_a_batch() {
    const APP_SECRET: &str = "hookledger-local-meta-app-secret";
    let (app, _) = spawn_app_with_sources(json!([
        {"name": "whatsapp", "scheme": "meta", "secrets": [APP_SECRET],
         "verify_token": "hookledger-meta-verify-token"},
    ]))
    .await;
    // The subscription check: a GET through the receiver function, not signed.
    let get = |query: &str| {
        let mut request = lambda_http::Request::new(lambda_http::Body::Empty);
        *request.method_mut() = http::Method::GET;
        *request.uri_mut() = format!("https://example.test/webhooks/whatsapp?{query}")
            .parse()
            .unwrap();
        request
    };
    let answered = receiver::handler::handle_at(
        &app.state,
        get("hub.mode=subscribe&hub.verify_token=hookledger-meta-verify-token&hub.challenge=1158201444"),
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.headers()["content-type"], "text/plain");
    assert_eq!(std::str::from_utf8(answered.body()).unwrap(), "1158201444");
    for (query, status) in [
        (
            "hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1",
            403,
        ),
        (
            "hub.mode=unsubscribe&hub.verify_token=hookledger-meta-verify-token&hub.challenge=1",
            403,
        ),
        (
            "hub.mode=subscribe&hub.verify_token=hookledger-meta-verify-token",
            400,
        ),
    ] {
        let refused = receiver::handler::handle_at(&app.state, get(query), NOW)
            .await
            .unwrap();
        assert_eq!(refused.status(), status, "{query}");
    }
    // A GET on a source without a verify_token is still 405.
    let mut stripe = get("hub.mode=subscribe");
    *stripe.uri_mut() = "https://example.test/webhooks/stripe?hub.mode=subscribe"
        .parse()
        .unwrap();
    assert_eq!(
        receiver::handler::handle_at(&app.state, stripe, NOW)
            .await
            .unwrap()
            .status(),
        405
    );

    // Two entries in one signed POST: two events, named by entry id and digest.
    let body = json!({"object": "whatsapp_business_account", "entry": [
        {"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "statuses": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI", "status": "delivered",
                          "timestamp": "1750000000", "recipient_id": "16505551234"}]}}]},
        {"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "messages": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGCA", "from": "16505551234",
                          "timestamp": "1750000001", "type": "text", "text": {"body": "hi"}}]}}]}
    ]})
    .to_string();
    let key = Verifier::new(Scheme::Meta, &[APP_SECRET], 300, None).unwrap();
    let post = delivery(
        Scheme::Meta,
        Signer::Secret(key.key(0).unwrap()),
        &[],
        "",
        &body,
    );
    let reply = app.receive("whatsapp", &post).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        app.receive("whatsapp", &post).await.outcome,
        Outcome::Replayed
    );
    let rows = app
        .texts("SELECT event_id || ' ' || event_type FROM webhook_event ORDER BY event_id")
        .await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .all(|row| row.starts_with("102290129340398:") && row.ends_with(" messages")),
        "{rows:?}"
    );
}
