//! Events lambda_http cannot read at all: a header value holding a control character (CR, LF,
//! NUL, ...) or a header name that is not an HTTP token. aws_lambda_events parses every header
//! with `http`'s own rules while it deserializes the event, so one such header makes the whole
//! event unreadable as any shape: the runtime reports an invocation error and API Gateway
//! answers 502, a 5xx for the sender's own malformed request, which a provider retries.
//! Found by the hostile-input corpus (tests/tests/api/hostile.rs, category `header injection`).
//!
//! [`ReadableEvent`] sits in front of the whole stack (`crate::stack::stack`: `ReadableEvent::new(
//! Base64Guard::new(Adapter::from(..)))`): the runtime hands it the raw JSON; an event that
//! reads as usual goes on unchanged (a sender's [`MALFORMED_HEADER_MARKER`] removed); an event
//! that does not is read again without its unreadable headers and with the marker set, so the
//! handler answers 400 "malformed header" in the response shape of the event's origin. Anything
//! still unreadable (not an HTTP event at all) is the runtime's error, as before.

use std::task::{Context, Poll};

use futures_util::future::Either;
use lambda_http::http::{HeaderMap, HeaderName, HeaderValue};
use lambda_http::request::LambdaRequest;
use lambda_http::{LambdaEvent, Service};
use serde_json::value::RawValue;
use serde_json::Value;

/// Set (by this guard only) on an event that arrived with headers lambda_http cannot hold.
pub const MALFORMED_HEADER_MARKER: &str = "x-hookledger-malformed-header";

/// Reads the runtime's raw event for `inner` (normally a [`crate::transport::Base64Guard`]);
/// see the module docs.
#[derive(Debug, Clone)]
pub struct ReadableEvent<S> {
    inner: S,
}

impl<S> ReadableEvent<S> {
    /// Guards `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S> Service<LambdaEvent<Box<RawValue>>> for ReadableEvent<S>
where
    S: Service<LambdaEvent<LambdaRequest>>,
    S::Error: From<serde_json::Error>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, std::future::Ready<Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, event: LambdaEvent<Box<RawValue>>) -> Self::Future {
        match read(event.payload.get()) {
            Ok(request) => Either::Left(self.inner.call(LambdaEvent::new(request, event.context))),
            Err(error) => Either::Right(std::future::ready(Err(S::Error::from(error)))),
        }
    }
}

/// The event `json` as lambda_http reads it, with unreadable headers replaced by
/// [`MALFORMED_HEADER_MARKER`] (and a sender's marker removed).
///
/// # Errors
/// lambda_http's own error (the first reading's) when the event is not an HTTP event even
/// without those headers: the invocation fails, as it would without this guard.
pub fn read(json: &str) -> Result<LambdaRequest, serde_json::Error> {
    let first = match serde_json::from_str::<LambdaRequest>(json) {
        Ok(mut request) => {
            if let Some((headers, multi)) = headers_of(&mut request) {
                headers.remove(MALFORMED_HEADER_MARKER);
                if let Some(multi) = multi {
                    multi.remove(MALFORMED_HEADER_MARKER);
                }
            }
            return Ok(request);
        }
        Err(error) => error,
    };
    let Ok(mut value) = serde_json::from_str::<Value>(json) else {
        return Err(first);
    };
    let mut dropped = false;
    for field in ["headers", "multiValueHeaders"] {
        if let Some(Value::Object(map)) = value.get_mut(field) {
            let before = map.len();
            map.retain(|name, value| {
                !name.eq_ignore_ascii_case(MALFORMED_HEADER_MARKER) && readable(name, value)
            });
            dropped |= map.len() != before;
            map.insert(
                MALFORMED_HEADER_MARKER.to_owned(),
                if field == "headers" {
                    Value::from("1")
                } else {
                    Value::from(vec!["1"])
                },
            );
        }
    }
    if !dropped {
        return Err(first);
    }
    serde_json::from_str::<LambdaRequest>(&value.to_string()).map_err(|_| first)
}

/// Whether aws_lambda_events can read this header: a token name and string values that
/// `http` accepts (visible ASCII, spaces, tabs and obs-text; no CR, LF, NUL or DEL).
fn readable(name: &str, value: &Value) -> bool {
    let value_ok = |v: &Value| v.as_str().is_some_and(|s| HeaderValue::from_str(s).is_ok());
    HeaderName::from_bytes(name.as_bytes()).is_ok()
        && match value {
            Value::Array(values) => values.iter().all(value_ok),
            other => value_ok(other),
        }
}

/// The header maps of an HTTP event shape: `headers`, and `multiValueHeaders` where it has one.
fn headers_of(request: &mut LambdaRequest) -> Option<(&mut HeaderMap, Option<&mut HeaderMap>)> {
    match request {
        LambdaRequest::ApiGatewayV1(r) => Some((&mut r.headers, Some(&mut r.multi_value_headers))),
        LambdaRequest::ApiGatewayV2(r) => Some((&mut r.headers, None)),
        LambdaRequest::Alb(r) => Some((&mut r.headers, Some(&mut r.multi_value_headers))),
        _ => None,
    }
}
