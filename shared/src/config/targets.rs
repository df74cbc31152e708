//! The outbox's built-in targets as configured: a source's `"targets"` ([`TargetSpec`], as
//! written) and what they become at start-up ([`Target`]: names, URLs, secrets and timeouts
//! checked, or refused with a [`TargetError`]), with the event types each receives
//! ([`EventTypes`]). Dispatching messages to them is [`crate::outbox`]'s.

use std::time::Duration;

use serde::Deserialize;

use hookledger_verify::{KeyError, Scheme, SigningKey};

use crate::expression::{ExpressionError, Filter, Transform};

/// Longest one `SendMessage` / `PutEvents` attempt may take (the SDK retries a timed-out
/// attempt within [`AWS_OPERATION_TIMEOUT`]; its default has no limit).
pub const AWS_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest one `SendMessage` / `PutEvents` call may take, the SDK's own retries included; then
/// the message is retryable.
pub const AWS_OPERATION_TIMEOUT: Duration = Duration::from_secs(25);

/// Which events a built-in target receives: patterns on the event type, each exact
/// (`invoice.paid`) or a prefix ending in `*` (`invoice.*`; `*` alone is every event). An empty
/// list sends nothing automatically: the target receives only what handlers add with
/// `tx.outbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypes(Vec<String>);

impl EventTypes {
    /// Every event (`["*"]`), the default.
    pub fn all() -> Self {
        Self(vec!["*".to_owned()])
    }

    /// The patterns, in configuration order.
    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// The patterns as written, checked: at least one, none empty, `*` only at the end.
    ///
    /// # Errors
    /// The first pattern that is empty or has a `*` before its end (an empty list: `None`
    /// inside the error, "no pattern").
    pub fn parse(patterns: Vec<String>) -> Result<Self, Option<String>> {
        if patterns.is_empty() {
            return Err(None);
        }
        if let Some(bad) = patterns
            .iter()
            .find(|p| p.is_empty() || p.trim_end_matches('*').contains('*'))
        {
            return Err(Some(bad.clone()));
        }
        Ok(Self(patterns))
    }

    /// Whether `event_type` matches one of the patterns.
    pub fn matches(&self, event_type: &str) -> bool {
        self.0
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => event_type.starts_with(prefix),
                None => pattern == event_type,
            })
    }
}

/// Default time a `forward` request may take, milliseconds.
pub const DEFAULT_FORWARD_TIMEOUT_MS: u64 = 10_000;

/// Longest a `forward` request may be allowed to take, milliseconds: a webhook receiver should
/// answer in seconds, and the dispatch must end well inside the worker's lease
/// (`crate::config::check_dispatch_fits_lease`).
pub const MAX_FORWARD_TIMEOUT_MS: u64 = 60_000;

/// A built-in target as written in a source's `"targets"` list:
///
/// ```json
/// [{"name": "billing", "type": "forward", "url": "https://billing.example.com/hooks",
///   "secret": "whsec_...", "event_types": ["invoice.*"]},
///  {"name": "orders", "type": "sqs",
///   "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"},
///  {"name": "bus", "type": "eventbridge", "event_bus": "default",
///   "filter": "body.livemode", "transform": "{id: id, amount: body.data.object.amount}"}]
/// ```
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum TargetSpec {
    /// HTTP POST, re-signed as a Standard Webhooks delivery.
    Forward {
        /// Target name: 1 to 64 characters of `[a-z0-9_-]`, unique within the source.
        name: String,
        /// `https://` anywhere; plain `http://` only to the loopback host.
        url: String,
        /// The Standard Webhooks secret the receiving service verifies with, `whsec_` and
        /// base64 (at least 24 bytes decoded, as the Standard Webhooks libraries generate).
        secret: String,
        /// Time a request may take, milliseconds (at most [`MAX_FORWARD_TIMEOUT_MS`]);
        /// [`DEFAULT_FORWARD_TIMEOUT_MS`] when absent.
        #[serde(default)]
        timeout_ms: Option<u64>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
        /// A JMESPath condition over the event's envelope (`crate::expression`): the target
        /// receives an event automatically only when it holds too; none when absent.
        #[serde(default)]
        filter: Option<String>,
        /// A JMESPath expression over the event's envelope whose JSON value is the message's
        /// body instead of the provider's raw body, applied at dispatch; the raw body when
        /// absent.
        #[serde(default)]
        transform: Option<String>,
    },
    /// An SQS queue (standard or FIFO).
    Sqs {
        /// Target name, as for `forward`.
        name: String,
        /// The queue's URL; a name ending in `.fifo` is a FIFO queue.
        queue_url: String,
        /// FIFO queues: the message group; the source's name when absent (one ordered stream
        /// per source).
        #[serde(default)]
        message_group_id: Option<String>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
        /// A JMESPath condition over the event's envelope (`crate::expression`): the target
        /// receives an event automatically only when it holds too; none when absent.
        #[serde(default)]
        filter: Option<String>,
        /// A JMESPath expression over the event's envelope whose JSON value is the message's
        /// body instead of the provider's raw body, applied at dispatch; the raw body when
        /// absent.
        #[serde(default)]
        transform: Option<String>,
    },
    /// An EventBridge event bus.
    Eventbridge {
        /// Target name, as for `forward`.
        name: String,
        /// The bus's name or ARN; `default` when absent.
        #[serde(default)]
        event_bus: Option<String>,
        /// The events' `Source`; `hookledger.{source}` when absent.
        #[serde(default)]
        detail_source: Option<String>,
        /// Which events go to it automatically; every event when absent.
        #[serde(default)]
        event_types: Option<Vec<String>>,
        /// A JMESPath condition over the event's envelope (`crate::expression`): the target
        /// receives an event automatically only when it holds too; none when absent.
        #[serde(default)]
        filter: Option<String>,
        /// A JMESPath expression over the event's envelope whose JSON value is the message's
        /// body instead of the provider's raw body, applied at dispatch; the raw body when
        /// absent.
        #[serde(default)]
        transform: Option<String>,
    },
}

/// A validated built-in target.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its name, unique within the source.
    pub name: String,
    /// Which events receive a message automatically (with [`Target::filter`]).
    pub event_types: EventTypes,
    /// A condition over the event's envelope that must hold too (`None`: every event whose
    /// type matches).
    pub filter: Option<Filter>,
    /// The message body's reshaping, applied at dispatch to the messages queued for the
    /// target automatically (never to a handler's `tx.outbox`); `None`: the raw body.
    pub transform: Option<Transform>,
    /// Where and how messages go.
    pub kind: TargetKind,
}

/// Where a target's messages go.
// A handful per source, built once from the configuration: the prepared HMAC key's size does
// not matter, and boxing it would only add an indirection to every signature.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum TargetKind {
    /// HTTP POST to `url`, re-signed with `key` as a Standard Webhooks delivery.
    Forward {
        /// The endpoint.
        url: url::Url,
        /// The Standard Webhooks key (never logged).
        key: SigningKey,
        /// Time a request may take.
        timeout: Duration,
    },
    /// `SendMessage` to an SQS queue.
    Sqs {
        /// The queue's URL.
        queue_url: String,
        /// Whether the queue is FIFO (its name ends in `.fifo`).
        fifo: bool,
        /// FIFO queues: the message group (`None`: the source's name).
        message_group_id: Option<String>,
    },
    /// `PutEvents` to an EventBridge bus.
    EventBridge {
        /// The bus's name or ARN.
        event_bus: String,
        /// The events' `Source` (`None`: `hookledger.{source}`).
        detail_source: Option<String>,
    },
}

impl Target {
    /// The longest one dispatch to this target may take: a `forward` target's `timeout_ms`,
    /// [`AWS_OPERATION_TIMEOUT`] for the others (the SDK's own retries included). The worker starts no dispatch with less
    /// invocation time left than this plus its margin.
    pub fn timeout(&self) -> Duration {
        match &self.kind {
            TargetKind::Forward { timeout, .. } => *timeout,
            TargetKind::Sqs { .. } | TargetKind::EventBridge { .. } => AWS_OPERATION_TIMEOUT,
        }
    }
}

/// Longest target name, characters.
pub const MAX_TARGET_NAME_LEN: usize = 64;

/// Smallest Standard Webhooks secret a `forward` target accepts, bytes decoded.
pub const MIN_FORWARD_SECRET_BYTES: usize = 24;

/// Why a built-in target's configuration is refused, naming the target and the field (never
/// the secret); a URL that does not parse, or a secret the Standard Webhooks key refuses, keeps
/// its cause.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The name is not 1 to [`MAX_TARGET_NAME_LEN`] characters of `[a-z0-9_-]`.
    #[error(
        "target name {name:?} must be 1 to {max} characters of [a-z0-9_-]",
        max = MAX_TARGET_NAME_LEN
    )]
    Name {
        /// The name as configured.
        name: String,
    },
    /// A `forward` target's `url` is neither `https://` nor plain `http://` to the loopback host.
    #[error("target {name:?}: url must be https:// (plain http:// only to the loopback host)")]
    InsecureUrl {
        /// The target's name.
        name: String,
    },
    /// A `forward` target's `url` does not parse.
    #[error("target {name:?}: bad url")]
    Url {
        /// The target's name.
        name: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// A `forward` target's `secret` is not `whsec_` and base64 of at least
    /// [`MIN_FORWARD_SECRET_BYTES`] bytes.
    #[error(
        "target {name:?}: secret must be a Standard Webhooks secret (whsec_ and base64) of at \
         least {min} bytes",
        min = MIN_FORWARD_SECRET_BYTES
    )]
    ShortSecret {
        /// The target's name.
        name: String,
    },
    /// A `forward` target's `secret` cannot key a Standard Webhooks signature.
    #[error("target {name:?}: secret: {source}")]
    Secret {
        /// The target's name.
        name: String,
        /// Why the key refuses it.
        #[source]
        source: KeyError,
    },
    /// A `forward` target's `timeout_ms` is 0 or over [`MAX_FORWARD_TIMEOUT_MS`].
    #[error("target {name:?}: timeout_ms must be 1 to {max}", max = MAX_FORWARD_TIMEOUT_MS)]
    Timeout {
        /// The target's name.
        name: String,
    },
    /// An `sqs` target's `queue_url` does not parse.
    #[error("target {name:?}: bad queue_url")]
    QueueUrl {
        /// The target's name.
        name: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// An `sqs` target's `queue_url` is neither `https://` nor plain `http://` to the loopback
    /// host.
    #[error(
        "target {name:?}: queue_url must be an https:// URL (plain http:// only to the loopback \
         host)"
    )]
    InsecureQueueUrl {
        /// The target's name.
        name: String,
    },
    /// An `sqs` target's `message_group_id` is empty.
    #[error("target {name:?}: message_group_id is empty")]
    EmptyMessageGroup {
        /// The target's name.
        name: String,
    },
    /// An `eventbridge` target's `detail_source` is empty or starts with `aws.` (reserved).
    #[error("target {name:?}: detail_source must be non-empty and not start with aws.")]
    DetailSource {
        /// The target's name.
        name: String,
    },
    /// The `filter` is not a valid JMESPath expression (or too long, or nests too deep). The
    /// message carries the expression's problem and column (an expression holds no secret),
    /// since the start-up line prints a source's error without its causes.
    #[error("target {name:?}: filter: {source}")]
    Filter {
        /// The target's name.
        name: String,
        /// What is wrong with the expression and where.
        #[source]
        source: ExpressionError,
    },
    /// The `transform` is not a valid JMESPath expression (or too long, or nests too deep), its
    /// problem and column in the message as for [`TargetError::Filter`].
    #[error("target {name:?}: transform: {source}")]
    Transform {
        /// The target's name.
        name: String,
        /// What is wrong with the expression and where.
        #[source]
        source: ExpressionError,
    },
    /// An `event_types` pattern is empty or has a `*` before its end.
    #[error(
        "target {name:?}: event type pattern {pattern:?} must be an exact type or a prefix \
         ending in *"
    )]
    Pattern {
        /// The target's name.
        name: String,
        /// The pattern as configured.
        pattern: String,
    },
}

impl Target {
    /// Validates a [`TargetSpec`].
    ///
    /// # Errors
    /// A [`TargetError`] (never the secret): a bad name, URL, secret, timeout, queue URL,
    /// message group, detail source, pattern, filter or transform.
    pub fn from_spec(spec: TargetSpec) -> Result<Self, TargetError> {
        let (name, event_types, filter, transform, kind) = match spec {
            TargetSpec::Forward {
                name,
                url,
                secret,
                timeout_ms,
                event_types,
                filter,
                transform,
            } => {
                if !super::provider_api::url_may_carry_credentials(&url) {
                    return Err(TargetError::InsecureUrl { name });
                }
                let parsed = match url::Url::parse(&url) {
                    Ok(parsed) => parsed,
                    Err(source) => return Err(TargetError::Url { name, source }),
                };
                let decoded_len = secret_len(&secret);
                if decoded_len < MIN_FORWARD_SECRET_BYTES {
                    return Err(TargetError::ShortSecret { name });
                }
                let key = match SigningKey::new(Scheme::StandardWebhooks, &secret) {
                    Ok(key) => key,
                    Err(source) => return Err(TargetError::Secret { name, source }),
                };
                let timeout_ms = timeout_ms.unwrap_or(DEFAULT_FORWARD_TIMEOUT_MS);
                if timeout_ms == 0 || timeout_ms > MAX_FORWARD_TIMEOUT_MS {
                    return Err(TargetError::Timeout { name });
                }
                (
                    name,
                    event_types,
                    filter,
                    transform,
                    TargetKind::Forward {
                        url: parsed,
                        key,
                        timeout: Duration::from_millis(timeout_ms),
                    },
                )
            }
            TargetSpec::Sqs {
                name,
                queue_url,
                message_group_id,
                event_types,
                filter,
                transform,
            } => {
                let parsed = match url::Url::parse(&queue_url) {
                    Ok(parsed) => parsed,
                    Err(source) => return Err(TargetError::QueueUrl { name, source }),
                };
                // SigV4 signs the request but does not hide the payload: plain http:// only to
                // the loopback host (a local emulator).
                if !super::provider_api::url_may_carry_credentials(&queue_url) {
                    return Err(TargetError::InsecureQueueUrl { name });
                }
                let fifo = parsed.path().trim_end_matches('/').ends_with(".fifo");
                if message_group_id.as_deref().is_some_and(str::is_empty) {
                    return Err(TargetError::EmptyMessageGroup { name });
                }
                (
                    name,
                    event_types,
                    filter,
                    transform,
                    TargetKind::Sqs {
                        queue_url,
                        fifo,
                        message_group_id,
                    },
                )
            }
            TargetSpec::Eventbridge {
                name,
                event_bus,
                detail_source,
                event_types,
                filter,
                transform,
            } => {
                if detail_source
                    .as_deref()
                    .is_some_and(|s| s.is_empty() || s.starts_with("aws."))
                {
                    return Err(TargetError::DetailSource { name });
                }
                (
                    name,
                    event_types,
                    filter,
                    transform,
                    TargetKind::EventBridge {
                        event_bus: event_bus.unwrap_or_else(|| "default".to_owned()),
                        detail_source,
                    },
                )
            }
        };
        if name.is_empty()
            || name.len() > MAX_TARGET_NAME_LEN
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(TargetError::Name { name });
        }
        let event_types = match event_types {
            None => EventTypes::all(),
            Some(patterns) => {
                if let Some(bad) = patterns
                    .iter()
                    .find(|p| p.is_empty() || p.trim_end_matches('*').contains('*'))
                {
                    return Err(TargetError::Pattern {
                        pattern: bad.clone(),
                        name,
                    });
                }
                EventTypes(patterns)
            }
        };
        let filter = match filter.as_deref().map(Filter::compile).transpose() {
            Ok(filter) => filter,
            Err(source) => return Err(TargetError::Filter { name, source }),
        };
        let transform = match transform.as_deref().map(Transform::compile).transpose() {
            Ok(transform) => transform,
            Err(source) => return Err(TargetError::Transform { name, source }),
        };
        Ok(Target {
            name,
            event_types,
            filter,
            transform,
            kind,
        })
    }
}

/// Decoded length of a Standard Webhooks secret (0 when it does not decode).
fn secret_len(secret: &str) -> usize {
    use base64::Engine;
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded))
        .map(|k| k.len())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(json: &str) -> Result<Target, String> {
        let spec: TargetSpec = serde_json::from_str(json).map_err(|e| e.to_string())?;
        Target::from_spec(spec).map_err(|e| e.to_string())
    }

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn patterns_are_exact_or_prefixes() {
        let types = EventTypes(vec!["invoice.*".into(), "charge.refunded".into()]);
        assert!(types.matches("invoice.paid"));
        assert!(types.matches("charge.refunded"));
        assert!(!types.matches("charge.refunded.x"));
        assert!(!types.matches("customer.created"));
        assert!(EventTypes::all().matches(""));
        assert!(!EventTypes(vec![]).matches("invoice.paid"));
    }

    #[test]
    fn targets_are_validated() {
        let forward = target(&format!(
            r#"{{"type":"forward","name":"billing","url":"https://b.example/h","secret":"{SECRET}"}}"#
        ))
        .unwrap();
        assert!(matches!(forward.kind, TargetKind::Forward { .. }));
        assert!(forward.event_types.matches("anything"));
        let fifo = target(
            r#"{"type":"sqs","name":"q","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/orders.fifo"}"#,
        )
        .unwrap();
        assert!(matches!(fifo.kind, TargetKind::Sqs { fifo: true, .. }));
        let bus = target(r#"{"type":"eventbridge","name":"bus"}"#).unwrap();
        assert!(
            matches!(bus.kind, TargetKind::EventBridge { ref event_bus, .. } if event_bus == "default")
        );
        for bad in [
            format!(r#"{{"type":"forward","name":"b","url":"http://b.example/h","secret":"{SECRET}"}}"#),
            r#"{"type":"forward","name":"b","url":"https://b.example/h","secret":"whsec_c2hvcnQ="}"#.to_owned(),
            format!(r#"{{"type":"forward","name":"B","url":"https://b.example/h","secret":"{SECRET}"}}"#),
            format!(r#"{{"type":"forward","name":"b","url":"https://b.example/h","secret":"{SECRET}","event_types":["a*b"]}}"#),
            r#"{"type":"sqs","name":"q","queue_url":"not a url"}"#.to_owned(),
            r#"{"type":"eventbridge","name":"bus","detail_source":"aws.events"}"#.to_owned(),
            r#"{"type":"kafka","name":"k"}"#.to_owned(),
            r#"{"type":"sqs","name":"q","queue_url":"https://q","extra":1}"#.to_owned(),
        ] {
            let error = target(&bad).expect_err(&bad);
            assert!(!error.contains("MfKQ9r8"), "{error}");
        }
        assert!(target(&format!(
            r#"{{"type":"forward","name":"b","url":"http://127.0.0.1:9/h","secret":"{SECRET}"}}"#
        ))
        .is_ok());
    }

    #[test]
    fn a_refused_target_keeps_its_cause_inside_the_start_up_error() {
        use std::error::Error as _;
        let error = crate::config::Sources::from_json(
            r#"[{"name": "a", "scheme": "github", "secrets": ["x"],
                 "targets": [{"type": "sqs", "name": "q", "queue_url": "not a url"}]}]"#,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "source \"a\": target \"q\": bad queue_url"
        );
        let target = error
            .source()
            .and_then(|e| e.downcast_ref::<TargetError>())
            .expect("the target's error is the cause");
        assert!(
            matches!(target, TargetError::QueueUrl { name, .. } if name == "q"),
            "{target:?}"
        );
        let parse = target
            .source()
            .and_then(|e| e.downcast_ref::<url::ParseError>());
        assert_eq!(parse, Some(&url::ParseError::RelativeUrlWithoutBase));
    }

    #[test]
    fn a_filter_or_transform_that_does_not_compile_names_the_source_the_target_and_the_column() {
        for (field, text) in [("filter", "body.[?"), ("transform", "{a: }")] {
            let json = format!(
                r#"[{{"name": "stripe", "scheme": "github", "secrets": ["x"],
                     "targets": [{{"type": "eventbridge", "name": "bus",
                                   "{field}": "{text}"}}]}}]"#
            );
            let error = crate::config::Sources::from_json(&json).unwrap_err();
            // What the functions' start-up line and `hookledger check-config` print.
            let message = crate::startup::config_failure(&error);
            assert!(
                message.starts_with(&format!(
                    "source \"stripe\": target \"bus\": {field}: expression {text:?} is \
                     invalid: "
                )),
                "{message}"
            );
            assert!(message.contains("(column "), "{message}");
            // The chain names the problem once.
            assert_eq!(crate::error_chain::error_chain(&error), message);
        }
        let too_long = "a.".repeat(crate::expression::MAX_EXPRESSION_CHARS);
        let error = target(&format!(
            r#"{{"type":"sqs","name":"q","queue_url":"https://q.example/q","filter":"{too_long}x"}}"#
        ))
        .unwrap_err();
        assert!(
            error.starts_with("target \"q\": filter: expression \"a.a.")
                && error.ends_with("is invalid: it is longer than 2000 characters"),
            "{error}"
        );
    }

    #[test]
    fn every_kind_takes_a_filter_and_a_transform() {
        for json in [
            format!(
                r#"{{"type":"forward","name":"b","url":"https://b.example/h","secret":"{SECRET}",
                    "filter":"body.livemode","transform":"{{id: id}}"}}"#
            ),
            r#"{"type":"sqs","name":"q","queue_url":"https://q.example/q",
                "filter":"body.livemode","transform":"{id: id}"}"#
                .to_owned(),
            r#"{"type":"eventbridge","name":"bus","filter":"body.livemode","transform":"{id: id}"}"#
                .to_owned(),
        ] {
            let t = target(&json).expect(&json);
            assert_eq!(t.filter.as_ref().map(|f| f.as_str()), Some("body.livemode"));
            assert_eq!(t.transform.as_ref().map(|f| f.as_str()), Some("{id: id}"));
        }
        let plain = target(r#"{"type":"eventbridge","name":"bus"}"#).unwrap();
        assert!(plain.filter.is_none() && plain.transform.is_none());
    }
}
