//! Who may use the console, in one of two modes ([`Auth`]), and the CSRF token of the forms
//! that change something.
//!
//! **[`Auth::Token`]** (`hookledger console`): the access token, random per start unless given.
//! - `?token=TOKEN` on any route: checked, then an `HttpOnly; SameSite=Strict; Path=/` session
//!   cookie and a 303 to the same URL without the token (so it leaves the address bar and the
//!   history).
//! - Afterwards the session cookie, or `Authorization: Bearer TOKEN`.
//! - The session cookie is bound to the console's port: a browser sends the cookies of
//!   127.0.0.1 to every port of it (RFC 6265 section 8.5: cookies do not provide isolation by
//!   port), so it is named [`cookie_name`] (`hookledger_console_PORT`: two consoles do not
//!   overwrite each other's) and holds [`session_value`], an HMAC of the port keyed by the
//!   token, never the token itself: another local service receives a value that opens this
//!   console only, for as long as it runs with this token, and cannot be used as a bearer
//!   token or on another console.
//! - Anything else: 401 with a short page saying how to get in.
//! - The CSRF token ([`csrf_token`]): an HMAC-SHA256 of the label [`CSRF_LABEL`] keyed by the
//!   access token, so a page of another origin cannot forge one.
//!
//! **[`Auth::Authorizer`]** (the `console` function behind API Gateway's JWT authorizer): API
//! Gateway has validated the JWT (signature, issuer, audience, expiry) before the function
//! runs; the function's handler turns the validated claims of the request context into a
//! [`Principal`] request extension (never from anything the client sends). A request without
//! one is refused 401 here, whatever the route: a route left without the authorizer by mistake
//! does not open the console. A principal the deployment's allow rule
//! ([`ConsoleAllow`]: required scopes, subjects, verified e-mail domains, groups) does not admit
//! is refused 403 on every route (and logged, with its `sub`): a valid token of the issuer is
//! not enough, since anyone may get one from a pool open to sign-up or a public OAuth client.
//! Tokens, cookies and `?token=` mean nothing in this mode.
//! - The CSRF token ([`authorizer_csrf_token`]): an HMAC-SHA256 of [`AUTHORIZER_CSRF_LABEL`]
//!   and the principal's `sub`, keyed by a [`CsrfKey`] every execution environment shares (a
//!   Secrets Manager secret read at cold start), so a form rendered by one environment
//!   verifies on any other, and a token minted for one user is refused for another.
//!
//! POSTs carry their token in a hidden field `csrf`; [`Csrf`] (an extractor) gives the token
//! a request's forms carry and checks a given one. Every comparison is constant-time.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use shared::config::ConsoleAllow;
use subtle::ConstantTimeEq;

use crate::AppState;

/// The session cookie's name before the port ([`cookie_name`]).
pub const COOKIE_PREFIX: &str = "hookledger_console_";

/// What the session cookie's value signs, followed by the port (big-endian, two bytes), with
/// the access token as the key.
pub const SESSION_LABEL: &[u8] = b"hookledger console session v1\0";

/// The port the console listens on, a request extension set by `Console::serve` (the session
/// cookie is bound to it; `Console::router` alone uses port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenPort(pub u16);

/// The session cookie's name for a console listening on `port`: `hookledger_console_PORT`.
pub fn cookie_name(port: u16) -> String {
    format!("{COOKIE_PREFIX}{port}")
}

/// The session cookie's value for a console on `port` with `token`: hex HMAC-SHA256 of
/// [`SESSION_LABEL`] and the port, keyed by the token (64 hex digits; not the token).
pub fn session_value(token: &AccessToken, port: u16) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(SESSION_LABEL);
    mac.update(&port.to_be_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The query parameter of the first visit.
pub const TOKEN_PARAM: &str = "token";

/// What the CSRF token signs (with the access token as the key).
pub const CSRF_LABEL: &[u8] = b"hookledger console csrf v1";

/// What the CSRF token of [`Auth::Authorizer`] signs, followed by the principal's `sub` (with
/// the shared [`CsrfKey`] as the key).
pub const AUTHORIZER_CSRF_LABEL: &[u8] = b"hookledger console authorizer csrf v1\0";

/// A [`CsrfKey`] must be at least this many bytes (the template generates 64).
pub const MIN_CSRF_KEY_LEN: usize = 32;

/// Random tokens: this many bytes from the OS, printed as hex.
pub const RANDOM_BYTES: usize = 32;

/// A given token must be at least this long.
pub const MIN_LEN: usize = 16;

/// The console's access token: URL-safe text; `Debug` prints `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken([redacted])")
    }
}

/// Why a given token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Too short, or a character outside `A-Z a-z 0-9 - _ . ~` (it goes into a URL as is).
    #[error("the console token must be at least {MIN_LEN} characters of A-Z a-z 0-9 - _ . ~")]
    Malformed,
}

impl AccessToken {
    /// [`RANDOM_BYTES`] random bytes from the operating system, as 64 hex digits.
    ///
    /// # Errors
    /// When the operating system has no randomness to give.
    pub fn random() -> std::io::Result<Self> {
        let mut bytes = [0u8; RANDOM_BYTES];
        getrandom::getrandom(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self(hex::encode(bytes)))
    }

    /// A token chosen by the operator (`HOOKLEDGER_CONSOLE_TOKEN`).
    ///
    /// # Errors
    /// [`TokenError::Malformed`]: shorter than [`MIN_LEN`], or not URL-safe.
    pub fn new(token: &str) -> Result<Self, TokenError> {
        let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~');
        if token.len() < MIN_LEN || !token.chars().all(safe) {
            return Err(TokenError::Malformed);
        }
        Ok(Self(token.to_owned()))
    }

    /// The token itself (for the URL printed at start).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token (constant-time in the bytes compared).
    pub fn matches(&self, given: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(given.as_bytes()))
    }
}

/// The CSRF token of `token`'s forms: hex HMAC-SHA256 of [`CSRF_LABEL`].
pub fn csrf_token(token: &AccessToken) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(CSRF_LABEL);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `given` (a form's `csrf` field) is `token`'s CSRF token, constant-time.
pub fn check_csrf(token: &AccessToken, given: Option<&str>) -> bool {
    given.is_some_and(|given| bool::from(csrf_token(token).as_bytes().ct_eq(given.as_bytes())))
}

/// How requests prove who they are (see the module's docs).
#[derive(Debug, Clone)]
pub enum Auth {
    /// The access token of `hookledger console` (query once, then the cookie or
    /// `Authorization: Bearer`).
    Token(AccessToken),
    /// Behind API Gateway's JWT authorizer: a request needs the [`Principal`] the function's
    /// handler took from the validated claims, admitted by the allow rule (never empty: see
    /// [`ConsoleAllow`]); the CSRF tokens are keyed by the shared key.
    Authorizer(CsrfKey, ConsoleAllow),
}

/// The key of the CSRF tokens in [`Auth::Authorizer`] mode, shared by every execution
/// environment; `Debug` prints `[redacted]`.
#[derive(Clone)]
pub struct CsrfKey(SecretString);

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey([redacted])")
    }
}

/// Why a CSRF key was refused.
#[derive(Debug, thiserror::Error)]
pub enum CsrfKeyError {
    /// Shorter than [`MIN_CSRF_KEY_LEN`] bytes (after trimming white space).
    #[error("the console's CSRF key must be at least {MIN_CSRF_KEY_LEN} bytes")]
    TooShort,
}

impl CsrfKey {
    /// The key: a secret's text (e.g. what `GenerateSecretString` made), trimmed.
    ///
    /// # Errors
    /// [`CsrfKeyError::TooShort`] under [`MIN_CSRF_KEY_LEN`] bytes.
    pub fn new(secret: &SecretString) -> Result<Self, CsrfKeyError> {
        let key = secret.expose_secret().trim();
        if key.len() < MIN_CSRF_KEY_LEN {
            return Err(CsrfKeyError::TooShort);
        }
        Ok(Self(SecretString::from(key.to_owned())))
    }
}

/// Who API Gateway's JWT authorizer let in: the validated token's `sub` claim and what the
/// allow rule reads of its other claims. Set as a request extension by the `console`
/// function's handler only; [`Auth::Authorizer`] refuses requests without it (401) and those
/// its rule does not admit (403).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    /// The `sub` claim (non-empty).
    pub sub: String,
    /// The `email` claim's domain (after its last `@`), lower-cased, when `email_verified` is
    /// `true`; `None` otherwise.
    pub verified_email_domain: Option<String>,
    /// The `cognito:groups` and `groups` claims' entries.
    pub groups: Vec<String>,
    /// The `scope` and `scp` claims' entries.
    pub scopes: Vec<String>,
}

impl Principal {
    /// The principal of validated JWT claims (`claim` looks one up by name): `None` without a
    /// non-empty `sub`. API Gateway passes every claim as a string, a list one as `[a b c]`:
    /// both that and a space- or comma-separated list are read.
    pub fn from_claims<'a>(claim: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let sub = claim("sub").map(str::trim).filter(|sub| !sub.is_empty())?;
        let list = |names: &[&str]| -> Vec<String> {
            names
                .iter()
                .filter_map(|name| claim(name))
                .flat_map(|value| {
                    value
                        .trim()
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .split(|c: char| c.is_whitespace() || c == ',')
                        .filter(|entry| !entry.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let verified = claim("email_verified").is_some_and(|v| v.trim() == "true");
        let verified_email_domain = claim("email")
            .filter(|_| verified)
            .and_then(|email| email.trim().rsplit_once('@'))
            .map(|(_, domain)| domain.to_ascii_lowercase())
            .filter(|domain| !domain.is_empty());
        Some(Self {
            sub: sub.to_owned(),
            verified_email_domain,
            groups: list(&["cognito:groups", "groups"]),
            scopes: list(&["scope", "scp"]),
        })
    }

    /// Whether `allow` admits this principal: every list it gives matches (an empty list is
    /// not checked), and it gives at least one.
    pub fn admitted_by(&self, allow: &ConsoleAllow) -> bool {
        let any = |wanted: &[String], held: &[String]| {
            wanted.is_empty() || held.iter().any(|h| wanted.contains(h))
        };
        !allow.is_empty()
            && any(&allow.scopes, &self.scopes)
            && any(&allow.groups, &self.groups)
            && (allow.subjects.is_empty() || allow.subjects.contains(&self.sub))
            && (allow.email_domains.is_empty()
                || self
                    .verified_email_domain
                    .as_ref()
                    .is_some_and(|domain| allow.email_domains.contains(domain)))
    }
}

/// The CSRF token of `principal`'s forms under `key`: hex HMAC-SHA256 of
/// [`AUTHORIZER_CSRF_LABEL`] followed by the `sub`.
pub fn authorizer_csrf_token(key: &CsrfKey, principal: &Principal) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.0.expose_secret().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(AUTHORIZER_CSRF_LABEL);
    mac.update(principal.sub.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The CSRF token of the request's forms, whatever the mode: put it in a form's `csrf` field,
/// check a posted one with [`Csrf::check`]. Extracting it in [`Auth::Authorizer`] mode without
/// a [`Principal`] is a 401 (the middleware has refused such a request already).
#[derive(Debug, Clone)]
pub struct Csrf(String);

impl Csrf {
    /// The token, for a hidden `csrf` field.
    pub fn value(&self) -> &str {
        &self.0
    }

    /// Whether `given` (a form's `csrf` field) is this request's token, constant-time.
    pub fn check(&self, given: Option<&str>) -> bool {
        given.is_some_and(|given| bool::from(self.0.as_bytes().ct_eq(given.as_bytes())))
    }
}

impl FromRequestParts<AppState> for Csrf {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match &state.config.auth {
            Auth::Token(token) => Ok(Self(csrf_token(token))),
            Auth::Authorizer(key, _) => parts
                .extensions
                .get::<Principal>()
                .map(|principal| Self(authorizer_csrf_token(key, principal)))
                .ok_or_else(|| unauthorized(&state.config.auth)),
        }
    }
}

/// The access token of `Authorization: Bearer`, if the request carries one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Whether the request carries the session cookie of a console on `port` with `token` (any
/// other cookie, of another port or with another value, is ignored).
fn has_session(headers: &HeaderMap, token: &AccessToken, port: u16) -> bool {
    let name = cookie_name(port);
    let expected = session_value(token, port);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(name.as_str())?.strip_prefix('='))
        .any(|value| bool::from(expected.as_bytes().ct_eq(value.as_bytes())))
}

/// The middleware in front of every route (see the module's docs).
pub async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match &state.config.auth {
        Auth::Token(token) => require_token(token, request, next).await,
        Auth::Authorizer(_, allow) => match request.extensions().get::<Principal>() {
            Some(principal) if principal.admitted_by(allow) => next.run(request).await,
            Some(principal) => {
                // The sub only: an opaque id, never the token or its other claims.
                tracing::warn!(
                    sub = principal.sub.as_str(),
                    "console access refused: the allow rule does not admit this user"
                );
                forbidden()
            }
            None => unauthorized(&state.config.auth),
        },
    }
}

/// [`Auth::Token`]: the token in the query (becomes the session cookie), the session cookie or
/// the header.
async fn require_token(token: &AccessToken, request: Request, next: Next) -> Response {
    let port = request
        .extensions()
        .get::<ListenPort>()
        .map_or(0, |port| port.0);
    let query = request.uri().query().unwrap_or("");
    let given = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == TOKEN_PARAM)
        .map(|(_, value)| value.into_owned());
    if let Some(given) = given {
        if !token.matches(&given) {
            return unauthorized_token();
        }
        let rest: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .filter(|(name, _)| name != TOKEN_PARAM)
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        let mut location = same_origin_path(request.uri().path());
        if !rest.is_empty() {
            location.push('?');
            location.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(rest)
                    .finish(),
            );
        }
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            cookie_name(port),
            session_value(token, port)
        );
        let mut response = StatusCode::SEE_OTHER.into_response();
        let headers = response.headers_mut();
        match (
            HeaderValue::from_str(&location),
            HeaderValue::from_str(&cookie),
        ) {
            (Ok(location), Ok(cookie)) => {
                headers.insert(header::LOCATION, location);
                headers.insert(header::SET_COOKIE, cookie);
                return response;
            }
            _ => return unauthorized_token(),
        }
    }
    let headers = request.headers();
    if bearer(headers).is_some_and(|given| token.matches(given))
        || has_session(headers, token, port)
    {
        return next.run(request).await;
    }
    unauthorized_token()
}

/// `path` as a `Location` that stays on this origin: leading slashes and backslashes collapsed
/// to one `/` (a browser reads `//host/...`, and `/\\host/...`, as another host).
fn same_origin_path(path: &str) -> String {
    format!("/{}", path.trim_start_matches(['/', '\\']))
}

/// 401 with a page saying how to get in, in `auth`'s mode.
fn unauthorized(auth: &Auth) -> Response {
    match auth {
        Auth::Token(_) => unauthorized_token(),
        Auth::Authorizer(..) => sign_in(
            "This console needs a signed-in user",
            maud::html! {
                "Send the identity provider's token as " code { "Authorization: Bearer JWT" } "."
            },
        ),
    }
}

/// 403 for a signed-in user the allow rule does not admit.
fn forbidden() -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "hookledger console: not allowed" } }
            body {
                h1 { "You are signed in, but not allowed to use this console" }
                p { "Ask its operators to add you to the console's allow rule." }
            }
        }
    };
    (StatusCode::FORBIDDEN, body).into_response()
}

/// 401 with a page saying how to get in with the access token.
fn unauthorized_token() -> Response {
    sign_in(
        "This console needs its access token",
        maud::html! {
            "Open the URL that " code { "hookledger console" }
            " printed when it started (it ends in " code { "?token=..." }
            "), or send " code { "Authorization: Bearer TOKEN" } "."
        },
    )
}

/// The 401 page: `heading`, then `how` in a paragraph.
fn sign_in(heading: &str, how: maud::Markup) -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "hookledger console: sign in" } }
            body { h1 { (heading) } p { (how) } }
        }
    };
    (StatusCode::UNAUTHORIZED, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex_and_compare_exactly() {
        let a = AccessToken::random().unwrap();
        let b = AccessToken::random().unwrap();
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
        assert!(a.matches(a.expose()));
        assert!(!a.matches(b.expose()));
        assert!(!a.matches(&a.expose()[..63]));
        assert_eq!(format!("{a:?}"), "AccessToken([redacted])");
    }

    #[test]
    fn a_given_token_must_be_long_and_url_safe() {
        assert!(AccessToken::new("short").is_err());
        assert!(AccessToken::new("a token with spaces!").is_err());
        assert!(AccessToken::new("0123456789abcdef").is_ok());
    }

    #[test]
    fn the_csrf_token_is_tied_to_the_access_token() {
        let a = AccessToken::new("aaaaaaaaaaaaaaaa").unwrap();
        let b = AccessToken::new("bbbbbbbbbbbbbbbb").unwrap();
        assert!(check_csrf(&a, Some(&csrf_token(&a))));
        assert!(!check_csrf(&a, Some(&csrf_token(&b))));
        assert!(!check_csrf(&a, None));
        assert!(!check_csrf(&a, Some("")));
    }

    #[test]
    fn the_session_cookie_of_this_port_or_the_bearer_header_carries_the_token() {
        let token = AccessToken::new("0123456789abcdef").unwrap();
        let value = session_value(&token, 8470);
        assert_eq!(value.len(), 64);
        assert_ne!(value, session_value(&token, 8471));
        let with_cookie = |cookie: String| {
            let mut headers = HeaderMap::new();
            headers.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
            headers
        };
        let ok = with_cookie(format!("other=1; hookledger_console_8470={value}"));
        assert!(has_session(&ok, &token, 8470));
        assert!(!has_session(&ok, &token, 8471));
        let other = AccessToken::new("fedcba9876543210").unwrap();
        assert!(!has_session(&ok, &other, 8470));
        let token_itself = with_cookie("hookledger_console_8470=0123456789abcdef".to_owned());
        assert!(!has_session(&token_itself, &token, 8470));
        // A longer port whose name starts with this one's.
        let longer = with_cookie(format!("hookledger_console_84701={value}"));
        assert!(!has_session(&longer, &token, 8470));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer xyz"),
        );
        assert_eq!(bearer(&headers), Some("xyz"));
    }

    fn key(text: &str) -> CsrfKey {
        CsrfKey::new(&SecretString::from(text.to_owned())).unwrap()
    }

    #[test]
    fn the_authorizer_csrf_token_is_tied_to_the_key_and_the_sub() {
        let a = key(&"a".repeat(64));
        let alice = Principal::from_claims(|c| (c == "sub").then_some("alice")).unwrap();
        let bob = Principal::from_claims(|c| (c == "sub").then_some("bob")).unwrap();
        let token = authorizer_csrf_token(&a, &alice);
        // Every execution environment with the same key derives the same token.
        assert_eq!(token, authorizer_csrf_token(&key(&"a".repeat(64)), &alice));
        assert_ne!(token, authorizer_csrf_token(&a, &bob));
        assert_ne!(token, authorizer_csrf_token(&key(&"b".repeat(64)), &alice));
        // Not the local mode's token of a same-looking access token.
        assert_ne!(
            token,
            csrf_token(&AccessToken::new(&"a".repeat(64)).unwrap())
        );
        let csrf = Csrf(token.clone());
        assert!(csrf.check(Some(&token)));
        assert!(!csrf.check(Some(&authorizer_csrf_token(&a, &bob))));
        assert!(!csrf.check(None));
        assert!(!csrf.check(Some("")));
    }

    #[test]
    fn a_csrf_key_is_long_and_redacted_and_a_principal_needs_a_sub() {
        assert!(CsrfKey::new(&SecretString::from("short".to_owned())).is_err());
        assert!(CsrfKey::new(&SecretString::from(format!("  {}  ", "x".repeat(20)))).is_err());
        assert_eq!(format!("{:?}", key(&"k".repeat(32))), "CsrfKey([redacted])");
        assert_eq!(Principal::from_claims(|_| None), None);
        assert_eq!(Principal::from_claims(|_| Some("  ")), None);
        assert_eq!(
            Principal::from_claims(|c| (c == "sub").then_some("u-1")),
            Some(Principal {
                sub: "u-1".to_owned(),
                ..Principal::default()
            })
        );
    }

    #[test]
    fn the_allow_rule_reads_api_gateways_claim_strings_and_needs_every_list_it_gives() {
        let claims = [
            ("sub", "u-1"),
            ("email", "U-1@Example.COM"),
            ("email_verified", "true"),
            ("cognito:groups", "[admins ops]"),
            ("scope", "openid hookledger/console"),
        ];
        let principal =
            Principal::from_claims(|name| claims.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
                .unwrap();
        assert_eq!(
            principal.verified_email_domain.as_deref(),
            Some("example.com")
        );
        assert_eq!(principal.groups, ["admins", "ops"]);
        assert_eq!(principal.scopes, ["openid", "hookledger/console"]);
        let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let allow =
            |scopes: &[&str], subjects: &[&str], domains: &[&str], groups: &[&str]| ConsoleAllow {
                scopes: list(scopes),
                subjects: list(subjects),
                email_domains: list(domains),
                groups: list(groups),
            };
        assert!(
            !principal.admitted_by(&ConsoleAllow::default()),
            "no rule admits no one"
        );
        assert!(principal.admitted_by(&allow(&[], &[], &["example.com"], &["ops"])));
        assert!(principal.admitted_by(&allow(&["hookledger/console"], &["u-1"], &[], &[])));
        assert!(!principal.admitted_by(&allow(&[], &[], &["example.com"], &["billing"])));
        assert!(!principal.admitted_by(&allow(&["admin"], &[], &[], &[])));
        assert!(!principal.admitted_by(&allow(&[], &["u-2"], &[], &[])));
        assert!(!principal.admitted_by(&allow(&[], &[], &["ample.com"], &[])));
        let unverified = Principal::from_claims(|name| match name {
            "sub" => Some("u-1"),
            "email" => Some("u-1@example.com"),
            _ => None,
        })
        .unwrap();
        assert_eq!(unverified.verified_email_domain, None);
        assert!(!unverified.admitted_by(&allow(&[], &[], &["example.com"], &[])));
    }
}
