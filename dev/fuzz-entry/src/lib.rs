//! The fuzzing entry points: one function per `cargo fuzz` target in `dev/fuzz/`, each taking the
//! fuzzer's raw bytes. The nightly fuzz crate (`dev/fuzz/fuzz_targets/*.rs`) and the stable replay
//! test (`tests/replay.rs`, run by `make test`) both call these functions, so an input that
//! crashed a target is replayed through exactly the code that crashed.
//!
//! Every entry point must return normally for every input: a panic is a bug in the product
//! (or a violated invariant, asserted here). Nothing here touches PostgreSQL or the file
//! system: `lambda_event` runs the receiver function up to its claim, whose database
//! ([`UNREACHABLE_DATABASE_URL`]) refuses the connection on the loopback interface.
//!
//! Fixed inputs: the sources of `events/sources.local.json` (the local demo's secrets, one
//! source per scheme), and the clock [`NOW`], the time the events of `events/receiver/` were
//! signed at, so those events verify and the fuzzer starts from accepted deliveries.

use std::sync::LazyLock;

use hookledger_verify::extract::{Extracted, MAX_EVENT_ID_BYTES, MAX_EVENT_TYPE_BYTES};
use http::HeaderMap;
use lambda_http::{service_fn, Context, LambdaEvent, Service};
use receiver::handler::AppState;
use serde_json::value::RawValue;
use shared::config::Sources;
use shared::SourceConfig;

pub mod delivery;
pub mod expression;
pub mod model;
pub mod sql_params;

pub use delivery::{format_delivery, parse_delivery};
pub use expression::{filter, transform};
pub use model::{ecdsa_p256, ed25519, rsa, scheme_model};
pub use sql_params::sql_params;

/// The fixed clock of every target, unix seconds (2024-11-29T08:46:40Z): the `t=`/`ts=`/
/// timestamp headers of `events/receiver/*.json` carry this value.
pub const NOW: i64 = 1_732_870_000;

/// The sources every target uses: `events/sources.local.json`, compiled in.
static SOURCES: LazyLock<Sources> = LazyLock::new(|| {
    Sources::from_json(include_str!("../../../events/sources.local.json"))
        .unwrap_or_else(|error| panic!("events/sources.local.json does not parse: {error}"))
});

/// The fixed sources (see the crate docs).
pub fn sources() -> &'static Sources {
    &SOURCES
}

/// One fuzz target: its name (the file `dev/fuzz/fuzz_targets/<name>.rs`, the folders
/// `dev/fuzz/corpus/<name>/` and `dev/fuzz/regressions/<name>/`) and its entry function.
pub struct Target {
    /// The target's name.
    pub name: &'static str,
    /// What it exercises, for `dev/fuzz/RESULTS.md`.
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
        name: "ed25519",
        covers: "Ed25519 through a model source: key text (hex, base64 raw or DER, PEM), base64 signature, message",
        run: ed25519,
    },
    Target {
        name: "ecdsa_p256",
        covers: "ECDSA P-256 SHA-256 through a model source: key text (base64 DER or SEC1, PEM), DER or fixed signature, message",
        run: ecdsa_p256,
    },
    Target {
        name: "rsa",
        covers: "RSA PKCS#1 v1.5 SHA-256 through a model source: key text (PEM, PKCS#1, base64 DER), signature, message",
        run: rsa,
    },
    Target {
        name: "scheme_model",
        covers: "the scheme model: GenericHmac JSON, validate, Verifier::new, verify, extract and sign a delivery",
        run: scheme_model,
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
        name: "filter",
        covers: "a built-in target's JMESPath filter: compile, then truthiness over an event's envelope (first line: the expression; the rest: the body)",
        run: filter,
    },
    Target {
        name: "transform",
        covers: "a built-in target's JMESPath transform: compile, then the reshaped JSON body of an event's envelope (first line: the expression; the rest: the body)",
        run: transform,
    },
    Target {
        name: "lambda_event",
        covers: "Lambda invocation JSON -> the receiver function's service stack (unreadable-header guard, base64 guard, lambda_http adapter) -> its handler: routing, verification, extraction, up to a claim on an unreachable database",
        run: lambda_event,
    },
    Target {
        name: "sql_params",
        covers: "SQL handler parameters: their configuration and the strict reading of each from an event (JSON pointer, form field, event field), errors never quoting a value",
        run: sql_params,
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
/// (`hookledger_verify::extract::extract`), then the payload hashes (`hookledger_verify::identity::payload_hashes`),
/// asserting the bounds the ledger relies on.
fn identify(config: &SourceConfig, headers: &HeaderMap, body: &[u8]) {
    match hookledger_verify::extract::extract(
        config.scheme,
        config.verifier.generic(),
        headers,
        body,
    ) {
        Ok(Extracted::Event(meta)) => {
            assert!(!meta.event_id.is_empty() && meta.event_id.len() <= MAX_EVENT_ID_BYTES);
            assert!(!meta.event_id.contains('\0'));
            assert!(meta.event_type.len() <= MAX_EVENT_TYPE_BYTES);
            assert!(!meta.event_type.contains('\0'));
            let _ = hookledger_verify::identity::payload_hashes(config.scheme, body);
        }
        Ok(Extracted::Batch(items)) => {
            assert!(!items.is_empty());
            for meta in items {
                assert!(!meta.event_id.is_empty() && meta.event_id.len() <= MAX_EVENT_ID_BYTES);
                assert!(!meta.event_id.contains('\0'));
                assert!(meta.event_type.len() <= MAX_EVENT_TYPE_BYTES);
                let _ = hookledger_verify::identity::payload_hashes(config.scheme, &meta.document);
            }
        }
        Ok(Extracted::Challenge(_) | Extracted::Handshake { .. }) => {}
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
    let _ = hookledger_verify::extract::document_of(body);
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

/// The database the `lambda_event` target's receiver is given: nothing listens on port 9 of the
/// loopback interface, so a delivery that gets as far as the claim is refused a connection at
/// once and answered 503, as a receiver whose database is down answers.
pub const UNREACHABLE_DATABASE_URL: &str = "postgres://fuzz@127.0.0.1:9/fuzz?sslmode=disable";

/// The receiver function's state, built once: the fixed sources (see the crate docs), no
/// handlers, no doorbell, [`UNREACHABLE_DATABASE_URL`]; and the current-thread runtime the
/// function runs on (functions/receiver/src/run.rs).
static RECEIVER: LazyLock<(tokio::runtime::Runtime, &'static AppState)> = LazyLock::new(|| {
    let sources = include_str!("../../../events/sources.local.json");
    let lookup = |name: &str| match name {
        "DATABASE_URL" => Some(UNREACHABLE_DATABASE_URL.to_owned()),
        "HOOKLEDGER_SOURCES" => Some(sources.to_owned()),
        _ => None,
    };
    let settings = shared::Settings::from_lookup(lookup)
        .unwrap_or_else(|error| panic!("the fuzzing settings do not parse: {error}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("no tokio runtime: {error}"));
    let pool = {
        let _entered = runtime.enter();
        shared::db::pool(&settings.database)
            .unwrap_or_else(|error| panic!("the fuzzing pool: {error}"))
    };
    let state = AppState::new(&settings, pool, shared::handler::Registry::new());
    (runtime, Box::leak(Box::new(state)))
});

/// The receiver function's answer to one Lambda invocation payload: the bytes as the runtime
/// reads them (`serde_json` into a raw JSON value), through the function's own service stack
/// (`receiver::stack::stack`: the unreadable-header guard, the base64 guard, lambda_http's
/// adapter) and its handler (`receiver::handler::handle_at` at [`NOW`]), up to a claim that
/// cannot reach [`UNREACHABLE_DATABASE_URL`]. The HTTP status, or `None` when the payload is
/// not JSON or the stack fails the invocation (what the runtime reports as an invocation
/// error: an event that is not an HTTP event at all).
pub fn lambda_event_status(data: &[u8]) -> Option<u16> {
    let raw: Box<RawValue> = serde_json::from_slice(data).ok()?;
    let (runtime, state) = &*RECEIVER;
    let state: &'static AppState = state;
    let mut service = receiver::stack::stack(service_fn(move |request| {
        receiver::handler::handle_at(state, request, NOW)
    }));
    let response = runtime
        .block_on(service.call(LambdaEvent::new(raw, Context::default())))
        .ok()?;
    let response = serde_json::to_value(response).ok()?;
    let status = response["statusCode"].as_u64()?;
    u16::try_from(status).ok()
}

/// Target `lambda_event`: [`lambda_event_status`]; every answer is a status the receiver
/// documents (never a 5xx other than the unreachable database's 503).
pub fn lambda_event(data: &[u8]) {
    if let Some(status) = lambda_event_status(data) {
        assert!(
            (200..500).contains(&status) || status == 503,
            "the receiver answered {status}"
        );
    }
}
