//! Who may use the console: the access token (random per start unless given), the cookie it
//! becomes, and the CSRF token of the forms that change something.
//!
//! - `?token=TOKEN` on any route: checked, then an `HttpOnly; SameSite=Strict; Path=/` cookie
//!   [`COOKIE`] and a 303 to the same URL without the token (so it leaves the address bar and
//!   the history).
//! - Afterwards the cookie, or `Authorization: Bearer TOKEN`.
//! - Anything else: 401 with a short page saying how to get in.
//! - POSTs also carry [`csrf_token`] in a hidden field `csrf` ([`check_csrf`]): an HMAC-SHA256
//!   of the label [`CSRF_LABEL`] keyed by the access token, so a page of another origin cannot
//!   forge one. Every comparison is constant-time.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

use crate::AppState;

/// The cookie holding the access token after the first visit.
pub const COOKIE: &str = "hookledger_console";

/// The query parameter of the first visit.
pub const TOKEN_PARAM: &str = "token";

/// What the CSRF token signs (with the access token as the key).
pub const CSRF_LABEL: &[u8] = b"hookledger console csrf v1";

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

/// The token a request carries: the cookie, or `Authorization: Bearer`.
fn carried(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='));
    bearer.or(cookie)
}

/// The middleware in front of every route (see the module's docs).
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let token = &state.config.token;
    let query = request.uri().query().unwrap_or("");
    let given = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == TOKEN_PARAM)
        .map(|(_, value)| value.into_owned());
    if let Some(given) = given {
        if !token.matches(&given) {
            return unauthorized();
        }
        let rest: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .filter(|(name, _)| name != TOKEN_PARAM)
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        let mut location = request.uri().path().to_owned();
        if !rest.is_empty() {
            location.push('?');
            location.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(rest)
                    .finish(),
            );
        }
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            token.expose()
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
            _ => return unauthorized(),
        }
    }
    match carried(request.headers()) {
        Some(given) if token.matches(given) => next.run(request).await,
        _ => unauthorized(),
    }
}

/// 401 with a page saying how to get in.
fn unauthorized() -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "hookledger console: sign in" } }
            body {
                h1 { "This console needs its access token" }
                p {
                    "Open the URL that " code { "hookledger console" }
                    " printed when it started (it ends in " code { "?token=..." }
                    "), or send " code { "Authorization: Bearer TOKEN" } "."
                }
            }
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
    fn the_cookie_or_the_bearer_header_carries_the_token() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("other=1; hookledger_console=abc"),
        );
        assert_eq!(carried(&headers), Some("abc"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer xyz"),
        );
        assert_eq!(carried(&headers), Some("xyz"));
    }
}
