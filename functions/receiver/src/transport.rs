//! Transport guard: events that would make lambda_http panic while it builds the
//! `http::Request` are repaired or refused first.
//!
//! - A body flagged `isBase64Encoded` that is not valid base64: answered 400 (see below).
//! - A `Host` header that is not a plain host name or address, or an `X-Forwarded-Proto` other
//!   than `http`/`https`: lambda_http builds a URL from them and panics when `Url::parse` refuses it.
//!   They are dropped (lambda_http then uses the API's own domain name); routing does not use
//!   them.
//! - An HTTP API `rawQueryString` with characters a URI cannot hold (`"`, `<`, space, ...):
//!   appended raw to the URI and `expect`ed. It is dropped; webhook routing ignores the query.
//! - A path that does not start with `/` (`rawPath` or `path`): lambda_http parses
//!   `https://{host}{path}` (or `http://localhost{path}`) and unwraps, so `:99999` reads as a bad
//!   port and panics. No API Gateway, Function URL or ALB path looks like that; it becomes `/`,
//!   which routes nowhere (404). Found by `make fuzz` (target `lambda_event`).
//! - A `requestContext.domainName` the URL parser refuses, used when there is no (valid) `Host`:
//!   dropped, as a bad `Host` is.
//!
//! lambda_http converts its event into an `http::Request` with
//! `Body::from_maybe_encoded` (aws_lambda_events 1.2), which panics on an invalid
//! body; the runtime catches the panic (the workspace's release profile unwinds), but the
//! provider sees a 5xx for its own malformed request, and with `panic = "abort"` (cargo-lambda's
//! usual setting) the execution environment would die. [`Base64Guard`] sits between the runtime and lambda_http's adapter and
//! checks a flagged body before the adapter converts it. An undecodable body is dropped, the
//! flag cleared, and the [`INVALID_BASE64_HEADER`] marker set, so the handler answers 400 in the
//! response shape the event's origin expects. The marker is removed from every incoming event
//! first, so a sender cannot set it.

use std::task::{Context, Poll};

use base64::Engine as _;
use lambda_http::http::header::HOST;
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
            repair_path(&mut r.path);
            repair_domain(&mut r.request_context.domain_name);
            repair(
                &mut r.headers,
                Some(&mut r.multi_value_headers),
                &mut r.is_base64_encoded,
                &mut r.body,
            )
        }
        LambdaRequest::ApiGatewayV2(r) => {
            repair_path(&mut r.raw_path);
            repair_domain(&mut r.request_context.domain_name);
            if r.raw_query_string
                .as_deref()
                .is_some_and(|q| !q.bytes().all(is_query_byte))
            {
                r.raw_query_string = None;
            }
            repair(&mut r.headers, None, &mut r.is_base64_encoded, &mut r.body)
        }
        LambdaRequest::Alb(r) => {
            repair_path(&mut r.path);
            repair(
                &mut r.headers,
                Some(&mut r.multi_value_headers),
                &mut r.is_base64_encoded,
                &mut r.body,
            )
        }
        _ => {}
    }
}

/// The same repair for every event shape: `multi` is the `multiValueHeaders` view where the
/// shape has one.
fn repair(
    headers: &mut HeaderMap,
    mut multi: Option<&mut HeaderMap>,
    flagged: &mut bool,
    body: &mut Option<String>,
) {
    strip(headers);
    if let Some(multi) = multi.as_deref_mut() {
        strip(multi);
    }
    if undecodable(*flagged, body.as_deref()) {
        *body = None;
        *flagged = false;
        mark(headers);
        if let Some(multi) = multi {
            mark(multi);
        }
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

/// A path that does not start with `/` becomes `/` (see the module docs); an empty path is
/// left alone (lambda_http parses it as `/`).
fn repair_path(path: &mut Option<String>) {
    if path
        .as_deref()
        .is_some_and(|p| !p.is_empty() && !p.starts_with('/'))
    {
        *path = Some("/".to_owned());
    }
}

/// Drops a domain name the URL parser refuses (see [`bad_host`]).
fn repair_domain(domain: &mut Option<String>) {
    if domain.as_deref().is_some_and(|d| bad_host(d.as_bytes())) {
        *domain = None;
    }
}

/// Whether lambda_http's `Url::parse("https://{host}{path}")` would refuse `host`: empty, a
/// byte outside [`is_host_byte`], or refused by the url crate (a port over 65535, `1.2.3.256`,
/// an unclosed bracket, ...).
fn bad_host(host: &[u8]) -> bool {
    host.is_empty()
        || !host.iter().all(|b| is_host_byte(*b))
        || std::str::from_utf8(host).map_or(true, |host| {
            url::Url::parse(&format!("https://{host}/")).is_err()
        })
}

/// Removes the marker a sender might forge, and the URL-building headers lambda_http would
/// panic on.
fn strip(headers: &mut HeaderMap) {
    headers.remove(INVALID_BASE64_HEADER);
    // lambda_http parses `https://{host}{path}` with the url crate and unwraps: drop any Host
    // that the same parser refuses (a port over 65535, `1.2.3.256`, an unclosed bracket, ...).
    if headers.get(HOST).is_some_and(|h| bad_host(h.as_bytes())) {
        headers.remove(HOST);
    }
    let bad_proto = headers
        .get(X_FORWARDED_PROTO)
        .is_some_and(|p| p != "https" && p != "http");
    if bad_proto {
        headers.remove(X_FORWARDED_PROTO);
    }
}

const X_FORWARDED_PROTO: &str = "x-forwarded-proto";

/// Host names, IPv4 and bracketed IPv6 addresses, with an optional port.
fn is_host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
}

/// RFC 3986 query characters (unreserved, sub-delims, ":", "@", "/", "?") and "%".
fn is_query_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'/'
                | b'?'
                | b'%'
        )
}

fn mark(headers: &mut HeaderMap) {
    headers.insert(INVALID_BASE64_HEADER, HeaderValue::from_static("1"));
}
