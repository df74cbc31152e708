//! Transport guard: a request flagged `isBase64Encoded` whose body is not valid base64 gets a 400
//! instead of a panic.
//!
//! lambda_http converts its event into an `http::Request` with
//! `Body::from_maybe_encoded(..).expect(..)` (aws_lambda_events 1.2), which panics on an invalid
//! body; in a release build (`panic = "abort"`) that kills the execution environment and the
//! provider sees a 502. [`Base64Guard`] sits between the runtime and lambda_http's adapter and
//! checks a flagged body before the adapter converts it. An undecodable body is dropped, the
//! flag cleared, and the [`INVALID_BASE64_HEADER`] marker set, so the handler answers 400 in the
//! response shape the event's origin expects. The marker is removed from every incoming event
//! first, so a sender cannot set it.

use std::task::{Context, Poll};

use base64::Engine as _;
use lambda_http::http::{HeaderMap, HeaderValue};
use lambda_http::request::LambdaRequest;
use lambda_http::{LambdaEvent, Service};

/// Set (by this guard only) on a request whose base64 body did not decode.
pub const INVALID_BASE64_HEADER: &str = "x-hookledger-invalid-base64";

/// Wraps lambda_http's adapter `S`; see the module docs.
#[derive(Debug, Clone)]
pub struct Base64Guard<S> {
    inner: S,
}

impl<S> Base64Guard<S> {
    /// Guards `inner` (normally `lambda_http::Adapter::from(service_fn(..))`).
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S> Service<LambdaEvent<LambdaRequest>> for Base64Guard<S>
where
    S: Service<LambdaEvent<LambdaRequest>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut event: LambdaEvent<LambdaRequest>) -> Self::Future {
        guard(&mut event.payload);
        self.inner.call(event)
    }
}

/// Strips any incoming marker; replaces an undecodable flagged body by the marker.
pub fn guard(request: &mut LambdaRequest) {
    match request {
        LambdaRequest::ApiGatewayV1(r) => {
            strip(&mut r.headers);
            strip(&mut r.multi_value_headers);
            if undecodable(r.is_base64_encoded, r.body.as_deref()) {
                r.body = None;
                r.is_base64_encoded = false;
                mark(&mut r.headers);
                mark(&mut r.multi_value_headers);
            }
        }
        LambdaRequest::ApiGatewayV2(r) => {
            strip(&mut r.headers);
            if undecodable(r.is_base64_encoded, r.body.as_deref()) {
                r.body = None;
                r.is_base64_encoded = false;
                mark(&mut r.headers);
            }
        }
        LambdaRequest::Alb(r) => {
            strip(&mut r.headers);
            strip(&mut r.multi_value_headers);
            if undecodable(r.is_base64_encoded, r.body.as_deref()) {
                r.body = None;
                r.is_base64_encoded = false;
                mark(&mut r.headers);
                mark(&mut r.multi_value_headers);
            }
        }
        LambdaRequest::WebSocket(r) => {
            strip(&mut r.headers);
            strip(&mut r.multi_value_headers);
            if undecodable(r.is_base64_encoded, r.body.as_deref()) {
                r.body = None;
                r.is_base64_encoded = false;
                mark(&mut r.headers);
                mark(&mut r.multi_value_headers);
            }
        }
        _ => {}
    }
}

fn undecodable(flagged: bool, body: Option<&str>) -> bool {
    match body {
        Some(body) if flagged => base64::engine::general_purpose::STANDARD
            .decode(body)
            .is_err(),
        _ => false,
    }
}

fn strip(headers: &mut HeaderMap) {
    headers.remove(INVALID_BASE64_HEADER);
}

fn mark(headers: &mut HeaderMap) {
    headers.insert(INVALID_BASE64_HEADER, HeaderValue::from_static("1"));
}
