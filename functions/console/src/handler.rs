//! The console's router (`hookledger_console`) behind API Gateway's JWT authorizer: the HTTP
//! API's request (payload 2.0) to the router with the authorizer's [`Principal`], the router's
//! response back.
//!
//! The principal comes from `requestContext.authorizer.jwt.claims` only (its `sub`, and what the
//! allow rule reads: `email` and `email_verified`, `cognito:groups` or `groups`, `scope` or
//! `scp`), which API Gateway fills after it validated the JWT (signature against the issuer's
//! keys, `iss`, `aud`, `exp`); nothing a client sends (headers, cookies, the query) can set it.
//! The console admits only principals its allow rule (`ConsoleSettings::allow`) admits, 403
//! for any other. A request without it (a
//! route left without the authorizer, a REST API or Function URL event) reaches the router with
//! no principal, and the console's [`Auth::Authorizer`] answers 401 on every route.

use axum::Router;
use hookledger_console::auth::{CsrfKey, CsrfKeyError, Principal};
use hookledger_console::{Auth, Console, ConsoleConfig};
use lambda_http::request::RequestContext;
use lambda_http::tower::ServiceExt;
use lambda_http::{Error, Request, RequestExt};
use secrecy::SecretString;
use shared::config::ConsoleSettings;
use shared::db::Pool;
use shared::doorbell::Doorbell;
use shared::handler::Registry;
use shared::Settings;

/// The console's router as the function serves it: [`Auth::Authorizer`] with the CSRF key
/// `csrf_secret` (the text of `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN`) and the allow rule
/// `console.allow`, read-only unless `console.redrive`. The doorbell is off: the function may invoke nothing, and what a re-drive
/// puts back for a deferred source is drained by the worker's one-minute schedule.
///
/// # Errors
/// [`CsrfKeyError`] for a key under `hookledger_console::auth::MIN_CSRF_KEY_LEN` bytes.
pub fn router(
    settings: Settings,
    pool: Pool,
    handlers: Registry,
    console: &ConsoleSettings,
    csrf_secret: &SecretString,
) -> Result<Router, CsrfKeyError> {
    let config = ConsoleConfig {
        auth: Auth::Authorizer(CsrfKey::new(csrf_secret)?, console.allow.clone()),
        read_only: !console.redrive,
    };
    Ok(Console::new(settings, pool, handlers, Doorbell::off(), config).router())
}

/// The principal of an HTTP API request that passed a JWT authorizer: the validated claims
/// with a non-empty `sub`; `None` for anything else.
pub fn principal(request: &Request) -> Option<Principal> {
    match request.request_context_ref()? {
        RequestContext::ApiGatewayV2(context) => {
            let claims = &context.authorizer.as_ref()?.jwt.as_ref()?.claims;
            Principal::from_claims(|name| claims.get(name).map(String::as_str))
        }
        _ => None,
    }
}

/// Serves one request with `router`, with the request's [`principal`] (if any) as the
/// extension the console's authentication reads.
///
/// # Errors
/// Never: the router answers every request (its errors are pages); the `Result` is the
/// runtime's signature.
pub async fn function_handler(
    router: &Router,
    mut request: Request,
) -> Result<axum::response::Response, Error> {
    // Only this function sets it: drop whatever else might have.
    request.extensions_mut().remove::<Principal>();
    if let Some(principal) = principal(&request) {
        request.extensions_mut().insert(principal);
    }
    Ok(router.clone().oneshot(request).await?)
}
