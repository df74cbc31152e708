//! The presets against the providers' vectors (`verify/tests/vectors/*.json`, generated with the
//! providers' libraries where one exists, see `generate.py` there): each valid vector verifies
//! through a [`Verifier`], tampering fails with the right error, extraction names the event, the
//! handshakes are answered, and each preset's model agrees with [`Scheme`].

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use serde_json::Value;

use super::{all, preset, Handshake, HandshakeAnswer};
use crate::extract::{extract, Extracted};
use crate::{Request, Scheme, Verified, Verifier, VerifyError};

/// The clock for vectors without a signed timestamp.
const ANY_NOW: i64 = 1_796_300_000;

/// The vector files, by scheme.
fn vectors_of(scheme: Scheme) -> Value {
    let text = match scheme {
        Scheme::Twilio => include_str!("../../tests/vectors/twilio.json"),
        Scheme::Square => include_str!("../../tests/vectors/square.json"),
        Scheme::Intercom => include_str!("../../tests/vectors/intercom.json"),
        Scheme::Linear => include_str!("../../tests/vectors/linear.json"),
        Scheme::Zoom => include_str!("../../tests/vectors/zoom.json"),
        Scheme::Discord => include_str!("../../tests/vectors/discord.json"),
        Scheme::Twitch => include_str!("../../tests/vectors/twitch.json"),
        Scheme::Mailgun => include_str!("../../tests/vectors/mailgun.json"),
        Scheme::StandardWebhooksV1a => {
            include_str!("../../tests/vectors/standard-webhooks-v1a.json")
        }
        other => panic!("no vectors for {other:?}"),
    };
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(value["scheme"], scheme.name());
    value
}

/// Every preset of the model.
const PRESETS: [Scheme; 9] = [
    Scheme::Twilio,
    Scheme::Square,
    Scheme::Intercom,
    Scheme::Linear,
    Scheme::Zoom,
    Scheme::Discord,
    Scheme::Twitch,
    Scheme::Mailgun,
    Scheme::StandardWebhooksV1a,
];

/// One vector, owned.
#[derive(Debug, Clone)]
struct Vector {
    name: String,
    secret: String,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
    valid: bool,
    now: i64,
}

impl Vector {
    fn from_json(value: &Value) -> Self {
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
        Self {
            name: text("name"),
            secret: text("secret"),
            url: text("url"),
            headers: value["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect(),
            body: text("body"),
            valid: match value["expect"].as_str() {
                Some("valid") => true,
                Some("invalid") => false,
                other => panic!("expect {other:?}"),
            },
            now: value["now"].as_i64().unwrap_or(ANY_NOW),
        }
    }

    fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in &self.headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap()
    }

    fn set_header(&mut self, name: &str, value: &str) {
        for (n, v) in &mut self.headers {
            if n.eq_ignore_ascii_case(name) {
                *v = value.to_owned();
            }
        }
    }

    fn verifier(&self, scheme: Scheme) -> Verifier {
        Verifier::new(scheme, &[&self.secret], 300, None).unwrap()
    }

    fn verify(&self, scheme: Scheme) -> Result<Verified, VerifyError> {
        self.verify_at(scheme, self.now)
    }

    fn verify_at(&self, scheme: Scheme, now: i64) -> Result<Verified, VerifyError> {
        let headers = self.header_map();
        let request = Request {
            method: "POST",
            url: &self.url,
            headers: &headers,
            body: self.body.as_bytes(),
        };
        self.verifier(scheme).verify_request(&request, now)
    }
}

fn vectors(scheme: Scheme) -> Vec<Vector> {
    vectors_of(scheme)["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(Vector::from_json)
        .collect()
}

fn vector(scheme: Scheme, name: &str) -> Vector {
    vectors(scheme)
        .into_iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

/// The first valid vector of `scheme`.
fn valid(scheme: Scheme) -> Vector {
    vectors(scheme).into_iter().find(|v| v.valid).unwrap()
}

#[test]
fn every_vector_verifies_or_fails_as_its_file_says() {
    let mut count = 0;
    for scheme in PRESETS {
        let list = vectors(scheme);
        assert!(list.iter().filter(|v| v.valid).count() >= 1, "{scheme:?}");
        for v in list {
            let outcome = v.verify(scheme);
            assert_eq!(outcome.is_ok(), v.valid, "{}: {outcome:?}", v.name);
            if v.valid {
                assert_eq!(outcome, Ok(Verified { key_index: 0 }), "{}", v.name);
            }
            count += 1;
        }
    }
    assert!(count >= 30, "{count} vectors");
}

#[test]
fn a_vector_verifies_with_its_key_second_in_a_rotation() {
    for scheme in PRESETS {
        let v = valid(scheme);
        // Another valid key of the algorithm first: for Ed25519 the RFC 8032 test key 1.
        let other = match scheme {
            Scheme::Discord => "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            Scheme::StandardWebhooksV1a => "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
            _ => "another-secret",
        };
        let verifier = Verifier::new(scheme, &[other, &v.secret], 300, None).unwrap();
        let headers = v.header_map();
        let request = Request {
            method: "POST",
            url: &v.url,
            headers: &headers,
            body: v.body.as_bytes(),
        };
        assert_eq!(
            verifier.verify_request(&request, v.now),
            Ok(Verified { key_index: 1 }),
            "{scheme:?}"
        );
    }
}

#[test]
fn a_tampered_body_fails_except_where_the_provider_does_not_sign_it() {
    for scheme in PRESETS {
        for mut v in vectors(scheme).into_iter().filter(|v| v.valid) {
            // One signed byte changed: the body's last digit (a JSON or form value; for Mailgun
            // a value of `event-data`).
            let at = v.body.rfind(|c: char| c.is_ascii_digit()).unwrap();
            let digit = v.body.as_bytes()[at];
            let next = if digit == b'9' { "0" } else { "9" };
            v.body.replace_range(at..=at, next);
            let expected = if scheme == Scheme::Mailgun {
                // Mailgun signs only signature.timestamp + signature.token.
                Ok(Verified { key_index: 0 })
            } else {
                Err(VerifyError::NoSignatureMatched)
            };
            assert_eq!(v.verify(scheme), expected, "{}", v.name);
        }
    }
}

#[test]
fn mailgun_signs_the_timestamp_and_token_but_not_the_event() {
    let v = valid(Scheme::Mailgun);
    let mut event = v.clone();
    event.body = v.body.replace("\"delivered\"", "\"failed\"");
    assert_ne!(event.body, v.body);
    assert!(event.verify(Scheme::Mailgun).is_ok());
    let mut token = v.clone();
    token.body = v.body.replace("a8ce0edb", "a8ce0edc");
    assert_eq!(
        token.verify(Scheme::Mailgun),
        Err(VerifyError::NoSignatureMatched)
    );
    let mut timestamp = v.clone();
    timestamp.body = v.body.replace("\"1796300000\"", "\"1796300001\"");
    assert_eq!(
        timestamp.verify(Scheme::Mailgun),
        Err(VerifyError::NoSignatureMatched)
    );
    let mut unsigned = v.clone();
    unsigned.body = v.body.replace("\"signature\":\"", "\"signaturX\":\"");
    assert_eq!(
        unsigned.verify(Scheme::Mailgun),
        Err(VerifyError::MissingHeader(
            "body /signature/signature".into()
        ))
    );
    assert_eq!(
        v.verify_at(Scheme::Mailgun, v.now + 301),
        Err(VerifyError::TimestampOutsideTolerance)
    );
}

#[test]
fn a_signed_url_is_required_and_checked() {
    for scheme in [Scheme::Twilio, Scheme::Square] {
        let v = valid(scheme);
        assert!(!v.url.is_empty());
        let mut other = v.clone();
        other.url = format!("{}/", v.url);
        assert_eq!(
            other.verify(scheme),
            Err(VerifyError::NoSignatureMatched),
            "{scheme:?}"
        );
        let mut http = v.clone();
        http.url = v.url.replacen("https://", "http://", 1);
        assert_eq!(http.verify(scheme), Err(VerifyError::NoSignatureMatched));
        let mut none = v.clone();
        none.url = String::new();
        assert_eq!(none.verify(scheme), Err(VerifyError::MissingConfig));
    }
    // The URLs of the other presets are not signed.
    for scheme in PRESETS {
        if matches!(scheme, Scheme::Twilio | Scheme::Square) {
            continue;
        }
        let mut v = valid(scheme);
        v.url = "https://attacker.example/".to_owned();
        assert!(v.verify(scheme).is_ok(), "{scheme:?}");
    }
}

#[test]
fn twilio_signs_the_form_fields_in_any_order() {
    let v = vector(Scheme::Twilio, "twilio-status-callback");
    let mut shuffled = v.clone();
    let mut fields: Vec<&str> = v.body.split('&').collect();
    fields.reverse();
    shuffled.body = fields.join("&");
    assert!(shuffled.verify(Scheme::Twilio).is_ok());
    let mut added = v.clone();
    added.body = format!("{}&Extra=1", v.body);
    assert_eq!(
        added.verify(Scheme::Twilio),
        Err(VerifyError::NoSignatureMatched)
    );
}

/// Changes a timestamp header's value.
type Change = fn(&str) -> String;

/// The header that carries the signed timestamp, and a changed value (still within the
/// tolerance) that is no longer the one signed.
fn timestamp_header(scheme: Scheme) -> Option<(&'static str, Change)> {
    let plus_one = |t: &str| (t.parse::<i64>().unwrap() + 1).to_string();
    match scheme {
        Scheme::Zoom => Some(("x-zm-request-timestamp", plus_one)),
        Scheme::Discord => Some(("X-Signature-Timestamp", plus_one)),
        Scheme::StandardWebhooksV1a => Some(("webhook-timestamp", plus_one)),
        Scheme::Twitch => Some(("Twitch-Eventsub-Message-Timestamp", |t: &str| {
            t.replacen("12:00:", "12:01:", 1)
        })),
        _ => None,
    }
}

#[test]
fn a_tampered_timestamp_fails() {
    for scheme in PRESETS {
        let v = valid(scheme);
        let signs = preset(scheme).unwrap().model.unwrap().parse().unwrap();
        assert_eq!(
            signs.timestamp.is_some(),
            !matches!(scheme, Scheme::Twilio | Scheme::Square | Scheme::Intercom),
            "{scheme:?}"
        );
        assert_eq!(scheme.signs_timestamp(), signs.timestamp.is_some());
        if signs.timestamp.is_none() {
            // No timestamp: any clock.
            assert!(v.verify_at(scheme, 0).is_ok(), "{scheme:?}");
            continue;
        }
        assert_eq!(
            v.verify_at(scheme, v.now + 301),
            Err(VerifyError::TimestampOutsideTolerance),
            "{scheme:?}"
        );
        assert_eq!(
            v.verify_at(scheme, v.now - 301),
            Err(VerifyError::TimestampOutsideTolerance),
            "{scheme:?}"
        );
        assert!(v.verify_at(scheme, v.now + 299).is_ok(), "{scheme:?}");
        if let Some((name, change)) = timestamp_header(scheme) {
            let mut changed = v.clone();
            changed.set_header(name, &change(v.header(name)));
            assert_eq!(
                changed.verify(scheme),
                Err(VerifyError::NoSignatureMatched),
                "{scheme:?}"
            );
            let mut garbage = v.clone();
            garbage.set_header(name, "soon");
            assert_eq!(
                garbage.verify(scheme),
                Err(VerifyError::MalformedHeader(
                    name.to_ascii_lowercase().into()
                )),
                "{scheme:?}"
            );
            let mut missing = v.clone();
            missing
                .headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            assert_eq!(
                missing.verify(scheme),
                Err(VerifyError::MissingHeader(name.to_ascii_lowercase().into())),
                "{scheme:?}"
            );
        }
    }
    // Linear's timestamp is in the signed body.
    let v = valid(Scheme::Linear);
    let mut changed = v.clone();
    changed.body = v.body.replace("1796300000000", "1796300001000");
    assert_eq!(
        changed.verify(Scheme::Linear),
        Err(VerifyError::NoSignatureMatched)
    );
    let mut missing = v.clone();
    missing.body = v.body.replace("webhookTimestamp", "webhookTimestamX");
    assert_eq!(
        missing.verify(Scheme::Linear),
        Err(VerifyError::MissingSignedField(
            "body /webhookTimestamp".into()
        ))
    );
}

#[test]
fn a_missing_or_malformed_signature_is_named() {
    for scheme in PRESETS {
        let v = valid(scheme);
        let name = scheme.signature_header();
        if scheme == Scheme::Mailgun {
            continue; // in the body: see mailgun_signs_the_timestamp_and_token_but_not_the_event
        }
        let mut missing = v.clone();
        missing
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        assert_eq!(
            missing.verify(scheme),
            Err(VerifyError::MissingHeader(name.into())),
            "{scheme:?}"
        );
        let mut malformed = v.clone();
        malformed.set_header(name, "not a signature!");
        // A list too: its entries are `<version>,<signature>`.
        assert_eq!(
            malformed.verify(scheme),
            Err(VerifyError::MalformedHeader(name.into())),
            "{scheme:?}"
        );
    }
}

/// What extracting `vector` of `scheme` gives: id and type, or the handshake.
fn extracted(scheme: Scheme, v: &Vector) -> Extracted<'static> {
    let verifier = v.verifier(scheme);
    let headers = v.header_map();
    match extract(scheme, verifier.generic(), &headers, v.body.as_bytes()).unwrap() {
        Extracted::Event(meta) => Extracted::Event(crate::extract::EventMeta {
            event_id: meta.event_id.into_owned().into(),
            event_type: meta.event_type.into_owned().into(),
            document: meta.document.into_owned().into(),
        }),
        Extracted::Challenge(c) => Extracted::Challenge(c),
        Extracted::Handshake { handshake, token } => Extracted::Handshake { handshake, token },
        Extracted::Batch(items) => Extracted::Batch(
            items
                .into_iter()
                .map(|meta| crate::extract::EventMeta {
                    event_id: meta.event_id.into_owned().into(),
                    event_type: meta.event_type.into_owned().into(),
                    document: meta.document.into_owned().into(),
                })
                .collect(),
        ),
    }
}

fn id_and_type(scheme: Scheme, name: &str) -> (String, String) {
    match extracted(scheme, &vector(scheme, name)) {
        Extracted::Event(meta) => (meta.event_id.into_owned(), meta.event_type.into_owned()),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn extraction_names_each_presets_events() {
    let cases: [(Scheme, &str, &str, &str); 14] = [
        (
            Scheme::Twilio,
            "twilio-status-callback",
            "SM0123456789abcdef:delivered",
            "delivered",
        ),
        (
            Scheme::Twilio,
            "twilio-call-status",
            "CA42:completed",
            "completed",
        ),
        (
            Scheme::Twilio,
            "twilio-research27-form",
            "SM1:received",
            "received",
        ),
        (
            Scheme::Square,
            "square-research27",
            "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc",
            "payment.updated",
        ),
        (
            Scheme::Intercom,
            "intercom-notification",
            "notif_ccd8a4d2-c4b9-4a2a-9a3b-5d0f1e6b2f10",
            "conversation.user.created",
        ),
        (
            Scheme::Linear,
            "linear-research27",
            "5d8f0a56-7c1e-4c55-9d1e-1c2a3b4c5d6e",
            "Issue.create",
        ),
        (
            Scheme::Linear,
            "linear-comment-update",
            "a1b2c3d4-0000-4000-8000-000000000001",
            "Comment.update",
        ),
        (
            Scheme::Zoom,
            "zoom-meeting-started",
            "meeting.started:1796302800123",
            "meeting.started",
        ),
        (
            Scheme::Zoom,
            "zoom-research27",
            "test:1796300000000",
            "test",
        ),
        (
            Scheme::Discord,
            "discord-application-command",
            "1180000000000000001",
            "2",
        ),
        (
            Scheme::Twitch,
            "twitch-notification",
            "befa7b53-d79d-478f-86b9-120f112b044e",
            "channel.follow",
        ),
        (
            Scheme::Mailgun,
            "mailgun-research27",
            "CPgfbmQMTCKtHW6uIWtuVe",
            "delivered",
        ),
        (
            Scheme::StandardWebhooksV1a,
            "standard-webhooks-v1a-research27",
            "msg_1",
            "test",
        ),
        (
            Scheme::StandardWebhooksV1a,
            "standard-webhooks-v1a-invoice",
            "msg_2Lh9KRb0pzN4LePd3XiA0",
            "invoice.paid",
        ),
    ];
    for (scheme, name, id, event_type) in cases {
        assert_eq!(
            id_and_type(scheme, name),
            (id.to_owned(), event_type.to_owned()),
            "{name}"
        );
    }
}

#[test]
fn twilio_extraction_reads_the_form_as_a_document() {
    let v = vector(Scheme::Twilio, "twilio-status-callback");
    let Extracted::Event(meta) = extracted(Scheme::Twilio, &v) else {
        panic!("not an event");
    };
    let document: Value = serde_json::from_slice(&meta.document).unwrap();
    assert_eq!(document["MessageStatus"], "delivered");
    assert_eq!(document["From"], "+15557650000");
}

#[test]
fn a_twilio_form_without_a_sid_has_no_event_id() {
    let mut v = vector(Scheme::Twilio, "twilio-status-callback");
    v.body = "MessageStatus=delivered".to_owned();
    let verifier = v.verifier(Scheme::Twilio);
    let headers = v.header_map();
    assert_eq!(
        extract(
            Scheme::Twilio,
            verifier.generic(),
            &headers,
            v.body.as_bytes()
        ),
        Err(crate::extract::ExtractError::MissingEventId)
    );
}

/// The handshake `name` of `scheme` verifies, is recognised, and is answered `answer`.
fn handshake(scheme: Scheme, name: &str, expected: Handshake, answer: HandshakeAnswer) {
    let v = vector(scheme, name);
    let verifier = v.verifier(scheme);
    let headers = v.header_map();
    let request = Request {
        method: "POST",
        url: &v.url,
        headers: &headers,
        body: v.body.as_bytes(),
    };
    let verified = verifier.verify_request(&request, v.now).unwrap();
    let Extracted::Handshake { handshake, token } = extracted(scheme, &v) else {
        panic!("{name} is not a handshake");
    };
    assert_eq!(handshake, expected);
    assert_eq!(preset(scheme).unwrap().handshake, Some(expected));
    let key = verifier.key(verified.key_index).unwrap();
    assert_eq!(handshake.answer(&token, key), answer, "{name}");
}

#[test]
fn the_handshakes_are_recognised_and_answered() {
    let zoom: Value = vectors_of(Scheme::Zoom)["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "zoom-url-validation")
        .unwrap()["handshake_answer"]
        .clone();
    assert_eq!(
        zoom["encryptedToken"],
        "d9e0d764a78494688ba3f2d5c0ed4ca311394b4834d959759213424d2df961e3"
    );
    handshake(
        Scheme::Zoom,
        "zoom-url-validation",
        Handshake::ZoomUrlValidation,
        HandshakeAnswer {
            content_type: "application/json",
            body: zoom.to_string(),
        },
    );
    handshake(
        Scheme::Discord,
        "discord-ping",
        Handshake::DiscordPing,
        HandshakeAnswer {
            content_type: "application/json",
            body: r#"{"type":1}"#.to_owned(),
        },
    );
    handshake(
        Scheme::Twitch,
        "twitch-callback-verification",
        Handshake::TwitchCallbackVerification,
        HandshakeAnswer {
            content_type: "text/plain",
            body: "pogchamp-kappa-360noscope-vohiyo".to_owned(),
        },
    );
}

#[test]
fn a_twitch_notification_is_not_a_handshake_even_with_a_challenge_field() {
    let mut v = vector(Scheme::Twitch, "twitch-callback-verification");
    v.set_header("Twitch-Eventsub-Message-Type", "notification");
    assert!(matches!(extracted(Scheme::Twitch, &v), Extracted::Event(_)));
}

#[test]
fn every_preset_model_validates_and_builds_a_verifier() {
    let presets = all();
    for scheme in PRESETS {
        let preset = presets.iter().find(|p| p.scheme == scheme).unwrap();
        let model = preset.model.clone().unwrap();
        assert_eq!(model.validate(), Ok(()), "{scheme:?}");
        // The model survives its own JSON form (what a generic-hmac source would configure).
        let json = serde_json::to_string(&model).unwrap();
        let back: crate::GenericHmac = serde_json::from_str(&json).unwrap();
        assert_eq!(back, model, "{scheme:?}");
        let v = valid(scheme);
        let generic = Verifier::new(Scheme::GenericHmac, &[&v.secret], 300, Some(model)).unwrap();
        let headers = v.header_map();
        let request = Request {
            method: "POST",
            url: &v.url,
            headers: &headers,
            body: v.body.as_bytes(),
        };
        assert!(
            generic.verify_request(&request, v.now).is_ok(),
            "{scheme:?}"
        );
    }
    // Every scheme but generic-hmac has a preset, and every preset a model that prepares (the
    // six first ones name their events in code).
    assert_eq!(presets.len(), Scheme::ALL.len() - 1);
    for p in &presets {
        assert!(p.prepare().is_ok(), "{:?}", p.scheme);
        assert_eq!(
            p.model
                .as_ref()
                .is_some_and(crate::GenericHmac::names_nothing),
            matches!(
                p.scheme,
                Scheme::Stripe
                    | Scheme::Github
                    | Scheme::StandardWebhooks
                    | Scheme::Shopify
                    | Scheme::Slack
                    | Scheme::Paddle
            ),
            "{:?}",
            p.scheme
        );
    }
}

#[test]
fn each_presets_signature_header_agrees_with_the_scheme() {
    for p in all() {
        let prepared = p.prepare().unwrap();
        assert_eq!(
            prepared.parsed.signature.name(),
            p.scheme.signature_header(),
            "{:?}",
            p.scheme
        );
        let secret = match p.scheme {
            Scheme::Discord | Scheme::StandardWebhooksV1a => valid(p.scheme).secret,
            // The demo SendGrid verification key (events/sources.local.json).
            Scheme::Sendgrid => "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAMhAyPSWHZDxcVbZ4cbfFLi+UzEt3pYdyPo3xCI/K+m9bLLk6GFE0YVSQlzCznwrQQdGC5rOTxy4A0qCXwUNGQ==".to_owned(),
            // Adyen's HMAC key is hex.
            Scheme::Adyen => "44782DEF547AAA06C910C43932B1EB0C".to_owned(),
            _ => "secret".to_owned(),
        };
        let verifier = Verifier::new(p.scheme, &[&secret], 300, None).unwrap();
        assert_eq!(
            verifier.signature_header(),
            p.scheme.signature_header(),
            "{:?}",
            p.scheme
        );
        if let Some(name) = &prepared.config.signature_header {
            assert_eq!(name.to_ascii_lowercase(), p.scheme.signature_header());
        }
    }
}

/// Twilio signs the URL with or without the default port; twilio-python's validator accepts
/// both forms, and so do we (the port is tried the other way on a mismatch only).
#[test]
fn a_url_signed_with_or_without_its_default_port_verifies_either_way() {
    use crate::generic::{sign, Signer};
    use crate::Request;
    let verifier = Verifier::new(Scheme::Twilio, &["12345"], 300, None).unwrap();
    let model = verifier.generic().unwrap().clone();
    let headers = http::HeaderMap::new();
    let body = b"MessageSid=SM1&MessageStatus=sent";
    for (signed_at, received_at, ok) in [
        (
            "https://example.com:443/sms?x=1",
            "https://example.com/sms?x=1",
            true,
        ),
        (
            "https://example.com/sms?x=1",
            "https://example.com:443/sms?x=1",
            true,
        ),
        (
            "https://example.com:8443/sms",
            "https://example.com/sms",
            false,
        ),
        ("https://example.com/sms", "https://example.org/sms", false),
    ] {
        let request = Request {
            method: "POST",
            url: signed_at,
            headers: &headers,
            body,
        };
        let mut signed = http::HeaderMap::new();
        for (name, value) in sign(
            &model,
            Signer::Secret(verifier.key(0).unwrap()),
            &request,
            0,
        )
        .unwrap()
        {
            signed.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(&value).unwrap(),
            );
        }
        let received = Request {
            method: "POST",
            url: received_at,
            headers: &signed,
            body,
        };
        assert_eq!(
            verifier.verify_request(&received, 0).is_ok(),
            ok,
            "{signed_at} -> {received_at}"
        );
    }
}

/// A Twitch revocation names the revoked subscription's type in its body: it is typed
/// `revocation`, never as a notification of that type.
#[test]
fn a_twitch_revocation_is_typed_revocation() {
    let verifier = Verifier::new(Scheme::Twitch, &["twitch-secret-0123"], 300, None).unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("twitch-eventsub-message-id", "e76c6bd4".parse().unwrap());
    headers.insert(
        "twitch-eventsub-message-type",
        "revocation".parse().unwrap(),
    );
    let body = br#"{"subscription":{"id":"f1c2","status":"authorization_revoked","type":"channel.follow"}}"#;
    match verifier.extract(&headers, body).unwrap() {
        Extracted::Event(meta) => assert_eq!(
            (meta.event_id.as_ref(), meta.event_type.as_ref()),
            ("e76c6bd4", "revocation")
        ),
        other => panic!("{other:?}"),
    }
    // The (unsigned) header does not decide: a notification's signed body has its event.
    let body = br#"{"subscription":{"id":"f1c2","status":"enabled","type":"channel.follow"},"event":{"user_id":"1"}}"#;
    match verifier.extract(&headers, body).unwrap() {
        Extracted::Event(meta) => assert_eq!(meta.event_type.as_ref(), "channel.follow"),
        other => panic!("{other:?}"),
    }
}

/// Twilio's signed content has no separators: a captured status callback re-split so that the
/// next field's name and value sit inside the SID signs alike, and is refused for its id.
#[test]
fn a_re_split_twilio_form_is_refused_for_its_id() {
    let verifier = Verifier::new(Scheme::Twilio, &["12345"], 300, None).unwrap();
    let headers = http::HeaderMap::new();
    let re_split =
        b"AccountSid=AC1&MessageSid=SM1MessageStatusdelivered&SmsSid=SM1&SmsStatus=delivered";
    assert_eq!(
        verifier.extract(&headers, re_split),
        Err(crate::extract::ExtractError::BadEventId)
    );
    let canonical = b"AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&SmsSid=SM1";
    assert!(verifier.extract(&headers, canonical).is_ok());
}

/// A source whose signature covers chosen fields, not the whole body (Mailgun, Adyen): a body
/// that repeats a member name could show one value to us and another to a first-wins reader,
/// so it is refused whatever its signature.
#[test]
fn a_repeated_member_name_is_refused_where_only_fields_are_signed() {
    let v = valid(Scheme::Mailgun);
    assert!(v.verify(Scheme::Mailgun).is_ok());
    let mut repeated = v.clone();
    repeated.body = v
        .body
        .replacen('{', r#"{"event-data":{"event":"failed"},"#, 1);
    assert_eq!(
        repeated.verify(Scheme::Mailgun),
        Err(VerifyError::MalformedHeader("body".into()))
    );
}
