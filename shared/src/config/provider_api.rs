//! The providers' APIs that replay and the handlers call: a source's [`ProviderApi`] (base URL
//! and key), the providers' public base URLs, and where a credential may be sent
//! ([`url_may_carry_credentials`], for targets' URLs too).

use secrecy::SecretString;

use super::github_hook::GITHUB_API_BASE_URL;
use hookledger_verify::Scheme;

/// A provider API the handlers may call (e.g. to re-fetch an object on an ordering tie).
#[derive(Debug, Clone)]
pub struct ProviderApi {
    /// Base URL without a trailing slash, e.g. `https://api.stripe.com`.
    pub base_url: String,
    /// The API key; never logged.
    pub key: SecretString,
}

/// Stripe's API base URL.
pub const STRIPE_API_BASE_URL: &str = "https://api.stripe.com";

/// Paddle Billing's API base URL (live; the sandbox is `https://sandbox-api.paddle.com`).
pub const PADDLE_API_BASE_URL: &str = "https://api.paddle.com";

/// The provider's public API base URL for `scheme`, when it has one replay or the handlers use.
pub fn default_api_base_url(scheme: Scheme) -> Option<&'static str> {
    match scheme {
        Scheme::Stripe => Some(STRIPE_API_BASE_URL),
        Scheme::Paddle => Some(PADDLE_API_BASE_URL),
        Scheme::Github => Some(GITHUB_API_BASE_URL),
        _ => None,
    }
}

/// Whether replay and the handlers may send a credential to `url`: `https://` anywhere, plain
/// `http://` only to the loopback host (tests and local fakes), so a key never crosses a
/// network in clear text.
pub(crate) fn url_may_carry_credentials(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(parsed) => match parsed.scheme() {
            "https" => parsed.host().is_some(),
            "http" => parsed
                .host_str()
                .is_some_and(crate::loopback::is_loopback_host),
            _ => false,
        },
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::error_of;

    #[test]
    fn an_api_base_url_is_https_or_loopback_http_only() {
        for allowed in [
            "https://api.stripe.com",
            "https://sandbox-api.paddle.com/",
            "http://127.0.0.1:9/",
            "http://localhost:8080",
            "http://[::1]:1",
        ] {
            assert!(url_may_carry_credentials(allowed), "{allowed}");
        }
        for refused in [
            "http://api.stripe.com",
            "http://10.0.0.5",
            "ftp://api.stripe.com",
            "api.stripe.com",
            "https://",
        ] {
            assert!(!url_may_carry_credentials(refused), "{refused}");
        }
        let json = r#"[{"name": "s", "scheme": "stripe", "secrets": ["whsec_x"],
                         "api_key": "rk_1", "api_base_url": "http://stripe.example.com"}]"#;
        assert!(error_of(json).contains("https://"), "{}", error_of(json));
    }
}
