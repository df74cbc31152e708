//! The sources model: a source as written in the sources JSON ([`SourceSpec`]), validated with
//! its keys prepared ([`SourceConfig`]), and every configured source by name ([`Sources`]).

use std::collections::HashMap;
use std::sync::Arc;

use secrecy::SecretString;
use serde::Deserialize;

use super::error::ConfigError;
use super::github_hook::{self, GithubHook, GithubHookSpec, GITHUB_API_BASE_URL};
use super::provider_api::{default_api_base_url, url_may_carry_credentials, ProviderApi};
use super::targets;
use crate::privacy::redact::Redaction;
use crate::privacy::subject::Subject;
pub use crate::privacy::subject::SubjectSpec;
use crate::retention::{Retention, RetentionSpec, SourceRetention};
use hookledger_verify::{GenericHmac, Scheme, Verifier, DEFAULT_TOLERANCE_SECS};

/// Default body limit, bytes (1 MiB). Stripe and Standard Webhooks payloads are a few KiB;
/// GitHub caps its payloads at 25 MB, so raise it for GitHub sources that send large pushes
/// (API Gateway itself stops at 10 MB, Lambda at 6 MB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Longest source name, characters; names are path segments and part of the ledger key.
pub const MAX_SOURCE_NAME_LEN: usize = 64;

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
    /// A completed event keeps its raw payload and the response it stored this many hours
    /// after its claim; past it the sweeper drops both, keeping the key, status, digests and
    /// times (deduplication and the audit trail work as before). Shorter than
    /// `retention_days`. Unset: as long as the key.
    #[serde(default)]
    pub payload_retention_hours: Option<u32>,
    /// Field redaction at rest: RFC 6901 pointers (`*` for every member or element) whose
    /// values are replaced by `"[redacted]"` in the stored copy of each payload, once the
    /// event completes (see [`Redaction`]). Handlers and targets see the body as received.
    /// None when absent.
    #[serde(default)]
    pub redact: Option<Vec<String>>,
    /// Where a payload names its data subject, and the key its hash is made with (see
    /// [`SubjectSpec`]), for erasure by subject. None when absent.
    #[serde(default)]
    pub subject: Option<SubjectSpec>,
    /// Encrypt the stored payload at rest (AES-256-GCM under a data key the configured master
    /// key wraps: `HOOKLEDGER_KMS_KEY_ID`, or local keys; see `crate::privacy`). `false` when
    /// absent.
    #[serde(default)]
    pub encrypt_payload: Option<bool>,
    /// For `generic-hmac` only: the signature header, algorithm, encoding, prefix, timestamp
    /// header, signed-payload template and where the event id and type are (see
    /// [`GenericHmac`]).
    #[serde(default)]
    pub generic: Option<GenericHmac>,
    /// The URL the provider is configured to call, for a scheme that signs the URL (Twilio,
    /// Square): `https://host/path`, without query or fragment (the request's query is
    /// appended). When absent the receiver rebuilds it from the request (`X-Forwarded-Proto`,
    /// `Host`, path, query), which is right unless a proxy or custom domain rewrites them.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Meta's subscription check: the token the app's webhook settings give Meta, which Meta
    /// sends back in its GET `hub.verify_token` (`meta` sources only). Without it the check is
    /// answered 405 and Meta cannot subscribe.
    #[serde(default)]
    pub verify_token: Option<String>,
    /// Built-in outbox targets: `forward`, `sqs`, `eventbridge` (see
    /// [`TargetSpec`](targets::TargetSpec)). Each matching event gets one message per target,
    /// committed with its claim and dispatched by the worker. None when absent.
    #[serde(default)]
    pub targets: Option<Vec<targets::TargetSpec>>,
    /// SQL handlers: statements run in the event's transaction for the event types they
    /// match (see [`SqlHandlerSpec`](super::sql_handlers::SqlHandlerSpec) and
    /// docs/reference/sources.md, "SQL handlers"). None when absent.
    #[serde(default)]
    pub handlers: Option<Vec<super::sql_handlers::SqlHandlerSpec>>,
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
    /// The fields replaced in the stored copy of a completed event's payload
    /// (`SourceSpec::redact`), if any.
    pub redaction: Option<Redaction>,
    /// Where a payload names its data subject (`SourceSpec::subject`), if configured.
    pub subject: Option<Subject>,
    /// The stored payload is sealed (`SourceSpec::encrypt_payload`).
    pub encrypt_payload: bool,
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
    /// The source's SQL handlers (`"handlers"`), checked, in order (empty: none). They join
    /// the application's registry through `crate::App::handlers`.
    pub sql_handlers: Vec<super::sql_handlers::SqlHandlerConfig>,
    /// The URL the provider calls, when configured (`SourceSpec::public_url`).
    pub public_url: Option<String>,
    /// Meta's subscription-check token (`SourceSpec::verify_token`), never logged.
    pub verify_token: Option<SecretString>,
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
    /// undecodable) or an invalid `generic` block; [`ConfigError::GithubHook`] for a bad
    /// `github_hook`; [`ConfigError::Target`] for a bad outbox target;
    /// [`ConfigError::SqlHandler`] for a bad SQL handler.
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
        let redaction = match &spec.redact {
            None => None,
            Some(_) if !store_payload => {
                return Err(problem(
                    "redact needs store_payload: a source that keeps digests only stores no \
                     field to redact",
                ))
            }
            Some(pointers) => {
                Some(Redaction::new(pointers).map_err(|error| problem(&error.to_string()))?)
            }
        };
        let subject = match spec.subject {
            None => None,
            Some(subject) => {
                Some(Subject::new(subject).map_err(|error| problem(&error.to_string()))?)
            }
        };
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
                .map_err(|error| ConfigError::GithubHook {
                    name: spec.name.clone(),
                    error,
                })?,
            ),
        };
        let secrets: Vec<&str> = spec.secrets.iter().map(String::as_str).collect();
        let verifier = Verifier::new(
            spec.scheme,
            &secrets,
            spec.tolerance_secs.unwrap_or_else(|| {
                hookledger_verify::presets::preset(spec.scheme)
                    .and_then(|preset| preset.default_tolerance_secs)
                    .unwrap_or(DEFAULT_TOLERANCE_SECS)
            }),
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
                payload_retention_hours: spec.payload_retention_hours,
            },
        )
        .map_err(|reason| problem(&reason))?;
        let mut targets: Vec<targets::Target> = Vec::new();
        for target in spec.targets.unwrap_or_default() {
            let target =
                targets::Target::from_spec(target).map_err(|error| ConfigError::Target {
                    name: spec.name.clone(),
                    error,
                })?;
            if targets.iter().any(|t| t.name == target.name) {
                return Err(problem(&format!(
                    "target {:?} is configured twice",
                    target.name
                )));
            }
            targets.push(target);
        }
        if spec.public_url.is_some() && !verifier.signs_url() {
            return Err(problem(
                "public_url applies to a scheme that signs the URL (twilio, square, hubspot, a \
                 generic-hmac template with {url}); this one does not",
            ));
        }
        if let Some(url) = &spec.public_url {
            let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
            if !scheme_ok || url.contains(['?', '#']) || url.chars().any(char::is_whitespace) {
                return Err(problem(
                    "public_url must be an http(s):// URL without query, fragment or spaces",
                ));
            }
        }
        let verify_token = match spec.verify_token {
            None => None,
            Some(_) if spec.scheme != Scheme::Meta => {
                return Err(problem("verify_token applies to meta sources only"))
            }
            Some(token) if token.is_empty() || token.len() > 1024 => {
                return Err(problem("verify_token must be 1 to 1024 characters"))
            }
            Some(token) => Some(SecretString::from(token)),
        };
        let mut sql_handlers = Vec::new();
        for (at, handler) in spec.handlers.unwrap_or_default().into_iter().enumerate() {
            sql_handlers.push(
                super::sql_handlers::SqlHandlerConfig::from_spec(at + 1, handler).map_err(
                    |error| ConfigError::SqlHandler {
                        name: spec.name.clone(),
                        error,
                    },
                )?,
            );
        }
        Ok(Self {
            targets,
            sql_handlers,
            public_url: spec.public_url,
            verify_token,
            scheme: spec.scheme,
            verifier,
            mode,
            max_body_bytes,
            store_payload,
            redaction,
            subject,
            encrypt_payload: spec.encrypt_payload.unwrap_or(false),
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
    /// [`ConfigError::Verifier`] for missing or unusable secrets or generic rules;
    /// [`ConfigError::GithubHook`] and [`ConfigError::Target`] for a bad `github_hook` or
    /// outbox target.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{error_of, GOOD};

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
    fn public_url_and_verify_token_belong_to_the_schemes_that_use_them() {
        let e = error_of(
            r#"[{"name": "s", "scheme": "stripe", "secrets": ["whsec_x"],
                 "public_url": "https://hooks.example.com/webhooks/s"}]"#,
        );
        assert!(
            e.contains("public_url applies to a scheme that signs the URL"),
            "{e}"
        );
        let e = error_of(
            r#"[{"name": "t", "scheme": "twilio", "secrets": ["x"],
                 "public_url": "https://hooks.example.com/t?x=1"}]"#,
        );
        assert!(e.contains("without query"), "{e}");
        let e = error_of(
            r#"[{"name": "t", "scheme": "twilio", "secrets": ["x"], "verify_token": "v"}]"#,
        );
        assert!(
            e.contains("verify_token applies to meta sources only"),
            "{e}"
        );
        let ok = Sources::from_json(
            r#"[{"name": "t", "scheme": "twilio", "secrets": ["x"],
                 "public_url": "https://hooks.example.com/t"},
                {"name": "m", "scheme": "meta", "secrets": ["x"], "verify_token": "v"}]"#,
        )
        .unwrap();
        assert!(ok.get("t").unwrap().verifier.signs_url());
        assert!(ok.get("m").unwrap().verify_token.is_some());
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
}
