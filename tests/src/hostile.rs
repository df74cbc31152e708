//! The hostile-input corpus (issue 13, part B): a deterministic (seeded) generator of malformed
//! deliveries for every configured scheme of `events/sources.local.json`, each rendered as the
//! Lambda invocation payload the receiver function is handed (API Gateway HTTP API v2, REST API
//! v1 or ALB JSON, bytes as the runtime reads them).
//!
//! Every case must be answered 4xx with a reason and write nothing. Some are correctly signed on
//! purpose, so that they pass verification and reach event id and type extraction (numbers where
//! strings belong, NUL in ids, deep nesting, wrong encodings, invalid JSON): their expected status
//! is 400 (or 413 past the source's body limit), which proves they got that far; an unsigned or
//! wrongly signed case expects 401. The test that runs it: tests/tests/api/hostile.rs.
//!
//! A public-key source (Discord's Ed25519, SendGrid's ECDSA P-256) is signed with its provider's
//! local private key (`events/private-keys.local.json`), as `EventFile::sign` does, so its
//! correctly signed cases reach extraction and its signature cases reach the public-key
//! verification; a batch source (SendGrid) also gets cases for its batch splitter.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use base64::Engine as _;
use hookledger_verify::{GenericHmac, PrivateKey, Verifier};
use serde_json::{json, Value};

use crate::{local_private_key, local_source, EventFile};

/// Where a provider keeps an event's id or type: a JSON pointer into the body, or a header.
#[derive(Debug, Clone, Copy)]
enum Loc {
    Body(&'static str),
    Header(&'static str),
}

/// One configured source of `events/sources.local.json` and the event file its cases start from.
struct Provider {
    source: &'static str,
    template: &'static str,
    id: Loc,
    ty: Loc,
    /// Pointer to the event object the cases add fields to: the body (`""`), or a batch's
    /// first item (`"/0"`).
    object: &'static str,
}

const PROVIDERS: [Provider; 9] = [
    Provider {
        source: "stripe",
        template: "receiver/stripe-payment-intent-succeeded.json",
        id: Loc::Body("/id"),
        ty: Loc::Body("/type"),
        object: "",
    },
    Provider {
        source: "github",
        template: "receiver/github-push.json",
        id: Loc::Header("x-github-delivery"),
        ty: Loc::Header("x-github-event"),
        object: "",
    },
    Provider {
        source: "shopify",
        template: "receiver/shopify-orders-create.json",
        id: Loc::Header("x-shopify-event-id"),
        ty: Loc::Header("x-shopify-topic"),
        object: "",
    },
    Provider {
        source: "slack",
        template: "receiver/slack-app-mention.json",
        id: Loc::Body("/event_id"),
        ty: Loc::Body("/event/type"),
        object: "",
    },
    Provider {
        source: "paddle",
        template: "receiver/paddle-transaction-completed.json",
        id: Loc::Body("/event_id"),
        ty: Loc::Body("/event_type"),
        object: "",
    },
    Provider {
        source: "acme",
        template: "receiver/standard-webhooks-invoice-paid.json",
        id: Loc::Header("webhook-id"),
        ty: Loc::Body("/type"),
        object: "",
    },
    Provider {
        source: "partner",
        template: "receiver/generic-partner-order-shipped.json",
        id: Loc::Body("/event/id"),
        ty: Loc::Body("/event/type"),
        object: "",
    },
    Provider {
        source: "discord",
        template: "receiver/discord-application-command.json",
        id: Loc::Body("/id"),
        ty: Loc::Body("/type"),
        object: "",
    },
    // A batch: the cases change its first item (the template has three).
    Provider {
        source: "sendgrid",
        template: "receiver/sendgrid-event-batch.json",
        id: Loc::Body("/0/sg_event_id"),
        ty: Loc::Body("/0/event"),
        object: "/0",
    },
];

/// Which Lambda event shape a case is rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// API Gateway HTTP API, payload 2.0 (repeated headers comma-joined, as API Gateway does).
    HttpApiV2,
    /// API Gateway REST API, payload 1.0 (`headers` and `multiValueHeaders`, stage in the path).
    RestV1,
    /// Application Load Balancer target group (multi-value headers on).
    Alb,
}

/// One malformed delivery.
#[derive(Debug, Clone)]
pub struct Case {
    /// What kind of malformation (`truncated`, `oversized`, `timestamp`, ...).
    pub category: &'static str,
    /// The source (path segment) it is sent to.
    pub source: &'static str,
    /// The source's scheme as configured (`stripe`, `standard-webhooks`, ...), or `none` for a
    /// path that names no source.
    pub scheme: String,
    /// A short description, unique within the corpus.
    pub name: String,
    /// Whether it carries a signature that verifies (so it reaches id and type extraction).
    pub signed: bool,
    /// The status the receiver must answer.
    pub expect: u16,
    /// The event shape.
    pub shape: Shape,
    /// The Lambda invocation payload, JSON bytes as the runtime receives them.
    pub payload: Vec<u8>,
}

/// The body of a draft delivery: raw bytes (sent as text when UTF-8 and the coin says so, else
/// base64 with the flag), or a literal string sent with `isBase64Encoded: true`.
#[derive(Debug, Clone)]
enum Body {
    Bytes(Vec<u8>),
    Flagged(String),
}

/// A delivery before it is rendered into an event shape.
#[derive(Debug, Clone)]
struct Draft {
    method: String,
    path: String,
    /// In order; a name may repeat.
    headers: Vec<(String, String)>,
    body: Body,
}

impl Draft {
    fn set(&mut self, name: &str, value: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.to_owned()));
    }
    fn remove(&mut self, name: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn bytes(&self) -> &[u8] {
        match &self.body {
            Body::Bytes(b) => b,
            Body::Flagged(_) => &[],
        }
    }
}

/// splitmix64: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What signs a source's deliveries in the corpus: its verifier (a shared secret), or for a
/// public-key source its model and a private key (the provider's, or another for a wrong
/// signature).
#[derive(Clone)]
enum Key {
    Secret(Verifier),
    Private(GenericHmac, PrivateKey),
}

impl Key {
    /// The headers that sign `body` at `at` (`msg_id`: Standard Webhooks' `webhook-id`).
    fn sign(&self, msg_id: &str, at: i64, body: &[u8]) -> Vec<(String, String)> {
        match self {
            Key::Secret(verifier) => verifier.sign(0, msg_id, at, body),
            Key::Private(model, key) => {
                // The public-key presets sign `{timestamp}{body}`: no header of the delivery.
                let headers = http::HeaderMap::new();
                let request = hookledger_verify::Request::post(&headers, body);
                hookledger_verify::generic::sign(
                    model,
                    hookledger_verify::Signer::Private(key),
                    &request,
                    at,
                )
                .unwrap_or_default()
            }
        }
    }
}

/// A provider with its verifier and its template delivery (signature headers removed).
struct Prepared {
    p: &'static Provider,
    verifier: Verifier,
    /// What signs its deliveries correctly.
    key: Key,
    scheme: String,
    base: Draft,
    /// The names the verifier's `sign` sets (timestamp and signature headers).
    signing_headers: Vec<String>,
    template_json: Value,
    max_body_bytes: usize,
}

impl Prepared {
    fn new(p: &'static Provider) -> Result<Self> {
        let config = local_source(p.source)?;
        let event = EventFile::load(p.template)?;
        let body = event.body()?;
        // A public-key source: the verifier cannot sign (it holds the public key only).
        let key = match config.verifier.generic().filter(|m| !m.algorithm.is_hmac()) {
            Some(model) => Key::Private(model.clone(), local_private_key(p.source, model)?),
            None => Key::Secret(config.verifier.clone()),
        };
        let signing_headers: Vec<String> = key
            .sign("msg", 1, b"{}")
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if signing_headers.is_empty() {
            return Err(anyhow!("{}: cannot sign its deliveries", p.source));
        }
        let headers = event
            .headers()
            .into_iter()
            // Standard Webhooks' `webhook-id` is signed content but also the event id: kept.
            .filter(|(name, _)| name == "webhook-id" || !signing_headers.contains(name))
            .collect();
        let scheme = serde_json::to_value(config.scheme)?
            .as_str()
            .unwrap_or("?")
            .to_owned();
        Ok(Self {
            p,
            verifier: config.verifier.clone(),
            key,
            scheme,
            base: Draft {
                method: "POST".to_owned(),
                path: event.path()?.to_owned(),
                headers,
                body: Body::Bytes(body),
            },
            signing_headers,
            template_json: event.json,
            max_body_bytes: config.max_body_bytes,
        })
    }

    fn body_json(&self) -> Result<Value> {
        serde_json::from_slice(self.base.bytes()).context("template body")
    }

    /// Signs `draft`'s body at `at` with the configured secret, or the provider's private key
    /// (replacing earlier signatures).
    fn sign(&self, draft: &mut Draft, at: i64) {
        self.sign_with(&self.key, draft, at)
    }

    fn sign_with(&self, key: &Key, draft: &mut Draft, at: i64) {
        let msg_id = draft.get("webhook-id").unwrap_or("").to_owned();
        for name in &self.signing_headers {
            draft.remove(name);
        }
        let body = draft.bytes().to_vec();
        for (name, value) in key.sign(&msg_id, at, &body) {
            draft.set(&name, &value);
        }
    }

    /// Whether the source verifies with a public key (Ed25519, ECDSA).
    fn public_key(&self) -> bool {
        matches!(self.key, Key::Private(..))
    }

    /// The pointer of a new field `name` of the event object.
    fn field(&self, name: &str) -> String {
        format!("{}/{name}", self.p.object)
    }

    /// The base delivery with `body`, signed at `at`.
    fn signed_body(&self, body: Vec<u8>, at: i64) -> Draft {
        let mut draft = self.base.clone();
        draft.body = Body::Bytes(body);
        self.sign(&mut draft, at);
        draft
    }

    /// The base body with the value at JSON pointer `pointer` replaced, signed at `at`.
    fn signed_with_field(&self, pointer: &str, value: Value, at: i64) -> Result<Draft> {
        let mut doc = self.body_json()?;
        set_pointer(&mut doc, pointer, value)?;
        Ok(self.signed_body(serde_json::to_vec(&doc)?, at))
    }

    fn signature_header(&self) -> &str {
        self.verifier.signature_header()
    }
}

/// Sets the value at `pointer` (`/a/b`), creating nothing: the parent must exist.
fn set_pointer(doc: &mut Value, pointer: &str, value: Value) -> Result<()> {
    let (parent, key) = pointer
        .rsplit_once('/')
        .ok_or_else(|| anyhow!("bad pointer {pointer}"))?;
    let parent = if parent.is_empty() {
        doc
    } else {
        doc.pointer_mut(parent)
            .ok_or_else(|| anyhow!("no {parent} in the template body"))?
    };
    parent
        .as_object_mut()
        .ok_or_else(|| anyhow!("{pointer}: parent is not an object"))?
        .insert(key.to_owned(), value);
    Ok(())
}

fn remove_pointer(doc: &mut Value, pointer: &str) -> Result<()> {
    let (parent, key) = pointer
        .rsplit_once('/')
        .ok_or_else(|| anyhow!("bad pointer {pointer}"))?;
    let parent = if parent.is_empty() {
        doc
    } else {
        doc.pointer_mut(parent)
            .ok_or_else(|| anyhow!("no {parent}"))?
    };
    if let Some(object) = parent.as_object_mut() {
        object.remove(key);
    }
    Ok(())
}

/// The corpus builder: collects drafts, renders each in a seeded shape.
struct Builder {
    rng: Rng,
    cases: Vec<Case>,
    v1_template: Value,
}

impl Builder {
    fn push(
        &mut self,
        category: &'static str,
        p: &Prepared,
        name: impl Into<String>,
        draft: Draft,
        signed: bool,
        expect: u16,
    ) -> Result<()> {
        // Mostly HTTP API v2 (the template's default), a third REST v1 or ALB.
        let shape = match self.rng.below(6) {
            0 | 1 => Shape::RestV1,
            2 => Shape::Alb,
            _ => Shape::HttpApiV2,
        };
        self.push_as(category, p, name, draft, signed, expect, shape)
    }

    #[allow(clippy::too_many_arguments)]
    fn push_as(
        &mut self,
        category: &'static str,
        p: &Prepared,
        name: impl Into<String>,
        draft: Draft,
        signed: bool,
        expect: u16,
        shape: Shape,
    ) -> Result<()> {
        let base64 = self.rng.below(4) == 0;
        let payload = render(&draft, shape, base64, &p.template_json, &self.v1_template)?;
        self.cases.push(Case {
            category,
            source: p.p.source,
            scheme: p.scheme.clone(),
            name: format!("{}: {}", p.p.source, name.into()),
            signed,
            expect,
            shape,
            payload: serde_json::to_vec(&payload)?,
        });
        Ok(())
    }
}

/// Renders `draft` as a Lambda event of `shape`. A UTF-8 body is sent as text unless `base64`;
/// any other body is base64 with the flag.
fn render(
    draft: &Draft,
    shape: Shape,
    base64: bool,
    v2_template: &Value,
    v1_template: &Value,
) -> Result<Value> {
    let (body, flagged) = match &draft.body {
        Body::Flagged(text) => (text.clone(), true),
        Body::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if !base64 => (text.to_owned(), false),
            _ => (
                base64::engine::general_purpose::STANDARD.encode(bytes),
                true,
            ),
        },
    };
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    let mut multi: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in &draft.headers {
        let name = name.to_ascii_lowercase();
        // API Gateway v2 joins a repeated header's values with commas.
        joined
            .entry(name.clone())
            .and_modify(|v| {
                v.push(',');
                v.push_str(value)
            })
            .or_insert_with(|| value.clone());
        multi.entry(name).or_default().push(value.clone());
    }
    let last: BTreeMap<&String, &String> = multi
        .iter()
        .filter_map(|(name, values)| Some((name, values.last()?)))
        .collect();
    Ok(match shape {
        Shape::HttpApiV2 => {
            let mut event = v2_template.clone();
            event["rawPath"] = json!(draft.path);
            event["requestContext"]["http"]["path"] = json!(draft.path);
            event["requestContext"]["http"]["method"] = json!(draft.method);
            event["headers"] = json!(joined);
            event["body"] = json!(body);
            event["isBase64Encoded"] = json!(flagged);
            event
        }
        Shape::RestV1 => {
            let mut event = v1_template.clone();
            event["path"] = json!(draft.path);
            event["httpMethod"] = json!(draft.method);
            event["requestContext"]["path"] = json!(format!("/prod{}", draft.path));
            event["requestContext"]["httpMethod"] = json!(draft.method);
            event["headers"] = json!(last);
            event["multiValueHeaders"] = json!(multi);
            event["body"] = json!(body);
            event["isBase64Encoded"] = json!(flagged);
            event
        }
        Shape::Alb => json!({
            "requestContext": {"elb": {"targetGroupArn":
                "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/hookledger/6d0ecf831eec9f09"}},
            "httpMethod": draft.method,
            "path": draft.path,
            "multiValueQueryStringParameters": {},
            "multiValueHeaders": multi,
            "body": body,
            "isBase64Encoded": flagged,
        }),
    })
}

/// Flips the first hex or base64 character of the signature part of `value` (after the last
/// `=` or `,` of the prefix), keeping the length.
fn flip(value: &str, at_end: bool) -> String {
    let mut chars: Vec<char> = value.chars().collect();
    let index = if at_end {
        // Skip base64 padding.
        chars.iter().rposition(|c| *c != '=').unwrap_or(0)
    } else {
        chars
            .iter()
            .rposition(|c| *c == '=' || *c == ',')
            .map(|i| i + 1)
            .filter(|i| *i < chars.len())
            .unwrap_or(0)
    };
    chars[index] = match chars[index] {
        'a' => 'b',
        'A' => 'B',
        '0' => '1',
        _ => {
            if chars[index].is_ascii_digit() {
                'a'
            } else {
                '0'
            }
        }
    };
    chars.into_iter().collect()
}

/// The whole corpus, signed where signed at `now` (unix seconds: the receiver function reads
/// the clock, so `now` must be the current time). The same `seed` and `now` give the same cases.
///
/// # Errors
/// When an event file or the local sources cannot be read.
pub fn corpus(seed: u64, now: i64) -> Result<Vec<Case>> {
    let mut b = Builder {
        rng: Rng(seed),
        cases: Vec::new(),
        v1_template: EventFile::load("receiver/stripe-payment-intent-succeeded.rest-v1.json")?.json,
    };
    let prepared: Vec<Prepared> = PROVIDERS.iter().map(Prepared::new).collect::<Result<_>>()?;
    for p in &prepared {
        provider_cases(&mut b, p, now)?;
        if p.public_key() {
            public_key_cases(&mut b, p, now)?;
        }
        if p.verifier.generic().is_some_and(|m| m.batch.is_some()) {
            batch_cases(&mut b, p, now)?;
        }
    }
    route_cases(&mut b, &prepared[0], now)?;
    Ok(b.cases)
}

fn provider_cases(b: &mut Builder, p: &Prepared, now: i64) -> Result<()> {
    let full = p.base.bytes().to_vec();
    let signed = p.signed_body(full.clone(), now);
    let sig_header = p.signature_header().to_owned();
    let good_sig = signed.get(&sig_header).unwrap_or("").to_owned();
    let timestamped = p.verifier.signs_timestamp();

    // Truncated: the signature is over the full body, the body is cut.
    for cut in [1, full.len() / 3, full.len() / 2, full.len() - 1] {
        let mut draft = signed.clone();
        draft.body = Body::Bytes(full[..cut].to_vec());
        b.push(
            "truncated",
            p,
            format!("body cut to {cut} of {} bytes", full.len()),
            draft,
            false,
            401,
        )?;
    }
    // Truncated and signed as cut: reaches extraction, which refuses the broken JSON.
    for cut in [full.len() / 2, full.len() - 1] {
        let draft = p.signed_body(full[..cut].to_vec(), now);
        b.push(
            "truncated",
            p,
            format!("signed body cut to {cut} bytes"),
            draft,
            true,
            400,
        )?;
    }

    // Oversized: one byte past the source's limit, signed and not.
    {
        let mut doc = p.body_json()?;
        set_pointer(&mut doc, &p.field("padding"), json!(""))?;
        let short = serde_json::to_vec(&doc)?.len();
        set_pointer(
            &mut doc,
            &p.field("padding"),
            json!("x".repeat(p.max_body_bytes + 1 - short)),
        )?;
        let body = serde_json::to_vec(&doc)?;
        debug_assert_eq!(body.len(), p.max_body_bytes + 1);
        let draft = p.signed_body(body.clone(), now);
        b.push(
            "oversized",
            p,
            format!("{} bytes, signed", body.len()),
            draft,
            true,
            413,
        )?;
        // The rest where the limit is small (64 KiB for the local Stripe source): a megabyte
        // body costs the debug-built test a noticeable time to sign and render.
        if p.max_body_bytes <= 64 * 1024 {
            let mut unsigned = p.base.clone();
            unsigned.body = Body::Bytes(body.clone());
            b.push(
                "oversized",
                p,
                "past the limit, unsigned",
                unsigned,
                false,
                413,
            )?;
            let mut exact = vec![b' '; p.max_body_bytes + 1];
            exact[0] = b'{';
            exact[p.max_body_bytes] = b'}';
            let draft = p.signed_body(exact, now);
            b.push(
                "oversized",
                p,
                "limit + 1 bytes of whitespace, signed",
                draft,
                true,
                413,
            )?;
            let draft = p.signed_body(vec![b'x'; p.max_body_bytes * 4], now);
            b.push(
                "oversized",
                p,
                "four times the limit, signed",
                draft,
                true,
                413,
            )?;
        }
    }

    // Wrong encodings, correctly signed: the bytes verify, the document is not UTF-8 JSON.
    {
        let text = String::from_utf8(full.clone()).context("template body is UTF-8")?;
        let mut utf16le = vec![0xFF, 0xFE];
        utf16le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        let mut utf16be = vec![0xFE, 0xFF];
        utf16be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        let utf16_no_bom: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut utf32: Vec<u8> = Vec::new();
        for c in text.chars() {
            utf32.extend((c as u32).to_le_bytes());
        }
        for (what, body) in [
            ("UTF-16LE with BOM", utf16le),
            ("UTF-16BE with BOM", utf16be),
            ("UTF-16LE without BOM", utf16_no_bom),
            ("UTF-32LE", utf32),
        ] {
            b.push(
                "wrong encoding",
                p,
                what,
                p.signed_body(body, now),
                true,
                400,
            )?;
        }
    }

    // Invalid UTF-8 (Latin-1 bytes, overlong forms, surrogates) inside a string, signed.
    for (what, bytes) in [
        ("Latin-1 e-acute", &b"caf\xe9"[..]),
        ("lone 0xFF", b"\xff"),
        ("truncated sequence", b"\xc3("),
        ("overlong slash", b"\xc0\xaf"),
        ("encoded surrogate", b"\xed\xa0\x80"),
    ] {
        let mut doc = p.body_json()?;
        set_pointer(&mut doc, &p.field("note"), json!("MARKER"))?;
        let text = serde_json::to_vec(&doc)?;
        let at = text
            .windows(6)
            .position(|w| w == b"MARKER")
            .ok_or_else(|| anyhow!("marker"))?;
        let mut body = text[..at].to_vec();
        body.extend_from_slice(bytes);
        body.extend_from_slice(&text[at + 6..]);
        b.push(
            "invalid utf-8",
            p,
            what,
            p.signed_body(body, now),
            true,
            400,
        )?;
    }
    // A lone surrogate escape: valid UTF-8 text, not a valid JSON string.
    {
        let text = String::from_utf8(full.clone())?;
        let body = text.replacen('{', "{\"note\":\"\\ud800\",", 1).into_bytes();
        b.push(
            "invalid utf-8",
            p,
            "lone surrogate escape \\ud800",
            p.signed_body(body, now),
            true,
            400,
        )?;
    }

    // Invalid base64 with the isBase64Encoded flag, in every shape.
    for text in ["!!!!", "abc", "YW=Jj", "YWJj\n", "Zm9v YmFy", "%7B%7D"] {
        for shape in [Shape::HttpApiV2, Shape::RestV1, Shape::Alb] {
            let mut draft = signed.clone();
            draft.body = Body::Flagged(text.to_owned());
            b.push_as(
                "invalid base64",
                p,
                format!("{text:?} as {shape:?}"),
                draft,
                false,
                400,
                shape,
            )?;
        }
    }

    // Header injection: CR/LF in a header value, as far as the event JSON carries it. HTTP
    // cannot carry them, so API Gateway never sends them; an event that does is refused by the
    // transport (functions/receiver/src/unreadable.rs) with 400, signed or not.
    {
        for (header, value, what) in [
            (
                sig_header.as_str(),
                format!("{good_sig}\r\nx-injected: 1"),
                "CRLF after the signature",
            ),
            (
                sig_header.as_str(),
                format!("x\r\n{good_sig}"),
                "CRLF before the signature",
            ),
            (
                sig_header.as_str(),
                format!("{good_sig}\n"),
                "trailing LF on the signature",
            ),
            (
                "content-type",
                "application/json\r\nx-hub-signature-256: sha256=00".to_owned(),
                "CRLF in content-type",
            ),
        ] {
            let mut draft = signed.clone();
            draft.set(header, &value);
            b.push("header injection", p, what, draft, false, 400)?;
        }
        if let Loc::Header(name) = p.p.id {
            let mut draft = p.base.clone();
            draft.set(name, "evt_1\r\nx-injected: 1");
            p.sign(&mut draft, now);
            b.push(
                "header injection",
                p,
                format!("CRLF in {name}, signed"),
                draft,
                true,
                400,
            )?;
        }
    }

    // Repeated signature headers with conflicting values.
    {
        let wrong = flip(&good_sig, true);
        // A valid signature next to a wrong one is not refused in every shape: REST v1 events
        // carry the last value in `headers`, which lambda_http lets win, and a joined HTTP API
        // value may hold a list of signatures (Stripe and Paddle send one per secret). Either
        // way the body is authentic, so such deliveries are not in the corpus; only the ALB
        // shape, whose repeated values reach the verifier apart, must refuse them.
        for (what, values, shapes) in [
            (
                "good then wrong",
                [good_sig.clone(), wrong.clone()],
                &[Shape::Alb][..],
            ),
            (
                "wrong then good",
                [wrong.clone(), good_sig.clone()],
                &[Shape::Alb][..],
            ),
            (
                "wrong twice",
                [wrong.clone(), flip(&good_sig, false)],
                &[Shape::HttpApiV2, Shape::RestV1, Shape::Alb][..],
            ),
        ] {
            for &shape in shapes {
                let mut draft = signed.clone();
                draft.remove(&sig_header);
                for value in &values {
                    draft.headers.push((sig_header.clone(), value.clone()));
                }
                b.push_as(
                    "repeated header",
                    p,
                    format!("{what} as {shape:?}"),
                    draft,
                    false,
                    401,
                    shape,
                )?;
            }
        }
        // A repeated event id or type header, correctly signed: ambiguous, refused.
        for loc in [p.p.id, p.p.ty] {
            if let Loc::Header(name) = loc {
                if name == "webhook-id" {
                    continue; // part of the signed content: covered as unsigned below
                }
                // Only ALB keeps both values apart (see above).
                let mut draft = signed.clone();
                let value = draft.get(name).unwrap_or("x").to_owned();
                draft
                    .headers
                    .push((name.to_owned(), format!("{value}-other")));
                b.push_as(
                    "repeated header",
                    p,
                    format!("{name} twice as Alb"),
                    draft,
                    true,
                    400,
                    Shape::Alb,
                )?;
            }
        }
    }

    // Huge header values (64 KiB).
    {
        let huge = "A".repeat(64 * 1024);
        let mut draft = signed.clone();
        draft.set(&sig_header, &format!("{good_sig}{huge}"));
        b.push(
            "huge header",
            p,
            "64 KiB signature header",
            draft,
            false,
            401,
        )?;
        let mut draft = signed.clone();
        draft.set("x-padding", &huge);
        draft.set(&sig_header, &flip(&good_sig, true));
        b.push(
            "huge header",
            p,
            "64 KiB extra header, wrong signature",
            draft,
            false,
            401,
        )?;
        match p.p.id {
            Loc::Header(name) => {
                let mut draft = p.base.clone();
                draft.set(name, &huge);
                p.sign(&mut draft, now);
                // A 64 KiB webhook-id is part of the signed content: refused by the verifier.
                let expect = if name == "webhook-id" { 401 } else { 400 };
                b.push(
                    "huge header",
                    p,
                    format!("64 KiB {name}, signed"),
                    draft,
                    expect == 400,
                    expect,
                )?;
            }
            Loc::Body(pointer) => {
                // (4 KiB: Stripe's local limit is 64 KiB of body.)
                let draft = p.signed_with_field(pointer, json!("e".repeat(4096)), now)?;
                b.push(
                    "huge header",
                    p,
                    "4 KiB event id in the body, signed",
                    draft,
                    true,
                    400,
                )?;
            }
        }
        if timestamped {
            if let Some(ts_header) = p.signing_headers.iter().find(|h| h.ends_with("timestamp")) {
                let mut draft = signed.clone();
                draft.set(ts_header, &format!("{now}{}", "0".repeat(64 * 1024)));
                b.push(
                    "huge header",
                    p,
                    format!("64 KiB {ts_header}"),
                    draft,
                    false,
                    401,
                )?;
            }
        }
    }

    // Numbers (and other types) where strings belong, correctly signed.
    {
        let mut wrong_ids = vec![
            json!([]),
            json!({}),
            json!(true),
            json!(1.5),
            json!(["evt_1"]),
        ];
        // Stripe and Slack ids must be strings; Paddle and generic sources take integers too.
        if matches!(p.p.source, "stripe" | "slack") {
            wrong_ids.push(json!(123));
            wrong_ids.push(json!(-9_223_372_036_854_775_807_i64));
        }
        if let Loc::Body(pointer) = p.p.id {
            for value in wrong_ids {
                let draft = p.signed_with_field(pointer, value.clone(), now)?;
                b.push(
                    "wrong type",
                    p,
                    format!("event id {value}"),
                    draft,
                    true,
                    400,
                )?;
            }
            let draft = p.signed_with_field(pointer, json!(""), now)?;
            b.push("wrong type", p, "empty event id", draft, true, 400)?;
            let draft = p.signed_with_field(pointer, json!("e".repeat(256)), now)?;
            b.push("wrong type", p, "256-byte event id", draft, true, 400)?;
            let draft = p.signed_with_field(pointer, json!(null), now)?;
            b.push("wrong type", p, "null event id", draft, true, 400)?;
            let mut doc = p.body_json()?;
            remove_pointer(&mut doc, pointer)?;
            b.push(
                "missing id",
                p,
                "no event id",
                p.signed_body(serde_json::to_vec(&doc)?, now),
                true,
                400,
            )?;
        }
        if let Loc::Body(pointer) = p.p.ty {
            let mut wrong_types = vec![
                json!([]),
                json!({}),
                json!(false),
                json!(1.5),
                json!("t".repeat(256)),
            ];
            // Paddle and model sources read an integer type as its text (Discord's is one).
            if !matches!(p.p.source, "paddle" | "partner" | "discord" | "sendgrid") {
                wrong_types.push(json!(123));
            }
            for value in wrong_types {
                let draft = p.signed_with_field(pointer, value.clone(), now)?;
                let label: String = value.to_string().chars().take(24).collect();
                b.push(
                    "wrong type",
                    p,
                    format!("event type {label}"),
                    draft,
                    true,
                    400,
                )?;
            }
        }
        for (what, body) in [
            ("array body", &b"[]"[..]),
            ("string body", b"\"evt_1\""),
            ("number body", b"123"),
            ("null body", b"null"),
            ("empty body", b""),
            ("whitespace body", b"  \n "),
            ("open brace", b"{"),
            ("object then garbage", b"{}garbage"),
            ("two objects", b"{}{}"),
            ("trailing comma", b"{\"a\":1,}"),
        ] {
            b.push(
                "not an object",
                p,
                what,
                p.signed_body(body.to_vec(), now),
                true,
                400,
            )?;
        }
        match p.p.id {
            Loc::Header(name) => {
                let mut draft = p.base.clone();
                draft.remove(name);
                if name == "x-shopify-event-id" {
                    draft.remove("x-shopify-webhook-id");
                }
                p.sign(&mut draft, now);
                // Standard Webhooks signs the id: without it the signature cannot verify.
                let expect = if name == "webhook-id" { 401 } else { 400 };
                b.push(
                    "missing id",
                    p,
                    format!("without {name}, signed"),
                    draft,
                    expect == 400,
                    expect,
                )?;
                for (what, value) in [("empty", ""), ("256 bytes", &*"e".repeat(256))] {
                    let mut draft = p.base.clone();
                    draft.set(name, value);
                    p.sign(&mut draft, now);
                    let expect = if name == "webhook-id" && value.is_empty() {
                        401
                    } else {
                        400
                    };
                    b.push(
                        "wrong type",
                        p,
                        format!("{what} {name}"),
                        draft,
                        expect == 400,
                        expect,
                    )?;
                }
            }
            Loc::Body(_) => {}
        }
    }

    // Deeply nested JSON (10,000 levels), correctly signed.
    for (what, open, close) in [
        ("10,000 nested arrays", "[", "]"),
        ("10,000 nested objects", "{\"a\":", "}"),
        ("10,000 mixed levels", "[{\"a\":", "}]"),
    ] {
        let depth = 10_000 / if open.len() > 2 { 2 } else { 1 };
        let nest = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        let text = String::from_utf8(full.clone())?;
        let body = text
            .replacen('{', &format!("{{\"deep\":{nest},"), 1)
            .into_bytes();
        b.push("deep nesting", p, what, p.signed_body(body, now), true, 400)?;
    }
    {
        let body = format!("{{\"deep\":{}", "[".repeat(10_000)).into_bytes();
        b.push(
            "deep nesting",
            p,
            "10,000 unclosed arrays",
            p.signed_body(body, now),
            true,
            400,
        )?;
    }

    // SQL metacharacters and NUL in event ids. Unsigned or wrongly signed: refused before
    // anything is parsed. A NUL, correctly signed: refused at extraction. (A correctly signed
    // id with SQL metacharacters is a valid id: tests/tests/api/hostile.rs checks it is stored
    // verbatim, outside this corpus.)
    let nasty = [
        "'; DROP TABLE webhook_event; --",
        "evt\" OR 1=1 --",
        "$1); DELETE FROM orders; --",
        "evt_1'||pg_sleep(10)||'",
        "\\x00; TRUNCATE webhook_event",
    ];
    for (i, id) in nasty.iter().enumerate() {
        let mut draft = match p.p.id {
            Loc::Body(pointer) => p.signed_with_field(pointer, json!(id), now)?,
            Loc::Header(name) => {
                let mut draft = p.base.clone();
                draft.set(name, id);
                p.sign(&mut draft, now);
                draft
            }
        };
        if i % 2 == 0 {
            let sig = draft.get(&sig_header).unwrap_or("").to_owned();
            draft.set(&sig_header, &flip(&sig, true));
            b.push(
                "sql and nul in ids",
                p,
                format!("{id:?}, wrong signature"),
                draft,
                false,
                401,
            )?;
        } else {
            draft.remove(&sig_header);
            b.push(
                "sql and nul in ids",
                p,
                format!("{id:?}, unsigned"),
                draft,
                false,
                401,
            )?;
        }
    }
    for id in [
        "evt_\u{0}1",
        "\u{0}",
        "evt_1\u{0}'; DROP TABLE webhook_event; --",
    ] {
        match p.p.id {
            Loc::Body(pointer) => {
                let draft = p.signed_with_field(pointer, json!(id), now)?;
                b.push(
                    "sql and nul in ids",
                    p,
                    format!("{id:?} in the body, signed"),
                    draft,
                    true,
                    400,
                )?;
            }
            Loc::Header(name) => {
                let mut draft = p.base.clone();
                draft.set(name, id);
                p.sign(&mut draft, now);
                // A NUL cannot be in a header: refused by the transport (unreadable.rs).
                b.push(
                    "sql and nul in ids",
                    p,
                    format!("{id:?} in {name}, signed"),
                    draft,
                    true,
                    400,
                )?;
            }
        }
    }
    if let Loc::Body(pointer) = p.p.ty {
        let draft = p.signed_with_field(pointer, json!("invoice.paid\u{0}"), now)?;
        b.push(
            "sql and nul in ids",
            p,
            "NUL in the event type, signed",
            draft,
            true,
            400,
        )?;
    }

    // Timestamps at the i64 edges and past them.
    if timestamped {
        for t in [
            i64::MIN,
            i64::MIN + 1,
            -1,
            0,
            i64::MAX,
            i64::MAX - 1,
            now - 86_400 * 365 * 100,
        ] {
            let draft = p.signed_body(full.clone(), t);
            b.push("timestamp", p, format!("signed at {t}"), draft, false, 401)?;
        }
        let (stale, future) = (
            now - p.verifier.tolerance_secs() as i64 - 5,
            now + p.verifier.tolerance_secs() as i64 + 3_600,
        );
        b.push(
            "timestamp",
            p,
            "stale by tolerance + 5 s",
            p.signed_body(full.clone(), stale),
            false,
            401,
        )?;
        b.push(
            "timestamp",
            p,
            "future by tolerance + 1 h",
            p.signed_body(full.clone(), future),
            false,
            401,
        )?;
        let now_text = now.to_string();
        for text in [
            "99999999999999999999",
            "-99999999999999999999",
            "9223372036854775808",
            "-9223372036854775809",
            "",
            "1e9",
            "+1",
            "0x10",
            "1.5",
            "\u{0663}",
            "NaN",
        ] {
            let mut draft = signed.clone();
            let mut replaced = false;
            for (_, value) in draft.headers.iter_mut() {
                if value.contains(&now_text) {
                    *value = value.replacen(&now_text, text, 1);
                    replaced = true;
                }
            }
            if replaced {
                b.push(
                    "timestamp",
                    p,
                    format!("timestamp {text:?}"),
                    draft,
                    false,
                    401,
                )?;
            }
        }
    }

    // Missing and empty signature headers, wrong prefix, right length but wrong value, wrong
    // secret.
    {
        let mut draft = signed.clone();
        draft.remove(&sig_header);
        b.push(
            "missing header",
            p,
            format!("no {sig_header}"),
            draft,
            false,
            401,
        )?;
        for value in ["", " ", ",", "=", "v1=", "sha256=", "t=,v1="] {
            let mut draft = signed.clone();
            draft.set(&sig_header, value);
            b.push(
                "missing header",
                p,
                format!("{sig_header}: {value:?}"),
                draft,
                false,
                401,
            )?;
        }
        let mut draft = p.base.clone();
        draft.headers.clear();
        b.push("missing header", p, "no headers at all", draft, false, 401)?;
        for name in &p.signing_headers {
            if name != &sig_header {
                let mut draft = signed.clone();
                draft.remove(name);
                b.push("missing header", p, format!("no {name}"), draft, false, 401)?;
            }
        }
        for (from, to) in [
            ("v1=", "v0="),
            ("sha256=", "sha1="),
            ("v0=", "v1="),
            ("h1=", "h2="),
            ("v1,", "v2,"),
            ("sha512=", "sha256="),
            ("", "sha256="),
        ] {
            if (from.is_empty() && p.p.source == "shopify")
                || (!from.is_empty() && good_sig.contains(from))
            {
                let mut draft = signed.clone();
                let value = if from.is_empty() {
                    format!("{to}{good_sig}")
                } else {
                    good_sig.replace(from, to)
                };
                draft.set(&sig_header, &value);
                b.push(
                    "wrong prefix",
                    p,
                    format!("{from:?} -> {to:?}"),
                    draft,
                    false,
                    401,
                )?;
            }
        }
        for at_end in [false, true] {
            let mut draft = signed.clone();
            draft.set(&sig_header, &flip(&good_sig, at_end));
            b.push(
                "wrong value",
                p,
                format!(
                    "one character changed at the {}",
                    if at_end { "end" } else { "start" }
                ),
                draft,
                false,
                401,
            )?;
        }
        let mut draft = signed.clone();
        draft.set(&sig_header, &good_sig.to_uppercase());
        // (Discord's hex has no prefix: upper-cased it is the same signature.)
        if draft.get(&sig_header) != Some(good_sig.as_str())
            && !matches!(p.p.source, "partner" | "discord")
        {
            b.push("wrong value", p, "upper-cased signature", draft, false, 401)?;
        }
        let secret = match p.scheme.as_str() {
            "standard-webhooks" => "whsec_d3Jvbmcgc2VjcmV0IGZvciB0aGUgY29ycHVz",
            _ => "whsec_wrong_secret_for_the_hostile_corpus",
        };
        let wrong = match &p.key {
            // Another private key of the same algorithm.
            Key::Private(model, _) => Key::Private(
                model.clone(),
                PrivateKey::parse(model.algorithm, &"17".repeat(32), None)
                    .map_err(|e| anyhow!("{e}"))?,
            ),
            Key::Secret(_) => Key::Secret(crate::verifier_with_secret(
                &*local_source(p.p.source)?,
                secret,
            )?),
        };
        let mut draft = p.base.clone();
        p.sign_with(&wrong, &mut draft, now);
        b.push(
            "wrong value",
            p,
            "signed with another secret",
            draft,
            false,
            401,
        )?;
        // The body changed after signing (one byte).
        let mut draft = signed.clone();
        let mut body = full.clone();
        let last = body.len() - 2;
        body[last] = if body[last] == b' ' { b'\t' } else { b' ' };
        draft.body = Body::Bytes(body);
        b.push(
            "wrong value",
            p,
            "one body byte changed after signing",
            draft,
            false,
            401,
        )?;
    }
    Ok(())
}

/// Cases the route refuses before any source is looked up: other methods, unknown sources,
/// odd paths.
fn route_cases(b: &mut Builder, stripe: &Prepared, now: i64) -> Result<()> {
    let signed = stripe.signed_body(stripe.base.bytes().to_vec(), now);
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        for shape in [Shape::HttpApiV2, Shape::RestV1, Shape::Alb] {
            let mut draft = signed.clone();
            draft.method = method.to_owned();
            b.push_as(
                "route",
                stripe,
                format!("{method} as {shape:?}"),
                draft,
                true,
                405,
                shape,
            )?;
        }
    }
    for path in [
        "/webhooks/unknown",
        "/webhooks/stripe';DROP TABLE webhook_event;--",
        "/webhooks/%00",
        "/webhooks/STRIPE",
        "/webhooks/stripe%2F..",
        "/webhooks/",
        "/",
        "/webhooks/stripe/extra",
    ] {
        let mut draft = signed.clone();
        draft.path = path.to_owned();
        b.push("route", stripe, format!("path {path:?}"), draft, true, 404)?;
        if let Some(last) = b.cases.last_mut() {
            last.scheme = "none".to_owned();
        }
    }
    Ok(())
}

/// The signature cases of a public-key source (Ed25519, ECDSA P-256): signatures that do not
/// decode, have another length, sign something else, are repeated or are not ASCII. Each must
/// be refused by the public-key verification: 401.
fn public_key_cases(b: &mut Builder, p: &Prepared, now: i64) -> Result<()> {
    use hookledger_verify::Encoding;
    let Key::Private(model, key) = &p.key else {
        return Ok(());
    };
    let full = p.base.bytes().to_vec();
    let signed = p.signed_body(full.clone(), now);
    let sig_header = p.signature_header().to_owned();
    let good_sig = signed.get(&sig_header).unwrap_or("").to_owned();
    let hex = matches!(model.encoding, Encoding::Hex);
    let decode = |text: &str| -> Result<Vec<u8>> {
        Ok(if hex {
            hex::decode(text)?
        } else {
            base64::engine::general_purpose::STANDARD.decode(text)?
        })
    };
    let encode = |bytes: &[u8]| -> String {
        if hex {
            hex::encode(bytes)
        } else {
            base64::engine::general_purpose::STANDARD.encode(bytes)
        }
    };
    let good = decode(&good_sig)?;
    let max = model.algorithm.max_signature_len();
    // (Unpadded base64 of the same bytes is the same signature: cut the digits, not the `=`.)
    let digits = good_sig.trim_end_matches('=');
    let mut values: Vec<(String, String)> = vec![
        (
            "signature cut by two characters".to_owned(),
            digits[..digits.len() - 2].to_owned(),
        ),
        (
            "signature cut to half".to_owned(),
            digits[..digits.len() / 2].to_owned(),
        ),
        (
            "signature of one character".to_owned(),
            digits[..1].to_owned(),
        ),
        ("one byte short".to_owned(), encode(&good[..good.len() - 1])),
        ("one byte too long (zero appended)".to_owned(), {
            let mut long = good.clone();
            long.push(0);
            encode(&long)
        }),
        (
            "the signature twice over".to_owned(),
            encode(&good.repeat(2)),
        ),
        ("64 zero bytes".to_owned(), encode(&[0; 64])),
        ("64 0xFF bytes".to_owned(), encode(&[0xFF; 64])),
        (
            format!("{} zero bytes (one past the longest)", max + 1),
            encode(&vec![0; max + 1]),
        ),
        ("a 512-byte signature".to_owned(), encode(&[0x30; 512])),
        ("one zero byte".to_owned(), encode(&[0])),
        (
            "a character outside the alphabet".to_owned(),
            format!("{}{}", if hex { "g" } else { "!" }, &good_sig[1..]),
        ),
        (
            "a space inside".to_owned(),
            format!("{} {}", &digits[..8], &good_sig[8..]),
        ),
        (
            "the other encoding".to_owned(),
            if hex {
                base64::engine::general_purpose::STANDARD.encode(&good)
            } else {
                hex::encode(&good)
            },
        ),
        (
            "non-ASCII character in place of the first".to_owned(),
            format!("\u{e9}{}", &good_sig[1..]),
        ),
        (
            "trailing no-break space".to_owned(),
            format!("{good_sig}\u{a0}"),
        ),
        (
            "fullwidth first character".to_owned(),
            format!("\u{ff10}{}", &good_sig[1..]),
        ),
    ];
    if hex {
        values.push(("0x prefix".to_owned(), format!("0x{good_sig}")));
        values.push((
            "odd number of hex digits".to_owned(),
            good_sig[1..].to_owned(),
        ));
    } else {
        let url_safe = good_sig.replace('+', "-").replace('/', "_");
        if url_safe != good_sig {
            values.push(("URL-safe alphabet".to_owned(), url_safe));
        }
        values.push((
            "padding in the middle".to_owned(),
            format!("{}=={}", &digits[..4], &digits[4..]),
        ));
    }
    for (what, value) in values {
        if value == good_sig {
            continue;
        }
        let mut draft = signed.clone();
        draft.set(&sig_header, &value);
        b.push("public-key signature", p, what, draft, false, 401)?;
    }

    // Valid signatures of something else.
    {
        // Another body (one byte changed), sent with this one.
        let mut other = full.clone();
        let last = other.len() - 2;
        other[last] = if other[last] == b' ' { b'\t' } else { b' ' };
        let mut draft = signed.clone();
        for (name, value) in p.key.sign("", now, &other) {
            draft.set(&name, &value);
        }
        b.push(
            "public-key signature",
            p,
            "the signature of another body",
            draft,
            false,
            401,
        )?;
        // The signature made one second earlier, under this timestamp.
        let mut draft = signed.clone();
        let earlier = p.key.sign("", now - 1, &full);
        if let Some((_, value)) = earlier.iter().find(|(name, _)| *name == sig_header) {
            draft.set(&sig_header, value);
        }
        b.push(
            "public-key signature",
            p,
            "the signature of another timestamp",
            draft,
            false,
            401,
        )?;
        // The body alone signed, and the timestamp alone.
        for (what, template) in [
            ("the signature of the body without the timestamp", "{body}"),
            (
                "the signature of the timestamp without the body",
                "{timestamp}",
            ),
            ("the signature of timestamp.body", "{timestamp}.{body}"),
        ] {
            let mut other = model.clone();
            other.signed_payload = Some(template.to_owned());
            let mut draft = p.base.clone();
            p.sign_with(&Key::Private(other, key.clone()), &mut draft, now);
            b.push("public-key signature", p, what, draft, false, 401)?;
        }
    }

    // Repeated headers: the good signature twice (both shapes that keep the values apart or
    // join them), the timestamp twice.
    for (what, name) in [
        ("signature header twice", sig_header.clone()),
        (
            "timestamp header twice",
            p.signing_headers
                .iter()
                .find(|name| **name != sig_header)
                .cloned()
                .unwrap_or_default(),
        ),
    ] {
        if name.is_empty() {
            continue;
        }
        for shape in [Shape::HttpApiV2, Shape::Alb] {
            let mut draft = signed.clone();
            let value = draft.get(&name).unwrap_or("").to_owned();
            draft.headers.push((name.clone(), value));
            b.push_as(
                "public-key signature",
                p,
                format!("{what}, same value, as {shape:?}"),
                draft,
                false,
                401,
                shape,
            )?;
        }
    }
    // A non-ASCII timestamp.
    if let Some(ts_header) = p.signing_headers.iter().find(|name| **name != sig_header) {
        let now_text = now.to_string();
        for (what, text) in [
            (
                "fullwidth last digit",
                format!("{}\u{ff11}", &now_text[..now_text.len() - 1]),
            ),
            ("Arabic-Indic digits", "\u{0663}".repeat(now_text.len())),
            ("trailing no-break space", format!("{now_text}\u{a0}")),
        ] {
            let mut draft = signed.clone();
            draft.set(ts_header, &text);
            b.push(
                "public-key signature",
                p,
                format!("timestamp with a {what}"),
                draft,
                false,
                401,
            )?;
        }
    }
    Ok(())
}

/// The batch splitter's cases (SendGrid: the body is a JSON array of events, each named by
/// its `sg_event_id` and typed by its `event`), correctly signed: every one is refused whole at
/// extraction (400) and writes nothing, whichever item is wrong.
fn batch_cases(b: &mut Builder, p: &Prepared, now: i64) -> Result<()> {
    let template = p.body_json()?;
    let items: Vec<Value> = template
        .as_array()
        .ok_or_else(|| anyhow!("{}: the template body is not an array", p.p.source))?
        .clone();
    let first = items
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("{}: the template batch is empty", p.p.source))?;
    let (id_key, type_key) = ("sg_event_id", "event");
    let push = |b: &mut Builder, what: String, body: Vec<u8>| {
        b.push("batch", p, what, p.signed_body(body, now), true, 400)
    };
    let with_last = |last: Value| -> Result<Vec<u8>> {
        let mut all = items.clone();
        all.push(last);
        Ok(serde_json::to_vec(&all)?)
    };
    // The last item with one field changed, or removed (`None`).
    let last_with = |key: &str, value: Option<Value>| -> Result<Vec<u8>> {
        let mut item = first.clone();
        let object = item
            .as_object_mut()
            .ok_or_else(|| anyhow!("item is no object"))?;
        object.insert(id_key.to_owned(), json!("sg_hostile_last"));
        match value {
            Some(value) => object.insert(key.to_owned(), value),
            None => object.remove(key),
        };
        with_last(item)
    };

    // Items that are not objects, after good ones and alone.
    for (what, item) in [
        ("a number", json!(42)),
        ("a string", json!("rbtnWrG1DVDGGGFHFyun0A")),
        ("null", Value::Null),
        ("true", json!(true)),
        ("a nested array of an event", json!([first.clone()])),
        ("an empty array", json!([])),
        ("a float", json!(1.5)),
    ] {
        push(
            b,
            format!("{what} item after good ones"),
            with_last(item.clone())?,
        )?;
        push(
            b,
            format!("{what} as the only item"),
            serde_json::to_vec(&json!([item]))?,
        )?;
    }
    // The event id: absent, of a wrong type, out of bounds (in the last item; the first is
    // covered by the provider's cases).
    push(
        b,
        format!("last item without {id_key}"),
        last_with(id_key, None)?,
    )?;
    for value in [
        json!(true),
        json!(false),
        json!(1.5),
        json!(-0.0),
        json!({"id": "sg_1"}),
        json!(["sg_1"]),
        json!(""),
        json!("s".repeat(256)),
        json!("sg_\u{0}1"),
    ] {
        let label: String = value.to_string().chars().take(24).collect();
        push(
            b,
            format!("last item's {id_key} {label}"),
            last_with(id_key, Some(value))?,
        )?;
    }
    // The event type of a wrong type or out of bounds.
    for value in [
        json!(true),
        json!(1.5),
        json!({}),
        json!([]),
        json!("e".repeat(256)),
        json!("open\u{0}"),
    ] {
        let label: String = value.to_string().chars().take(24).collect();
        push(
            b,
            format!("last item's {type_key} {label}"),
            last_with(type_key, Some(value))?,
        )?;
    }
    // Every item without an id.
    let bare: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            if let Some(object) = item.as_object_mut() {
                object.remove(id_key);
            }
            item
        })
        .collect();
    push(
        b,
        "no item has an id".to_owned(),
        serde_json::to_vec(&bare)?,
    )?;

    // No items, or no array.
    for (what, body) in [
        ("empty array with whitespace", " [ \n ] ".to_owned()),
        ("an array of an empty array", "[[]]".to_owned()),
        (
            "an object instead of an array (the first event)",
            serde_json::to_string(&first)?,
        ),
        (
            "the events under a key",
            serde_json::to_string(&json!({ "events": items }))?,
        ),
        ("an empty object", "{}".to_owned()),
        (
            "a string holding the array",
            serde_json::to_string(&serde_json::to_string(&items)?)?,
        ),
    ] {
        push(b, what.to_owned(), body.into_bytes())?;
    }

    // Broken array syntax around good items.
    let one = serde_json::to_string(&first)?;
    for (what, body) in [
        ("trailing comma after the last item", format!("[{one},]")),
        ("leading comma", format!("[,{one}]")),
        ("two commas between items", format!("[{one},,{one}]")),
        ("no comma between items", format!("[{one}{one}]")),
        ("unclosed array", format!("[{one}")),
        (
            "unclosed last item",
            format!("[{one},{}", &one[..one.len() - 1]),
        ),
        ("garbage after the array", format!("[{one}]x")),
        ("two arrays", format!("[{one}][{one}]")),
        (
            "a number past f64 (1e400) in the last item",
            format!("[{one},{}", {
                let mut item = one.clone();
                item.insert_str(1, "\"n\":1e400,");
                format!("{item}]")
            }),
        ),
    ] {
        push(b, what.to_owned(), body.into_bytes())?;
    }

    // Deep nesting: 200 levels (past serde_json's 128) inside an item, as an item, around the
    // items.
    let deep_arrays = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let deep_objects = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
    for (what, body) in [
        (
            "200 nested arrays inside the last item",
            format!(
                "[{one},{}",
                one.replacen('{', &format!("{{\"deep\":{deep_arrays},"), 1) + "]"
            ),
        ),
        (
            "200 nested objects inside the last item",
            format!(
                "[{one},{}",
                one.replacen('{', &format!("{{\"deep\":{deep_objects},"), 1) + "]"
            ),
        ),
        (
            "an item of 200 nested arrays",
            format!("[{one},{deep_arrays}]"),
        ),
        (
            "an item of 200 nested objects",
            format!("[{one},{deep_objects}]"),
        ),
        (
            "the items 200 arrays deep",
            format!("{}{one}{}", "[".repeat(200), "]".repeat(200)),
        ),
        (
            "an item of 10,000 unclosed arrays",
            format!("[{one},{}", "[".repeat(10_000)),
        ),
    ] {
        push(b, what.to_owned(), body.into_bytes())?;
    }

    // Too many items: one past the limit, of tiny valid events and of nothing at all; the limit
    // itself of items without an id.
    let limit = hookledger_verify::generic::MAX_BATCH_ITEMS;
    let tiny: Vec<String> = (0..=limit)
        .map(|n| format!("{{\"{id_key}\":\"s{n}\",\"{type_key}\":\"open\"}}"))
        .collect();
    push(
        b,
        format!("{} tiny events (one past the limit)", limit + 1),
        format!("[{}]", tiny.join(",")).into_bytes(),
    )?;
    push(
        b,
        format!("{} empty objects", limit + 1),
        format!("[{}]", vec!["{}"; limit + 1].join(",")).into_bytes(),
    )?;
    push(
        b,
        "100,000 zeros".to_owned(),
        format!("[{}]", vec!["0"; 100_000].join(",")).into_bytes(),
    )?;
    push(
        b,
        format!("{limit} empty objects (the limit, no ids)"),
        format!("[{}]", vec!["{}"; limit].join(",")).into_bytes(),
    )?;

    // Invalid UTF-8 inside the last item, and between items.
    for (what, bytes) in [
        ("Latin-1 e-acute", &b"caf\xe9"[..]),
        ("lone 0xFF", b"\xff"),
        ("overlong slash", b"\xc0\xaf"),
        ("encoded surrogate", b"\xed\xa0\x80"),
    ] {
        let text = with_last({
            let mut item = first.clone();
            set_pointer(&mut item, "/note", json!("MARKER"))?;
            set_pointer(&mut item, &format!("/{id_key}"), json!("sg_hostile_last"))?;
            item
        })?;
        let at = text
            .windows(6)
            .position(|w| w == b"MARKER")
            .ok_or_else(|| anyhow!("marker"))?;
        let mut body = text[..at].to_vec();
        body.extend_from_slice(bytes);
        body.extend_from_slice(&text[at + 6..]);
        push(b, format!("{what} in the last item's string"), body)?;
        let mut body = format!("[{one},").into_bytes();
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("{one}]").as_bytes());
        push(b, format!("{what} between items"), body)?;
    }
    let mut body = format!("[{one},").into_bytes();
    body.extend_from_slice(&one.as_bytes()[..one.len() - 1]);
    body.extend_from_slice(b",\"caf\xe9\":1}]");
    push(b, "Latin-1 in the last item's key".to_owned(), body)?;

    // Lone surrogate escapes: valid UTF-8, not valid JSON strings.
    for (what, escape) in [
        ("high", r"\ud800"),
        ("low", r"\udc00"),
        ("reversed pair", r"\udc00\ud800"),
        ("high then a letter", r"\ud800\u0041"),
        ("high at the end", r"abc\udbff"),
    ] {
        let note = one.replacen('{', &format!("{{\"note\":\"{escape}\","), 1);
        push(
            b,
            format!("lone surrogate ({what}) in the last item"),
            format!("[{one},{note}]").into_bytes(),
        )?;
    }
    let id_surrogate = format!("{{\"{id_key}\":\"sg\\ud800\",\"{type_key}\":\"open\"}}");
    push(
        b,
        format!("lone surrogate in the last item's {id_key}"),
        format!("[{one},{id_surrogate}]").into_bytes(),
    )?;
    let key_surrogate = one.replacen('{', "{\"\\ud800\":1,", 1);
    push(
        b,
        "lone surrogate in a key of the last item".to_owned(),
        format!("[{one},{key_surrogate}]").into_bytes(),
    )?;
    Ok(())
}
