//! `forward`: HTTP POST to the user's endpoint, re-signed as a Standard Webhooks delivery.
//!
//! The request (Standard Webhooks specification, "Webhook headers" and "Signature scheme"):
//!
//! - body: the message's payload, byte for byte (the provider's body as it was verified, or a
//!   handler's JSON); `Content-Type`: the message's media type;
//! - `webhook-id`: the idempotency key `{source}:{event_id}:{n}`, the same on every attempt:
//!   the receiving service deduplicates on it ([`header_text`] says how a byte no header can
//!   carry is written; provider ids are plain ASCII in practice);
//! - `webhook-timestamp`: the attempt's time, unix seconds;
//! - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`
//!   with the target's secret, which the official Standard Webhooks libraries verify;
//! - informational, not signed: [`SOURCE_HEADER`], [`EVENT_ID_HEADER`], [`EVENT_TYPE_HEADER`]
//!   (absent when the provider sent no type), [`ATTEMPT_HEADER`], and `User-Agent:`
//!   [`USER_AGENT`].
//!
//! The answer: 2xx is delivered. 408, 429 and 5xx are retryable, with the wait the target asked
//! for in `Retry-After` (RFC 9110 section 10.2.3: delta-seconds or an HTTP-date), as is a
//! timeout or a connection error. A redirect (no client of ours follows one: the message must
//! not land where the configuration did not name) and any other status are fatal, with the
//! status and an excerpt of the answer. At most [`MAX_ANSWER_BYTES`] of an answer are read.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;

use super::excerpt::excerpt;
use super::{DispatchError, Dispatched, Message};
use hookledger_verify::{Scheme, SigningKey};

/// `User-Agent` of every forward request: `hookledger/<version>`.
pub const USER_AGENT: &str = concat!("hookledger/", env!("CARGO_PKG_VERSION"));
/// Header: the source's name.
pub const SOURCE_HEADER: &str = "hookledger-source";
/// Header: the provider's event id.
pub const EVENT_ID_HEADER: &str = "hookledger-event-id";
/// Header: the provider's event type (absent when it sent none).
pub const EVENT_TYPE_HEADER: &str = "hookledger-event-type";
/// Header: which attempt this is, from 1.
pub const ATTEMPT_HEADER: &str = "hookledger-attempt";

/// Most bytes of an answer read (the rest is dropped with the connection).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Sends `message` to `url` as a Standard Webhooks delivery signed with `key` at `now` (the
/// `webhook-timestamp`), within `timeout` for the whole exchange (connect, send, answer).
///
/// `client` must not follow redirects ([`super::Dispatcher`]'s does not); a redirect is then
/// fatal. Returns the status of a 2xx answer.
///
/// # Errors
/// [`DispatchError::Retryable`]: 408, 429, 5xx (with `retry_after` from `Retry-After`, at most
/// [`crate::retry_after::MAX_RETRY_AFTER`]), a timeout, a connection or I/O error. [`DispatchError::Fatal`]: any
/// other status (3xx included), with the status and an excerpt of the answer in the reason, or
/// a content type that cannot be a header. Neither carries the secret, the payload or the URL.
pub async fn send(
    client: &reqwest::Client,
    url: &url::Url,
    key: &SigningKey,
    timeout: Duration,
    message: &Message,
    now: SystemTime,
) -> Result<Dispatched, DispatchError> {
    let headers = headers(key, message, now)?;
    let mut response = client
        .post(url.clone())
        .headers(headers)
        .timeout(timeout)
        .body(message.payload.clone())
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    let retry_after = response.headers().get(RETRY_AFTER).cloned();
    // What the answer said (bounded); a 2xx whose body then fails is still delivered.
    let mut answer = Vec::new();
    while answer.len() < MAX_ANSWER_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => answer.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    answer.truncate(MAX_ANSWER_BYTES);
    classify(status, retry_after.as_ref(), &answer, now)
}

/// The request's headers: the Standard Webhooks three, the informational ones, content type
/// and user agent.
fn headers(
    key: &SigningKey,
    message: &Message,
    now: SystemTime,
) -> Result<HeaderMap, DispatchError> {
    let timestamp = now
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let id = header_text(&message.idempotency_key()).into_owned();
    let mut headers = HeaderMap::new();
    let signed = hookledger_verify::sign(
        Scheme::StandardWebhooks,
        key,
        &id,
        timestamp,
        &message.payload,
    );
    if signed.is_empty() {
        return Err(DispatchError::Fatal {
            reason: "the message could not be signed (its idempotency key is no header value)"
                .to_owned(),
            status: None,
        });
    }
    for (name, value) in signed {
        let name = HeaderName::try_from(name).map_err(|_| DispatchError::Fatal {
            reason: "a signature header name is invalid".to_owned(),
            status: None,
        })?;
        headers.insert(name, text_value(&value));
    }
    let content_type =
        HeaderValue::from_str(&message.content_type).map_err(|_| DispatchError::Fatal {
            reason: "the message's content type cannot be an HTTP header".to_owned(),
            status: None,
        })?;
    headers.insert(CONTENT_TYPE, content_type);
    headers.insert(
        reqwest::header::USER_AGENT,
        HeaderValue::from_static(USER_AGENT),
    );
    headers.insert(
        HeaderName::from_static(SOURCE_HEADER),
        text_value(&header_text(&message.source)),
    );
    headers.insert(
        HeaderName::from_static(EVENT_ID_HEADER),
        text_value(&header_text(&message.event_id)),
    );
    if !message.event_type.is_empty() {
        headers.insert(
            HeaderName::from_static(EVENT_TYPE_HEADER),
            text_value(&header_text(&message.event_type)),
        );
    }
    headers.insert(
        HeaderName::from_static(ATTEMPT_HEADER),
        HeaderValue::from(message.attempts.saturating_add(1).max(1)),
    );
    Ok(headers)
}

/// `text` as a header value: unchanged when it is visible ASCII without `%` (every provider's
/// ids), else with each byte outside `!`..`~` and each `%` written `%XX` (uppercase hex, RFC 3986
/// percent-encoding of its UTF-8 bytes). Always writing `%` so keeps the mapping one-to-one: two
/// different ids never give the same header.
pub fn header_text(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|b| b.is_ascii_graphic() && b != b'%') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(out)
}

/// A header value from visible ASCII ([`header_text`]'s output, a signature).
fn text_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// A request that got no answer: timeouts and connection errors are retryable; a request that
/// could not even be built is fatal. The URL is left out (it may hold a token).
fn request_error(error: &reqwest::Error, timeout: Duration) -> DispatchError {
    if error.is_timeout() {
        return DispatchError::Retryable {
            reason: format!("no answer within the {} ms timeout", timeout.as_millis()),
            status: None,
            retry_after: None,
        };
    }
    let chain = error_chain(error);
    if error.is_builder() {
        return DispatchError::Fatal {
            reason: excerpt(format!("the request cannot be built: {chain}").as_bytes()),
            status: None,
        };
    }
    let what = if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    DispatchError::Retryable {
        reason: excerpt(format!("{what}: {chain}").as_bytes()),
        status: None,
        retry_after: None,
    }
}

/// The error's sources, `: `-separated, without the URL reqwest adds to its own message.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        parts.push(cause.to_string());
        source = cause.source();
    }
    if parts.is_empty() {
        "unknown".to_owned()
    } else {
        parts.join(": ")
    }
}

/// What an answer with `status` means (see the module docs).
fn classify(
    status: StatusCode,
    retry_after: Option<&HeaderValue>,
    answer: &[u8],
    now: SystemTime,
) -> Result<Dispatched, DispatchError> {
    let code = status.as_u16();
    if status.is_success() {
        return Ok(Dispatched {
            status: Some(code),
            receipt: None,
        });
    }
    let reason = if answer.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {}", excerpt(answer))
    };
    if code == 408 || code == 429 || status.is_server_error() {
        return Err(DispatchError::Retryable {
            reason,
            status: Some(code),
            retry_after: retry_after.and_then(|v| parse_retry_after(v, now)),
        });
    }
    let reason = if status.is_redirection() {
        format!("{reason} (redirects are not followed: configure the final URL)")
    } else {
        reason
    };
    Err(DispatchError::Fatal {
        reason,
        status: Some(code),
    })
}

/// A `Retry-After` header as a wait from `now` ([`crate::retry_after::parse`]).
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    crate::retry_after::parse(value.to_str().ok()?, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookledger_verify::{Scheme, SigningKey};

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn message() -> Message {
        Message {
            source: "stripe".into(),
            event_id: "evt_1".into(),
            event_type: "invoice.paid".into(),
            n: 1,
            target: "billing".into(),
            payload: br#"{"id":"evt_1"}"#.to_vec(),
            content_type: "application/json; charset=utf-8".into(),
            verified_body: true,
            attempts: 2,
            created_at: UNIX_EPOCH,
        }
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
        headers.get(name).unwrap().to_str().unwrap()
    }

    #[test]
    fn a_request_is_a_standard_webhooks_delivery_that_verifies() {
        let key = SigningKey::new(Scheme::StandardWebhooks, SECRET).unwrap();
        let m = message();
        let headers = headers(&key, &m, now()).unwrap();
        assert_eq!(header(&headers, "webhook-id"), "stripe:evt_1:1");
        assert_eq!(header(&headers, "webhook-timestamp"), "1700000000");
        assert!(header(&headers, "webhook-signature").starts_with("v1,"));
        assert_eq!(
            header(&headers, "content-type"),
            "application/json; charset=utf-8"
        );
        assert_eq!(header(&headers, "user-agent"), USER_AGENT);
        assert!(USER_AGENT.starts_with("hookledger/") && USER_AGENT.len() > "hookledger/".len());
        assert_eq!(header(&headers, SOURCE_HEADER), "stripe");
        assert_eq!(header(&headers, EVENT_ID_HEADER), "evt_1");
        assert_eq!(header(&headers, EVENT_TYPE_HEADER), "invoice.paid");
        assert_eq!(header(&headers, ATTEMPT_HEADER), "3");
        // Our own verifier agrees with the signature (the official libraries are checked by the
        // interop tests).
        let http: http::HeaderMap = headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        hookledger_verify::verify(
            Scheme::StandardWebhooks,
            std::slice::from_ref(&key),
            &http,
            &m.payload,
            1_700_000_000,
            300,
        )
        .unwrap();
        // Tampering with the body or the id breaks it.
        assert!(hookledger_verify::verify(
            Scheme::StandardWebhooks,
            &[key],
            &http,
            b"{}",
            1_700_000_000,
            300
        )
        .is_err());
        // Nothing secret in the headers.
        assert!(!format!("{headers:?}").contains("MfKQ9r8"));
    }

    #[test]
    fn an_untyped_event_has_no_type_header_and_the_first_attempt_is_1() {
        let key = SigningKey::new(Scheme::StandardWebhooks, SECRET).unwrap();
        let m = Message {
            event_type: String::new(),
            attempts: 0,
            ..message()
        };
        let headers = headers(&key, &m, now()).unwrap();
        assert!(headers.get(EVENT_TYPE_HEADER).is_none());
        assert_eq!(header(&headers, ATTEMPT_HEADER), "1");
    }

    #[test]
    fn ids_no_header_can_carry_are_percent_encoded_one_to_one() {
        assert_eq!(
            header_text("evt_1QhookledgerDemo0001"),
            "evt_1QhookledgerDemo0001"
        );
        assert_eq!(header_text("caf\u{e9} 1"), "caf%C3%A9%201");
        assert_eq!(header_text("a\nb"), "a%0Ab");
        // `%` is always encoded, so an id that looks encoded stays apart from the one it looks like.
        assert_eq!(header_text("caf%C3%A9"), "caf%25C3%25A9");
        assert_ne!(header_text("caf%C3%A9"), header_text("caf\u{e9}"));
        let key = SigningKey::new(Scheme::StandardWebhooks, SECRET).unwrap();
        let m = Message {
            event_id: "caf\u{e9}".into(),
            ..message()
        };
        let headers = headers(&key, &m, now()).unwrap();
        assert_eq!(header(&headers, "webhook-id"), "stripe:caf%C3%A9:1");
        assert_eq!(header(&headers, EVENT_ID_HEADER), "caf%C3%A9");
    }

    #[test]
    fn a_content_type_that_cannot_be_a_header_is_fatal() {
        let key = SigningKey::new(Scheme::StandardWebhooks, SECRET).unwrap();
        let m = Message {
            content_type: "text/plain\n".into(),
            verified_body: true,
            ..message()
        };
        assert!(matches!(
            headers(&key, &m, now()),
            Err(DispatchError::Fatal { .. })
        ));
    }

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(
            parse_retry_after(&v("7"), now()),
            Some(Duration::from_secs(7))
        );
        assert_eq!(parse_retry_after(&v(" 0 "), now()), Some(Duration::ZERO));
        let in_90s = httpdate::fmt_http_date(now() + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&v(&in_90s), now()),
            Some(Duration::from_secs(90))
        );
        // RFC 850 and asctime forms (RFC 9110 section 5.6.7), in the past: no wait.
        assert_eq!(
            parse_retry_after(&v("Sunday, 06-Nov-94 08:49:37 GMT"), now()),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&v("Sun Nov  6 08:49:37 1994"), now()),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&v("99999999999999999999999"), now()),
            Some(crate::retry_after::MAX_RETRY_AFTER)
        );
        assert_eq!(
            parse_retry_after(&v("86401"), now()),
            Some(crate::retry_after::MAX_RETRY_AFTER)
        );
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(&v(bad), now()), None, "{bad:?}");
        }
    }

    #[test]
    fn answers_are_classified_by_status() {
        let seven = HeaderValue::from_static("7");
        for code in [200, 201, 202, 204, 299] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(
                classify(status, None, b"ok", now()),
                Ok(Dispatched {
                    status: Some(code),
                    receipt: None
                })
            );
        }
        for code in [408, 429, 500, 502, 503, 504, 599] {
            let status = StatusCode::from_u16(code).unwrap();
            let error = classify(status, Some(&seven), b"busy", now()).unwrap_err();
            assert_eq!(
                error,
                DispatchError::Retryable {
                    reason: format!("HTTP {status}: busy"),
                    status: Some(code),
                    retry_after: Some(Duration::from_secs(7)),
                },
            );
        }
        for code in [
            300, 301, 302, 303, 307, 308, 400, 401, 403, 404, 409, 410, 413, 422,
        ] {
            let status = StatusCode::from_u16(code).unwrap();
            let error = classify(status, Some(&seven), b"{\"error\":\"no\"}", now()).unwrap_err();
            let DispatchError::Fatal {
                reason,
                status: Some(got),
            } = error
            else {
                panic!("{code}: {error:?}")
            };
            assert_eq!(got, code);
            assert!(reason.starts_with(&format!("HTTP {code}")), "{reason}");
            assert!(reason.contains("{\"error\":\"no\"}"), "{reason}");
            assert_eq!(
                reason.contains("redirects are not followed"),
                (300..400).contains(&code)
            );
        }
        // Without Retry-After, no wait is asked; with a bad one, none either.
        let error = classify(StatusCode::SERVICE_UNAVAILABLE, None, b"", now()).unwrap_err();
        assert_eq!(
            error,
            DispatchError::Retryable {
                reason: "HTTP 503 Service Unavailable".into(),
                status: Some(503),
                retry_after: None
            }
        );
    }

    #[test]
    fn a_long_or_hostile_answer_is_excerpted() {
        let mut body = b"\x1b[2J".to_vec();
        body.extend(vec![b'x'; 100_000]);
        let error = classify(StatusCode::BAD_REQUEST, None, &body, now()).unwrap_err();
        let DispatchError::Fatal { reason, .. } = error else {
            panic!()
        };
        assert!(reason.len() <= "HTTP 400 Bad Request: ".len() + super::super::MAX_EXCERPT_BYTES);
        assert!(
            reason.contains("\\u{1b}[2J") && !reason.contains('\x1b'),
            "{reason}"
        );
    }
}
