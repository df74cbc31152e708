//! The page shell (navigation, the stylesheet), the headers every response carries, the request
//! log line, and the small formatting helpers every page uses.

use std::time::{Duration, Instant, SystemTime};

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

/// The pages in the navigation: (path, label).
const NAV: [(&str, &str); 5] = [
    ("/", "Overview"),
    ("/events", "Events"),
    ("/stuck", "Stuck"),
    ("/dead", "Dead letters"),
    ("/rejected", "Rejected"),
];

/// `Content-Security-Policy`: nothing but the stylesheet and images from this origin, forms to
/// this origin, no frames, no scripts.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                       frame-ancestors 'none'; base-uri 'none'";

/// The stylesheet (`GET /style.css`): plain and dense, like an operator's tool.
pub const STYLESHEET: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { background: #22303c; color: #fff; padding: 6px 16px; display: flex; gap: 18px; align-items: baseline; }
header a { color: #cfe3f5; text-decoration: none; }
header a.active { color: #fff; font-weight: 600; border-bottom: 2px solid #fff; }
header .mode { margin-left: auto; color: #f5d48a; }
main { padding: 12px 16px; }
h1 { font-size: 18px; margin: 6px 0 10px; }
h2 { font-size: 15px; margin: 16px 0 6px; }
table { border-collapse: collapse; background: #fff; margin-bottom: 8px; }
th, td { border: 1px solid #d9dde1; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code, pre, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: #fff; border: 1px solid #d9dde1; padding: 8px; overflow: auto; max-height: 480px; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-bottom: 10px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
button { padding: 3px 10px; }
.note { color: #555; font-size: 12.5px; }
.error { color: #a40e0e; }
.warn { color: #8a5300; font-weight: 600; }
.status-completed { color: #1d6b2f; } .status-dead { color: #a40e0e; font-weight: 600; }
.status-failed { color: #8a5300; } .status-claimed, .status-processing { color: #28508c; }
.outcome-processed { color: #1d6b2f; } .outcome-ignored, .outcome-stale { color: #6b5a00; font-style: italic; }
.outcome-dead { color: #a40e0e; font-weight: 600; } .outcome-failed { color: #8a5300; }
.outcome-claimed, .outcome-processing { color: #28508c; }
svg.chart { background: #fff; border: 1px solid #d9dde1; }
"#;

/// `GET /style.css`.
pub async fn stylesheet() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLESHEET,
    )
}

/// A whole page: `title`, the navigation (with `active` marked), `content`.
pub fn shell(title: &str, content: Markup, active: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · hookledger console" }
                link rel="stylesheet" href="/style.css";
            }
            body {
                header {
                    strong { "hookledger" }
                    @for (path, label) in NAV {
                        a href=(path) class=[(active == Some(path)).then_some("active")] { (label) }
                    }
                }
                main { (content) }
            }
        }
    }
}

/// Adds the headers of the module's docs to every response.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// One `console request` line per request: method, the route's template (never the path's
/// values nor the query string: they can carry the token), status, duration in milliseconds.
pub async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_owned(), |m| m.as_str().to_owned());
    let response = next.run(request).await;
    tracing::info!(
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "console request"
    );
    response
}

/// `value` percent-encoded for one path segment or query value (everything but the unreserved
/// characters of RFC 3986).
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The event page's URL: `/events/{source}/{event_id}`, both segments percent-encoded.
pub fn event_url(source: &str, event_id: &str) -> String {
    format!("/events/{}/{}", encode(source), encode(event_id))
}

/// `path?query` from name/value pairs, skipping empty values.
pub fn url_with(path: &str, pairs: &[(&str, &str)]) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()))
        .finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// A time as RFC 3339 (UTC, milliseconds).
pub fn time(at: SystemTime) -> String {
    shared::timestamp::rfc3339(at)
}

/// An optional time, `-` when absent.
pub fn maybe_time(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "-".to_owned(), time)
}

/// A duration in seconds as people read it: `42 s`, `7 min`, `3.5 h`, `12.0 d`.
pub fn age(secs: u64) -> String {
    let d = Duration::from_secs(secs).as_secs_f64();
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7_199 => format!("{} min", secs / 60),
        7_200..=172_799 => format!("{:.1} h", d / 3600.0),
        _ => format!("{:.1} d", d / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(event_url("stripe", "evt_1"), "/events/stripe/evt_1");
        assert_eq!(
            event_url("gh", "a/b c?d#e%"),
            "/events/gh/a%2Fb%20c%3Fd%23e%25"
        );
        assert_eq!(
            url_with(
                "/events",
                &[("source", "s"), ("status", ""), ("after", "x y")]
            ),
            "/events?source=s&after=x+y"
        );
    }
}
