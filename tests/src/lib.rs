//! Test harness and local tooling shared by the end-to-end tests and `hookledger-dev`.
//!
//! - [`test_db`]: a fresh PostgreSQL database per test ([`TestDb`], from `hookledger-testing`,
//!   the helper users copy), migrated with the ledger's and the handlers' sets, examples on.
//! - [`EventFile`]: a Lambda event from `events/` (API Gateway v1/v2, Function URL), with its
//!   headers and raw body, re-signable with the local development secrets.
//! - [`browser`]: headless Chromium over WebDriver (the console's browser test).
//! - [`turns`]: a proxy counting round trips to PostgreSQL (the batch tests, `bench-limit`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use base64::Engine;
use hookledger_verify::Verifier;
use serde_json::Value;
use shared::config::{SourceConfig, Sources};

pub use hookledger_testing::{server_url, url_with_database, TestDb};

pub mod browser;
pub mod fake_providers;
pub mod hostile;
pub mod test_log;
pub mod turns;

/// A value planted in the payloads the end-to-end tests send (the common Stripe payment
/// builder's `description`: `tests/tests/api/helpers.rs`, `payment_intent_body`), which no log
/// line may carry: `scripts/scan-test-logs.py` reads it from this line and fails `make test`
/// when any log of the suite holds it (a payload value in a log: issue 24, item 2).
pub const PAYLOAD_MARKER: &str = "hlmark-payload-7d41c9e2";

/// The repository root (the workspace), found from this crate's manifest directory: the one cargo
/// names when it runs a test or `cargo run` (`CARGO_MANIFEST_DIR` at run time), else the one this
/// crate was compiled in. The run-time value comes first because checkouts that share one
/// `CARGO_TARGET_DIR` can link a copy of this crate compiled in another checkout.
pub fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    // The first folder up with the template: the crate may sit one level down (`tests/`,
    // `console/`) or two (`functions/console/`).
    manifest_dir
        .ancestors()
        .skip(1)
        .find(|dir| dir.join("template.yaml").is_file())
        .or_else(|| manifest_dir.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `events/` in the repository.
pub fn events_dir() -> PathBuf {
    repo_root().join("events")
}

/// The operator CLI at `binary` (a test's `env!("CARGO_BIN_EXE_hookledger-examples")`) as an operator
/// runs it: the database at `database_url`, the sources in the file `sources`, and none of the
/// environment that would take their place or reach AWS (the sources or database secret, the
/// worker to ring, a console token, `RUST_LOG`), whatever the test process has. Add the
/// arguments and any further variable.
pub fn hookledger_command(
    binary: &str,
    database_url: &str,
    sources: &Path,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .env("DATABASE_URL", database_url)
        .env("HOOKLEDGER_SOURCES_FILE", sources)
        .env_remove("HOOKLEDGER_SOURCES")
        .env_remove("HOOKLEDGER_SOURCES_SECRET_ARN")
        .env_remove("HOOKLEDGER_DB_SECRET_ARN")
        .env_remove("HOOKLEDGER_WORKER_FUNCTION")
        .env_remove("HOOKLEDGER_CONSOLE_TOKEN")
        .env_remove("HOOKLEDGER_EXAMPLES")
        .env_remove("RUST_LOG");
    command
}

/// The local development sources JSON (`events/sources.local.json`).
pub fn local_sources_json() -> Result<String> {
    let path = events_dir().join("sources.local.json");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The same server through a transaction-mode pgbouncer: `HOOKLEDGER_TEST_POOLER_URL`, which
/// `make test` sets (scripts/with-pgbouncer.sh). Tests fail (never skip) without it.
pub fn pooler_url() -> Result<String> {
    std::env::var("HOOKLEDGER_TEST_POOLER_URL").map_err(|_| {
        anyhow!(
            "HOOKLEDGER_TEST_POOLER_URL is not set: run the tests with `make test` \
             (it starts pgbouncer in front of PostgreSQL)"
        )
    })
}

/// A fresh database migrated with the ledger's migrations and the handlers' sets with the
/// examples (`handlers::examples::migrations()`: this crate turns the `examples` feature on).
pub async fn test_db() -> Result<TestDb> {
    TestDb::new(&handlers::examples::migrations()).await
}

/// `db`'s URL through the transaction-mode pgbouncer ([`pooler_url`]).
pub fn db_pooler_url(db: &TestDb) -> Result<String> {
    db.url_on(&pooler_url()?)
}

/// One Lambda event file from `events/`, as JSON, with accessors for what a provider sent.
#[derive(Debug, Clone)]
pub struct EventFile {
    /// Path relative to `events/`, e.g. `receiver/stripe-payment-intent-succeeded.json`.
    pub name: String,
    /// The event JSON.
    pub json: Value,
}

impl EventFile {
    /// Loads `events/{name}`.
    pub fn load(name: &str) -> Result<Self> {
        let path = events_dir().join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(Self {
            name: name.to_owned(),
            json: serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?,
        })
    }

    /// The request path (`rawPath` for HTTP API v2 and Function URLs, `path` for REST v1).
    pub fn path(&self) -> Result<&str> {
        self.json
            .get("rawPath")
            .or_else(|| self.json.get("path"))
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("{}: no rawPath or path", self.name))
    }

    /// The source name: the last path segment.
    pub fn source(&self) -> Result<&str> {
        let path = self.path()?;
        path.rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| anyhow!("{}: no source in path {path}", self.name))
    }

    /// The headers, lower-cased names.
    pub fn headers(&self) -> BTreeMap<String, String> {
        self.json
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sets one header (lower-cased name), replacing any spelling of it.
    pub fn set_header(&mut self, name: &str, value: &str) -> Result<()> {
        let headers = self
            .json
            .get_mut("headers")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| anyhow!("no headers object"))?;
        headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
        headers.insert(name.to_owned(), Value::String(value.to_owned()));
        // REST API v1 events carry every header twice; keep both views consistent.
        if let Some(multi) = self
            .json
            .get_mut("multiValueHeaders")
            .and_then(Value::as_object_mut)
        {
            multi.retain(|k, _| !k.eq_ignore_ascii_case(name));
            multi.insert(name.to_owned(), serde_json::json!([value]));
        }
        Ok(())
    }

    /// Whether the body is base64-encoded in the event.
    pub fn is_base64(&self) -> bool {
        self.json
            .get("isBase64Encoded")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The raw body bytes the provider sent (base64-decoded when flagged).
    pub fn body(&self) -> Result<Vec<u8>> {
        let body = self.json.get("body").and_then(Value::as_str).unwrap_or("");
        if self.is_base64() {
            Ok(base64::engine::general_purpose::STANDARD.decode(body)?)
        } else {
            Ok(body.as_bytes().to_vec())
        }
    }

    /// Replaces the body (re-encoding as base64 when the event is flagged so).
    pub fn set_body(&mut self, body: &[u8]) -> Result<()> {
        let text = if self.is_base64() {
            base64::engine::general_purpose::STANDARD.encode(body)
        } else {
            String::from_utf8(body.to_vec()).context("a non-base64 event body must be UTF-8")?
        };
        self.json["body"] = Value::String(text);
        Ok(())
    }

    /// The timestamp the delivery was signed at (Stripe `t=`, Paddle `ts=`, Slack
    /// `X-Slack-Request-Timestamp`, Standard Webhooks `webhook-timestamp`, a generic source's
    /// `*-timestamp` header), if the scheme signs one.
    pub fn signed_at(&self) -> Option<i64> {
        let headers = self.headers();
        let field = |header: &str, separator: char, key: &str| {
            headers.get(header).and_then(|value| {
                value
                    .split(separator)
                    .find_map(|part| part.strip_prefix(key))
                    .and_then(|t| t.parse().ok())
            })
        };
        field("stripe-signature", ',', "t=")
            .or_else(|| field("paddle-signature", ';', "ts="))
            .or_else(|| {
                [
                    "webhook-timestamp",
                    "svix-timestamp",
                    "x-slack-request-timestamp",
                ]
                .iter()
                .find_map(|name| headers.get(*name).and_then(|t| t.parse().ok()))
            })
            // Generic HMAC sources name their own timestamp header (`X-Partner-Timestamp`).
            .or_else(|| {
                headers
                    .iter()
                    .filter(|(name, _)| name.ends_with("-timestamp"))
                    .find_map(|(_, value)| value.parse().ok())
            })
    }

    /// Re-signs the event as the source's provider would at `timestamp` (unix seconds), with
    /// key `key_index` of `verifier`.
    pub fn sign(&mut self, verifier: &Verifier, key_index: usize, timestamp: i64) -> Result<()> {
        let headers = self.headers();
        let msg_id = headers
            .get("webhook-id")
            .or_else(|| headers.get("svix-id"))
            .cloned()
            .unwrap_or_default();
        let body = self.body()?;
        // A public-key source: we hold its provider's private key only locally
        // (events/private-keys.local.json); the headers the model signs are already in the event.
        if let Some(model) = verifier.generic().filter(|m| m.algorithm.is_public_key()) {
            let key = local_private_key(self.source()?, model)?;
            let headers = self.header_map()?;
            let request = hookledger_verify::Request::post(&headers, &body);
            let signed = hookledger_verify::generic::sign(
                model,
                hookledger_verify::Signer::Private(&key),
                &request,
                timestamp,
            )
            .map_err(|e| anyhow!("{}: {e}", self.name))?;
            for (name, value) in signed {
                self.set_header(&name, &value)?;
            }
            return Ok(());
        }
        for (name, value) in verifier.sign(key_index, &msg_id, timestamp, &body) {
            self.set_header(&name, &value)?;
        }
        Ok(())
    }

    /// The headers as an [`http::HeaderMap`].
    fn header_map(&self) -> Result<http::HeaderMap> {
        let mut map = http::HeaderMap::new();
        for (name, value) in self.headers() {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes())?,
                http::HeaderValue::from_str(&value)?,
            );
        }
        Ok(map)
    }

    /// The event as lambda_http deserializes it (the same code path as in Lambda).
    pub fn request(&self) -> Result<lambda_http::Request> {
        lambda_http::request::from_str(&self.json.to_string())
            .map_err(|e| anyhow!("{}: lambda_http cannot read it: {e}", self.name))
    }
}

/// The private key of a public-key source's provider, for local signing only:
/// `events/private-keys.local.json` maps a source name to its key (hex or base64 of the 32
/// secret bytes, or a PKCS#8 PEM). These keys are demo keys, published in the repository; a
/// deployment holds public keys only.
pub fn local_private_key(
    source: &str,
    model: &hookledger_verify::GenericHmac,
) -> Result<hookledger_verify::PrivateKey> {
    let path = events_dir().join("private-keys.local.json");
    let keys: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let text = keys
        .get(source)
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("no private key for {source} in {}", path.display()))?;
    hookledger_verify::PrivateKey::parse(model.algorithm, text, None)
        .map_err(|e| anyhow!("{source}: {e}"))
}

/// One configured local source from `events/sources.local.json`, verification prepared.
pub fn local_source(name: &str) -> Result<std::sync::Arc<SourceConfig>> {
    let sources = Sources::from_json(&local_sources_json()?)?;
    sources
        .get(name)
        .cloned()
        .ok_or_else(|| anyhow!("no source {name} in events/sources.local.json"))
}

/// A verifier for `source`'s scheme (and generic rules) that signs with `secret` instead of the
/// configured one: for deliveries that must fail verification.
pub fn verifier_with_secret(source: &SourceConfig, secret: &str) -> Result<Verifier> {
    Verifier::new(
        source.scheme,
        &[secret],
        source.verifier.tolerance_secs(),
        source.verifier.generic().cloned(),
    )
    .map_err(|e| anyhow!("{e}"))
}
