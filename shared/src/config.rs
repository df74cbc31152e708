//! Settings and source configuration: the only reader of the process environment.
//!
//! Environment variables (all read once, at cold start): every variable, what it means, its
//! default and which functions use it is in one place, the book's configuration reference
//! (`docs/reference/configuration.md`; a test in `tests/tests/api/docs.rs` keeps that page and
//! the variables this crate and the others read the same set).
//!
//! `HOOKLEDGER_DB_HOST`, `HOOKLEDGER_DB_PORT` and `HOOKLEDGER_DB_NAME` are refused together with
//! `DATABASE_URL` (rather than ignored): a URL already names its host, port and database, and a
//! setting that silently does nothing would leave a function pointed at the wrong server.
//!
//! Everything fails closed: a source without a secret, an unknown scheme or mode, an unknown
//! field, or malformed JSON is a start-up error that names the problem.
//!
//! # Rotating a signing secret
//!
//! The sources are read at cold start, but the receiver does not need a redeploy to see a new
//! signing secret. When a delivery's signature matches none of its source's secrets, the
//! receiver re-reads `HOOKLEDGER_SOURCES_SECRET_ARN` (or `HOOKLEDGER_SOURCES_FILE`) and verifies
//! once more against what it read ([`crate::sources_refresh`]). It re-reads at most once per
//! `HOOKLEDGER_SOURCES_REFRESH_SECS` per execution environment, whatever the number of failures,
//! and one re-read at a time; a re-read that fails, or that finds JSON which does not validate,
//! is logged without values and the sources already loaded stay in force. `HOOKLEDGER_SOURCES`
//! itself is never re-read (it is the function's environment). Rotate in two steps, because
//! warm environments only look after a failure and a new environment reads whatever is current:
//! first put a version whose source lists the new secret before the old one
//! (`"secrets": ["new", "old"]`), switch the provider to the new secret, and once the log's
//! `key_index` stays 0, put a version without the old one. The worker does not re-read: it
//! verifies nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::retention::{Retention, RetentionSpec, SourceRetention};
use hookledger_verify::{GenericHmac, Scheme, Verifier, VerifierError, DEFAULT_TOLERANCE_SECS};

mod github_hook;
pub mod targets;
pub use github_hook::{GithubHook, GithubHookSpec, GithubHookTarget, GITHUB_API_BASE_URL};

/// Default body limit, bytes (1 MiB). Stripe and Standard Webhooks payloads are a few KiB;
/// GitHub caps its payloads at 25 MB, so raise it for GitHub sources that send large pushes
/// (API Gateway itself stops at 10 MB, Lambda at 6 MB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Longest source name, characters; names are path segments and part of the ledger key.
pub const MAX_SOURCE_NAME_LEN: usize = 64;

/// Why the configuration could not be loaded. All of these stop the function at cold start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("{0} must be set")]
    Missing(&'static str),
    /// More than one of `HOOKLEDGER_SOURCES`, `HOOKLEDGER_SOURCES_FILE` and
    /// `HOOKLEDGER_SOURCES_SECRET_ARN` is set.
    #[error("set only one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN")]
    SourcesAmbiguous,
    /// Both `DATABASE_URL` and `HOOKLEDGER_DB_SECRET_ARN` are set.
    #[error("set only one of DATABASE_URL and HOOKLEDGER_DB_SECRET_ARN")]
    DatabaseAmbiguous,
    /// A secret could not be fetched from Secrets Manager or has the wrong shape.
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    /// The sources file could not be read.
    #[error("cannot read HOOKLEDGER_SOURCES_FILE {path}: {source}")]
    SourcesFile {
        /// The path that was given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sources JSON does not parse, or has an unknown scheme, mode or field. The message
    /// names keys and enum values but never a string value (serde quotes values such as a
    /// secret given where a list was expected: `invalid type: string "whsec_..."`).
    #[error("sources JSON is invalid: {}", redacted_json_error(.0))]
    SourcesJson(#[from] serde_json::Error),
    /// One source is configured wrongly.
    #[error("source {name:?}: {problem}")]
    Source {
        /// The source's name as configured.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The source's verification cannot be prepared: no secret, a secret the scheme cannot
    /// use, or an invalid `generic` block (never includes a secret).
    #[error("source {name:?}: {error}")]
    Verifier {
        /// The source's name.
        name: String,
        /// Why.
        error: VerifierError,
    },
    /// Two settings that cannot work together.
    #[error("{first} and {second} cannot work together: {rule}")]
    Incompatible {
        /// One setting.
        first: &'static str,
        /// The other.
        second: &'static str,
        /// The rule, with both values.
        rule: String,
    },
    /// A numeric variable does not parse or is out of range.
    #[error("{var} must be {expected}, got {value:?}")]
    Number {
        /// The variable's name.
        var: &'static str,
        /// What was expected, e.g. "a positive integer".
        expected: &'static str,
        /// The value found.
        value: String,
    },
}

/// How a source's deliveries are processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Claim, run the handler and store the response in one transaction; answer 200 with the
    /// handler's body. The default: for handlers that finish well within the provider's timeout.
    Inline,
    /// Store the event durably (`claimed`), answer 202 at once, and let the worker run the
    /// handler with leases, backoff and a dead letter: for slow handlers.
    Deferred,
}

/// Default attempts before a deferred event is dead-lettered.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// One source as written in the sources JSON (`HOOKLEDGER_SOURCES`):
///
/// ```json
/// [{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_..."], "mode": "inline",
///   "tolerance_secs": 300, "max_body_bytes": 1048576, "store_payload": true}]
/// ```
///
/// `name` becomes the path segment in `POST /webhooks/{name}` and the ledger's `source`.
/// `secrets` takes several values for rotation: a delivery signed with any of them verifies.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Source name: 1 to 64 characters of `[a-z0-9_-]`.
    pub name: String,
    /// Signature scheme: `stripe`, `github`, `shopify`, `slack`, `paddle`,
    /// `standard-webhooks` (Svix too) or `generic-hmac`.
    pub scheme: Scheme,
    /// Active secrets, newest first by convention; at least one.
    pub secrets: Vec<String>,
    /// Processing mode; `inline` when absent.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Timestamp tolerance in seconds, both directions; [`DEFAULT_TOLERANCE_SECS`] when absent.
    #[serde(default)]
    pub tolerance_secs: Option<u64>,
    /// Largest accepted body in bytes; [`DEFAULT_MAX_BODY_BYTES`] when absent.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// Keep the raw body in the ledger (`true` when absent); `false` keeps the digest only.
    #[serde(default)]
    pub store_payload: Option<bool>,
    /// Shadow mode: claim and record as usual, but process duplicates too and count them
    /// (`shadow_duplicate`), to measure the duplicate rate before enforcing. `false` when absent.
    #[serde(default)]
    pub shadow: Option<bool>,
    /// Deferred mode: attempts before the event goes `dead`; [`DEFAULT_MAX_ATTEMPTS`] when
    /// absent.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// The provider's API key. Stripe: a restricted key that may read events (replay) and the
    /// objects the handlers re-fetch (ordering ties); Paddle: an API key that may read events
    /// (replay); GitHub: a token for a repository or organisation `github_hook` (replay).
    /// Optional; never logged.
    #[serde(default)]
    pub api_key: Option<String>,
    /// The provider's API base URL; the provider's public API when absent (Stripe
    /// `https://api.stripe.com`, Paddle `https://api.paddle.com` (its sandbox is
    /// `https://sandbox-api.paddle.com`), GitHub `https://api.github.com`). Tests point it at a
    /// local fake.
    #[serde(default)]
    pub api_base_url: Option<String>,
    /// GitHub sources only: the webhook replay lists and redelivers, and its credential:
    /// `{"repository": "owner/name", "hook_id": 123}` or `{"organization": "org", "hook_id":
    /// 123}` (with `api_key`), or `{"app_id": 123, "app_private_key": "-----BEGIN ..."}` (see
    /// [`GithubHookSpec`]). Optional.
    #[serde(default)]
    pub github_hook: Option<GithubHookSpec>,
    /// Completed keys are kept this many days after the first delivery (default 30); at least
    /// the retry horizon plus the replay look-back (see [`crate::retention`]).
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// Dead letters are kept this many days after they went dead (default 90, and never less
    /// than `retention_days`).
    #[serde(default)]
    pub dead_retention_days: Option<u32>,
    /// How long the provider keeps retrying a delivery, hours: required for `generic-hmac`,
    /// overrides the built-in horizon otherwise ([`crate::retention::builtin_retry_horizon`]).
    #[serde(default)]
    pub retry_horizon_hours: Option<u32>,
    /// How far back replay may fetch from the provider's API, days (default: retention minus
    /// the retry horizon).
    #[serde(default)]
    pub replay_lookback_days: Option<u32>,
    /// The auditor counts the source as quiet (`source_quiet`) when no new event has been
    /// claimed for longer than this, minutes. Unset: never quiet.
    #[serde(default)]
    pub expected_interval_minutes: Option<u32>,
    /// For `generic-hmac` only: the signature header, algorithm, encoding, prefix, timestamp
    /// header, signed-payload template and where the event id and type are (see
    /// [`GenericHmac`]).
    #[serde(default)]
    pub generic: Option<GenericHmac>,
    /// Built-in outbox targets: `forward`, `sqs`, `eventbridge` (see
    /// [`TargetSpec`](targets::TargetSpec)). Each matching event gets one message per target,
    /// committed with its claim and dispatched by the worker. None when absent.
    #[serde(default)]
    pub targets: Option<Vec<targets::TargetSpec>>,
}

/// One source, validated and with its secrets prepared for verification.
#[derive(Debug)]
pub struct SourceConfig {
    /// Source name (path segment and ledger `source`).
    pub name: String,
    /// Signature scheme.
    pub scheme: Scheme,
    /// The prepared verification: keys in configuration order (the log names the matching
    /// index), tolerance, generic rules.
    pub verifier: Verifier,
    /// Processing mode.
    pub mode: Mode,
    /// Largest accepted body, bytes.
    pub max_body_bytes: usize,
    /// Whether the raw body is stored in `webhook_event.payload`.
    pub store_payload: bool,
    /// Shadow mode: duplicates are processed too, and counted.
    pub shadow: bool,
    /// Deferred mode: attempts before `dead`.
    pub max_attempts: u32,
    /// The provider's API, when an `api_key` is configured.
    pub api: Option<ProviderApi>,
    /// GitHub sources with a `github_hook`: the webhook replay lists and redelivers.
    pub github_hook: Option<GithubHook>,
    /// Retention, retry horizon, replay look-back and the expected delivery interval.
    pub retention: SourceRetention,
    /// Built-in outbox targets, in configuration order (names unique).
    pub targets: Vec<targets::Target>,
}

/// A provider API the handlers may call (e.g. to re-fetch an object on an ordering tie).
#[derive(Debug, Clone)]
pub struct ProviderApi {
    /// Base URL without a trailing slash, e.g. `https://api.stripe.com`.
    pub base_url: String,
    /// The API key; never logged.
    pub key: SecretString,
}

/// Stripe's API base URL.
pub const STRIPE_API_BASE_URL: &str = "https://api.stripe.com";

/// Paddle Billing's API base URL (live; the sandbox is `https://sandbox-api.paddle.com`).
pub const PADDLE_API_BASE_URL: &str = "https://api.paddle.com";

/// The provider's public API base URL for `scheme`, when it has one replay or the handlers use.
pub fn default_api_base_url(scheme: Scheme) -> Option<&'static str> {
    match scheme {
        Scheme::Stripe => Some(STRIPE_API_BASE_URL),
        Scheme::Paddle => Some(PADDLE_API_BASE_URL),
        Scheme::Github => Some(GITHUB_API_BASE_URL),
        _ => None,
    }
}

/// Whether replay and the handlers may send a credential to `url`: `https://` anywhere, plain
/// `http://` only to the loopback host (tests and local fakes), so a key never crosses a
/// network in clear text.
pub(crate) fn url_may_carry_credentials(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(parsed) => match parsed.scheme() {
            "https" => parsed.host().is_some(),
            "http" => matches!(
                parsed.host(),
                Some(url::Host::Domain("localhost"))
                    | Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
                    | Some(url::Host::Ipv6(std::net::Ipv6Addr::LOCALHOST))
            ),
            _ => false,
        },
        Err(_) => false,
    }
}

impl SourceConfig {
    /// The built-in target named `name`, if configured.
    pub fn target(&self, name: &str) -> Option<&targets::Target> {
        self.targets.iter().find(|t| t.name == name)
    }

    /// Validates a [`SourceSpec`] and prepares its keys.
    ///
    /// # Errors
    /// [`ConfigError::Source`] for a bad name or a zero body limit;
    /// [`ConfigError::Verifier`] for no secrets, a secret the scheme cannot use (empty,
    /// undecodable) or an invalid `generic` block.
    pub fn from_spec(spec: SourceSpec) -> Result<Self, ConfigError> {
        let problem = |problem: &str| ConfigError::Source {
            name: spec.name.clone(),
            problem: problem.to_owned(),
        };
        if spec.name.is_empty()
            || spec.name.len() > MAX_SOURCE_NAME_LEN
            || !spec
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(problem("name must be 1 to 64 characters of [a-z0-9_-]"));
        }
        let max_body_bytes = spec.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if max_body_bytes == 0 {
            return Err(problem("max_body_bytes must be positive"));
        }
        let mode = spec.mode.unwrap_or(Mode::Inline);
        let store_payload = spec.store_payload.unwrap_or(true);
        if mode == Mode::Deferred && !store_payload {
            return Err(problem(
                "deferred mode needs store_payload: the worker processes the stored body",
            ));
        }
        let max_attempts = spec.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if max_attempts == 0 || max_attempts > 100 {
            return Err(problem("max_attempts must be 1 to 100"));
        }
        if spec.github_hook.is_some() && spec.scheme != Scheme::Github {
            return Err(problem("github_hook applies to github sources only"));
        }
        // A GitHub App authenticates with a JWT, not a key: its base URL stands alone.
        let app_hook = spec
            .github_hook
            .as_ref()
            .is_some_and(|hook| hook.app_id.is_some());
        let base_url = match (spec.api_key.is_some() || app_hook, spec.api_base_url) {
            (false, None) => None,
            (false, Some(_)) => return Err(problem("api_base_url needs api_key")),
            (true, base_url) => {
                let base_url = match (base_url, default_api_base_url(spec.scheme)) {
                    (Some(url), _) => url,
                    (None, Some(url)) => url.to_owned(),
                    (None, None) => {
                        return Err(problem("api_key needs api_base_url for this scheme"))
                    }
                };
                if !url_may_carry_credentials(&base_url) {
                    return Err(problem(
                        "api_base_url must be an https:// URL (http:// only to 127.0.0.1, \
                         [::1] or localhost, for local fakes): the API key travels with every \
                         request",
                    ));
                }
                Some(base_url.trim_end_matches('/').to_owned())
            }
        };
        let api = match (spec.api_key, &base_url) {
            (Some(key), Some(base_url)) => {
                if key.is_empty() {
                    return Err(problem("api_key is empty"));
                }
                Some(ProviderApi {
                    base_url: base_url.clone(),
                    key: SecretString::from(key),
                })
            }
            _ => None,
        };
        let github_hook = match spec.github_hook {
            None => None,
            Some(hook) => Some(
                github_hook::validate(
                    hook,
                    api.is_some(),
                    base_url.unwrap_or_else(|| GITHUB_API_BASE_URL.to_owned()),
                )
                .map_err(|reason| problem(&reason))?,
            ),
        };
        let secrets: Vec<&str> = spec.secrets.iter().map(String::as_str).collect();
        let verifier = Verifier::new(
            spec.scheme,
            &secrets,
            spec.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS),
            spec.generic,
        )
        .map_err(|error| ConfigError::Verifier {
            name: spec.name.clone(),
            error,
        })?;
        let retention = SourceRetention::from_spec(
            spec.scheme,
            RetentionSpec {
                retention_days: spec.retention_days,
                dead_retention_days: spec.dead_retention_days,
                retry_horizon_hours: spec.retry_horizon_hours,
                replay_lookback_days: spec.replay_lookback_days,
                expected_interval_minutes: spec.expected_interval_minutes,
            },
        )
        .map_err(|reason| problem(&reason))?;
        let mut targets: Vec<targets::Target> = Vec::new();
        for target in spec.targets.unwrap_or_default() {
            let target = targets::Target::from_spec(target).map_err(|r| problem(&r))?;
            if targets.iter().any(|t| t.name == target.name) {
                return Err(problem(&format!(
                    "target {:?} is configured twice",
                    target.name
                )));
            }
            targets.push(target);
        }
        Ok(Self {
            targets,
            scheme: spec.scheme,
            verifier,
            mode,
            max_body_bytes,
            store_payload,
            shadow: spec.shadow.unwrap_or(false),
            max_attempts,
            api,
            github_hook,
            retention,
            name: spec.name,
        })
    }
}

/// The configured sources, by name.
#[derive(Debug, Default, Clone)]
pub struct Sources(HashMap<String, Arc<SourceConfig>>);

impl Sources {
    /// Parses and validates the sources JSON (an array of [`SourceSpec`]).
    ///
    /// # Errors
    /// [`ConfigError::SourcesJson`] for malformed JSON, an unknown scheme, mode or field;
    /// [`ConfigError::Source`] for a duplicate name, an empty list or a bad source;
    /// [`ConfigError::Verifier`] for missing or unusable secrets or generic rules.
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        let specs: Vec<SourceSpec> = serde_json::from_str(json)?;
        if specs.is_empty() {
            return Err(ConfigError::Source {
                name: String::new(),
                problem: "no sources configured".to_owned(),
            });
        }
        let mut sources = HashMap::with_capacity(specs.len());
        for spec in specs {
            let source = SourceConfig::from_spec(spec)?;
            if sources.contains_key(&source.name) {
                return Err(ConfigError::Source {
                    name: source.name,
                    problem: "configured twice".to_owned(),
                });
            }
            sources.insert(source.name.clone(), Arc::new(source));
        }
        Ok(Self(sources))
    }

    /// The source called `name`, if configured.
    pub fn get(&self, name: &str) -> Option<&Arc<SourceConfig>> {
        self.0.get(name)
    }

    /// The retention of `name`'s keys: the configured one, or the defaults for a source that is
    /// no longer configured (its rows still expire).
    pub fn retention(&self, name: &str) -> Retention {
        self.get(name)
            .map_or_else(Retention::default, |source| source.retention.retention)
    }

    /// Every configured source, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<SourceConfig>> {
        self.0.values()
    }
}

/// Database connection settings.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// The PostgreSQL URL; `sslmode=require` (or `prefer`, the default) negotiates TLS.
    pub url: SecretString,
    /// PEM file of CA certificates added to the system roots; when set, the compiled-in RDS
    /// CAs are not added ([`DatabaseSettings::bundled_rds_ca`] is ignored).
    pub ca_file: Option<PathBuf>,
    /// Add the RDS CAs compiled into the binary (`crate::rds_ca::RDS_CA_BUNDLE`) to the system
    /// roots when no [`DatabaseSettings::ca_file`] is given. `true` for a connection configured
    /// from `HOOKLEDGER_DB_SECRET_ARN`, `false` for `DATABASE_URL` (its CA is the user's to
    /// give) and from [`DatabaseSettings::with_url`].
    pub bundled_rds_ca: bool,
    /// Connections per execution environment (Lambda runs one delivery at a time per
    /// environment, so one is used; the rest serve local runs and tests).
    pub pool_size: usize,
    /// `statement_timeout`, milliseconds.
    pub statement_timeout_ms: u64,
    /// `lock_timeout`, milliseconds: bounds how long a duplicate waits on an in-flight claim.
    pub lock_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`, milliseconds.
    pub idle_in_transaction_timeout_ms: u64,
    /// Prepare each statement once per connection and reuse it by name (`true`, the default for
    /// a direct connection). `false` sends every statement unnamed with its parameter types
    /// (one round trip, nothing left on the server): required behind pgbouncer in transaction
    /// mode, and what keeps RDS Proxy sessions unpinned.
    pub statement_cache: bool,
    /// Send the three limits as `SET LOCAL` with every `BEGIN` (`true`, the default). `false`
    /// sends a bare `BEGIN`: for RDS Proxy, which pins a PostgreSQL session on any `SET`; the
    /// limits must then be set on the database role instead (`ALTER ROLE .. SET lock_timeout
    /// = ..`), see the book's `docs/operations/pooler.md`.
    pub transaction_limits: bool,
    /// The receiver's client-side deadline on a delivery's database work, milliseconds
    /// (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`); `None`: [`DatabaseSettings::client_deadline`]'s
    /// default.
    pub client_deadline_ms: Option<u64>,
}

/// What [`DatabaseSettings::client_deadline`] adds to the statement timeout by default,
/// milliseconds: a statement the server cancels at its timeout still gets its error back.
pub const CLIENT_DEADLINE_MARGIN_MS: u64 = 1_000;

/// The largest `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`
/// PostgreSQL accepts, milliseconds (`INT_MAX`; PostgreSQL docs, "Client Connection Defaults").
pub const POSTGRES_MAX_TIMEOUT_MS: u64 = i32::MAX as u64;

impl DatabaseSettings {
    /// How long the receiver waits for a delivery's database work (a pooled connection, the
    /// claim, the handler, the commit) before answering 503 with `Retry-After` and closing
    /// the connection: [`DatabaseSettings::client_deadline_ms`], else the statement timeout
    /// plus [`CLIENT_DEADLINE_MARGIN_MS`] (6 s with the defaults, inside the receiver's 10 s
    /// Lambda timeout). `statement_timeout` is enforced by the server and cannot fire when the
    /// network to it stops answering; this deadline is the client's own.
    pub fn client_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.client_deadline_ms.unwrap_or(
                self.statement_timeout_ms
                    .saturating_add(CLIENT_DEADLINE_MARGIN_MS),
            ),
        )
    }

    /// Settings for `url` with every other field at its default.
    pub fn with_url(url: impl Into<String>) -> Self {
        Self {
            url: SecretString::from(url.into()),
            ca_file: None,
            bundled_rds_ca: false,
            pool_size: 4,
            statement_timeout_ms: 5_000,
            lock_timeout_ms: 2_000,
            idle_in_transaction_timeout_ms: 10_000,
            statement_cache: true,
            transaction_limits: true,
            client_deadline_ms: None,
        }
    }
}

/// The worker's settings (deferred mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSettings {
    /// How long a leased event belongs to a worker, seconds. Longer than the handler timeout.
    pub lease_secs: u64,
    /// Events leased per statement.
    pub batch: i64,
    /// Start no event with less invocation time than this plus the handler timeout left,
    /// milliseconds.
    pub margin_ms: u64,
    /// A handler's deadline, milliseconds; past it the attempt fails with "handler timed out".
    pub handler_timeout_ms: u64,
    /// Retry delays: `base_secs * 2^(attempt - 1)`, capped at `cap_secs`, with jitter.
    pub backoff: Backoff,
    /// Outbox messages leased per statement and dispatched at once (default 16): a batch's
    /// dispatches all run together, so the batch takes about its slowest target's time.
    pub outbox_concurrency: u32,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            lease_secs: 120,
            batch: 3,
            margin_ms: 10_000,
            handler_timeout_ms: 30_000,
            backoff: Backoff::default(),
            outbox_concurrency: 16,
        }
    }
}

/// The sweeper's bounds (see `crate::sweep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSettings {
    /// Rows deleted per batch, each batch its own transaction (default 1,000: in
    /// dev/bench/SWEEP.md, 5,000-row batches raised the claims' p99 by several times, through the
    /// WAL each batch writes at once; 1,000-row batches left it unchanged).
    pub batch_size: i64,
    /// Batches per run at most (default 1,000: up to a million rows a run, about two minutes
    /// at the measured rate, inside the sweeper's five minutes).
    pub max_batches: u32,
    /// Least pause between two batches, milliseconds (default 100): lets autovacuum,
    /// replication and the receivers' claims through.
    pub pause_ms: u64,
    /// The most of the run's time spent inside batches, percent (default 25): after a batch
    /// that took `t`, the sweep pauses at least `t * (100 - duty) / duty`. Deleting writes a
    /// full page image per heap page first touched after a checkpoint, and every claim's COMMIT
    /// waits behind that WAL; bounding the duty cycle bounds the sweep's WAL rate (see
    /// dev/bench/SWEEP.md).
    pub duty_percent: u64,
    /// Start no batch with less invocation time left than this, milliseconds (default 10,000).
    pub margin_ms: u64,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            batch_size: 1_000,
            max_batches: 1_000,
            pause_ms: 100,
            duty_percent: 25,
            margin_ms: 10_000,
        }
    }
}

/// A `true`/`false` variable (`on`/`off`, `1`/`0`; any case): `default` when unset or empty.
///
/// # Errors
/// [`ConfigError::Number`] for any other value.
fn flag(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match lookup(var)
        .filter(|v| !v.is_empty())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None => Ok(default),
        Some("true" | "on" | "1") => Ok(true),
        Some("false" | "off" | "0") => Ok(false),
        Some(other) => Err(ConfigError::Number {
            var,
            expected: "true or false",
            value: other.to_owned(),
        }),
    }
}

/// The `console` function's own settings, besides [`Settings`] (which it reads as every
/// function does): `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN` (required: the Secrets Manager secret
/// whose text keys the CSRF tokens of every execution environment) and
/// `HOOKLEDGER_CONSOLE_REDRIVE` (`true` turns re-drive on; default `false`: read-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// The CSRF key's secret (an ARN, never the value).
    pub csrf_secret_arn: String,
    /// Whether the console may re-drive (else read-only).
    pub redrive: bool,
}

impl ConsoleSettings {
    /// Reads the two variables from the process environment, once at cold start.
    ///
    /// # Errors
    /// [`ConfigError::Missing`] without `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN`;
    /// [`ConfigError::Number`] for a `HOOKLEDGER_CONSOLE_REDRIVE` that is not a boolean.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`ConsoleSettings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`ConsoleSettings::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let csrf_secret_arn = lookup("HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN")
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing("HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN"))?;
        Ok(Self {
            csrf_secret_arn,
            redrive: flag(&lookup, "HOOKLEDGER_CONSOLE_REDRIVE", false)?,
        })
    }
}

/// The auditor's thresholds (see `crate::audit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditSettings {
    /// A `claimed` row older than this is a stuck claim, seconds (default 300).
    pub stuck_after_secs: u64,
    /// A database session `idle in transaction` for longer than this is counted, seconds
    /// (default 30).
    pub idle_in_transaction_after_secs: u64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            stuck_after_secs: 300,
            idle_in_transaction_after_secs: 30,
        }
    }
}

/// The retry schedule of deferred events (see [`Backoff::delay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failed attempt, seconds (default 30).
    pub base_secs: u64,
    /// Longest delay, seconds (default 3600).
    pub cap_secs: u64,
}

impl Backoff {
    /// The delay before the attempt after failed attempt `attempts` (1-based) of the event or
    /// message `key`: exponential from `base_secs`, capped at `cap_secs`, with deterministic
    /// "equal jitter" (half the step fixed, half spread by a hash of `key` and `attempts`), so
    /// that events failing together do not retry together and a test can predict the delay.
    #[must_use]
    pub fn delay(&self, attempts: u32, key: &str) -> std::time::Duration {
        use std::hash::{Hash, Hasher};
        let exponent = attempts.saturating_sub(1).min(32);
        let full = self
            .base_secs
            .saturating_mul(1u64 << exponent)
            .min(self.cap_secs);
        let half = full / 2;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (key, attempts).hash(&mut hasher);
        let jitter = if full > half {
            hasher.finish() % (full - half + 1)
        } else {
            0
        };
        std::time::Duration::from_secs(half + jitter)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base_secs: 30,
            cap_secs: 3_600,
        }
    }
}

/// Where the sources JSON came from: what the receiver can re-read after a failed verification
/// (see [`crate::sources_refresh`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SourcesOrigin {
    /// `HOOKLEDGER_SOURCES`, or built in code: nothing to re-read.
    #[default]
    Inline,
    /// `HOOKLEDGER_SOURCES_FILE`: the path, re-read as is.
    File(PathBuf),
    /// `HOOKLEDGER_SOURCES_SECRET_ARN`: the secret's ARN (or name), whose current version is
    /// re-read.
    Secret(String),
}

/// Least time between two re-reads of the sources in one execution environment, unless
/// `HOOKLEDGER_SOURCES_REFRESH_SECS` says otherwise: 60 s.
pub const DEFAULT_MIN_REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// How the receiver re-reads its sources after a signature matched none of the secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesReload {
    /// Where the sources came from.
    pub origin: SourcesOrigin,
    /// Least time between two re-reads in one execution environment
    /// (`HOOKLEDGER_SOURCES_REFRESH_SECS`, default
    /// [`DEFAULT_MIN_REFRESH_INTERVAL`], 60 s).
    pub min_interval: std::time::Duration,
}

impl Default for SourcesReload {
    fn default() -> Self {
        Self {
            origin: SourcesOrigin::Inline,
            min_interval: DEFAULT_MIN_REFRESH_INTERVAL,
        }
    }
}

/// Everything a function needs from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Database connection settings.
    pub database: DatabaseSettings,
    /// The configured sources, as read at cold start.
    pub sources: Sources,
    /// Where the sources came from and how often the receiver may re-read them.
    pub sources_reload: SourcesReload,
    /// The worker (deferred mode).
    pub worker: WorkerSettings,
    /// The worker function the receiver rings after a deferred accept; `None` turns the
    /// doorbell off (the worker's schedule still drains).
    pub worker_function: Option<String>,
    /// The sweeper's bounds.
    pub sweep: SweepSettings,
    /// The auditor's thresholds.
    pub audit: AuditSettings,
}

impl Settings {
    /// Reads the settings from the process environment (see the module docs for variables),
    /// fetching `HOOKLEDGER_DB_SECRET_ARN` and `HOOKLEDGER_SOURCES_SECRET_ARN` from Secrets
    /// Manager when they are set. Call once per cold start.
    ///
    /// # Errors
    /// Any [`ConfigError`]: no database or sources, two of them at once, a secret that cannot be
    /// fetched, an invalid source or signing secret, a malformed number.
    pub async fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup_with_secrets(|name| std::env::var(name).ok()).await
    }

    /// Like [`Settings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`Settings::from_env`].
    pub async fn from_lookup_with_secrets(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let db_arn = set("HOOKLEDGER_DB_SECRET_ARN");
        let sources_arn = set("HOOKLEDGER_SOURCES_SECRET_ARN");
        if db_arn.is_none() && sources_arn.is_none() {
            return Self::from_lookup(lookup);
        }
        if db_arn.is_some() && set("DATABASE_URL").is_some() {
            return Err(ConfigError::DatabaseAmbiguous);
        }
        if sources_arn.is_some()
            && (set("HOOKLEDGER_SOURCES").is_some() || set("HOOKLEDGER_SOURCES_FILE").is_some())
        {
            return Err(ConfigError::SourcesAmbiguous);
        }
        let endpoint = match &db_arn {
            Some(_) => db_endpoint(&lookup)?,
            None => crate::secrets::DbEndpoint::default(),
        };
        if db_arn.is_some() && set("HOOKLEDGER_DB_CA_FILE").is_none() {
            // The connector will trust the compiled-in RDS CAs: parse them while the secrets
            // are fetched.
            crate::rds_ca::preload_rds_ca_certificates();
        }
        let secrets = crate::secrets::Secrets::from_env().await;
        let database_url = match &db_arn {
            Some(arn) => Some(secrets.database_url_with(arn, &endpoint).await?),
            None => None,
        };
        let sources = match &sources_arn {
            Some(arn) => Some(secrets.secret_string(arn).await?),
            None => None,
        };
        let mut settings = Self::from_lookup(|name| match name {
            "DATABASE_URL" if database_url.is_some() => {
                database_url.as_ref().map(|s| s.expose_secret().to_owned())
            }
            "HOOKLEDGER_SOURCES" if sources.is_some() => {
                sources.as_ref().map(|s| s.expose_secret().to_owned())
            }
            // Used up: they are in the URL built from the secret.
            name if database_url.is_some() && DB_ENDPOINT_VARS.contains(&name) => None,
            other => lookup(other),
        })?;
        settings.database.bundled_rds_ca = db_arn.is_some();
        if let Some(arn) = sources_arn {
            settings.sources_reload.origin = SourcesOrigin::Secret(arn);
        }
        Ok(settings)
    }

    /// Like [`Settings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`Settings::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let url =
            lookup("DATABASE_URL")
                .filter(|url| !url.is_empty())
                .ok_or(ConfigError::Missing(
                    "DATABASE_URL (or HOOKLEDGER_DB_SECRET_ARN)",
                ))?;
        if let Some(var) = DB_ENDPOINT_VARS
            .into_iter()
            .find(|var| lookup(var).is_some_and(|v| !v.is_empty()))
        {
            return Err(ConfigError::Incompatible {
                first: "DATABASE_URL",
                second: var,
                rule: "HOOKLEDGER_DB_HOST, HOOKLEDGER_DB_PORT and HOOKLEDGER_DB_NAME complete \
                       the secret of HOOKLEDGER_DB_SECRET_ARN; with DATABASE_URL, put the host, \
                       port and database name in the URL"
                    .to_owned(),
            });
        }
        let mut sources_reload = SourcesReload::default();
        let json = match (
            lookup("HOOKLEDGER_SOURCES").filter(|v| !v.is_empty()),
            lookup("HOOKLEDGER_SOURCES_FILE").filter(|v| !v.is_empty()),
        ) {
            (Some(json), None) => json,
            (None, Some(path)) => {
                let path = PathBuf::from(path);
                let json =
                    std::fs::read_to_string(&path).map_err(|source| ConfigError::SourcesFile {
                        path: path.clone(),
                        source,
                    })?;
                sources_reload.origin = SourcesOrigin::File(path);
                json
            }
            (None, None) => {
                return Err(ConfigError::Missing(
                    "one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN",
                ))
            }
            (Some(_), Some(_)) => return Err(ConfigError::SourcesAmbiguous),
        };
        let mut database = DatabaseSettings::with_url(url);
        database.ca_file = lookup("HOOKLEDGER_DB_CA_FILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let number = |var: &'static str, default: u64| -> Result<u64, ConfigError> {
            match lookup(var).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(ConfigError::Number {
                        var,
                        expected: "a positive integer",
                        value,
                    }),
                },
            }
        };
        database.pool_size = number("HOOKLEDGER_DB_POOL_SIZE", database.pool_size as u64)? as usize;
        // PostgreSQL's limit for these settings (an `int` of milliseconds): a larger value is
        // refused by `SET` on every connection, so it is refused here, at start-up.
        let timeout = |var: &'static str, default: u64| -> Result<u64, ConfigError> {
            let value = number(var, default)?;
            if value > POSTGRES_MAX_TIMEOUT_MS {
                return Err(ConfigError::Number {
                    var,
                    expected: "at most 2147483647 (PostgreSQL's limit, milliseconds)",
                    value: value.to_string(),
                });
            }
            Ok(value)
        };
        database.statement_timeout_ms = timeout(
            "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            database.statement_timeout_ms,
        )?;
        database.lock_timeout_ms = timeout("HOOKLEDGER_LOCK_TIMEOUT_MS", database.lock_timeout_ms)?;
        database.idle_in_transaction_timeout_ms = timeout(
            "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            database.idle_in_transaction_timeout_ms,
        )?;
        let flag = |var: &'static str, default: bool| flag(&lookup, var, default);
        if lookup("HOOKLEDGER_DB_CLIENT_DEADLINE_MS").is_some_and(|v| !v.is_empty()) {
            database.client_deadline_ms = Some(number("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", 0)?);
        }
        database.statement_cache = flag("HOOKLEDGER_DB_STATEMENT_CACHE", true)?;
        database.transaction_limits = flag("HOOKLEDGER_DB_TRANSACTION_LIMITS", true)?;
        let mut worker = WorkerSettings::default();
        let bounded = |var: &'static str, default: u64, max: u64| -> Result<u64, ConfigError> {
            let value = number(var, default)?;
            if value > max {
                return Err(ConfigError::Number {
                    var,
                    expected: "within its documented bound",
                    value: value.to_string(),
                });
            }
            Ok(value)
        };
        const DAY_SECS: u64 = 86_400;
        worker.lease_secs = bounded("HOOKLEDGER_LEASE_SECS", worker.lease_secs, DAY_SECS)?;
        worker.batch = bounded("HOOKLEDGER_WORKER_BATCH", worker.batch as u64, 1_000)? as i64;
        worker.margin_ms = bounded("HOOKLEDGER_WORKER_MARGIN_MS", worker.margin_ms, 900_000)?;
        worker.handler_timeout_ms = bounded(
            "HOOKLEDGER_HANDLER_TIMEOUT_MS",
            worker.handler_timeout_ms,
            900_000,
        )?;
        worker.outbox_concurrency = bounded(
            "HOOKLEDGER_OUTBOX_CONCURRENCY",
            u64::from(worker.outbox_concurrency),
            1_000,
        )? as u32;
        worker.backoff.base_secs = bounded(
            "HOOKLEDGER_BACKOFF_BASE_SECS",
            worker.backoff.base_secs,
            DAY_SECS,
        )?;
        worker.backoff.cap_secs = bounded(
            "HOOKLEDGER_BACKOFF_CAP_SECS",
            worker.backoff.cap_secs,
            30 * DAY_SECS,
        )?;
        sources_reload.min_interval = std::time::Duration::from_secs(bounded(
            "HOOKLEDGER_SOURCES_REFRESH_SECS",
            sources_reload.min_interval.as_secs(),
            DAY_SECS,
        )?);
        let mut sweep = SweepSettings::default();
        sweep.batch_size = bounded(
            "HOOKLEDGER_SWEEP_BATCH_SIZE",
            sweep.batch_size as u64,
            100_000,
        )? as i64;
        sweep.max_batches = bounded(
            "HOOKLEDGER_SWEEP_MAX_BATCHES",
            u64::from(sweep.max_batches),
            100_000,
        )? as u32;
        sweep.pause_ms = bounded("HOOKLEDGER_SWEEP_PAUSE_MS", sweep.pause_ms, 60_000)?;
        sweep.duty_percent = bounded("HOOKLEDGER_SWEEP_DUTY_PERCENT", sweep.duty_percent, 100)?;
        sweep.margin_ms = bounded("HOOKLEDGER_SWEEP_MARGIN_MS", sweep.margin_ms, 900_000)?;
        let mut audit = AuditSettings::default();
        audit.stuck_after_secs = bounded(
            "HOOKLEDGER_AUDIT_STUCK_AFTER_SECS",
            audit.stuck_after_secs,
            DAY_SECS,
        )?;
        audit.idle_in_transaction_after_secs = bounded(
            "HOOKLEDGER_AUDIT_IDLE_IN_TRANSACTION_SECS",
            audit.idle_in_transaction_after_secs,
            DAY_SECS,
        )?;
        check_compatible(&database, &worker)?;
        let sources = Sources::from_json(&json)?;
        check_dispatch_fits_lease(&sources, &worker)?;
        Ok(Self {
            sweep,
            audit,
            database,
            sources,
            sources_reload,
            worker,
            worker_function: lookup("HOOKLEDGER_WORKER_FUNCTION").filter(|v| !v.is_empty()),
        })
    }
}

/// The variables that override or supply the database secret's `host`, `port` and `dbname`.
const DB_ENDPOINT_VARS: [&str; 3] = [
    "HOOKLEDGER_DB_HOST",
    "HOOKLEDGER_DB_PORT",
    "HOOKLEDGER_DB_NAME",
];

/// `HOOKLEDGER_DB_HOST`, `HOOKLEDGER_DB_PORT` and `HOOKLEDGER_DB_NAME`, validated (an empty
/// value is unset, as for every variable): a host or name must not be blank, nor hold
/// whitespace, a comma (libpq's host list separator) or a quote; a port is 1 to 65535.
///
/// # Errors
/// [`ConfigError::Number`] naming the variable and what was expected.
pub fn db_endpoint(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<crate::secrets::DbEndpoint, ConfigError> {
    let name = |var: &'static str| -> Result<Option<String>, ConfigError> {
        match lookup(var).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(value)
                if value.trim().is_empty()
                    || value
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || ",'\\\"".contains(c)) =>
            {
                Err(ConfigError::Number {
                    var,
                    expected: "a non-blank name without whitespace, commas or quotes",
                    value,
                })
            }
            Some(value) => Ok(Some(value)),
        }
    };
    let port = match lookup("HOOKLEDGER_DB_PORT").filter(|v| !v.is_empty()) {
        None => None,
        Some(value) => match value.trim().parse::<u16>() {
            Ok(port) if port > 0 => Some(port),
            _ => {
                return Err(ConfigError::Number {
                    var: "HOOKLEDGER_DB_PORT",
                    expected: "a port number from 1 to 65535",
                    value,
                })
            }
        },
    };
    Ok(crate::secrets::DbEndpoint {
        host: name("HOOKLEDGER_DB_HOST")?,
        port,
        dbname: name("HOOKLEDGER_DB_NAME")?,
    })
}

/// serde_json's message with every double-quoted value replaced by `"[redacted]"`: keys and enum
/// variants are quoted with backticks and stay; string values (a secret in the wrong place) go.
fn redacted_json_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let mut out = String::with_capacity(text.len());
    let mut parts = text.split('"');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    let mut inside = true;
    for part in parts {
        if inside {
            out.push_str("\"[redacted]\"");
        } else {
            out.push_str(part);
        }
        inside = !inside;
    }
    out
}

/// Every outbox target's longest dispatch (its timeout, plus the worker's one second of grace)
/// must end before the lease on its message does (`HOOKLEDGER_LEASE_SECS`): otherwise another
/// worker could lease the message again while the first is still sending it, and the target
/// would get it twice (with the same idempotency key, but needlessly).
///
/// # Errors
/// [`ConfigError::Incompatible`] naming the lease and the source's target.
pub fn check_dispatch_fits_lease(
    sources: &Sources,
    worker: &WorkerSettings,
) -> Result<(), ConfigError> {
    let lease = std::time::Duration::from_secs(worker.lease_secs);
    for source in sources.iter() {
        for target in &source.targets {
            let longest = target.timeout() + std::time::Duration::from_secs(1);
            if longest >= lease {
                return Err(ConfigError::Incompatible {
                    first: "HOOKLEDGER_LEASE_SECS",
                    second: "a target's timeout_ms",
                    rule: format!(
                        "the lease ({} s) must be longer than source {:?}'s target {:?}: its \
                         timeout ({} ms) plus 1 s",
                        worker.lease_secs,
                        source.name,
                        target.name,
                        target.timeout().as_millis()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Refuses settings that cannot work together, naming both.
///
/// - Every event of a batch must be able to run its full handler timeout before the batch's
///   lease expires (`HOOKLEDGER_WORKER_BATCH` x `HOOKLEDGER_HANDLER_TIMEOUT_MS` <
///   `HOOKLEDGER_LEASE_SECS`), or a later event's lease lapses before it starts and another
///   worker takes it over.
/// - `HOOKLEDGER_LOCK_TIMEOUT_MS` must be shorter than `HOOKLEDGER_STATEMENT_TIMEOUT_MS`: a
///   duplicate waiting on an in-flight claim must get its 409 from the lock timeout before the
///   statement timeout turns it into a 503.
/// - The receiver's transactions are bounded by `HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS`, and
///   it must be at least `HOOKLEDGER_STATEMENT_TIMEOUT_MS`, or a pipelined transaction waiting
///   on its own statement's answer could be cut. The worker's transactions take
///   `HOOKLEDGER_HANDLER_TIMEOUT_MS` as their idle limit instead (see `shared::work`), so a
///   handler's transaction is never killed by a session limit shorter than its own deadline.
///
/// # Errors
/// [`ConfigError::Incompatible`] naming the two settings.
pub fn check_compatible(
    database: &DatabaseSettings,
    worker: &WorkerSettings,
) -> Result<(), ConfigError> {
    if (worker.batch as u64) * worker.handler_timeout_ms >= worker.lease_secs * 1000 {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_LEASE_SECS",
            second: "HOOKLEDGER_HANDLER_TIMEOUT_MS",
            rule: format!(
                "the lease ({} s) must be longer than HOOKLEDGER_WORKER_BATCH ({}) x the handler \
                 timeout ({} ms)",
                worker.lease_secs, worker.batch, worker.handler_timeout_ms
            ),
        });
    }
    if database.lock_timeout_ms >= database.statement_timeout_ms {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_LOCK_TIMEOUT_MS",
            second: "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            rule: format!(
                "the lock timeout ({} ms) must be shorter than the statement timeout ({} ms)",
                database.lock_timeout_ms, database.statement_timeout_ms
            ),
        });
    }
    let deadline_ms = database.client_deadline().as_millis();
    if deadline_ms <= u128::from(database.lock_timeout_ms) {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_DB_CLIENT_DEADLINE_MS",
            second: "HOOKLEDGER_LOCK_TIMEOUT_MS",
            rule: format!(
                "the client deadline ({deadline_ms} ms) must be longer than the lock timeout \
                 ({} ms), or an in-flight duplicate would never get its 409",
                database.lock_timeout_ms
            ),
        });
    }
    if database.idle_in_transaction_timeout_ms < database.statement_timeout_ms {
        return Err(ConfigError::Incompatible {
            first: "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            second: "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            rule: format!(
                "the idle-in-transaction timeout ({} ms) must be at least the statement timeout \
                 ({} ms)",
                database.idle_in_transaction_timeout_ms, database.statement_timeout_ms
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"[
        {"name": "stripe", "scheme": "stripe", "secrets": ["whsec_a", "whsec_b"]},
        {"name": "gh", "scheme": "github", "secrets": ["s"], "mode": "inline",
         "tolerance_secs": 60, "max_body_bytes": 100, "store_payload": false}
    ]"#;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn error_of(json: &str) -> String {
        match Sources::from_json(json) {
            Ok(_) => panic!("expected an error for {json}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn valid_sources_parse_with_defaults() {
        let sources = Sources::from_json(GOOD).unwrap();
        let stripe = sources.get("stripe").unwrap();
        assert_eq!(stripe.verifier.key_count(), 2);
        assert_eq!(stripe.mode, Mode::Inline);
        assert_eq!(stripe.verifier.tolerance_secs(), DEFAULT_TOLERANCE_SECS);
        assert_eq!(stripe.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(stripe.store_payload);
        let gh = sources.get("gh").unwrap();
        assert_eq!(gh.verifier.tolerance_secs(), 60);
        assert_eq!(gh.max_body_bytes, 100);
        assert!(!gh.store_payload);
        assert!(sources.get("nope").is_none());
    }

    #[test]
    fn an_api_base_url_is_https_or_loopback_http_only() {
        for allowed in [
            "https://api.stripe.com",
            "https://sandbox-api.paddle.com/",
            "http://127.0.0.1:9/",
            "http://localhost:8080",
            "http://[::1]:1",
        ] {
            assert!(url_may_carry_credentials(allowed), "{allowed}");
        }
        for refused in [
            "http://api.stripe.com",
            "http://10.0.0.5",
            "ftp://api.stripe.com",
            "api.stripe.com",
            "https://",
        ] {
            assert!(!url_may_carry_credentials(refused), "{refused}");
        }
        let json = r#"[{"name": "s", "scheme": "stripe", "secrets": ["whsec_x"],
                         "api_key": "rk_1", "api_base_url": "http://stripe.example.com"}]"#;
        assert!(error_of(json).contains("https://"), "{}", error_of(json));
    }

    #[test]
    fn a_source_without_a_secret_is_a_start_up_error() {
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": []}]"#);
        assert!(e.contains("no signing secrets"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "stripe"}]"#);
        assert!(e.contains("secrets"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": [""]}]"#);
        assert!(e.contains("secret #0"), "{e}");
        let e = error_of(r#"[{"name": "g", "scheme": "generic-hmac", "secrets": ["x"]}]"#);
        assert!(e.contains("generic"), "{e}");
    }

    #[test]
    fn a_retention_shorter_than_the_horizon_is_refused_naming_source_setting_and_minimum() {
        let e = error_of(
            r#"[{"name": "pay", "scheme": "stripe", "secrets": ["x"], "retention_days": 2}]"#,
        );
        assert!(e.contains("\"pay\""), "{e}");
        assert!(e.contains("retention_days is 2"), "{e}");
        assert!(e.contains("minimum of 3"), "{e}");
        let e = error_of(
            r#"[{"name": "g", "scheme": "generic-hmac", "secrets": ["x"],
                 "generic": {"signature_header": "X-Sig", "event_id_pointer": "/id"}}]"#,
        );
        assert!(e.contains("retry_horizon_hours"), "{e}");
        let sources = Sources::from_json(
            r#"[{"name": "s", "scheme": "shopify", "secrets": ["x"], "retention_days": 7}]"#,
        )
        .unwrap();
        assert_eq!(sources.retention("s"), Retention::days(7, 90));
        // A source no longer configured keeps the defaults: its rows still expire.
        assert_eq!(sources.retention("gone"), Retention::default());
    }

    #[test]
    fn unknown_scheme_mode_or_field_is_a_start_up_error() {
        let e = error_of(r#"[{"name": "s", "scheme": "rot13", "secrets": ["x"]}]"#);
        assert!(e.contains("rot13"), "{e}");
        let e =
            error_of(r#"[{"name": "s", "scheme": "github", "secrets": ["x"], "mode": "yolo"}]"#);
        assert!(e.contains("yolo"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "github", "secret": "x"}]"#);
        assert!(e.contains("secret"), "{e}");
    }

    #[test]
    fn a_secret_in_the_wrong_place_is_not_printed_in_the_start_up_error() {
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": "whsec_topsecret"}]"#);
        assert!(e.contains("invalid type"), "{e}");
        assert!(!e.contains("whsec_topsecret"), "{e}");
        let e = error_of(r#"[{"name": "s", "scheme": "stripe", "secrets": [1, "whsec_x"]}]"#);
        assert!(!e.contains("whsec_x"), "{e}");
    }

    #[test]
    fn malformed_json_bad_names_and_duplicates_are_start_up_errors() {
        assert!(error_of("[{").contains("sources JSON is invalid"));
        assert!(error_of("[]").contains("no sources"));
        assert!(
            error_of(r#"[{"name": "Bad/Name", "scheme": "github", "secrets": ["x"]}]"#)
                .contains("name must be")
        );
        let twice = r#"[{"name": "a", "scheme": "github", "secrets": ["x"]},
                        {"name": "a", "scheme": "github", "secrets": ["y"]}]"#;
        assert!(error_of(twice).contains("configured twice"));
    }

    #[test]
    fn settings_that_cannot_work_together_are_refused_naming_both() {
        let with = |vars: &[(&str, &str)]| {
            let mut all = vec![
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
            ];
            all.extend_from_slice(vars);
            Settings::from_lookup(env(&all))
        };
        assert!(with(&[]).is_ok(), "the defaults work together");
        let e = with(&[("HOOKLEDGER_HANDLER_TIMEOUT_MS", "130000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_LEASE_SECS") && e.contains("HOOKLEDGER_HANDLER_TIMEOUT_MS"),
            "{e}"
        );
        let e = with(&[("HOOKLEDGER_LOCK_TIMEOUT_MS", "5000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_LOCK_TIMEOUT_MS")
                && e.contains("HOOKLEDGER_STATEMENT_TIMEOUT_MS"),
            "{e}"
        );
        let e = with(&[("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS", "4000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS")
                && e.contains("HOOKLEDGER_STATEMENT_TIMEOUT_MS"),
            "{e}"
        );
        assert!(matches!(
            with(&[("HOOKLEDGER_DB_STATEMENT_CACHE", "maybe")]),
            Err(ConfigError::Number { .. })
        ));
        assert!(
            !with(&[("HOOKLEDGER_DB_STATEMENT_CACHE", "false")])
                .unwrap()
                .database
                .statement_cache
        );
        let e = with(&[("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", "2000")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HOOKLEDGER_DB_CLIENT_DEADLINE_MS")
                && e.contains("HOOKLEDGER_LOCK_TIMEOUT_MS"),
            "{e}"
        );
    }

    /// Found by `make fuzz` (target `settings_env`, dev/fuzz/regressions/settings_env/): a timeout
    /// past what PostgreSQL takes overflowed the client deadline's sum (a panic in a debug
    /// build, a deadline of 999 ms in a release build); PostgreSQL refuses such a
    /// `statement_timeout` anyway (`SET` fails for every delivery).
    #[test]
    fn a_database_timeout_past_postgresqls_limit_is_refused_at_start_up() {
        for var in [
            "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            "HOOKLEDGER_LOCK_TIMEOUT_MS",
            "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
        ] {
            for value in ["18446744073709551615", "2147483648"] {
                let vars = [
                    ("DATABASE_URL", "postgres://localhost/x"),
                    ("HOOKLEDGER_SOURCES", GOOD),
                    (var, value),
                ];
                match Settings::from_lookup(env(&vars)) {
                    Err(ConfigError::Number { var: named, .. }) => assert_eq!(named, var),
                    other => panic!("{var}={value}: {other:?}"),
                }
            }
        }
        // PostgreSQL's own maximum (INT_MAX milliseconds) is accepted.
        let vars = [
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_STATEMENT_TIMEOUT_MS", "2147483647"),
            ("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS", "2147483647"),
        ];
        let database = Settings::from_lookup(env(&vars)).unwrap().database;
        assert_eq!(database.client_deadline().as_millis(), 2_147_484_647);
    }

    #[test]
    fn the_client_deadline_defaults_to_the_statement_timeout_plus_a_second() {
        let settings = |vars: &[(&str, &str)]| {
            let mut all = vec![
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
            ];
            all.extend_from_slice(vars);
            Settings::from_lookup(env(&all)).unwrap().database
        };
        let ms = |d: std::time::Duration| d.as_millis();
        assert_eq!(ms(settings(&[]).client_deadline()), 6_000);
        assert_eq!(
            ms(settings(&[("HOOKLEDGER_STATEMENT_TIMEOUT_MS", "3000")]).client_deadline()),
            4_000
        );
        assert_eq!(
            ms(settings(&[("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", "2500")]).client_deadline()),
            2_500
        );
    }

    #[test]
    fn a_forward_target_whose_dispatch_can_outlive_the_lease_is_refused() {
        let sources = |timeout_ms: u64| {
            format!(
                r#"[{{"name": "a", "scheme": "github", "secrets": ["x"], "targets": [
                    {{"name": "svc", "type": "forward", "url": "https://svc.example/h",
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                      "timeout_ms": {timeout_ms}}}]}}]"#
            )
        };
        let with = |timeout_ms: u64, lease: &str| {
            let json = sources(timeout_ms);
            Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", json.as_str()),
                ("HOOKLEDGER_LEASE_SECS", lease),
                ("HOOKLEDGER_WORKER_BATCH", "1"),
                ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "1000"),
            ]))
        };
        assert!(with(60_000, "120").is_ok());
        let e = with(60_000, "61").unwrap_err().to_string();
        assert!(
            e.contains("HOOKLEDGER_LEASE_SECS") && e.contains("\"svc\"") && e.contains("60000"),
            "{e}"
        );
        let e = with(60_001, "600").unwrap_err().to_string();
        assert!(e.contains("timeout_ms must be 1 to 60000"), "{e}");
    }

    #[test]
    fn settings_read_the_environment_and_fail_closed() {
        let settings = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_LOCK_TIMEOUT_MS", "250"),
        ]))
        .unwrap();
        assert_eq!(settings.database.lock_timeout_ms, 250);
        assert_eq!(settings.database.pool_size, 4);
        assert!(!format!("{settings:?}").contains("whsec_a"));

        let missing = Settings::from_lookup(env(&[("HOOKLEDGER_SOURCES", GOOD)]));
        assert!(matches!(
            missing,
            Err(ConfigError::Missing(
                "DATABASE_URL (or HOOKLEDGER_DB_SECRET_ARN)"
            ))
        ));
        let none = Settings::from_lookup(env(&[("DATABASE_URL", "postgres://x")]));
        assert!(matches!(
            none,
            Err(ConfigError::Missing(
                "one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN"
            ))
        ));
        let both = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_SOURCES_FILE", "/nonexistent"),
        ]));
        assert!(matches!(both, Err(ConfigError::SourcesAmbiguous)));
        let file = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES_FILE", "/nonexistent/sources.json"),
        ]));
        assert!(matches!(file, Err(ConfigError::SourcesFile { .. })));
        let bad_number = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_DB_POOL_SIZE", "0"),
        ]));
        assert!(matches!(bad_number, Err(ConfigError::Number { .. })));
    }

    #[test]
    fn settings_remember_where_the_sources_came_from() {
        let inline = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
        ]))
        .unwrap();
        assert_eq!(inline.sources_reload, SourcesReload::default());
        assert_eq!(
            inline.sources_reload.min_interval,
            std::time::Duration::from_secs(60)
        );

        let path =
            std::env::temp_dir().join(format!("hookledger-config-{}.json", std::process::id()));
        std::fs::write(&path, GOOD).unwrap();
        let file = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES_FILE", path.to_str().unwrap()),
            ("HOOKLEDGER_SOURCES_REFRESH_SECS", "5"),
        ]));
        let _ = std::fs::remove_file(&path);
        let file = file.unwrap();
        assert_eq!(file.sources_reload.origin, SourcesOrigin::File(path));
        assert_eq!(
            file.sources_reload.min_interval,
            std::time::Duration::from_secs(5)
        );

        for bad in ["0", "86401", "soon"] {
            let error = Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://x"),
                ("HOOKLEDGER_SOURCES", GOOD),
                ("HOOKLEDGER_SOURCES_REFRESH_SECS", bad),
            ]));
            assert!(matches!(error, Err(ConfigError::Number { .. })), "{bad}");
        }
    }

    #[test]
    fn the_database_host_port_and_name_variables_are_validated() {
        let endpoint = |vars: &[(&str, &str)]| db_endpoint(env(vars));
        assert_eq!(
            endpoint(&[]).unwrap(),
            crate::secrets::DbEndpoint::default()
        );
        let full = endpoint(&[
            (
                "HOOKLEDGER_DB_HOST",
                "hookledger.proxy-abc.eu-west-1.rds.amazonaws.com",
            ),
            ("HOOKLEDGER_DB_PORT", "5432"),
            ("HOOKLEDGER_DB_NAME", "hookledger"),
        ])
        .unwrap();
        assert_eq!(
            full.host.as_deref(),
            Some("hookledger.proxy-abc.eu-west-1.rds.amazonaws.com")
        );
        assert_eq!(full.port, Some(5432));
        assert_eq!(full.dbname.as_deref(), Some("hookledger"));
        for (var, bad) in [
            ("HOOKLEDGER_DB_PORT", "0"),
            ("HOOKLEDGER_DB_PORT", "65536"),
            ("HOOKLEDGER_DB_PORT", "54x"),
            ("HOOKLEDGER_DB_HOST", "   "),
            ("HOOKLEDGER_DB_HOST", "a.example,b.example"),
            ("HOOKLEDGER_DB_HOST", "db.example sslmode=disable"),
            ("HOOKLEDGER_DB_NAME", "x' sslmode='disable"),
        ] {
            let error = endpoint(&[(var, bad)]).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Number { var: v, .. } if *v == var),
                "{var}={bad:?}: {error}"
            );
            assert!(error.to_string().contains(var), "{error}");
        }
    }

    #[test]
    fn the_database_host_port_and_name_variables_are_refused_with_database_url() {
        for var in DB_ENDPOINT_VARS {
            let error = Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
                (var, "5432"),
            ]))
            .unwrap_err();
            assert!(
                matches!(error, ConfigError::Incompatible { first: "DATABASE_URL", second, .. } if second == var),
                "{var}: {error}"
            );
        }
        let settings = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_DB_HOST", ""),
        ]))
        .unwrap();
        assert!(
            !settings.database.bundled_rds_ca,
            "DATABASE_URL keeps the system roots only"
        );
    }

    #[test]
    fn the_backoff_schedule_matches_its_documentation() {
        let policy = Backoff::default();
        let documented = [30, 60, 120, 240, 480, 960, 1920, 3600, 3600];
        for (n, full) in documented.iter().enumerate() {
            let attempt = n as u32 + 1;
            for key in ["stripe/evt_1", "stripe/evt_2", "github/abc"] {
                let delay = policy.delay(attempt, key).as_secs();
                assert!(
                    (full / 2..=*full).contains(&delay),
                    "attempt {attempt}: {delay}s outside {}..={full}",
                    full / 2
                );
                assert_eq!(delay, policy.delay(attempt, key).as_secs(), "reproducible");
            }
        }
        // Jitter spreads a burst: many events failing together do not retry together.
        let delays: std::collections::HashSet<u64> = (0..50)
            .map(|i| policy.delay(3, &format!("stripe/evt_{i}")).as_secs())
            .collect();
        assert!(delays.len() > 10, "{delays:?}");
        // Huge attempt numbers stay capped instead of overflowing.
        assert!(policy.delay(1000, "k").as_secs() <= policy.cap_secs);
    }
}
