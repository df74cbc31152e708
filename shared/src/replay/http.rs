//! One request to a provider's API with bounded retries: 429, 5xx and connection failures are
//! retried with exponential backoff honouring `Retry-After`; 401 and 403 are the credential's
//! fault and stop at once; any other 4xx is final. Every request and every wait fits inside the
//! invocation's time ([`super::ReplayOptions`]).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use reqwest::Method;

use super::{ReplayErrorKind, ReplayOptions, Run};

/// Largest answer read from a provider, bytes (32 MiB): a Stripe page of 100 events is a few
/// hundred KiB; anything near this is not a list page, and is not held in memory whole.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// Longest provider error message quoted in an error, characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// The credential a request carries, for the `Authorization` header and for the errors that
/// name it (never its value).
pub(crate) struct Credential<'a> {
    /// The header's value, e.g. `Bearer sk_...`.
    pub(crate) authorization: String,
    /// Any credential text that must never appear in an error (scrubbed from provider
    /// messages).
    pub(crate) secret: &'a str,
    /// The setting that holds it (`api_key`, ...).
    pub(crate) setting: &'static str,
    /// What it must be allowed to do, for the 401/403 message.
    pub(crate) allowed: &'static str,
    /// More headers the provider expects (GitHub's `Accept` and API version).
    pub(crate) headers: &'static [(&'static str, &'static str)],
}

impl<'a> Credential<'a> {
    /// The source's `api_key` as a bearer token for reading an event list (Stripe, Paddle),
    /// after checking that a resumed run's cursor is an event id (`evt_...`, both providers'
    /// shape). `provider` and `key` word the errors, e.g. `"stripe"` and `"a Stripe key"`.
    ///
    /// # Errors
    /// [`ReplayErrorKind::NotConfigured`] without an `api_key`; [`ReplayErrorKind::Invalid`]
    /// for a cursor that is not an event id.
    pub(crate) fn event_list_key(
        run: &Run<'_>,
        config: &'a crate::config::SourceConfig,
        provider: &str,
        key: &str,
    ) -> Result<(&'a crate::config::ProviderApi, Self), ReplayErrorKind> {
        use secrecy::ExposeSecret;
        let Some(api) = &config.api else {
            return Err(ReplayErrorKind::NotConfigured {
                name: config.name.clone(),
                problem: format!("set api_key: {key} that may read events"),
            });
        };
        if run
            .request
            .starting_after
            .as_deref()
            .is_some_and(|c| !c.starts_with("evt_"))
        {
            return Err(ReplayErrorKind::Invalid(format!(
                "starting_after for a {provider} source is an event id (evt_...)"
            )));
        }
        let credential = Credential {
            authorization: format!("Bearer {}", api.key.expose_secret()),
            secret: api.key.expose_secret(),
            setting: "api_key",
            allowed: "read events",
            headers: &[],
        };
        Ok((api, credential))
    }
}

/// A successful (2xx) answer.
pub(crate) struct Response {
    /// The status.
    pub(crate) status: u16,
    /// The headers (`Link`, ...).
    pub(crate) headers: HeaderMap,
    /// The body's bytes.
    pub(crate) body: Vec<u8>,
}

/// Why a request gave no answer to use.
pub(crate) enum Failure {
    /// Too little invocation time left to send it, or to wait for its retry.
    OutOfTime,
    /// An error that ends the run.
    Error(ReplayErrorKind),
}

/// How long to wait before retry number `attempt + 1` (`attempt` counts from 0): the
/// `Retry-After` header's wait when it has one (seconds or an HTTP date,
/// [`crate::retry_after::parse`]) when it asks for some, else `backoff_base * 2^attempt` (so a
/// date already past, or `0`, never makes a retry immediate); never more than
/// `retry_after_cap`.
pub fn retry_wait(attempt: u32, retry_after: Option<&str>, options: &ReplayOptions) -> Duration {
    let asked = retry_after
        .and_then(|v| crate::retry_after::parse(v, SystemTime::now()))
        .filter(|wait| !wait.is_zero());
    let wait = match asked {
        Some(wait) => wait,
        None => options
            .backoff_base
            .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX)),
    };
    wait.min(options.retry_after_cap)
}

/// Sends one request (`query` as URL parameters) with retries.
pub(crate) async fn send(
    run: &Run<'_>,
    source: &str,
    credential: &Credential<'_>,
    method: Method,
    url: &str,
    query: &[(&str, String)],
) -> Result<Response, Failure> {
    let options = run.options;
    let timeout = options.request_timeout.min(options.margin.mul_f64(0.8));
    // Only reads are sent again after a lost answer: a POST answered 5xx or not at all may
    // have been done (a GitHub redelivery would go out twice). 429 means not done: retried.
    let idempotent = method == Method::GET;
    let mut attempt: u32 = 0;
    loop {
        if run.out_of_time() {
            return Err(Failure::OutOfTime);
        }
        let mut builder = run
            .client
            .request(method.clone(), url)
            .query(query)
            .header(reqwest::header::AUTHORIZATION, &credential.authorization)
            .timeout(timeout);
        for (name, value) in credential.headers {
            builder = builder.header(*name, *value);
        }
        let sent = builder.send().await;
        // What went wrong, when a retry may help.
        let retryable = match sent {
            Err(error) => Retryable::Transport(error),
            Ok(response) => {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let body = match read_capped(response).await {
                    Ok(Some(body)) => body,
                    Ok(None) => {
                        return Err(Failure::Error(ReplayErrorKind::MalformedPage {
                            name: source.to_owned(),
                            detail: format!(
                                "HTTP {status}: an answer larger than {MAX_ANSWER_BYTES} bytes"
                            ),
                        }))
                    }
                    Err(error) => {
                        if attempt >= options.max_retries || !idempotent {
                            return Err(unreachable(source, attempt + 1, error));
                        }
                        wait(run, attempt, None).await?;
                        attempt += 1;
                        continue;
                    }
                };
                let retry_after = headers
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                // GitHub answers its rate limits with 403 and Retry-After or no requests left.
                let rate_limited_403 = status == 403
                    && (retry_after.is_some()
                        || headers
                            .get("x-ratelimit-remaining")
                            .is_some_and(|v| v.as_bytes() == b"0"));
                match status {
                    200..=299 => {
                        return Ok(Response {
                            status,
                            headers,
                            body,
                        })
                    }
                    401 | 403 if !rate_limited_403 => {
                        return Err(Failure::Error(ReplayErrorKind::Unauthorized {
                            name: source.to_owned(),
                            status,
                            setting: credential.setting,
                            allowed: credential.allowed,
                        }))
                    }
                    403 | 429 | 500..=599 => Retryable::Status {
                        status,
                        retry_after,
                        message: provider_message(&body, credential.secret),
                    },
                    _ => {
                        return Err(Failure::Error(ReplayErrorKind::Provider {
                            name: source.to_owned(),
                            status,
                            attempts: attempt + 1,
                            message: provider_message(&body, credential.secret),
                        }))
                    }
                }
            }
        };
        let status = match &retryable {
            Retryable::Status { status, .. } => Some(*status),
            Retryable::Transport(_) => None,
        };
        if attempt >= options.max_retries || (!idempotent && status != Some(429)) {
            return Err(match retryable {
                Retryable::Status {
                    status, message, ..
                } => Failure::Error(ReplayErrorKind::Provider {
                    name: source.to_owned(),
                    status,
                    attempts: attempt + 1,
                    message,
                }),
                Retryable::Transport(error) => unreachable(source, attempt + 1, error),
            });
        }
        let (retry_after, detail) = match &retryable {
            Retryable::Status {
                retry_after,
                message,
                ..
            } => (retry_after.as_deref(), message.clone()),
            Retryable::Transport(error) => (None, crate::error_chain::error_chain(error)),
        };
        tracing::warn!(
            source,
            status = status.unwrap_or(0),
            attempt = attempt + 1,
            retry_after = retry_after.unwrap_or(""),
            error = detail.as_str(),
            "provider API request failed; retrying"
        );
        wait(run, attempt, retry_after).await?;
        attempt += 1;
    }
}

/// A failed attempt that a retry may fix.
enum Retryable {
    /// No answer: reqwest's error (it names the URL, which carries no credential).
    Transport(reqwest::Error),
    /// 403 (rate limited), 429 or 5xx.
    Status {
        /// The status.
        status: u16,
        /// The `Retry-After` header, when given.
        retry_after: Option<String>,
        /// The provider's message ([`provider_message`]).
        message: String,
    },
}

/// The answer's body, read chunk by chunk; `None` once it passes [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > MAX_ANSWER_BYTES as u64)
    {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// Sleeps before a retry, unless that would leave less than the margin.
async fn wait(run: &Run<'_>, attempt: u32, retry_after: Option<&str>) -> Result<(), Failure> {
    let wait = retry_wait(attempt, retry_after, run.options);
    if run.remaining() < wait + run.options.margin {
        return Err(Failure::OutOfTime);
    }
    tokio::time::sleep(wait).await;
    Ok(())
}

fn unreachable(source: &str, attempts: u32, error: reqwest::Error) -> Failure {
    Failure::Error(ReplayErrorKind::Unreachable {
        name: source.to_owned(),
        attempts,
        cause: error,
    })
}

/// The provider's error message from an error body (Stripe `error.message`, Paddle
/// `error.detail`, GitHub `message`), else the start of the body as text; `secret` scrubbed,
/// at most [`MAX_MESSAGE_CHARS`] characters.
pub(crate) fn provider_message(body: &[u8], secret: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.pointer("/error/detail"))
                .or_else(|| v.pointer("/message"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let message = if secret.is_empty() {
        message
    } else {
        message.replace(secret, "[redacted]")
    };
    let message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    if message.trim().is_empty() {
        "no message".to_owned()
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_are_honoured_up_to_the_cap_and_backoff_doubles() {
        let options = ReplayOptions::default();
        assert_eq!(retry_wait(0, Some("2"), &options), Duration::from_secs(2));
        assert_eq!(retry_wait(3, Some(" 7 "), &options), Duration::from_secs(7));
        assert_eq!(
            retry_wait(0, Some("3600"), &options),
            Duration::from_secs(30)
        );
        assert_eq!(retry_wait(0, None, &options), Duration::from_millis(500));
        assert_eq!(retry_wait(2, None, &options), Duration::from_secs(2));
        assert_eq!(
            retry_wait(2, Some("Wed, 21 Oct 2015 07:28:00 GMT"), &options),
            Duration::from_secs(2)
        );
        assert_eq!(retry_wait(40, None, &options), Duration::from_secs(30));
    }

    #[test]
    fn provider_messages_are_read_short_and_never_carry_the_credential() {
        let stripe =
            br#"{"error": {"message": "Invalid API Key provided: sk_test_abc", "type": "x"}}"#;
        assert_eq!(
            provider_message(stripe, "sk_test_abc"),
            "Invalid API Key provided: [redacted]"
        );
        let paddle = br#"{"error": {"type": "request_error", "detail": "bad after"}}"#;
        assert_eq!(provider_message(paddle, "k"), "bad after");
        let github = br#"{"message": "Not Found", "documentation_url": "x"}"#;
        assert_eq!(provider_message(github, "k"), "Not Found");
        let long = "x".repeat(1000);
        assert_eq!(provider_message(long.as_bytes(), "k").len(), 300);
        assert_eq!(provider_message(b"", "k"), "no message");
    }
}
