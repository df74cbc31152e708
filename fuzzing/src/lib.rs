//! The fuzzing entry points: one function per `cargo fuzz` target in `fuzz/`, each taking the
//! fuzzer's raw bytes. The nightly fuzz crate (`fuzz/fuzz_targets/*.rs`) and the stable replay
//! test (`tests/replay.rs`, run by `make test`) both call these functions, so an input that
//! crashed a target is replayed through exactly the code that crashed.
//!
//! Every entry point must return normally for every input: a panic is a bug in the product
//! (or a violated invariant, asserted here). Nothing here touches PostgreSQL, the network or
//! the file system: each stops where the receive path would open its database transaction.
//!
//! Fixed inputs: the sources of `events/sources.local.json` (the local demo's secrets, one
//! source per scheme), and the clock [`NOW`], the time the events of `events/receiver/` were
//! signed at, so those events verify and the fuzzer starts from accepted deliveries.

use std::sync::LazyLock;

use http::HeaderMap;
use lambda_http::request::LambdaRequest;
use shared::config::Sources;
use shared::extract::{Extracted, MAX_EVENT_ID_BYTES, MAX_EVENT_TYPE_BYTES};
use shared::SourceConfig;

pub mod delivery;

pub use delivery::{format_delivery, parse_delivery};

/// The fixed clock of every target, unix seconds (2024-11-29T08:46:40Z): the `t=`/`ts=`/
/// timestamp headers of `events/receiver/*.json` carry this value.
pub const NOW: i64 = 1_732_870_000;

/// The sources every target uses: `events/sources.local.json`, compiled in.
static SOURCES: LazyLock<Sources> = LazyLock::new(|| {
    Sources::from_json(include_str!("../../events/sources.local.json"))
        .unwrap_or_else(|error| panic!("events/sources.local.json does not parse: {error}"))
});

/// The fixed sources (see the crate docs).
pub fn sources() -> &'static Sources {
    &SOURCES
}

/// One fuzz target: its name (the file `fuzz/fuzz_targets/<name>.rs`, the folders
/// `fuzz/corpus/<name>/` and `fuzz/regressions/<name>/`) and its entry function.
pub struct Target {
    /// The target's name.
    pub name: &'static str,
    /// What it exercises, for `fuzz/RESULTS.md`.
    pub covers: &'static str,
    /// The entry function: must return normally for every input.
    pub run: fn(&[u8]),
}

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "verify_stripe",
        covers: "Stripe-Signature `t=..,v1=..` parser and verification",
        run: verify_stripe,
    },
    Target {
        name: "verify_github",
        covers: "X-Hub-Signature-256 `sha256=<hex>` parser and verification",
        run: verify_github,
    },
    Target {
        name: "verify_standard_webhooks",
        covers: "webhook-id/-timestamp/-signature `v1,<b64> ...` (and svix-*) parser and verification",
        run: verify_standard_webhooks,
    },
    Target {
        name: "verify_shopify",
        covers: "X-Shopify-Hmac-Sha256 base64 parser and verification",
        run: verify_shopify,
    },
    Target {
        name: "verify_slack",
        covers: "X-Slack-Signature `v0=` + X-Slack-Request-Timestamp parser and verification",
        run: verify_slack,
    },
    Target {
        name: "verify_paddle",
        covers: "Paddle-Signature `ts=..;h1=..` parser and verification",
        run: verify_paddle,
    },
    Target {
        name: "verify_generic_hmac",
        covers: "generic HMAC (sha512, base64, prefix, timestamp header, template) verification",
        run: verify_generic_hmac,
    },
    Target {
        name: "extract",
        covers: "event id/type extraction and payload identity, every scheme and the generic pointers",
        run: extract,
    },
    Target {
        name: "sources_config",
        covers: "the sources configuration parser (HOOKLEDGER_SOURCES JSON list)",
        run: sources_config,
    },
    Target {
        name: "settings_env",
        covers: "the settings read from the environment (`Settings::from_lookup`)",
        run: settings_env,
    },
    Target {
        name: "lambda_event",
        covers: "Lambda invocation JSON -> LambdaRequest -> transport guard -> http::Request -> routing, verification, extraction (up to the claim)",
        run: lambda_event,
    },
];

/// The source named `name` of [`sources`].
///
/// # Panics
/// If `events/sources.local.json` has no such source (a bug in this crate).
fn source(name: &str) -> &'static SourceConfig {
    sources()
        .get(name)
        .unwrap_or_else(|| panic!("events/sources.local.json has no source {name:?}"))
}

/// Verifies a delivery (see [`parse_delivery`] for the input's shape) for source `name` at
/// several clocks ([`NOW`], 0 and both ends of `i64`), and asserts that an accepted
/// delivery is refused once one byte is appended to its body.
fn verify_source(name: &str, data: &[u8]) {
    let config = source(name);
    let (headers, body) = parse_delivery(data);
    for now in [NOW, 0, i64::MIN, i64::MAX, NOW.saturating_neg()] {
        let verified = config.verifier.verify(&headers, body, now);
        if let Ok(verified) = &verified {
            assert!(verified.key_index < config.verifier.key_count());
            let mut tampered = body.to_vec();
            tampered.push(b' ');
            assert!(
                config.verifier.verify(&headers, &tampered, now).is_err(),
                "{name}: a delivery still verifies with a byte appended to its body"
            );
        }
        if let Err(error) = verified {
            // Every refusal has a reason for the 401 body.
            assert!(!error.reason().is_empty());
        }
    }
}

/// Target `verify_stripe`: the `stripe` source (Stripe scheme, two secrets).
pub fn verify_stripe(data: &[u8]) {
    verify_source("stripe", data);
}

/// Target `verify_github`: the `github` source.
pub fn verify_github(data: &[u8]) {
    verify_source("github", data);
}

/// Target `verify_standard_webhooks`: the `acme` source (Standard Webhooks; Svix headers too).
pub fn verify_standard_webhooks(data: &[u8]) {
    verify_source("acme", data);
}

/// Target `verify_shopify`: the `shopify` source.
pub fn verify_shopify(data: &[u8]) {
    verify_source("shopify", data);
}

/// Target `verify_slack`: the `slack` source.
pub fn verify_slack(data: &[u8]) {
    verify_source("slack", data);
}

/// Target `verify_paddle`: the `paddle` source.
pub fn verify_paddle(data: &[u8]) {
    verify_source("paddle", data);
}

/// Target `verify_generic_hmac`: the `partner` source (generic HMAC-SHA512, base64, prefix
/// `sha512=`, timestamp header, `{timestamp}.{body}`).
pub fn verify_generic_hmac(data: &[u8]) {
    verify_source("partner", data);
}

/// Extraction as the receive path runs it after a verified signature: the event id and type
/// (`shared::extract::extract`), then the payload hashes (`shared::identity::payload_hashes`),
/// asserting the bounds the ledger relies on.
fn identify(config: &SourceConfig, headers: &HeaderMap, body: &[u8]) {
    match shared::extract::extract(config.scheme, config.verifier.generic(), headers, body) {
        Ok(Extracted::Event(meta)) => {
            assert!(!meta.event_id.is_empty() && meta.event_id.len() <= MAX_EVENT_ID_BYTES);
            assert!(!meta.event_id.contains('\0'));
            assert!(meta.event_type.len() <= MAX_EVENT_TYPE_BYTES);
            assert!(!meta.event_type.contains('\0'));
            let _ = shared::identity::payload_hashes(config.scheme, body);
        }
        Ok(Extracted::Challenge(_)) => {}
        Err(error) => assert!(!error.reason().is_empty()),
    }
}

/// Target `extract`: the delivery (see [`parse_delivery`]) through every source's extraction
/// (every scheme, the generic JSON pointers), and the worker's `document_of`.
pub fn extract(data: &[u8]) {
    let (headers, body) = parse_delivery(data);
    for config in sources().iter() {
        identify(config, &headers, body);
    }
    let _ = shared::extract::document_of(body);
}

/// Target `sources_config`: the bytes as the `HOOKLEDGER_SOURCES` JSON list.
pub fn sources_config(data: &[u8]) {
    if let Ok(json) = std::str::from_utf8(data) {
        if let Ok(parsed) = Sources::from_json(json) {
            for config in parsed.iter() {
                assert!(config.verifier.key_count() >= 1);
            }
        }
    }
}

/// Target `settings_env`: the bytes as environment lines `NAME=value` (the first line of a
/// name wins; values may contain `=`) read by `Settings::from_lookup`. Names ending in `_FILE`
/// read as unset, so no file is opened.
pub fn settings_env(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lookup = |name: &str| {
        if name.ends_with("_FILE") {
            return None;
        }
        text.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
    };
    let _ = shared::Settings::from_lookup(lookup);
}

/// What the receiver does with a request before the claim: the route, the method, the
/// transport guard's marker, the source, the body limit, the signature, the extraction. The
/// HTTP status the receive path would answer when it stops before the database, or `None`
/// when the delivery would go on to the claim.
///
/// Mirrors `receiver::handler::handle_at` and `shared::Receiver::receive` up to their first
/// database call, through the same public functions.
pub fn pre_database(request: &lambda_http::Request, now: i64) -> Option<u16> {
    let source = receiver::handler::source_from_path(request.uri().path())?;
    if request.method() != http::Method::POST {
        return Some(405);
    }
    if request
        .headers()
        .contains_key(receiver::transport::INVALID_BASE64_HEADER)
    {
        return Some(400);
    }
    let Some(config) = sources().get(source) else {
        return Some(404);
    };
    let body = request.body().as_ref();
    if body.len() > config.max_body_bytes {
        return Some(413);
    }
    if config
        .verifier
        .verify(request.headers(), body, now)
        .is_err()
    {
        return Some(401);
    }
    identify(config, request.headers(), body);
    None
}

/// Target `lambda_event`: the bytes as the Lambda invocation payload, as the runtime reads it
/// (`serde_json` into lambda_http's `LambdaRequest`), then the receiver's transport guard
/// (`receiver::transport::guard`, what `Base64Guard` runs), lambda_http's conversion into an
/// `http::Request`, and [`pre_database`].
pub fn lambda_event(data: &[u8]) {
    let Ok(mut event) = serde_json::from_slice::<LambdaRequest>(data) else {
        return;
    };
    receiver::transport::guard(&mut event);
    let request: lambda_http::Request = event.into();
    let _ = pre_database(&request, NOW);
}
