//! Translates API Gateway / Function URL / ALB requests to the receive path and its replies back.
//!
//! Routing: the path must end in `/webhooks/{source}`; this holds for HTTP API and Function URL
//! paths, REST API paths with their stage prefix (`/prod/webhooks/x`), and cargo-lambda's local
//! `/lambda-url/receiver/webhooks/x`.

use std::time::{SystemTime, UNIX_EPOCH};

use lambda_http::http::{header, Method, StatusCode};
use lambda_http::{Body, Error, Request, Response};
use shared::db::Pool;
use shared::handler::Registry;
use shared::{Outcome, Receiver, Reply, Settings};

/// Everything built once per execution environment and borrowed by every invocation.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The receive path (sources, pool, handlers).
    pub receiver: Receiver,
}

impl AppState {
    /// State for `settings` running `handlers` (`handlers::registry`).
    pub fn new(settings: &Settings, pool: Pool, handlers: Registry) -> Self {
        Self {
            receiver: Receiver::new(settings, pool, handlers),
        }
    }

    /// The function's state as its `main` builds it once per execution environment: the pool
    /// (its first connection opening at once, `shared::db::Pool::warm`), `handlers` (the app's
    /// registry, `shared::App`), the worker's doorbell (`HOOKLEDGER_WORKER_FUNCTION`, off when
    /// unset) and sources re-read after a signature mismatch, so rotated signing secrets are
    /// picked up without a redeploy (`shared::sources_refresh`). Logs what runs for each
    /// source, with a warning for a handler registered for a source that is not configured and
    /// for a source where nothing runs (`shared::coverage`).
    ///
    /// # Errors
    /// [`shared::db::DbError`] when the pool cannot be built from `settings.database` (fatal:
    /// the init error; print it with its causes, `shared::error_chain::error_chain`).
    pub async fn from_settings(
        settings: &Settings,
        handlers: Registry,
    ) -> Result<Self, shared::db::DbError> {
        // The first connection opens while the rest of the cold start runs and the runtime
        // fetches the first event.
        let pool = shared::db::pool(&settings.database)?.warm();
        // What runs for each source, and a warning for each source where nothing would.
        shared::coverage::Coverage::of(&handlers, &settings.sources).log();
        let mut state = Self::new(settings, pool, handlers);
        state.receiver = state.receiver.with_doorbell(
            shared::doorbell::Doorbell::new(settings.worker_function.as_deref()).await,
        );
        state.receiver.sources =
            shared::sources_refresh::LiveSources::from_settings(settings).await;
        Ok(state)
    }
}

/// Handles one request at the current time.
///
/// # Errors
/// Never in practice: every outcome, our own faults included, is an HTTP response; the
/// `Result` is the runtime's signature.
pub async fn function_handler(state: &AppState, request: Request) -> Result<Response<Body>, Error> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    handle_at(state, request, now).await
}

/// Handles one request as if the time were `now` (unix seconds).
///
/// # Errors
/// Only if the response cannot be built (never with the fixed headers used here).
pub async fn handle_at(
    state: &AppState,
    request: Request,
    now: i64,
) -> Result<Response<Body>, Error> {
    let Some(source) = source_from_path(request.uri().path()) else {
        let refused = state
            .receiver
            .refuse("", 404, Outcome::NotFound, "not found")
            .await;
        return Ok(reply(&refused)?);
    };
    // Meta's subscription check: a GET on the path of a source with a `verify_token`; any
    // other GET is refused below like every method but POST.
    if request.method() == Method::GET {
        let query = request.uri().query().unwrap_or("").to_owned();
        if let Some(answered) = state.receiver.subscribe(source, &query).await {
            return Ok(reply(&answered)?);
        }
    }
    if request.method() != Method::POST {
        let refused = state
            .receiver
            .refuse(source, 405, Outcome::MethodNotAllowed, "method not allowed")
            .await;
        let mut response = reply(&refused)?;
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return Ok(response);
    }
    let source = source.to_owned();
    if request
        .headers()
        .contains_key(crate::transport::INVALID_BASE64_HEADER)
    {
        let outcome = state
            .receiver
            .refuse(
                &source,
                400,
                Outcome::BadRequest,
                "body is not valid base64",
            )
            .await;
        return Ok(reply(&outcome)?);
    }
    if request
        .headers()
        .contains_key(crate::unreadable::MALFORMED_HEADER_MARKER)
    {
        let outcome = state
            .receiver
            .refuse(&source, 400, Outcome::BadRequest, "malformed header")
            .await;
        return Ok(reply(&outcome)?);
    }
    let url = request_url(&request);
    let outcome = state
        .receiver
        .receive_at(
            &source,
            &url,
            request.headers(),
            request.body().as_ref(),
            now,
        )
        .await;
    Ok(reply(&outcome)?)
}

/// The URL the provider requested, as a scheme that signs it (Twilio, Square) sees it:
/// `X-Forwarded-Proto` (else `https`: API Gateway and Function URLs are HTTPS) `://`, the
/// `Host` header (else the URI's authority), the path and the query. A source's `public_url`
/// replaces all but the query when the provider calls another address (a custom domain).
pub fn request_url(request: &Request) -> String {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let scheme = header("x-forwarded-proto").unwrap_or("https");
    let host = header("host")
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()))
        .unwrap_or_default();
    let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str());
    format!("{scheme}://{host}{path_and_query}")
}

/// The `{source}` of a path ending in `/webhooks/{source}` (a trailing slash is tolerated).
pub fn source_from_path(path: &str) -> Option<&str> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let (prefix, source) = path.rsplit_once('/')?;
    if source.is_empty() || !(prefix == "/webhooks" || prefix.ends_with("/webhooks")) {
        return None;
    }
    Some(source)
}

fn reply(reply: &Reply) -> Result<Response<Body>, lambda_http::http::Error> {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, reply.content_type);
    if reply.replayed {
        builder = builder.header("idempotent-replayed", "true");
    }
    if let Some(seconds) = reply.retry_after {
        builder = builder.header(header::RETRY_AFTER, seconds);
    }
    builder.body(Body::from(reply.body.clone()))
}

#[cfg(test)]
mod tests {
    use super::source_from_path;

    #[test]
    fn routes_every_api_gateway_path_shape() {
        assert_eq!(source_from_path("/webhooks/stripe"), Some("stripe"));
        assert_eq!(source_from_path("/prod/webhooks/stripe"), Some("stripe"));
        assert_eq!(
            source_from_path("/lambda-url/receiver/webhooks/gh/"),
            Some("gh")
        );
        assert_eq!(source_from_path("/webhooks/"), None);
        assert_eq!(source_from_path("/webhooks"), None);
        assert_eq!(source_from_path("/hooks/stripe"), None);
        assert_eq!(source_from_path("/notwebhooks/stripe"), None);
        assert_eq!(source_from_path("/webhooks/a/b"), None);
    }
}
